"""Conformance with PartitionTest (core/src/test/scala/unit/kafka/cluster/PartitionTest.scala), the
partition's state changes: makeLeader and makeFollower (leader epoch start offset, the epoch
cache, what a re-election keeps), the leader's checks of a follower's fetch (current leader
epoch, last fetched epoch), what consumers may read of a new leader, and the HW checkpoint.

In the model a broker applies the controller's latest metadata in one step (MetadataUpdate),
which is where makeLeader and makeFollower happen.
"""

from __future__ import annotations

import pytest
from kafkamc.spec.alter_partition import AlterPartition
from kafkamc.spec.broker_lifecycle import BrokerRestart, ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, handle_fetch
from kafkamc.spec.hw import consumer_hw
from kafkamc.spec.log import UNDEFINED, end_offset_for_epoch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import Protocol, preset
from kafkamc.spec.state import Broker, FetchRequest, members
from scenario import (
    UNKNOWN,
    cache_of,
    controller,
    enabled,
    fenced_after_crash,
    follower_broker,
    follower_with_hw,
    leader_broker,
    log_of,
    mask,
    model,
    replace,
    run,
    step,
    with_brokers,
)


@pytest.mark.parametrize("rule", ["on_election", "on_append"])
def test_make_leader_updates_epoch_cache(rule):
    """Kafka: PartitionTest.testMakeLeaderUpdatesEpochCache: a broker whose log ends at 4 (epochs 0
    and 5) becomes leader of epoch 8: its epoch cache answers epoch 8 with end offset 4 at once
    (KAFKA-7415, 2.0.1); before that fix the new epoch entered the cache at the first append."""
    cfg = Config(rf=2, minisr=1, protocol=Protocol().with_rules(leader_epoch_cache=rule))
    c = controller(2, 1, mask(1, 2), epoch=8)
    log = log_of(0, 0, 5, 5)
    s = with_brokers(c, Broker(leader=2, epoch=7, log=log, cache=cache_of(log)), follower_broker(c))
    leader = step(cfg, s, MetadataUpdate(1)).broker(1)
    assert (leader.leader, leader.epoch, leader.start) == (1, 8, 4)
    expected = (8, 4) if rule == "on_election" else (UNDEFINED, UNDEFINED)
    assert end_offset_for_epoch(leader.cache, leader.leo, 8) == expected


@pytest.mark.parametrize("rule", ["hw_and_epoch_start", "hw"])
def test_follower_does_not_join_isr_until_caught_up_to_offset_within_current_leader_epoch(rule):
    """Kafka: PartitionTest.testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch:
    a follower outside the ISR that reached the HW but not the start offset of the leader's
    current epoch is not added; at the epoch start it is (KAFKA-7128, 2.0.1; before it, the HW
    was enough)."""
    cfg = Config(rf=3, minisr=1, protocol=Protocol().with_rules(isr_join=rule))
    c = controller(3, 1, mask(1, 2), epoch=3)
    log = log_of(1, 1, 1, 3)
    leader = replace(leader_broker(c, 1, log=log, cache=((1, 0), (3, 3)), hw=1, views=(UNKNOWN, 1, UNKNOWN)), start=3)
    s = with_brokers(c, leader, follower_broker(c, log[:1], ((1, 0),)), follower_broker(c, log[:1], ((1, 0),)))
    s = step(cfg, s, Fetch(3, 1))
    assert s.broker(1).views[2] == 1 == s.broker(1).hw
    assert enabled(cfg, s, AlterPartition(1, (1, 2, 3))) == (rule == "hw")
    while s.broker(1).views[2] < 3:
        s = step(cfg, s, Fetch(3, 1))
    assert enabled(cfg, s, AlterPartition(1, (1, 2, 3)))


def test_leader_epoch_validation_on_leader():
    """Kafka: PartitionTest.testLeaderEpochValidationOnLeader: a fetch naming an older leader epoch
    (FENCED_LEADER_EPOCH) or a newer one (UNKNOWN_LEADER_EPOCH) is refused and changes nothing;
    the current epoch is served. Before KIP-320 (2.1) fetches carried no epoch and any was served.
    The model does not name the two errors: a refused fetch is a step that does not happen."""
    cfg = Config(rf=3, minisr=1)
    c = controller(3, 1, mask(1, 2, 3), epoch=5)
    log = log_of(5)
    s = with_brokers(
        c,
        leader_broker(c, 1, log=log, cache=cache_of(log)),
        replace(follower_broker(c), epoch=4),
        replace(follower_broker(c), epoch=6),
    )
    assert not enabled(cfg, s, Fetch(2, 1)) and not enabled(cfg, s, Fetch(3, 1))
    current = s.with_broker(2, follower_broker(c))
    assert step(cfg, current, Fetch(2, 1)).broker(2).log == log
    old = Config(rf=3, minisr=1, protocol=Protocol().with_rules(fetch_fencing="none"))
    assert enabled(old, s, Fetch(2, 1)) and enabled(old, s, Fetch(3, 1))


def test_last_fetched_offset_validation():
    """Kafka: PartitionTest.testLastFetchedOffsetValidation: the leader (epoch 10) of a log written
    in epochs 0, 3, 4, 7, 9 (offsets 0, 2, 8, 13, 14; end 17) answers a fetch whose last fetched
    epoch does not end where the fetch starts with the diverging epoch and its end offset, and
    serves the others (Kafka's own pairs, log start offset 0)."""
    cfg = Config(rf=2, minisr=1)
    c = controller(2, 1, mask(1, 2), epoch=10)
    log = log_of(0, 0, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 7, 9, 9, 9)
    s = with_brokers(c, leader_broker(c, 1, log=log, cache=cache_of(log) + ((10, 17),)), follower_broker(c))

    def answer(last_epoch, fetch_offset):
        return handle_fetch(cfg, s, Fetch(2, 1), FetchRequest(fetch_offset, last_epoch, 10, 1))[1].diverging

    assert answer(2, 5) == (0, 2)
    assert answer(0, 4) == (0, 2)
    assert answer(6, 6) == (4, 13)
    assert answer(5, 9) == (4, 13)
    assert answer(10, 18) == (10, 17)
    assert [answer(0, 2), answer(7, 14), answer(9, 17), answer(10, 17)] == [None] * 4


def test_monotonic_offsets_after_leader_change():
    """Kafka: PartitionTest.testMonotonicOffsetsAfterLeaderChange: a leader of a new epoch whose HW
    is below the start offset of its epoch answers consumers OFFSET_NOT_AVAILABLE (KIP-207, 2.2),
    so no consumer sees the HW go back; once the HW reaches the epoch start it is exposed.
    Kafka's test re-elects the same broker; here another broker takes over, the same condition."""
    cfg = Config(rf=3, minisr=1)
    c = controller(3, 2, mask(2, 3), epoch=2)
    log = log_of(1, 1)
    old = Broker(alive=False, log=log, cache=cache_of(log), hw=2)
    s = with_brokers(
        c, old, Broker(leader=1, epoch=1, log=log, cache=cache_of(log), hw=1), follower_broker(c, log, cache_of(log))
    )
    s = step(cfg, s, MetadataUpdate(2))
    leader = s.broker(2)
    assert (leader.start, leader.hw, consumer_hw(cfg, leader)) == (2, 1, -1)
    assert consumer_hw(Config(rf=3, minisr=1, protocol=Protocol().with_rules(consumer_hw="leader_hw")), leader) == 1
    s = step(cfg, s, Fetch(3, 2))
    assert consumer_hw(cfg, s.broker(2)) == 2


@pytest.mark.parametrize("era, truncates", [("newest", True), ("2.0.0", False)])
def test_make_follower_with_no_leader_id_change(era, truncates):
    """Kafka: PartitionTest.testMakeFollowerWithNoLeaderIdChange: a follower told of a new epoch
    of the same leader goes through the become-follower steps again (truncation included,
    KAFKA-7164, 2.0.1); before that fix only a new leader id did. The same leader and epoch
    again is no change at all (no MetadataUpdate is pending)."""
    rules = preset(era).with_rules(truncation="leader_epoch_kip279", isr_update="alter_partition")
    cfg = Config(rf=3, minisr=1, protocol=rules)
    c = controller(3, 1, mask(1, 2, 3), epoch=4)
    log = log_of(1, 1)
    s = with_brokers(
        c,
        leader_broker(c, 1, log=log, cache=cache_of(log) + ((4, 2),)),
        Broker(leader=1, epoch=1, log=log, cache=cache_of(log)),
        follower_broker(c, log, cache_of(log)),
    )
    assert step(cfg, s, MetadataUpdate(2)).broker(2).truncating == truncates
    assert not enabled(cfg, s, MetadataUpdate(3))


def test_do_not_reset_replica_state_if_leader_epoch_is_not_bumped():
    """Kafka: PartitionTest.testDoNotResetReplicaStateIfLeaderEpochIsNotBumped: new metadata with a
    newer partition epoch but the same leader epoch keeps what the leader knows of its
    followers' fetches."""
    cfg = Config(rf=3, minisr=1, max_fences=1)
    s = run(cfg, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), ControllerFenceBroker(3))
    before = s.broker(1)
    after = step(cfg, s, MetadataUpdate(1)).broker(1)
    assert (after.epoch, after.pepoch, members(after.isr)) == (before.epoch, s.controller.pepoch, (1, 2))
    assert (after.views, after.vbepochs) == (before.views, before.vbepochs) == ((UNKNOWN, 1, 0), (0, 1, 1))


def test_do_not_update_epoch_start_offset_if_leader_epoch_is_not_bumped():
    """Kafka: PartitionTest.testDoNotUpdateEpochStartOffsetIfLeaderEpochIsNotBumped: after appends,
    metadata that keeps the leader epoch leaves the epoch's start offset and the epoch cache
    as they were (start 0, epoch 1 from 0), though the log end moved."""
    cfg = Config(rf=3, minisr=1, max_records=2, max_fences=1)
    s = run(cfg, Produce(1, 1), Produce(1, 2), ControllerFenceBroker(3), MetadataUpdate(1))
    leader = s.broker(1)
    assert (leader.epoch, leader.start, leader.cache, leader.leo) == (1, 0, ((1, 0),), 2)


def test_use_checkpoint_to_initialize_high_watermark():
    """Kafka: PartitionTest.testUseCheckpointToInitializeHighWatermark: a restarted broker takes its
    HW from the high-watermark checkpoint file, written every
    replica.high.watermark.checkpoint.interval.ms, so after a hard crash it can be below the HW
    it had in memory though its log survived whole (Kafka's test: 6 records, checkpoint 4)."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_hard_crashes=1)
    s = follower_with_hw(cfg)
    assert (s.broker(2).leo, s.broker(2).hw) == (2, 2)
    m = model(cfg)
    restarted = set()
    for a in m.broker_candidates(s.controller, s.broker(2), s.budget, 2):
        for crashed in m.step(s, a):
            b = crashed.broker(2)
            if b.alive or b.leo != 2 or b.clean:
                continue
            back = step(cfg, fenced_after_crash(cfg, crashed, 2), BrokerRestart(2))
            restarted.add(back.broker(2).hw)
    assert restarted and min(restarted) < 2
