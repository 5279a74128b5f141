"""Footprints recorded, not declared: which parts of a state a step function reads.

The fast path (checker/cache/fast.py) caches a step's outcome under the values of the parts of
the state it reads. Those parts are never listed by hand: every time the fast path runs
a step function (every cache miss), it runs it on a RecordingState, which notes each
component the function touches: the controller, a broker (or only its `stalled` flag,
through State.is_stalled, or its `applied` epoch, through State.applied_epoch), the ghost,
the budget. Parts a step replaces count as read.

Why that is sound: a step function is deterministic, so on any state that agrees with
this one on every part the run read, it takes the same branches, reads the same parts
and returns the same changes. An outcome stored under the values of a superset of its
run's reads is right for every state with those values (checker/cache/outcomes.py keeps keys
that way). A changed guard or effect in spec/ is seen by the next miss, with no table
to update.

Part positions, the same as the fast path's key parts: 0 the controller, b broker b,
n+1 the ghost, n+2 the budget, n+2+b only broker b's `stalled` flag, 2n+2+b only its `applied`.

A step that does the same to every broker (State.map_brokers) is not noted reading them
when the run records into a Reads: the map is noted instead, with what it made of each
broker, and checker/cache/outcomes.py applies it to each broker on its own (Mapped).
"""

from __future__ import annotations

from collections import _tuplegetter  # type: ignore[attr-defined]  # NamedTuple's own field getter

from kafkamc.checker.cache.verify import FastPathError
from kafkamc.spec.state import State, as_tuple

_new = tuple.__new__


class Reads(set):
    """A run's reads, with the maps it applied: (fn, the brokers it made), in order."""

    __slots__ = ("maps",)

    def __init__(self) -> None:
        super().__init__()
        self.maps: list = []


class RawReadError(FastPathError):
    """A step read a state's tuple items past every recorded accessor (tuple.__getitem__,
    tuple.__iter__): the fast path cannot know what it read, so its cached outcomes could be
    wrong. Raised at the first such read, with or without --verify."""


def _refuse(*_args, **_kwargs):
    raise RawReadError(
        "a step read the state's raw tuple items (tuple.__getitem__(state, i) or the like), which the "
        "fast path cannot record; read the state through its fields (state.ghost, state.broker(b), "
        "state[i]) so that its cached outcomes follow the read"
    )


class _Sealed:
    """What a RecordingState's own tuple items are: a read past the accessors gets this, and any
    use of it (an attribute, comparing, hashing, truth, iterating) raises RawReadError."""

    __slots__ = ()
    __getattribute__ = __getattr__ = __eq__ = __ne__ = __hash__ = __bool__ = _refuse
    __iter__ = __len__ = __getitem__ = __lt__ = __le__ = __gt__ = __ge__ = __int__ = __index__ = _refuse


_SEALED = _Sealed()  # a RecordingState's items 0 to 3, where a State keeps its fields


def _compile_replace():
    """RecordingState.__replace__: State's fields by keyword (from State._fields), the
    reads set carried along; built once, as spec/state.py builds each record's replace."""
    names = State._fields
    own = ("_c", "_bs", "_g", "_u")  # RecordingState's unrecorded getters, in State's field order
    items = ", ".join(f"self.{own[i]} if {n} is _UNSET else {n}" for i, n in enumerate(names))
    params = ", ".join(f"{n}=_UNSET" for n in names)
    ns: dict = {"_UNSET": object(), "_new": _new, "_S": _SEALED}
    body = f"return _new(type(self), (_S, _S, _S, _S, {items}, self._reads))"
    exec(f"def __replace__(self, *, {params}):\n    {body}\n", ns)
    return ns["__replace__"]


class RecordingState(State):
    """A State whose component reads are noted in a set it carries after its fields (a tuple
    item: no instance dict to build on every run); the states a step derives from it
    (with_broker, replace) note into the same set.

    Every way to read it is recorded: the accessors note their part; indexing, unpacking,
    comparing, hashing, key() and the tuple methods note every part they can see. Its fields
    are items 4 to 7, read through C-level item getters (the same cost as a plain attribute);
    items 0 to 3, where a State keeps them, are _SEALED, so that a step reading past the record
    (tuple.__getitem__(state, 2)) fails at once instead of caching a wrong outcome."""

    __slots__ = ()
    _c = _tuplegetter(4, None)
    _bs = _tuplegetter(5, None)
    _g = _tuplegetter(6, None)
    _u = _tuplegetter(7, None)
    _reads = _tuplegetter(8, None)

    @classmethod
    def of(cls, state: tuple, reads: set) -> RecordingState:
        return _new(cls, (_SEALED, _SEALED, _SEALED, _SEALED, state[0], state[1], state[2], state[3], reads))

    @property
    def controller(self):
        self._reads.add(0)
        return self._c

    @property
    def brokers(self):
        brokers = self._bs
        self._reads.update(range(1, len(brokers) + 1))
        return brokers

    @property
    def ghost(self):
        self._reads.add(len(self._bs) + 1)
        return self._g

    @property
    def budget(self):
        self._reads.add(len(self._bs) + 2)
        return self._u

    def broker(self, b: int):
        self._reads.add(b)
        return self._bs[b - 1]

    def is_stalled(self, b: int) -> bool:
        self._reads.add(len(self._bs) + 2 + b)
        return self._bs[b - 1].stalled

    def applied_epoch(self, b: int) -> int:
        self._reads.add(2 * len(self._bs) + 2 + b)
        return self._bs[b - 1].applied

    def with_broker(self, b: int, broker) -> RecordingState:
        bs: list = list(self._bs)
        bs[b - 1] = broker
        return _new(type(self), (_SEALED, _SEALED, _SEALED, _SEALED, self._c, tuple(bs), self._g, self._u, self._reads))

    def map_brokers(self, fn) -> RecordingState:
        """Into a Reads, the map is noted rather than the brokers (module docstring); into a
        plain set, every broker is noted read."""
        reads = self._reads
        if reads.__class__ is not Reads:
            bs = tuple(map(fn, self.brokers))
        else:
            bs = tuple(map(fn, self._bs))
            reads.maps.append((fn, bs))
        return _new(type(self), (_SEALED, _SEALED, _SEALED, _SEALED, self._c, bs, self._g, self._u, reads))

    def _all(self) -> tuple:
        """The four fields, every part noted as read (for a read that sees them all)."""
        self._reads.update(range(len(self._bs) + 3))
        return (self._c, self._bs, self._g, self._u)

    def __getitem__(self, i):
        if isinstance(i, int) and -4 <= i < 4:
            return (RecordingState.controller, RecordingState.brokers, RecordingState.ghost, RecordingState.budget)[
                i
            ].__get__(self)
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return 4

    def _replace(self, **changes):  # NamedTuple's would rebuild it without the record
        return self.__replace__(**changes)

    def _asdict(self):
        return dict(zip(State._fields, self._all()))

    def key(self) -> tuple:  # State.key() reads every part
        return as_tuple(State(*self._all()))

    __replace__ = _compile_replace()


def _seeing_all(name: str):
    """A tuple method run on the four fields, every part noted as read."""
    method = getattr(tuple, name)
    return lambda self, *args: method(self._all(), *args)


for _name in (
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__hash__",
    "__contains__",
    "__add__",
    "__mul__",
    "__rmul__",
    "count",
    "index",
    "__repr__",
    "__reduce__",
    "__getnewargs__",
):
    setattr(RecordingState, _name, _seeing_all(_name))


class ObservingState(RecordingState):
    """A RecordingState for spec.hw.observe: whether broker b serves reads (State.leads) is
    noted as that flag alone (part -b), not as the whole broker, so that observations are
    keyed on the brokers that serve reads (checker/cache/fast.py observe_key)."""

    __slots__ = ()

    def leads(self, b: int) -> bool:
        self._reads.add(-b)
        br = self._bs[b - 1]
        return br.alive and br.leader == b


def broker_of(p: int, n: int) -> int:
    """The broker a broker's part (b, its stalled flag or its applied epoch) belongs to."""
    return p if p <= n else p - n - 2 if p <= 2 * n + 2 else p - 2 * n - 2


def flag_parts(brokers) -> list:
    """The key parts after the components' serial numbers: each broker's stalled flag, then each
    one's applied epoch (the positions in the module docstring)."""
    return [*[b.stalled for b in brokers], *[b.applied for b in brokers]]


def recorded(fn, cfg, state: State, *args) -> tuple:
    """(what fn(cfg, state, *args) returns, the set of part positions it read)."""
    reads: set = set()
    out = fn(cfg, RecordingState.of(state, reads), *args)
    return out, reads
