//! The search's inner loop: the visited set, the queue, the parent pointers and every cache
//! hit, on serial numbers only. Python is called on a miss (the spec's step functions run
//! there) and once per new state (its invariants). checker/core/native.py drives it; it is the
//! port of checker/cache/fast.py FastSuccessors.transitions for the screened breadth-first search,
//! and must give the same transitions in the same order.

use crate::part::Part;
use crate::tables::{Arena, Attributes, Key, Map, Outs, StepCache};
use crate::verdicts::{Ids, QuietVerdicts, QuietViews, Verdicts};
use crate::visited::FpSet;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::collections::VecDeque;

mod advance;
use advance::key_from;
mod memory;
mod misses;
mod route;
mod run;
mod trip;

/// One candidate of a broker: its action (Python's table), action type, step cache and the
/// outcomes its candidates' key fixes, if any.
#[derive(Clone, Copy)]
struct Cand {
    action: u32,
    kind: u32,
    cache: u32,
    fixed: Option<Outs>,
    /// Its step is a RoundTrip (spec/rpc.py): on a miss, its halves are looked up apart.
    trip: bool,
}

/// An observation: the ghost it gives, its XOR to the fingerprint, and the quiet test's
/// cached verdict with the generation of the quiet test it is of (0: none).
#[derive(Clone, Copy)]
struct Obs {
    ghost: u32,
    delta: u64,
    quiet: bool,
    quiet_gen: u32,
}

/// Where the expansion of the current state stands.
struct Cursor {
    comps: Key,
    parts: Vec<u32>,
    base: u64,
    node: u64,
    depth: u32,
    same: Key,
    touch: u32,
    b: usize,
    cands: (u32, u32),
    ci: u32,
    outs: Outs,
    oi: u32,
    kind: u32,
    index: i64,
}

#[pyclass(unsendable)]
pub struct Core {
    n: usize,
    attrs: Attributes,
    arena: Arena,
    /// A mapped outcome applied to the current state (src/search/misses.rs apply): read once by
    /// the cursor, so it is kept apart and emptied at the next state, not left in the arena.
    scratch: Arena,
    steps: Vec<StepCache>,
    /// Per step cache, a RoundTrip's halves (empty for any other step).
    trips: Vec<trip::Trip>,
    cands: Vec<Cand>,
    cand_caches: Vec<Map<[u32; 3], (u32, u32)>>,
    observe: Map<Key, Obs>,
    wide: Vec<u8>,
    memo: Map<(u32, u8, u32), (u32, u64)>,
    visited: FpSet,
    parents: Vec<u32>,
    indices: Vec<u16>,
    queue: VecDeque<u32>,
    width: usize,
    cursor: Option<Cursor>,
    /// States whose expansion `run` ended.
    expanded: u64,
    quiet_gen: u32,
    leader_only: bool,
    keep: bool,
    /// Bytes its caches may claim (src/search/memory.rs `bound`), and states begun.
    #[pyo3(get)]
    limit: usize,
    begun: u64,
    /// Projections the invariants' and the quiet test's verdicts may each hold.
    known: usize,
    /// Times the outcomes passed `limit` and the caches pointing into them were emptied.
    #[pyo3(get)]
    forgets: u64,
    #[pyo3(get)]
    fired: Vec<u64>,
    #[pyo3(get)]
    max_depth: u32,
    /// Lookups and misses of its candidate, step and observation caches.
    #[pyo3(get)]
    lookups: (u64, u64, u64),
    #[pyo3(get)]
    misses: (u64, u64, u64),
    /// Lookups and misses of a RoundTrip's halves: the send, the handle, the receive.
    #[pyo3(get)]
    halves: (u64, u64, u64),
    #[pyo3(get)]
    halves_missed: (u64, u64, u64),
    /// The state invariants' verdicts per group of parts (None: every new state is tested),
    /// and the last new state handed to Python for its test: (changed mask, components).
    verdicts: Option<Verdicts>,
    tested: Option<(u32, Key)>,
    /// The quiet test's verdicts per group of its conjuncts, on the components of a step's
    /// two states (the state before, then the state after): for a step that changes the
    /// controller, and for one that keeps it (fewer conjuncts, on fewer components).
    quiet_known: QuietVerdicts,
    /// Each component's ids in the verdicts' views (checker/core/views.py).
    ids: Ids,
    model: Py<PyAny>,
    /// The model's list of components interned since the core last read it.
    pending: Py<PyList>,
    /// Per serial number, the component's own fingerprint, and back (a part ships states
    /// as their components' fingerprints).
    comp_fp: Vec<u64>,
    by_fp: Map<u64, u32>,
    /// A --workers part's levels and parcels (src/part.rs), once `part()` made it one.
    part: Option<Part>,
}

const ROOT: u32 = u32::MAX;

#[pymethods]
impl Core {
    /// `model`: the Python side (checker/core/native.py Misses); n: brokers; leader_only: whether
    /// the quiet test reads only what the observation is keyed on.
    /// keep=False: a --workers part, which keeps neither parent pointers nor a queue (the
    /// worker keeps its level by path keys): a new state is only added to the visited set.
    /// `limit`: bytes its outcomes, step, candidate and observation caches may claim (its
    /// share of --cache-mib: checker/cache/budget.py `CacheBudget.share_with_core`); past it
    /// they are emptied and refill from the Python caches. `known`: the verdicts' projections
    /// held before they are forgotten.
    /// `groups`: the state invariants' groups of parts, as bitmasks of the components each
    /// reads (invariants/suite.py state_groups), or None to have every new state tested.
    #[new]
    #[allow(clippy::too_many_arguments)]
    /// `views`, `quiet_views`: per group, per component it reads, the view it reads it through
    /// (-1: whole; checker/core/views.py), for the state groups and the quiet test's.
    #[pyo3(signature = (model, n, kinds, leader_only, groups, quiet_groups, keep=true, limit=usize::MAX, known=usize::MAX, views=None, quiet_views=None))]
    fn new(
        py: Python<'_>,
        model: Py<PyAny>,
        n: usize,
        kinds: usize,
        leader_only: bool,
        groups: Option<Vec<u32>>,
        quiet_groups: (Vec<u32>, Vec<u32>),
        keep: bool,
        limit: usize,
        known: usize,
        views: Option<Vec<Vec<i32>>>,
        quiet_views: Option<QuietViews>,
    ) -> PyResult<Self> {
        let pending = model
            .getattr(py, "pending")?
            .cast_bound::<PyList>(py)?
            .clone()
            .unbind();
        Ok(Core {
            n,
            attrs: Attributes::default(),
            arena: Arena::default(),
            scratch: Arena::default(),
            steps: Vec::new(),
            trips: Vec::new(),
            cands: Vec::new(),
            cand_caches: (0..=n).map(|_| Map::default()).collect(),
            observe: Map::default(),
            wide: Vec::new(),
            memo: Map::default(),
            visited: FpSet::default(),
            parents: Vec::new(),
            indices: Vec::new(),
            queue: VecDeque::new(),
            width: n + 7,
            cursor: None,
            expanded: 0,
            quiet_gen: 1,
            leader_only,
            keep,
            limit,
            begun: 0,
            known,
            forgets: 0,
            fired: vec![0; kinds],
            max_depth: 0,
            lookups: (0, 0, 0),
            misses: (0, 0, 0),
            halves: (0, 0, 0),
            halves_missed: (0, 0, 0),
            verdicts: groups.map(|g| Verdicts::new(&g, views.as_deref(), known)),
            tested: None,
            quiet_known: QuietVerdicts::new(&quiet_groups, quiet_views.as_ref(), known),
            ids: Ids::default(),
            model,
            pending,
            comp_fp: Vec::new(),
            by_fp: Map::default(),
            part: None,
        })
    }

    /// The bytes its caches may claim from now on (checker/cache/budget.py `follow`: a budget
    /// that grows with the states held). A smaller limit takes effect at the next count.
    fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// The quiet test changed (a property was reached): cached verdicts are of the old one.
    /// `groups`: the new test's groups of conjuncts (invariants/suite.py quiet_step); `views`:
    /// their views, among those the components were described in (-1 for any other).
    #[pyo3(signature = (leader_only, groups, views=None))]
    fn new_quiet(&mut self, leader_only: bool, groups: (Vec<u32>, Vec<u32>), views: Option<QuietViews>) {
        self.quiet_gen += 1;
        self.leader_only = leader_only;
        self.quiet_known = QuietVerdicts::new(&groups, views.as_ref(), self.known);
    }

    /// Add a fingerprint to the visited set; a node and a place in the queue if it is new.
    fn add(
        &mut self,
        py: Python<'_>,
        fp: u64,
        parent: i64,
        index: i64,
        depth: u32,
        comps: Vec<u32>,
    ) -> PyResult<Option<u32>> {
        self.sync(py)?;
        if !self.visited.add(fp) {
            return Ok(None);
        }
        let node = self.add_node(if parent < 0 { ROOT } else { parent as u32 }, index);
        self.push(node, depth, fp, &comps);
        self.tested = Some((u32::MAX, key_from(&comps))); // Python tests it whole
        Ok(Some(node))
    }

    /// Expand the queue's states (a part's: its frontier's) until Python must look at
    /// something: a transition as (new, index, fingerprint, changed mask, successor's serials,
    /// node or -1, the expanded state's node, its depth, before), new=False for a step the
    /// quiet test does not pass (nothing done: the search checks it and adds it), whose
    /// `before` gives the state before (its components; a part's: its path key and them);
    /// TICK after every `every`-th state expanded; CAP after a state that left `cap` or more
    /// states visited; None when none is left (src/search/run.rs). A part is not given a new
    /// state it routes itself. `ok`: whether the last new state given passed its state test
    /// (its groups are then known true).
    #[pyo3(signature = (cap, every, ok=true))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        cap: Option<usize>,
        every: u64,
        ok: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.run_states(py, cap, every, ok)
    }

    /// Set the cursor on the transitions of a state given by its components' serials and its
    /// fingerprint (a --workers part: its frontier is the worker's).
    fn begin(
        &mut self,
        py: Python<'_>,
        comps: Vec<u32>,
        base: u64,
        node: u64,
        depth: u32,
    ) -> PyResult<()> {
        self.sync(py)?;
        self.tested = None;
        self.scratch.clear();
        self.bound();
        let (same, _) = self.observed(py, &comps)?;
        let mut touch: u32 = 1 | 1 << self.g();
        for b in 1..=self.n {
            if same[b + 1] != 0 {
                touch |= 1 << b;
            }
        }
        if self.wide.contains(&((self.n + 2) as u8)) {
            touch |= 1 << (self.n + 2);
        }
        let parts = self.parts_of(&comps);
        self.cursor = Some(Cursor {
            comps: key_from(&comps),
            parts,
            base,
            node,
            depth,
            same,
            touch,
            b: 0,
            cands: (0, 0),
            ci: 0,
            outs: Outs(0, 0),
            oi: 0,
            kind: 0,
            index: -1,
        });
        Ok(())
    }

    /// Add a fingerprint to the visited set alone: whether it was new.
    fn visit(&mut self, fp: u64) -> bool {
        self.visited.add(fp)
    }

    fn seen(&self, fp: u64) -> bool {
        self.visited.contains(fp)
    }

    /// Make this core worker `me`'s part of `peers` (keep=False): it keeps its level and
    /// fills its peers' parcels itself (src/part.rs); Python routes only the states it tests.
    fn part(&mut self, me: usize, peers: usize) {
        self.part = Some(Part::new(me, peers, self.n + 3));
    }

    /// An initial state this part owns (new to its visited set).
    fn part_add(&mut self, fp: u64, key: &[u8], comps: Vec<u32>) -> PyResult<()> {
        self.visited.add(fp);
        self.part_mut()?
            .mine
            .offer(fp, key, &comps, 0)
            .map(|_| ())
            .map_err(PyRuntimeError::new_err)
    }

    /// The level kept becomes the frontier (in key order); returns its size.
    fn start_level(&mut self) -> PyResult<usize> {
        let part = self.part_mut()?;
        part.start_level();
        Ok(part.frontier.len())
    }

    /// Route a successor Python tested (`bad`: its broken invariant's id in Python's table, 0 none).
    fn route(
        &mut self,
        py: Python<'_>,
        fp: u64,
        index: i64,
        comps: Vec<u32>,
        bad: u32,
    ) -> PyResult<()> {
        self.route_child(py, fp, index, &comps, bad)
    }

    /// Peer `peer`'s parcel, emptied: (serial numbers of the components to ship with it,
    /// fingerprints, path keys, (index, bad id) of the broken).
    #[allow(clippy::type_complexity)]
    fn parcel<'py>(
        &mut self,
        py: Python<'py>,
        peer: usize,
    ) -> PyResult<(
        Vec<u32>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Vec<(u32, u32)>,
    )> {
        let (ship, fps, keys, bad) = self.part_mut()?.take_parcel(peer);
        Ok((ship, PyBytes::new(py, &fps), PyBytes::new(py, &keys), bad))
    }

    /// Keep a peer's parcel (as `parcel` gives it; its components interned here first).
    fn unpack(
        &mut self,
        py: Python<'_>,
        fps: &[u8],
        keys: &[u8],
        length: usize,
        bad: Vec<(u32, u32)>,
    ) -> PyResult<()> {
        self.sync(py)?;
        self.unpack_parcel(fps, keys, length, &bad)
    }

    /// The level is kept: each of its states joins the visited set (the peers' ones were not
    /// in it). (Its size, (path key, bad id) of each state that breaks an invariant.)
    #[allow(clippy::type_complexity)]
    fn keep_level<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<(usize, Vec<(Bound<'py, PyBytes>, u32)>)> {
        let (size, broken) = self.keep_mine()?;
        Ok((
            size,
            broken
                .into_iter()
                .map(|(k, b)| (PyBytes::new(py, &k), b))
                .collect(),
        ))
    }

    fn __len__(&self) -> usize {
        self.visited.len()
    }

    fn queued(&self) -> usize {
        self.queue.len() / self.width
    }

    /// (initial state index, successor indices) leading to a node.
    fn path(&self, node: u32) -> (u32, Vec<u16>) {
        let mut steps = Vec::new();
        let mut at = node as usize;
        while self.parents[at] != ROOT {
            steps.push(self.indices[at]);
            at = self.parents[at] as usize;
        }
        steps.reverse();
        (self.indices[at] as u32, steps)
    }

    fn nbytes(&self) -> usize {
        self.visited.nbytes() + self.parents.len() * 6
    }

    /// Its tables' claimed bytes, by name (src/search/memory.rs).
    fn memory(&self) -> Vec<(&'static str, usize)> {
        self.tables()
    }

    /// The state invariants' verdicts: (lookups, misses, projections held).
    fn verdict_stats(&self) -> (u64, u64, usize) {
        self.verdicts
            .as_ref()
            .map_or((0, 0, 0), |v| (v.asked.0, v.asked.1, v.entries()))
    }

    /// The quiet test's verdicts: (lookups, misses, projections held).
    fn quiet_stats(&self) -> (u64, u64, usize) {
        self.quiet_known.stats()
    }

    /// Entries in the step caches, the candidates' and the observations', and the outcomes
    /// they point to.
    fn entries(&self) -> (usize, usize, usize, usize) {
        let steps = self.steps.iter().map(|s| s.entries()).sum();
        let cands = self.cand_caches.iter().map(|c| c.len()).sum();
        (steps, cands, self.observe.len(), self.arena.outs.len())
    }
}
