"""Explicit-state search over any model that keeps the contract of kafkamc.spec.model.Model.

The visited set holds 64-bit fingerprints in a flat table (checker/store/visited.py); per node
it keeps only the parent's node number and the index of the transition among the parent's
successors.
A trace is rebuilt by replaying the model along those indices, so states need not be kept.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager

from kafkamc.checker.cache.fast import UNKNOWN, screened
from kafkamc.checker.core.native_search import core_for, explore_native
from kafkamc.checker.engines.search import STRATEGIES, Limits, Result, Ticker, take_hits, traces_of, verdict_of
from kafkamc.checker.store.frontier import queue_for
from kafkamc.checker.store.memory import map_large_blocks, peak_rss
from kafkamc.checker.store.visited import FingerprintSet, Nodes


@contextmanager
def cyclic_gc_paused():
    """The search allocates millions of tuples that never form cycles and live long (caches,
    queue); the cyclic collector rescans them all, again and again, to find nothing: a
    fifth of the run time. Reference counting still frees everything as usual.

    Afterwards the survivors (the model's caches, mostly) are frozen out of the collector's
    sight: the first collection after re-enabling it would otherwise walk all of them, which
    took 1.6 s after the default search without symmetry."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.enable()


def explore(
    model,
    checks=None,
    strategy: str = "bfs",
    limits: Limits = Limits(),
    progress: Callable[[dict], None] | None = None,
    progress_every: float = 1.0,
    stop_when_reached: frozenset = frozenset(),
    recording=None,
    engine: str = "auto",
) -> Result:
    """Enumerate reachable states; stop at the first invariant violation or at a limit.

    Reachability properties of `checks` (reach_functions) are tried on every step until
    each is first seen; the search also stops once every name in stop_when_reached is.
    `recording` (checker/liveness/graph.py), breadth-first only: record the liveness graph on the way.
    engine "auto": the native core (checker/core/native_search.py) where it is built and serves
    this search, else this module's loop, the Python engine, which "python" asks for; the
    result's `core` says which ran, and why not the core.
    """
    core, note = (None, "") if engine == "python" else core_for(model, checks, strategy, limits, recording)
    map_large_blocks()
    with cyclic_gc_paused():
        if core is not None:
            result = explore_native(core, model, checks, limits, progress, progress_every, stop_when_reached)
        else:
            result = _explore(model, checks, strategy, limits, progress, progress_every, stop_when_reached, recording)
    result.core, result.core_note = ("native" if core is not None else "python"), note
    return result


def _explore(model, checks, strategy, limits, progress, progress_every, stop_when_reached, recording) -> Result:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    start = time.monotonic()
    fp_of = model.fingerprint
    visited = FingerprintSet()
    is_new = visited.add
    nodes = Nodes()
    if hasattr(model, "transitions"):
        transitions = model.transitions
    else:
        expand = (
            model.expand if hasattr(model, "expand") else (lambda s: ((a, n, fp_of(n)) for a, n in model.successors(s)))
        )
        transitions = lambda s, is_new, quiet, fired, known, edge: screened(  # noqa: E731
            expand(s), s, is_new, quiet, fired, edge
        )
    # Transitions per action type; names are looked up once, at the end. A plain dict with
    # every type the model declares: a Counter's += cost 2.5 times as much, once per transition.
    fired: dict = dict.fromkeys(model.action_types() if hasattr(model, "action_types") else (), 0)
    coverage: Counter = Counter()
    pending = queue_for(model, lifo=strategy != "bfs")  # checker/store/frontier.py: states as numbers
    take, put = pending.take, pending.put
    initial_generated = 0  # the rest of the generated states are counted in fired
    max_depth = 0
    stop_reason = None
    violation_at = None  # (invariant, kind, node, extra step or None)
    check_state = checks.check_state if checks else (lambda s: None)
    state_tests: dict = {}  # changed components -> fn(state), true when no state invariant fails (the
    # suite caches them too; this spares a method call per new state)

    def state_test(changed: int):
        """A new state differs from its parent, which passed every state invariant, only in
        the `changed` components: the suite tests only the invariants' parts that read them."""
        if checks is not None and hasattr(checks, "state_test"):
            fn = checks.state_test(changed)
        else:
            fn = lambda s: not check_state(s)
        state_tests[changed] = fn
        return fn

    check_step = checks.check_step if checks else (lambda p, s: None)
    unreached = list(checks.reach_functions()) if checks is not None and hasattr(checks, "reach_functions") else []
    witnesses: dict = {}  # name -> (node, successor index)

    def quiet_step(items: list):
        """One test per transition for 'no step invariant fails and no unreached property holds'."""
        if checks is not None and hasattr(checks, "quiet_step"):
            return checks.quiet_step([name for name, _ in items])
        return lambda p, s: not check_step(p, s) and not any(fn(p, s) for _, fn in items)

    quiet = quiet_step(unreached)
    targets = set(stop_when_reached)

    def generated() -> int:
        return initial_generated + sum(fired.values())

    def stats(final: bool = False) -> dict:
        el = time.monotonic() - start
        return {
            "distinct": len(visited),
            "generated": generated(),
            "queue": len(pending),
            "depth": max_depth,
            "elapsed": el,
            "rate": len(visited) / el if el > 0 else 0.0,
            "final": final,
        }

    ticker = Ticker(limits, start, progress, stats, progress_every)

    graph = edge = None
    if recording is not None:
        if strategy != "bfs":
            raise ValueError("the liveness graph is recorded breadth-first")
        graph = recording.part()
        edge = graph.edge
    for i, s in enumerate(model.initial_states()):
        initial_generated += 1
        fp = fp_of(s)
        if not is_new(fp):
            continue
        if recording is not None:
            recording.initial.append((fp, i))
        node = nodes.add(-1, i)
        bad = check_state(s)
        if bad:
            violation_at = (bad, "state", node, None)
            break
        put(s, node, 0, None)

    try:
        while pending and violation_at is None and not (stop_when_reached and not targets):
            state, node, depth, known = take()
            if limits.max_depth is not None and depth >= limits.max_depth:
                if next(iter(model.successors(state)), None) is not None:
                    stop_reason = stop_reason or f"max depth {limits.max_depth}"
                continue
            if graph is not None:
                graph.node(fp_of(state) if known is None else known[-1], state)
            # Only the transitions to a new state, or that quiet() does not pass, come out;
            # fired counts them all (generated: the initial states plus these).
            for index, _action, nxt, fp, fresh in transitions(state, is_new, quiet, fired, known, edge):
                if not fresh:
                    bad = check_step(state, nxt)
                    if bad:
                        violation_at = (bad, "action", node, index)
                        break
                    if take_hits(unreached, state, nxt, node, index, witnesses, targets):
                        quiet = quiet_step(unreached)
                        if stop_when_reached and not targets:
                            break
                    if not is_new(fp):
                        continue
                    fresh = UNKNOWN
                child = nodes.add(node, index)
                if depth + 1 > max_depth:
                    max_depth = depth + 1
                test = state_tests.get(fresh.changed) or state_test(fresh.changed)
                if not test(nxt):
                    bad = check_state(nxt)
                    if bad is None:
                        raise AssertionError("the state test of changed components failed where the whole check passes")
                    violation_at = (bad, "state", child, None)
                    break
                put(nxt, child, depth + 1, fresh.known)
            stop = ticker.stop(len(visited))
            if stop is not None:
                stop_reason = stop
                break
    except KeyboardInterrupt:
        stop_reason = "interrupted"

    for t, n in fired.items():
        if n:
            coverage[t.__name__] += n
    reached, violation = traces_of(model, nodes.path, witnesses, violation_at)
    verdict = verdict_of(violation, bool(stop_when_reached) and not targets, stop_reason)
    if recording is not None:
        recording.depth = max_depth
    if progress is not None:
        progress(stats(final=True))
    return Result(
        verdict,
        strategy,
        len(visited),
        generated(),
        max_depth,
        time.monotonic() - start,
        stop_reason,
        violation,
        coverage,
        reached,
        visited_bytes=visited.nbytes + nodes.nbytes,
        peak_rss=peak_rss(),
    )
