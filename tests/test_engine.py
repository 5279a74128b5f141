"""The explorer on toy models with exactly known state spaces, apart from Kafka."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import product

import pytest
from kafkamc.checker.engines.explorer import Limits, explore


@dataclass(frozen=True)
class Inc:
    var: str


class Grid:
    """Two counters in [0, n): each step increments one. n*n states, diameter 2(n-1)."""

    def __init__(self, n: int):
        self.n = n

    def initial_states(self):
        return [(0, 0)]

    def successors(self, s):
        x, y = s
        if x + 1 < self.n:
            yield Inc("x"), (x + 1, y)
        if y + 1 < self.n:
            yield Inc("y"), (x, y + 1)

    def fingerprint(self, s):
        return int.from_bytes(hashlib.blake2b(repr(s).encode(), digest_size=8).digest(), "little")


class SumBelow:
    def __init__(self, k):
        self.k = k

    def check_state(self, s):
        return None if s[0] + s[1] < self.k else "SumBelow"

    def check_step(self, p, s):
        return None


class NeverTwoAtOnce:
    """Holds on every step of a Grid; records each (state, next) it is asked about."""

    def __init__(self):
        self.checked = set()

    def check_state(self, s):
        return None

    def check_step(self, p, s):
        self.checked.add((p, s))
        return None if (s[0] - p[0]) + (s[1] - p[1]) == 1 else "OneStep"


class NotThatStep:
    """A step property that fails on one transition only, (2, 1) -> (2, 2), a step into a state
    the search also reaches another way: only a search that checks that very step reports it."""

    BAD = ((2, 1), (2, 2))

    def check_state(self, s):
        return None

    def check_step(self, p, s):
        return "NotThatStep" if (p, s) == self.BAD else None


@pytest.mark.parametrize("strategy", ["bfs", "dfs"])
@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_grid_counts(strategy, n):
    r = explore(Grid(n), None, strategy)
    assert r.verdict == "holds"
    assert r.distinct_states == n * n
    assert r.states_generated == 1 + 2 * n * (n - 1)
    assert r.depth == 2 * (n - 1)
    assert r.coverage["Inc"] == 2 * n * (n - 1)


def test_bfs_counterexample_is_shortest_and_replays():
    r = explore(Grid(10), SumBelow(7), "bfs")
    assert r.verdict == "violated"
    v = r.violation
    assert v.invariant == "SumBelow" and v.length == 7
    assert v.trace[0] == (None, (0, 0))
    assert sum(v.trace[-1][1]) == 7
    for (_, a), (_, b) in zip(v.trace, v.trace[1:]):
        assert sum(b) == sum(a) + 1


def test_dfs_finds_a_violation_too():
    r = explore(Grid(10), SumBelow(7), "dfs")
    assert r.verdict == "violated" and sum(r.violation.trace[-1][1]) >= 7


@pytest.mark.parametrize("strategy", ["bfs", "dfs"])
def test_action_property_checked_on_every_transition(strategy):
    """Every transition, into a new state or one seen before, is put to check_step."""
    checks = NeverTwoAtOnce()
    r = explore(Grid(4), checks, strategy)
    assert r.verdict == "holds"
    every = {(s, t) for s in product(range(4), repeat=2) for _, t in Grid(4).successors(s)}
    assert len(every) == r.states_generated - 1 == 24
    assert checks.checked == every


@pytest.mark.parametrize("strategy", ["bfs", "dfs"])
def test_failing_step_is_reported_at_that_transition(strategy):
    r = explore(Grid(4), NotThatStep(), strategy)
    assert r.verdict == "violated"
    v = r.violation
    assert (v.invariant, v.kind) == ("NotThatStep", "action")
    assert v.trace[0][0] is None and v.trace[0][1] == (0, 0)
    assert (v.trace[-2][1], v.trace[-1][1]) == NotThatStep.BAD and v.trace[-1][0] == Inc("y")
    if strategy == "bfs":
        # The shortest way to (2, 1) in successor order (x before y), then the flagged step.
        assert v.trace == [
            (None, (0, 0)),
            (Inc("x"), (1, 0)),
            (Inc("x"), (2, 0)),
            (Inc("y"), (2, 1)),
            (Inc("y"), (2, 2)),
        ]


def test_limits_give_incomplete_with_what_was_found():
    r = explore(Grid(50), None, "bfs", Limits(max_states=100))
    assert r.verdict == "incomplete" and r.stop_reason == "max states 100"
    assert 100 <= r.distinct_states < 2500
    r = explore(Grid(50), None, "bfs", Limits(max_depth=3))
    assert r.verdict == "incomplete" and r.distinct_states == 10  # 1 + 2 + 3 + 4 states within depth 3
    r = explore(Grid(400), None, "bfs", Limits(time_limit=0.05))
    assert r.verdict == "incomplete" and r.stop_reason.startswith("time limit")


def test_progress_is_reported():
    seen = []
    explore(Grid(30), None, "bfs", progress=seen.append, progress_every=0.0)
    assert seen and seen[-1]["final"] and seen[-1]["distinct"] == 900
    assert {"distinct", "generated", "queue", "depth", "rate"} <= set(seen[0])


def test_interrupt_returns_what_was_found():
    class Interrupting(Grid):
        def successors(self, s):
            if s == (3, 3):
                raise KeyboardInterrupt
            yield from super().successors(s)

    r = explore(Interrupting(10), None, "bfs")
    assert r.verdict == "incomplete" and r.stop_reason == "interrupted" and r.distinct_states > 10
