"""The visited set: 64-bit fingerprints in flat arrays, with a parent pointer per state.

A Python set of ints costs about 60 bytes per state (an int object and a hash slot); here
a state costs one 8-byte slot of an open-addressing table kept between 1/2 and 3/4 full,
plus 4 bytes of parent node number and 2 of successor index: 17 to 22 bytes per state.

A full table grows by half, not by doubling: just grown, a doubled table is 3/8 full, and
at the end of a long search that is a worker's largest table, a fifth of its memory
(docs/PERFORMANCE.md, round ten). So the size is no power of two, and a fingerprint's home
slot is its mixed bits scaled to the size (the high bits of a 64-by-64 product), not masked.
native/src/visited.rs keeps the same table slot for slot.
"""

from __future__ import annotations

from array import array

NO_PARENT = 0xFFFFFFFF
EMPTY = 0  # fingerprint 0 is stored as 1: a 2^-64 bias that nothing notices
MAX_LOAD = 0.75


def grown_size(size: int) -> int:
    """The size a full table of `size` slots grows to."""
    return size + max(1, size // 2)


class FingerprintSet:
    """Open addressing with linear probing over an array of unsigned 64-bit ints."""

    def __init__(self, capacity: int = 1 << 16):
        if capacity < 1:
            raise ValueError(f"capacity {capacity}: at least one slot")
        self.table = array("Q", [EMPTY]) * capacity
        self.size = capacity
        self.count = 0
        self.limit = int(capacity * MAX_LOAD)

    def __len__(self) -> int:
        return self.count

    def add(self, fp: int) -> bool:
        """Add fp; False if it was already there. (One call per transition: the probe is
        written out here rather than shared with __contains__ through a helper call.)"""
        fp = fp or 1
        table, size = self.table, self.size
        i = ((fp ^ (fp >> 29)) * size) >> 64
        while True:
            v = table[i]
            if v == fp:
                return False
            if v == EMPTY:
                break
            i += 1
            if i == size:
                i = 0
        table[i] = fp
        self.count += 1
        if self.count > self.limit:
            self._grow()
        return True

    def __contains__(self, fp: int) -> bool:
        return self.table[self._slot(fp or 1)] != EMPTY

    def _slot(self, fp: int) -> int:
        """Where fp is, or the empty slot where it would go."""
        table, size = self.table, self.size
        i = ((fp ^ (fp >> 29)) * size) >> 64
        while True:
            v = table[i]
            if v == fp or v == EMPTY:
                return i
            i += 1
            if i == size:
                i = 0

    def _grow(self, moved=None) -> array:
        """Grow the table by half; the old one holds no duplicates, so each fingerprint takes
        the first free slot. moved(j, i): the fingerprint at old slot j went to slot i (a map
        moves its value with it). Returns the old table."""
        old = self.table
        self.size = size = grown_size(len(old))
        self.table = table = array("Q", [EMPTY]) * size
        for j, fp in enumerate(old):
            if fp:
                i = ((fp ^ (fp >> 29)) * size) >> 64
                while table[i] != EMPTY:
                    i += 1
                    if i == size:
                        i = 0
                table[i] = fp
                if moved is not None:
                    moved(j, i)
        self.limit = int(size * MAX_LOAD)
        return old

    @property
    def nbytes(self) -> int:
        return self.table.itemsize * len(self.table)


class Nodes:
    """Per state, in discovery order: its parent's node number and its index among the
    parent's successors (for an initial state, its index among the initial states)."""

    def __init__(self):
        self.parent = array("I")
        self.index = array("H")

    def __len__(self) -> int:
        return len(self.parent)

    def add(self, parent: int, index: int) -> int:
        if index > 0xFFFF:
            raise OverflowError(f"successor index {index} does not fit the 2 bytes kept per state")
        self.parent.append(NO_PARENT if parent < 0 else parent)
        self.index.append(index)
        return len(self.parent) - 1

    def path(self, node: int) -> tuple[int, list[int]]:
        """(initial state index, successor indices) leading to `node`."""
        steps = []
        while self.parent[node] != NO_PARENT:
            steps.append(self.index[node])
            node = self.parent[node]
        steps.reverse()
        return self.index[node], steps

    @property
    def nbytes(self) -> int:
        return self.parent.itemsize * len(self.parent) + self.index.itemsize * len(self.index)


class FingerprintMap(FingerprintSet):
    """A FingerprintSet with a 32-bit value beside each fingerprint: 12 bytes a slot, where a
    dict from fingerprint to a small int costs about 100 bytes an entry."""

    def __init__(self, capacity: int = 1 << 12):
        super().__init__(capacity)
        self.values = array("L", [0]) * capacity

    def get(self, fp: int) -> int | None:
        i = self._slot(fp or 1)
        return self.values[i] if self.table[i] != EMPTY else None

    def put(self, fp: int, value: int) -> None:
        fp = fp or 1
        i = self._slot(fp)
        self.values[i] = value
        if self.table[i] == EMPTY:
            self.table[i] = fp
            self.count += 1
            if self.count > self.limit:
                self._grow()

    def _grow(self, moved=None) -> array:
        """Grow as the set does, moving each fingerprint's value with it (no pairs list: at a
        million entries one would cost a hundred megabytes for the moment of the move)."""
        old_values = self.values
        values = self.values = array("L", [0]) * grown_size(len(old_values))

        def move(j: int, i: int) -> None:
            values[i] = old_values[j]

        return super()._grow(move)
