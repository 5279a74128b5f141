//! The core's misses: what it looks up in its caches and, on a miss, asks Python for (the
//! observations, a broker's candidates, an action's outcomes, a map's result).

use super::trip::Trip;
use super::{Cand, Core, Obs};
use crate::tables::{Entry, Key, Outs, Row, SCRATCH, StepCache};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// What Python's `described` says of a new component (checker/core/native_search.py): serial,
/// leader, alive, stalled, applied epoch, fingerprint, its ids in the verdicts' views.
type Described = (u32, i32, bool, bool, u32, u64, Vec<u32>);

impl Core {
    /// The observe cache's key, as checker/cache/fast.py observe_key: the controller, the ghost,
    /// each broker that serves reads or that the controller names leader (or that a wide
    /// observation reads), then the wide parts past the brokers; serial + 1, 0 for none.
    /// A call to the Python side; then what it interned meanwhile is described to the loop
    /// (its `pending` list: Python cannot call back into the core while the core calls it).
    pub(super) fn call<'py, A: pyo3::call::PyCallArgs<'py>>(
        &mut self,
        py: Python<'py>,
        name: &str,
        args: A,
    ) -> PyResult<Py<PyAny>> {
        let got = self.model.call_method1(py, name, args)?;
        self.sync(py)?;
        Ok(got)
    }

    pub(super) fn sync(&mut self, py: Python<'_>) -> PyResult<()> {
        let pending = self.pending.bind(py).clone();
        if pending.is_empty() {
            return Ok(()); // the common case, with no conversion
        }
        let rows: Vec<Described> = pending.extract()?;
        for (serial, leader, alive, stalled, applied, fp, ids) in rows {
            self.attrs.set(serial, leader, alive, stalled, applied);
            self.ids.learn(serial, &ids);
            let s = serial as usize;
            if self.comp_fp.len() <= s {
                self.comp_fp.resize(s + 1, 0);
            }
            self.comp_fp[s] = fp;
            self.by_fp.insert(fp, serial);
        }
        pending.call_method0("clear")?;
        Ok(())
    }

    pub(super) fn observe_key(&self, comps: &[u32]) -> Key {
        let mut k = Key::EMPTY;
        let leader = self.attrs.leader[comps[0] as usize];
        k[0] = comps[0];
        k[1] = comps[self.g()];
        for b in 1..=self.n {
            let x = comps[b];
            let keep =
                b as i32 == leader || self.wide.contains(&(b as u8)) || self.attrs.serves(x, b);
            k[b + 1] = if keep { x + 1 } else { 0 };
        }
        let mut at = self.n + 2;
        for &p in &self.wide {
            if p as usize > self.n {
                k[at] = comps[p as usize];
                at += 1;
            }
        }
        k
    }

    pub(super) fn observed(&mut self, py: Python<'_>, comps: &[u32]) -> PyResult<(Key, Obs)> {
        let key = self.observe_key(comps);
        self.lookups.2 += 1;
        if let Some(o) = self.observe.get(&key) {
            return Ok((key, *o));
        }
        self.misses.2 += 1;
        let got = self.call(py, "observe", (PyTuple::new(py, comps)?,))?;
        let (ghost, delta, wide): (u32, u64, Option<Vec<u8>>) = got.extract(py)?;
        let mut key = key;
        if let Some(mut w) = wide {
            w.sort_unstable();
            if w != self.wide {
                self.wide = w;
                self.observe.clear();
                key = self.observe_key(comps);
            }
        }
        let o = Obs {
            ghost,
            delta,
            quiet: false,
            quiet_gen: 0,
        };
        self.bound_observations();
        self.observe.insert(key, o);
        Ok((key, o))
    }

    /// Broker b's candidates: where they start in the candidates arena, and how many.
    pub(super) fn candidates(
        &mut self,
        py: Python<'_>,
        b: usize,
        comps: &[u32],
    ) -> PyResult<(u32, u32)> {
        let key = [comps[b], comps[0], comps[self.n + 2]];
        self.lookups.0 += 1;
        if let Some(c) = self.cand_caches[b].get(&key) {
            return Ok(*c);
        }
        self.misses.0 += 1;
        let got = self.call(py, "candidates", (b, PyTuple::new(py, comps)?))?;
        #[allow(clippy::type_complexity)]
        let rows: Vec<(u32, u32, u32, Option<Vec<Row>>, bool)> = got.extract(py)?;
        let start = self.cands.len() as u32;
        for (action, kind, cache, fixed, trip) in rows {
            let fixed = fixed.map(|f| self.arena.add(f));
            self.cands.push(Cand {
                action,
                kind,
                cache,
                fixed,
                trip,
            });
            while self.steps.len() <= cache as usize {
                self.steps.push(StepCache::default());
                self.trips.push(Trip::default());
            }
        }
        let got = (start, self.cands.len() as u32 - start);
        self.cand_caches[b].insert(key, got);
        Ok(got)
    }

    /// An action's outcomes on the current state, from its step cache or, on a miss, from
    /// Python, which says on which positions to keep them.
    pub(super) fn outcomes(
        &mut self,
        py: Python<'_>,
        cand: &Cand,
        comps: &[u32],
        parts: &[u32],
    ) -> PyResult<Outs> {
        if let Some(f) = cand.fixed {
            return Ok(f);
        }
        self.lookups.1 += 1;
        let entry = self.steps[cand.cache as usize].get(parts).copied();
        let entry = match entry {
            Some(e) => e,
            None if cand.trip => {
                self.misses.1 += 1;
                return self.round_trip(py, cand, comps, parts);
            }
            None => {
                self.misses.1 += 1;
                let got = self.call(py, "outcome", (cand.action, PyTuple::new(py, comps)?))?;
                #[allow(clippy::type_complexity)]
                let (top, extra, outs, maps): (
                    Vec<u8>,
                    Option<Vec<u8>>,
                    Vec<Row>,
                    Option<Vec<(u32, u32)>>,
                ) = got.extract(py)?;
                let o = self.arena.add(outs);
                let e = match maps {
                    None => Entry::Leaf(o),
                    Some(m) => Entry::Mapped(o, self.arena.add_maps(m)),
                };
                self.steps[cand.cache as usize].put(parts, top, extra, e);
                e
            }
        };
        match entry {
            Entry::Leaf(o) => Ok(o),
            Entry::Mapped(o, m) => self.apply(py, o, m, comps),
        }
    }

    /// A mapped outcome on this state (checker/cache/outcomes.py Outcomes.apply): each position its
    /// map covers gets the map's result for the component there, memoised per serial. The
    /// results go to the scratch arena, marked SCRATCH: only this state's cursor reads them.
    pub(super) fn apply(
        &mut self,
        py: Python<'_>,
        o: Outs,
        m: u32,
        comps: &[u32],
    ) -> PyResult<Outs> {
        let mut made = Vec::with_capacity(o.1 as usize);
        for i in 0..o.1 {
            let held = self.arena.outs[(o.0 + i) as usize];
            let mut changes = self.arena.changes(&held).to_vec();
            let (mut delta, mut mask) = (held.delta, held.mask);
            let (fun, positions) = self.arena.maps[(m + i) as usize];
            for j in 1..=self.n {
                if positions & (1 << j) == 0 {
                    continue;
                }
                let from = comps[j];
                let key = (fun, j as u8, from);
                let (to, d) = match self.memo.get(&key) {
                    Some(v) => *v,
                    None => {
                        let v: (u32, u64) = self.call(py, "mapped", (fun, j, from))?.extract(py)?;
                        self.memo.insert(key, v);
                        v
                    }
                };
                if to != from {
                    changes.push((j as u8, to));
                    delta ^= d;
                    mask |= 1 << j;
                }
            }
            changes.sort_unstable_by_key(|c| c.0);
            made.push((changes, delta, mask));
        }
        let o = self.scratch.add(made);
        Ok(Outs(o.0 | SCRATCH, o.1))
    }

    /// The quiet test of a step, from its groups' remembered verdicts when every group is
    /// known true on the components it reads in the two states, else asked of Python.
    pub(super) fn quiet(
        &mut self,
        py: Python<'_>,
        before: &[u32],
        after: &[u32],
    ) -> PyResult<bool> {
        if self.quiet_known.good(before, after, &self.ids) {
            return Ok(true);
        }
        let q: bool = self
            .call(
                py,
                "quiet",
                (PyTuple::new(py, before)?, PyTuple::new(py, after)?),
            )?
            .extract(py)?;
        if q {
            self.quiet_known.mark(before, after, &self.ids);
        }
        Ok(q)
    }
}
