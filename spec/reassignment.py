"""Partition reassignment (KIP-455, `kafka-reassign-partitions.sh`): the replica set moves to
other brokers of the pool while the partition stays online.

KRaft (ReplicationControlManager.alterPartitionReassignments, KAFKA-12803 in 3.1.0). The
operator's AlterPartitionReassignments names a target replica list. changePartitionReassignment
writes one partition change (PartitionReassignmentReplicas): `replicas` becomes the target
followed by the replicas being removed, with `addingReplicas` (target minus current) and
`removingReplicas` (current minus target). The ISR and the leader stay; the partition epoch is
bumped, the leader epoch not (no replica left the set). The adding replicas learn from the
metadata that they host the partition and start fetching from the leader as followers
(TopicsDelta.localChanges); the leader adds them to the ISR once they catch up (AlterPartition).

Every partition change then tries to complete the move (PartitionChangeBuilder.
completeReassignmentIfNeeded, spec/controller.py complete_reassignment): once every target
replica is in the ISR, `replicas` becomes the target, the removed replicas leave the ISR, and
a removed leader is replaced by the first target replica in the ISR (a new leader epoch; the
leader epoch is bumped on completion even when the leader stays, because replicas left the set:
triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). The controller answers the leader whose
AlterPartition completed a move away from it with NEW_LEADER_ELECTED. A removed broker deletes
its replica once it applies the change (ReplicaManager.applyDelta: StopPartition with
deleteLocalLog); until then it acts on its old metadata, as leader too.

ZooKeeper before KIP-455 (KafkaController.onPartitionReassignment, before 2.4.0) bumped the
leader epoch at the start as well and kept no adding/removing sets; the model follows KRaft in
every era: the move itself is the same sequence of ISR changes and elections.

Simplifications (what they cost). A reassignment replaces one replica by one broker from
outside the set, keeping the order (the new broker takes the removed one's place): a target
that reorders the replicas is a preferred-leader change, which ElectLeaders covers, and a move
of several replicas at once is several moves in a row. Only one reassignment is in flight at
a time, and none is cancelled (PartitionReassignmentRevert is left out). The incoming broker
must be alive, registered and unfenced. A broker outside the replica set hosts nothing: it
never crashes nor is fenced (neither would change what the partition does until a
reassignment adds it, and one adds only a live broker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.controller import partition_change
from kafkamc.spec.state import Broker, Budget, Controller, State, bit, replace

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

REASSIGNMENTS = Bound(
    "reassignments",
    0,
    "partition reassignments an operator may start (AlterPartitionReassignments, KIP-455)",
)


@dataclass(frozen=True)
class AlterPartitionReassignments:
    """An operator moves the partition to the `target` replica list."""

    target: tuple


def targets(c: Controller, incoming: int) -> list[tuple]:
    """The replica lists that bring `incoming` in: it takes one current replica's place."""
    return [tuple(incoming if r == out else r for r in c.replicas) for out in c.replicas]


def in_flight(c: Controller) -> bool:
    return bool(c.adding or c.removing)


def reassignment_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> list:
    """Candidates on the incoming broker b: outside the replica set, alive and active."""
    if not br.alive or b in c.replicas or not c.active & bit(b) or in_flight(c):
        return []
    if not cfg.allows(u, REASSIGNMENTS):
        return []
    return [AlterPartitionReassignments(t) for t in targets(c, b)]


def alter_partition_reassignments(cfg: Config, state: State, a: AlterPartitionReassignments) -> State | None:
    c = state.controller
    current = c.replicas
    incoming = [b for b in a.target if b not in current]
    if in_flight(c) or len(incoming) != 1 or a.target not in targets(c, incoming[0]):
        return None
    b = incoming[0]
    if not state.broker(b).alive or not c.active & bit(b) or not cfg.allows(state.budget, REASSIGNMENTS):
        return None
    removing = [r for r in current if r not in a.target]
    state = replace(state, budget=state.budget.spend(REASSIGNMENTS.name))
    moving = replace(c, replicas=a.target + tuple(sorted(removing)), adding=bit(b), removing=bit(removing[0]))
    return partition_change(cfg, state, moving)
