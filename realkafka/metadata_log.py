"""The controller's metadata log, read as a sequence of observations of one partition.

kafka.tools.DumpLogSegments --cluster-metadata-decoder prints each batch's header, then each
record with its CreateTime and its payload as JSON. What we observe is the partition's
registration and the brokers' after each record that changes them. The records of one event the
controller handles (a ControllerWriteEvent: a fence is partition changes, then the fence) are
appended together, but a batch may hold several events (the raft client lingers to fill it) and
one event's records may fill several batches; what tells them apart is left to the validator
(realkafka/validate.py), which may take a record's view as a step on the way to the next one
written within the append linger.

How the records change what we observe (PartitionRegistration.merge, BrokerRegistration):
- PARTITION_RECORD sets everything; PARTITION_CHANGE_RECORD changes only the fields it carries.
  Its `leader` is -2 when the leader does not change; any other value bumps the leader epoch.
  Every change record bumps the partition epoch.
- REGISTER_BROKER_RECORD registers a broker (fenced unless it says otherwise);
  BROKER_REGISTRATION_CHANGE_RECORD's `fenced` is 1 (fence), -1 (unfence) or 0 (unchanged), its
  `inControlledShutdown` 1 once the broker asked to shut down; the old FENCE_BROKER_RECORD and
  UNFENCE_BROKER_RECORD do the same as fenced 1 and -1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

NO_CHANGE = -2  # PartitionChangeRecord.leader when the leader stays (LeaderConstants.NO_LEADER_CHANGE)


@dataclass(frozen=True)
class Batch:
    """One committed record that changed what we observe: its batch's creation time (s), its
    offset, the partition's registration after it (None before the topic exists) and the
    brokers' state."""

    t: float
    offset: int
    partition: dict[str, Any] | None
    brokers: dict[int, dict[str, bool]]  # broker -> {"fenced": ..., "shutdown": ...}


def _apply_partition(state: dict[str, Any] | None, kind: str, data: dict[str, Any]) -> dict[str, Any] | None:
    if kind == "PARTITION_RECORD":
        return {
            "leader": data["leader"],
            "leaderEpoch": data["leaderEpoch"],
            "partitionEpoch": data["partitionEpoch"],
            "replicas": list(data["replicas"]),
            "isr": list(data["isr"]),
            "elr": list(data.get("eligibleLeaderReplicas") or []),
            "lastKnownElr": list(data.get("lastKnownElr") or []),
            "adding": list(data.get("addingReplicas") or []),
            "removing": list(data.get("removingReplicas") or []),
            "recovering": data.get("leaderRecoveryState", 0) == 1,
        }
    if state is None:
        return None
    state = dict(state)
    if data.get("leader", NO_CHANGE) != NO_CHANGE:
        state["leader"], state["leaderEpoch"] = data["leader"], state["leaderEpoch"] + 1
    for src, dst in (
        ("isr", "isr"),
        ("replicas", "replicas"),
        ("eligibleLeaderReplicas", "elr"),
        ("lastKnownElr", "lastKnownElr"),
        ("addingReplicas", "adding"),
        ("removingReplicas", "removing"),
    ):
        if data.get(src) is not None:
            state[dst] = list(data[src])
    if data.get("leaderRecoveryState", -1) in (0, 1):
        state["recovering"] = data["leaderRecoveryState"] == 1
    state["partitionEpoch"] += 1
    return state


def _apply_broker(brokers: dict[int, dict[str, bool]], kind: str, data: dict[str, Any]) -> None:
    b = int(data.get("brokerId", data.get("id", -1)))
    if kind == "REGISTER_BROKER_RECORD":
        brokers[b] = {"fenced": bool(data.get("fenced", True)), "shutdown": bool(data.get("inControlledShutdown"))}
    elif kind == "UNREGISTER_BROKER_RECORD":
        brokers.pop(b, None)
    elif b in brokers and kind in ("FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD"):
        brokers[b] = brokers[b] | {"fenced": kind == "FENCE_BROKER_RECORD"}
    elif b in brokers and kind == "BROKER_REGISTRATION_CHANGE_RECORD":
        if data.get("fenced", 0) in (1, -1):
            brokers[b] = brokers[b] | {"fenced": data["fenced"] == 1}
        if data.get("inControlledShutdown", 0) == 1:
            brokers[b] = brokers[b] | {"shutdown": True}


def batches(dump: str, topic: str, partition: int = 0) -> list[Batch]:
    """Every record of a DumpLogSegments dump after which the partition or a broker's
    registration differs from before it, in commit order."""
    topic_id = None
    part: dict[str, Any] | None = None
    brokers: dict[int, dict[str, bool]] = {}
    out: list[Batch] = []
    last: tuple | None = None
    t, offset = 0.0, -1

    def close() -> None:
        nonlocal last
        seen = (json.dumps(part, sort_keys=True), json.dumps(sorted(brokers.items())))
        if offset >= 0 and seen != last:
            out.append(Batch(t, offset, None if part is None else dict(part), {b: dict(v) for b, v in brokers.items()}))
        last = seen

    for line in dump.splitlines():
        if "payload: " not in line or not line.startswith("| offset:"):
            continue
        words = line.split()
        offset, t = int(words[2]), int(words[4]) / 1000
        rec = json.loads(line.split("payload: ", 1)[1])
        kind, data = rec.get("type"), rec.get("data", {})
        if kind == "TOPIC_RECORD" and data.get("name") == topic:
            topic_id = data["topicId"]
        elif kind.startswith(("REGISTER_BROKER", "UNREGISTER_BROKER", "FENCE_BROKER", "UNFENCE_BROKER", "BROKER_REG")):
            _apply_broker(brokers, kind, data)
        elif kind.startswith("PARTITION") and topic_id is not None and data.get("topicId") == topic_id:
            if data.get("partitionId") == partition:
                part = _apply_partition(part, kind, data)
        close()
    return out


def history(dump: str, topic: str, partition: int = 0) -> list[dict[str, Any]]:
    """The partition's registrations in commit order, one per batch that changed it."""
    out: list[dict[str, Any]] = []
    for b in batches(dump, topic, partition):
        if b.partition is not None and (not out or out[-1] != b.partition):
            out.append(b.partition)
    return out


def reregistrations(dump: str) -> list[tuple[float, int, bool]]:
    """Each registration of a new incarnation of a broker already registered: its time, the
    broker, and whether the previous incarnation was still unfenced (ClusterControlManager.
    registerBroker accepts a new incarnation once the old session expired, whether or not
    maybeFenceOneStaleBroker fenced it; the registration cleans it up then)."""
    brokers: dict[int, dict[str, bool]] = {}
    out = []
    for line in dump.splitlines():
        if "payload: " not in line or not line.startswith("| offset:"):
            continue
        rec = json.loads(line.split("payload: ", 1)[1])
        kind, data = rec.get("type"), rec.get("data", {})
        if kind.startswith(("REGISTER_BROKER", "UNREGISTER_BROKER", "FENCE_BROKER", "UNFENCE_BROKER", "BROKER_REG")):
            b = int(data.get("brokerId", data.get("id", -1)))
            if kind == "REGISTER_BROKER_RECORD" and b in brokers:
                out.append((int(line.split()[4]) / 1000, b, not brokers[b]["fenced"]))
            _apply_broker(brokers, kind, data)
    return out
