"""Conformance with PartitionChangeBuilderTest (metadata/src/test/java/org/apache/kafka/controller/):
the controller's elections, ELR and last known leader, and unclean recovery.

Kafka's builder is handed a partition registration, a predicate of acceptable (unfenced)
leaders and a target ISR; the model's counterpart is spec/controller.py, where every change
goes through partition_change (and fence, register and unfence, which call it). A broker
Kafka's test calls unacceptable is one the model's controller has not registered. Where
Kafka's builder elects because the current leader left the target ISR, the model's caller
drops the leader itself (leader=NO_LEADER) before the change: its controller never keeps a
leader outside the ISR. Broker ids are the same as Kafka's unless a docstring says otherwise.
"""

from __future__ import annotations

from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.config import Config
from kafkamc.spec.controller import fence, handle_alter_partition, partition_change, register, unfence
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import members
from scenario import (
    ELR_OFF,
    NO_LEADER,
    UNKNOWN,
    controller,
    follower_broker,
    leader_broker,
    mask,
    on_controller,
    replace,
    run,
    step,
    with_brokers,
)

# Kafka's FOO partition: replicas [2, 1, 3], ISR {2, 1, 3}, leader 1, broker 3 not acceptable.
FOO_ORDER = (2, 1, 3)


def foo(**kw):
    base = dict(registered=mask(1, 2), replicas=FOO_ORDER)
    base.update(kw)
    return controller(3, 1, mask(1, 2, 3), **base)


def change(cfg: Config, c, **fields):
    """The controller record after one partition change that sets `fields`."""
    return partition_change(cfg, on_controller(c), replace(c, **fields)).controller


def test_elect_leader():
    """Kafka: PartitionChangeBuilderTest.testElectLeader: a leader still in the ISR keeps leading;
    with only a fenced broker in the ISR a clean election finds nobody, an unclean one takes the
    first acceptable replica in assignment order."""
    cfg = Config(rf=3, minisr=2)
    c = foo()
    kept = change(cfg, c, isr=mask(1, 3))
    assert (kept.leader, kept.epoch, members(kept.isr)) == (1, c.epoch, (1, 3))
    clean = change(cfg, c, isr=mask(3), leader=NO_LEADER)
    assert clean.leader == NO_LEADER and not clean.recovering
    unclean = change(Config(rf=3, minisr=2, unclean=True), c, isr=mask(3), leader=NO_LEADER)
    assert (unclean.leader, members(unclean.isr), unclean.recovering) == (2, (2,), True)


def test_no_leader_epoch_bump_on_isr_shrink():
    """Kafka: PartitionChangeBuilderTest.testNoLeaderEpochBumpOnIsrShrink: since metadata 3.6 an
    ISR shrink bumps the partition epoch only (KAFKA-15021). Before 3.6 (KRaft 3.4, 3.5) it also
    bumped the leader epoch (testLeaderEpochBumpOnIsrShrink); the model has no rule for that."""
    cfg = Config(rf=3, minisr=2)
    s = run(cfg, Produce(1, 1), ReplicaStall(3), AlterPartition(1, (1, 2)))
    c = s.controller
    assert (c.leader, c.epoch, c.pepoch, members(c.isr)) == (1, 1, 2, (1, 2))
    assert s.broker(1).alter.ok


def test_no_leader_epoch_bump_on_isr_expansion():
    """Kafka: PartitionChangeBuilderTest.testNoLeaderEpochBumpOnIsrExpansion: an ISR expansion
    bumps the partition epoch, never the leader epoch."""
    cfg = Config(rf=3, minisr=2)
    s = run(cfg, Produce(1, 1), ReplicaStall(3), AlterPartition(1, (1, 2)), HandleAlterPartitionResponse(1))
    s = run(cfg, Fetch(3, 1), Fetch(3, 1), AlterPartition(1, (1, 2, 3)), state=s)
    c = s.controller
    assert (c.leader, c.epoch, c.pepoch, members(c.isr)) == (1, 1, 3, (1, 2, 3))


def test_isr_change_and_leader_change():
    """Kafka: PartitionChangeBuilderTest.testIsrChangeAndLeaderChange: FOO's ISR becomes {2, 3}
    without its leader 1: broker 2, first valid in assignment order, leads a new epoch."""
    c = foo()
    after = change(Config(rf=3, minisr=2), c, isr=mask(2, 3), leader=NO_LEADER)
    assert (after.leader, members(after.isr), after.epoch, after.pepoch) == (2, (2, 3), c.epoch + 1, c.pepoch + 1)


def test_unclean_leader_election():
    """Kafka: PartitionChangeBuilderTest.testUncleanLeaderElection: a leaderless partition with an
    empty ISR, ELR {3} (fenced) and last known leader 2 (fenced), only broker 1 acceptable:
    the unclean election makes 1 leader alone in the ISR, RECOVERING, and clears ELR and the
    last known leader."""
    c = controller(3, NO_LEADER, 0, elr=mask(3), lastelr=mask(2), registered=mask(1), replicas=FOO_ORDER)
    after = partition_change(Config(rf=3, minisr=2, unclean=True), on_controller(c), c).controller
    assert (after.leader, members(after.isr), after.recovering) == (1, (1,), True)
    assert (after.elr, after.lastelr, after.epoch) == (0, 0, c.epoch + 1)


def test_unclean_sets_leader_recovering_state():
    """Kafka: PartitionChangeBuilderTest.testUncleanSetsLeaderRecoveringState: ISR {2, 3} both
    offline, replica 1 acceptable: the unclean election makes 1 the leader, ISR {1}, RECOVERING."""
    cfg = Config(rf=3, minisr=1, unclean=True, protocol=ELR_OFF)
    c = controller(3, NO_LEADER, mask(2, 3), registered=mask(1))
    after = partition_change(cfg, on_controller(c), c).controller
    assert (after.leader, members(after.isr), after.recovering) == (1, (1,), True)


def test_change_in_leadership_does_not_change_recovery_state():
    """Kafka: PartitionChangeBuilderTest.testChangeInLeadershipDoesNotChangeRecoveryState: a
    RECOVERING partition whose leader goes offline and comes back stays RECOVERING; without ELR
    the offline leader stays the ISR's last member."""
    cfg = Config(rf=3, minisr=1, protocol=ELR_OFF)
    c = controller(3, 1, mask(1), recovering=True)
    offline = fence(cfg, on_controller(c), 1)
    oc = offline.controller
    assert (oc.leader, members(oc.isr), oc.recovering) == (NO_LEADER, (1,), True)
    back = unfence(cfg, offline, 1).controller
    assert (back.leader, members(back.isr), back.recovering) == (1, (1,), True)


def test_elr_isr_shrink_below_min_isr():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrShrinkBelowMinISR: with
    min ISR 3 the ISR {1, 2, 3, 4} shrinks to {1, 2}: 3 and 4 become the ELR, no last known leader."""
    c = controller(4, 1, mask(1, 2, 3, 4), registered=mask(1, 2, 4))
    after = change(Config(rf=4, minisr=3), c, isr=mask(1, 2))
    assert (members(after.elr), after.lastelr, after.leader, after.epoch) == ((3, 4), 0, 1, c.epoch)


def test_elr_isr_expand_above_min_isr():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrExpandAboveMinISR: once the
    ISR is back at min ISR (3) the ELR and the last known ELR are cleared."""
    c = controller(4, 1, mask(1, 2), elr=mask(3), lastelr=mask(4))
    after = change(Config(rf=4, minisr=3), c, isr=mask(1, 2, 3))
    assert (members(after.isr), after.elr, after.lastelr) == ((1, 2, 3), 0, 0)


def test_elr_isr_add_new_member_not_in_elr():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrAddNewMemberNotInELR: a
    replica outside the ELR joins an ISR still below min ISR: the ELR {3} is kept.
    Kafka runs this with useLastKnownLeaderInBalancedRecovery off, where lastKnownElr holds
    former ELR members and stays {2}; the model keeps the shipped meaning (the last known
    leader, cleared while the partition has a leader), so only the ELR is compared."""
    c = controller(4, 1, mask(1), elr=mask(3), lastelr=mask(2))
    after = change(Config(rf=4, minisr=3), c, isr=mask(1, 4))
    assert (members(after.isr), members(after.elr), after.leader) == ((1, 4), (3,), 1)


def test_elr_remove_unclean_shutdown_replicas_from_elr():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr:
    ISR {1}, ELR {2, 3}; broker 3 re-registers after an unclean shutdown: it leaves the ELR.
    In the model the unclean shutdown is told at re-registration (register, clean_shutdown=False)."""
    cfg = Config(rf=4, minisr=3)
    c = controller(4, 1, mask(1), elr=mask(2, 3), registered=mask(1, 2, 4))
    after = register(cfg, on_controller(c), 3, clean_shutdown=False).controller
    assert (members(after.isr), members(after.elr), after.leader) == ((1,), (2,), 1)
    assert after.registered & mask(3)
    # A clean re-registration keeps it electable.
    assert members(register(cfg, on_controller(c), 3, clean_shutdown=True).controller.elr) == (2, 3)


def test_elr_can_be_elected():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_ElrCanBeElected: ISR {1}, ELR {3},
    min ISR 3; leader 1 goes offline: 3 is elected from the ELR (a clean election), ISR {3}, and 1
    joins the ELR."""
    cfg = Config(rf=4, minisr=3)
    c = controller(4, 1, mask(1), elr=mask(3))
    after = fence(cfg, on_controller(c), 1).controller
    assert (after.leader, members(after.isr), members(after.elr)) == (3, (3,), (1,))
    assert (after.lastelr, after.recovering, after.epoch) == (0, False, c.epoch + 1)


def test_elr_isr_can_shrink_to_zero():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrCanShrinkToZero: every
    replica goes offline at once: the ISR empties into the ELR {1, 2, 3, 4}, there is no
    leader, and the last known leader is the leader it had, 1.
    No action of the model removes two ISR members in one change (AlterPartition proposes one,
    a fence removes one broker), so this reaches partition_change only from a hand-made change."""
    c = controller(4, 1, mask(1, 2, 3, 4))
    after = change(Config(rf=4, minisr=3), c, isr=0, leader=NO_LEADER, registered=0)
    assert (after.leader, after.isr, members(after.elr)) == (NO_LEADER, 0, (1, 2, 3, 4))
    assert members(after.lastelr) == (1,)


def test_elr_elect_last_known_leader():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_ElectLastKnownLeader: empty ISR
    and ELR, last known leader 1, everyone acceptable: 1 leads alone in the ISR, RECOVERING, and
    the last known leader is cleared."""
    c = controller(4, NO_LEADER, 0, lastelr=mask(1))
    after = partition_change(Config(rf=4, minisr=3), on_controller(c), c).controller
    assert (after.leader, members(after.isr), after.recovering, after.lastelr) == (1, (1,), True, 0)


def test_elr_elect_last_known_leader_should_fail():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail:
    with the ELR {3} not empty (3 fenced) the last known leader 1 is not elected: no change at all."""
    c = controller(4, NO_LEADER, 0, elr=mask(3), lastelr=mask(1), registered=mask(1, 2, 4))
    after = partition_change(Config(rf=4, minisr=3), on_controller(c), c).controller
    assert after == c


def test_elr_not_eligible_last_known_leader():
    """Kafka: PartitionChangeBuilderTest.testEligibleLeaderReplicas_NotEligibleLastKnownLeader: since
    KAFKA-19522 (4.1) a fenced last known leader is not elected; with unclean election on, the
    unclean election decides instead, and an unfenced last known leader is elected."""
    c = controller(4, NO_LEADER, 0, lastelr=mask(1), registered=0)
    cfg = Config(rf=4, minisr=3)
    assert partition_change(cfg, on_controller(c), c).controller == c
    unclean = Config(rf=4, minisr=3, unclean=True)
    two_back = replace(c, registered=mask(2))
    after = partition_change(unclean, on_controller(two_back), two_back).controller
    assert (after.leader, members(after.isr), after.recovering, after.lastelr) == (2, (2,), True, 0)
    back = unfence(cfg, on_controller(c), 1).controller
    assert (back.leader, members(back.isr), back.recovering) == (1, (1,), True)


def test_isr_enlargement_completes_reassignment():
    """Kafka: PartitionChangeBuilderTest.testIsrEnlargementCompletesReassignment: replicas
    {1, 2, 3, 4} moving to {2, 3, 4} (removing 1, adding 4), ISR {1, 2, 3}, leader 1: the leader's
    request for ISR {1, 2, 3, 4} completes the move: replicas and ISR {2, 3, 4}, leader 2, no
    adding or removing left; the leader is told NEW_LEADER_ELECTED.
    With the leader kept (removing 3 instead of 1) the change still bumps the leader epoch, as
    a replica left (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). The answer carries
    the partition's epochs after the change (ReplicationControlManager.alterPartition), so the
    leader, one epoch behind, ignores it and stays pending (Partition.handleAlterPartitionUpdate)
    until it applies the metadata of the new epoch."""
    cfg = Config(rf=4, minisr=1)
    c = controller(4, 1, mask(1, 2, 3), replicas=(2, 3, 4, 1))  # the target, then the removing replica
    c = replace(c, adding=mask(4), removing=mask(1))
    after, resp = handle_alter_partition(cfg, on_controller(c), c.epoch, c.pepoch, mask(1, 2, 3, 4), ())
    done = after.controller
    assert (done.replicas, members(done.isr), done.leader, done.adding, done.removing) == (
        (2, 3, 4),
        (2, 3, 4),
        2,
        0,
        0,
    )
    assert (resp.ok, resp.error) == (False, "NEW_LEADER_ELECTED")
    c = replace(c, replicas=(1, 2, 4, 3), removing=mask(3))
    s = with_brokers(
        c,
        leader_broker(c, 1, views=(UNKNOWN, 0, 0, 0)),
        *(follower_broker(c) for _ in range(3)),
    )
    s = step(cfg, s, AlterPartition(1, (1, 2, 3, 4)))
    done, resp = s.controller, s.broker(1).alter
    assert (done.replicas, members(done.isr), done.leader, done.epoch) == ((1, 2, 4), (1, 2, 4), 1, c.epoch + 1)
    assert (resp.ok, resp.epoch, resp.pepoch) == (True, c.epoch + 1, done.pepoch)
    s = step(cfg, s, HandleAlterPartitionResponse(1))
    leader = s.broker(1)
    assert (members(leader.isr), members(leader.pending), leader.epoch) == ((1, 2, 3), (1, 2, 3, 4), c.epoch)
    s = step(cfg, s, MetadataUpdate(1))
    leader = s.broker(1)
    assert (members(leader.isr), leader.pending, leader.epoch) == ((1, 2, 4), 0, c.epoch + 1)
