"""Breadth-first search over exact states, straight from the spec.

A state is its own key: the State records themselves go into the dict, compared and hashed
as Python compares them (no fingerprint, no interning, no canonical form during the search).
Each state keeps its parent and the action that reached it first, so a trace is read back
from real states, never replayed. Successors come from spec.model.Model, in Next's order.

Checks run in the order the fast engines use them (checker/engines/explorer.py), so where the two
agree on what is reachable they stop at the same depth: each initial state and each new
state against the state invariants; every transition against the action properties, then
against the reachability properties not yet seen. With symmetry on, the search still visits
every relabelling; oracle/classes.py counts the classes once it is done, and that count is
what the fast engines' state count must equal.

It is slow on purpose: every state is hashed as a whole and read into a dict of values, and
every property is interpreted from its tree.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkamc.oracle.checks import Checks
from kafkamc.oracle.classes import count as count_classes
from kafkamc.spec.config import Config
from kafkamc.spec.hw import observe
from kafkamc.spec.model import Model
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.state import State


@dataclass(frozen=True)
class OracleLimits:
    max_states: int | None = None  # exact states
    time_limit: float | None = None  # seconds
    max_depth: int | None = None  # transitions from an initial state


@dataclass
class OracleResult:
    verdict: str  # "holds", "violated", "reached" (every target seen) or "incomplete"
    states: int  # exact states found
    classes: int  # their symmetry classes (every broker relabelling)
    open_orbits: int  # reached states with a relabelling never reached: 0 for a symmetric model
    generated: int  # transitions, initial states included
    depth: int
    elapsed_s: float
    stop_reason: str | None = None
    violation: str | None = None  # the invariant
    kind: str | None = None  # "state" or "action"
    trace: list = field(default_factory=list)  # [(None, s0), (action, s1), ...]
    coverage: Counter = field(default_factory=Counter)  # transitions per action type name
    reached: dict = field(default_factory=dict)  # reachability property -> witness trace
    symmetry: bool = True

    @property
    def counted(self) -> int:
        """What a fast engine's state count must equal: classes with symmetry, else states."""
        return self.classes if self.symmetry else self.states

    @property
    def states_per_second(self) -> float:
        return self.states / self.elapsed_s if self.elapsed_s > 0 else 0.0


def _stats(distinct: int, generated: int, queue: int, depth: int, elapsed: float, final: bool = False) -> dict:
    """A progress report with the keys the command line's display reads."""
    rate = distinct / elapsed if elapsed > 0 else 0.0
    return dict(
        distinct=distinct, generated=generated, queue=queue, depth=depth, elapsed=elapsed, rate=rate, final=final
    )


class _Stop(Exception):
    """The search found what ends it (a violation, or every target reached)."""


def explore_oracle(
    cfg: Config,
    invariants: list[str] | None = None,
    properties=None,
    limits: OracleLimits = OracleLimits(),
    progress: Callable[[dict], None] | None = None,
    stop_when_reached: frozenset = frozenset(),
    actions=None,
    checks: Checks | None = None,
    observation=None,
) -> OracleResult:
    """Search cfg's model (Next and spec.hw.observe, or `actions` and `observation` when a test
    changes them) and check it."""
    start = time.monotonic()
    cfg = cfg.bounded(BOUNDS)  # what a property may read (cfg.max_records), whatever `actions` spend
    # prune=False: the reference trusts no action's declaration of when it may fire
    model = Model(cfg, actions, prune=False, observation=observe if observation is None else observation)
    checks = checks if checks is not None else Checks(cfg, invariants, properties)
    values, prev_values = checks.values, checks.prev_values
    parent: dict[State, tuple] = {}  # state -> (parent state or None, action, depth)
    queue: deque[State] = deque()
    coverage: Counter = Counter()
    unreached = {c.name for c in checks.reach}
    targets = set(stop_when_reached)
    witnesses: dict = {}  # name -> (state before, action, state after)
    found: tuple | None = None  # (invariant, kind, last state, extra (action, state) or None)
    generated = max_depth = 0
    stop_reason = None

    def trace(s, extra=None) -> list:
        out = []
        while s is not None:
            up, action, _ = parent[s]
            out.append((action, s))
            s = up
        out.reverse()
        return out + ([extra] if extra else [])

    try:
        for s in model.initial_states():
            generated += 1
            if s in parent:
                continue
            parent[s] = (None, None, 0)
            bad = checks.failed_state(values(s))
            if bad:
                found = (bad, "state", s, None)
                raise _Stop
            queue.append(s)
        last_report = start
        while queue and not (stop_when_reached and not targets):
            s = queue.popleft()
            depth = parent[s][2]
            if limits.max_depth is not None and depth >= limits.max_depth:
                if next(iter(model.successors(s)), None) is not None:
                    stop_reason = stop_reason or f"max depth {limits.max_depth}"
                continue
            before = prev_values(s)
            for action, nxt in model.successors(s):
                generated += 1
                coverage[type(action).__name__] += 1
                after = values(nxt)
                env = {**before, **after}
                bad = checks.failed_step(env)
                if bad:
                    found = (bad, "action", s, (action, nxt))
                    raise _Stop
                if unreached:
                    for name in checks.reached(env, unreached):
                        unreached.discard(name)
                        witnesses[name] = (s, action, nxt)
                        targets.discard(name)
                    if stop_when_reached and not targets:
                        raise _Stop
                if nxt in parent:
                    continue
                parent[nxt] = (s, action, depth + 1)
                max_depth = max(max_depth, depth + 1)
                bad = checks.failed_state(after)
                if bad:
                    found = (bad, "state", nxt, None)
                    raise _Stop
                queue.append(nxt)
            now = time.monotonic()
            if progress is not None and now - last_report >= 1.0:
                progress(_stats(len(parent), generated, len(queue), max_depth, now - start))
                last_report = now
            stop_reason = _limit(limits, len(parent), start) or stop_reason
            if stop_reason is not None and not stop_reason.startswith("max depth"):
                break
    except _Stop:
        pass
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    sym = count_classes(parent, parent, len(cfg.brokers))
    elapsed = time.monotonic() - start
    if progress is not None:
        progress(_stats(len(parent), generated, len(queue), max_depth, elapsed, final=True))
    violation = kind = None
    path: list = []
    if found is not None:
        violation, kind, last, extra = found
        path = trace(last, extra)
    reached = {name: trace(before_s, (action, after_s)) for name, (before_s, action, after_s) in witnesses.items()}
    if violation is not None:
        verdict = "violated"
    elif stop_when_reached and not targets:
        verdict = "reached"
    else:
        verdict = "incomplete" if stop_reason is not None else "holds"
    return OracleResult(
        verdict,
        len(parent),
        sym.classes,
        sym.open_orbits,
        generated,
        max_depth,
        elapsed,
        stop_reason,
        violation,
        kind,
        path,
        coverage,
        reached,
        cfg.symmetry,
    )


def _limit(limits: OracleLimits, distinct: int, start: float) -> str | None:
    """Why the search must stop now, by the state count or the clock."""
    if limits.max_states is not None and distinct >= limits.max_states:
        return f"max states {limits.max_states}"
    if limits.time_limit is not None and time.monotonic() - start >= limits.time_limit:
        return f"time limit {limits.time_limit:g}s"
    return None
