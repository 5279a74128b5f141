"""The compiled evaluators and Z3 agree on states the real model reaches.

The search checks invariants with Python functions generated from the Z3 declarations;
Z3 itself is only asked to confirm and explain. This test samples states (and transitions)
reached by a plain BFS over the spec model in several configurations, safe and unsafe, and
checks that each compiled function gives the same truth value as Z3 evaluating the declared
formula. The unsafe configurations reach violating states, so both truth values are covered.
The reachability properties (invariants/reach.py) are compiled the same way: on sampled
witnesses and non-witnesses of each, the compiled function must agree with Z3's confirmation.

The selection is deterministic: a capped BFS in successor order, then every violating state
(thinned by a fixed stride when there are many) and an evenly spaced stride over the rest.
A Z3 evaluation costs about a millisecond, which is what bounds the sample size.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest
from helpers import bfs
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.protocol import preset

# Distinct states the BFS visits per configuration (cheap). Since a crashed broker waits for its
# session timeout, rf3-minisr1-unclean's first committed-data loss is BFS state ~10,100 (depth
# 8: each clean shutdown is followed by BrokerSessionTimeout) and rf2-minisr1-unclean-fence's
# first Recovered step ~9,500; at 6,000 neither was sampled.
EXPLORE = 12000
STATES = 500  # states sent to Z3 per configuration
MAX_BAD = 200  # of which at most this many violating ones
TRANSITIONS = 200  # (prev, next) pairs sent to Z3 per configuration
MAX_BAD_TRANSITIONS = 100
EXPLAIN_PER_INVARIANT = 3  # violating states per invariant that must also be explainable
REACH_PER_VALUE = 6  # per reachability property: witnessing and other steps sent to Z3

CONFIGS = {
    # The newest rules (ELR on) with the default bounds: one hard crash.
    "rf3-minisr2": Config(rf=3, minisr=2),
    # Two clean shutdowns of the ISR, then an unclean election of the lagging replica.
    "rf3-minisr1-unclean": Config(
        rf=3, minisr=1, unclean=True, max_clean_shutdowns=2, max_hard_crashes=0, track_down=True
    ),
    "rf3-acks1": Config(rf=3, minisr=2, acks="1"),
    "rf2-minisr1-unclean-fence": Config(rf=2, minisr=1, unclean=True, max_fences=1),
    # The oldest rules: no ELR (other WellFormed parts), the leader's HW exposed as is,
    # lag counted in messages, truncation to the HW.
    "rf2-minisr1-oldest": Config(rf=2, minisr=1, protocol=preset("oldest")),
}


def _stride(items: list, k: int) -> list:
    """k items spread evenly over `items` (all of them when there are at most k)."""
    if len(items) <= k:
        return list(items)
    step = len(items) / k
    return [items[int(i * step)] for i in range(k)]


def _pick(items: list, bad: list[bool], k: int, max_bad: int) -> list:
    """Every violating item (thinned to max_bad), then a stride over the others up to k."""
    bad_items = [x for x, b in zip(items, bad) if b]
    good_items = [x for x, b in zip(items, bad) if not b]
    chosen = _stride(bad_items, max_bad)
    return chosen + _stride(good_items, k - len(chosen))


class Sample:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.model = Model(cfg)
        self.suite = InvariantSuite(cfg)
        states, transitions = self._bfs()
        self.explored = len(states)
        check = self.suite.check_state
        step_ok = self.suite.action_invs[0].fn
        self.states = _pick(states, [check(s) is not None for s in states], STATES, MAX_BAD)
        self.transitions = _pick(
            transitions, [not step_ok(p, n) for p, n in transitions], TRANSITIONS, MAX_BAD_TRANSITIONS
        )
        # name -> (steps the compiled property finds true, steps it finds false), a stride of each.
        self.reach = {}
        for name, fn in self.suite.reach_functions():
            hit = [fn(p, n) for p, n in transitions]
            self.reach[name] = (
                _stride([t for t, h in zip(transitions, hit) if h], REACH_PER_VALUE),
                _stride([t for t, h in zip(transitions, hit) if not h], REACH_PER_VALUE),
            )

    def _bfs(self):
        """Plain BFS in successor order over the spec model (tests/helpers.py), capped at
        EXPLORE states. Every generated transition is kept, including those into already
        visited states."""
        states, transitions = [], []
        for prev, _action, nxt, new in bfs(self.model):
            if prev is not None:
                transitions.append((prev, nxt))
            if new:
                states.append(nxt)
                if len(states) >= EXPLORE:
                    break
        return states, transitions


@cache
def sample(key: str) -> Sample:
    return Sample(CONFIGS[key])


@pytest.mark.parametrize("key", list(CONFIGS))
def test_compiled_state_invariants_agree_with_z3(key):
    smp = sample(key)
    suite = smp.suite
    assert len(smp.states) == min(STATES, smp.explored)
    violations: Counter = Counter()
    examples: dict[str, list] = {}
    for i, state in enumerate(smp.states):
        for c in suite.state_invs:
            name = c.inv.name
            fast = c.fn(state)
            assert isinstance(fast, bool), (name, i)
            z3_says = suite.evaluate_z3(name, state)
            assert fast == z3_says, f"{key}: {name} compiled={fast} z3={z3_says} on sampled state {i}: {state}"
            if not fast:
                violations[name] += 1
                examples.setdefault(name, []).append(state)
    # A violating state must also be explainable: Z3 finds at least one false part.
    for name, bad in examples.items():
        for state in _stride(bad, EXPLAIN_PER_INVARIANT):
            assert suite.explain(name, state).parts
    if key == "rf3-minisr2":
        # The safe configuration: nothing is violated in what the BFS reached.
        assert not violations
    elif key == "rf3-acks1":
        assert violations["AckedWriteDurability"] > 0
    else:
        assert violations["NoCommittedDataLoss"] > 0
    if key == "rf2-minisr1-unclean-fence":
        for name in ("LeaderCompleteness", "AckedWriteDurability", "LogMatching", "ConsistentReads"):
            assert violations[name] > 0, name


@pytest.mark.parametrize("key", list(CONFIGS))
def test_compiled_action_invariant_agrees_with_z3(key):
    smp = sample(key)
    suite = smp.suite
    assert len(suite.action_invs) == 1
    c = suite.action_invs[0]
    name = c.inv.name
    assert name == "HighWatermarkMonotonic"
    violated = 0
    for i, (prev, nxt) in enumerate(smp.transitions):
        fast = c.fn(prev, nxt)
        assert isinstance(fast, bool)
        z3_says = suite.evaluate_z3(name, nxt, prev)
        assert fast == z3_says, f"{key}: {name} compiled={fast} z3={z3_says} on transition {i}: {prev} -> {nxt}"
        assert (suite.check_step(prev, nxt) == name) == (not fast)
        violated += not fast
    if key in ("rf2-minisr1-unclean-fence", "rf2-minisr1-oldest"):
        assert violated > 0


@pytest.mark.parametrize("key", list(CONFIGS))
def test_compiled_reach_properties_agree_with_z3(key):
    smp = sample(key)
    suite = smp.suite
    fns = dict(suite.reach_functions())
    assert list(smp.reach) == list(fns) and fns
    for name, (witnesses, others) in smp.reach.items():
        for expected, steps in ((True, witnesses), (False, others)):
            for i, (prev, nxt) in enumerate(steps):
                fast = fns[name](prev, nxt)
                assert isinstance(fast, bool) and fast is expected, (name, i)
                z3_says = suite.confirm_reached(name, nxt, prev)
                assert z3_says is expected, f"{key}: {name} compiled={fast} z3={z3_says} on step {i}: {prev} -> {nxt}"
    # Every configuration sees consumers' HW advance; the safe one also elects from the ELR.
    assert smp.reach["HighWatermarkAdvances"][0]
    if key == "rf3-minisr2":
        assert smp.reach["ElrElection"][0]


def test_reach_sample_is_not_vacuous():
    """Each reachability property is witnessed in some configuration, except an acknowledgement
    with all three brokers down: a write is acknowledged by a live leader."""
    names = {n for k in CONFIGS for n in sample(k).reach}
    witnessed = {n for k in CONFIGS for n, (w, _) in sample(k).reach.items() if w}
    assert names - witnessed == {"AckedWith3Down"}
    assert all(others for k in CONFIGS for _w, others in sample(k).reach.values())


def test_sample_is_large_and_not_vacuous():
    total_states = sum(len(sample(k).states) for k in CONFIGS)
    total_transitions = sum(len(sample(k).transitions) for k in CONFIGS)
    assert total_states >= 2000
    assert total_transitions >= 800
    violating = sum(1 for k in CONFIGS for s in sample(k).states if sample(k).suite.check_state(s))
    assert violating > 0
    bad_steps = sum(1 for k in CONFIGS for p, n in sample(k).transitions if sample(k).suite.check_step(p, n))
    assert bad_steps > 0


def test_sample_is_deterministic():
    """The same configuration gives the same sample in the same order."""
    key = "rf2-minisr1-unclean-fence"
    again = Sample(CONFIGS[key])
    assert [s.key() for s in again.states] == [s.key() for s in sample(key).states]


@pytest.mark.parametrize("key", list(CONFIGS))
def test_quiet_step_is_its_definition_on_both_branches(key):
    """The per-transition test, whose branch for an unchanged controller Z3 simplified, says
    exactly: every step invariant holds and none of the named reachability properties does."""
    smp = sample(key)
    suite = smp.suite
    reach = suite.reach_functions()
    steps = list(smp.transitions) + [t for w, o in smp.reach.values() for t in w + o]
    branches = set()
    for names in ([], [n for n, _ in reach]):
        quiet = suite.quiet_step(names)
        chosen = [fn for n, fn in reach if n in names]
        for prev, nxt in steps:
            expected = suite.check_step(prev, nxt) is None and not any(fn(prev, nxt) for fn in chosen)
            assert quiet(prev, nxt) == expected, (key, names, prev, nxt)
            branches.add(prev.controller is nxt.controller)
    assert branches == {True, False}
