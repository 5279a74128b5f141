"""What a replay observes of a real cluster, and the one abstraction function that maps a model
state onto the same terms, so that the two can be compared.

The observable state of the partition (`View`):
- the controller's registration: leader, leader epoch, ISR and ELR, the last one the controller
  committed to its metadata log (client.controller_history, PartitionRegistration.merge);
- each replica's log as its segment files hold it: (leader epoch, value) per record, read here
  from the files (the record batch format v2 of DefaultRecordBatch: the batch header carries
  partitionLeaderEpoch, each record its value), so no JVM is started per look;
- the leader's high watermark as its replication-offset-checkpoint file has it
  (ReplicaManager.checkpointHighWatermarks, every replica.high.watermark.checkpoint.interval.ms).

`abstract(state)` is the abstraction function: the model's leader epochs start at 1 and Kafka's
at 0 (a new partition's PartitionRecord has leaderEpoch 0), so a model epoch e is Kafka's e - 1;
the model's "no leader" (0) is Kafka's -1; model record id r is the value "r<r>" the replay
produces; ISR and ELR are compared as sorted broker lists.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkamc.spec.state import NO_LEADER, State, members

if TYPE_CHECKING:
    from kafkamc.realkafka.cluster import Cluster


@dataclass(frozen=True)
class View:
    """The partition as the comparison sees it, in Kafka's numbering."""

    leader: int
    epoch: int
    replicas: tuple[int, ...]  # the assignment, in its order (the preferred replica first)
    up: tuple[int, ...]  # the brokers whose process runs (a paused one too)
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    logs: tuple[tuple[int, tuple[tuple[int, str], ...]], ...]  # (broker, ((epoch, value), ...))
    leader_hw: int | None  # None: no leader, or its checkpoint not written yet

    def words(self) -> str:
        logs = "; ".join(f"{b}:[{' '.join(f'{v}@e{e}' for e, v in log)}]" for b, log in self.logs)
        return (
            f"leader {self.leader} epoch {self.epoch} replicas {list(self.replicas)} ISR {list(self.isr)} "
            f"ELR {list(self.elr)} up {list(self.up)} "
            f"HW {self.leader_hw} | logs {logs}"
        )

    def differences(self, other: View) -> list[str]:
        out = [
            f"{name}: {getattr(self, name)} vs {getattr(other, name)}"
            for name in ("leader", "epoch", "replicas", "up", "isr", "elr", "leader_hw")
            if getattr(self, name) != getattr(other, name)
        ]
        theirs = dict(other.logs)
        out += [f"log of {b}: {log} vs {theirs.get(b)}" for b, log in self.logs if theirs.get(b) != log]
        return out


@dataclass(frozen=True)
class ControllerView:
    """What the controller's metadata log says of the partition and the brokers, in Kafka's
    numbering: what trace validation (realkafka/validate.py) matches the model's steps against."""

    leader: int
    epoch: int
    pepoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_elr: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    recovering: bool
    unfenced: tuple[int, ...]  # registered and not fenced
    shutting: tuple[int, ...]  # unfenced and in controlled shutdown

    def words(self) -> str:
        extra = "".join(
            f" {name} {list(getattr(self, name))}"
            for name in ("last_elr", "adding", "removing", "shutting")
            if getattr(self, name)
        )
        return (
            f"leader {self.leader} epoch {self.epoch} partition epoch {self.pepoch} replicas {list(self.replicas)} "
            f"ISR {list(self.isr)} ELR {list(self.elr)} unfenced {list(self.unfenced)}"
            + extra
            + (" RECOVERING" if self.recovering else "")
        )


def controller_view(state: State, brokers: tuple[int, ...]) -> ControllerView:
    """The abstraction function for the controller: model epochs (leader and partition) start at
    1, Kafka's at 0; the model's registered bitmask is Kafka's unfenced brokers."""
    c = state.controller
    return ControllerView(
        -1 if c.leader == NO_LEADER else c.leader,
        c.epoch - 1,
        c.pepoch - 1,
        tuple(c.replicas),
        members(c.isr),
        members(c.elr),
        members(c.lastelr),
        members(c.adding),
        members(c.removing),
        c.recovering,
        tuple(b for b in brokers if c.registered >> (b - 1) & 1),
        tuple(b for b in members(c.shutting & c.registered) if b in brokers),
    )


def files_view(state: State, values: tuple[str, ...], b: int) -> tuple[list, int, list, bool]:
    """What a cut reads of broker b, from the model's state: its log as (Kafka epoch, value)
    pairs (record id k is the k-th value the state appended), its HW checkpoint, its leader-epoch
    cache as (Kafka epoch, start offset) pairs, and whether its process runs."""
    br = state.broker(b)
    log = [(e - 1, values[r - 1]) for e, r in br.log]
    return log, br.checkpoint_hw, [(e - 1, o) for e, o in br.cache], br.alive


def batch_view(
    partition: dict[str, Any], registrations: dict[int, dict[str, bool]], brokers: tuple[int, ...]
) -> ControllerView:
    """The same terms from the metadata log (realkafka/metadata_log.py)."""
    unfenced = tuple(b for b in brokers if b in registrations and not registrations[b]["fenced"])
    return ControllerView(
        int(partition["leader"]),
        int(partition["leaderEpoch"]),
        int(partition["partitionEpoch"]),
        tuple(partition["replicas"]),
        tuple(sorted(partition["isr"])),
        tuple(sorted(partition["elr"])),
        tuple(sorted(partition["lastKnownElr"])),
        tuple(sorted(partition["adding"])),
        tuple(sorted(partition["removing"])),
        bool(partition["recovering"]),
        unfenced,
        tuple(b for b in unfenced if registrations[b]["shutdown"]),
    )


def value_of(record: int) -> str:
    return f"r{record}"


def abstract(state: State, brokers: tuple[int, ...]) -> View:
    """The model's state in the terms of View (the one place the numbering is mapped); the logs
    of `brokers`, every broker of the cluster (one that hosts no replica has an empty log)."""
    c = state.controller
    leader = -1 if c.leader == NO_LEADER else c.leader
    logs = tuple((b, tuple((e - 1, value_of(r)) for e, r in state.broker(b).log)) for b in brokers)
    return View(
        leader,
        c.epoch - 1,
        tuple(c.replicas),
        tuple(b for b in brokers if state.broker(b).alive),
        members(c.isr),
        members(c.elr),
        logs,
        None if c.leader == NO_LEADER else state.broker(c.leader).hw,
    )


# ---- the real side


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (ByteUtils.readVarint / readVarlong): (value, next position)."""
    shift = raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos


def read_segment(data: bytes) -> list[tuple[int, int, str]]:
    """(offset, leader epoch, value) of every record of a segment file's complete batches.
    Batch header (DefaultRecordBatch): baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
    magic i8, crc u32, attributes i16, lastOffsetDelta i32, two timestamps i64, producerId i64,
    producerEpoch i16, baseSequence i32, record count i32; the records follow at byte 61.
    Control batches (attribute bit 5) carry no user record; compression is not used here."""
    out: list[tuple[int, int, str]] = []
    pos = 0
    while pos + 61 <= len(data):
        base, length, epoch = struct.unpack_from(">qii", data, pos)
        end = pos + 12 + length
        if length <= 0 or end > len(data):  # a batch still being written
            break
        attributes, count = struct.unpack_from(">h", data, pos + 21)[0], struct.unpack_from(">i", data, pos + 57)[0]
        rpos = pos + 61
        for _ in range(count if not attributes & 0x20 else 0):
            _size, rpos = _varint(data, rpos)
            rpos += 1  # record attributes
            _ts, rpos = _varint(data, rpos)
            delta, rpos = _varint(data, rpos)
            klen, rpos = _varint(data, rpos)
            rpos += max(klen, 0)
            vlen, rpos = _varint(data, rpos)
            value = data[rpos : rpos + max(vlen, 0)].decode(errors="replace")
            rpos += max(vlen, 0)
            headers, rpos = _varint(data, rpos)
            for _h in range(headers):
                hk, rpos = _varint(data, rpos)
                rpos += hk
                hv, rpos = _varint(data, rpos)
                rpos += max(hv, 0)
            out.append((base + delta, epoch, value))
        pos = end
    return out


def read_log(folder: Path) -> list[tuple[int, int, str]]:
    """Every record of a partition folder's segments, in offset order (empty if no folder)."""
    out: list[tuple[int, int, str]] = []
    for seg in sorted(folder.glob("*.log")):
        out += read_segment(seg.read_bytes())
    return out


def checkpoint(path: Path, topic: str, partition: int = 0) -> int | None:
    """The offset a checkpoint file (version, count, then "topic partition offset" lines) holds."""
    try:
        lines = path.read_text().splitlines()[2:]
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == str(partition):
            return int(parts[2])
    return None


def epoch_cache(folder: Path) -> list[tuple[int, int]]:
    """(leader epoch, start offset) of each entry of a partition's leader-epoch-checkpoint file
    (LeaderEpochCheckpointFile: version, count, then "epoch offset" lines); empty if none."""
    try:
        lines = (folder / "leader-epoch-checkpoint").read_text().splitlines()[2:]
    except OSError:
        return []
    return [(int(e), int(o)) for e, o in (line.split() for line in lines if line.strip())]


def cache_agrees(seen: list[tuple[int, int]], model: list[tuple[int, int]], log_end: int) -> bool:
    """A broker's leader-epoch checkpoint as read agrees with the model's cache. One torn read
    is Kafka's own: UnifiedLog.append assigns each batch's epoch (assignEpochStartOffset, and
    LeaderEpochFileCache.assign writes the file) before LocalLog.append writes the batch, so a
    broker paused between the two shows one newer epoch starting at its log end."""
    if seen == model:
        return True
    return seen[:-1] == model and seen[-1][1] == log_end and (not model or seen[-1][0] > model[-1][0])


def observe(cluster: Cluster, topic: str, brokers: tuple[int, ...], history: list[dict[str, Any]]) -> View:
    """The real View: the controller's last registration (from `history`, read by the caller
    with client.controller_history) and each broker's files (a partition Kafka deleted from a
    broker is renamed to "<topic>-<partition>.<id>-delete", so it reads as empty here)."""
    last: dict[str, Any] = history[-1] if history else {"leader": -1, "leaderEpoch": -1, "replicas": []}
    logs = []
    for b in brokers:
        records = read_log(cluster.partition_dir(b, topic))
        # Offsets start at 0 and have no gaps here (no compaction, no retention): check it.
        if [o for o, _e, _v in records] != list(range(len(records))):
            raise RuntimeError(f"broker {b}'s log has offsets {[o for o, _e, _v in records]}")
        logs.append((b, tuple((e, v) for _o, e, v in records)))
    leader = int(last["leader"])
    hw = None if leader < 0 else checkpoint(cluster.data_dir(leader) / "replication-offset-checkpoint", topic)
    return View(
        leader,
        int(last["leaderEpoch"]),
        tuple(last["replicas"]),
        tuple(b for b in brokers if cluster.alive(b)),
        tuple(sorted(last.get("isr", []))),
        tuple(sorted(last.get("elr", []))),
        tuple(logs),
        hw,
    )


def log_clock(near: float) -> Callable[[str], float]:
    """Seconds since the epoch of a Kafka log line's "HH:MM:SS,mmm" stamp (the machine's local
    time), read on the day of `near`, a time of the run: a stamp over 12 hours before it is of the
    next day. A malformed stamp raises ValueError."""
    day = time.localtime(near)
    midnight = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0, 0, 0, -1))

    def seconds(stamp: str) -> float:
        h, m, s = stamp.split(":")
        t = midnight + int(h) * 3600 + int(m) * 60 + float(s.replace(",", "."))
        return t + 86400 if t < near - 43200 else t

    return seconds
