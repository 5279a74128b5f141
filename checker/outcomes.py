"""Step outcomes cached on recorded footprints: the memo layer of the fast path.

A step's outcome is what each of its successors changes: the components it replaces
(interned), the XOR that makes to the state's fingerprint, and a bitmask of the changed
positions. It is computed by running the spec's own step function on a RecordingState
(checker/footprint.py) and stored under the values of the parts the action's runs have
read so far (StepCache); when a run reads a part outside that key, the key grows and the
action's cache starts afresh. Nothing here names what a step reads.

A step that is a RoundTrip (spec/rpc.py: Fetch) is computed from its three halves, each
the spec's own function with a cache of its own keyed the same way, plus the request or
response it is given: far fewer distinct halves occur than whole exchanges.
"""

from __future__ import annotations

from operator import itemgetter

from kafkamc.checker.components import store
from kafkamc.checker.footprint import plain, recorded
from kafkamc.spec.hw import observe
from kafkamc.spec.rpc import RoundTrip
from kafkamc.spec.state import State


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

    __slots__ = ("reads", "key", "store")

    def __init__(self, reads=None) -> None:
        self.reads: frozenset | None = reads
        self.key = _no_parts if not reads else _getter(reads)
        self.store: dict = {}

    def _rekey(self, reads: frozenset) -> None:
        self.reads, self.key, self.store = reads, _getter(reads) if reads else _no_parts, {}

    def get(self, parts, arg=None):
        out = self.store.get(self.key(parts) if arg is None else (self.key(parts), arg))
        if out.__class__ is StepCache:
            out = out.store.get(out.key(parts))
        return out

    def lookup(self, parts, arg) -> tuple:
        """(the entry or None, the parts the level below keyed it on: none on the first level)."""
        out = self.store.get((self.key(parts), arg))
        if out.__class__ is StepCache:
            return out.store.get(out.key(parts)), out.reads
        return out, frozenset()

    def put(self, parts, value, reads: set, arg=None) -> None:
        """Store an outcome whose run read `reads` (the key shrinks to what every run read)."""
        if self.reads is None or not self.reads <= reads:
            self._rekey(frozenset(reads) if self.reads is None else self.reads & reads)
        key = self.key(parts) if arg is None else (self.key(parts), arg)
        extra = reads - (self.reads or frozenset())
        if not extra:
            store(self.store, key, value)
            return
        sub = self.store.get(key)
        if sub.__class__ is not StepCache:
            sub = StepCache(frozenset())
            store(self.store, key, sub)
        known = sub.reads or frozenset()
        if not extra <= known:
            sub._rekey(known | extra)
        store(sub.store, sub.key(parts), value)


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
        self.rf = fast.rf
        self.steps = fast.model.steps
        self.halves: dict = {}  # (action, "handle" | "receive") -> StepCache

    def changes(self, comps: list, nxt: State, reads: set) -> list:
        """[(position, interned component)] where nxt differs from comps; each position a step
        replaced (even by an equal value) counts as read."""
        intern, tags = self.fast.components.intern, self.fast.tags
        out = []
        for i, x in enumerate((nxt.controller, *nxt.brokers, nxt.ghost, nxt.budget)):
            if x is not comps[i]:
                reads.add(i)
                x = intern(x, tags[i])
                if x is not comps[i]:
                    out.append((i, x))
        return out

    def run(self, state: State, comps: list, parts: list, action) -> tuple:
        """(outcomes, reads) of one action from a state made of interned comps."""
        step = self.steps[type(action)]
        if isinstance(step, RoundTrip):
            return self._round_trip(step, state, comps, parts, action)
        out, reads = recorded(step, self.cfg, state, action)
        results = [] if out is None else [out] if isinstance(out, State) else list(out)
        outcomes = tuple(self.fast.with_delta(comps, self.changes(comps, plain(nxt), reads)) for nxt in results)
        return outcomes, reads

    def cached(self, sc: StepCache, state: State, comps: list, parts: list, action) -> tuple:
        """The outcomes of an action through its StepCache (verify: recomputed and compared)."""
        out = sc.get(parts)
        if out is None or self.fast.verify:
            computed, reads = self.run(state, comps, parts, action)
            if out is not None and out != computed:
                raise AssertionError(f"cached outcome of {action} differs from the step function")
            sc.put(parts, computed, reads)
            out = computed
        return out

    def _half(self, action, which: str) -> StepCache:
        sc = self.halves.get((action, which))
        if sc is None:
            sc = self.halves[(action, which)] = StepCache()
        return sc

    def _round_trip(self, rt: RoundTrip, state: State, comps: list, parts: list, action) -> tuple:
        """A step's halves, each through its own cache. The parts a cached half's entry was
        keyed on (both levels; the parts a half replaced are among them) are what the whole
        step read, with the request's."""
        cfg, fast, rf = self.cfg, self.fast, self.rf
        request, reads = recorded(rt.send, cfg, state, action)
        if request is None:
            return (), reads
        # The other side handles the request.
        handle = self._half(action, "handle")
        entry, below = handle.lookup(parts, request)
        if entry is None:
            (mid, response), below = recorded(rt.handle, cfg, state, action, request)
            entry = (tuple(self.changes(comps, plain(mid), below)), response)
            handle.put(parts, entry, below, request)
        reads |= handle.reads | below
        changed, response = entry
        mid_comps, mid_parts = list(comps), list(parts)
        serial = fast.components.serial
        for i, x in changed:
            mid_comps[i] = x
            mid_parts[i] = serial[id(x)]
            if 1 <= i <= rf:
                mid_parts[rf + 2 + i] = x.stalled
        # The sender handles the response.
        receive = self._half(action, "receive")
        after, below = receive.lookup(mid_parts, response)
        if after is None:
            out, below = recorded(rt.receive, cfg, fast.join(mid_comps), action, response)
            after = tuple(self.changes(mid_comps, plain(out), below))
            receive.put(mid_parts, after, below, response)
        reads |= receive.reads | below
        for i, x in after:
            mid_comps[i] = x
        changes = [(i, x) for i, x in enumerate(mid_comps) if x is not comps[i]]
        return (fast.with_delta(comps, changes),), reads

    def observed(self, comps: list):
        """The ghost after it observes the true leader of a state made of comps. Observation
        is cached on the controller, the broker it names leader and the ghost; every run
        checks that spec.hw.observe read nothing else."""
        fast, rf = self.fast, self.rf
        c = comps[0]
        out, reads = recorded(observe, self.cfg, fast.join(comps))
        allowed = {0, rf + 1} | ({c.leader, rf + 2 + c.leader} if c.leader else set())
        if not reads <= allowed:
            raise AssertionError(
                f"spec.hw.observe read state parts {sorted(reads - allowed)} beyond the "
                "controller, the broker it names leader and the ghost, which the fast path "
                "keys observations on (checker/outcomes.py)"
            )
        return fast.components.intern(plain(out).ghost, fast.tags[rf + 1])
