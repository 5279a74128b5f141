"""The configuration of one model: the Kafka settings under test and the search bounds."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from kafkamc.spec.protocol import Protocol, ProtocolError


class ConfigError(ValueError):
    """A configuration that does not describe a valid partition; the CLI turns it into exit 2."""


ACKS = ("all", "1", "0")


@dataclass(frozen=True)
class Config:
    # Kafka settings
    rf: int = 3                  # replication.factor: brokers 1..rf all host the partition
    minisr: int = 2              # min.insync.replicas
    acks: str = "all"            # producer acks: "all" (-1), "1" or "0"
    unclean: bool = False        # unclean.leader.election.enable
    protocol: Protocol = field(default_factory=Protocol)   # the rules of one Kafka era
    # A ghost for the durability table: how many brokers stayed down across an acks=all
    # write from append to ack. Off by default because it splits otherwise equal states.
    track_down: bool = False
    # Symmetry reduction: states that differ only by a relabelling of broker ids count once.
    # Either way every replica assignment order is an initial state; reduced, they fold into one.
    symmetry: bool = True
    # Bounds: each is a budget the search may spend, not a requirement.
    max_records: int = 2         # produce requests that may be appended
    max_crashes: int = 0         # clean shutdowns (the log survives whole)
    max_unclean_crashes: int = 1  # crashes that lose the unflushed tail of the log
    max_fences: int = 0          # controller fences a live broker that missed heartbeats
    max_isr_shrinks: int = 2     # AlterPartition requests that remove a lagging follower

    @property
    def brokers(self) -> tuple[int, ...]:
        return tuple(range(1, self.rf + 1))

    @property
    def effective_minisr(self) -> int:
        # Kafka caps min.insync.replicas at the replication factor (Partition.effectiveMinIsr).
        return min(self.minisr, self.rf)

    def rule(self, name: str) -> str:
        return getattr(self.protocol, name)

    def bounds(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name.startswith("max_")}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["protocol"] = self.protocol.to_dict()
        return d

    @staticmethod
    def from_dict(data: dict) -> "Config":
        known = {f.name for f in fields(Config)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown configuration key(s): {', '.join(unknown)}")
        data = dict(data)
        if isinstance(data.get("protocol"), dict):
            try:
                data["protocol"] = Protocol().with_rules(**data["protocol"])
            except ProtocolError as e:
                raise ConfigError(str(e)) from None
        return Config(**data).validated()

    def validated(self) -> "Config":
        if not isinstance(self.rf, int) or self.rf < 1:
            raise ConfigError(f"--rf must be at least 1 (got {self.rf})")
        if self.rf > 5:
            raise ConfigError(f"--rf {self.rf} is beyond what an explicit-state search can cover; use at most 5")
        if self.minisr < 1:
            raise ConfigError(f"--minisr must be at least 1 (got {self.minisr})")
        if self.minisr > 5:
            raise ConfigError(f"--minisr {self.minisr} is larger than any replication factor this model covers")
        if self.acks not in ACKS:
            raise ConfigError(f"--acks must be one of {', '.join(ACKS)} (got {self.acks!r})")
        for name, value in self.bounds().items():
            if value < 0:
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} must not be negative (got {value})")
        try:
            self.protocol.validated()
        except ProtocolError as e:
            raise ConfigError(str(e)) from None
        if self.max_records > 6:
            raise ConfigError(f"--max-records {self.max_records} is too large for this model; use at most 6")
        return self
