//! The state invariants' verdicts, remembered per group of parts (invariants/suite.py
//! `state_groups`): a group is the parts that read the same components, so its truth value
//! is a function of those components' serial numbers alone. A new state whose changed
//! components touch only groups already seen true on the same components passes its state
//! test without Python being asked (the search's "once per new state" call is then spared).

use crate::bytes;
use crate::tables::{Fx, KW};
use std::collections::HashSet;
use std::hash::BuildHasherDefault;

/// Per view (checker/core/views.py): a component's serial number -> the id of the values of
/// the fields the view reads of it (u32::MAX: not known yet). Components with equal ids are one
/// to every group reading them through that view. One table for the state and quiet verdicts.
#[derive(Default)]
pub struct Ids(Vec<Vec<u32>>);

impl Ids {
    /// A new component's ids, one per view (invariants/fields.py via Python's `described`).
    pub fn learn(&mut self, serial: u32, ids: &[u32]) {
        if self.0.len() < ids.len() {
            self.0.resize(ids.len(), Vec::new());
        }
        let s = serial as usize;
        for (table, &id) in self.0.iter_mut().zip(ids) {
            if table.len() <= s {
                table.resize(s + 1, u32::MAX);
            }
            table[s] = id;
        }
    }

    fn get(&self, view: usize, serial: u32) -> Option<u32> {
        let id = *self.0.get(view)?.get(serial as usize)?;
        (id != u32::MAX).then_some(id)
    }

    pub fn nbytes(&self) -> usize {
        self.0.iter().map(|t| t.capacity() * 4).sum()
    }
}

/// Components a remembered group may read; a wider group is always asked of Python.
const WIDTH: usize = 4;
type Projection = [u32; WIDTH];
type Set = HashSet<Projection, BuildHasherDefault<Fx>>;

#[derive(Default)]
pub struct Verdicts {
    /// Per group: its bitmask of component positions (bit 0 the controller, bit b broker b,
    /// bit n + 1 the ghost), the positions themselves and, per position, the view it is read
    /// through (-1: the component's serial number itself).
    groups: Vec<(u32, Vec<u8>, Vec<i32>)>,
    known: Vec<Set>,
    /// Per `changed` mask below 256 (a state's components), the groups it touches, found once.
    touched: Vec<Option<Vec<u16>>>,
    len: usize,
    limit: usize,
    /// Python's own count of tests asked (for the bench's cache rows): lookups, misses.
    pub asked: (u64, u64),
}

impl Verdicts {
    /// `masks`: one per group; `limit`: projections held before all are forgotten (a cache:
    /// forgetting costs Python calls, never a verdict).
    /// `views`: per group, per position of its mask, the view it is read through (None: the
    /// serial numbers for every group).
    pub fn new(masks: &[u32], views: Option<&[Vec<i32>]>, limit: usize) -> Self {
        let groups: Vec<(u32, Vec<u8>, Vec<i32>)> = masks
            .iter()
            .enumerate()
            .map(|(g, &m)| {
                let positions: Vec<u8> = (0..32u8).filter(|&i| m & (1 << i) != 0).collect();
                let through = match views.and_then(|v| v.get(g)) {
                    Some(v) if v.len() == positions.len() => v.clone(),
                    _ => vec![-1; positions.len()],
                };
                (m, positions, through)
            })
            .collect();
        let known = groups.iter().map(|_| Set::default()).collect();
        Verdicts {
            groups,
            known,
            touched: vec![None; 256],
            len: 0,
            limit,
            asked: (0, 0),
        }
    }

    fn projection(&self, g: usize, comps: &[u32], ids: &Ids) -> Option<Projection> {
        let (_, positions, through) = &self.groups[g];
        if positions.len() > WIDTH {
            return None;
        }
        let mut p = [u32::MAX; WIDTH];
        for ((slot, &i), &v) in p.iter_mut().zip(positions).zip(through) {
            let c = comps[i as usize];
            // A component without its id (not described yet): asked of Python, never remembered.
            *slot = if v < 0 { c } else { ids.get(v as usize, c)? };
        }
        Some(p)
    }

    /// The groups reading a `changed` component: found once per mask below 256 and held; taken
    /// out while read (`put_back` returns them), so neither reader copies them.
    fn take_touched(&mut self, changed: u32) -> Vec<u16> {
        let groups = &self.groups;
        let find = || -> Vec<u16> {
            (0..groups.len() as u16)
                .filter(|&g| groups[g as usize].0 & changed != 0)
                .collect()
        };
        match self.touched.get_mut(changed as usize) {
            Some(slot) => slot.take().unwrap_or_else(find),
            None => find(),
        }
    }

    fn put_back(&mut self, changed: u32, touched: Vec<u16>) {
        if let Some(slot) = self.touched.get_mut(changed as usize) {
            *slot = Some(touched);
        }
    }

    fn known_on(&self, g: u16, comps: &[u32], ids: &Ids) -> bool {
        let g = g as usize;
        self.projection(g, comps, ids).is_some_and(|p| self.known[g].contains(&p))
    }

    /// Whether every group reading a `changed` component is known true on these components.
    pub fn good(&mut self, changed: u32, comps: &[u32], ids: &Ids) -> bool {
        self.asked.0 += 1;
        let ok = if (changed as usize) < self.touched.len() {
            let touched = self.take_touched(changed);
            let ok = touched.iter().all(|&g| self.known_on(g, comps, ids));
            self.put_back(changed, touched);
            ok
        } else {
            // A mask past the table's (more than 5 brokers): no list is built.
            (0..self.groups.len() as u16)
                .all(|g| self.groups[g as usize].0 & changed == 0 || self.known_on(g, comps, ids))
        };
        if !ok {
            self.asked.1 += 1;
        }
        ok
    }

    /// Python found the parts reading a `changed` component all true on these components.
    pub fn mark(&mut self, changed: u32, comps: &[u32], ids: &Ids) {
        if self.len > self.limit {
            self.known.iter_mut().for_each(|k| k.clear());
            self.len = 0;
        }
        let touched = self.take_touched(changed);
        for &g in &touched {
            let g = g as usize;
            if let Some(p) = self.projection(g, comps, ids)
                && self.known[g].insert(p)
            {
                self.len += 1;
            }
        }
        self.put_back(changed, touched);
    }

    pub fn entries(&self) -> usize {
        self.len
    }

    pub fn nbytes(&self) -> usize {
        self.known.iter().map(bytes::of_set).sum()
    }
}

/// The quiet test's verdicts per group of its conjuncts (invariants/suite.py quiet_step's
/// `groups`), on the components of a step's two states laid end to end (the state before,
/// then the state after): one set for a step that changes the controller, one for a step
/// that keeps it, where Z3 folded some conjuncts to true and others to fewer components.
pub struct QuietVerdicts([Verdicts; 2]);

/// Per group of each of the quiet test's two sets, per position, its view (-1: by serial).
pub type QuietViews = (Vec<Vec<i32>>, Vec<Vec<i32>>);

impl QuietVerdicts {
    /// `groups`: (for any step, for a step that keeps the controller); `views`: the same
    /// pair's views per group and position (checker/core/views.py), or None: by serial.
    pub fn new(groups: &(Vec<u32>, Vec<u32>), views: Option<&QuietViews>, limit: usize) -> Self {
        // A conjunct that reads nothing is constant: asked of Python every time (every
        // position, wider than a projection), never skipped as a group no change touches.
        let wide = |masks: &Vec<u32>| -> Vec<u32> {
            masks
                .iter()
                .map(|&m| if m == 0 { u32::MAX } else { m })
                .collect()
        };
        let groups = (wide(&groups.0), wide(&groups.1));
        QuietVerdicts([
            Verdicts::new(&groups.0, views.map(|v| &v.0[..]), limit),
            Verdicts::new(&groups.1, views.map(|v| &v.1[..]), limit),
        ])
    }

    fn pair(before: &[u32], after: &[u32]) -> ([u32; 2 * KW], usize) {
        let w = before.len();
        let mut pair = [u32::MAX; 2 * KW];
        pair[..w].copy_from_slice(before);
        pair[w..2 * w].copy_from_slice(after);
        (pair, 2 * w)
    }

    /// Whether every group is known true on the step's components.
    pub fn good(&mut self, before: &[u32], after: &[u32], ids: &Ids) -> bool {
        let (pair, len) = Self::pair(before, after);
        self.0[(before[0] == after[0]) as usize].good(u32::MAX, &pair[..len], ids)
    }

    /// Python found the step quiet: every group is true on its components.
    pub fn mark(&mut self, before: &[u32], after: &[u32], ids: &Ids) {
        let (pair, len) = Self::pair(before, after);
        self.0[(before[0] == after[0]) as usize].mark(u32::MAX, &pair[..len], ids);
    }

    /// (lookups, misses, projections held).
    pub fn nbytes(&self) -> usize {
        self.0.iter().map(Verdicts::nbytes).sum()
    }

    pub fn stats(&self) -> (u64, u64, usize) {
        let [a, b] = &self.0;
        (
            a.asked.0 + b.asked.0,
            a.asked.1 + b.asked.1,
            a.entries() + b.entries(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_good_once_every_group_its_change_touches_was_seen_true() {
        let ids = Ids::default();
        // Groups: the controller alone (mask 1); brokers 1 and 2 (mask 6).
        let mut v = Verdicts::new(&[1, 6], None, 100);
        let comps = [10, 11, 12, 13];
        assert!(!v.good(2, &comps, &ids));
        v.mark(2, &comps, &ids); // broker 1 changed: only the group of brokers 1 and 2 was tested
        assert!(v.good(2, &comps, &ids));
        assert!(v.good(4, &comps, &ids));
        assert!(
            !v.good(1, &comps, &ids),
            "the controller's group was never tested"
        );
        assert!(!v.good(2, &[10, 11, 99, 13], &ids), "another broker 2");
        assert!(v.good(8, &[0, 0, 0, 0], &ids), "a change no group reads");
        assert_eq!(v.entries(), 1);
        assert_eq!(v.asked, (6, 3));
    }

    #[test]
    fn a_group_read_through_a_view_is_known_on_equal_field_values() {
        let mut ids = Ids::default();
        // Brokers 1 and 2 (mask 6), broker 1 read through view 0, broker 2 by serial.
        let mut v = Verdicts::new(&[6], Some(&[vec![0, -1]]), 100);
        let comps = [10, 11, 12];
        assert!(!v.good(2, &comps, &ids), "broker 11 not described yet");
        v.mark(2, &comps, &ids);
        assert_eq!(v.entries(), 0, "nothing remembered without its view's id");
        ids.learn(11, &[7]);
        ids.learn(21, &[7]); // another broker, the same field values in view 0
        ids.learn(31, &[8]);
        v.mark(2, &comps, &ids);
        assert!(v.good(2, &[10, 21, 12], &ids), "equal field values");
        assert!(!v.good(2, &[10, 31, 12], &ids), "other field values");
        assert!(!v.good(2, &[10, 21, 13], &ids), "another broker 2");
    }

    #[test]
    fn past_its_limit_it_forgets_and_asks_again() {
        let ids = Ids::default();
        let mut v = Verdicts::new(&[1], None, 1);
        v.mark(1, &[1], &ids);
        v.mark(1, &[2], &ids);
        assert!(v.good(1, &[1], &ids) && v.good(1, &[2], &ids));
        v.mark(1, &[3], &ids); // over the limit: forgotten first
        assert!(!v.good(1, &[1], &ids));
        assert!(v.good(1, &[3], &ids));
    }

    #[test]
    fn a_group_wider_than_a_projection_is_never_remembered() {
        let ids = Ids::default();
        let mut v = Verdicts::new(&[0b11111], None, 10);
        v.mark(1, &[1, 2, 3, 4, 5], &ids);
        assert!(!v.good(1, &[1, 2, 3, 4, 5], &ids));
        assert_eq!(v.entries(), 0);
    }

    #[test]
    fn a_quiet_step_is_remembered_on_both_states_and_by_whether_the_controller_moved() {
        let ids = Ids::default();
        // Two components a state (controller, broker): any step reads the broker before and
        // after (mask 0b1010); a step that keeps the controller reads the broker after only.
        let mut q = QuietVerdicts::new(&(vec![0b1010], vec![0b1000]), None, 100);
        assert!(!q.good(&[1, 5], &[2, 6], &ids));
        q.mark(&[1, 5], &[2, 6], &ids);
        assert!(q.good(&[1, 5], &[3, 6], &ids), "the controller is not read");
        assert!(!q.good(&[1, 7], &[2, 6], &ids), "another broker before");
        assert!(
            !q.good(&[1, 5], &[1, 6], &ids),
            "the controller kept: the other set"
        );
        q.mark(&[1, 5], &[1, 6], &ids);
        assert!(
            q.good(&[4, 9], &[4, 6], &ids),
            "kept: only the broker after is read"
        );
        assert_eq!(q.stats(), (5, 3, 2));
    }

    #[test]
    fn a_quiet_conjunct_that_reads_nothing_is_always_asked() {
        let ids = Ids::default();
        let mut q = QuietVerdicts::new(&(vec![0], vec![0, 0b10]), None, 100);
        q.mark(&[1, 5], &[2, 6], &ids);
        q.mark(&[1, 5], &[1, 6], &ids);
        assert!(!q.good(&[1, 5], &[2, 6], &ids) && !q.good(&[1, 5], &[1, 6], &ids));
    }
}
