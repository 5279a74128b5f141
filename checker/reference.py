"""The reference engine (`--engine reference`): a plain breadth-first search over the
spec's step functions, with no cache, no interning and no shortcut. It is the oracle the
fast engines are tested against; it is slow on purpose and simple enough to read at once.

Identity is the fingerprint of the canonical state's byte encoding (checker/codec.py).
Every state is kept with its parent, so a trace is read back directly, not replayed.
Every transition is checked against the step invariants and the reachability
properties, every new state against the state invariants, in the order the fast engines
use, so the first violation and every witness are the same ones.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable

from kafkamc.checker.codec import fingerprint
from kafkamc.checker.contract import Model
from kafkamc.checker.level import limit_reached
from kafkamc.checker.search import Limits, Result, Violation, progress_stats, verdict_of


def explore_reference(
    model: Model,
    checks=None,
    limits: Limits = Limits(),
    progress: Callable[[dict], None] | None = None,
    stop_when_reached: frozenset = frozenset(),
) -> Result:
    start = time.monotonic()
    key = lambda s: fingerprint(model.canonical(s))
    parent: dict = {}  # fingerprint -> (parent fingerprint or None, action, state)
    depth_of: dict = {}
    queue: deque = deque()
    generated, max_depth, stop_reason = 0, 0, None
    coverage: Counter = Counter()
    unreached = dict(checks.reach_functions()) if checks is not None else {}
    targets = set(stop_when_reached)
    witnesses: dict = {}  # name -> (fingerprint of the state before, action, state after)
    violation_at: tuple | None = None  # (invariant, kind, fingerprint, extra (action, state) or None)

    def trace(fp, extra=None) -> list:
        out = []
        while fp is not None:
            up, action, state = parent[fp]
            out.append((action, state))
            fp = up
        out.reverse()
        return out + ([extra] if extra else [])

    for s in model.initial_states():
        generated += 1
        fp = key(s)
        if fp in parent:
            continue
        parent[fp], depth_of[fp] = (None, None, s), 0
        bad = checks.check_state(s) if checks else None
        if bad:
            violation_at = (bad, "state", fp, None)
            break
        queue.append(fp)
    last_report = start
    try:
        while queue and violation_at is None and not (stop_when_reached and not targets):
            fp = queue.popleft()
            state, depth = parent[fp][2], depth_of[fp]
            if limits.max_depth is not None and depth >= limits.max_depth:
                if next(iter(model.successors(state)), None) is not None:
                    stop_reason = stop_reason or f"max depth {limits.max_depth}"
                continue
            for action, nxt in model.successors(state):
                generated += 1
                coverage[type(action).__name__] += 1
                bad = checks.check_step(state, nxt) if checks else None
                if bad:
                    violation_at = (bad, "action", fp, (action, nxt))
                    break
                for name in [n for n, fn in unreached.items() if fn(state, nxt)]:
                    del unreached[name]
                    witnesses[name] = (fp, action, nxt)
                    targets.discard(name)
                if stop_when_reached and not targets:
                    break
                child = key(nxt)
                if child in parent:
                    continue
                parent[child], depth_of[child] = (fp, action, nxt), depth + 1
                max_depth = max(max_depth, depth + 1)
                bad = checks.check_state(nxt) if checks else None
                if bad:
                    violation_at = (bad, "state", child, None)
                    break
                queue.append(child)
            now = time.monotonic()
            if progress is not None and now - last_report >= 1.0:
                progress(progress_stats(len(parent), generated, len(queue), max_depth, now - start))
                last_report = now
            stop_reason = limit_reached(limits, len(parent), start)
            if stop_reason is not None:
                break
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    violation = None
    if violation_at is not None:
        name, kind, fp, extra = violation_at
        violation = Violation(name, kind, trace(fp, extra))
    reached = {name: trace(fp, (action, nxt)) for name, (fp, action, nxt) in witnesses.items()}
    elapsed = time.monotonic() - start
    if progress is not None:
        progress(progress_stats(len(parent), generated, len(queue), max_depth, elapsed, final=True))
    verdict = verdict_of(violation, bool(stop_when_reached) and not targets, stop_reason)
    return Result(verdict, "bfs", len(parent), generated, max_depth, elapsed, stop_reason, violation, coverage, reached)
