"""Interned state components and their stable fingerprints.

A State is made of components: the controller, each broker, the ghost and the budget.
Every component the fast path handles is interned (one object per value), and its stable
64-bit fingerprint is computed once, from its byte encoding. A state's fingerprint is
the XOR of its components' fingerprints, each first mixed with its position (so brokers
1 and 2 swapped give another fingerprint): a step that changes two components changes
the fingerprint by a fixed XOR, which the caches keep with the step's outcome.
Interned objects never die, so an id(), and the serial number given to it when
interned, names one value for the whole run.
"""

from __future__ import annotations

import hashlib
import marshal
from functools import reduce
from operator import xor
from typing import NamedTuple

from kafkamc.spec.state import FIELD_VALUES, as_tuple

MASK64 = (1 << 64) - 1


class Fresh(NamedTuple):
    """What transitions() yields with a new state: what the search needs to check it and
    expand it without recomputing what the loop already knew."""

    changed: int  # bitmask of the components it may differ from its parent in (bit 0 the
    # controller, b broker b, rf+1 the ghost, rf+2 the budget); -1: unknown
    known: object  # opaque: handed back to transitions() when the state is expanded


UNKNOWN = Fresh(-1, None)


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


class Components:
    """The intern tables: value -> the one object for it, per kind (tuples of different
    kinds can be equal), id -> stable fingerprint, id -> serial number, and per position
    serial number -> mixed fingerprint."""

    def __init__(self, tags: tuple):
        self.tags = tags  # the kind of component at each position of a state
        self.objects: dict = {}  # (tag, type, field values) -> object
        self.fp: dict[int, int] = {}
        self.by_fp: dict[int, object] = {}  # fingerprint -> object, to rebuild states sent as fingerprints
        self.serial: dict[int, int] = {}  # id -> a small number, in order of interning
        self.by_serial: list = []  # serial number -> object: a state kept as its serial numbers is rebuilt
        self.numbers: list[int] = []  # serial number -> the int object the serial dict holds (see Codec.state)
        self.at: list[list] = [[] for _ in tags]  # position -> [serial] -> mix(position, fp)
        self.listeners: list = []  # called with (serial, object, tag) for each new component: the native core

    def intern(self, obj, tag: int):
        if id(obj) in self.fp:
            return obj  # the interned object itself: it is alive, so its id is unique
        key = (tag, type(obj), FIELD_VALUES[type(obj)](obj))  # equal records, equal keys; hashed in C
        known = self.objects.get(key)
        if known is None:
            self.objects[key] = known = obj
            fp = self.fp[id(obj)] = component_fingerprint(tag, obj)
            self.by_fp[fp] = obj
            number = self.serial[id(obj)] = len(self.serial)
            self.by_serial.append(obj)
            self.numbers.append(number)
            for position, kind in enumerate(self.tags):
                self.at[position].append(mix(position, fp) if kind == tag else 0)
            for listener in self.listeners:
                listener(number, obj, tag)
        return known

    def tag_of(self, serial: int) -> int:
        """The kind of the component with this serial number (a position of its kind has its mix)."""
        return next(self.tags[p] for p, at in enumerate(self.at) if at[serial])

    def xor(self, numbers) -> int:
        """A state's fingerprint from its components' serial numbers, in position order."""
        return reduce(xor, map(list.__getitem__, self.at, numbers))

    def delta(self, position: int, old, new) -> int:
        """What replacing one interned component by another does to a state's fingerprint."""
        at, serial = self.at[position], self.serial
        return at[serial[id(old)]] ^ at[serial[id(new)]]
