"""Actions are data: one frozen dataclass per Kafka RPC or event, so a trace prints, compares
and replays. The step function for each lives with its owner: replication.py (produce,
fetch, truncation), isr.py (AlterPartition on the leader), lifecycle.py (metadata, crash,
restart, fencing); the controller's decisions are in controller.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


# ---------------------------------------------------------------- actions as data

@dataclass(frozen=True)
class Produce:
    """A producer sends record `record` to the broker it believes leads."""
    leader: int
    record: int


@dataclass(frozen=True)
class Fetch:
    """The follower fetches from the leader it knows, from its LEO with its last fetched epoch.

    The leader records the follower's position from the request and answers with records
    and its HW, or with a diverging epoch; the follower appends or truncates.
    """
    follower: int
    leader: int


@dataclass(frozen=True)
class OffsetsForLeaderEpoch:
    """A follower that must truncate asks the leader where its last epoch ends (KIP-101 rules)."""
    follower: int
    leader: int


@dataclass(frozen=True)
class ReplicaStall:
    """A follower stops fetching (GC pause, slow disk) for longer than replica.lag.time.max.ms."""
    follower: int


@dataclass(frozen=True)
class AlterPartition:
    """The leader asks the controller to change the ISR; the controller validates and decides."""
    leader: int
    isr: tuple


@dataclass(frozen=True)
class HandleAlterPartitionResponse:
    """The leader commits (or rolls back) its pending ISR change."""
    leader: int


@dataclass(frozen=True)
class MetadataUpdate:
    """The broker applies the controller's latest metadata: becomes leader or follower."""
    broker: int


@dataclass(frozen=True)
class BrokerCrash:
    """The broker process dies; the controller fences it and re-elects if it led.

    keep = None is a clean crash. Otherwise only the first `keep` records of the log
    were flushed to disk and survive (page cache lost).
    """
    broker: int
    keep: Optional[int] = None


@dataclass(frozen=True)
class BrokerRestart:
    """The broker restarts, recovers its log, re-registers with a new broker epoch."""
    broker: int


@dataclass(frozen=True)
class ControllerFenceBroker:
    """The controller fences a live broker that missed heartbeats; it may not know yet."""
    broker: int


@dataclass(frozen=True)
class BrokerHeartbeat:
    """A fenced but live broker heartbeats again and the controller unfences it."""
    broker: int


ACTION_TYPES = (
    Produce, Fetch, OffsetsForLeaderEpoch, ReplicaStall, AlterPartition, HandleAlterPartitionResponse,
    MetadataUpdate, BrokerCrash, BrokerRestart, ControllerFenceBroker, BrokerHeartbeat,
)
