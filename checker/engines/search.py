"""What every engine shares: limits, the result and its verdict, violations, and the
replay that turns a path of successor indices back into a trace.

The engines differ only in how they expand states (one process, forked workers, Spark
executors; jobs/reference.py gives the oracle's result this form too); what they report is
built here.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

STRATEGIES = ("bfs", "dfs")


@dataclass(frozen=True)
class Limits:
    max_states: int | None = None  # distinct states
    time_limit: float | None = None  # seconds
    max_depth: int | None = None  # transitions from an initial state


@dataclass
class Violation:
    invariant: str
    kind: str  # "state", "action" or "liveness"
    trace: list  # [(None, initial state), (action, state), ...]
    loop: int | None = None  # a lasso's cycle starts at trace[loop]; the last state equals it

    @property
    def length(self) -> int:
        """Number of transitions in the trace."""
        return len(self.trace) - 1


@dataclass
class Result:
    verdict: str  # "holds" | "violated" | "incomplete"
    strategy: str
    distinct_states: int
    states_generated: int
    depth: int
    elapsed_s: float
    stop_reason: str | None = None  # why an incomplete search stopped
    violation: Violation | None = None
    coverage: Counter = field(default_factory=Counter)
    reached: dict = field(default_factory=dict)  # reachability property -> witness trace
    visited_bytes: int = 0  # the visited set and parent pointers, in bytes
    worker_peak_mib: float = 0.0  # Spark: the largest Python worker's peak resident memory
    peak_rss: int = 0  # peak resident memory in bytes, summed over the search's processes (0: unknown)
    core: str | None = None  # one process: "native" or "python" (checker/engines/explorer.py explore)
    core_note: str = ""  # why the Python engine ran where the native core was not asked away

    @property
    def bytes_per_state(self) -> float:
        return self.visited_bytes / self.distinct_states if self.distinct_states else 0.0

    @property
    def peak_bytes_per_state(self) -> float:
        return self.peak_rss / self.distinct_states if self.distinct_states and self.peak_rss else 0.0

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def collision_probability(self) -> float:
        """Optimistic chance that two distinct states shared a fingerprint (as TLC estimates it)."""
        n, g = self.distinct_states, self.states_generated
        return n * max(g - n, 0) / 2.0**64


def replay_path(model, init_index: int, steps: list[int]) -> list:
    """Re-execute the model along successor indices: [(None, s0), (action, s1), ...]."""
    state = model.initial_states()[init_index]
    trace = [(None, state)]
    for i in steps:
        for j, (action, nxt) in enumerate(model.successors(state)):
            if j == i:
                state = nxt
                trace.append((action, state))
                break
        else:
            raise RuntimeError("the model is not deterministic: a recorded successor is missing")
    return trace


def verdict_of(violation: Violation | None, reached_all: bool, stop_reason: str | None) -> str:
    """violated > reached (every target of a reachability search seen) > incomplete > holds."""
    if violation is not None:
        return "violated"
    if reached_all:
        return "reached"
    if stop_reason is not None:
        return "incomplete"
    return "holds"


def progress_stats(distinct: int, generated: int, queue: int, depth: int, elapsed: float, final: bool = False) -> dict:
    """One progress report, as every engine sends it to checker/engines/progress.py."""
    return {
        "distinct": distinct,
        "generated": generated,
        "queue": queue,
        "depth": depth,
        "elapsed": elapsed,
        "rate": distinct / elapsed if elapsed > 0 else 0.0,
        "final": final,
    }


def traces_of(model, path, witnesses: dict, violation_at) -> tuple[dict, Violation | None]:
    """The one-process searches' traces, replayed along parent pointers: each witness
    (name -> (node, successor index)) and the violation ((invariant, kind, node, extra
    successor index or None), or None). `path(node)` gives (initial index, successor indices)."""
    reached = {}
    for name, (node, index) in witnesses.items():
        init_index, steps = path(node)
        reached[name] = replay_path(model, init_index, [*steps, index])
    violation = None
    if violation_at is not None:
        name, kind, node, extra = violation_at
        init_index, steps = path(node)
        violation = Violation(name, kind, replay_path(model, init_index, [*steps, *([] if extra is None else [extra])]))
    return reached, violation


def take_hits(unreached: list, prev, nxt, node: int, index: int, witnesses: dict, targets: set) -> bool:
    """The reachability properties a non-quiet step reaches: each leaves `unreached` and gets
    its witness (node, index); whether any did (the caller's quiet test must then change)."""
    hits = [it for it in unreached if it[1](prev, nxt)]
    for item in hits:
        unreached.remove(item)
        witnesses[item[0]] = (node, index)
        targets.discard(item[0])
    return bool(hits)


class Ticker:
    """What the one-process searches do after each state they expand: every 64 states, report
    progress and read the clock against the time limit; every state, the state limit."""

    def __init__(self, limits: Limits, start: float, progress, stats, every: float):
        self.limits, self.start, self.progress, self.stats, self.every = limits, start, progress, stats, every
        self.next_report = start + every
        self.ticks = 0

    EVERY = 64  # states expanded between two readings of the clock (the native core's `run` too)

    def stop(self, distinct: int) -> str | None:
        """Why the search must stop after this state, or None."""
        self.ticks += 1
        return (self.timed() if self.ticks % self.EVERY == 0 else None) or self.capped(distinct)

    def timed(self) -> str | None:
        """Every EVERY states: report progress, and read the clock against the time limit."""
        now = time.monotonic()
        if self.progress is not None and now >= self.next_report:
            self.progress(self.stats())
            self.next_report = now + self.every
        limit = self.limits.time_limit
        return f"time limit {limit:g}s" if limit is not None and now - self.start >= limit else None

    def capped(self, distinct: int) -> str | None:
        cap = self.limits.max_states
        return f"max states {cap}" if cap is not None and distinct >= cap else None
