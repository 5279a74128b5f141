//! The core's side of a `--workers` part (src/part.rs holds the levels and parcels): each new
//! state goes to the worker that owns it, by its controller (Python says which, once per
//! controller: checker/engines/transport.py owner_key).

use super::Core;
use crate::part::Part;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

impl Core {
    pub(super) fn part_mut(&mut self) -> PyResult<&mut Part> {
        self.part
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("the core is not a --workers part"))
    }

    /// Route a successor of the state being expanded (`index`: its place among them).
    pub(super) fn route_child(
        &mut self,
        py: Python<'_>,
        fp: u64,
        index: i64,
        comps: &[u32],
        bad: u32,
    ) -> PyResult<()> {
        let controller = comps[0];
        let owner = match self.part_mut()?.owner(controller) {
            Some(o) => o,
            None => {
                let o: usize = self.call(py, "owner", (comps.to_vec(),))?.extract(py)?;
                self.part_mut()?.set_owner(controller, o);
                o
            }
        };
        let comp_fp = std::mem::take(&mut self.comp_fp);
        let part = self.part.as_mut().expect("part checked above");
        let done = part.route(owner, fp, index, comps, bad, &comp_fp);
        self.comp_fp = comp_fp;
        done.map_err(PyRuntimeError::new_err)
    }

    /// Keep what a peer sent: per state its fingerprint then its components' fingerprints
    /// (each known here: Python interned the components shipped with them), the path keys end
    /// to end, (index, bad id) of the states that break an invariant. A state this worker
    /// visited at an earlier level is dropped.
    pub(super) fn unpack_parcel(
        &mut self,
        fps: &[u8],
        keys: &[u8],
        length: usize,
        bad: &[(u32, u32)],
    ) -> PyResult<()> {
        let fps: Vec<u64> = fps
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let w = self.n + 3;
        let states = fps.len() / (w + 1);
        let mut comps = vec![0u32; w];
        let mut broken = bad.iter().peekable();
        for i in 0..states {
            let rec = &fps[i * (w + 1)..(i + 1) * (w + 1)];
            let b = match broken.peek() {
                Some(&&(j, id)) if j as usize == i => {
                    broken.next();
                    id
                }
                _ => 0,
            };
            let fp = rec[0];
            let part = self.part.as_ref().expect("unpack on a part");
            if !part.mine.contains(fp) && self.visited.contains(fp) {
                continue;
            }
            for (slot, cfp) in comps.iter_mut().zip(&rec[1..]) {
                *slot = *self.by_fp.get(cfp).ok_or_else(|| {
                    PyRuntimeError::new_err(format!(
                        "a peer sent component {cfp:#x}, never learned here"
                    ))
                })?;
            }
            let key = &keys[i * length..(i + 1) * length];
            self.part_mut()?
                .mine
                .offer(fp, key, &comps, b)
                .map_err(PyRuntimeError::new_err)?;
        }
        Ok(())
    }

    /// The level is kept: each of its states joins the visited set. (Its size, (path key,
    /// bad id) of each state that breaks an invariant.)
    #[allow(clippy::type_complexity)]
    pub(super) fn keep_mine(&mut self) -> PyResult<(usize, Vec<(Vec<u8>, u32)>)> {
        let part = self
            .part
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("not a part"))?;
        for &fp in &part.mine.fps {
            self.visited.add(fp);
        }
        let mine = &part.mine;
        let broken = (0..mine.len())
            .filter(|&i| mine.bad[i] != 0)
            .map(|i| (mine.key(i), mine.bad[i]))
            .collect();
        Ok((mine.len(), broken))
    }
}
