"""The controller's decisions: partition changes, leader election, ELR, fencing, AlterPartition.

Every change to a partition goes through `partition_change`, as every change in KRaft goes
through one PartitionChangeBuilder: it maintains the ELR, elects when the partition has no
leader and bumps the partition epoch once when anything moved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkamc.spec.state import NO_LEADER, AlterPartitionResponse, Controller, State, bit, members, replace, size

if TYPE_CHECKING:
    from kafkamc.spec.config import Config


def maintain_elr(cfg: Config, before: Controller, c: Controller, unclean: int = 0) -> Controller:
    """KIP-966: members that leave an ISR below min ISR become eligible leader replicas.

    They hold everything up to the HW, which cannot advance below min ISR. Once the ISR is
    back at min ISR the ELR is cleared; a member back in the ISR is no longer in the ELR.
    When the ISR empties, the partition's leader before the change is remembered as the last
    known leader (PartitionChangeBuilder.maybeUpdateLastKnownLeader: lastKnownElr holds the
    leader alone, however many members left with it).
    Replicas whose shutdown was unclean (`unclean`, a mask) never enter the ELR
    (PartitionChangeBuilder.setUncleanShutdownReplicas).
    """
    if cfg.rule("elr") != "on":
        return c
    if size(c.isr) >= cfg.effective_minisr:
        return replace(c, elr=0, lastelr=0)
    lastelr = c.lastelr
    if before.isr and not c.isr:
        # A leaderless partition whose ISR empties has no one to remember (Kafka writes -1).
        lastelr = bit(before.leader) if before.leader != NO_LEADER else 0
    return replace(c, elr=(c.elr | before.isr) & ~c.isr & ~unclean, lastelr=lastelr)


def elect(cfg: Config, c: Controller, last_known: int) -> Controller:
    """Elect a leader for a leaderless partition (PartitionChangeBuilder.electAnyLeader).

    Order: the first registered ISR member in assignment order; with the ISR empty, the
    first registered ELR member, which becomes the ISR alone; with the ISR and the ELR
    empty (fenced members count), the last known leader if it may lead (may_lead_as_last_known);
    then, if unclean election is on, the first registered replica. The last two may lack
    committed records: the partition is RECOVERING until its leader expands the ISR.

    The last known leader is the one the partition had before this change (`last_known`):
    canElectLastKnownLeader reads the existing registration's lastKnownElr, because the
    builder records the new one only after the election.
    """
    if c.leader != NO_LEADER:
        return c
    active = c.active  # registered, unfenced, not in controlled shutdown
    clean = c.in_order(c.isr & active)
    if clean:
        return replace(c, leader=clean[0])
    if not c.isr:
        eligible = c.in_order(c.elr & active)
        if eligible:
            b = eligible[0]
            return replace(c, leader=b, isr=bit(b), elr=c.elr & ~bit(b))
        if not c.elr and may_lead_as_last_known(cfg, c, last_known):
            return replace(c, leader=c.in_order(last_known)[0], isr=last_known, recovering=True)
    if cfg.unclean and active:
        b = c.in_order(active)[0]
        return replace(c, leader=b, isr=bit(b), elr=0, lastelr=0, recovering=True)
    return c  # offline: no eligible leader


def may_lead_as_last_known(cfg: Config, c: Controller, last_known: int) -> bool:
    """PartitionChangeBuilder.canElectLastKnownLeader, past its ELR and ISR checks: is the last
    known leader acceptable (isAcceptableLeader: registered and unfenced)?

    The last_known_leader rule. Kafka 4.0.0 tests acceptability but only logs the answer and
    returns true, so a fenced (or dead and fenced) last known leader is elected: the ISR then
    names a fenced broker alone and the partition has a leader that cannot serve (KAFKA-19522,
    fixed in 4.1.0 by returning false).
    """
    if cfg.rule("last_known_leader") == "any":
        return bool(last_known)
    return bool(last_known & c.active)


def complete_reassignment(cfg: Config, c: Controller) -> Controller:
    """The completion every partition change tries (PartitionChangeBuilder.
    completeReassignmentIfNeeded, PartitionReassignmentReplicas.maybeCompleteReassignment): with
    the removing replicas taken out of the ISR, that ISR keeps a member and holds what the rule
    `reassignment_completion` asks (spec/protocol.py); then the replicas become the target, the
    removing replicas leave the ISR, and a removed leader leaves the partition to be elected
    among the target (minimum ISR is not checked)."""
    if not c.adding and not c.removing:
        return c
    target = tuple(b for b in c.replicas if not c.removing & bit(b))
    isr = c.isr & ~c.removing
    rule = cfg.rule("reassignment_completion")
    # The whole target, or only the adding replicas (the model's moves replace replicas one for
    # one, so adding_unless_shrinking asks for the whole target only in Kafka's shrinking moves).
    whole = rule == "all_target" or (rule == "adding_unless_shrinking" and size(c.adding) < size(c.removing))
    needed = sum(bit(b) for b in target) if whole else c.adding
    if not isr or needed & ~isr:
        return c
    leader = NO_LEADER if c.leader != NO_LEADER and c.removing & bit(c.leader) else c.leader
    return replace(c, replicas=target, isr=isr, adding=0, removing=0, leader=leader)


def partition_change(cfg: Config, state: State, c: Controller, unclean: int = 0) -> State:
    """Apply a controller change (completing a reassignment it allows), keep the ELR, elect if
    leaderless, and bump the epochs once: the leader epoch on any change of leader (to none
    included) and when replicas leave the set
    (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded), the partition epoch on any change
    at all. `unclean`: replicas registering after an unclean shutdown."""
    before = state.controller
    c = elect(cfg, maintain_elr(cfg, before, complete_reassignment(cfg, c), unclean), before.lastelr)
    if c.leader != NO_LEADER and c.lastelr:
        c = replace(c, lastelr=0)  # a led partition needs no last known leader
    moved = c.replicas != before.replicas
    if c.leader != before.leader or (moved and any(b not in c.replicas for b in before.replicas)):
        c = replace(c, epoch=before.epoch + 1)
    if (c.leader, c.epoch, c.isr, c.elr, c.lastelr, c.recovering) != (
        before.leader,
        before.epoch,
        before.isr,
        before.elr,
        before.lastelr,
        before.recovering,
    ) or moved:
        c = replace(c, pepoch=before.pepoch + 1)
    return replace(state, controller=c)


def leave_isr(cfg: Config, c: Controller, b: int) -> Controller:
    """ReplicationControlManager.generateLeaderAndIsrUpdates for a broker that is fenced or
    enters controlled shutdown: out of the ISR, and no longer leader if it led (the partition
    change then elects another).

    Without ELR the last ISR member stays in the ISR (PartitionChangeBuilder applies an empty
    ISR only with ELR on; ZooKeeper's removeReplicasFromIsr kept it too); with ELR it leaves
    the ISR for the ELR like any other member.
    """
    isr = c.isr & ~bit(b)
    if not isr and cfg.rule("elr") != "on":
        isr = c.isr
    return replace(c, isr=isr, leader=NO_LEADER if c.leader == b else c.leader)


def with_shutdown(c: Controller, b: int, epoch: int) -> Controller:
    """Broker b's controlled-shutdown mark set to `epoch` (0 clears it; none left is ())."""
    marks = list(c.shutdown or (0,) * len(c.bepochs))
    marks[b - 1] = epoch
    return replace(c, shutdown=tuple(marks) if any(marks) else ())


def fence(cfg: Config, state: State, b: int) -> State:
    """Unregister b and drop it from the ISR, then re-elect if it led. A fenced broker is no
    longer in controlled shutdown: a new registration starts afresh."""
    c = leave_isr(cfg, state.controller, b)
    if c.shutdown:
        c = with_shutdown(c, b, 0)
    return partition_change(cfg, state, replace(c, registered=c.registered & ~bit(b)))


def register(cfg: Config, state: State, b: int, clean_shutdown: bool) -> State:
    """A broker registers with a new broker epoch and is unfenced, in one step: the restart of
    incarnations=fenced_first, once its previous incarnation is fenced (register_fenced has
    Kafka's steps).

    A broker whose previous life ended in an unclean shutdown may have lost records below
    the HW: with ELR on, the controller drops it from the ISR and the ELR (KAFKA-15586).
    It may still be the last known leader.

    A broker that leads while it registers is a fenced last known leader that 4.0.0 elected
    (last_known_leader=any). Out of the ISR it is no valid leader (electAnyLeader keeps the
    leader only while isValidNewLeader): the registration, made while it is still fenced,
    leaves the partition leaderless, and the unfencing elects again, in a new leader epoch.
    """
    c = state.controller
    bepochs = list(c.bepochs)
    bepochs[b - 1] += 1
    c = replace(c, bepochs=tuple(bepochs))
    unclean = 0
    if not clean_shutdown and cfg.rule("elr") == "on":
        unclean = bit(b)
        c = replace(c, isr=c.isr & ~unclean, elr=c.elr & ~unclean)
        if c.leader == b:
            state = partition_change(cfg, state, replace(c, leader=NO_LEADER), unclean)
            c = state.controller
    return partition_change(cfg, state, replace(c, registered=c.registered | bit(b)), unclean)


def register_fenced(cfg: Config, state: State, b: int, clean_shutdown: bool) -> State:
    """ClusterControlManager.registerBroker for a new incarnation: a new broker epoch, and the
    RegisterBrokerRecord leaves it fenced (its `fenced` defaults to true); the unfence comes with a
    later heartbeat (`unfence`). Refused while the old incarnation's session is valid
    (DuplicateBrokerRegistrationException); accepted once it expired, whether the periodic fence
    (maybeFenceOneStaleBroker) ran or not. Before the record, the previous incarnation is cleaned
    up (brokerShutdownHandler.addRecordsForShutdown, ReplicationControlManager.handleBrokerShutdown):
    out of the ISR as a fence takes it; after an unclean shutdown with ELR on, out of the ISR and
    the ELR without entering the ELR (handleBrokerUncleanShutdown, KAFKA-15586). It may stay the
    last known leader.

    A broker that leads while it registers is either its previous incarnation, not fenced yet
    (the cleanup re-elects), or a fenced last known leader that 4.0.0 elected
    (last_known_leader=any): out of the ISR it is no valid leader, the partition is left
    leaderless, and the unfencing elects again, in a new leader epoch.
    """
    c = state.controller
    bepochs = list(c.bepochs)
    bepochs[b - 1] += 1
    c = replace(c, bepochs=tuple(bepochs), registered=c.registered & ~bit(b))
    if c.shutdown:
        c = with_shutdown(c, b, 0)
    unclean = 0
    if not clean_shutdown and cfg.rule("elr") == "on":
        unclean = bit(b)
        c = replace(c, isr=c.isr & ~unclean, elr=c.elr & ~unclean)
    else:
        c = leave_isr(cfg, c, b)
    if c.leader == b:
        state = partition_change(cfg, state, replace(c, leader=NO_LEADER), unclean)
        c = state.controller
    return partition_change(cfg, state, c, unclean)


def unfence(cfg: Config, state: State, b: int) -> State:
    """ReplicationControlManager.handleBrokerUnfenced: the broker may lead again; a leaderless
    partition elects (BrokerHeartbeatManager.calculateNextBrokerState, FENCED to UNFENCED)."""
    c = state.controller
    return partition_change(cfg, state, replace(c, registered=c.registered | bit(b)))


def handle_alter_partition(
    cfg: Config, state: State, epoch: int, pepoch: int, proposed: int, bepochs: tuple
) -> tuple[State, AlterPartitionResponse]:
    """The controller validates an AlterPartition request and commits it or says why not
    (ReplicationControlManager.alterPartition and validateAlterPartitionData).

    `bepochs`: the broker epoch the request names for each proposed member (index b - 1; 0 for
    none, Kafka's -1; empty before KIP-903). An accepted change is answered with the
    partition's leader and partition epochs after it: when it completed a reassignment that
    bumped the leader epoch, the answer's epoch is not the request's.

    The leader marks itself RECOVERED as soon as it leads (KIP-704 as shipped), so every
    request carries RECOVERED and the partition recovers with the first accepted change.
    """
    c = state.controller
    added = proposed & ~c.isr
    if epoch != c.epoch:
        return state, AlterPartitionResponse(epoch, False, 0, 0, "FENCED_LEADER_EPOCH")
    if pepoch != c.pepoch:
        return state, AlterPartitionResponse(epoch, False, 0, 0, "INVALID_UPDATE_VERSION")
    if added and members(added)[0] not in c.replicas:  # Replicas.validateIsr: not in the assignment
        return state, AlterPartitionResponse(epoch, False, 0, 0, "INVALID_REQUEST")
    if ineligible_for_isr(cfg, c, proposed, bepochs):
        return state, AlterPartitionResponse(epoch, False, 0, 0, "INELIGIBLE_REPLICA")
    nxt = partition_change(cfg, state, replace(c, isr=proposed, recovering=False))
    after = nxt.controller
    if after.leader != c.leader:  # the change completed a reassignment that removed the leader
        return nxt, AlterPartitionResponse(epoch, False, 0, 0, "NEW_LEADER_ELECTED")
    return nxt, AlterPartitionResponse(after.epoch, True, after.isr, after.pepoch)


def ineligible_for_isr(cfg: Config, c: Controller, proposed: int, bepochs: tuple) -> int:
    """ReplicationControlManager.ineligibleReplicasForIsr: the members of the proposed ISR, every
    one of them and not only an added one, that are not registered and unfenced, are in
    controlled shutdown (KIP-841), or (KIP-903) were named with a broker epoch other than
    their current registration's; -1 (the model's 0) skips that check, unless the proposed
    rule checked_no_unknown_join refuses it for a member being added."""
    out = proposed & ~c.active
    rule = cfg.rule("isr_join_broker_epoch")
    if rule != "unchecked":
        for m in members(proposed):
            sent = bepochs[m - 1] if bepochs else 0
            if sent and sent != c.bepochs[m - 1]:
                out |= bit(m)
            elif not sent and rule == "checked_no_unknown_join" and not c.isr & bit(m):
                # The proposed fix: an addition must name the epoch it was fetched with. A member
                # already in the ISR may still be named -1 (addBrokerEpochToIsr fills -1 for a
                # follower that has not fetched from this leader yet).
                out |= bit(m)
    return out
