"""Conformance with PartitionTest (core/src/test/scala/unit/kafka/cluster/PartitionTest.scala), the
leader's side: the follower state a fetch records, the high watermark, ISR expansion and
shrink, min ISR, and the maximal ISR while an AlterPartition is in flight.

Kafka's tests call Partition methods one at a time (fetchFollower, maybeShrinkIsr, the
AlterPartition manager's completion); the model's steps are Fetch (the leader records the
fetch offset and may advance the HW), AlterPartition (the request and the controller's
decision), HandleAlterPartitionResponse, and ReplicaStall for "replica.lag.time.max.ms
passed without a fetch" (the model has no clocks). Kafka's logs of 10 records are a few here.
"""

from __future__ import annotations

import pytest
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import BrokerHeartbeat, ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.hw import hw_isr
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import members
from scenario import (
    UNKNOWN,
    cache_of,
    controller,
    enabled,
    follower_broker,
    leader_broker,
    log_of,
    mask,
    model,
    replace,
    run,
    step,
    with_brokers,
)

TWO = Config(rf=2, minisr=1, max_records=2, max_fences=1)


def two_brokers(leader_log, follower_log, isr, hw=0, **ckw):
    """Leader 1 of epoch 5 (its log written in epoch 4, so its epoch starts at its LEO) and
    follower 2 with a prefix of that log."""
    c = controller(2, 1, isr, epoch=5, pepoch=1, **ckw)
    lcache = cache_of(leader_log) + ((5, len(leader_log)),)
    return with_brokers(
        c,
        leader_broker(c, 1, log=leader_log, cache=lcache, hw=hw),
        follower_broker(c, log=follower_log, cache=cache_of(follower_log)),
    )


def test_update_follower_fetch_state():
    """Kafka: PartitionTest.testUpdateFollowerFetchState: each follower fetch records the fetch
    offset as the follower's log end offset at the leader (3, then 6 in Kafka's test)."""
    log = log_of(4, 4, 4, 4, 4, 4)
    s = two_brokers(log, log[:3], mask(1, 2))
    assert s.broker(1).views[1] == UNKNOWN
    seen = []
    while s.broker(2).leo < len(log) or s.broker(1).views[1] < len(log):
        s = step(TWO, s, Fetch(2, 1))
        seen.append(s.broker(1).views[1])
    assert seen == [3, 4, 5, 6]
    assert s.broker(1).hw == 6


def test_isr_expansion():
    """Kafka: PartitionTest.testIsrExpansion: a follower below the HW is not added; once its fetch
    reaches the log end the leader asks to add it: the maximal ISR counts it at once, the
    committed ISR only when the controller's answer arrives."""
    log = log_of(4, 4, 4, 4)
    s = two_brokers(log, log[:1], mask(1), hw=4)
    s = step(TWO, s, Fetch(2, 1))
    assert s.broker(1).views[1] == 1 and not enabled(TWO, s, AlterPartition(1, (1, 2)))
    while s.broker(1).views[1] < 4:
        s = step(TWO, s, Fetch(2, 1))
    s = step(TWO, s, AlterPartition(1, (1, 2)))
    leader = s.broker(1)
    assert (members(leader.isr), members(hw_isr(TWO, leader))) == ((1,), (1, 2))
    s = step(TWO, s, HandleAlterPartitionResponse(1))
    assert members(s.broker(1).isr) == (1, 2) and s.broker(1).pending == 0


def test_isr_not_expanded_if_update_fails():
    """Kafka: PartitionTest.testIsrNotExpandedIfUpdateFails: the controller refuses the expansion
    with INVALID_UPDATE_VERSION: the committed ISR is unchanged, the maximal ISR still counts the
    follower, and no new request is sent until the metadata catches up (Partition.
    handleAlterPartitionError resets to the committed ISR only on INELIGIBLE_REPLICA or
    OPERATION_NOT_ATTEMPTED)."""
    log = log_of(4, 4)
    s = two_brokers(log, log, mask(1), hw=2)
    s = replace(s, controller=replace(s.controller, pepoch=2))  # the partition moved on; leader 1 knows epoch 1
    s = step(TWO, s, Fetch(2, 1))
    s = step(TWO, s, AlterPartition(1, (1, 2)))
    assert s.broker(1).alter.error == "INVALID_UPDATE_VERSION"
    s = step(TWO, s, HandleAlterPartitionResponse(1))
    leader = s.broker(1)
    assert members(leader.isr) == (1,)
    assert members(hw_isr(TWO, leader)) == (1, 2)
    assert not enabled(TWO, s, AlterPartition(1, (1, 2)))


def test_maybe_shrink_isr():
    """Kafka: PartitionTest.testMaybeShrinkIsr: a follower that has not fetched for the lag time is
    proposed out of the ISR; until the controller's answer the HW still waits for it (0), after it
    the ISR is {leader, caught-up follower}, the partition epoch is 2 and the HW is the LEO."""
    cfg = Config(rf=3, minisr=2)
    s = run(cfg, Produce(1, 1), Fetch(2, 1), Fetch(2, 1))
    assert s.broker(1).hw == 0 and not enabled(cfg, s, AlterPartition(1, (1, 2)))
    s = run(cfg, ReplicaStall(3), AlterPartition(1, (1, 2)), state=s)
    assert (members(s.broker(1).isr), s.broker(1).hw) == ((1, 2, 3), 0)
    s = step(cfg, s, HandleAlterPartitionResponse(1))
    leader = s.broker(1)
    assert (members(leader.isr), leader.pepoch, leader.hw) == ((1, 2), 2, leader.leo)


def test_should_not_shrink_isr_if_follower_caught_up_to_log_end():
    """Kafka: PartitionTest.testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd: a follower that
    reached the log end stays in the ISR however long it then stays quiet."""
    s = run(TWO, Produce(1, 1), Fetch(2, 1), Fetch(2, 1), ReplicaStall(2))
    assert s.broker(1).views[1] == s.broker(1).leo == s.broker(1).hw == 1
    assert not enabled(TWO, s, AlterPartition(1, (1,)))


def test_should_not_shrink_isr_if_previous_fetch_is_caught_up():
    """Kafka: PartitionTest.testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp: new records land after
    the follower's last fetch, which had caught up with the log end of its time: the follower is
    behind but not out of sync, and the HW advances to what it fetched.
    The model has no clocks: a follower is out of sync only after ReplicaStall, and this one
    keeps fetching."""
    s = run(TWO, Produce(1, 1), Fetch(2, 1), Fetch(2, 1), Produce(1, 2))
    leader = s.broker(1)
    assert leader.views[1] < leader.leo and not s.broker(2).stalled
    assert not enabled(TWO, s, AlterPartition(1, (1,)))
    s = run(TWO, Fetch(2, 1), Fetch(2, 1), state=s)
    assert members(s.broker(1).isr) == (1, 2) and s.broker(1).hw == 2


def test_high_watermark_advance_should_not_advance_when_under_min_isr():
    """Kafka: PartitionTest.testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR: with min ISR 3
    and the ISR {leader, 1}, no fetch moves the HW, not even once the maximal ISR (a pending
    addition) has 3 members; the committed ISR of 3 lets it reach the LEO (KAFKA-15583)."""
    cfg = Config(rf=3, minisr=3, acks="1")
    s = run(
        cfg,
        Produce(1, 1),
        Fetch(2, 1),
        Fetch(2, 1),
        ReplicaStall(3),
        AlterPartition(1, (1, 2)),
        HandleAlterPartitionResponse(1),
    )
    assert (members(s.broker(1).isr), s.broker(1).hw) == ((1, 2), 0)
    s = run(cfg, Fetch(3, 1), Fetch(3, 1), AlterPartition(1, (1, 2, 3)), state=s)
    leader = s.broker(1)
    assert (len(members(hw_isr(cfg, leader))), leader.hw) == (3, 0)
    s = step(cfg, s, HandleAlterPartitionResponse(1))
    assert s.broker(1).hw == s.broker(1).leo == 1


@pytest.mark.parametrize("follower", ["fenced", "unfenced"])
def test_high_watermark_increases_with_fenced_or_shutdown_follower(follower):
    """Kafka: PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower: the controller
    takes a caught-up follower out of the ISR and the leader appends: if the follower is fenced
    the HW moves to the new LEO without it; if it is unfenced (eligible to rejoin) the HW waits
    for it (KAFKA-15021)."""
    s = run(TWO, Produce(1, 1), Fetch(2, 1), Fetch(2, 1), ControllerFenceBroker(2))
    if follower == "unfenced":
        s = step(TWO, s, BrokerHeartbeat(2))
    s = run(TWO, MetadataUpdate(1), Produce(1, 2), state=s)
    leader = s.broker(1)
    assert members(leader.isr) == (1,) and leader.leo == 2
    assert leader.hw == (2 if follower == "fenced" else 1)


def test_isr_not_expanded_if_replica_is_fenced_or_shutdown():
    """Kafka: PartitionTest.testIsrNotExpandedIfReplicaIsFencedOrShutdown: a caught-up follower that
    its leader's metadata shows fenced is not proposed for the ISR at all; once the metadata
    shows it unfenced it is (Partition.isReplicaIsrEligible reads the leader's own metadata
    cache, which learns both changes only when it applies them)."""
    s = run(
        TWO,
        Produce(1, 1),
        ReplicaStall(2),
        AlterPartition(1, (1,)),
        HandleAlterPartitionResponse(1),
        ControllerFenceBroker(2),
        MetadataUpdate(1),
        Fetch(2, 1),
        Fetch(2, 1),
    )
    assert s.broker(1).views[1] == s.broker(1).hw == 1 and s.broker(1).ineligible == mask(2)
    assert not enabled(TWO, s, AlterPartition(1, (1, 2)))
    s = run(TWO, BrokerHeartbeat(2), state=s)
    assert not enabled(TWO, s, AlterPartition(1, (1, 2)))  # not applied yet
    s = run(TWO, MetadataUpdate(1), state=s)
    assert step(TWO, s, AlterPartition(1, (1, 2))).broker(1).alter.ok


def test_single_in_flight_alter_isr():
    """Kafka: PartitionTest.testSingleInFlightAlterIsr: while a shrink is in flight the leader sends
    no other AlterPartition, though a follower has caught up; after the answer it may."""
    cfg = Config(rf=3, minisr=1)
    s = run(cfg, Produce(1, 1), Fetch(2, 1), Fetch(2, 1), ReplicaStall(3), AlterPartition(1, (1, 2)))
    s = run(cfg, Fetch(3, 1), Fetch(3, 1), state=s)
    assert s.broker(1).views[2] >= s.broker(1).hw
    assert not enabled(cfg, s, AlterPartition(1, (1, 2, 3)))
    s = step(cfg, s, HandleAlterPartitionResponse(1))
    assert enabled(cfg, s, AlterPartition(1, (1, 2, 3)))


def test_is_under_min_isr():
    """Kafka: PartitionTest.testIsUnderMinIsr: with min ISR 2 the ISR {leader, follower} is not
    under min ISR and {leader} is; an acks=all produce is then refused with NOT_ENOUGH_REPLICAS
    before the append (Partition.appendRecordsToLeader), while acks=1 is appended."""
    cfg = Config(rf=2, minisr=2)
    s = run(cfg, Produce(1, 1), ReplicaStall(2), AlterPartition(1, (1,)), HandleAlterPartitionResponse(1))
    assert members(s.broker(1).isr) == (1,)
    refused = step(cfg, s, Produce(1, 2))
    assert refused.broker(1).log == s.broker(1).log and refused.ghost == s.ghost
    acks1 = Config(rf=2, minisr=2, acks="1")
    assert step(acks1, s, Produce(1, 2)).broker(1).leo == 2


def test_isr_not_shrunk_if_update_fails():
    """Kafka: PartitionTest.testIsrNotShrunkIfUpdateFails: a shrink the controller refuses with
    INVALID_UPDATE_VERSION leaves the ISR as it was, the HW held at 0 by the maximal ISR (for a
    shrink, the current ISR), and the partition pending: no new request until metadata arrives
    (Partition.handleAlterPartitionError resets only on INELIGIBLE_REPLICA)."""
    log = log_of(4, 4)
    s = two_brokers(log, (), mask(1, 2))
    s = replace(s, controller=replace(s.controller, pepoch=2))  # the partition moved on; leader 1 knows epoch 1
    s = run(TWO, ReplicaStall(2), AlterPartition(1, (1,)), state=s)
    assert s.broker(1).alter.error == "INVALID_UPDATE_VERSION"
    s = step(TWO, s, HandleAlterPartitionResponse(1))
    leader = s.broker(1)
    assert (members(leader.isr), members(leader.pending), leader.alter) == ((1, 2), (1,), None)
    assert members(hw_isr(TWO, leader)) == (1, 2) and leader.hw == 0
    assert not enabled(TWO, s, AlterPartition(1, (1,)))
    s = step(TWO, s, MetadataUpdate(1))  # the metadata overrides the pending state
    assert s.broker(1).pending == 0 and enabled(TWO, s, AlterPartition(1, (1,)))


def test_alter_isr_new_leader_elected():
    """Kafka: PartitionTest.testAlterIsrNewLeaderElected: the expansion completes a reassignment
    that removes the leader, and the controller answers NEW_LEADER_ELECTED: the committed ISR
    stays {leader}, the maximal ISR counts the follower, and no request is sent again.
    Kafka's test only injects the error; here the model's controller produces it: a
    reassignment from {1} to {2} (replicas: the target 2, then the removing 1)."""
    log = log_of(4, 4)
    s = two_brokers(log, log, mask(1), hw=2)
    s = replace(s, controller=replace(s.controller, replicas=(2, 1), adding=mask(2), removing=mask(1)))
    s = run(TWO, Fetch(2, 1), AlterPartition(1, (1, 2)), state=s)
    assert s.broker(1).alter.error == "NEW_LEADER_ELECTED" and s.controller.leader == 2
    s = step(TWO, s, HandleAlterPartitionResponse(1))
    leader = s.broker(1)
    assert (members(leader.isr), members(hw_isr(TWO, leader))) == ((1,), (1, 2))
    assert not any(isinstance(a, AlterPartition) for a in model(TWO).candidates(s))


def test_alter_isr_leader_and_isr_race():
    """Kafka: PartitionTest.testAlterIsrLeaderAndIsrRace: metadata that arrives while a shrink is
    in flight commits the partition state; no new request goes out until the answer to the
    outstanding one arrives (AlterPartitionManager keeps one per partition); then it may."""
    cfg = Config(rf=3, minisr=1)
    s = run(cfg, Produce(1, 1), ReplicaStall(3), AlterPartition(1, (1, 2)), MetadataUpdate(1))
    leader = s.broker(1)
    assert (members(leader.isr), leader.pending, leader.alter is not None) == ((1, 2), 0, True)
    s = step(cfg, s, ReplicaStall(2))
    assert not enabled(cfg, s, AlterPartition(1, (1,)))
    s = step(cfg, s, HandleAlterPartitionResponse(1))
    assert members(s.broker(1).isr) == (1, 2) and enabled(cfg, s, AlterPartition(1, (1,)))


def test_isr_not_expanded_if_replica_is_in_controlled_shutdown():
    """Kafka: PartitionTest.testIsrNotExpandedIfReplicaIsInControlledShutdown: a caught-up follower
    that the leader's metadata shows in controlled shutdown is not proposed for the ISR
    (Partition.isReplicaIsrEligible, isBrokerShuttingDown); once its metadata shows the shutdown
    over, it is. The controller's mark is set and cleared by hand here."""
    log = log_of(4, 4)
    s = two_brokers(log, log, mask(1), hw=2)
    s = replace(s, controller=replace(s.controller, shutdown=(0, 5)))
    s = run(TWO, MetadataUpdate(1), Fetch(2, 1), state=s)
    assert s.broker(1).views[1] == 2 and s.broker(1).ineligible == mask(2)
    assert not enabled(TWO, s, AlterPartition(1, (1, 2)))
    s = replace(s, controller=replace(s.controller, shutdown=()))
    assert not enabled(TWO, s, AlterPartition(1, (1, 2)))  # the leader has not applied it yet
    s = step(TWO, s, MetadataUpdate(1))
    assert step(TWO, s, AlterPartition(1, (1, 2))).broker(1).alter.ok
