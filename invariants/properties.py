"""User-defined properties: invariants and reachability properties declared in a Python file.

A Kafka engineer states a promise of their own with the same Z3 declarations the built-in
properties use (invariants/catalog.py, invariants/reach.py), without forking the package:

    from kafkamc.invariants.properties import state_invariant, step_invariant, reachable, isr_size
    import z3

    @step_invariant("no write is acknowledged while the ISR is below min.insync.replicas")
    def NoAckBelowMinIsr(cfg, P, V):
        ...  # a list of (description, z3 formula) parts, like the built-in invariants

The decorators return plain Invariant / Reachable values; a file's properties are the
module-level values of those types (no registry, no global state). The file travels as its
text (PropertyFile), so forked workers and Spark executors run the same declarations.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import z3
from kafkamc.invariants.catalog import INVARIANTS, Invariant, Parts
from kafkamc.invariants.reach import Reachable
from kafkamc.invariants.view import View
from kafkamc.spec.config import Config
from kafkamc.spec.produce import RECORDS

TIER = "user"  # what `kafkamc invariants` prints for a property from a file


class PropertiesError(Exception):
    """A properties file that cannot be read, does not run, or declares nothing usable."""


def state_invariant(meaning: str) -> Callable[[Callable[[Config, View], Parts]], Invariant]:
    """Declare `def Name(cfg, V) -> [(description, z3 formula), ...]`, true in every reachable state."""
    return lambda build: Invariant(build.__name__, TIER, "state", meaning, build)


def step_invariant(meaning: str) -> Callable[[Callable[[Config, View, View], Parts]], Invariant]:
    """Declare `def Name(cfg, P, V) -> parts` over the states before (P) and after (V) every step."""
    return lambda build: Invariant(build.__name__, TIER, "action", meaning, build)


def reachable(meaning: str) -> Callable[[Callable[[Config, View, View], z3.BoolRef]], Reachable]:
    """Declare `def Name(cfg, P, V) -> z3 formula`: a step event `check --reach Name` searches for."""
    return lambda build: Reachable(build.__name__, meaning, build, lambda cfg: False)


def isr_size(cfg: Config, V: View) -> z3.ArithRef:
    """How many brokers the controller's ISR names."""
    return z3.Sum([z3.If(V.in_isr[b], 1, 0) for b in cfg.brokers])


def newly_acked(cfg: Config, P: View, V: View) -> z3.BoolRef:
    """Some record was acknowledged to its producer in this step."""
    return z3.Or([z3.And(z3.Not(P.acked[r]), V.acked[r]) for r in range(1, cfg.bound(RECORDS) + 1)] or [False])


@dataclass(frozen=True)
class PropertyFile:
    """A properties file as its path and text: hashable, picklable, the same wherever it is run."""

    path: str
    source: str

    @classmethod
    def read(cls, path: str | Path) -> PropertyFile:
        try:
            text = Path(path).read_text()
        except FileNotFoundError:
            raise PropertiesError(f"no such properties file: {path}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise PropertiesError(f"cannot read properties file {path}: {e}") from None
        found = cls(str(path), text)
        found.declared()  # fail now, on the driver, with one line
        return found

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def declared(self) -> tuple[tuple[Invariant, ...], tuple[Reachable, ...]]:
        """Run the file and collect its module-level invariants and reachability properties."""
        namespace: dict = {"__name__": "kafkamc_user_properties", "__file__": self.path}
        try:
            exec(compile(self.source, self.path, "exec"), namespace)
        except Exception as e:  # the user's code: any error is reported as bad input
            raise PropertiesError(f"properties file {self.path} failed: {type(e).__name__}: {e}") from None
        invs = tuple(v for v in namespace.values() if isinstance(v, Invariant) and v.tier == TIER)
        reach = tuple(v for v in namespace.values() if isinstance(v, Reachable))
        if not invs and not reach:
            raise PropertiesError(
                f"properties file {self.path} declares no property "
                "(use @state_invariant, @step_invariant or @reachable from kafkamc.invariants.properties)"
            )
        builtin = {inv.name.lower() for inv in INVARIANTS}
        for p in invs + reach:
            if p.name.lower() in builtin:
                raise PropertiesError(f"properties file {self.path}: {p.name} is the name of a built-in invariant")
        # The bodies run later, when a command builds its checks: a mistake there is the
        # user's, so it must become one line (exit 2), not a traceback read as a finding.
        return (
            tuple(replace(i, build=_Checked(self.path, i.name, i.kind, i.build)) for i in invs),
            tuple(replace(r, build=_Checked(self.path, r.name, "reach", r.build)) for r in reach),
        )

    def built(self, cfg: Config) -> None:
        """Build every property of the file for `cfg` once, so that a body that fails says so
        (PropertiesError) where nothing else would build it (`kafkamc invariants`)."""
        invs, reach = self.declared()
        V, P = View(cfg, "", "s"), View(cfg, "prev.", "p")
        for inv in invs:
            inv.build(cfg, V) if inv.kind == "state" else inv.build(cfg, P, V)
        for r in reach:
            r.build(cfg, P, V)

    def to_json(self) -> dict:
        """How a trace names the file it needs."""
        return {"file": self.path, "sha256": self.digest}


_SIGNATURE = {"state": "(cfg, V)", "action": "(cfg, P, V)", "reach": "(cfg, P, V)"}


class _Checked:
    """A user's property body, run so that any error or a result of the wrong shape is a
    PropertiesError naming the property, the file and what was expected."""

    def __init__(self, path: str, name: str, kind: str, build: Callable[..., Any]):
        self.path, self.name, self.kind, self.build = path, name, kind, build

    def __call__(self, *args: Any) -> Any:
        where = f"properties file {self.path}: {self.name}{_SIGNATURE[self.kind]}"
        try:
            out = self.build(*args)
        except Exception as e:  # the user's code: any error is bad input
            raise PropertiesError(f"{where} failed: {type(e).__name__}: {e}") from None
        if self.kind == "reach":
            if not isinstance(out, z3.BoolRef | bool):
                raise PropertiesError(f"{where} returned {_what(out)}; a reachability property returns a z3 formula")
            return out
        ok = isinstance(out, list | tuple) and all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], z3.BoolRef | bool)
            for p in out
        )
        if not ok:
            shape = "a list of (description, z3 formula)"
            raise PropertiesError(f"{where} returned {_what(out)}; an invariant returns {shape}")
        return list(out)


def _what(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
