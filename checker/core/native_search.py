"""The breadth-first search with the native core (native/src/search.rs): the same search as
checker/engines/explorer.py, with the visited set, the queue, the parent pointers and the loop over
cache hits in Rust, on serial numbers.

Python is called on a miss (`Misses`: the spec's step functions, through the same caches the
Python engine fills), and for the invariants of a new state unless the core knows its verdict:
it remembers, per group of invariant parts reading the same components, the components on
which the group held (native/src/verdicts.rs). The core must yield exactly
the transitions FastSuccessors.transitions yields, in the same order, so that every count,
depth and shortest path is the Python engine's; tests/test_native_search.py checks it.

The core serves the common search: breadth-first, no --verify, no liveness recording, no
pooled symmetry (a broker outside the assignment: its successors are relabelled). Anything
else runs on the Python engine, and `unsupported` says why in one line.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from kafkamc.checker.cache.footprint import flag_parts
from kafkamc.checker.cache.outcomes import Mapped, StepCache, halves
from kafkamc.checker.core import native
from kafkamc.checker.core.views import Views
from kafkamc.checker.engines.search import Limits, Result, Ticker, take_hits, traces_of, verdict_of
from kafkamc.checker.store.memory import peak_rss
from kafkamc.spec.rpc import RoundTrip
from kafkamc.spec.state import State

new_tuple = tuple.__new__


def unsupported(model, strategy: str, recording, limits: Limits) -> str | None:
    """What of this search the core does not serve, or None."""
    fast = getattr(model, "fast", None)
    if fast is None:
        return "a model without the fast path"
    if strategy != "bfs":
        return "depth-first search"
    if recording is not None:
        return "recording the liveness graph"
    if fast.verify:
        return "--verify"
    if fast.relabelled:
        return "a broker pool (its successors are relabelled)"
    if limits.max_depth is not None:
        return "--max-depth"
    seen = set()
    for s in model.initial_states():
        fp = model.fingerprint(s)
        if fp not in seen and not model._canonical_successors(s):
            return "an initial state out of assignment order"
        seen.add(fp)
    return None


def core_for(model, checks, strategy, limits, recording) -> tuple:
    """(the native core's module, "") when it serves this search, else (None, the one line
    that says why the Python engine runs)."""
    what = "a search without a compiled invariant suite" if not hasattr(checks, "state_test") else None
    what = what or unsupported(model, strategy, recording, limits)
    if what is not None:
        return None, f"the native core does not serve {what}; using the Python engine"
    module = native.load()
    return (module, "") if module is not None else (None, native.why_not())


class Misses:
    """What the core asks of Python: a miss of one of its caches, answered through the Python
    engine's own (FastSuccessors), so one rule of each cache has one home; and the quiet test."""

    def __init__(self, model, quiet, kinds: dict):
        fast = model.fast
        self.fast = fast
        self.n = fast.n
        self.by_serial = fast.components.by_serial
        self.quiet_fn = quiet
        self.kinds = kinds  # action type -> its index in fired
        self.trips = {t: fast.model.steps[t].__class__ is RoundTrip for t in kinds}  # its step is one
        self.actions: list = []
        self.action_ids: dict = {}  # id of its StepCache -> action id
        self.maps: list = []
        self.map_ids: dict = {}
        self.messages: list = []  # a RoundTrip's requests and responses, by the id the core keys on
        self.message_ids: dict = {}
        self.parent: State | None = None  # the state last expanded that a quiet test read
        self.parent_comps: tuple = ()
        self.views: dict = {}  # serials -> view()
        self.pending: list = []  # described() of components interned since the core last read it
        self.owner_of: Any = None  # a --workers part's owner of a State (checker/core/part.py)

    def comps(self, serials) -> list:
        by = self.by_serial
        return [by[s] for s in serials]

    def view(self, serials) -> tuple:
        """(components, key parts, State) of the state these serials make, kept for the few
        states asked about last: the core asks for one state's candidates and outcomes in a row.
        Read only: a caller that changes one copies it."""
        key = tuple(serials)
        got = self.views.get(key)
        if got is None:
            if len(self.views) >= 8:
                self.views.clear()
            by, n = self.by_serial, self.n
            c = [by[s] for s in key]
            brokers = tuple(c[1 : n + 1])
            state = new_tuple(State, (c[0], brokers, c[n + 1], c[n + 2]))
            got = self.views[key] = (c, [*key, *flag_parts(brokers), 0], state)
        return got

    def state(self, serials) -> State:
        """The State these serials make; not kept (a new state is tested once, and expanded a
        level later)."""
        c = list(map(self.by_serial.__getitem__, serials))
        n = self.n
        return new_tuple(State, (c[0], tuple(c[1 : n + 1]), c[n + 1], c[n + 2]))

    def _id(self, table: list, ids: dict, key, value) -> int:
        got = ids.get(key)
        if got is None:
            got = ids[key] = len(table)
            table.append(value)
        return got

    def _row(self, outcome) -> tuple:
        changes, delta, mask = outcome
        return [(i, s) for i, _, s in changes], delta, mask

    def _rows(self, outcomes) -> list:
        return [self._row(o) for o in outcomes]

    def candidates(self, b: int, serials) -> list:
        comps, parts, state = self.view(serials)
        fast = self.fast
        key = fast.cand_key[b](parts)
        found = fast.cand_caches[b].get(key) or fast._candidates_miss(state, comps, parts, b, key)
        rows = []
        ids, kinds, trips = self.action_ids, self.kinds, self.trips
        for action, kind, fixed, sc in found:
            # One StepCache per action, never dropped: the action's id is its cache's id too.
            a = ids.get(id(sc))
            if a is None:
                a = self._id(self.actions, ids, id(sc), (action, sc))
            rows.append((a, kinds[kind], a, None if fixed is None else self._rows(fixed), trips[kind]))
        return rows

    # A RoundTrip's halves (native/src/search/trip.rs), each through the Python cache of it
    # (checker/cache/outcomes.py): (the parts its entry is keyed on, what the core keeps).

    def send(self, action_id: int, serials) -> tuple:
        action, sc = self.actions[action_id]
        request, reads = self.fast.outcomes.send(self.fast.model.steps[type(action)], self.state(serials), action)
        return sorted(reads), -1 if request is None else self._message(request)

    def handle(self, action_id: int, serials, request: int) -> tuple:
        action, sc = self.actions[action_id]
        outcomes, handle = self.fast.outcomes, halves(sc)[0]
        comps, parts, state = self.view(serials)
        outcomes.spot_check(handle.runs + 1, state, action)  # the whole step, as a run of it would be
        step = self.fast.model.steps[type(action)]
        args = (step, handle, state, comps, parts, action, self.messages[request])
        (first, response, _), reads = outcomes.handle(*args, keep=False)
        if first is None:
            return sorted(reads), None, -1  # refused
        return sorted(reads), self._row(first), self._message(response)

    def receive(self, action_id: int, serials, response: int) -> tuple:
        action, sc = self.actions[action_id]
        comps, parts, _ = self.view(serials)
        step = self.fast.model.steps[type(action)]
        args = (step, halves(sc)[1], comps, (), parts, action, self.messages[response])
        then, reads = self.fast.outcomes.receive(*args)
        return sorted(reads), self._row(then)

    def _message(self, message) -> int:
        return self._id(self.messages, self.message_ids, message, message)

    def outcome(self, action_id: int, serials) -> tuple:
        """(the step cache's key positions, the extra positions of a sub-cache or None, the
        outcomes' rows, per outcome (map id, positions bitmask) of a Mapped or None)."""
        action, sc = self.actions[action_id]
        comps, parts, state = self.view(serials)
        sc.lookups += 1
        entry = sc.store.get(sc.key(parts)) if sc.reads is not None else None
        extra = None
        if entry.__class__ is StepCache:
            extra, entry = sorted(entry.reads or ()), entry.store.get(entry.key(parts))
        if entry is None:
            entry, reads = self.fast.outcomes.run(sc, state, comps, parts, action)
            sc.put(parts, entry, reads)
            extra = sorted(set(reads) - sc.reads) or None
        if entry.__class__ is Mapped:
            maps = [
                (self._id(self.maps, self.map_ids, fn, fn), sum(1 << j for j in positions))
                for fn, positions in entry.maps
            ]
            return sorted(sc.reads), extra, self._rows(entry.fixed), maps
        return sorted(sc.reads), extra, self._rows(entry), None

    def observe(self, serials) -> tuple:
        """(the ghost's serial, its XOR, the parts observation is widened to, or None)."""
        fast = self.fast
        comps = self.comps(serials)
        got = fast._observe_miss(comps, fast.observe_key(comps))
        return got[4], got[1], None if fast.observe_wide is None else sorted(fast.observe_wide)

    def mapped(self, map_id: int, j: int, serial: int) -> tuple:
        fast = self.fast
        x = self.by_serial[serial]
        y = fast.components.intern(self.maps[map_id](x), fast.tags[j])
        at = fast.components.at[j]
        s = fast.components.serial[id(y)]
        return s, at[serial] ^ at[s]

    def owner(self, serials) -> int:
        """The worker that owns the states of this controller (a --workers part: checker/core/part.py)."""
        return self.owner_of(self.state(serials))

    def parent_of(self, serials: tuple) -> State:
        """The State of the state being expanded, built once per state (a step's tests read it)."""
        if self.parent is None or serials != self.parent_comps:
            self.parent, self.parent_comps = self.state(serials), serials
        return self.parent

    def quiet(self, before: tuple, after) -> bool:
        return self.quiet_fn(self.parent_of(before), self.state(after))


def described(serial: int, obj, tag: int, fp: int, ids: list) -> tuple:
    """What the core reads of a component (controller 0, broker 1): (serial, leader, alive,
    stalled, applied epoch (spec/state.py Broker.applied), its own fingerprint: a --workers
    part ships states as their components', its ids in the verdicts' views)."""
    if tag == 0:
        return serial, obj.leader, False, False, 0, fp, ids
    if tag == 1:
        return serial, obj.leader, obj.alive, obj.stalled, obj.applied, fp, ids
    return serial, -1, False, False, 0, fp, ids


def explore_native(
    core_module,
    model,
    checks,
    limits: Limits = Limits(),
    progress=None,
    progress_every=1.0,
    stop_when_reached=frozenset(),
) -> Result:  # noqa: E501
    """The search of checker/engines/explorer.py explore() on the core (the caller pauses the cyclic GC)."""
    return _explore(core_module, model, checks, limits, progress, progress_every, stop_when_reached)


class Attached:
    """A core attached to a FastModel: its Misses, and the intern table telling it what its
    loop reads of each new component, until close()."""

    def __init__(self, core_module, model, quiet, checks, keep: bool = True):
        fast = model.fast
        self.kinds = {t: i for i, t in enumerate(model.action_types())}
        self.misses = Misses(model, quiet, self.kinds)
        # The core's share of the caches' budget (checker/cache/budget.py).
        limit, known = fast.budget.share_with_core()
        # The suite's state groups and the quiet test's: the core remembers each group's
        # verdicts, on the fields the group reads of each component (checker/core/views.py).
        groups = getattr(checks, "state_groups", None)
        self.views = views = Views(fast.tags)
        rows = views.rows(groups or (), getattr(checks, "state_group_fields", None))
        self.core = core_module.Core(
            self.misses,
            fast.n,
            len(self.kinds),
            _leader_only(quiet),
            groups,
            _quiet_groups(quiet),
            keep,
            limit,
            known,
            rows,
            _quiet_views(views, quiet),
        )
        self.components = components = fast.components
        pending, fps, ids = self.misses.pending, components.fp, views.of
        self.listener = lambda serial, obj, tag: pending.append(
            described(serial, obj, tag, fps[id(obj)], ids(obj, tag))
        )
        self.describe_all()
        components.listeners.append(self.listener)

    def describe_all(self) -> None:
        """Describe every component interned so far to the core (again: with its ids in views
        registered since)."""
        components = self.components
        for serial, obj in enumerate(components.by_serial):
            self.listener(serial, obj, components.tag_of(serial))

    def use_quiet(self, quiet) -> None:
        """A new quiet test (fewer properties left to reach): the cached verdicts are of the old."""
        self.misses.quiet_fn = quiet
        known = len(self.views.getters)
        self.core.new_quiet(_leader_only(quiet), _quiet_groups(quiet), _quiet_views(self.views, quiet))
        if len(self.views.getters) > known:  # views the components were not described in
            self.describe_all()

    def follow(self, states: int) -> None:
        """The caches' budget follows the states held (CacheBudget.follow), the core's share too."""
        limit = self.misses.fast.budget.follow(states)
        if limit is not None:
            self.core.set_limit(limit)

    def fired(self) -> dict:
        """Transitions so far per action type."""
        counts = self.core.fired
        return {t: counts[i] for t, i in self.kinds.items()}

    def close(self) -> None:
        self.components.listeners.remove(self.listener)
        core, counts = self.core, self.misses.fast.core_counts
        budget = self.misses.fast.budget
        budget.core_forgets += core.forgets
        budget.core_tables = dict(core.memory())
        looked, missed = (*core.lookups, *core.halves), (*core.misses, *core.halves_missed)
        asked, quiet = core.verdict_stats(), core.quiet_stats()
        names = ("candidates", "steps", "observe", "send", "handle", "receive", "verdicts", "quiet")
        for name, n, m in zip(names, (*looked, asked[0], quiet[0]), (*missed, asked[1], quiet[1])):
            had = counts.get(name, (0, 0))
            counts[name] = (had[0] + n, had[1] + m)


def _leader_only(quiet) -> bool:
    return bool(getattr(quiet, "leader_only", False))


def _quiet_groups(quiet) -> tuple:
    """The quiet test's groups of conjuncts, for any step and for a step that keeps the
    controller (a test without them: one group of everything, which the core never remembers)."""
    return getattr(quiet, "groups", ((0xFFFFFFFF,), (0xFFFFFFFF,)))


def _quiet_views(views: Views, quiet) -> tuple | None:
    """The quiet test's groups' views, for its two sets (positions over the step's two states)."""
    fields = getattr(quiet, "group_fields", None)
    if fields is None:
        return None
    groups = _quiet_groups(quiet)
    return views.rows(groups[0], fields[0], 2), views.rows(groups[1], fields[1], 2)


def _explore(core_module, model, checks, limits, progress, progress_every, stop_when_reached) -> Result:
    start = time.monotonic()
    unreached = list(checks.reach_functions())
    attached = Attached(core_module, model, checks.quiet_step([name for name, _ in unreached]), checks)
    try:
        return _search(attached, model, checks, unreached, limits, progress, progress_every, stop_when_reached, start)
    finally:
        attached.close()


class CoreVisited:
    """A worker's visited set when its core expands (checker/engines/workers.py): the core's own."""

    def __init__(self, core):
        self.core = core
        self.add = core.visit

    def __contains__(self, fp: int) -> bool:
        return self.core.seen(fp)

    @property
    def nbytes(self) -> int:
        return self.core.nbytes()


def _search(attached, model, checks, unreached, limits, progress, progress_every, stop_when_reached, start):
    core, misses, fast = attached.core, attached.misses, model.fast
    check_state, check_step = checks.check_state, checks.check_step
    state_tests: dict = {}
    targets = set(stop_when_reached)
    witnesses: dict = {}
    violation_at = None
    stop_reason = None
    initial_generated = 0
    for i, s in enumerate(model.initial_states()):
        initial_generated += 1
        fp = model.fingerprint(s)
        comps, serials, s = fast._interned(s)
        node = core.add(fp, -1, i, 0, serials)
        if node is None:
            continue
        bad = check_state(s)
        if bad:
            violation_at = (bad, "state", node, None)
            break

    def generated() -> int:
        return initial_generated + sum(core.fired)

    def stats(final: bool = False) -> dict:
        el = time.monotonic() - start
        return {
            "distinct": len(core),
            "generated": generated(),
            "queue": core.queued(),
            "depth": core.max_depth,
            "elapsed": el,
            "rate": len(core) / el if el > 0 else 0.0,
            "final": final,
        }

    ticker = Ticker(limits, start, progress, stats, progress_every)
    run, cap, every = core.run, limits.max_states, Ticker.EVERY
    try:
        while violation_at is None and not (stop_when_reached and not targets):
            event = run(cap, every)
            if event is None:
                break
            if event.__class__ is int:  # between two states: every EVERY-th (TICK, 0), or at the cap
                distinct = len(core)
                attached.follow(distinct)
                stop_reason = (ticker.timed() if event == 0 else None) or ticker.capped(distinct)
                if stop_reason is not None:
                    break
                continue
            new, index, fp, changed, child, child_node, node, depth, before = event
            nxt = misses.state(child)
            if not new:
                parent = misses.parent_of(before)
                bad = check_step(parent, nxt)
                if bad:
                    violation_at = (bad, "action", node, index)
                    break
                if take_hits(unreached, parent, nxt, node, index, witnesses, targets):
                    attached.use_quiet(checks.quiet_step([name for name, _ in unreached]))
                    if stop_when_reached and not targets:
                        break
                child_node = core.add(fp, node, index, depth + 1, child)
                if child_node is None:
                    continue
                changed = -1
            test = state_tests.get(changed)
            if test is None:
                test = state_tests[changed] = checks.state_test(changed)
            if not test(nxt):
                bad = check_state(nxt)
                if bad is None:
                    raise AssertionError("the state test of changed components failed where the whole check passes")
                violation_at = (bad, "state", child_node, None)
                break
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    if stop_reason is None and (violation_at is not None or (stop_when_reached and not targets)):
        stop_reason = ticker.capped(len(core))  # the state's end reads the cap, as the Python engine's does
    coverage: Counter = Counter({t.__name__: n for t, n in attached.fired().items() if n})
    reached, violation = traces_of(model, core.path, witnesses, violation_at)
    verdict = verdict_of(violation, bool(stop_when_reached) and not targets, stop_reason)
    if progress is not None:
        progress(stats(final=True))
    return Result(
        verdict,
        "bfs",
        len(core),
        generated(),
        core.max_depth,
        time.monotonic() - start,
        stop_reason,
        violation,
        coverage,
        reached,
        visited_bytes=core.nbytes(),
        peak_rss=peak_rss(),
    )
