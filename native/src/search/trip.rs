//! A RoundTrip's halves (spec/rpc.py: Fetch), looked up apart: far fewer distinct halves occur
//! than whole exchanges. The port of checker/cache/outcomes.py Outcomes._round_trip: Python is
//! asked for a half only when the core's cache of it misses, and the whole exchange is then
//! stored in the action's step cache, keyed on what its three halves were keyed on.

use super::{Cand, Core};
use crate::tables::{Entry, Keyed, Out, Outs, Row, mask_of};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// No message: the sender sends nothing in this state, or the other side refuses.
const NONE: u32 = u32::MAX;

/// Python's id for a message, or NONE for its -1.
fn message(id: i64) -> u32 {
    u32::try_from(id).unwrap_or(NONE)
}

/// An action's halves: the request its sender makes; the other side's outcome and response;
/// the sender's outcome on the response. The handler's and the receiver's caches hold the
/// message (Python's id for it) at the position past the parts.
#[derive(Default)]
pub struct Trip {
    send: Keyed<u32>,
    handle: Keyed<(Outs, u32)>,
    receive: Keyed<Outs>,
}

impl Trip {
    pub(super) fn nbytes(&self) -> usize {
        self.send.nbytes() + self.handle.nbytes() + self.receive.nbytes()
    }
}

impl Core {
    /// The outcomes of a RoundTrip on a miss of its step cache (one outcome, or none when
    /// nothing is sent), stored there on the positions its halves were keyed on.
    pub(super) fn round_trip(
        &mut self,
        py: Python<'_>,
        cand: &Cand,
        comps: &[u32],
        parts: &[u32],
    ) -> PyResult<Outs> {
        let c = cand.cache as usize;
        let arg = parts.len(); // the message's position in a half's key
        self.halves.0 += 1;
        let (request, mut reads) = match self.trips[c].send.find(parts) {
            Some((&r, mask)) => (r, mask),
            None => {
                self.halves_missed.0 += 1;
                let got = self.call(py, "send", (cand.action, PyTuple::new(py, comps)?))?;
                let (read, request): (Vec<u8>, i64) = got.extract(py)?;
                let request = message(request);
                let mask = mask_of(&read);
                self.trips[c].send.record(parts, mask, request);
                (request, mask)
            }
        };
        let whole = if request == NONE {
            Outs(self.arena.outs.len() as u32, 0)
        } else {
            let mut with = parts.to_vec();
            with.push(request);
            self.halves.1 += 1;
            let ((first, response), mask) = match self.trips[c].handle.find(&with) {
                Some((&v, mask)) => (v, mask),
                None => {
                    self.halves_missed.1 += 1;
                    let got = self.call(
                        py,
                        "handle",
                        (cand.action, PyTuple::new(py, comps)?, request),
                    )?;
                    let (read, row, response): (Vec<u8>, Option<Row>, i64) = got.extract(py)?;
                    let first = self.arena.add(row.into_iter().collect()); // refused: none
                    let response = message(response);
                    let mask = mask_of(&read) | 1 << arg;
                    self.trips[c].handle.record(&with, mask, (first, response));
                    ((first, response), mask)
                }
            };
            reads |= mask;
            if response == NONE {
                return self.store_trip(c, parts, reads & !(1 << arg), first); // refused: no successor
            }
            let first = self.arena.outs[first.0 as usize];
            let mut mid = comps.to_vec();
            for &(i, x) in self.arena.changes(&first) {
                mid[i as usize] = x;
            }
            let mut with = self.parts_of(&mid);
            with.push(response);
            self.halves.2 += 1;
            let (then, mask) = match self.trips[c].receive.find(&with) {
                Some((&v, mask)) => (v, mask),
                None => {
                    self.halves_missed.2 += 1;
                    let got = self.call(
                        py,
                        "receive",
                        (cand.action, PyTuple::new(py, &mid)?, response),
                    )?;
                    let (read, row): (Vec<u8>, Row) = got.extract(py)?;
                    let then = self.arena.add(vec![row]);
                    let mask = mask_of(&read) | 1 << arg;
                    self.trips[c].receive.record(&with, mask, then);
                    (then, mask)
                }
            };
            reads |= mask;
            let then = self.arena.outs[then.0 as usize];
            self.joined(first, then)
        };
        self.store_trip(c, parts, reads & !(1 << arg), whole)
    }

    /// The whole exchange's outcomes, stored in its step cache on the positions its halves read.
    fn store_trip(&mut self, c: usize, parts: &[u32], reads: u32, whole: Outs) -> PyResult<Outs> {
        self.steps[c].record(parts, reads, Entry::Leaf(whole));
        Ok(whole)
    }

    /// Two outcomes one after the other, as one, at the end of the arena (checker/cache/outcomes.py
    /// joined): XOR deltas compose; where both change one component, the later change is applied.
    fn joined(&mut self, first: Out, then: Out) -> Outs {
        let start = self.arena.outs.len() as u32;
        if then.len == 0 {
            self.arena.outs.push(first);
        } else if first.len == 0 {
            self.arena.outs.push(then);
        } else {
            let mut changes = self.arena.changes(&first).to_vec();
            changes.extend_from_slice(self.arena.changes(&then));
            self.arena
                .push(&changes, first.delta ^ then.delta, first.mask | then.mask);
        }
        Outs(start, 1)
    }
}
