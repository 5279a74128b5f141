"""Step outcomes cached on recorded footprints: the memo layer of the fast path.

A step's outcome is what each of its successors changes: the components it replaces
(interned), the XOR that makes to the state's fingerprint, and a bitmask of the changed
positions. It is computed by running the spec's own step function on a RecordingState
(checker/cache/footprint.py) and stored under the values of the parts the action's runs have
read so far (StepCache); when a run reads a part outside that key, the key grows and the
action's cache starts afresh. Nothing here names what a step reads.

A step that maps every broker on its own (State.map_brokers: a hard crash forgets every
broker's HW checkpoint) is stored as a Mapped: the changes its key fixes, and the map, which
is applied to each other broker on its own at each hit, through a memo per broker value. Its
key is then the parts it read otherwise (the crashed broker, the budget), not every broker.

A step that is a RoundTrip (spec/rpc.py: Fetch) is computed from its three halves, each
the spec's own function with a cache of its own keyed the same way, plus the request or
response it is given: far fewer distinct halves occur than whole exchanges.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from operator import itemgetter
from typing import Any, NamedTuple

from kafkamc.checker.cache.budget import CacheBudget, drop_older_half, store
from kafkamc.checker.cache.footprint import ObservingState, Reads, RecordingState, broker_of, recorded
from kafkamc.checker.cache.verify import EVERY, FIRST, FastPathError, check_step, describe_outcomes
from kafkamc.spec.rpc import RoundTrip
from kafkamc.spec.state import State

NOTHING: frozenset = frozenset()
_first = itemgetter(0)  # a change's position: changes are kept in position order
_new = tuple.__new__


def _no_parts(parts) -> tuple:
    return ()


class StepCache:
    """One action's (or one half's) outcomes, keyed on the parts its runs read.

    The key is the parts every run so far has read (`reads`). A run that read more stores
    its outcome one level down, in a StepCache of its own under that key, keyed on the
    extra parts runs under it read: a Fetch reads the ghost only when the leader has
    requests waiting in purgatory, which the leader's part of the key already decides.
    Determinism makes that sound: states that agree on the key run the same way up to
    their first read outside it, so they all read outside it."""

    __slots__ = ("reads", "key", "store", "halves", "runs", "budget", "lookups", "looked", "tried", "skip")

    def __init__(self, reads=None, budget: CacheBudget | None = None) -> None:
        self.reads: frozenset | None = reads
        self.key = _no_parts if not reads else _getter(reads)
        self.store: dict = {}
        self.halves: tuple | None = None  # a RoundTrip's (handle, receive) StepCaches; kept on a rekey
        self.runs = 0  # misses so far (checker/cache/verify.py spot-checks some of them)
        # What the budget (checker/cache/budget.py) weighs; a sub-cache has none: its parent counts.
        self.budget = budget
        self.lookups = 0  # since the budget's last sweep
        self.looked = 0  # before it: lookups + looked are the run's (the bench's hit rates)
        self.tried = 0  # runs at the last sweep
        self.skip = False  # stores nothing until the next sweep: it hit too rarely
        if budget is not None:
            budget.join(self)

    def _rekey(self, reads: frozenset) -> None:
        self.reads, self.key, self.store = reads, _getter(reads) if reads else _no_parts, {}

    def put(self, parts, value, reads: set, arg=None) -> None:
        """Store an outcome whose run read `reads` (the key shrinks to what every run read)."""
        mine = self.reads
        if mine is None or not mine <= reads:
            mine = frozenset(reads) if mine is None else mine & reads
            self._rekey(mine)
        if self.skip:
            return
        key = self.key(parts) if arg is None else (self.key(parts), arg)
        if len(reads) == len(mine):  # reads holds mine: they are equal
            self.store[key] = value
        else:
            extra = reads - mine
            sub = self.store.get(key)
            if sub.__class__ is not StepCache:
                sub = self.store[key] = StepCache(frozenset())
            known = sub.reads or frozenset()
            if not extra <= known:
                sub._rekey(known | extra)
            sub.store[sub.key(parts)] = value
        if self.budget is not None:
            self.budget.added()

    # What the budget asks of a cache (checker/cache/budget.py).

    def size(self) -> int:
        """Outcomes held, in sub-caches too."""
        return _outcomes(self.store.values())

    def period_misses(self) -> int:
        return self.runs - self.tried

    def new_period(self) -> None:
        self.looked += self.lookups
        self.lookups, self.tried = 0, self.runs

    def empty(self) -> None:
        self.store = {}

    def drop_older_half(self) -> int:
        """Drop the older half of the entries; the outcomes dropped."""
        return _outcomes(drop_older_half(self.store))


def _outcomes(entries) -> int:
    """The outcomes in a StepCache's entries: an entry is one, or a sub-cache of them."""
    return sum(len(v.store) if v.__class__ is StepCache else 1 for v in entries)


class Mapped(NamedTuple):
    """A step's outcomes whose runs mapped brokers (module docstring): per successor, the
    (changes, XOR, mask) of the parts its key fixes, and (fn, the positions fn maps)."""

    fixed: tuple
    maps: tuple


def _brokers(nxt: State) -> tuple:
    """A step's successor's brokers, read without noting (a RecordingState notes its own)."""
    return nxt[1] if nxt.__class__ is State else nxt._bs  # type: ignore[attr-defined]


def halves(sc: StepCache) -> tuple:
    """A RoundTrip's (handle, receive) StepCaches, made on first use."""
    if sc.halves is None:
        sc.halves = (StepCache(budget=sc.budget), StepCache(budget=sc.budget))
    return sc.halves


def joined(first: tuple, then: tuple) -> tuple:
    """Two outcomes one after the other, as one: XOR deltas compose, and where both change one
    component the later change is the one applied."""
    if not then[0]:
        return first
    if not first[0]:
        return then
    return (first[0] + then[0], first[1] ^ then[1], first[2] | then[2])


def _getter(reads):
    positions = sorted(reads)
    if len(positions) == 1:
        return lambda parts, p=positions[0]: parts[p]
    return itemgetter(*positions)


class Outcomes:
    """Computes and caches step outcomes for one FastSuccessors (its components and tags)."""

    def __init__(self, fast) -> None:
        self.fast = fast
        self.cfg = fast.cfg
        self.n = fast.n
        self.steps = fast.model.steps
        # Under the symmetry reduction, some step runs on misses are checked to be equivariant.
        self.symmetric = self.cfg.symmetry
        self.memo: dict = {}  # (map function, id of an interned component) -> the interned result

    def changes(self, comps: list, nxt: State, reads: set, skip: tuple = ()) -> tuple:
        """((position, interned component), ...) where nxt (a State or a RecordingState: its
        items are read directly, not recorded) differs from comps; each position a step
        replaced (even by an equal value) counts as read."""
        intern, tags = self.fast.components.intern, self.fast.tags
        out = []
        if nxt.__class__ is State:
            items = (nxt[0], *nxt[1], nxt[2], nxt[3])
        else:  # a RecordingState: read without noting (its own indexing notes every part)
            items = (nxt._c, *nxt._bs, nxt._g, nxt._u)  # type: ignore[attr-defined]
        for i, x in enumerate(items):
            if x is not comps[i] and i not in skip:
                reads.add(i)
                x = intern(x, tags[i])
                if x is not comps[i]:
                    out.append((i, x))
        return tuple(out)

    def run(self, sc: StepCache, state: State, comps: list, parts: list, action, maps: bool = True) -> tuple:
        """(outcomes, reads) of one action (sc: its StepCache) from a state made of interned comps;
        maps=False: a map counts every broker read (the outcomes are never a Mapped)."""
        step = self.steps[type(action)]
        self.ran(sc, state, action)
        if step.__class__ is RoundTrip:
            return self._round_trip(step, halves(sc), state, comps, parts, action)
        reads = Reads() if maps else set()
        out = step(self.cfg, RecordingState.of(state, reads), action)
        if out is None:
            return (), reads
        outs = (out,) if isinstance(out, State) else out
        if maps and reads.maps:  # type: ignore[attr-defined]
            return self._mapped(comps, outs, reads), reads  # type: ignore[arg-type]
        with_delta, changes = self.fast.with_delta, self.changes
        return tuple(with_delta(comps, changes(comps, nxt, reads)) for nxt in outs), reads

    def ran(self, sc: StepCache, state: State, action) -> None:
        """Count a run of an action, and spot-check it."""
        sc.runs += 1
        self.spot_check(sc.runs, state, action)

    def spot_check(self, runs: int, state: State, action) -> None:
        """The runs-th run of an action: under the symmetry reduction, the first runs and every
        EVERY-th are checked to be equivariant (checker/cache/verify.py)."""
        if self.symmetric and (runs <= FIRST or runs % EVERY == 0):
            check_step(self.fast.model, state, action, self.fast.model.unobserved_step(state, action))

    def _mapped(self, comps: list, outs, reads: Reads):
        """The outcomes of a run that mapped the brokers: each broker it neither read nor
        replaced after the map is left to the map (Mapped); with more than one map, every
        broker counts as read."""
        n, with_delta = self.n, self.fast.with_delta
        if len(reads.maps) > 1:
            reads.update(range(1, n + 1))
            return tuple(with_delta(comps, self.changes(comps, nxt, reads)) for nxt in outs)
        fn, made = reads.maps[0]
        maps = tuple(
            (fn, tuple(j for j in range(1, n + 1) if j not in reads and _brokers(nxt)[j - 1] is made[j - 1]))
            for nxt in outs
        )
        fixed = tuple(with_delta(comps, self.changes(comps, nxt, reads, skip)) for nxt, (_, skip) in zip(outs, maps))
        return Mapped(fixed, maps) if any(skip for _, skip in maps) else fixed

    def apply(self, mapped: Mapped, comps: list) -> tuple:
        """A Mapped's outcomes on a state made of comps: its map applied to each broker it
        leaves to the map, each result interned once per broker value (memo)."""
        fast, memo = self.fast, self.memo
        out = []
        for (changes, delta, mask), (fn, positions) in zip(mapped.fixed, mapped.maps):
            extra = []
            for j in positions:
                x = comps[j]
                y = memo.get((fn, id(x)))
                if y is None:
                    y = fast.components.intern(fn(x), fast.tags[j])
                    store(memo, (fn, id(x)), y, fast.budget.dict_limit)
                if y is not x:
                    extra.append((j, y))
            if extra:
                more, d, m = fast.with_delta(comps, extra)
                changes, delta, mask = tuple(sorted(changes + more, key=_first)), delta ^ d, mask | m
            out.append((changes, delta, mask))
        return tuple(out)

    def cached(self, sc: StepCache, state: State, comps: list, parts: list, action) -> tuple:
        """The outcomes of an action on a miss of its StepCache, computed and stored."""
        computed, reads = self.run(sc, state, comps, parts, action)
        sc.put(parts, computed, reads)
        return self.apply(computed, comps) if computed.__class__ is Mapped else computed

    def verified(self, sc: StepCache, state: State, comps: list, parts: list, action, fixed=None) -> tuple:
        """The outcomes of an action computed again, and compared with what its StepCache holds
        (verify mode); `fixed`: the outcomes the candidates' cache holds for it, if any."""
        entry = sc.store.get(sc.key(parts)) if sc.reads is not None else None
        if entry.__class__ is StepCache:
            entry = entry.store.get(entry.key(parts))
        if entry.__class__ is Mapped:
            entry = self.apply(entry, comps)
        computed = self.cached(sc, state, comps, parts, action)
        if sc.store.get(sc.key(parts)).__class__ is Mapped:  # the map applied, against the step run whole
            entry, computed = computed, self.run(sc, state, comps, parts, action, maps=False)[0]
        for held in (entry, fixed):
            if held is not None and held != computed:
                raise FastPathError(
                    f"the outcome cached for {action} differs from what the step function gives at {state}: "
                    f"cached {describe_outcomes(held)}, computed {describe_outcomes(computed)}"
                )
        return computed

    def _round_trip(self, rt: RoundTrip, halves: tuple, state: State, comps: list, parts: list, action) -> tuple:
        """A step's halves, each through its own cache. The parts a cached half's entry was
        keyed on (both levels; the parts a half replaced are among them) are what the whole
        step read, with the request's. Each half's entry keeps its outcome (changes, XOR,
        mask) against the state it ran on, which its key fixes."""
        request, reads = self.send(rt, state, action)
        if request is None:
            return (), reads
        handle, receive = halves
        (first, response, patch), keyed = self.handle(rt, handle, state, comps, parts, action, request)
        reads |= keyed
        if first is None:
            return (), reads
        mid_parts = parts.copy()
        for p, v in patch:
            mid_parts[p] = v
        then, keyed = self.receive(rt, receive, comps, first[0], mid_parts, action, response)
        reads |= keyed
        return (joined(first, then),), reads

    def send(self, rt: RoundTrip, state: State, action) -> tuple:
        """(the request a RoundTrip's sender makes in this state, or None; the parts it read)."""
        reads: set = set()
        return rt.send(self.cfg, RecordingState.of(state, reads), action), reads

    def handle(
        self, rt: RoundTrip, handle: StepCache, state: State, comps: list, parts: list, action, request, keep=True
    ):
        """((the other side's outcome against comps, its response, the key parts the outcome
        patches), the parts its entry is keyed on: both levels, the parts it replaced among them).
        A refused request: (None, None, ()). keep=False: the native core keeps the entry (its
        own key learning: tables.rs `record`), so this cache is not filled."""
        handle.lookups += 1
        entry: Any = handle.store.get((handle.key(parts), request))  # the entry, on either level
        below: AbstractSet[int] = NOTHING
        if entry.__class__ is StepCache:
            entry, below = entry.store.get(entry.key(parts)), entry.reads
        if entry is None:
            handle.runs += 1
            ran: set[int] = set()
            below = ran
            handled = rt.handle(self.cfg, RecordingState.of(state, ran), action, request)
            if handled is None:
                entry = (None, None, ())
            else:
                changed = self.changes(comps, handled[0], ran)
                entry = (self.fast.with_delta(comps, changed), handled[1], self._patch(changed))
            if keep:
                handle.put(parts, entry, ran, request)
        return entry, (handle.reads or NOTHING) | below

    def receive(self, rt: RoundTrip, receive: StepCache, comps: list, first: tuple, mid_parts: list, action, response):
        """(the sender's outcome on the response, against comps with the handler's changes
        `first` applied, whose key parts are mid_parts; the parts its entry is keyed on)."""
        receive.lookups += 1
        then: Any = receive.store.get((receive.key(mid_parts), response))
        below: AbstractSet[int] = NOTHING
        if then.__class__ is StepCache:
            then, below = then.store.get(then.key(mid_parts)), then.reads
        if then is None:
            receive.runs += 1
            mid_comps = comps.copy()
            for i, x, _ in first:
                mid_comps[i] = x
            out, ran = recorded(rt.receive, self.cfg, self.fast.join(mid_comps), action, response)
            then = self.fast.with_delta(mid_comps, self.changes(mid_comps, out, ran))
            receive.put(mid_parts, then, ran, response)
            below = ran
        return then, (receive.reads or NOTHING) | below

    def _patch(self, changed: tuple) -> tuple:
        """The key parts (checker/cache/footprint.py) that changed components give new values."""
        n, serial = self.n, self.fast.components.serial
        out = [(i, serial[id(x)]) for i, x in changed]
        out += [(n + 2 + i, x.stalled) for i, x in changed if 1 <= i <= n]
        out += [(2 * n + 2 + i, x.applied) for i, x in changed if 1 <= i <= n]
        return tuple(out)

    def observed(self, comps: list) -> tuple:
        """(the ghost after it observes the brokers serving reads in a state made of comps,
        whether the observe key had to widen). Observation is cached on the controller, the
        ghost and the brokers that serve reads (FastSuccessors.observe_key); every run is
        recorded, and a part it read beyond that key (a broker that serves no reads, the
        budget) joins the key from then on."""
        fast, n = self.fast, self.n
        reads: set = set()
        G = n + 1
        state = ObservingState.of((comps[0], tuple(comps[1:G]), comps[G], comps[G + 1]), reads)
        out = fast.model.observation(self.cfg, state)
        leader, wide = comps[0].leader, fast.observe_wide or NOTHING
        beyond = set()
        for p in reads:
            if p <= 0 or p == G:
                continue  # a serving flag (-b), the controller, the ghost: always in the key
            if p == G + 1:
                beyond.add(p)  # the budget
                continue
            b = broker_of(p, n)
            x = comps[b]
            if not (b == leader or b in wide or (x.alive and x.leader == b)):
                beyond.add(b)
        if beyond - wide:
            fast.widen_observation(beyond)
        ghost = out._g if isinstance(out, ObservingState) else out.ghost  # read, not noted
        return fast.components.intern(ghost, fast.tags[n + 1]), bool(beyond - wide)
