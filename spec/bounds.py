"""Search bounds: how many times the search may spend each kind of event on one path.

A bound is declared beside the actions that spend it (in their RPC module) and listed in
spec/next.py; the configuration, its `--max-...` flags and the state's Budget all derive
from that list, so a new bound needs no edit anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    name: str  # the budget counter; the setting is "max_" + name
    default: int
    meaning: str  # what one unit of it is, in Kafka's words (the flag's help)
    limit: int | None = None  # the largest value an explicit-state search can take

    @property
    def setting(self) -> str:
        return "max_" + self.name

    @property
    def flag(self) -> str:
        return "--max-" + self.name.replace("_", "-")
