//! The search's loop over states, for one process (checker/core/native_search.py `_search`)
//! and for a --workers part (checker/core/part.py): the core takes each state from its queue
//! (or the part's frontier, in key order) and ends its expansion itself, and returns to Python
//! only for what Python must do: test a new state, check a step the quiet test does not pass,
//! read the clock every few states, stop at the state limit.

use super::Core;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

/// What `run` returns between two states: every `every`-th state expanded (Python reports
/// progress and reads the clock), or a state that reached the state limit.
const TICK: u8 = 0;
const CAP: u8 = 1;

impl Core {
    pub(super) fn run_states<'py>(
        &mut self,
        py: Python<'py>,
        cap: Option<usize>,
        every: u64,
        ok: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if let Some((changed, comps)) = self.tested.take()
            && ok
            && let Some(v) = self.verdicts.as_mut()
        {
            v.mark(changed, &comps[..], &self.ids);
        }
        loop {
            let Some(mut cur) = self.cursor.take() else {
                if !self.pop(py)? {
                    return Ok(None);
                }
                continue;
            };
            if let Some((new, index, fp, changed, child, node)) = self.advance(py, &mut cur)? {
                let before = if new {
                    None
                } else {
                    let comps = PyTuple::new(py, &cur.comps[..self.n + 3])?;
                    Some(match &self.part {
                        None => comps.into_any(),
                        Some(p) => (PyBytes::new(py, &p.key), comps)
                            .into_pyobject(py)?
                            .into_any(),
                    })
                };
                let (at, depth) = (cur.node, cur.depth);
                self.cursor = Some(cur);
                let event = (new, index, fp, changed, child, node, at, depth, before);
                return Ok(Some(event.into_pyobject(py)?.into_any()));
            }
            self.expanded += 1;
            if self.expanded % every == 0 {
                return Ok(Some(TICK.into_pyobject(py)?.into_any()));
            }
            if cap.is_some_and(|c| self.visited.len() >= c) {
                return Ok(Some(CAP.into_pyobject(py)?.into_any()));
            }
        }
    }

    /// Set the cursor on the next state of the queue, or of a part's frontier; false when
    /// there is none.
    fn pop(&mut self, py: Python<'_>) -> PyResult<bool> {
        if let Some(part) = self.part.as_mut() {
            let Some((fp, comps)) = part.take() else {
                return Ok(false);
            };
            self.begin(py, comps, fp, 0, 0)?;
            return Ok(true);
        }
        if self.queue.is_empty() {
            return Ok(false);
        }
        let rec: Vec<u32> = self.queue.drain(..self.width).collect();
        let base = rec[2] as u64 | (rec[3] as u64) << 32;
        self.begin(py, rec[4..].to_vec(), base, rec[0] as u64, rec[1])?;
        Ok(true)
    }
}
