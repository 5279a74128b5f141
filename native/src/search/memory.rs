//! Where the core's memory goes, table by table, in the bytes each has claimed (crate::bytes):
//! the bench reports it beside the process's peak resident size (`core_tables_mib`).

use super::{Core, trip};
use crate::bytes::{of_map, of_vec};
use crate::tables::StepCache;

/// The observations may claim a quarter of the core's bytes; the outcomes and the caches
/// pointing into them, the rest.
const OBSERVE_PART: usize = 4;
/// States begun between two counts of the outcomes' bytes (a count walks every step cache).
const COUNT_EVERY: u64 = 1 << 14;

impl Core {
    /// Empty the caches that point into the outcomes arena, and the arena (begin() calls it
    /// between two states, when no cursor holds an index into it).
    fn forget(&mut self) {
        for c in &mut self.steps {
            *c = StepCache::default();
        }
        for t in &mut self.trips {
            *t = trip::Trip::default();
        }
        for c in &mut self.cand_caches {
            c.clear();
        }
        self.cands.clear();
        self.memo.clear();
        self.arena.clear();
    }

    /// The bytes `limit` bounds, but the observations': the outcomes in use and the caches
    /// that point into them.
    fn outcome_bytes(&self) -> usize {
        self.arena.used() + self.step_bytes() + self.candidate_bytes() + of_map(&self.memo)
    }

    /// The step caches, a RoundTrip's halves with them.
    fn step_bytes(&self) -> usize {
        let steps: usize = self.steps.iter().map(|s| s.nbytes()).sum();
        steps + self.trips.iter().map(|t| t.nbytes()).sum::<usize>()
    }

    fn candidate_bytes(&self) -> usize {
        self.cand_caches.iter().map(of_map).sum::<usize>() + of_vec(&self.cands)
    }

    /// Before an observation is stored: the table is emptied rather than grown past its share
    /// (it keeps its buckets, which the next ones fill).
    pub(super) fn bound_observations(&mut self) {
        let full = self.observe.len() >= self.observe.capacity();
        if full && 2 * of_map(&self.observe) > self.limit / OBSERVE_PART {
            self.observe.clear();
        }
    }

    /// Keep the outcomes and the caches pointing into them within their share of `limit`,
    /// between two states (no cursor holds an index into the outcomes then): past it they are
    /// emptied, and refill from Python's caches.
    pub(super) fn bound(&mut self) {
        let observe = self.limit / OBSERVE_PART;
        self.begun += 1;
        if self.begun % COUNT_EVERY == 0 && self.outcome_bytes() > self.limit - observe {
            self.forget();
            self.forgets += 1;
        }
    }

    pub(super) fn tables(&self) -> Vec<(&'static str, usize)> {
        let (mine, frontier, parcels) = self.part.as_ref().map_or((0, 0, 0), |p| p.nbytes());
        let attrs = &self.attrs;
        let comps = of_vec(&attrs.leader)
            + of_vec(&attrs.alive)
            + of_vec(&attrs.stalled)
            + of_vec(&attrs.applied);
        vec![
            ("visited", self.visited.nbytes()),
            ("paths", of_vec(&self.parents) + of_vec(&self.indices)),
            ("queue", self.queue.capacity() * 4),
            ("level kept", mine),
            ("frontier", frontier),
            ("parcels", parcels),
            ("steps", self.step_bytes()),
            ("candidates", self.candidate_bytes()),
            ("observations", of_map(&self.observe)),
            ("outcomes", self.arena.nbytes() + of_map(&self.memo)),
            ("verdicts", self.verdicts.as_ref().map_or(0, |v| v.nbytes())),
            ("quiet verdicts", self.quiet_known.nbytes()),
            (
                "components",
                comps + of_vec(&self.comp_fp) + of_map(&self.by_fp) + self.ids.nbytes(),
            ),
        ]
    }
}
