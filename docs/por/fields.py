"""Field-granular read and write sets of the spec's step functions, for the POR measurement.

checker/cache/footprint.py records reads per component (the controller, a broker, the ghost, the
budget). Partial-order reduction needs them per field: two steps that touch different
fields of the same broker may commute. Here each component of a State is wrapped in a
proxy that notes every field read as (kind, ..., field): ("c", f) a controller field,
("b", b, f) broker b's field, ("g", f) a ghost field, ("u", bound) one bound's count in the
budget. A proxy's methods and properties (Broker.leo, Controller.active, Budget.of) run
with the proxy as self, so their field reads are noted too. A copy made with
`spec.state.replace` is a proxy that no longer notes the fields it was given: those are
written, and reading them back is not a read of the state before the step.

Write sets come from comparing the state before and after, field by field (`changed`).
"""

from __future__ import annotations

from typing import Any

from kafkamc.spec.state import Broker, Budget, Controller, Ghost, State, record_fields

_KINDS = {Controller: "c", Broker: "b", Ghost: "g", Budget: "u"}


def _make_proxy(cls):
    names = record_fields(cls)

    class Proxy:
        __slots__ = ("_o", "_rec", "_tag", "_w")

        def __init__(self, obj, rec, tag, written=frozenset()):
            self._o, self._rec, self._tag, self._w = obj, rec, tag, written

        def _read_all(self):
            for n in names:
                if n not in self._w:
                    self._rec.add((*self._tag, n))
            return self._o

        def __eq__(self, other):
            return self._read_all() == (other._read_all() if isinstance(other, _PROXIES) else other)

        def __ne__(self, other):
            return not self.__eq__(other)

        def __hash__(self):
            return hash(self._read_all())

        def __repr__(self):
            return f"Proxy({self._o!r})"

        def __replace__(self, **changes):
            new = type(self._o).__replace__(self._o, **{k: unwrap(v) for k, v in changes.items()})
            return Proxy(new, self._rec, self._tag, self._w | frozenset(changes))

    for n in names:

        def getter(self, n=n):
            if n not in self._w:
                self._rec.add((*self._tag, n))
            return getattr(self._o, n)

        setattr(Proxy, n, property(getter))
    for name, attr in vars(cls).items():
        if name.startswith("__") or name in names:
            continue
        if isinstance(attr, property):
            setattr(Proxy, name, property(lambda self, f=attr.fget: f(self)))
        elif isinstance(attr, staticmethod) or callable(attr):
            setattr(Proxy, name, attr)
    Proxy.__name__ = f"{cls.__name__}Proxy"
    return Proxy


class BudgetProxy:
    """The budget, per bound: of(bound) and spend(bound) read that bound's count alone."""

    __slots__ = ("_o", "_rec", "_tag", "_w")

    def __init__(self, obj, rec, tag, written=frozenset()):
        self._o, self._rec, self._tag, self._w = obj, rec, tag, written

    def of(self, bound: str) -> int:
        if bound not in self._w:
            self._rec.add(("u", bound))
        return self._o.of(bound)

    def spend(self, bound: str):
        self.of(bound)
        return BudgetProxy(self._o.spend(bound), self._rec, self._tag, self._w | {bound})

    @property
    def spent(self):
        self._rec.add(("u", "*"))
        return self._o.spent

    def __eq__(self, other):
        self._rec.add(("u", "*"))
        return self._o == unwrap(other)

    def __hash__(self):
        self._rec.add(("u", "*"))
        return hash(self._o)


PROXY: dict[type, Any] = {cls: _make_proxy(cls) for cls in (Controller, Broker, Ghost)}
PROXY[Budget] = BudgetProxy
_PROXIES = tuple(PROXY.values())


def unwrap(v):
    return v._o if isinstance(v, _PROXIES) else v


def recording(state: State, rec: set) -> State:
    """A plain State whose components are proxies noting their field reads into rec."""
    c, bs, g, u = state
    return State(
        PROXY[Controller](c, rec, ("c",)),
        tuple(PROXY[Broker](br, rec, ("b", b)) for b, br in enumerate(bs, 1)),
        PROXY[Ghost](g, rec, ("g",)),
        BudgetProxy(u, rec, ("u",)),  # type: ignore[arg-type]  # read as a Budget
    )


def plain(state: State) -> State:
    """A state built by a step from a recording state, with its proxies taken off."""
    c, bs, g, u = state
    return State(unwrap(c), tuple(unwrap(br) for br in bs), unwrap(g), unwrap(u))


def changed(before: State, after: State) -> set:
    """The fields in which two states differ, named as the proxies name reads."""
    out: set = set()
    if before.controller is not after.controller:
        for n in record_fields(Controller):
            if getattr(before.controller, n) != getattr(after.controller, n):
                out.add(("c", n))
    for b, (x, y) in enumerate(zip(before.brokers, after.brokers), 1):
        if x is not y:
            for n in record_fields(Broker):
                if getattr(x, n) != getattr(y, n):
                    out.add(("b", b, n))
    if before.ghost is not after.ghost:
        for n in record_fields(Ghost):
            if getattr(before.ghost, n) != getattr(after.ghost, n):
                out.add(("g", n))
    if before.budget != after.budget:
        old, new = dict(before.budget.spent), dict(after.budget.spent)
        out.update(("u", k) for k in set(old) | set(new) if old.get(k) != new.get(k))
    return out
