"""The configuration of one model: the Kafka settings under test and the search bounds."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from kafkamc.spec.bounds import Bound
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.protocol import Protocol, ProtocolError
from kafkamc.spec.reassignment import CANCELS, REASSIGNMENTS


class ConfigError(ValueError):
    """A configuration that does not describe a valid partition; the CLI turns it into exit 2."""


ACKS = ("all", "1", "0")
MAX_BROKERS = 6  # the largest cluster an explicit-state search covers here

# Each bound's setting and its former names (spec/bounds.py), to the bound.
BY_SETTING: dict[str, Bound] = {s: b for b in BOUNDS for s in (b.setting, *b.alias_settings)}


def bound_settings(settings: dict) -> dict[str, Any]:
    """The bound settings among `settings`, former names changed to the current ones; a
    bound given under two of its names is a TypeError."""
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key in [k for k in settings if k in BY_SETTING]:
        setting = BY_SETTING[key].setting
        if setting in out:
            raise TypeError(f"{setting} is given twice, as {given_as[setting]} and as {key}")
        out[setting], given_as[setting] = settings[key], key
    return out


@dataclass(frozen=True, init=False)
class Config:
    """The Kafka settings under test, the protocol era, and the search bounds.

    The bounds are not fields written out here: every bound an action declares in
    spec/next.py is a setting (Config(max_records=1), cfg.max_records; a former name such as
    max_crashes still works), kept in `limits` as (counter name, value) pairs in Next's order."""

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
    # Bounds: each is a budget the search may spend, not a requirement.
    limits: tuple = ()

    def __init__(self, **settings: Any):
        known = {f.name for f in fields(self)}
        values = {b.name: b.default for b in BOUNDS}
        values.update(dict(settings.pop("limits", ()) or ()))
        for setting, value in bound_settings(settings).items():
            values[BY_SETTING[setting].name] = value
        settings = {k: v for k, v in settings.items() if k not in BY_SETTING}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"Config has no setting {', '.join(unknown)}")
        for f in fields(self):
            if f.name == "limits":
                continue
            default = f.default_factory() if f.default is MISSING else f.default  # type: ignore[operator]
            object.__setattr__(self, f.name, settings.get(f.name, default))
        object.__setattr__(self, "limits", tuple((b.name, values[b.name]) for b in BOUNDS))
        object.__setattr__(self, "_values", dict(self.limits))  # bound(): one lookup, not a scan

    def __getattr__(self, name: str) -> int:
        """cfg.max_records and every other bound's setting, former names included."""
        b = BY_SETTING.get(name)
        if b is None or "_values" not in self.__dict__:
            raise AttributeError(name)
        return self.__dict__["_values"][b.name]

    def allows(self, budget, b: Bound) -> bool:
        """Whether a path that spent `budget` may spend one more of bound b."""
        return budget.of(b.name) < self.__dict__["_values"][b.name]

    def bound(self, b: Bound) -> int:
        """The value of one bound in this configuration."""
        return self.__dict__["_values"][b.name]

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

    def bounds(self) -> dict[str, int]:
        """Each bound's setting (by its current name) and value, in Next's order."""
        return {b.setting: self.bound(b) for b in BOUNDS}

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "limits"}
        d["protocol"] = self.protocol.to_dict()
        d.update(self.bounds())
        return d

    @staticmethod
    def from_dict(data: dict) -> Config:
        """A configuration saved by to_dict, this release's or the previous one's (whose bounds
        have their former names, max_crashes and max_unclean_crashes)."""
        known = {f.name for f in fields(Config) if f.name != "limits"} | set(BY_SETTING)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown configuration key(s): {', '.join(unknown)}")
        try:
            bounds = bound_settings(data)
        except TypeError as e:
            raise ConfigError(str(e)) from None
        data = {**{k: v for k, v in data.items() if k not in BY_SETTING}, **bounds}
        if isinstance(data.get("protocol"), dict):
            try:
                data["protocol"] = Protocol().with_rules(**data["protocol"])
            except ProtocolError as e:
                raise ConfigError(str(e)) from None
        return Config(**data).validated()

    def validated(self) -> Config:
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
        for b in BOUNDS:
            value = self.bound(b)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{b.flag} must be a whole number (got {value!r})")
            if value < 0:
                raise ConfigError(f"{b.flag} must not be negative (got {value})")
            if b.limit is not None and value > b.limit:
                raise ConfigError(f"{b.flag} {value} is too large for this model; use at most {b.limit}")
        # A reassignment starts on a broker outside the replica set (reassignment_candidates) and a
        # cancel needs one in flight: with no broker beyond --rf, neither could ever fire.
        for b in (REASSIGNMENTS, CANCELS):
            if self.bound(b) and len(self.brokers) <= self.rf:
                raise ConfigError(
                    f"{b.flag} needs --brokers above --rf ({self.rf}): a reassignment moves to another broker"
                )
        try:
            self.protocol.validated()
        except ProtocolError as e:
            raise ConfigError(str(e)) from None
        return self
