"""The visited set: 64-bit fingerprints in flat arrays, with a parent pointer per state.

A Python set of ints costs about 60 bytes per state (an int object and a hash slot); here
a state costs one 8-byte slot of an open-addressing table kept between 3/8 and 3/4 full,
plus 4 bytes of parent node number and 2 of successor index: 17 to 27 bytes per state.
"""

from __future__ import annotations

from array import array

NO_PARENT = 0xFFFFFFFF
EMPTY = 0  # fingerprint 0 is stored as 1: a 2^-64 bias that nothing notices
MAX_LOAD = 0.75


class FingerprintSet:
    """Open addressing with linear probing over an array of unsigned 64-bit ints."""

    def __init__(self, capacity: int = 1 << 16):
        self.table = array("Q", [EMPTY]) * capacity
        self.mask = capacity - 1
        self.count = 0
        self.limit = int(capacity * MAX_LOAD)

    def __len__(self) -> int:
        return self.count

    def add(self, fp: int) -> bool:
        """Add fp; False if it was already there. (One call per transition: the probe is
        written out here rather than shared with __contains__ through a helper call.)"""
        fp = fp or 1
        table, mask = self.table, self.mask
        i = (fp ^ (fp >> 29)) & mask
        while True:
            v = table[i]
            if v == fp:
                return False
            if v == EMPTY:
                break
            i = (i + 1) & mask
        table[i] = fp
        self.count += 1
        if self.count > self.limit:
            self._grow()
        return True

    def __contains__(self, fp: int) -> bool:
        fp = fp or 1
        table, mask = self.table, self.mask
        i = (fp ^ (fp >> 29)) & mask
        while True:
            v = table[i]
            if v == fp:
                return True
            if v == EMPTY:
                return False
            i = (i + 1) & mask

    def _grow(self) -> None:
        """Double the table. Every fingerprint moves, so the loop is written out here:
        through add() it cost a second per 1.5 million states."""
        old = self.table
        size = 2 * len(old)
        table = array("Q", [EMPTY]) * size
        mask = size - 1
        for fp in old:
            if fp:  # the old table holds no duplicates: find a free slot
                i = (fp ^ (fp >> 29)) & mask
                while table[i] != EMPTY:
                    i = (i + 1) & mask
                table[i] = fp
        self.table, self.mask, self.limit = table, mask, int(size * MAX_LOAD)

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

    def _slot(self, fp: int) -> int:
        """Where fp is, or the empty slot where it would go."""
        table, mask = self.table, self.mask
        i = (fp ^ (fp >> 29)) & mask
        while True:
            v = table[i]
            if v == fp or v == EMPTY:
                return i
            i = (i + 1) & mask

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

    def _grow(self) -> None:
        """Double the table, moving each fingerprint with its value (no pairs list: at a
        million entries one would cost a hundred megabytes for the moment of the move)."""
        old_table, old_values = self.table, self.values
        size = 2 * len(old_table)
        table, values = array("Q", [EMPTY]) * size, array("L", [0]) * size
        mask = size - 1
        for j, fp in enumerate(old_table):
            if fp:
                i = (fp ^ (fp >> 29)) & mask
                while table[i] != EMPTY:
                    i = (i + 1) & mask
                table[i], values[i] = fp, old_values[j]
        self.table, self.values, self.mask, self.limit = table, values, mask, int(size * MAX_LOAD)
