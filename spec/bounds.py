"""Search bounds: how many times the search may spend each kind of event on one path.

A bound is declared beside the actions that spend it (in their RPC module) and listed in
spec/next.py; the configuration, its `--max-...` flags and the state's Budget all derive
from that list, so a new bound needs no edit anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass


def _flag(name: str) -> str:
    return "--max-" + name.replace("_", "-")


@dataclass(frozen=True)
class Bound:
    name: str  # the budget counter, as states and saved traces record it
    default: int
    meaning: str  # what one unit of it is, in Kafka's words (the flag's help)
    limit: int | None = None  # the largest value an explicit-state search can take
    # The setting's name when it is not the counter's: a renamed setting keeps its counter,
    # so traces saved before the rename still replay state for state.
    setting_name: str = ""
    aliases: tuple[str, ...] = ()  # former setting names (without "max_"), still accepted, deprecated

    @property
    def setting(self) -> str:
        """The Config field, gate file key and summary name: "max_" + the setting's name."""
        return "max_" + (self.setting_name or self.name)

    @property
    def flag(self) -> str:
        return _flag(self.setting_name or self.name)

    @property
    def alias_settings(self) -> tuple[str, ...]:
        return tuple("max_" + a for a in self.aliases)

    @property
    def alias_flags(self) -> tuple[str, ...]:
        return tuple(_flag(a) for a in self.aliases)
