//! The loop over one state's transitions: each candidate's outcomes, from the caches or on a
//! miss from Python (src/search/misses.rs), screened by the observation and the quiet test,
//! and the new states added to the visited set and the queue.

use super::{Core, Cursor};
use crate::tables::{Arena, Key, Outs, SCRATCH};
use pyo3::prelude::*;

/// A cache key of these components (the unused places u32::MAX).
pub(super) fn key_from(comps: &[u32]) -> Key {
    let mut k = Key::EMPTY;
    k[..comps.len()].copy_from_slice(comps);
    k
}

impl Core {
    /// The ghost's position among the components.
    pub(super) fn g(&self) -> usize {
        self.n + 1
    }

    /// The arena a list of outcomes is in, and where it starts there.
    fn holding(&self, outs: Outs) -> (&Arena, u32) {
        if outs.0 & SCRATCH != 0 {
            (&self.scratch, outs.0 & !SCRATCH)
        } else {
            (&self.arena, outs.0)
        }
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn advance(
        &mut self,
        py: Python<'_>,
        cur: &mut Cursor,
    ) -> PyResult<Option<(bool, i64, u64, u32, Vec<u32>, i64)>> {
        let g = self.g();
        let w = self.n + 3; // components: the controller, the brokers, the ghost, the budget
        let kept: u32 = 1 | 1 << g;
        loop {
            if cur.oi >= cur.outs.1 {
                // The next candidate, of this broker or the next.
                while cur.ci >= cur.cands.1 {
                    cur.b += 1;
                    if cur.b > self.n {
                        return Ok(None);
                    }
                    cur.cands = self.candidates(py, cur.b, &cur.comps[..w])?;
                    cur.ci = 0;
                }
                let cand = self.cands[(cur.cands.0 + cur.ci) as usize];
                cur.ci += 1;
                cur.outs = self.outcomes(py, &cand, &cur.comps[..w], &cur.parts)?;
                cur.oi = 0;
                cur.kind = cand.kind;
                continue;
            }
            let (arena, start) = self.holding(cur.outs);
            let o = arena.outs[(start + cur.oi) as usize];
            cur.oi += 1;
            cur.index += 1;
            let changes = arena.changes(&o);
            let observed = o.mask & cur.touch != 0
                || changes
                    .iter()
                    .any(|&(i, x)| (i as usize) < g && i > 0 && self.attrs.serves(x, i as usize));
            let mut new = cur.comps;
            for &(i, x) in changes {
                new[i as usize] = x;
            }
            let hit = if observed {
                None
            } else {
                self.observe.get(&cur.same).copied()
            };
            let (okey, seen) = match hit {
                Some(o) => {
                    self.lookups.2 += 1;
                    (cur.same, o)
                }
                None => self.observed(py, if observed { &new[..w] } else { &cur.comps[..w] })?, // a widened key is computed anew
            };
            let fp = cur.base ^ o.delta ^ seen.delta;
            self.fired[cur.kind as usize] += 1;
            let keeps = self.leader_only && o.mask & kept == 0;
            let settled = keeps && seen.quiet_gen == self.quiet_gen;
            new[g] = seen.ghost;
            let changed = if seen.ghost != cur.comps[g] {
                o.mask | 1 << g
            } else {
                o.mask
            };
            if settled && seen.quiet {
                if fp == cur.base || !self.visited.add(fp) {
                    continue;
                }
            } else {
                let q = self.quiet(py, &cur.comps[..w], &new[..w])?;
                if keeps && let Some(entry) = self.observe.get_mut(&okey) {
                    entry.quiet = q;
                    entry.quiet_gen = self.quiet_gen;
                }
                if !q {
                    return Ok(Some((false, cur.index, fp, changed, new[..w].to_vec(), -1)));
                }
                if !self.visited.add(fp) {
                    continue;
                }
            }
            let ids = &self.ids;
            let good = self
                .verdicts
                .as_mut()
                .is_some_and(|v| v.good(changed, &new[..], ids));
            if !good {
                self.tested = Some((changed, new));
            }
            if !self.keep {
                if good && self.part.is_some() {
                    self.route_child(py, fp, cur.index, &new[..w], 0)?; // no Python test: routed here
                    continue;
                }
                let test = if good { 0 } else { changed };
                return Ok(Some((true, cur.index, fp, test, new[..w].to_vec(), -1)));
            }
            let node = self.add_node(cur.node as u32, cur.index);
            self.push(node, cur.depth + 1, fp, &new[..w]);
            if good {
                continue;
            }
            return Ok(Some((
                true,
                cur.index,
                fp,
                changed,
                new[..w].to_vec(),
                node as i64,
            )));
        }
    }

    pub(super) fn push(&mut self, node: u32, depth: u32, fp: u64, comps: &[u32]) {
        self.queue.push_back(node);
        self.queue.push_back(depth);
        self.queue.push_back(fp as u32);
        self.queue.push_back((fp >> 32) as u32);
        self.queue.extend(comps.iter().copied());
        if depth > self.max_depth {
            self.max_depth = depth;
        }
    }

    pub(super) fn add_node(&mut self, parent: u32, index: i64) -> u32 {
        let node = self.parents.len() as u32;
        self.parents.push(parent);
        self.indices.push(index as u16);
        node
    }

    pub(super) fn parts_of(&self, comps: &[u32]) -> Vec<u32> {
        // The key parts (checker/cache/footprint.py): the components, each broker's stalled
        // flag, then each broker's applied epoch.
        let brokers = &comps[1..=self.n];
        let mut parts = comps.to_vec();
        parts.extend(
            brokers
                .iter()
                .map(|&s| self.attrs.stalled[s as usize] as u32),
        );
        parts.extend(brokers.iter().map(|&s| self.attrs.applied[s as usize]));
        parts
    }
}
