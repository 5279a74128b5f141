"""realkafka/powerloss.py without a cluster: where a segment is cut, and the cut refused below
the recovery point (what Kafka had fsynced)."""

from __future__ import annotations

import struct

import pytest
from kafkamc.realkafka.powerloss import CannotCut, boundaries, cut, cut_offset


def _batch(base: int, records: int, size: int = 80) -> bytes:
    """A record batch header as DefaultRecordBatch lays it out (baseOffset, batchLength, ...,
    lastOffsetDelta at byte 23), padded to `size` bytes; the body is not read by the cut."""
    data = bytearray(size)
    struct.pack_into(">qi", data, 0, base, size - 12)
    struct.pack_into(">i", data, 23, records - 1)
    return bytes(data)


def test_the_cut_falls_between_whole_batches():
    seg = _batch(0, 1) + _batch(1, 2) + _batch(3, 1)
    assert [cut_offset(seg, k) for k in range(5)] == [0, 80, 80, 160, 240]
    # A batch still being written (its length past the end) ends the walk.
    assert cut_offset(seg + _batch(4, 1)[:40], 9) == 240


def _partition(tmp_path, recovery_point: int):
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(_batch(0, 1) + _batch(1, 1))
    (tmp_path / "recovery-point-offset-checkpoint").write_text(f"0\n1\nt 0 {recovery_point}\n")
    return part


def test_a_power_loss_keeps_the_flushed_prefix(tmp_path):
    part = _partition(tmp_path, 0)
    assert cut(part, tmp_path, "t", 1) == "cut to 1 record(s) (80 bytes gone; recovery point 0)"
    assert (part / "00000000000000000000.log").stat().st_size == 80


def test_fsynced_records_are_not_lost(tmp_path):
    part = _partition(tmp_path, 2)
    with pytest.raises(CannotCut, match="keeps 0 records but Kafka had fsynced 2"):
        cut(part, tmp_path, "t", 0)
    assert (part / "00000000000000000000.log").stat().st_size == 160


def test_a_power_loss_can_keep_only_whole_batches(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(_batch(0, 1) + _batch(1, 2))
    (part / "00000000000000000003.log").write_bytes(_batch(3, 1))
    assert boundaries(part) == [0, 1, 3, 4]  # never 2: the second batch holds offsets 1 and 2
