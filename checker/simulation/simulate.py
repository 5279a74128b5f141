"""Swarm simulation (`kafkamc check --simulate`): random walks from the initial states, every
invariant checked at every step, for bounds the exhaustive search cannot cover.

Walk i draws every choice from its own generator, seeded by (seed, i), so a walk is the
same whichever process runs it. Walks are taken in ranges (a Batch each); ranges added up
in index order, up to the first that meets a violation, give the run's numbers: the
smallest violating walk index wins, and what the walks after it did does not count. So one
process, forked --workers (checker/simulation/workers.py) and Spark executors
(checker/spark/simulate.py) report the same counts, states and trace for one seed.

The violating walk is shrunk (checker/simulation/shrink.py) before it becomes the counterexample.
TLC's -simulate mode walks the same way; Groce et al., "Swarm testing" (ISSTA 2012),
argue for many short, differently steered runs over one long one.
"""

from __future__ import annotations

import random
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkamc.checker.engines.search import Limits, Result, Violation, progress_stats, replay_path
from kafkamc.checker.simulation.shrink import shrink
from kafkamc.checker.store.visited import FingerprintSet

NO_VIOLATION = "no violation found"  # the verdict when every walk ran clean: never "holds"
DEADLINE_EVERY = 64  # steps between two looks at the clock inside a walk


@dataclass(frozen=True)
class Simulation:
    """What --simulate asks for: walks, each of at most `depth` steps, drawn from `seed`."""

    walks: int = 1000
    depth: int = 100
    seed: int = 0


class Found(NamedTuple):
    """The first violation of a range: the walk, its path as successor indices, what broke."""

    walk: int
    init: int
    path: tuple
    invariant: str
    kind: str  # "state" or "action"


class Walk(NamedTuple):
    init: int
    path: list  # successor index taken at each step
    fps: list  # fingerprint of every state on the walk, the initial one first
    generated: int  # successors enumerated along the way
    actions: list  # action type name of each step
    bad: tuple | None  # (invariant, kind) of the step that broke one
    deadlock: bool  # stopped at a state with no successor


@dataclass
class Batch:
    """What the walks start..stop-1 did (picklable: it comes back from workers and executors).
    A range stops at its first violation and at the deadline (cut: walks after it not run)."""

    start: int
    stop: int
    walks: int = 0
    steps: int = 0
    generated: int = 0
    deepest: int = 0
    deadlocks: int = 0
    coverage: Counter = field(default_factory=Counter)
    fps: array = field(default_factory=lambda: array("Q"))  # distinct fingerprints, sorted
    found: Found | None = None
    cut: bool = False


def walk_rng(seed: int, i: int) -> random.Random:
    """Walk i's own generator: a string seed is hashed with SHA-512, the same everywhere."""
    return random.Random(f"{seed}:{i}")


def walk(model, suite, inits: list, rng: random.Random, depth: int, deadline: float | None = None) -> Walk | None:
    """One random walk of at most `depth` steps, uniform among the successors at each step,
    ending at the first broken invariant (step invariants first, as the search checks them)
    or a deadlock. None when the deadline (time.time()) passed during it."""
    init = rng.randrange(len(inits))
    state = inits[init]
    path: list = []
    fps = [model.fingerprint(state)]
    actions: list = []
    generated = 0
    bad = suite.check_state(state)
    if bad:
        return Walk(init, path, fps, generated, actions, (bad, "state"), False)
    for step in range(depth):
        if deadline is not None and step % DEADLINE_EVERY == DEADLINE_EVERY - 1 and time.time() >= deadline:
            return None
        succ = list(model.successors(state))  # fingerprinted below only the one taken: canonical forms cost
        generated += len(succ)
        if not succ:
            return Walk(init, path, fps, generated, actions, None, True)
        j = rng.randrange(len(succ))
        action, nxt = succ[j]
        path.append(j)
        fps.append(model.fingerprint(nxt))
        actions.append(type(action).__name__)
        bad, kind = suite.check_step(state, nxt), "action"
        if not bad:
            bad, kind = suite.check_state(nxt), "state"
        state = nxt
        if bad:
            return Walk(init, path, fps, generated, actions, (bad, kind), False)
    return Walk(init, path, fps, generated, actions, None, False)


def run_range(model, suite, seed: int, start: int, stop: int, depth: int, deadline: float | None = None) -> Batch:
    """Walks start..stop-1 in order, up to the first violation or the deadline."""
    inits = model.initial_states()
    out = Batch(start, stop)
    seen: set = set()
    for i in range(start, stop):
        late = deadline is not None and time.time() >= deadline
        w = None if late else walk(model, suite, inits, walk_rng(seed, i), depth, deadline)
        if w is None:
            out.cut = True
            break
        out.walks += 1
        out.steps += len(w.path)
        out.generated += w.generated + 1  # the initial state drawn, as the search counts it
        out.deepest = max(out.deepest, len(w.path))
        out.deadlocks += w.deadlock
        out.coverage.update(w.actions)
        seen.update(w.fps)
        if w.bad is not None:
            out.found = Found(i, w.init, tuple(w.path), *w.bad)
            break
    out.fps = array("Q", sorted(seen))
    return out


def ranges(start: int, stop: int, size: int) -> list[tuple[int, int]]:
    return [(a, min(a + size, stop)) for a in range(start, stop, size)]


class Tally:
    """Batches added in walk-index order: the run's numbers, exact whatever the split."""

    def __init__(self, sim: Simulation, limits: Limits = Limits(), start: float | None = None):
        self.sim, self.limits = sim, limits
        self.start = time.monotonic() if start is None else start
        self.walks = self.steps = self.generated = self.deepest = self.deadlocks = 0
        self.coverage: Counter = Counter()
        self.fps = FingerprintSet()
        self.found: Found | None = None
        self.stop_reason: str | None = None

    def add(self, b: Batch) -> bool:
        """Count a batch; True when nothing after it counts (a violation, or the time is up)."""
        if self.done:
            return True
        self.walks += b.walks
        self.steps += b.steps
        self.generated += b.generated
        self.deepest = max(self.deepest, b.deepest)
        self.deadlocks += b.deadlocks
        self.coverage.update(b.coverage)
        for fp in b.fps:
            self.fps.add(fp)
        self.found = b.found
        if b.cut and b.found is None:
            self.stop_reason = f"time limit {self.limits.time_limit:g}s" if self.limits.time_limit else "time limit"
        return self.done

    @property
    def done(self) -> bool:
        return self.found is not None or self.stop_reason is not None

    def stats(self, final: bool = False) -> dict:
        """A progress report: queue is the walks not yet taken."""
        left = self.sim.walks - self.walks
        return progress_stats(len(self.fps), self.generated, left, self.deepest, time.monotonic() - self.start, final)


@dataclass
class SimResult(Result):
    """A Result with the simulation's own numbers; its verdict is never "holds"."""

    sim: Simulation = field(default_factory=Simulation)
    walks: int = 0
    steps: int = 0
    deadlocks: int = 0
    violating_walk: int | None = None
    raw_length: int | None = None  # the violating walk's length before shrinking
    shrink_s: float = 0.0

    @property
    def simulation(self) -> dict:
        s = self.elapsed_s - self.shrink_s
        return {
            "seed": self.sim.seed,
            "walks_asked": self.sim.walks,
            "walk_depth": self.sim.depth,
            "walks": self.walks,
            "steps": self.steps,
            "deepest": self.depth,
            "deadlocks": self.deadlocks,
            "distinct_states_seen": self.distinct_states,
            "walks_per_s": round(self.walks / s, 1) if s > 0 else 0.0,
            "steps_per_s": round(self.steps / s, 1) if s > 0 else 0.0,
            "violating_walk": self.violating_walk,
            "raw_length": self.raw_length,
            "shrink_s": round(self.shrink_s, 3),
        }


def finish(model, suite, tally: Tally) -> SimResult:
    """The Result of a tally: the first violating walk shrunk and replayed into a trace."""
    violation, raw, shrink_started = None, None, time.monotonic()
    f = tally.found
    if f is not None:
        raw = len(f.path)
        steps = shrink(model, suite, f.init, list(f.path), f.invariant)
        kind = "action" if f.invariant in {c.inv.name for c in suite.action_invs} else "state"
        violation = Violation(f.invariant, kind, replay_path(model, f.init, steps))
    shrink_s = time.monotonic() - shrink_started if f is not None else 0.0
    reason = tally.stop_reason
    verdict = "violated" if violation else "incomplete" if reason else NO_VIOLATION
    return SimResult(
        verdict,
        "simulate",
        len(tally.fps),
        tally.generated,
        tally.deepest,
        time.monotonic() - tally.start,
        None if violation else reason,
        violation,
        tally.coverage,
        visited_bytes=tally.fps.nbytes,
        sim=tally.sim,
        walks=tally.walks,
        steps=tally.steps,
        deadlocks=tally.deadlocks,
        violating_walk=None if f is None else f.walk,
        raw_length=raw,
        shrink_s=shrink_s,
    )


def deadline_of(limits: Limits) -> float | None:
    """The time limit as a wall-clock deadline: other processes and machines read it."""
    return None if limits.time_limit is None else time.time() + limits.time_limit


def gather(tally: Tally, batches: Iterable[Batch], progress: Callable[[dict], None] | None, every: float = 1.0) -> None:
    """Add batches in order until one ends the run; Ctrl-C keeps what was counted."""
    next_report = time.monotonic() + every
    try:
        for b in batches:
            if tally.add(b):
                break
            if progress is not None and time.monotonic() >= next_report:
                progress(tally.stats())
                next_report = time.monotonic() + every
    except KeyboardInterrupt:
        tally.stop_reason = "interrupted"
    if progress is not None:
        progress(tally.stats(final=True))
