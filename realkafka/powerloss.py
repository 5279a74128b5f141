"""A power-loss crash of one broker: SIGKILL, then its partition's segments cut back to the
flushed prefix, as the disk would hold them after the machine lost power.

What a SIGKILL alone cannot show: the killed JVM's writes sit in the kernel's page cache and a
restarted broker reads them back. Kafka does not fsync a write (log.flush.interval.messages and
log.flush.interval.ms are unbounded by default, LogConfig): a segment is fsynced when it rolls,
at a clean shutdown, or by LogManager.flushDirtyLogs past those bounds, and the offset up to which
it was fsynced is the partition's recovery point (UnifiedLog.flush -> updateRecoveryPoint), which
LogManager writes to `recovery-point-offset-checkpoint`. What the disk holds after a power loss
is therefore the recovery point's prefix plus any prefix of the rest the kernel had written
back. The model's hard crash keeps `keep` records (spec/broker_lifecycle.BrokerCrash): the cut
keeps exactly those, and refuses a keep below the recovery point (fsynced data is not lost).

What is cut and what is not:
- the topic partition's `.log` files, at the first batch holding an offset >= keep (a batch is
  written whole or not at all: a record is never cut in half);
- the offset and time indexes are left: the restarted broker finds no clean-shutdown marker
  (LogLoader, hadCleanShutdown false) and recovers every segment past the recovery point,
  rebuilding their indexes (LogSegment.recover); its leader-epoch cache is truncated to the new
  log end (LogLoader -> LeaderEpochFileCache.truncateFromEndAsyncFlush) and its HW read from the
  checkpoint is capped at the log end (UnifiedLog.updateHighWatermark), as the model's
  min(checkpoint_hw, keep);
- the checkpoint files (replication-offset, recovery-point, leader-epoch) are kept: Kafka writes
  them with an fsync (CheckpointFile.write);
- the broker's copy of the cluster metadata log is kept: KafkaRaftClient fsyncs it before it
  reports the fetched offset, and the model has no metadata loss.
"""

from __future__ import annotations

import struct
from pathlib import Path

from kafkamc.realkafka.observe import checkpoint


class CannotCut(RuntimeError):
    """The model's keep is below what Kafka had fsynced, or the files are not as expected."""


def cut_offset(data: bytes, keep: int) -> int:
    """The byte position in a segment file's data of the first batch whose last offset is
    >= keep (DefaultRecordBatch header: baseOffset i64, batchLength i32, ..., lastOffsetDelta i32
    at byte 23), or len(data) if every complete batch ends before keep."""
    pos = 0
    while pos + 27 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        delta = struct.unpack_from(">i", data, pos + 23)[0]
        if length <= 0 or pos + 12 + length > len(data):
            break
        if base + delta >= keep:
            return pos
        pos += 12 + length
    return pos


def cut(partition_dir: Path, data_dir: Path, topic: str, keep: int, partition: int = 0) -> str:
    """Cut a killed broker's partition back to its first `keep` records; a line for the report."""
    flushed = checkpoint(data_dir / "recovery-point-offset-checkpoint", topic, partition) or 0
    if keep < flushed:
        raise CannotCut(f"the model keeps {keep} records but Kafka had fsynced {flushed} (its recovery point)")
    segments = sorted(partition_dir.glob("*.log"))
    removed = 0
    for seg in segments:
        base = int(seg.stem)
        data = seg.read_bytes()
        at = 0 if base >= keep else cut_offset(data, keep)
        if at < len(data):
            removed += len(data) - at
            with seg.open("r+b") as f:
                f.truncate(at)
    return f"cut to {keep} record(s) ({removed} bytes gone; recovery point {flushed})"


def boundaries(partition_dir: Path) -> list[int]:
    """The record counts a cut can keep exactly: the end of each whole batch of the partition's
    segments, and 0 (a cut falls between batches, `cut_offset`)."""
    out = [0]
    for seg in sorted(partition_dir.glob("*.log")):
        data, pos = seg.read_bytes(), 0
        while pos + 27 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            delta = struct.unpack_from(">i", data, pos + 23)[0]
            if length <= 0 or pos + 12 + length > len(data):
                break
            out.append(base + delta + 1)
            pos += 12 + length
    return out
