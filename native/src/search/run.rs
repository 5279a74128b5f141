//! The search's loop over states, for one process (checker/core/native_search.py `_search`):
//! the core takes each state from its queue and ends its expansion itself, and returns to
//! Python only for what Python must do: test a new state, check a step the quiet test does
//! not pass, read the clock every few states, stop at the state limit.

use super::Core;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

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
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        // Python calls again only when the last new state it was given passed its test.
        if let Some((changed, comps)) = self.tested.take()
            && let Some(v) = self.verdicts.as_mut()
        {
            v.mark(changed, &comps[..]);
        }
        loop {
            let Some(mut cur) = self.cursor.take() else {
                if !self.pop(py)? {
                    return Ok(None);
                }
                continue;
            };
            if let Some((new, index, fp, changed, child, node)) = self.advance(py, &mut cur)? {
                let parent = if new {
                    None
                } else {
                    Some(PyTuple::new(py, &cur.comps[..self.n + 3])?)
                };
                let (at, depth) = (cur.node, cur.depth);
                self.cursor = Some(cur);
                let event = (new, index, fp, changed, child, node, at, depth, parent);
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

    /// Set the cursor on the next state of the queue; false when the queue is empty.
    fn pop(&mut self, py: Python<'_>) -> PyResult<bool> {
        if self.queue.is_empty() {
            return Ok(false);
        }
        self.sync(py)?;
        self.tested = None;
        let rec: Vec<u32> = self.queue.drain(..self.width).collect();
        let base = rec[2] as u64 | (rec[3] as u64) << 32;
        self.begin(py, rec[4..].to_vec(), base, rec[0] as u64, rec[1])?;
        Ok(true)
    }
}
