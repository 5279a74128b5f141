"""Conformance with ReplicationControlManagerTest (metadata/src/test/java/org/apache/kafka/controller/):
fencing and unfencing with the ISR and ELR, unclean shutdowns, and the validation of
AlterPartition requests, broker epochs included.

These run the model's own actions (ControllerFenceBroker for a session that expired on a
live broker, BrokerHeartbeat for its unfencing, BrokerCrash and BrokerRestart for a process
that stops and re-registers, AlterPartition for the leader's request). Kafka's brokers
0, 1, 2, 3 are the model's 1, 2, 3, 4 (each docstring speaks in Kafka's ids).
"""

from __future__ import annotations

import pytest
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import BrokerHeartbeat, BrokerRestart, ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.controller import handle_alter_partition
from kafkamc.spec.elect_leaders import ElectLeaders
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import Protocol
from kafkamc.spec.state import members
from scenario import ELR_OFF, NO_LEADER, controller, crash, enabled, mask, model, on_controller, replace, run, step


def isr_elr(state) -> tuple:
    c = state.controller
    return members(c.isr), members(c.elr), members(c.lastelr), c.leader


def test_shrink_and_expand_isr():
    """Kafka: ReplicationControlManagerTest.testShrinkAndExpandIsr: the leader shrinks the ISR
    {0, 1, 2} to {0, 1} and expands it back; both requests succeed and each answer carries the
    controller's new ISR and partition epoch."""
    cfg = Config(rf=3, minisr=2)
    s = run(cfg, Produce(1, 1), ReplicaStall(3), AlterPartition(1, (1, 2)))
    resp = s.broker(1).alter
    assert (resp.ok, resp.error, resp.isr, resp.pepoch) == (True, "", s.controller.isr, s.controller.pepoch)
    assert members(s.controller.isr) == (1, 2)
    s = run(cfg, HandleAlterPartitionResponse(1), Fetch(3, 1), Fetch(3, 1), AlterPartition(1, (1, 2, 3)), state=s)
    resp = s.broker(1).alter
    assert (resp.ok, resp.error, resp.isr, resp.pepoch) == (True, "", s.controller.isr, s.controller.pepoch)
    assert members(s.controller.isr) == (1, 2, 3)


def test_elr_shrink_and_expand_isr():
    """Kafka: ReplicationControlManagerTest.testEligibleLeaderReplicas_ShrinkAndExpandIsr: with min
    ISR 2 the leader shrinks the ISR {0, 1, 2} to {0} in one request: 1 and 2 become the ELR;
    expanding back to {0, 1} clears it. (Two requests of one follower each would give ELR {3}
    alone: the first removal leaves the ISR at min ISR, where nobody enters the ELR.)"""
    cfg = Config(rf=3, minisr=2)
    s = run(cfg, Produce(1, 1), ReplicaStall(2), ReplicaStall(3))
    m = model(cfg)
    shrunk = [
        nxt
        for a in m.broker_candidates(s.controller, s.broker(1), s.budget, 1)
        for nxt in m.step(s, a)
        if members(nxt.controller.isr) == (1,)
    ]
    assert shrunk, "the leader cannot drop both stalled followers in one request"
    s = shrunk[0]
    assert isr_elr(s) == ((1,), (2, 3), (), 1)
    s = run(cfg, HandleAlterPartitionResponse(1), Fetch(2, 1), Fetch(2, 1), AlterPartition(1, (1, 2)), state=s)
    assert isr_elr(s) == ((1, 2), (), (), 1)


def test_elr_broker_fence():
    """Kafka: ReplicationControlManagerTest.testEligibleLeaderReplicas_BrokerFence: min ISR 3 over
    {0, 1, 2, 3}; fencing 2 then 3 leaves ELR {3}; fencing 1 makes it {1, 3}; unfencing everyone
    brings nobody back into the ISR or out of the ELR."""
    cfg = Config(rf=4, minisr=3, max_fences=3)
    s = run(cfg, ControllerFenceBroker(3), ControllerFenceBroker(4))
    assert isr_elr(s) == ((1, 2), (4,), (), 1)
    s = run(cfg, ControllerFenceBroker(2), state=s)
    assert isr_elr(s) == ((1,), (2, 4), (), 1)
    s = run(cfg, BrokerHeartbeat(2), BrokerHeartbeat(3), BrokerHeartbeat(4), state=s)
    assert isr_elr(s) == ((1,), (2, 4), (), 1)
    assert members(s.controller.registered) == (1, 2, 3, 4)


def test_elr_effective_min_isr():
    """Kafka: ReplicationControlManagerTest.testEligibleLeaderReplicas_EffectiveMinIsr:
    min.insync.replicas 5 on a topic with 3 replicas is effectively 3 (capped at the
    replication factor), so one fenced follower already puts it in the ELR."""
    cfg = Config(rf=3, minisr=5, max_fences=1)
    assert cfg.effective_minisr == 3
    assert isr_elr(run(cfg, ControllerFenceBroker(3))) == ((1, 2), (3,), (), 1)


def test_elr_clean_election():
    """Kafka: ReplicationControlManagerTest.testEligibleLeaderReplicas_CleanElection: min ISR 3;
    fencing 1, 2, 3 leaves ELR {2, 3}; with 2 unfenced, fencing the leader 0 elects 2 from the
    ELR cleanly: ISR {2}, ELR {0, 3}, no last known leader."""
    cfg = Config(rf=4, minisr=3, max_fences=4)
    s = run(cfg, ControllerFenceBroker(2), ControllerFenceBroker(3), ControllerFenceBroker(4))
    assert isr_elr(s) == ((1,), (3, 4), (), 1)
    s = run(cfg, BrokerHeartbeat(3), ControllerFenceBroker(1), state=s)
    assert isr_elr(s) == ((3,), (1, 4), (), 3)
    assert not s.controller.recovering


def test_elr_unclean_shutdown():
    """Kafka: ReplicationControlManagerTest.testEligibleLeaderReplicas_UncleanShutdown: min ISR 3;
    fencing 1, 2, 3 leaves ELR {2, 3}; 3 re-registering after an unclean shutdown leaves it; the
    last ISR member 0 shutting down uncleanly empties the ISR and becomes the last known leader
    (not an ELR member), and nobody is elected.
    In the model the unclean shutdown is a hard crash followed by the restart's registration,
    and a restarted broker registers unfenced at once (Kafka keeps it fenced until it has caught
    up with the metadata); neither changes the ELR here."""
    cfg = Config(rf=4, minisr=3, max_fences=3, max_hard_crashes=2)
    s = run(cfg, ControllerFenceBroker(2), ControllerFenceBroker(3), ControllerFenceBroker(4))
    assert isr_elr(s) == ((1,), (3, 4), (), 1)
    s = run(cfg, BrokerRestart(4), state=crash(cfg, s, 4, keep=0))
    assert isr_elr(s) == ((1,), (3,), (), 1)
    s = run(cfg, BrokerRestart(1), state=crash(cfg, s, 1, keep=0))
    assert isr_elr(s) == ((), (3,), (1,), NO_LEADER)


def test_alter_partition_should_reject_fenced_brokers():
    """Kafka: ReplicationControlManagerTest.testAlterPartitionShouldRejectFencedBrokers: fencing 3
    drops it from the ISR with the partition epoch bumped and the leader epoch kept; a request
    to add it back is refused with INELIGIBLE_REPLICA until it is unfenced, then accepted.
    Kafka's replicas 1, 2, 3, 4 are the model's 1, 2, 3, 4.
    Kafka's test sends the request to the controller directly. In the model the leader sends
    it, and a leader whose metadata shows 3 fenced does not (Partition.isReplicaIsrEligible): the
    refusal comes to a leader that has not applied the fence yet, which a fence of a broker
    already out of the ISR allows (it changes no partition, so no partition epoch moves)."""
    cfg = Config(rf=4, minisr=2, max_fences=1)
    s = run(cfg, ControllerFenceBroker(3))
    c = s.controller
    assert (members(c.isr), c.leader, c.epoch, c.pepoch) == ((1, 2, 4), 1, 1, 2)
    s = run(cfg, MetadataUpdate(1), Fetch(3, 1), state=s)
    assert not enabled(cfg, s, AlterPartition(1, (1, 2, 3, 4)))  # the leader's own check
    cfg = Config(rf=4, minisr=2, max_fences=1, max_isr_shrinks=1)
    s = run(cfg, ReplicaStall(3), AlterPartition(1, (1, 2, 4)), HandleAlterPartitionResponse(1), Fetch(3, 1))
    s = run(cfg, ControllerFenceBroker(3), state=s)
    c = s.controller
    assert (members(c.isr), c.leader, c.epoch, c.pepoch) == ((1, 2, 4), 1, 1, 2)
    s = step(cfg, s, AlterPartition(1, (1, 2, 3, 4)))  # its metadata does not show the fence yet
    resp = s.broker(1).alter
    assert (resp.ok, resp.error) == (False, "INELIGIBLE_REPLICA")
    assert s.controller == c
    s = run(cfg, HandleAlterPartitionResponse(1), BrokerHeartbeat(3), state=s)
    s = step(cfg, s, AlterPartition(1, (1, 2, 3, 4)))
    resp = s.broker(1).alter
    assert (resp.ok, members(resp.isr), resp.pepoch) == (True, (1, 2, 3, 4), 3)


@pytest.mark.parametrize("rule, error", [("checked", "INELIGIBLE_REPLICA"), ("unchecked", "")])
def test_alter_partition_should_reject_brokers_with_stale_epoch(rule, error):
    """Kafka: ReplicationControlManagerTest.testAlterPartitionShouldRejectBrokersWithStaleEpoch: a
    follower fails silently and registers again with a new broker epoch; the leader's request to
    add it, carrying the epoch it learned from the old incarnation's fetch, is refused with
    INELIGIBLE_REPLICA (KIP-903, AlterPartition v3); older versions accept it."""
    cfg = Config(rf=3, minisr=1, protocol=Protocol().with_rules(isr_join_broker_epoch=rule))
    s = run(
        cfg,
        Produce(1, 1),
        ReplicaStall(3),
        AlterPartition(1, (1, 2)),
        HandleAlterPartitionResponse(1),
        Fetch(2, 1),
        Fetch(2, 1),
        Fetch(3, 1),
        Fetch(3, 1),
    )
    assert s.broker(1).vbepochs[2] == 1 and s.broker(1).hw == 1
    s = run(cfg, BrokerRestart(3), state=crash(cfg, s, 3, keep=1))
    assert s.controller.bepochs[2] == 2 and s.broker(1).vbepochs[2] == 1
    s = step(cfg, s, AlterPartition(1, (1, 2, 3)))
    assert (s.broker(1).alter.ok, s.broker(1).alter.error) == (rule == "unchecked", error)


def test_invalid_alter_partition_requests():
    """Kafka: ReplicationControlManagerTest.testInvalidAlterPartitionRequests: a request in an old
    leader epoch is refused with FENCED_LEADER_EPOCH, one in an old partition epoch with
    INVALID_UPDATE_VERSION, and neither changes the partition.
    The model's controller never loses its role, so the epochs a request carries are never newer
    than its own and NOT_CONTROLLER (Kafka's answer to newer ones) cannot occur."""
    cfg = Config(rf=3, minisr=1, max_fences=1)
    zombie = run(cfg, Produce(1, 1), ReplicaStall(3), ControllerFenceBroker(1))
    assert zombie.controller.leader == 2 and zombie.broker(1).leader == 1
    after = step(cfg, zombie, AlterPartition(1, (1, 2)))
    assert (after.broker(1).alter.ok, after.broker(1).alter.error) == (False, "FENCED_LEADER_EPOCH")
    assert after.controller == zombie.controller
    stale = run(cfg, Produce(1, 1), ReplicaStall(3), ControllerFenceBroker(2))
    assert stale.controller.pepoch > stale.broker(1).pepoch
    after = step(cfg, stale, AlterPartition(1, (1, 2)))
    assert (after.broker(1).alter.ok, after.broker(1).alter.error) == (False, "INVALID_UPDATE_VERSION")
    assert after.controller == stale.controller


@pytest.mark.parametrize("unclean", [True, False])
def test_maybe_trigger_unclean_leader_election_for_leaderless_partitions(unclean):
    """Kafka: ReplicationControlManagerTest.testMaybeTriggerUncleanLeaderElectionForLeaderlessPartitions:
    every broker of [1, 2, 4] is fenced, leaving ISR {4} and no leader; when 2 is unfenced, a
    statically enabled unclean.leader.election.enable elects it at once (ISR {2}), otherwise
    nothing happens. The model's setting is static (no dynamic config change); its replicas
    1, 2, 3 are Kafka's 1, 2, 4."""
    cfg = Config(rf=3, minisr=1, unclean=unclean, max_fences=3, protocol=ELR_OFF)
    s = run(cfg, ControllerFenceBroker(1), ControllerFenceBroker(2), ControllerFenceBroker(3))
    assert isr_elr(s) == ((3,), (), (), NO_LEADER)
    s = step(cfg, s, BrokerHeartbeat(2))
    if unclean:
        assert isr_elr(s) == ((2,), (), (), 2) and s.controller.recovering
    else:
        assert isr_elr(s) == ((3,), (), (), NO_LEADER)


def test_fence_multiple_brokers():
    """Kafka: ReplicationControlManagerTest.testFenceMultipleBrokers: fencing 2 and 3 in the
    partition [2, 3, 4] leaves ISR {4} led by 4. The model's replicas 1, 2, 3 are Kafka's 2, 3, 4."""
    cfg = Config(rf=3, minisr=1, max_fences=2, protocol=ELR_OFF)
    s = run(cfg, ControllerFenceBroker(1), ControllerFenceBroker(2))
    assert isr_elr(s) == ((3,), (), (), 3)
    assert s.controller.epoch == 3  # one new leader epoch per election


def test_preferred_election_does_not_trigger_unclean_election():
    """Kafka: ReplicationControlManagerTest.testPreferredElectionDoesNotTriggerUncleanElection: with
    the partition leaderless and its only ISR member 1 fenced, a preferred election answers
    PREFERRED_LEADER_NOT_AVAILABLE and changes nothing, though replica 2 is live.
    Kafka turns unclean election on only afterwards; the model's setting is static and would
    have elected 2 when it was unfenced, so the scenario runs with it off."""
    cfg = Config(rf=3, minisr=1, max_fences=3, max_leader_elections=1, protocol=ELR_OFF)
    s = run(cfg, ControllerFenceBroker(2), ControllerFenceBroker(3), ControllerFenceBroker(1), BrokerHeartbeat(2))
    assert isr_elr(s) == ((1,), (), (), NO_LEADER)
    assert not enabled(cfg, s, ElectLeaders(1))


def test_process_broker_heartbeat_in_controlled_shutdown():
    """Kafka: ReplicationControlManagerTest.testProcessBrokerHeartbeatInControlledShutdown: the
    leader 0 of [0, 1, 2] shuts down: leadership moves to 1 with ISR {1, 2}, in a new leader epoch.
    The model has no controlled-shutdown handshake: its clean shutdown is noticed by the
    controller's fence, so the scenario compares the partition once the broker is fenced."""
    cfg = Config(rf=3, minisr=2, max_clean_shutdowns=1)
    s = crash(cfg, model(cfg).initial_states()[0], 1)
    c = s.controller
    assert (c.leader, members(c.isr), c.epoch, c.registered & mask(1)) == (2, (2, 3), 2, 0)


def test_alter_partition_should_reject_shutting_down_brokers():
    """Kafka: ReplicationControlManagerTest.testAlterPartitionShouldRejectShuttingDownBrokers: with
    broker 3 in controlled shutdown, a request whose ISR {1, 2, 3, 4} still names it is refused
    with INELIGIBLE_REPLICA, though it adds no one: ineligibleReplicasForIsr checks every member
    of the proposed ISR. The same holds for a shrink that keeps 3, and for a member named with
    a broker epoch that is not its registration's (KIP-903).
    In the model a broker entering controlled shutdown leaves the ISR in the same change, so the
    registration is written by hand, as Kafka's test does, and the request goes to the
    controller directly."""
    cfg = Config(rf=4, minisr=1)
    c = controller(4, 1, mask(1, 2, 3, 4), epoch=0, pepoch=0)
    c = replace(c, shutdown=(0, 0, 1, 0))
    s = on_controller(c)
    epochs = (1, 1, 1, 1)
    for proposed in (mask(1, 2, 3, 4), mask(1, 3, 4)):
        after, resp = handle_alter_partition(cfg, s, 0, 0, proposed, epochs)
        assert (resp.ok, resp.error, after.controller) == (False, "INELIGIBLE_REPLICA", c)
    s = on_controller(replace(c, shutdown=()))
    after, resp = handle_alter_partition(cfg, s, 0, 0, mask(1, 3, 4), (1, 0, 1, 2))  # 4 registered with epoch 1
    assert (resp.ok, resp.error) == (False, "INELIGIBLE_REPLICA")
    after, resp = handle_alter_partition(cfg, s, 0, 0, mask(1, 3, 4), (1, 0, 1, 0))  # 0: Kafka's -1, not checked
    assert resp.ok and members(after.controller.isr) == (1, 3, 4)
