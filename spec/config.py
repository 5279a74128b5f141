"""The configuration of one model: the Kafka settings under test and the search bounds."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from kafkamc.spec.bounds import Bound, bound_settings, by_setting
from kafkamc.spec.protocol import Protocol, ProtocolError


class ConfigError(ValueError):
    """A configuration that does not describe a valid partition; the CLI turns it into exit 2."""


ACKS = ("all", "1", "0")
MAX_BROKERS = 6  # the largest cluster an explicit-state search covers here


@dataclass(frozen=True, init=False)
class Config:
    """The Kafka settings under test, the protocol era, and the search bounds.

    The bounds are not fields written out here, and this module does not know which exist:
    each is declared beside its actions, and Next's list of them (spec/next.py BOUNDS) is
    fixed into a configuration when a Model is built or a command reads its input
    (`bounded`). Until then a configuration holds the bound settings it was given
    (Config(max_records=1); a former name such as max_crashes still works), and `bound(b)`
    answers with the given value or b's default. Once bounded, `limits` holds one
    (counter name, value) pair per bound in Next's order, and cfg.max_records reads one."""

    # Kafka settings
    rf: int = 3  # replication.factor: how many brokers host the partition
    # Brokers in the cluster (--brokers): 1..broker_count, of which rf host the partition at a
    # time; 0 means rf. A pool larger than rf gives a reassignment somewhere to move to.
    broker_count: int = 0
    minisr: int = 2  # min.insync.replicas
    acks: str = "all"  # producer acks: "all" (-1), "1" or "0"
    unclean: bool = False  # unclean.leader.election.enable
    # auto.leader.rebalance.enable (true by default since 0.8.2): the controller moves
    # leadership back to the preferred replica itself (spec/elect_leaders.py).
    auto_rebalance: bool = True
    protocol: Protocol = field(default_factory=Protocol)  # the rules of one Kafka era
    # A ghost for the durability table: how many brokers stayed down across an acks=all
    # write from append to ack. Off by default because it splits otherwise equal states.
    track_down: bool = False
    # Log retention (spec/retention.py): the oldest record, once committed on every replica, is
    # deleted and the state renumbered, so producers may write forever within --max-records.
    log_retention: bool = False
    # Symmetry reduction: states that differ only by a relabelling of broker ids count once.
    # Either way every replica assignment order is an initial state; reduced, they fold into one.
    symmetry: bool = True
    # Bounds: each is a budget the search may spend, not a requirement. Bounded: (counter name,
    # value) per bound; before, the settings given, by counter name or by setting ("max_...").
    limits: tuple = ()
    # The bounds fixed by `bounded` (its model's, Next's in a command), in order; () before.
    # Not compared: two configurations with the same values are equal however they were made.
    known_bounds: tuple = field(default=(), compare=False, repr=False)

    def __init__(self, **settings: Any):
        known = {f.name for f in fields(self)}
        bounds = tuple(settings.pop("known_bounds", ()) or ())
        given = dict(settings.pop("limits", ()) or ())
        # A setting by name wins over the same bound in `limits` (dataclasses.replace passes both).
        named = {k: settings.pop(k) for k in [k for k in settings if k.startswith("max_")]}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"Config has no setting {', '.join(unknown)}")
        for f in fields(self):
            if f.name in ("limits", "known_bounds"):
                continue
            default = f.default_factory() if f.default is MISSING else f.default  # type: ignore[operator]
            object.__setattr__(self, f.name, settings.get(f.name, default))
        if bounds:
            self._fix(bounds, given, named)
        else:
            object.__setattr__(self, "limits", tuple(sorted({**given, **named}.items())))
            object.__setattr__(self, "known_bounds", ())
            object.__setattr__(self, "_values", {})  # bound(): filled on first use, one lookup after

    def _fix(self, bounds: tuple[Bound, ...], given: dict, named: dict) -> None:
        """Every bound of `bounds` given its value: by setting name, else in `given` by counter
        name, else its default. A setting no bound has is a TypeError, as any unknown setting."""
        by_name = bound_settings(named, bounds)
        left = sorted(set(named) - set(by_setting(bounds)) | set(given) - {b.name for b in bounds})
        if left:
            raise TypeError(f"Config has no setting {', '.join(left)}")
        values = {b.name: by_name.get(b.setting, given.get(b.name, b.default)) for b in bounds}
        object.__setattr__(self, "limits", tuple(values.items()))
        object.__setattr__(self, "known_bounds", bounds)
        object.__setattr__(self, "_values", values)

    def bounded(self, bounds: tuple[Bound, ...]) -> Config:
        """This configuration with the value of each of `bounds` (a model's, Next's for a
        command) fixed; bounds it was fixed with before are kept, ahead of new ones."""
        if all(b in self.known_bounds for b in bounds) and self.known_bounds:
            return self
        out = object.__new__(Config)
        for f in fields(self):
            if f.name not in ("limits", "known_bounds"):
                object.__setattr__(out, f.name, getattr(self, f.name))
        given = dict(self.limits)
        named = {k: given.pop(k) for k in [k for k in given if k.startswith("max_")]}
        out._fix(tuple(dict.fromkeys((*self.known_bounds, *bounds))), given, named)
        return out

    def _settings(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self) if f.name not in ("limits", "known_bounds"))

    def __eq__(self, other: object) -> bool:
        """Equal settings and equal values of every bound either side has fixed (Config(max_records=2)
        is Next's default configuration, once bounded); given under other names, unequal until then."""
        if not isinstance(other, Config):
            return NotImplemented
        both = (*self.known_bounds, *(b for b in other.known_bounds if b not in self.known_bounds))
        try:
            mine, theirs = (self.bounded(both), other.bounded(both)) if both else (self, other)
        except TypeError:  # a setting the other side's bounds do not have: not the same configuration
            return False
        return self._settings() == other._settings() and dict(mine.limits) == dict(theirs.limits)

    def __hash__(self) -> int:
        return hash(self._settings())  # the bounds left out: equal configurations may list them apart

    def __getattr__(self, name: str) -> int:
        """cfg.max_records and every other bound's setting, former names included: of every
        bound once bounded, else of those given."""
        d = self.__dict__
        if not name.startswith("max_") or "known_bounds" not in d:
            raise AttributeError(name)
        b = by_setting(d["known_bounds"]).get(name)
        if b is not None:
            return d["_values"][b.name]
        for key, value in d["limits"]:
            if key == name:
                return value
        raise AttributeError(f"{name}: not given, and this configuration's bounds are not fixed (Config.bounded)")

    def allows(self, budget, b: Bound) -> bool:
        """Whether a path that spent `budget` may spend one more of bound b."""
        return budget.of(b.name) < self.bound(b)

    def bound(self, b: Bound) -> int:
        """The value of one bound in this configuration: given, or its default."""
        values = self.__dict__["_values"]
        value = values.get(b.name)
        if value is None:
            given = dict(self.limits)
            names = [s for s in (b.setting, *b.alias_settings) if s in given]
            if len(names) > 1:
                raise TypeError(f"{b.setting} is given twice, as {names[0]} and as {names[1]}")
            value = values[b.name] = given[names[0]] if names else given.get(b.name, b.default)
        return value

    @property
    def brokers(self) -> tuple[int, ...]:
        return tuple(range(1, (self.broker_count or self.rf) + 1))

    @property
    def effective_minisr(self) -> int:
        # Kafka caps min.insync.replicas at the replication factor (Partition.effectiveMinIsr).
        return min(self.minisr, self.rf)

    def rule(self, name: str) -> str:
        return getattr(self.protocol, name)

    def kafka_settings(self) -> str:
        """The Kafka settings under Kafka's own names: the topic's replication.factor and
        configs, the producer's acks, and the KIP-966 feature level (1: ELR on)."""
        text = (
            f"replication.factor={self.rf} min.insync.replicas={self.minisr} acks={self.acks} "
            f"unclean.leader.election.enable={'true' if self.unclean else 'false'} "
            f"auto.leader.rebalance.enable={'true' if self.auto_rebalance else 'false'} "
            f"eligible.leader.replicas.version={1 if self.rule('elr') == 'on' else 0}"
        )
        if self.minisr > self.rf:
            text += f" (min.insync.replicas capped at replication.factor: {self.effective_minisr})"
        return text

    def _known(self) -> tuple[Bound, ...]:
        if not self.known_bounds:
            raise ValueError("this configuration's bounds are not fixed: Model(config) or config.bounded(BOUNDS)")
        return self.known_bounds

    def bounds(self) -> dict[str, int]:
        """Each bound's setting (by its current name) and value, in Next's order."""
        return {b.setting: self.bound(b) for b in self._known()}

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("limits", "known_bounds")}
        d["protocol"] = self.protocol.to_dict()
        d.update(self.bounds())
        return d

    @staticmethod
    def from_dict(data: dict, bounds: tuple[Bound, ...]) -> Config:
        """A configuration saved by to_dict, this release's or the previous one's (whose bounds
        have their former names, max_crashes and max_unclean_crashes), with `bounds` (Next's,
        which the caller reads) fixed, and checked: a saved file is input like the flags."""
        names = by_setting(bounds)
        known = {f.name for f in fields(Config) if f.name not in ("limits", "known_bounds")} | set(names)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown configuration key(s): {', '.join(unknown)}")
        try:
            given = bound_settings(data, bounds)
        except TypeError as e:
            raise ConfigError(str(e)) from None
        data = {**{k: v for k, v in data.items() if k not in names}, **given}
        if isinstance(data.get("protocol"), dict):
            try:
                data["protocol"] = Protocol().with_rules(**data["protocol"])
            except ProtocolError as e:
                raise ConfigError(str(e)) from None
        return Config(**data, known_bounds=bounds).validated()

    def validated(self) -> Config:
        """The configuration, checked once where it enters (the flags, a gate file, a trace
        file): the Kafka settings, and each fixed bound's value (`bounded` first)."""
        for name, value in (("--rf", self.rf), ("--minisr", self.minisr)):
            if not isinstance(value, int) or isinstance(value, bool):  # a trace file can say `true`
                raise ConfigError(f"{name} must be a whole number (got {value!r})")
        for name, value in (
            ("--unclean-leader-election", self.unclean),
            ("--auto-leader-rebalance", self.auto_rebalance),
            ("--symmetry", self.symmetry),
        ):
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be true or false (got {value!r})")
        if self.rf < 1:
            raise ConfigError(f"--rf must be at least 1 (got {self.rf})")
        if self.rf > 5:
            raise ConfigError(f"--rf {self.rf} is beyond what an explicit-state search can cover; use at most 5")
        if not isinstance(self.broker_count, int) or isinstance(self.broker_count, bool):
            raise ConfigError(f"--brokers must be a whole number (got {self.broker_count!r})")
        if self.broker_count and not self.rf <= self.broker_count <= MAX_BROKERS:
            raise ConfigError(f"--brokers must be between --rf ({self.rf}) and {MAX_BROKERS} (got {self.broker_count})")
        if self.minisr < 1:
            raise ConfigError(f"--minisr must be at least 1 (got {self.minisr})")
        if self.minisr > 5:
            raise ConfigError(f"--minisr {self.minisr} is larger than any replication factor this model covers")
        if self.acks not in ACKS:
            raise ConfigError(f"--acks must be one of {', '.join(ACKS)} (got {self.acks!r})")
        for b in self.known_bounds:  # none before `bounded`: a bound is checked against its declaration
            value = self.bound(b)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{b.flag} must be a whole number (got {value!r})")
            if value < 0:
                raise ConfigError(f"{b.flag} must not be negative (got {value})")
            if b.limit is not None and value > b.limit:
                raise ConfigError(f"{b.flag} {value} is too large for this model; use at most {b.limit}")
        # E.g. a reassignment starts on a broker outside the replica set and a cancel needs one in
        # flight: with no broker beyond --rf, neither could ever fire.
        for b in self.known_bounds:
            if b.needs_spare_broker and self.bound(b) and len(self.brokers) <= self.rf:
                raise ConfigError(f"{b.flag} needs --brokers above --rf ({self.rf}): {b.needs_spare_broker}")
        try:
            self.protocol.validated()
        except ProtocolError as e:
            raise ConfigError(str(e)) from None
        return self
