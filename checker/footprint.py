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

from kafkamc.spec.state import State

_get = tuple.__getitem__


class RecordingState(State):
    """A State whose component reads are noted in `_reads`; the states a step derives from
    it (with_broker, replace) note into the same set."""

    @staticmethod
    def of(state: tuple, reads: set) -> RecordingState:
        rec = tuple.__new__(RecordingState, state)
        rec.__dict__["_reads"] = reads
        return rec

    @property
    def controller(self):
        self._reads.add(0)
        return _get(self, 0)

    @property
    def brokers(self):
        brokers = _get(self, 1)
        self._reads.update(range(1, len(brokers) + 1))
        return brokers

    @property
    def ghost(self):
        self._reads.add(len(_get(self, 1)) + 1)
        return _get(self, 2)

    @property
    def budget(self):
        self._reads.add(len(_get(self, 1)) + 2)
        return _get(self, 3)

    def broker(self, b: int):
        self._reads.add(b)
        return _get(self, 1)[b - 1]

    def is_stalled(self, b: int) -> bool:
        self._reads.add(len(_get(self, 1)) + 2 + b)
        return _get(self, 1)[b - 1].stalled

    def with_broker(self, b: int, broker) -> RecordingState:
        bs: list = list(_get(self, 1))
        bs[b - 1] = broker
        return RecordingState.of((_get(self, 0), tuple(bs), _get(self, 2), _get(self, 3)), self._reads)

    def __replace__(self, **changes) -> RecordingState:
        items = dict(zip(State._fields, tuple.__iter__(self)))
        for k, v in changes.items():
            if k not in items:
                raise TypeError(f"State has no field {k}")
            items[k] = v
        return RecordingState.of(tuple(items.values()), self._reads)


def plain(state):
    """The real State a recorded step returned (it may be the recording input itself)."""
    return tuple.__new__(State, state) if type(state) is RecordingState else state


def recorded(fn, cfg, state: State, *args) -> tuple:
    """(what fn(cfg, state, *args) returns, the set of part positions it read)."""
    reads: set = set()
    out = fn(cfg, RecordingState.of(state, reads), *args)
    return out, reads
