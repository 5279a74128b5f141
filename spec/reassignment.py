"""Partition reassignment (KIP-455, `kafka-reassign-partitions.sh`): the replica set moves to
other brokers of the pool while the partition stays online, or the move is cancelled.

KRaft (ReplicationControlManager.alterPartitionReassignments, KAFKA-12803 in 3.1.0). The
operator's AlterPartitionReassignments names a target replica list. changePartitionReassignment
writes one partition change (PartitionReassignmentReplicas): `replicas` becomes the target
followed by the replicas being removed (ascending, a TreeSet), with `addingReplicas` (target
minus current) and `removingReplicas` (current minus target). The ISR and the leader stay; the
partition epoch is bumped, the leader epoch not (no replica left the set). The adding replicas
learn from the metadata that they host the partition and start fetching from the leader as
followers (TopicsDelta.localChanges); the leader adds each to the ISR once it catches up
(AlterPartition). The target may name any registered broker
(validateManualPartitionAssignment checks brokerRegistrations only): a fenced or dead
broker is a valid target, and the move then waits until it is back and unfenced, since
only then may it join the ISR (INELIGIBLE_REPLICA, KIP-841).

Every partition change then tries to complete the move (PartitionChangeBuilder.
completeReassignmentIfNeeded, spec/controller.py complete_reassignment): once the ISR holds
what the era's rule asks (every target replica, or every adding one: `reassignment_completion`,
KAFKA-15665, KAFKA-19975), `replicas` becomes the target, the removed replicas leave the ISR, and
a removed leader is replaced by the first target replica in the ISR (a new leader epoch; the
leader epoch is bumped on completion even when the leader stays, because replicas left the set:
triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). The controller answers the leader whose
AlterPartition completed a move away from it with NEW_LEADER_ELECTED. A removed broker deletes
its replica once it applies the change (ReplicaManager.applyDelta: StopPartition with
deleteLocalLog); until then it acts on its old metadata, as leader too.

Cancellation (AlterPartitionReassignments with a null replica list, `--cancel`;
ReplicationControlManager.cancelPartitionReassignment) is `CancelPartitionReassignment` below.

ZooKeeper before KIP-455 (KafkaController.onPartitionReassignment, before 2.4.0) bumped the
leader epoch at the start as well and kept no adding/removing sets; the model follows KRaft in
every era: the move itself is the same sequence of ISR changes and elections.

Simplifications (what they cost: docs/MODEL.md). A target keeps the replication factor and
the order: it replaces one or more replicas, each by a broker from outside the set that takes
its place. A target that reorders the replicas is a preferred-leader change (ElectLeaders
covers it); one that changes the replication factor is left out. Only one reassignment is in
flight at a time: Kafka also accepts a new target for a partition that is moving (the current
replicas then include the adding ones), which the model does not. Brokers outside the replica
set host nothing; they may stop cleanly (--max-clean-shutdowns) or be fenced (--max-fences)
only while a reassignment may still bring them in, since until then neither changes what the
partition does (a hard crash of a broker with no log is a clean stop as far as the partition
can tell, so outsiders do not spend --max-hard-crashes).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, permutations
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.controller import partition_change
from kafkamc.spec.state import NO_LEADER, Broker, Budget, Controller, State, bit, replace
from kafkamc.spec.wording import Told, Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

REASSIGNMENTS = Bound(
    "reassignments",
    0,
    "partition reassignments an operator may start (AlterPartitionReassignments, KIP-455)",
    needs_spare_broker="a reassignment moves to another broker",
)
# Its own bound, not the starts' budget: a cancel needs a move in flight, so it fires at most once
# per start, but each one reverts to a partition like the one before the move with the budget
# spent, a copy of the states before the start (rf 2 over 3 brokers: 17,028 -> 37,693 states).
# At 0 the thorough reassignment checks keep their size; --max-reassignment-cancels 1 adds them.
CANCELS = Bound(
    "reassignment_cancels",
    0,
    "reassignments in flight an operator may cancel (AlterPartitionReassignments, no target)",
    needs_spare_broker="a reassignment moves to another broker",
)


@dataclass(frozen=True)
class AlterPartitionReassignments:
    """An operator moves the partition to the `target` replica list.

    `removing`: the order the controller lists two or more removing replicas in after the
    target. Kafka lists them by ascending broker id (a TreeSet in PartitionReassignmentReplicas),
    and that order decides elections while the move is in flight (the target comes first, so
    only when no target replica may lead). Broker ids are labels in the model (every assignment
    order is an initial state, and symmetry reduction relabels brokers), so every order is a
    candidate: each is Kafka's under some numbering of the brokers, and ordering by the model's
    ids would make the step depend on labels, which the reduction rules out. None: ascending."""

    target: tuple
    removing: tuple | None = None


@dataclass(frozen=True)
class CancelPartitionReassignment:
    """An operator cancels the reassignment in flight: AlterPartitionReassignments with a null
    replica list (`kafka-reassign-partitions.sh --cancel`)."""


def targets(cfg: Config, c: Controller) -> list[tuple]:
    """Every target the model starts from replica list `c.replicas`: one or more replicas, each
    replaced in its place by a different broker from outside the set, as many as the pool
    holds (a two-replica move needs two brokers outside the set)."""
    outsiders = [b for b in cfg.brokers if b not in c.replicas]
    out = []
    for k in range(1, min(len(c.replicas), len(outsiders)) + 1):
        for places in combinations(range(len(c.replicas)), k):
            for incoming in permutations(outsiders, k):
                target = list(c.replicas)
                for place, b in zip(places, incoming, strict=True):
                    target[place] = b
                out.append(tuple(target))
    return out


def first_incoming(c: Controller, target: tuple) -> int:
    """The broker a target's action is listed under: its first broker from outside the set."""
    return next(b for b in target if b not in c.replicas)


def in_flight(c: Controller) -> bool:
    return bool(c.adding or c.removing)


def may_reassign(cfg: Config, c: Controller, u: Budget) -> bool:
    """The guard of a start: no move in flight, and a reassignment is left."""
    return not in_flight(c) and cfg.allows(u, REASSIGNMENTS)


def may_cancel(cfg: Config, c: Controller, u: Budget) -> bool:
    """The guard of a cancel: a move in flight, and a cancel is left."""
    return in_flight(c) and cfg.allows(u, CANCELS)


def reassignment_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> list:
    """Candidates on broker b: the targets whose first incoming broker is b, with every order of
    their removing replicas when there are two or more; every broker of the pool is registered
    (a dead or fenced one included), so b need not be up."""
    if b in c.replicas or not may_reassign(cfg, c, u):
        return []
    out = []
    for t in targets(cfg, c):
        if first_incoming(c, t) == b:
            leaving = [r for r in c.replicas if r not in t]
            orders = [None] if len(leaving) == 1 else list(permutations(leaving))
            out += [AlterPartitionReassignments(t, order) for order in orders]
    return out


def alter_partition_reassignments(cfg: Config, state: State, a: AlterPartitionReassignments) -> State | None:
    """ReplicationControlManager.changePartitionReassignment: the target first, then the
    removing replicas (PartitionReassignmentReplicas; their order: AlterPartitionReassignments);
    no broker state is checked beyond registration (validateManualPartitionAssignment)."""
    c = state.controller
    if not may_reassign(cfg, c, state.budget) or a.target not in targets(cfg, c):
        return None
    adding = removing = 0
    for b in a.target:
        adding |= 0 if b in c.replicas else bit(b)
    for b in c.replicas:
        removing |= 0 if b in a.target else bit(b)
    leaving = tuple(b for b in sorted(c.replicas) if removing & bit(b)) if a.removing is None else a.removing
    if sorted(leaving) != sorted(b for b in c.replicas if removing & bit(b)):
        return None
    state = replace(state, budget=state.budget.spend(REASSIGNMENTS.name))
    return partition_change(cfg, state, replace(c, replicas=a.target + leaving, adding=adding, removing=removing))


def cancel_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    """One candidate, listed under the first replica, while a reassignment is in flight."""
    if not may_cancel(cfg, c, u) or b != c.replicas[0]:
        return ()
    return (CancelPartitionReassignment(),)


def revert(c: Controller) -> tuple[tuple, int, bool]:
    """PartitionReassignmentRevert: the replica list without the adding replicas (the order the
    move left: the target's kept replicas, then the removing ones, ascending; so a cancel can
    change the preferred replica), and the ISR without them. When the ISR held only adding
    replicas, the first remaining replica becomes the ISR alone, which is an unclean choice
    (the third value)."""
    replicas = tuple(b for b in c.replicas if not c.adding & bit(b))
    isr = c.isr & ~c.adding
    return (replicas, isr, False) if isr else (replicas, bit(replicas[0]), True)


def cancel_partition_reassignment(cfg: Config, state: State, a: CancelPartitionReassignment) -> State | None:
    """ReplicationControlManager.cancelPartitionReassignment: NO_REASSIGNMENT_IN_PROGRESS when
    nothing moves; INVALID_REPLICA_ASSIGNMENT when the revert is unclean and unclean election
    is off. Otherwise one partition change (a PartitionChangeBuilder with the revert's replicas
    and ISR, adding and removing emptied): the leader stays if it is a valid leader of the
    reverted ISR (electAnyLeader: in it and acceptable), else the first valid replica of the
    reverted list leads. The leader epoch is bumped, since replicas left the set. Adding
    replicas out of the ISR below min ISR enter the ELR like any member leaving it
    (maybePopulateTargetElr does not filter them to the replica list); each deletes its
    replica once it applies the change, as a removed replica does on completion."""
    c = state.controller
    if not may_cancel(cfg, c, state.budget):
        return None
    replicas, isr, unclean = revert(c)
    if unclean and not cfg.unclean:
        return None
    state = replace(state, budget=state.budget.spend(CANCELS.name))
    stays = c.leader != NO_LEADER and isr & c.active & bit(c.leader)
    reverted = replace(c, replicas=replicas, isr=isr, adding=0, removing=0, leader=c.leader if stays else NO_LEADER)
    return partition_change(cfg, state, reverted)


# ---------------------------------------------------------------- how a trace tells them


def reassignment_html(a: AlterPartitionReassignments, state: State, prev: State, draw) -> None:
    # An operator's request, like ElectLeaders: a mark on the controller's lane.
    draw.mark("controller", f"reassign to [{','.join(map(str, a.target))}]", "elect")


def cancel_html(a: CancelPartitionReassignment, state: State, prev: State, draw) -> None:
    reverted = ",".join(map(str, state.controller.replicas))
    draw.mark("controller", f"reassignment cancelled: [{reverted}]", "elect")


def reassignment_told(
    cfg: Config, a: AlterPartitionReassignments, before: Controller, state: State, told: bool, say
) -> Told:
    incoming = [r for r in a.target if r not in before.replicas]
    one = len(incoming) == 1
    brokers = f"broker {incoming[0]} as an adding replica" if one else f"brokers {incoming} as adding replicas"
    return Told(
        f"an operator moved the partition to replicas {list(a.target)} (AlterPartitionReassignments)",
        [f"added {brokers} ({say.assignment(state.controller)})"],
    )


def cancel_told(cfg: Config, a: CancelPartitionReassignment, before: Controller, state: State, told: bool, say) -> Told:
    return Told(
        "an operator cancelled the reassignment (AlterPartitionReassignments with no target)",
        [f"reverted it (PartitionReassignmentRevert): replicas now {list(state.controller.replicas)}"],
    )


def cancel_election(a: CancelPartitionReassignment, before: Controller, after: Controller) -> str | None:
    if before.leader not in after.replicas:
        return f"in place of broker {before.leader}, an adding replica the cancel removed"
    return None


REASSIGNMENT_WORDS = Wording(html=reassignment_html, controller=reassignment_told)
CANCEL_WORDS = Wording(html=cancel_html, controller=cancel_told, election=cancel_election)
