"""Search bounds: how many times the search may spend each kind of event on one path.

A bound is declared beside the actions that spend it (in their RPC module), and that
declaration is its one home: Next lists the actions, their bounds are derived from that list
(spec/next.py BOUNDS), and a Model fixes its configuration's value of each when it is built
(Config.bounded). The `--max-...` flags, the gate's keys and the state's Budget read the same
list, so a new bound needs no edit anywhere else. Nothing here or in spec/config.py knows
which bounds exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    # Why the bound needs a broker outside the replica set, when it does: at 0 spare brokers an
    # action that spends it could never fire, so a value above 0 is refused (Config.validated).
    needs_spare_broker: str = ""

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


def by_setting(bounds: tuple[Bound, ...]) -> dict[str, Bound]:
    """Each bound's setting and its former names, to the bound."""
    return {s: b for b in bounds for s in (b.setting, *b.alias_settings)}


def bound_settings(settings: dict, bounds: tuple[Bound, ...]) -> dict[str, Any]:
    """The settings of `bounds` among `settings`, former names changed to the current ones; a
    bound given under two of its names is a TypeError."""
    names = by_setting(bounds)
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key in [k for k in settings if k in names]:
        setting = names[key].setting
        if setting in out:
            raise TypeError(f"{setting} is given twice, as {given_as[setting]} and as {key}")
        out[setting], given_as[setting] = settings[key], key
    return out
