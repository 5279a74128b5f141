"""Footprints recorded, not declared: which parts of a state a step function reads.

The fast path (checker/fast.py) caches a step's outcome under the values of the parts of
the state it reads. Those parts are never listed by hand: every time the fast path runs
a step function (every cache miss), it runs it on a RecordingState, which notes each
component the function touches: the controller, a broker (or only its `stalled` flag,
through State.is_stalled), the ghost, the budget. Parts a step replaces count as read.

Why that is sound: a step function is deterministic, so on any state that agrees with
this one on every part the run read, it takes the same branches, reads the same parts
and returns the same changes. An outcome stored under the values of a superset of its
run's reads is right for every state with those values (checker/outcomes.py keeps keys
that way). A changed guard or effect in spec/ is seen by the next miss, with no table
to update.

Part positions, the same as the fast path's key parts: 0 the controller, b broker b,
rf+1 the ghost, rf+2 the budget, rf+2+b only broker b's `stalled` flag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkamc.spec.state import State

_get: Callable[[tuple, int], Any] = tuple.__getitem__
_evolve = vars(State)["__replace__"]  # State's own compiled replace (spec/state.py), on the first four items


class RecordingState(State):
    """A State whose component reads are noted in a set it carries after its four fields
    (a fifth tuple item: no instance dict to build on every run); the states a step
    derives from it (with_broker, replace) note into the same set."""

    __slots__ = ()

    @staticmethod
    def of(state: tuple, reads: set) -> RecordingState:
        return tuple.__new__(RecordingState, (*state[:4], reads))

    @property
    def controller(self):
        _get(self, 4).add(0)
        return _get(self, 0)

    @property
    def brokers(self):
        brokers = _get(self, 1)
        _get(self, 4).update(range(1, len(brokers) + 1))
        return brokers

    @property
    def ghost(self):
        _get(self, 4).add(len(_get(self, 1)) + 1)
        return _get(self, 2)

    @property
    def budget(self):
        _get(self, 4).add(len(_get(self, 1)) + 2)
        return _get(self, 3)

    def broker(self, b: int):
        _get(self, 4).add(b)
        return _get(self, 1)[b - 1]

    def is_stalled(self, b: int) -> bool:
        _get(self, 4).add(len(_get(self, 1)) + 2 + b)
        return _get(self, 1)[b - 1].stalled

    def with_broker(self, b: int, broker) -> RecordingState:
        bs: list = list(_get(self, 1))
        bs[b - 1] = broker
        return tuple.__new__(RecordingState, (_get(self, 0), tuple(bs), _get(self, 2), _get(self, 3), _get(self, 4)))

    def __replace__(self, **changes) -> RecordingState:
        return tuple.__new__(RecordingState, (*_evolve(self, **changes), _get(self, 4)))


def recorded(fn, cfg, state: State, *args) -> tuple:
    """(what fn(cfg, state, *args) returns, the set of part positions it read)."""
    reads: set = set()
    out = fn(cfg, RecordingState.of(state, reads), *args)
    return out, reads
