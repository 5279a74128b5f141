"""Symmetry reduction, the successor caches and the compact visited set.

Symmetry must be sound: relabelling broker ids maps transitions to transitions and keeps
every invariant verdict, the reduced search finds the same violations at the same
lengths, and a trace from any assignment order replays. The caches must give exactly the
step functions' successors (verify mode re-runs them on every hit).
"""
from __future__ import annotations

import random
from dataclasses import replace
from itertools import permutations

import pytest

from kafkamc.checker.explorer import explore, replay_path
from kafkamc.checker.visited import FingerprintSet, Nodes
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model, step
from kafkamc.spec.protocol import ERAS, preset
from kafkamc.spec.symmetry import canonical, relabel
from kafkamc.traces.trace import Trace, load

# (configuration, distinct states reduced, unreduced): unreduced is rf! times reduced, as
# every orbit has rf! members (the assignment order tells relabellings apart).
COUNTS = [
    (dict(rf=1, minisr=1, max_unclean_crashes=0, max_crashes=1), 12, 12),
    (dict(rf=2, minisr=1, max_unclean_crashes=0, max_crashes=1), 2333, 4666),
    (dict(rf=2, minisr=2), 5821, 11642),
    pytest.param(dict(rf=3, minisr=2, max_records=1), 44260, 265560, marks=pytest.mark.slow),
]

VIOLATED = [
    (dict(rf=2, minisr=1, unclean=True), "NoCommittedDataLoss", 5),
    (dict(rf=3, minisr=2, acks="1", max_records=1), "AckedWriteDurability", 3),
    (dict(rf=1, minisr=1), "HighWatermarkMonotonic", 3),
    (dict(rf=2, minisr=2, max_unclean_crashes=2), "HighWatermarkMonotonic", 7),
]


def _explore(kw, symmetry, verify=False):
    cfg = Config(**kw, symmetry=symmetry)
    return explore(Model(cfg, verify=verify), InvariantSuite(cfg))


def _sample(cfg: Config, n: int, seed: int = 7) -> list:
    """About n reachable states, breadth first from every assignment order."""
    model = Model(replace(cfg, symmetry=False))
    seen = {model.fingerprint(s): s for s in model.initial_states()}
    frontier = list(seen.values())
    while frontier and len(seen) < n:
        nxt = []
        for s in frontier:
            for _, t in model.successors(s):
                fp = model.fingerprint(t)
                if fp not in seen:
                    seen[fp] = t
                    nxt.append(t)
        frontier = nxt
    states = list(seen.values())
    random.Random(seed).shuffle(states)
    return states[:n]


@pytest.mark.parametrize("kw,reduced,unreduced", COUNTS)
def test_reduced_and_unreduced_counts(kw, reduced, unreduced):
    on, off = _explore(kw, True), _explore(kw, False)
    assert (on.verdict, on.distinct_states) == ("holds", reduced)
    assert (off.verdict, off.distinct_states) == ("holds", unreduced)
    assert on.depth == off.depth


@pytest.mark.parametrize("kw,invariant,length", VIOLATED)
def test_same_violation_either_way(kw, invariant, length):
    for symmetry in (True, False):
        r = _explore(kw, symmetry)
        assert (r.verdict, r.violation.invariant, r.violation.length) == ("violated", invariant, length), symmetry


def test_relabelling_maps_transitions_to_transitions_and_keeps_verdicts():
    """The soundness argument, checked: for every permutation p, succ(p(s)) = p(succ(s)),
    invariants agree on s and p(s), and p(s) has the canonical form of s."""
    cfg = Config(rf=3, minisr=2, max_records=1, max_fences=1, unclean=True)
    suite = InvariantSuite(cfg)
    model = Model(replace(cfg, symmetry=False))
    states = _sample(cfg, 300)
    assert len({s.controller.replicas for s in states}) == 6
    for s in states:
        successors = [t for _, t in model.successors(s)]
        for perm in permutations((1, 2, 3)):
            r = relabel(s, perm)
            assert canonical(r) == canonical(s)
            assert suite.all_violated(r) == suite.all_violated(s)
            assert sorted(repr(t) for _, t in model.successors(r)) == sorted(repr(relabel(t, perm)) for t in successors)


def test_canonical_fingerprints_identify_exactly_the_relabellings():
    cfg = Config(rf=3, minisr=2, max_records=1)
    states = _sample(cfg, 2000)
    reduced = Model(cfg)
    by_fp: dict = {}
    for s in states:
        by_fp.setdefault(reduced.fingerprint(s), set()).add(canonical(s))
    assert all(len(c) == 1 for c in by_fp.values())          # one canonical state per fingerprint
    assert len(by_fp) == len({canonical(s) for s in states}) < len(states)


def test_a_trace_from_another_assignment_order_replays(tmp_path):
    cfg = Config(rf=3, minisr=2, max_records=1, symmetry=False)
    model = Model(cfg)
    last = len(model.initial_states()) - 1
    assert model.initial_states()[last].controller.replicas == (3, 2, 1)
    steps = replay_path(model, last, [0, 0, 0, 0])
    assert steps[0][1].controller.leader == 3
    saved = Trace(cfg, steps).save(tmp_path / "t.json")
    assert load(saved).steps == steps


# ---------------------------------------------------------------- the caches against the step functions

CACHED = [
    dict(rf=3, minisr=2, max_records=1),
    dict(rf=2, minisr=1, unclean=True, max_crashes=1, max_fences=1),
    dict(rf=3, minisr=2, acks="1", max_records=1, max_fences=1),
    dict(rf=2, minisr=2, track_down=True, max_crashes=1, max_records=2),
] + [dict(rf=2, minisr=1, max_records=1, unclean=True, max_crashes=1, max_fences=1, protocol=preset(era))
     for era in ERAS]


@pytest.mark.parametrize("kw", CACHED)
def test_cached_successors_are_the_step_functions(kw):
    """verify=True recomputes every cached step, observation and quiet test (the search's
    screening caches it with the observation) and raises on a difference."""
    from kafkamc.checker.explorer import Limits
    cfg = Config(**kw, symmetry=False)
    fast = explore(Model(cfg, verify=True), InvariantSuite(cfg), limits=Limits(max_states=6000))
    assert fast.distinct_states > 100


class _Unscreened:
    """The model without transitions(): the search screens its expand() generically."""

    def __init__(self, model):
        self.model = model
        self.initial_states, self.successors = model.initial_states, model.successors
        self.expand, self.fingerprint = model.expand, model.fingerprint


@pytest.mark.parametrize("kw", [dict(rf=3, minisr=2, max_records=1), dict(rf=2, minisr=1, unclean=True, max_fences=1)])
def test_screened_search_counts_what_the_generic_loop_counts(kw):
    """The fused loop (skipped observations, quiet tests from the cache, successors built
    only when new) against the explorer's generic loop over every transition."""
    cfg = Config(**kw)
    fast = explore(Model(cfg), InvariantSuite(cfg))
    plain = explore(_Unscreened(Model(cfg)), InvariantSuite(cfg))
    assert fast.verdict == plain.verdict
    assert (fast.distinct_states, fast.states_generated, fast.depth) == \
        (plain.distinct_states, plain.states_generated, plain.depth)
    assert fast.coverage == plain.coverage and set(fast.reached) == set(plain.reached)


class _WholeCheck:
    """The invariant suite without state_test: the search checks every new state whole."""

    def __init__(self, suite):
        self.check_state, self.check_step = suite.check_state, suite.check_step
        self.reach_functions, self.quiet_step = suite.reach_functions, suite.quiet_step


@pytest.mark.parametrize("kw", [dict(rf=3, minisr=1, unclean=True, max_records=2, max_crashes=1),
                                dict(rf=3, minisr=2, acks="1", max_records=2, max_crashes=1),
                                dict(rf=2, minisr=2)])
def test_testing_only_the_changed_components_finds_what_the_whole_check_finds(kw):
    """Each new state tested only on the invariant parts its step can change, against the
    whole check on every state: the same verdict, violation, trace and counts."""
    cfg = Config(**kw)
    fast = explore(Model(cfg), InvariantSuite(cfg))
    whole = explore(Model(cfg), _WholeCheck(InvariantSuite(cfg)))
    assert (fast.verdict, fast.distinct_states, fast.states_generated) == \
        (whole.verdict, whole.distinct_states, whole.states_generated)
    assert (fast.violation is None) == (whole.violation is None)
    if fast.violation is not None:
        assert (fast.violation.invariant, fast.violation.trace) == (whole.violation.invariant, whole.violation.trace)


def test_quiet_test_reads_only_the_leader_when_the_controller_stays():
    """Z3 shows (for each leader) which brokers the quiet test reads; the cache relies on it."""
    import z3
    cfg = Config(rf=3, minisr=2)
    suite = InvariantSuite(cfg)
    assert suite.quiet_step([name for name, _ in suite.reach_functions()]).leader_only
    assert suite.quiet_step([]).leader_only
    V, P = suite.V, suite.P
    assert suite._leader_only(z3.Implies(V.c_leader == 2, V.hw[2] >= P.hw_seen))
    assert not suite._leader_only(V.hw[2] >= P.hw_seen)          # broker 2, whoever leads
    assert not suite._leader_only(z3.Implies(V.c_leader == 1, P.hw[1] <= V.hw[1]))   # the broker before


def test_successors_match_step_in_order():
    cfg = Config(rf=3, minisr=2, max_records=1, max_fences=1, unclean=True)
    model = Model(cfg)
    from kafkamc.spec.model import candidate_actions
    for s in _sample(cfg, 200):
        direct = [(a, t) for a in candidate_actions(cfg, s) for t in step(cfg, s, a)]
        assert list(model.successors(s)) == direct


# ---------------------------------------------------------------- the visited set

def test_fingerprint_set_grows_and_answers():
    rng = random.Random(1)
    fps = [rng.getrandbits(64) for _ in range(100_000)] + [0, 1]
    s = FingerprintSet(capacity=16)
    assert all(s.add(fp) for fp in fps[:-1])
    assert not s.add(1)                  # 0 is stored as 1
    assert len(s) == len(fps) - 1
    assert all(fp in s for fp in fps) and not s.add(fps[500])
    assert rng.getrandbits(64) not in s
    assert s.nbytes / len(s) <= 8 / 0.375 + 1e-9


def test_nodes_keep_paths_in_six_bytes():
    n = Nodes()
    root = n.add(-1, 2)
    a = n.add(root, 7)
    b = n.add(a, 65535)
    assert n.path(b) == (2, [7, 65535]) and n.nbytes == 3 * 6
    with pytest.raises(OverflowError):
        n.add(b, 65536)


def test_fingerprints_tell_positions_apart_and_follow_each_step():
    """A state's fingerprint is the XOR of its components' fingerprints mixed with their
    positions: swapping two brokers must change it, and the XOR the cache applies along
    each step must give the fingerprint computed from scratch."""
    model = Model(Config(rf=3, minisr=2, max_records=1, symmetry=False))
    s = model.initial_states()[0]
    b1, b2, b3 = s.brokers                  # broker 1 leads: it differs from broker 2
    swapped = s._replace(brokers=(b2, b1, b3))
    assert b1 != b2 and model.fingerprint(swapped) != model.fingerprint(s)
    frontier, seen = [s], 0
    while frontier and seen < 2000:
        state = frontier.pop()
        for _action, nxt, fp in model.expand(state):
            assert fp == model.fingerprint(nxt) == model.fast.fingerprint(nxt)
            frontier.append(nxt)
            seen += 1


# ---------------------------------------------------------------- state records

def test_replace_means_dataclasses_replace_for_every_record():
    """spec.state.replace builds slotted records through their slots' setters, not __init__:
    the copy must equal, and hash as, what dataclasses.replace gives, and leave the original."""
    import dataclasses

    from kafkamc.spec.state import AlterPartitionResponse, Broker, Budget, Controller, Ghost
    from kafkamc.spec.state import replace as fast_replace
    alter = AlterPartitionResponse(epoch=2, ok=True, isr=3, pepoch=4)
    records = [(Broker(hw=1, log=((1, 1),)), dict(hw=0, alter=alter, stalled=True)),
               (Controller(1, 1, 1, 7, 7, (1, 1, 1)), dict(leader=2, elr=4)),
               (Ghost(acked=1), dict(committed=(1,))), (Budget(records=1), dict(crashes=1)),
               (alter, dict(ok=False, error="INVALID_UPDATE_VERSION"))]
    for record, changes in records:
        before = dataclasses.replace(record)
        got = fast_replace(record, **changes)
        assert got == dataclasses.replace(record, **changes) and hash(got) == hash(dataclasses.replace(record, **changes))
        assert type(got) is type(record) and record == before
        with pytest.raises(TypeError):
            fast_replace(record, no_such_field=1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.__setattr__(dataclasses.fields(record)[0].name, 0)
