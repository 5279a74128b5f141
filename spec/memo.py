"""Fast successors and fingerprints: interned components and steps cached on what they read.

A State is made of components: the controller, each broker, the ghost and the budget.
Every component the engine handles is interned (one object per value), and its stable
64-bit fingerprint is computed once, from its marshal bytes. Then:

- a state's fingerprint is the XOR of its components' fingerprints, each first mixed with
  its position (so brokers 1 and 2 swapped give another fingerprint). A step that changes
  two components changes the fingerprint by a fixed XOR, which the cache keeps with the
  step's outcome: a successor's fingerprint costs one XOR, not a rehash;
- most steps read only a few components (a Fetch reads the follower, the leader and the
  ghost), and across the search the same few components meet again and again. A step's
  outcome is cached under the serial numbers of the components it reads, its *footprint*,
  and replayed as the components it changed. Interned objects never die, so an id(), and
  the serial number given to it when interned, names one value for the whole run.

The step functions stay the specification: they run on every cache miss, and
`Model(cfg, verify=True)` re-runs them on every hit and compares (tests do).
"""
from __future__ import annotations

import hashlib
import marshal
from functools import reduce
from operator import attrgetter, itemgetter, xor
from typing import NamedTuple

from kafkamc.spec import actions as A
from kafkamc.spec import replication
from kafkamc.spec.config import Config
from kafkamc.spec.state import State

MASK64 = (1 << 64) - 1
new_tuple = tuple.__new__
stalled = attrgetter("stalled")
CACHE_LIMIT = 1 << 22       # entries per cache before it is dropped and refilled


class Fresh(NamedTuple):
    """What transitions() yields with a new state: what the search needs to check it and
    expand it without recomputing what the loop already knew."""
    changed: int        # bitmask of the components it may differ from its parent in (bit 0 the
                        # controller, b broker b, rf+1 the ghost, rf+2 the budget); -1: unknown
    known: object       # opaque: handed back to transitions() when the state is expanded


UNKNOWN = Fresh(-1, None)


def as_tuple(obj) -> tuple:
    """A component as plain nested tuples, which marshal writes (records inside it, such as
    a broker's AlterPartition response, become tuples too)."""
    return tuple(as_tuple(v) if hasattr(v, "__dataclass_fields__") else v
                 for v in (getattr(obj, n) for n in obj.__slots__))


def mix(position: int, fp: int) -> int:
    """A component fingerprint made specific to its position in the state (splitmix64's
    finaliser: a bijection, so distinct components stay distinct at each position)."""
    z = (fp + (position + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def component_fingerprint(tag: int, obj) -> int:
    """64 stable bits of one component's value; computed once per distinct value."""
    data = marshal.dumps((tag, as_tuple(obj)), 2)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def footprint(cfg: Config, a) -> tuple[tuple, int]:
    """(reads, gate): the component indices a step reads (0 controller, b broker b, rf+1 ghost,
    rf+2 budget, rf+2+b only broker b's `stalled` flag), and a broker whose pending acks=all
    requests are the only reason the step reads the ghost (0 when it always does or never does).

    Its writes must fall inside the whole-component reads: the cache replays changes to them.
    A leader's HW advance answers requests waiting in purgatory and only then touches the
    ghost, which is why a Fetch reads it only while the leader has requests waiting. With
    track_down on, the advance also counts the brokers that are down.
    """
    rf = cfg.rf
    C, G, U = 0, rf + 1, rf + 2
    down = tuple(range(1, rf + 1)) if cfg.track_down else ()
    t = type(a)
    gate = 0
    if t is A.Fetch:
        reads, gate = (a.follower, a.leader) + down, a.leader
    elif t is A.OffsetsForLeaderEpoch:
        reads = (a.follower, a.leader)
    elif t is A.Produce:
        reads = (a.leader, G, U) + down
    elif t is A.ReplicaStall:
        reads = (a.follower, C, U)
    elif t is A.HandleAlterPartitionResponse:
        reads, gate = (a.leader,) + down, a.leader
    elif t is A.MetadataUpdate:
        reads, gate = (a.broker, C) + down, a.broker
    elif t is A.BrokerRestart:
        reads = (a.broker, C) + down     # it restarts with no requests waiting
    elif t is A.AlterPartition:
        # the leader, the controller, and only whether the follower it would drop (never in the
        # proposed ISR) is stalled: keyed on the whole follower, this step missed three times
        # as often. With ZooKeeper-era ISR writes the response is handled in the same step.
        reads, gate = (a.leader,) + tuple(U + b for b in range(1, rf + 1) if b not in a.isr) + (C, U) + down, 0
        if cfg.rule("isr_update") == "zookeeper":
            gate = a.leader
    elif t is A.BrokerCrash or t is A.ControllerFenceBroker:
        reads = (a.broker, C, U)
    elif t is A.BrokerHeartbeat:
        reads = (a.broker, C)
    else:
        reads = tuple(range(rf + 3))
    return tuple(sorted(set(reads))), gate


def _store(cache: dict, key, value) -> None:
    """Every cache is bounded: past CACHE_LIMIT entries it is dropped and refills."""
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = value


class Components:
    """The intern tables: value -> the one object for it, per kind (tuples of different
    kinds can be equal), id -> stable fingerprint, id -> serial number, and per position
    serial number -> mixed fingerprint."""

    def __init__(self, tags: tuple):
        self.tags = tags                # the kind of component at each position of a state
        self.objects: dict = {}         # (tag, value) -> object
        self.fp: dict[int, int] = {}
        self.by_fp: dict[int, object] = {}   # fingerprint -> object, to rebuild states sent as fingerprints
        self.serial: dict[int, int] = {}    # id -> a small number, in order of interning
        self.at: list[list] = [[] for _ in tags]    # position -> [serial] -> mix(position, fp)

    def intern(self, obj, tag: int):
        if id(obj) in self.fp:
            return obj          # the interned object itself: it is alive, so its id is unique
        known = self.objects.get((tag, obj))
        if known is None:
            self.objects[(tag, obj)] = known = obj
            fp = self.fp[id(obj)] = component_fingerprint(tag, obj)
            self.by_fp[fp] = obj
            self.serial[id(obj)] = len(self.serial)
            for position, kind in enumerate(self.tags):
                self.at[position].append(mix(position, fp) if kind == tag else 0)
        return known

    def xor(self, numbers) -> int:
        """A state's fingerprint from its components' serial numbers, in position order."""
        return reduce(xor, map(list.__getitem__, self.at, numbers))

    def delta(self, position: int, old, new) -> int:
        """What replacing one interned component by another does to a state's fingerprint."""
        at, serial = self.at[position], self.serial
        return at[serial[id(old)]] ^ at[serial[id(new)]]


class FastSuccessors:
    """Model.successors and Model.fingerprint through the caches; same results, same order."""

    def __init__(self, cfg: Config, candidates, step, observe, verify: bool = False):
        self.cfg = cfg
        self.rf = cfg.rf
        self.candidates_of = candidates     # (cfg, controller, broker, budget, b) -> actions
        self.step = step                    # (cfg, state, action) -> [State] before observe
        self.observe = observe              # (cfg, state) -> state
        self.verify = verify
        self.tags = (0,) + (1,) * cfg.rf + (2, 3)
        self.components = Components(self.tags)
        self.actions: dict = {}             # action -> (action, its step cache, key getters, gate)
        # Candidates of broker b, keyed on the serial numbers of (broker b, controller, budget).
        self.cand_key = [None] + [itemgetter(b, 0, cfg.rf + 2) for b in cfg.brokers]
        self.cand_caches: list = [None] + [{} for _ in cfg.brokers]
        self.observe_cache: dict = {}
        self.fetch_cache: dict = {}         # the two halves of Fetch, see _fetch_outcomes

    # ---------------------------------------------------------------- components

    def split(self, state: State) -> list:
        """The interned components of a state, in index order."""
        intern, tags = self.components.intern, self.tags
        comps = [state.controller, *state.brokers, state.ghost, state.budget]
        return [intern(x, tags[i]) for i, x in enumerate(comps)]

    def join(self, comps: list) -> State:
        rf = self.rf
        return State(comps[0], tuple(comps[1:rf + 1]), comps[rf + 1], comps[rf + 2])

    def _interned(self, state: State) -> tuple:
        """(components, their serial numbers, the state made of them). The states the search
        expands are made of interned components already; any other state is interned first."""
        comps = [state.controller, *state.brokers, state.ghost, state.budget]
        number = self.components.serial.__getitem__
        try:
            return comps, list(map(number, map(id, comps))), state
        except KeyError:
            comps = self.split(state)
            return comps, list(map(number, map(id, comps))), self.join(comps)

    def fingerprints(self, state: State) -> tuple:
        """The components' fingerprints (what the multi-process engine ships a state as)."""
        fp = self.components.fp
        return tuple(fp[id(x)] for x in self._interned(state)[0])

    def fingerprint(self, state: State) -> int:
        """The XOR of the components' position-mixed fingerprints (see the module docstring)."""
        return self.components.xor(self._interned(state)[1])

    def controller_fingerprint(self, controller) -> int:
        fp = self.components.fp.get(id(controller))
        return fp if fp is not None else self.components.fp[id(self.components.intern(controller, 0))]

    # ---------------------------------------------------------------- successors

    def _prepared(self, action):
        """(action, its own step cache, the key getter, the key getter while the gate broker
        has requests waiting (it adds the ghost), gate, the components it reads). A cache per
        action keeps the keys flat tuples of small ints: hashing and comparing them is a
        large part of every step."""
        entry = self.actions.get(action)
        if entry is None:
            reads, gate = footprint(self.cfg, action)
            gated = itemgetter(*reads, self.rf + 1) if gate else None
            entry = self.actions[action] = (action, {}, itemgetter(*reads), gated, gate, frozenset(reads))
        return entry

    def _candidates_miss(self, state: State, comps: list, parts: list, b: int, key: tuple) -> tuple:
        """Broker b's candidates, each as (action, its type, its outcomes or None, then as
        _prepared), computed on a miss of broker b's candidate cache, whose key transitions()
        builds (broker b, the controller, the budget): when a step reads nothing else its
        outcomes are fixed by that key too, and are kept here, which spares the search one
        cache lookup per transition."""
        c, br, u = comps[0], comps[b], comps[self.rf + 2]
        local = {0, b, self.rf + 2}
        out = []
        for a in self.candidates_of(self.cfg, c, br, u, b):
            action, step_cache, getter, gated, gate, reads = self._prepared(a)
            fixed = None
            if reads <= local and not (gate and comps[gate].purgatory) and not self.verify:
                fixed = self._outcomes(state, comps, step_cache, getter(parts), action)
            out.append((action, type(action), fixed, step_cache, getter, gated, gate))
        out = tuple(out)
        _store(self.cand_caches[b], key, out)
        return out

    def _outcomes(self, state: State, comps: list, cache: dict, key, action) -> tuple:
        """What each successor changes: ((((index, component, its serial number), ...),
        fingerprint XOR, changed mask), ...). The key is the serial numbers of the components
        the action reads and, when gated, the ghost's; the components it writes are among
        them, so the XOR is fixed by the key."""
        out = cache.get(key)
        if out is None or self.verify:
            computed = []
            if type(action) is A.Fetch:
                computed = self._fetch_outcomes(state, comps, action)
            else:
                intern, tags = self.components.intern, self.tags
                for nxt in self.step(self.cfg, state, action):
                    changes = []
                    for i, x in enumerate((nxt.controller, *nxt.brokers, nxt.ghost, nxt.budget)):
                        if x is not comps[i]:
                            x = intern(x, tags[i])
                            if x is not comps[i]:
                                changes.append((i, x))
                    computed.append(self._with_delta(comps, changes))
            computed = tuple(computed)
            if out is not None and out != computed:
                raise AssertionError(f"cached outcome of {action} differs from the step function: fix its footprint")
            if out is None:
                out = computed
                _store(cache, key, out)
        return out

    def _fetch_outcomes(self, state: State, comps: list, action) -> list:
        """A Fetch cached in its two halves, as Kafka runs it: the leader handles a request
        (a few numbers, not the whole follower) and the follower handles the response. Far
        fewer distinct halves occur than (follower, leader) pairs; the result is the same
        as replication.fetch, which `verify` checks."""
        cfg, f, ld, G = self.cfg, action.follower, action.leader, self.rf + 1
        fol, lead = comps[f], comps[ld]
        if not replication.fetch_answered(cfg, f, fol, ld, lead):
            return []
        req = replication.fetch_request(fol)
        down = tuple(b.alive for b in state.brokers) if cfg.track_down else ()
        key = (ld, f, id(lead), req, id(comps[G]) if lead.purgatory else 0, down)
        led = self.fetch_cache.get(key)
        intern = self.components.intern
        if led is None:
            after, resp = replication.leader_handle_fetch(cfg, state, ld, f, req)
            # The ghost is part of the key only while requests wait in purgatory; otherwise
            # it is not read, not written, and must not be replayed.
            changed = ((ld, intern(after.brokers[ld - 1], 1)),)
            if after.ghost is not state.ghost:
                changed += ((G, intern(after.ghost, 2)),)
            led = changed, resp
            _store(self.fetch_cache, key, led)
        (changed, resp) = led
        key = (id(fol), resp)
        fetched = self.fetch_cache.get(key)
        if fetched is None:
            fetched = intern(replication.follower_handle_fetch_response(fol, resp), 1)
            _store(self.fetch_cache, key, fetched)
        changes = sorted((i, x) for i, x in changed + ((f, fetched),) if x is not comps[i])
        return [self._with_delta(comps, changes)]

    def _with_delta(self, comps: list, changes: list) -> tuple:
        """(((index, component, its serial number), ...), XOR they make to the fingerprint of
        a state made of comps, bitmask of the component indices they change)."""
        delta = mask = 0
        number = self.components.serial.__getitem__
        for i, x in changes:
            delta ^= self.components.delta(i, comps[i], x)
            mask |= 1 << i
        return tuple((i, x, number(id(x))) for i, x in changes), delta, mask

    def _observe_miss(self, comps: list, key: tuple) -> list:
        """[ghost, fingerprint XOR, quiet, the quiet test it is of, the ghost's serial number]
        after the ghost observes the true leader of these components; computed on a miss of
        the observe cache, whose key transitions() builds (the controller, the broker it
        names leader, the ghost). The quiet value and test are filled by transitions()."""
        G = self.rf + 1
        g = self.components.intern(self.observe(self.cfg, self.join(comps)).ghost, 2)
        out = [g, self.components.delta(G, comps[G], g), None, None, self.components.serial[id(g)]]
        _store(self.observe_cache, key, out)
        return out

    def transitions(self, state: State, is_new=None, quiet=None, fired=None, known=None):
        """(index, action, successor, its fingerprint before symmetry, fresh), in candidate order.

        Alone, it yields every transition (fresh None). Given the search's is_new(fp),
        quiet(state, nxt) and `fired`, a dict holding every action type (it counts the
        transitions per type), it yields only those the search must look at: a new state
        (is_new already called; fresh is a Fresh), or a step quiet() does not pass (fresh
        False; is_new not called, so the search can stop on it first). The search's
        per-transition work happens in this one loop, where the cache hits are inlined: it
        runs once per transition. `known` is the Fresh.known this loop yielded with `state`:
        its keys' parts followed by its fingerprint, in one list (a state waiting in the
        search's queue holds it), which are then not computed again.

        Screening, the loop also skips work the search would repeat. The states it expands
        are observed already, so a step that changes neither the controller, nor the broker
        it names leader, nor the ghost is observed as the state itself is: it takes the
        state's own observe entry, looked up once. And when the quiet test
        depends only on what the observation is keyed on (quiet.leader_only, which Z3 shows),
        a step that keeps the controller and the ghost gets its value from the observe cache
        entry, and builds its successor only when that is new."""
        rf = self.rf
        G = rf + 1
        if known is None or self.verify:
            comps, numbers, state = self._interned(state)
            base = self.components.xor(numbers)
            parts = [*numbers, *map(stalled, state.brokers), base]   # the keys' parts (see footprint()), then base
            if known is not None and known != parts:
                raise AssertionError("the fingerprint or keys carried from the parent are wrong")
        else:
            comps = [state.controller, *state.brokers, state.ghost, state.budget]
            parts = known
            base = parts[-1]
        observe_get = self.observe_cache.get
        verify = self.verify
        screen = is_new is not None
        c = state.controller
        ghost = 1 << G
        kept = 1 | ghost            # a step that changes neither keeps the quiet test's cache entry
        touch = kept | 1 << c.leader    # changes that may change the observation
        cached = screen and getattr(quiet, "leader_only", False)
        # A step that touches nothing observed is observed as the state itself is: its entry.
        okey = (id(c), id(comps[c.leader]) if c.leader else 0, id(comps[G]))
        same = observe_get(okey) or self._observe_miss(comps, okey)
        index = -1
        cand_caches, cand_key = self.cand_caches, self.cand_key
        for b in range(1, rf + 1):
            ckey = cand_key[b](parts)
            candidates = cand_caches[b].get(ckey)
            if candidates is None:
                candidates = self._candidates_miss(state, comps, parts, b, ckey)
            for action, kind, outcomes, cache, getter, gated, gate in candidates:
                if outcomes is None:
                    key = gated(parts) if gate and comps[gate].purgatory else getter(parts)
                    outcomes = cache.get(key)
                    if outcomes is None or verify:
                        outcomes = self._outcomes(state, comps, cache, key, action)
                for changes, delta, mask in outcomes:
                    index += 1
                    new = comps.copy()
                    for i, x, _ in changes:
                        new[i] = x
                    if mask & touch or not screen:
                        c = new[0]
                        okey = (id(c), id(new[c.leader]) if c.leader else 0, id(new[G]))
                        seen = observe_get(okey)
                        if seen is None:
                            seen = self._observe_miss(new, okey)
                    else:
                        seen = same
                    fp = base ^ delta ^ seen[1]
                    keeps = settled = False
                    if screen:
                        fired[kind] += 1
                        keeps = cached and not (mask & kept)    # seen may hold this step's quiet test
                        settled = keeps and seen[3] is quiet and not verify
                        if settled and seen[2]:
                            if fp == base or not is_new(fp):    # fp == base: the state itself
                                continue
                    nxt = new_tuple(State, (new[0], tuple(new[1:G]), seen[0], new[G + 1]))   # State(...) without its __new__
                    if verify:
                        self._check_observed(state, action, nxt, fp)
                    if not screen:
                        yield index, action, nxt, fp, None
                        continue
                    if not (settled and seen[2]):
                        q = quiet(state, nxt)
                        if keeps:
                            if verify and seen[3] is quiet and seen[2] != q:
                                raise AssertionError(f"the quiet test cached for {action} differs: it reads more than leader_only says")
                            seen[2], seen[3] = q, quiet
                        if not q:
                            yield index, action, nxt, fp, False
                            continue
                        if not is_new(fp):
                            continue
                    child = parts.copy()        # the successor's keys' parts and fingerprint
                    for i, x, n in changes:
                        child[i] = n
                        if i < G and i:
                            child[G + 1 + i] = x.stalled    # parts hold broker b's stalled flag at rf + 2 + b
                    child[G] = seen[4]
                    child[-1] = fp
                    yield index, action, nxt, fp, new_tuple(Fresh, (mask | ghost if seen[0] is not comps[G] else mask,
                                                                    child))

    def expand(self, state: State):
        """(action, successor, its fingerprint before symmetry), in candidate order."""
        for _, action, nxt, fp, _ in self.transitions(state):
            yield action, nxt, fp

    def successors(self, state: State):
        for _, action, nxt, _, _ in self.transitions(state):
            yield action, nxt

    def _check_observed(self, state: State, action, nxt: State, fp: int) -> None:
        direct = [self.observe(self.cfg, s) for s in self.step(self.cfg, state, action)]
        if nxt not in direct:
            raise AssertionError(f"cached successor of {action} is not one the step function gives")
        if fp != self.fingerprint(nxt):
            raise AssertionError(f"the fingerprint XOR cached with {action} is wrong")
