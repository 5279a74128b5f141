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
n+1 the ghost, n+2 the budget, n+2+b only broker b's `stalled` flag.
"""

from __future__ import annotations

from kafkamc.spec.state import State

_new = tuple.__new__


def _compile_replace():
    """RecordingState.__replace__: State's fields by keyword (from State._fields), the
    reads set carried along; built once, as spec/state.py builds each record's replace."""
    names = State._fields
    items = ", ".join(f"self[{i}] if {n} is _UNSET else {n}" for i, n in enumerate(names))
    params = ", ".join(f"{n}=_UNSET" for n in names)
    ns: dict = {"_UNSET": object(), "_new": _new}
    exec(f"def __replace__(self, *, {params}):\n    return _new(type(self), ({items}, self[{len(names)}]))\n", ns)
    return ns["__replace__"]


class RecordingState(State):
    """A State whose component reads are noted in a set it carries after its four fields
    (a fifth tuple item: no instance dict to build on every run); the states a step
    derives from it (with_broker, replace) note into the same set. Its items are read
    with self[i], tuple's own indexing: a recorded read costs a few hundred instructions
    more than a plain one, where a call through tuple.__getitem__ cost two thousand."""

    __slots__ = ()

    @staticmethod
    def of(state: tuple, reads: set) -> RecordingState:
        return _new(RecordingState, (state[0], state[1], state[2], state[3], reads))

    @property
    def controller(self):
        self[4].add(0)
        return self[0]

    @property
    def brokers(self):
        brokers = self[1]
        self[4].update(range(1, len(brokers) + 1))
        return brokers

    @property
    def ghost(self):
        self[4].add(len(self[1]) + 1)
        return self[2]

    @property
    def budget(self):
        self[4].add(len(self[1]) + 2)
        return self[3]

    def broker(self, b: int):
        self[4].add(b)  # type: ignore[misc]  # the fifth item, which State's type does not know
        return self[1][b - 1]

    def is_stalled(self, b: int) -> bool:
        self[4].add(len(self[1]) + 2 + b)  # type: ignore[misc]
        return self[1][b - 1].stalled

    def with_broker(self, b: int, broker) -> RecordingState:
        bs: list = list(self[1])
        bs[b - 1] = broker
        return _new(RecordingState, (self[0], tuple(bs), self[2], self[3], self[4]))  # type: ignore[misc]

    __replace__ = _compile_replace()


def recorded(fn, cfg, state: State, *args) -> tuple:
    """(what fn(cfg, state, *args) returns, the set of part positions it read)."""
    reads: set = set()
    out = fn(cfg, RecordingState.of(state, reads), *args)
    return out, reads
