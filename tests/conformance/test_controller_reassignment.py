"""Conformance with Kafka's reassignment tests (metadata/src/test/java/org/apache/kafka/controller/):
PartitionReassignmentReplicasTest, PartitionReassignmentRevertTest, the reassignment cases of
PartitionChangeBuilderTest and ReplicationControlManagerTest.

The moves run the model's own actions (AlterPartitionReassignments, CancelPartitionReassignment,
AlterPartition); the registrations Kafka's tests build by hand are hand-made controller records
here too, handed to the model's partition change (spec/controller.py) or revert
(spec/reassignment.py). The model's targets keep the replication factor and the order (a
replica is replaced in its place), so a Kafka target that also grows or reorders the set is
restated as the nearest such move; each docstring says where. Broker ids: Kafka's 0 is the
model's highest id in the pool unless the docstring says otherwise.
"""

from __future__ import annotations

from kafkamc.spec.alter_partition import AlterPartition
from kafkamc.spec.broker_lifecycle import ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.controller import complete_reassignment, partition_change
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.protocol import PRESETS
from kafkamc.spec.reassignment import AlterPartitionReassignments, CancelPartitionReassignment, revert
from kafkamc.spec.state import Broker, Controller, State, initial_state, members, replace
from scenario import NO_LEADER, enabled, mask, run, step

MOVES = dict(max_records=0, max_hard_crashes=0, max_isr_shrinks=0, max_reassignments=1, max_reassignment_cancels=1)


def hand_made(n: int, replicas: tuple, isr: tuple, leader: int, adding=(), removing=(), registered=None) -> State:
    """A registration as Kafka's tests build one (leader epoch 5, partition epoch 10), on a pool
    of n brokers that know nothing yet."""
    c = Controller(
        leader=leader,
        epoch=5,
        pepoch=10,
        isr=mask(*isr),
        registered=mask(*range(1, n + 1)) if registered is None else mask(*registered),
        bepochs=(1,) * n,
        replicas=replicas,
        adding=mask(*adding),
        removing=mask(*removing),
    )
    return State(c, tuple(Broker() for _ in range(n)))


def three_replicas_moving() -> tuple[Config, State]:
    """[1, 2, 3] moving to [4, 5, 6] on six brokers, started by the model's own action."""
    cfg = Config(rf=3, minisr=2, broker_count=6, **MOVES)
    s = step(cfg, initial_state(3, n=6), AlterPartitionReassignments((4, 5, 6)))
    return cfg, s


def test_does_not_complete_reassignment():
    """Kafka: PartitionReassignmentReplicasTest.testDoesNotCompleteReassignment: a move from [0, 1, 2]
    to [3, 4, 5] is in progress, and an ISR of [0, 1, 2, 3, 4] does not complete it, as long as
    one target replica is out of the ISR. Kafka's 0..5 are the model's 1..6: every replica
    moves at once, the start lists the target first and the removing replicas after it."""
    cfg, s = three_replicas_moving()
    c = s.controller
    assert c.replicas == (4, 5, 6, 1, 2, 3) and (members(c.adding), members(c.removing)) == ((4, 5, 6), (1, 2, 3))
    assert (c.leader, c.epoch) == (1, 1)  # nothing left the set yet: no new leader epoch
    five = replace(c, isr=mask(1, 2, 3, 4, 5))
    assert complete_reassignment(cfg, five) is five  # still moving: 6 is out of the ISR


def test_does_complete_reassignment_all_new_replicas():
    """Kafka: PartitionReassignmentReplicasTest.testDoesCompleteReassignmentAllNewReplicas: the move
    [0, 1, 2] -> [3, 4, 5] completes once the ISR is [0, 1, 2, 3, 4, 5]: the replicas and the ISR
    become [3, 4, 5]. Through the model's partition change (the builder that runs
    completeReassignmentIfNeeded), the removed leader gives way to the first target replica,
    in a new leader epoch. Kafka's 0..5 are the model's 1..6."""
    cfg, s = three_replicas_moving()
    c = s.controller
    done = partition_change(cfg, s, replace(c, isr=mask(1, 2, 3, 4, 5, 6))).controller
    assert done.replicas == (4, 5, 6) and members(done.isr) == (4, 5, 6) and (done.adding, done.removing) == (0, 0)
    assert (done.leader, done.epoch) == (4, c.epoch + 1)


def test_stopped_leader_is_demoted_after_reassignment_completes_even_if_no_new_eligible_leaders():
    """Kafka: PartitionChangeBuilderTest.testStoppedLeaderIsDemotedAfterReassignmentCompletesEvenIfNoNewEligibleLeaders:
    a two-replica move from [0, 1] to [2, 3] (replicas [2, 3, 0, 1]) led by 0, which it removes;
    the ISR grows to [0, 1, 2, 3] while no target replica may lead. The change completes the
    move (replicas and ISR [2, 3]) and leaves the partition with no leader rather than keep the
    removed one. Kafka's 0..3 are the model's 1..4; 3 and 4 are fenced, so not acceptable."""
    cfg = Config(rf=2, minisr=2, broker_count=4, **MOVES)
    s = hand_made(4, (3, 4, 1, 2), (1, 2), leader=1, adding=(3, 4), removing=(1, 2), registered=(1, 2))
    c = s.controller
    done = partition_change(cfg, s, replace(c, isr=mask(1, 2, 3, 4))).controller
    assert done.replicas == (3, 4) and members(done.isr) == (3, 4) and (done.adding, done.removing) == (0, 0)
    assert done.leader == NO_LEADER and done.epoch == c.epoch + 1


def test_revert_reassignment():
    """Kafka: PartitionChangeBuilderTest.testRevertReassignment: BAR (replicas [1, 2, 3, 4], ISR
    [1, 2, 3], removing [1], adding [4], leader 1) reverted: replicas [1, 2, 3], ISR [1, 2, 3],
    adding and removing emptied, and the leader field set to 1 (a new leader epoch, since 4
    left the set). The model cancels it with its own action; same ids."""
    cfg = Config(rf=3, minisr=2, broker_count=4, **MOVES)
    s = hand_made(4, (1, 2, 3, 4), (1, 2, 3), leader=1, adding=(4,), removing=(1,))
    assert revert(s.controller) == ((1, 2, 3), mask(1, 2, 3), False)
    c = step(cfg, s, CancelPartitionReassignment()).controller
    assert c.replicas == (1, 2, 3) and members(c.isr) == (1, 2, 3) and (c.adding, c.removing) == (0, 0)
    assert (c.leader, c.epoch, c.pepoch) == (1, 6, 11)


def test_some_removing_and_adding():
    """Kafka: PartitionReassignmentRevertTest.testSomeRemovingAndAdding: replicas [4, 5, 3, 2, 1],
    ISR [4, 5, 2], removing [2], adding [4, 5]: the revert keeps [3, 2, 1] and the ISR [2], a
    clean revert. (Kafka's registration also grows the set from three to four; the revert does
    not care.) The cancel then elects 2, the first of [3, 2, 1] in the reverted ISR, since the
    leader 3 is not in it. Same ids, on five brokers."""
    cfg = Config(rf=3, minisr=1, broker_count=5, **MOVES)
    s = hand_made(5, (4, 5, 3, 2, 1), (4, 5, 2), leader=3, adding=(4, 5), removing=(2,))
    assert revert(s.controller) == ((3, 2, 1), mask(2), False)
    c = step(cfg, s, CancelPartitionReassignment()).controller
    assert c.replicas == (3, 2, 1) and members(c.isr) == (2,) and c.leader == 2 and not c.recovering


def test_isr_special_case():
    """Kafka: PartitionReassignmentRevertTest.testIsrSpecialCase: the ISR [4, 5] holds only adding
    replicas, so the revert makes the first remaining replica, 3, the ISR alone, and calls it
    unclean. ReplicationControlManager.cancelPartitionReassignment then refuses the cancel
    (INVALID_REPLICA_ASSIGNMENT) unless unclean.leader.election.enable is on; with it on, 3
    leads a new leader epoch, a clean election as far as the builder can tell (3 is in the
    ISR it was given), so the partition is not marked RECOVERING. Same ids, on five brokers."""
    s = hand_made(5, (4, 5, 3, 2, 1), (4, 5), leader=4, adding=(4, 5), removing=(2,))
    assert revert(s.controller) == ((3, 2, 1), mask(3), True)
    assert not enabled(Config(rf=3, minisr=1, broker_count=5, **MOVES), s, CancelPartitionReassignment())
    cfg = Config(rf=3, minisr=1, broker_count=5, unclean=True, **MOVES)
    c = step(cfg, s, CancelPartitionReassignment()).controller
    assert c.replicas == (3, 2, 1) and members(c.isr) == (3,) and (c.leader, c.epoch) == (3, 6)
    assert not c.recovering


def test_reassign_partitions():
    """Kafka: ReplicationControlManagerTest.testReassignPartitions: foo-1 ([3, 2, 1], led by 3) is
    moved to [0, 2, 1]: replicas [0, 2, 1, 3], adding [0], removing [3], no new leader epoch.
    Cancelling it writes replicas [2, 1, 3] (the kept replicas in the target's order, then the
    removing one: the preferred replica is now 2), keeps leader 3 in a new leader epoch and
    empties adding and removing; a second cancel answers NO_REASSIGNMENT_IN_PROGRESS. Kafka's 0
    is the model's 4."""
    cfg = Config(rf=3, minisr=2, broker_count=4, **MOVES)
    s = step(cfg, initial_state(3, replicas=(3, 2, 1), n=4), AlterPartitionReassignments((4, 2, 1)))
    c = s.controller
    assert c.replicas == (4, 2, 1, 3) and (members(c.adding), members(c.removing)) == ((4,), (3,))
    assert (c.leader, c.epoch, c.pepoch) == (3, 1, 2)
    s = step(cfg, s, CancelPartitionReassignment())
    c = s.controller
    assert c.replicas == (2, 1, 3) and (c.adding, c.removing) == (0, 0) and members(c.isr) == (1, 2, 3)
    assert (c.leader, c.epoch, c.pepoch) == (3, 2, 3)
    assert not enabled(cfg, s, CancelPartitionReassignment())


def test_cancel_reassign_partitions():
    """Kafka: ReplicationControlManagerTest.testCancelReassignPartitions: bar ([4, 3, 2], led by 4)
    with 3 fenced (ISR [4, 2]) is moved to a target that still names the fenced 3: the
    controller accepts it, since validateManualPartitionAssignment asks only that every broker
    be registered (a target naming an unregistered broker, foo-2's [5, 6, 7], is refused). The
    leader adds the new replicas to the ISR, but the move cannot complete while 3 is out of it.
    The cancel keeps the ISR members that were there before (ISR [4, 2]), leader 4 in a new
    leader epoch, and the original replicas. Kafka's target [1, 2, 3, 4, 0] also grows the set;
    the model moves 2 to broker 1 instead ([4, 3, 1]), so the model's cancel returns [4, 3, 2]
    where Kafka's returns [2, 3, 4] (its target's order). Kafka's 6 and 7 are not in the model's
    pool of five. On 4.1.0's rules, the test's: from 4.3.0 (KAFKA-19975) the model's move, which
    adds as many replicas as it removes, completes once 1 is in."""
    cfg = Config(rf=3, minisr=2, broker_count=5, max_fences=1, protocol=PRESETS["4.1.0"], **MOVES)
    s = step(cfg, initial_state(3, replicas=(4, 3, 2), n=5), ControllerFenceBroker(3))
    assert (members(s.controller.isr), s.controller.leader) == ((2, 4), 4)
    assert not enabled(cfg, s, AlterPartitionReassignments((5, 6, 7)))
    s = run(cfg, AlterPartitionReassignments((4, 3, 1)), MetadataUpdate(4), MetadataUpdate(1), Fetch(1, 4), state=s)
    s = step(cfg, s, AlterPartition(4, (1, 2, 4)))
    c = s.controller
    assert members(c.isr) == (1, 2, 4) and c.replicas == (4, 3, 1, 2) and (c.adding, c.removing) != (0, 0)
    epoch = c.epoch
    c = step(cfg, s, CancelPartitionReassignment()).controller
    assert c.replicas == (4, 3, 2) and members(c.isr) == (2, 4) and (c.adding, c.removing) == (0, 0)
    assert (c.leader, c.epoch) == (4, epoch + 1)
