"""The compact visited set: 64-bit fingerprints in a flat table, and parent pointers in six bytes a node."""

from __future__ import annotations

import random

import pytest
from kafkamc.checker.visited import FingerprintSet, Nodes


def test_fingerprint_set_grows_and_answers():
    rng = random.Random(1)
    fps = [rng.getrandbits(64) for _ in range(100_000)] + [0, 1]
    s = FingerprintSet(capacity=16)
    assert all(s.add(fp) for fp in fps[:-1])
    assert not s.add(1)  # 0 is stored as 1
    assert len(s) == len(fps) - 1
    assert all(fp in s for fp in fps) and not s.add(fps[500])
    assert rng.getrandbits(64) not in s
    assert s.nbytes / len(s) <= 8 / 0.375 + 1e-9


def test_nodes_keep_paths_in_six_bytes():
    n = Nodes()
    root = n.add(-1, 2)
    a = n.add(root, 7)
    b = n.add(a, 65535)
    assert n.path(b) == (2, [7, 65535]) and n.nbytes == 3 * 6
    with pytest.raises(OverflowError):
        n.add(b, 65536)
