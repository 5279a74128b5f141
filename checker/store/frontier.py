"""The search's queue of states still to expand, kept as numbers instead of objects.

A state waiting in the queue as Python objects cost about 400 bytes: its queue tuple, the
State and its brokers' tuple, the Fresh and the list of the keys' parts the fast path hands
back when it is expanded, and the int objects in them (tracemalloc, default check: 56 bytes
per distinct state with a sixth of them queued; 12 here). The states of the fast path are made
of interned components (checker/cache/components.py), so a state is named by its components'
serial numbers; a queued state here is one fixed-width record of unsigned 64-bit ints
(node, depth, fingerprint, serial numbers) in flat arrays, 72 bytes at three brokers, and
the State and its keys' parts are rebuilt when it is taken: about 2 microseconds, against
the 40 to 50 its expansion costs.

A model without interned components (the toy models of the tests, the reference engine)
keeps its states as objects, in the same interface.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator

from kafkamc.checker.cache.footprint import flag_parts
from kafkamc.checker.store.visited import FingerprintMap
from kafkamc.spec.state import State

CHUNK = 1 << 12  # records per array: a level's queue grows and drains an array at a time
new_tuple = tuple.__new__


class Records:
    """A FIFO (breadth-first) or LIFO (depth-first) queue of fixed-width records of unsigned
    64-bit ints, in arrays of CHUNK records: one array is dropped as soon as it is read."""

    def __init__(self, width: int, lifo: bool = False):
        self.width, self.lifo = width, lifo
        self.chunks: deque[array] = deque()
        self.head = 0  # FIFO: where the first unread record of chunks[0] starts
        self.count = 0
        self.full = CHUNK * width

    def __len__(self) -> int:
        return self.count

    def push(self, record: list) -> None:
        chunks = self.chunks
        if not chunks or len(chunks[-1]) >= self.full:
            chunks.append(array("Q"))
        chunks[-1].extend(record)
        self.count += 1

    def pop(self) -> array:
        """The next record: the oldest (FIFO) or the newest (LIFO)."""
        w = self.width
        self.count -= 1
        if self.lifo:
            tail = self.chunks[-1]
            record = tail[-w:]
            del tail[-w:]
            if not tail:
                self.chunks.pop()
            return record
        first, h = self.chunks[0], self.head
        record = first[h : h + w]
        h += w
        if h >= len(first):
            self.chunks.popleft()
            h = 0
        self.head = h
        return record


class ObjectQueue:
    """(state, node, depth, known) kept as they are: for models without interned components."""

    def __init__(self, lifo: bool = False):
        self.items: deque = deque()
        self.take_one = self.items.pop if lifo else self.items.popleft

    def __len__(self) -> int:
        return len(self.items)

    def put(self, state, node: int, depth: int, known) -> None:
        self.items.append((state, node, depth, known))

    def take(self) -> tuple:
        return self.take_one()


class Codec:
    """A state of the fast path as unsigned 64-bit ints: its fingerprint, then its
    components' serial numbers; and back, with its `known`.

    `known` is what FastSuccessors.transitions yields in a Fresh and takes back: the keys'
    parts (the components' serial numbers, then footprint.flag_parts) followed by the
    state's own fingerprint. It is rebuilt here in that layout; a state recorded with none
    is given the one transitions() would compute, and verify mode compares the two."""

    def __init__(self, fast):
        self.components = fast.components
        self.objects = fast.components.by_serial
        self.ints = fast.components.numbers
        self.n = fast.n
        self.size = fast.n + 3  # components per state
        self.width = 1 + self.size

    def numbers(self, state: State) -> list[int]:
        """The serial numbers of a state's components, interning any that is not yet."""
        comps = [state.controller, *state.brokers, state.ghost, state.budget]
        serial = self.components.serial
        try:
            return [serial[id(x)] for x in comps]
        except KeyError:
            tags = self.components.tags
            return [serial[id(self.components.intern(x, tags[i]))] for i, x in enumerate(comps)]

    def record(self, state: State, known) -> list[int]:
        if known is None:
            numbers = self.numbers(state)
            return [self.components.xor(numbers), *numbers]
        return [known[-1], *known[: self.size]]

    def state(self, record) -> tuple:
        """(state, known) of a record. Its serial numbers are replaced by the int objects the
        intern table holds: the caches key on them, and an int read out of an array is a new
        object of 28 bytes per key that held it (15 bytes a state at the default check)."""
        fp, *numbers = record
        numbers = list(map(self.ints.__getitem__, numbers))
        comps = list(map(self.objects.__getitem__, numbers))
        G = self.n + 1
        brokers = tuple(comps[1:G])
        state = new_tuple(State, (comps[0], brokers, comps[G], comps[G + 1]))
        return state, [*numbers, *flag_parts(brokers), fp]


class CompactQueue:
    """(state, node, depth, known) kept as (node, depth, fingerprint, serial numbers)."""

    def __init__(self, fast, lifo: bool = False):
        self.codec = Codec(fast)
        self.records = Records(2 + self.codec.width, lifo)

    def __len__(self) -> int:
        return len(self.records)

    def put(self, state: State, node: int, depth: int, known) -> None:
        self.records.push([node, depth, *self.codec.record(state, known)])

    def take(self) -> tuple:
        # Codec.state written out: once per state expanded.
        node, depth, fp, *numbers = self.records.pop()
        codec = self.codec
        numbers = list(map(codec.ints.__getitem__, numbers))
        comps = list(map(codec.objects.__getitem__, numbers))
        G = codec.n + 1
        brokers = tuple(comps[1:G])
        state = new_tuple(State, (comps[0], brokers, comps[G], comps[G + 1]))
        return state, node, depth, [*numbers, *flag_parts(brokers), fp]


def queue_for(model, lifo: bool = False):
    """The queue a search over `model` keeps: compact for the fast path's model."""
    fast = getattr(model, "fast", None)
    if fast is not None and hasattr(getattr(fast, "components", None), "by_serial"):
        return CompactQueue(fast, lifo)
    return ObjectQueue(lifo)


class Kept:
    """The states one worker keeps as its next frontier (checker/engines/workers.py), compact: their
    fingerprints in order, an index from fingerprint to position (FingerprintMap), their path
    keys in one buffer (a level's keys all have one length), their components' serial numbers
    (4 bytes each), and the state invariants the few that break one break. A dict from
    fingerprint to (key, invariant, slot) cost about 200 bytes a state, held for the widest level.
    A state goes in and out as a Codec record (fingerprint, serial numbers)."""

    def __init__(self, width: int):
        self.size = width - 1  # serial numbers per state
        self.index: FingerprintMap | None = FingerprintMap()  # dropped once the level is kept
        self.fps = array("Q")
        self.keys = bytearray()
        self.length = 0  # of every key
        self.serials = array("L")
        self.broken: dict = {}  # position -> the state invariant it breaks

    def __len__(self) -> int:
        return len(self.fps)

    def key(self, i: int) -> bytes:
        return bytes(self.keys[i * self.length : (i + 1) * self.length])

    def add(self, fp: int, key: bytes, bad, record: list) -> None:
        i = len(self.fps)
        if not i:
            self.length = len(key)
        elif len(key) != self.length:
            raise AssertionError(f"path keys of one level differ in length: {len(key)} and {self.length}")
        assert self.index is not None
        self.index.put(fp, i)
        self.fps.append(fp)
        self.keys += key
        self.serials.extend(record[1:])
        if bad:
            self.broken[i] = bad

    def replace(self, i: int, key: bytes, bad, record: list) -> None:
        """The state at position i, met again under a smaller key."""
        self.keys[i * self.length : (i + 1) * self.length] = key
        self.serials[i * self.size : (i + 1) * self.size] = array("L", record[1:])
        if bad:
            self.broken[i] = bad
        else:
            self.broken.pop(i, None)

    def in_key_order(self) -> Iterator[tuple[bytes, list]]:
        """(key, record) of every state kept, smallest key first."""
        size, serials, fps = self.size, self.serials, self.fps
        for i in sorted(range(len(fps)), key=self.key):
            yield self.key(i), [fps[i], *serials[i * size : (i + 1) * size]]
