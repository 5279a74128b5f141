"""The fast engines against the reference engine (a plain BFS over the step functions),
and mutation tests: a step changed at run time must change what every engine finds, the
same way, with no verify mode and no table to update."""

from __future__ import annotations

from dataclasses import replace as dc_replace

import pytest
from kafkamc.checker.explorer import explore
from kafkamc.checker.fast import FastModel
from kafkamc.checker.reference import explore_reference
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec import fetch as fe
from kafkamc.spec import next as spec_next
from kafkamc.spec.broker_lifecycle import BrokerHeartbeat
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.protocol import ERAS, preset
from kafkamc.spec.rpc import RoundTrip
from kafkamc.spec.state import replace
from kafkamc.traces.trace import format_action

PINNED = [
    dict(rf=1, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1),
    dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1),
    dict(rf=2, minisr=2),
    dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1),
    dict(rf=2, minisr=1, unclean=True),
    dict(rf=3, minisr=2, acks="1", max_records=1),
    dict(rf=1, minisr=1),
    dict(rf=2, minisr=2, max_hard_crashes=2),
    pytest.param(dict(rf=3, minisr=2, max_records=1), marks=pytest.mark.slow),
    pytest.param(
        dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_fences=1),
        marks=pytest.mark.slow,
    ),
    pytest.param(dict(rf=3, minisr=2), marks=pytest.mark.slow, id="default-model"),  # kafkamc check --rf 3 --minisr 2
]


def outcome(result) -> tuple:
    v = result.violation
    path = [format_action(a) for a, _ in v.trace[1:]] if v else None
    return (
        result.verdict,
        result.distinct_states,
        result.depth,
        v and v.invariant,
        v and v.length,
        path,
        {name: len(t) - 1 for name, t in result.reached.items()},
    )


def both(cfg: Config, actions=None) -> tuple:
    fast = explore(FastModel(cfg, actions=actions), InvariantSuite(cfg))
    ref = explore_reference(Model(cfg, actions), InvariantSuite(cfg))
    return outcome(fast), outcome(ref)


@pytest.mark.parametrize("kw", PINNED)
def test_fast_engine_agrees_with_the_reference(kw):
    """Counts, depth, verdict, the violated invariant and its exact shortest path, and the
    shortest witness of every reachability property."""
    fast, ref = both(Config(**kw))
    assert fast == ref


@pytest.mark.parametrize("era", ERAS)
def test_every_era_agrees_with_the_reference(era):
    fast, ref = both(
        Config(
            rf=2,
            minisr=2,
            max_records=1,
            max_clean_shutdowns=1,
            max_hard_crashes=0,
            max_isr_shrinks=1,
            protocol=preset(era),
        )
    )
    assert fast == ref


# ---------------------------------------------------------------- mutations

SMALL = dict(rf=2, minisr=2, max_records=1, max_hard_crashes=0, max_clean_shutdowns=0, max_fences=1, max_isr_shrinks=1)


def mutated(action_type, step) -> tuple:
    return tuple(dc_replace(a, step=step) if a.type is action_type else a for a in spec_next.NEXT)


def test_an_action_that_never_fires_changes_every_engine_alike():
    cfg = Config(**SMALL)
    plain, _ = both(cfg)
    never = mutated(BrokerHeartbeat, lambda cfg, state, a: None)
    fast, ref = both(cfg, never)
    assert fast == ref
    assert fast[1] != plain[1]


def test_a_guard_that_reads_more_is_followed_without_verify_mode():
    """The heartbeat's guard now also reads the ghost, which it never read before: a cache
    keyed on a hand-kept footprint would replay stale outcomes (the review's 32,530 vs 33,266)."""
    cfg = Config(**SMALL)
    original = next(a.step for a in spec_next.NEXT if a.type is BrokerHeartbeat)

    def guarded(cfg, state, a):
        return original(cfg, state, a) if state.ghost.hw_seen == 0 else None

    plain, _ = both(cfg)
    fast, ref = both(cfg, mutated(BrokerHeartbeat, guarded))
    assert fast == ref
    assert fast[1] != plain[1]


def test_a_changed_half_of_fetch_is_followed():
    """Fetch is cached in halves; a changed response handler (the follower keeps its stall)
    must reach the search through the same composition."""
    cfg = Config(**SMALL)

    def receive(cfg, state, a, resp):
        out = fe.handle_fetch_response(cfg, state, a, resp)
        was = state.broker(a.follower).stalled
        return out.with_broker(a.follower, replace(out.broker(a.follower), stalled=was))

    plain, _ = both(cfg)
    fast, ref = both(cfg, mutated(fe.Fetch, RoundTrip(fe.send_fetch, fe.handle_fetch, receive)))
    assert fast == ref
    assert fast[1] != plain[1]


def test_next_is_read_when_a_model_is_built(monkeypatch):
    """Changing spec.next.NEXT itself (no argument passed) reaches the fast engine too."""
    cfg = Config(**SMALL)
    plain = explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states
    monkeypatch.setattr(spec_next, "NEXT", mutated(BrokerHeartbeat, lambda cfg, state, a: None))
    fast = explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states
    ref = explore_reference(Model(cfg), InvariantSuite(cfg)).distinct_states
    assert fast == ref != plain
