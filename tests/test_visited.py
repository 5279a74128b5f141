"""The compact visited set: 64-bit fingerprints in a flat table, and parent pointers in six bytes a node."""

from __future__ import annotations

import random

import pytest
from kafkamc.checker.store.frontier import Kept
from kafkamc.checker.store.visited import FingerprintMap, FingerprintSet, Nodes


def test_fingerprint_set_grows_and_answers():
    rng = random.Random(1)
    fps = [rng.getrandbits(64) for _ in range(100_000)] + [0, 1]
    s = FingerprintSet(capacity=16)
    assert all(s.add(fp) for fp in fps[:-1])
    assert not s.add(1)  # 0 is stored as 1
    assert len(s) == len(fps) - 1
    assert all(fp in s for fp in fps) and not s.add(fps[500])
    assert rng.getrandbits(64) not in s
    assert s.nbytes / len(s) <= 8 / 0.5 + 1e-9  # grown by half: at least half full


def test_nodes_keep_paths_in_six_bytes():
    n = Nodes()
    root = n.add(-1, 2)
    a = n.add(root, 7)
    b = n.add(a, 65535)
    assert n.path(b) == (2, [7, 65535]) and n.nbytes == 3 * 6
    with pytest.raises(OverflowError):
        n.add(b, 65536)


def test_fingerprint_map_keeps_a_value_per_fingerprint_through_growth():
    rng = random.Random(2)
    fps = [rng.getrandbits(64) for _ in range(20_000)]
    m = FingerprintMap(capacity=16)
    for i, fp in enumerate(fps):
        m.put(fp, i)
    m.put(fps[7], 99)  # a second put replaces the value, not the entry
    assert len(m) == len(fps) and m.get(fps[7]) == 99
    assert [m.get(fp) for fp in fps[:5]] == [0, 1, 2, 3, 4] and m.get(fps[-1]) == len(fps) - 1
    assert m.get(rng.getrandbits(64)) is None and fps[3] in m
    m.put(0, 5)  # 0 is stored as 1, as in the set
    assert m.get(0) == 5 == m.get(1)


def test_kept_states_index_their_keys_and_keep_the_smaller_key():
    kept = Kept(width=2)
    kept.add(10, b"\x00\x02", None, [10, 2])
    kept.add(11, b"\x00\x01", "NoSplitBrain", [11, 4])
    kept.replace(0, b"\x00\x00", "HighWatermarkMonotonic", [10, 6])  # a record: fp, serials
    assert list(kept.in_key_order()) == [(b"\x00\x00", [10, 6]), (b"\x00\x01", [11, 4])]
    assert kept.index is not None and kept.index.get(11) == 1
    assert kept.broken == {0: "HighWatermarkMonotonic", 1: "NoSplitBrain"}
    with pytest.raises(AssertionError, match="differ in length"):
        kept.add(12, b"\x00", None, [12, 8])
