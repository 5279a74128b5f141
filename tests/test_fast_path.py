"""The fast path (checker/cache/fast.py) against the spec it is derived from.

The caches must give exactly the step functions' successors, in the same order (verify
mode re-runs them on every hit); the fused search loop must count what the generic loop
counts; testing a new state only on the components its step changed must find what the
whole check finds; fingerprints must follow each step; and the records' fast replace()
must mean dataclasses.replace.
"""

from __future__ import annotations

import dataclasses

import pytest
from helpers import sample_states
from kafkamc.checker.cache.budget import cache_stats
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.core import native
from kafkamc.checker.engines.explorer import Limits, explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.protocol import ERAS, preset
from kafkamc.spec.state import AlterPartitionResponse, Broker, Budget, Controller, Ghost
from kafkamc.spec.state import replace as fast_replace

CACHED = [
    dict(rf=3, minisr=2, max_records=1),
    dict(rf=2, minisr=1, unclean=True, max_clean_shutdowns=1, max_fences=1),
    dict(rf=3, minisr=2, acks="1", max_records=1, max_fences=1),
    dict(rf=2, minisr=2, track_down=True, max_clean_shutdowns=1, max_records=2),
    dict(rf=3, minisr=2, max_records=1, max_controlled_shutdowns=1, max_leader_elections=1),
    dict(rf=2, minisr=1, broker_count=3, max_records=1, max_reassignments=1, max_controlled_shutdowns=1),
] + [
    dict(rf=2, minisr=1, max_records=1, unclean=True, max_clean_shutdowns=1, max_fences=1, protocol=preset(era))
    for era in ERAS
]


@pytest.mark.parametrize("kw", CACHED)
def test_cached_successors_are_the_step_functions(kw):
    """verify=True recomputes every cached step, observation and quiet test (the search's
    screening caches it with the observation) and raises on a difference."""
    cfg = Config(**kw, symmetry=False)
    fast = explore(FastModel(cfg, verify=True), InvariantSuite(cfg), limits=Limits(max_states=6000))
    assert fast.distinct_states > 100


def test_successors_match_step_in_order():
    """The fast model's successors are the spec's candidates through its step function, in order."""
    cfg = Config(rf=3, minisr=2, max_records=1, max_fences=1, unclean=True)
    fast, spec = FastModel(cfg), Model(cfg)
    for s in sample_states(cfg, 200):
        direct = [(a, t) for a in spec.candidates(s) for t in spec.step(s, a)]
        assert list(spec.successors(s)) == direct
        assert list(fast.successors(s)) == direct


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
    fast = explore(FastModel(cfg), InvariantSuite(cfg))
    plain = explore(_Unscreened(FastModel(cfg)), InvariantSuite(cfg))
    assert fast.verdict == plain.verdict
    assert (fast.distinct_states, fast.states_generated, fast.depth) == (
        plain.distinct_states,
        plain.states_generated,
        plain.depth,
    )
    assert fast.coverage == plain.coverage and set(fast.reached) == set(plain.reached)


class _WholeCheck:
    """The invariant suite without state_test: the search checks every new state whole."""

    def __init__(self, suite):
        self.check_state, self.check_step = suite.check_state, suite.check_step
        self.reach_functions, self.quiet_step = suite.reach_functions, suite.quiet_step


@pytest.mark.parametrize(
    "kw",
    [
        dict(rf=3, minisr=1, unclean=True, max_records=2, max_clean_shutdowns=1),
        dict(rf=3, minisr=2, acks="1", max_records=2, max_clean_shutdowns=1),
        dict(rf=2, minisr=2),
    ],
)
def test_testing_only_the_changed_components_finds_what_the_whole_check_finds(kw):
    """Each new state tested only on the invariant parts its step can change, against the
    whole check on every state: the same verdict, violation, trace and counts."""
    cfg = Config(**kw)
    fast = explore(FastModel(cfg), InvariantSuite(cfg))
    whole = explore(FastModel(cfg), _WholeCheck(InvariantSuite(cfg)))
    assert (fast.verdict, fast.distinct_states, fast.states_generated) == (
        whole.verdict,
        whole.distinct_states,
        whole.states_generated,
    )
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
    assert not suite._leader_only(V.hw[2] >= P.hw_seen)  # broker 2, whoever leads
    assert not suite._leader_only(z3.Implies(V.c_leader == 1, P.hw[1] <= V.hw[1]))  # the broker before


def test_fingerprints_tell_positions_apart_and_follow_each_step():
    """A state's fingerprint is the XOR of its components' fingerprints mixed with their
    positions: swapping two brokers must change it, and the XOR the cache applies along
    each step must give the fingerprint computed from scratch."""
    model = FastModel(Config(rf=3, minisr=2, max_records=1, symmetry=False))
    s = model.initial_states()[0]
    b1, b2, b3 = s.brokers  # broker 1 leads: it differs from broker 2
    swapped = s._replace(brokers=(b2, b1, b3))
    assert b1 != b2 and model.fingerprint(swapped) != model.fingerprint(s)
    frontier, seen = [s], 0
    while frontier and seen < 2000:  # depth first: deep states early, not a sample by levels
        state = frontier.pop()
        for _action, nxt, fp in model.expand(state):
            assert fp == model.fingerprint(nxt) == model.fast.fingerprint(nxt)
            frontier.append(nxt)
            seen += 1


# ---------------------------------------------------------------- state records


def test_replace_means_dataclasses_replace_for_every_record():
    """spec.state.replace builds slotted records through their slots' setters, not __init__:
    the copy must equal, and hash as, what dataclasses.replace gives, and leave the original."""
    alter = AlterPartitionResponse(epoch=2, ok=True, isr=3, pepoch=4)
    records = [
        (Broker(hw=1, log=((1, 1),)), dict(hw=0, alter=alter, stalled=True)),
        (Controller(1, 1, 1, 7, 7, (1, 1, 1)), dict(leader=2, elr=4)),
        (Ghost(acked=1), dict(committed=(1,))),
        (Budget.make(records=1), dict(spent=(("crashes", 1), ("records", 1)))),
        (alter, dict(ok=False, error="INVALID_UPDATE_VERSION")),
    ]
    for record, changes in records:
        before = dataclasses.replace(record)
        got, slow = fast_replace(record, **changes), dataclasses.replace(record, **changes)
        assert got == slow and hash(got) == hash(slow)
        assert type(got) is type(record) and record == before
        with pytest.raises(TypeError):
            fast_replace(record, no_such_field=1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.__setattr__(dataclasses.fields(record)[0].name, 0)


def test_budget_make_and_spend():
    """The budget keeps sorted (bound, spent) pairs without zeros, whatever order they come in."""
    u = Budget.make(records=1, crashes=2, isr_shrinks=0)
    assert u.spent == (("crashes", 2), ("records", 1))
    assert (u.of("records"), u.of("crashes"), u.of("isr_shrinks"), u.of("fences")) == (1, 2, 0, 0)
    assert u.spend("fences") == Budget.make(records=1, crashes=2, fences=1)
    assert u.spend("records").of("records") == 2 and u.of("records") == 1
    assert Budget.make() == Budget()


def test_a_view_source_that_reads_the_state_directly_reads_all_of_it():
    """The quiet test is cached on the parts of the state its sources read (leader_only): a
    source that reads the state past the view's locals must count as reading everything."""
    suite = InvariantSuite(Config(rf=2, minisr=2))
    assert suite._components("s_c.leader + s_b2.hw") == {"s_c", "s_b2"}
    assert suite._components("len(s.brokers) + p_g.hw_seen") == {"s", "p_g"}


def test_a_hard_crash_is_cached_per_broker_not_on_every_broker():
    """A hard crash that spends the last of the budget forgets every broker's checkpoint
    (spec/broker_lifecycle.py forget_checkpoints, a State.map_brokers): the crash's outcome is
    keyed on the crashed broker and the budget, and the map is applied to each other broker
    through a memo (checker/cache/outcomes.py Mapped). Keyed on every broker, as before, this search
    made 18,832 misses of BrokerCrash's cache; the state count is the oracle's
    (tests/test_oracle.py)."""
    cfg = Config(rf=3, minisr=2, max_records=1)
    model = FastModel(cfg)
    result = explore(model, InvariantSuite(cfg), engine="python")
    assert (result.verdict, result.distinct_states) == ("holds", 79914)
    crash = cache_stats(model.fast)["BrokerCrash"]
    assert (crash["lookups"], crash["misses"]) == (20714, 1006)
    # The native core looks up its own caches, and asks the Python ones on its misses only.
    model = FastModel(cfg)
    assert explore(model, InvariantSuite(cfg)).distinct_states == 79914
    stats = cache_stats(model.fast)
    assert stats["BrokerCrash"]["misses"] == 1006
    if native.load() is not None:
        # Its own caches, pinned: a new state is tested in Python only when a group of invariant
        # parts its change touches was not yet seen true on the same values of the fields it
        # reads (invariants/fields.py): 654 of 79,911 (native/src/verdicts.rs; on the same
        # components, as before, it was 48,408; each new state was tested before). The quiet test is
        # asked of Python only when a group of its conjuncts was not yet seen true on the values
        # of the fields it reads in the step's two states: 285 of 57,659 (22,034 on the same
        # components). A Fetch that misses
        # its step cache (35,908 times) is looked up in halves (native/src/search/trip.rs): its
        # request is keyed on the follower alone (72 misses), the leader's handling on the
        # leader and the request (23,739), the follower's handling of the response (149; 253
        # requests were refused, so there is no response).
        core = {name: (row["lookups"], row["misses"]) for name, row in stats.items() if name.startswith("core.")}
        assert core == {
            "core.candidates": (239742, 18674),
            "core.observe": (382960, 14518),
            "core.steps": (175741, 42067),
            "core.send": (35908, 72),
            "core.handle": (35908, 23739),
            "core.receive": (35655, 149),
            "core.verdicts": (79911, 654),
            "core.quiet": (57659, 285),
        }


def test_a_mapped_step_is_the_step_function_under_verify():
    """Verify mode re-runs every cached step: a Mapped outcome applied to a state is what the
    step function gives there, at every hit (one hard crash: the map runs from the first level;
    an apply that forgot the other brokers' checkpoints fails here)."""
    cfg = Config(rf=3, minisr=2, max_records=1, max_hard_crashes=1, symmetry=False)
    model = FastModel(cfg, verify=1.0)
    result = explore(model, InvariantSuite(cfg), limits=Limits(max_states=20000))
    assert result.distinct_states >= 20000
    assert cache_stats(model.fast)["BrokerCrash"]["misses"] > 0
