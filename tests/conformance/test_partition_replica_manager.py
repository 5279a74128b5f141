"""Conformance with ReplicaManagerTest (core/src/test/scala/unit/kafka/server/ReplicaManagerTest.scala):
what a follower's fetch response carries, and the HW checkpoint a clean shutdown writes.

ReplicaManager.fetchMessages reads the log first (readFromLog, which takes the HW with the
records) and Partition.fetchRecords records the follower's fetch offset after that read
(updateFollowerFetchState), which is when the HW may advance: the HW a fetch makes possible
reaches the follower with its next fetch.
"""

from __future__ import annotations

from kafkamc.spec.broker_lifecycle import BrokerRestart
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.produce import Produce
from scenario import crash, follower_with_hw, run, step


def test_follower_fetch_with_default_selector_no_forced_hw_propagation():
    """Kafka: ReplicaManagerTest.testFollowerFetchWithDefaultSelectorNoForcedHwPropagation: the
    follower's fetch from the log end lets the leader's HW advance (and the produce be
    acknowledged), but the response carries the HW read before (0); the follower learns the new
    HW from its next fetch. (Kafka's second fetch waits in purgatory until its timeout; the
    model's next fetch answers at once with the same HW.)"""
    cfg = Config(rf=2, minisr=1)
    s = run(cfg, Produce(1, 1), Fetch(2, 1))
    assert s.broker(2).leo == 1 and s.broker(1).hw == 0
    s = step(cfg, s, Fetch(2, 1))
    assert s.broker(1).hw == 1 and s.ghost.acked == 0b1
    assert s.broker(2).hw == 0
    s = step(cfg, s, Fetch(2, 1))
    assert s.broker(2).hw == 1


def test_checkpoint_hw_on_shutdown():
    """Kafka: ReplicaManagerTest.testCheckpointHwOnShutdown: a clean shutdown writes the HW
    checkpoint, so the restarted broker starts with the HW it had in memory."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_clean_shutdowns=1)
    s = crash(cfg, follower_with_hw(cfg), 2)
    assert step(cfg, s, BrokerRestart(2)).broker(2).hw == 2
