"""The model contract: what every engine needs of a model, as one typing.Protocol.

spec.model.Model keeps the first part (the reference engine needs nothing more);
checker.fast.FastModel adds fingerprints and the screened transitions the local and
multi-process engines consume. Spark builds a FastModel on each executor from the Config.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from kafkamc.spec.config import Config
from kafkamc.spec.state import State


class Model(Protocol):
    """Initial states and ordered successors: enough for the reference engine."""

    config: Config

    def initial_states(self) -> list[State]: ...

    def successors(self, state: State) -> Iterator[tuple[Any, State]]: ...

    def canonical(self, state: State) -> State: ...

    def action_types(self) -> tuple: ...


class SearchModel(Model, Protocol):
    """What the fast engines add: stable fingerprints of canonical states, and the
    transitions screened for the search (checker/cache/fast.py, FastSuccessors.transitions).
    How states travel between processes is the engines' own (checker/engines/transport.py)."""

    def fingerprint(self, state: State) -> int: ...

    def transitions(
        self, state: State, is_new=None, quiet=None, fired=None, known=None, edge=None
    ) -> Iterable[tuple]: ...

    def expand(self, state: State) -> Iterator[tuple[Any, State, int]]: ...
