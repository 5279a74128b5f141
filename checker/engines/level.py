"""The level-synchronous search shared by `--workers` and Spark: they are transports.

One BFS level expands every state of the frontier. Its parts (a worker's share, a Spark
partition) are expanded by expand_part, each noting what it found in a Findings: the
transitions generated and fired per action, the first step that breaks a step invariant,
the first step that shows each reachability property. "First" is by path key
(checker/store/keys.py): the initial state's index and the successor indices along the path,
which orders states as the one-process BFS meets them, so the smallest key of a level is
what that search would have found first. Findings of the parts add up whatever order
they arrive in. How the successors travel to their owners and are deduplicated is the
transport's business; the initial states, the first stop of a level and the Result with
its replayed traces are built here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kafkamc.checker.cache.components import UNKNOWN
from kafkamc.checker.engines.search import Limits, Result, Violation, progress_stats, replay_path, verdict_of
from kafkamc.checker.store.keys import decode_key, index_bytes


def smaller(a: tuple | None, b: tuple | None) -> tuple | None:
    """Of two (key, ...) findings, the one with the smaller key; None is absent."""
    if a is None or (b is not None and b[0] < a[0]):
        return b
    return a


@dataclass
class Findings:
    """What expanding part of a level found (picklable: it travels back from workers and executors)."""

    generated: int = 0
    coverage: Counter = field(default_factory=Counter)  # action name -> transitions
    action_bad: tuple | None = None  # (key, step invariant) of the first step that breaks one
    reach: dict = field(default_factory=dict)  # reachability property -> key of its first step
    cut: bool = False  # the expansion stopped at a deadline before the part's end

    def add(self, other: Findings) -> Findings:
        self.generated += other.generated
        self.coverage.update(other.coverage)
        self.action_bad = smaller(self.action_bad, other.action_bad)
        for name, key in other.reach.items():
            if name not in self.reach or key < self.reach[name]:
                self.reach[name] = key
        self.cut = self.cut or other.cut
        return self

    @staticmethod
    def total(parts: Iterable[Findings]) -> Findings:
        out = Findings()
        for f in parts:
            out.add(f)
        return out


def note_step(found: Findings, check_step, reach: list, state, nxt, key: bytes) -> None:
    """A step the quiet test did not pass: the first (by key) that breaks a step invariant,
    and the first that shows each reachability property still sought."""
    bad = check_step(state, nxt)
    if bad:
        found.action_bad = smaller(found.action_bad, (key, bad))
    for name, fn in reach:
        if fn(state, nxt) and (name not in found.reach or key < found.reach[name]):
            found.reach[name] = key


def expand_part(
    model, frontier: Iterable[tuple], checks, unreached, found: Findings, deadline: float | None = None
) -> Iterator[tuple]:
    """(successor fingerprint, its path key, successor) for every transition of the frontier's
    (key, state) pairs, in key order within the part; each step is checked on the way (a step
    that quiet() passes breaks no step invariant and shows no unreached property). Past the
    deadline it stops between two states and marks the findings cut."""
    quiet = checks.quiet_step(list(unreached)) if checks is not None else (lambda p, s: True)
    reach = [(name, fn) for name, fn in checks.reach_functions() if name in unreached] if checks is not None else []
    check_step = checks.check_step if checks is not None else (lambda p, s: None)
    fired: Counter = Counter()
    try:
        for done, (key, state) in enumerate(frontier):
            if deadline is not None and done & 0xFF == 0 and time.monotonic() >= deadline:
                found.cut = True
                break
            for index, (action, nxt, fp) in enumerate(model.expand(state)):
                fired[type(action)] += 1
                k = key + index_bytes(index)
                if not quiet(state, nxt):
                    note_step(found, check_step, reach, state, nxt, k)
                yield fp, k, nxt
    finally:
        found.generated += sum(fired.values())
        found.coverage.update({t.__name__: n for t, n in fired.items()})


def expand_fresh(
    model,
    frontier: Iterable[tuple],
    checks,
    unreached,
    found: Findings,
    seen,
    deadline: float | None = None,
    carry: bool = False,
    is_new=None,
    quiet=None,
    graph=None,
) -> Iterator[tuple]:
    """(successor fingerprint, its path key, successor, the state invariant it breaks or None)
    for every transition of the frontier's (key, state) pairs to a state that seen(fp) does
    not know, in key order: the local explorer's fused loop (FastModel.transitions, screening
    with the cached quiet test), for a part of a level. seen(fp) true means "surely not new"
    (in this part's visited set, or yielded before with a smaller key); a state it does not
    know may still be visited elsewhere, which its owner decides. Each step the quiet test
    does not pass is checked as expand_part checks it; each state yielded is tested against
    the state invariants through the test of the components the step changed.

    With `carry`, the frontier holds (key, state, known) and each successor comes with its
    own known (FastSuccessors.transitions: what its expansion need not compute again; None
    when nothing is known), as a fifth item. `is_new(fp)`, if given, replaces "not seen(fp)"
    on the fused loop's path: one call that may also note fp as met (the workers' visited set).
    `quiet`: the suite's quiet_step for `unreached`, if the caller keeps it: building one
    compiles it (Z3), and the observe cache keeps quiet values only for the test object that
    computed them, so a new one every level made every level compute them again.
    `graph` (a checker/liveness/graph.py GraphPart; needs `carry`): record every expanded state and
    every transition in it."""
    if checks is None or not hasattr(model, "transitions"):
        if graph is not None:
            raise ValueError("the liveness graph is recorded through the fused loop only")
        pairs = ((item[0], item[1]) for item in frontier)
        for fp, k, nxt in expand_part(model, pairs, checks, unreached, found, deadline):
            if not seen(fp):
                bad = checks.check_state(nxt) if checks is not None else None
                yield (fp, k, nxt, bad, None) if carry else (fp, k, nxt, bad)
        return
    if quiet is None:
        quiet = checks.quiet_step(list(unreached))
    reach = [(name, fn) for name, fn in checks.reach_functions() if name in unreached]
    check_step, check_state, state_test = checks.check_step, checks.check_state, checks.state_test
    tests: dict = {}
    if is_new is None:
        is_new = lambda fp: not seen(fp)  # noqa: E731 - transitions() takes a predicate
    fired: dict = dict.fromkeys(model.action_types(), 0)
    edge = None if graph is None else graph.edge
    try:
        for done, item in enumerate(frontier):
            if deadline is not None and done & 0xFF == 0 and time.monotonic() >= deadline:
                found.cut = True
                break
            key, state = item[0], item[1]
            if graph is not None:
                graph.node(item[2][-1], state, key)
            for index, _action, nxt, fp, fresh in model.transitions(
                state, is_new, quiet, fired, item[2] if carry else None, edge
            ):
                k = key + index_bytes(index)
                if not fresh:
                    note_step(found, check_step, reach, state, nxt, k)
                    if not is_new(fp):
                        continue
                    fresh = UNKNOWN
                test = tests.get(fresh.changed)
                if test is None:
                    test = tests[fresh.changed] = state_test(fresh.changed)
                bad = None if test(nxt) else check_state(nxt)
                yield (fp, k, nxt, bad, fresh.known) if carry else (fp, k, nxt, bad)
    finally:
        found.generated += sum(fired.values())
        found.coverage.update({t.__name__: n for t, n in fired.items() if n})


def initial_level(model, checks) -> tuple[list, int, tuple | None]:
    """([(fingerprint, key, state)] of the distinct initial states, how many were generated,
    (key, invariant, "state") of the first that breaks a state invariant, or None), taken
    as the one-process search takes them: it stops at that first one."""
    seen: set = set()
    entries: list = []
    generated = 0
    for i, s in enumerate(model.initial_states()):
        generated += 1
        fp = model.fingerprint(s)
        if fp in seen:
            continue
        seen.add(fp)
        bad = checks.check_state(s) if checks is not None else None
        if bad:
            return entries, generated, (index_bytes(i), bad, "state")
        entries.append((fp, index_bytes(i), s))
    return entries, generated, None


def first_violation(action_bad: tuple | None, state_bad: tuple | None) -> tuple | None:
    """(key, invariant, kind) of a level's first violation: at one key, the step is checked
    before the state it leads to."""
    found = []
    if action_bad is not None:
        found.append((action_bad[0], 0, action_bad[1], "action"))
    if state_bad is not None:
        found.append((state_bad[0], 1, state_bad[1], "state"))
    if not found:
        return None
    key, _, name, kind = min(found)
    return key, name, kind


def time_is_up(limits: Limits, start: float) -> str | None:
    """The stop reason when the time limit has passed, else None."""
    if limits.time_limit is not None and time.monotonic() - start >= limits.time_limit:
        return f"time limit {limits.time_limit:g}s"
    return None


def limit_reached(limits: Limits, distinct: int, start: float) -> str | None:
    """Why the search must stop now, by the state count or the clock, or None."""
    if limits.max_states is not None and distinct >= limits.max_states:
        return f"max states {limits.max_states}"
    return time_is_up(limits, start)


class Tally:
    """What a level-synchronous search has counted, and its Result: the coordinators of
    --workers and Spark keep these the same way."""

    def __init__(self, model, start: float):
        self.model, self.start = model, start
        self.distinct = self.generated = self.depth = 0
        self.coverage: Counter = Counter()
        self.witnesses: dict = {}  # reachability property -> key of its first step
        self.violation: tuple | None = None  # (key, invariant, kind)
        self.stop_reason: str | None = None
        self.visited_bytes = 0
        self.peak_rss = 0  # bytes, summed over the processes (their peaks)
        self.cpu: dict = {}  # what the processes spent their CPU time on, in seconds, summed

    def stats(self, queue: int, final: bool = False) -> dict:
        """A progress report (search.progress_stats) of the counts so far."""
        return progress_stats(self.distinct, self.generated, queue, self.depth, time.monotonic() - self.start, final)

    def result(self, reached_all: bool) -> Result:
        result = result_from_keys(
            self.model,
            (self.distinct, self.generated, self.depth),
            self.start,
            self.stop_reason,
            self.violation,
            self.witnesses,
            reached_all,
            self.coverage,
            self.visited_bytes,
        )
        result.peak_rss = self.peak_rss
        return result


def result_from_keys(
    model,
    counts: tuple[int, int, int],
    start: float,
    stop_reason: str | None,
    violation: tuple | None,
    witnesses: dict,
    reached_all: bool,
    coverage: Counter,
    visited_bytes: int = 0,
) -> Result:
    """The Result of a level-synchronous search: counts is (distinct, generated, depth);
    violation (key, invariant, kind) and the witnesses (name -> key) are replayed into
    traces along their keys."""

    def trace(key: bytes) -> list:
        init, steps = decode_key(key)
        return replay_path(model, init, steps)

    v = None if violation is None else Violation(violation[1], violation[2], trace(violation[0]))
    distinct, generated, depth = counts
    return Result(
        verdict_of(v, reached_all, stop_reason),
        "bfs",
        distinct,
        generated,
        depth,
        time.monotonic() - start,
        stop_reason,
        v,
        coverage,
        {name: trace(key) for name, key in witnesses.items()},
        visited_bytes=visited_bytes,
    )
