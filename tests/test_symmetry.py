"""Symmetry reduction.

Symmetry must be sound: relabelling broker ids maps transitions to transitions and keeps
every invariant verdict, the reduced search finds the same violations at the same
lengths, and a trace from any assignment order replays. (The successor caches are tested
in tests/test_fast_path.py, the visited set in tests/test_visited.py.)
"""

from __future__ import annotations

from dataclasses import replace
from itertools import permutations

import pytest
from helpers import sample_states
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.checker.engines.search import replay_path
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.symmetry import canonical, relabel
from kafkamc.traces.trace import Trace, load

# (configuration, distinct states reduced, unreduced): unreduced is rf! times reduced, as
# every orbit has rf! members (the assignment order tells relabellings apart).
# The reduced counts are those of tests/test_pinned.py (issue 29's model; then trace validation:
# a crashed follower may be dropped from the ISR by the leader's lag check before its fence).
COUNTS = [
    (dict(rf=1, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1), 15, 15),
    (dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1), 4774, 9548),
    (dict(rf=2, minisr=2), 9291, 18582),
    pytest.param(dict(rf=3, minisr=2, max_records=1), 79914, 479484, marks=pytest.mark.slow),
]

# The lengths of tests/test_pinned.py: one BrokerSessionTimeout after each crash.
VIOLATED = [
    (dict(rf=2, minisr=1, unclean=True), "NoCommittedDataLoss", 6),
    (dict(rf=3, minisr=2, acks="1", max_records=1), "AckedWriteDurability", 4),
    (dict(rf=1, minisr=1), "HighWatermarkMonotonic", 4),
    (dict(rf=2, minisr=2, max_hard_crashes=2), "HighWatermarkMonotonic", 9),
]


def _explore(kw, symmetry):
    cfg = Config(**kw, symmetry=symmetry)
    return explore(FastModel(cfg), InvariantSuite(cfg))


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
    """The soundness argument, checked on the spec's own step functions: for every
    permutation p, succ(p(s)) = p(succ(s)), invariants agree on s and p(s), and p(s) has
    the canonical form of s."""
    cfg = Config(rf=3, minisr=2, max_records=1, max_fences=1, unclean=True)
    suite = InvariantSuite(cfg)
    model = Model(replace(cfg, symmetry=False))
    states = sample_states(cfg, 300)
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
    states = sample_states(cfg, 2000)
    reduced = FastModel(cfg)
    by_fp: dict = {}
    for s in states:
        by_fp.setdefault(reduced.fingerprint(s), set()).add(canonical(s))
    assert all(len(c) == 1 for c in by_fp.values())  # one canonical state per fingerprint
    assert len(by_fp) == len({canonical(s) for s in states}) < len(states)


def test_a_trace_from_another_assignment_order_replays(tmp_path):
    cfg = Config(rf=3, minisr=2, max_records=1, symmetry=False)
    model = FastModel(cfg)
    last = len(model.initial_states()) - 1
    assert model.initial_states()[last].controller.replicas == (3, 2, 1)
    steps = replay_path(model, last, [0, 0, 0, 0])
    assert steps[0][1].controller.leader == 3
    assert replay_path(Model(cfg), last, [0, 0, 0, 0]) == steps  # the spec's successors, in the same order
    saved = Trace(cfg, steps).save(tmp_path / "t.json")
    assert load(saved).steps == steps
