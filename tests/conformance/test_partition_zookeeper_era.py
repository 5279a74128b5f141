"""Conformance with ReplicaManagerTest as of the ZooKeeper eras (core/src/test/scala/unit/kafka/
server/ReplicaManagerTest.scala at 2.2.0 and 2.6.0): a leader adds a follower to the ISR only
inside a fetch it accepted, and a follower that missed a leader epoch truncates again.

Before AlterPartition (isr_update=zookeeper, until 2.7) the fetch that shows a follower caught up
writes the ISR itself: Partition.updateReplicaLogReadResult (2.2) or updateFollowerFetchState
(2.3 to 2.6) calls maybeExpandIsr with the position of that fetch.
"""

from __future__ import annotations

from kafkamc.spec.alter_partition import AlterPartition
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, OffsetsForLeaderEpoch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.protocol import Protocol, preset
from kafkamc.spec.state import Broker
from scenario import (
    UNKNOWN,
    cache_of,
    controller,
    enabled,
    follower_broker,
    leader_broker,
    log_of,
    mask,
    replace,
    step,
    with_brokers,
)


def test_follower_state_not_updated_if_log_read_fails():
    """Kafka: ReplicaManagerTest.testFollowerStateNotUpdatedIfLogReadFails: a follower fetch naming
    an older leader epoch is refused and leaves the leader's record of the follower as it was;
    a fetch in the current epoch records its offset. As of 2.2.0 that accepted fetch is also
    where the ISR grows: follower 2, at the leader's log end (epoch 5, five records), is added
    by the fetch itself (the ISR written in ZooKeeper, the partition's version bumped), and no
    AlterPartition step exists to add it later from an older position. On the newest preset
    the same fetch only records the position and the leader proposes the addition after it."""
    cfg = Config(rf=2, minisr=1, protocol=preset("2.2.0"))
    c = controller(2, 1, mask(1), epoch=5)
    log = log_of(5, 5, 5, 5, 5)
    leader = leader_broker(c, 1, log=log, cache=cache_of(log), hw=5)
    stale = with_brokers(c, leader, replace(follower_broker(c, log, cache_of(log), hw=5), epoch=4))
    assert not enabled(cfg, stale, Fetch(2, 1))  # FENCED_LEADER_EPOCH (KIP-320, 2.1.0): nothing recorded
    assert stale.broker(1).views[1] == UNKNOWN
    s = with_brokers(c, leader, follower_broker(c, log, cache_of(log), hw=5))
    fetched = step(cfg, s, Fetch(2, 1))
    assert fetched.broker(1).views[1] == 5
    assert (fetched.controller.isr, fetched.controller.pepoch) == (mask(1, 2), c.pepoch + 1)
    assert fetched.broker(1).isr == mask(1, 2) and fetched.broker(1).pending == 0
    newest = step(Config(rf=2, minisr=1), s, Fetch(2, 1))
    assert newest.controller.isr == mask(1) and enabled(Config(rf=2, minisr=1), newest, AlterPartition(1, (1, 2)))
    # A position the leader recorded earlier (a previous life of the follower, say) adds nothing
    # outside a fetch in the ZooKeeper eras; under AlterPartition the leader may propose from it.
    seen = with_brokers(c, replace(leader, views=(UNKNOWN, 5)), Broker(leader=1, epoch=5))
    assert not enabled(cfg, seen, AlterPartition(1, (1, 2)))
    assert enabled(Config(rf=2, minisr=1), seen, AlterPartition(1, (1, 2)))


def test_become_follower_when_leader_is_unchanged_but_missed_leader_update():
    """Kafka: ReplicaManagerTest.testBecomeFollowerWhenLeaderIsUnchangedButMissedLeaderUpdate: a
    follower whose leader stays the same while the leader epoch jumps by more than one (it missed
    an update) goes through truncation again (KAFKA-7164, 2.0.1; Partition.makeFollower returns
    true). Follower 2 of leader 1 in epoch 1 holds r1 and r2; leader 1, now in epoch 3, kept r1
    only and wrote r3. With the 2.0.1 rules the follower asks OffsetsForLeaderEpoch and drops
    r2; with 2.0.0's it keeps fetching from offset 2, r2 still at offset 1 where the leader has
    r3: the logs diverge."""
    c = controller(2, 1, mask(1, 2), epoch=3)
    leader = leader_broker(c, 1, log=((1, 1), (3, 3)), cache=((1, 0), (3, 1)), hw=1)
    follower = Broker(leader=1, epoch=1, log=((1, 1), (1, 2)), cache=((1, 0),), hw=1)
    s = with_brokers(c, leader, follower)
    fixed = Config(rf=2, minisr=1, protocol=preset("2.0.1"))
    s1 = step(fixed, s, MetadataUpdate(2))
    assert (s1.broker(2).epoch, s1.broker(2).truncating) == (3, True)
    s1 = step(fixed, s1, OffsetsForLeaderEpoch(2, 1))
    assert s1.broker(2).log == ((1, 1),)
    assert preset("2.0.0") == preset("2.0.1").with_rules(
        truncate_on="leader_change", leader_epoch_cache="on_append", isr_join="hw"
    )
    old = Config(rf=2, minisr=1, protocol=preset("2.0.0"))
    s0 = step(old, s, MetadataUpdate(2))
    assert (s0.broker(2).epoch, s0.broker(2).truncating) == (3, False)
    s0 = step(old, s0, Fetch(2, 1))
    assert s0.broker(2).log == ((1, 1), (1, 2)) and s0.broker(1).views[1] == 2
    assert Protocol().truncate_on == "epoch_change"
