"""Metadata propagation: a broker applies the controller's latest partition metadata and
becomes leader or follower (ReplicaManager.applyDelta, Partition.makeLeader/makeFollower).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.hw import advance_leader_hw
from kafkamc.spec.log import assign_epoch, truncate
from kafkamc.spec.state import NO_LEADER, UNKNOWN, Broker, Budget, Controller, State, bit, replace
from kafkamc.spec.wording import Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config


@dataclass(frozen=True)
class MetadataUpdate:
    """The broker applies the controller's latest metadata: becomes leader or follower."""

    broker: int


def needs_metadata(c: Controller, br: Broker, b: int) -> bool:
    """The guard: b is up and its metadata is behind the controller's (stale)."""
    return br.alive and stale(c, br, b)


def metadata_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (MetadataUpdate(b),) if needs_metadata(c, br, b) else ()


def as_follower(br: Broker) -> Broker:
    """Drop leader-only state; requests in purgatory fail with NOT_LEADER_OR_FOLLOWER."""
    return replace(br, start=0, views=(), vbepochs=(), pending=0, purgatory=(), alter=None, request=None, ineligible=0)


def ineligible_view(c: Controller, b: int) -> int:
    """What leader b's metadata cache shows of the other replicas' registrations once it has
    applied the controller's latest: which are fenced or in controlled shutdown
    (KRaftMetadataCache.isBrokerFenced / isBrokerShuttingDown, read by
    Partition.isReplicaIsrEligible). Only the assignment's other brokers are kept, the only
    ones the leader may propose; a broker's metadata is one log, so it learns these with the
    partition's own changes, or alone when only registrations moved."""
    replicas = 0
    for r in c.replicas:
        replicas |= bit(r)
    return replicas & ~c.active & ~bit(b)


def become_leader(cfg: Config, state: State, b: int) -> State:
    """Partition.makeLeader for a new leader epoch: the epoch starts at our LEO.

    What the leader knows of its followers goes through Replica.resetReplicaState with
    isNewLeader = !isLeader. A broker that was not leading (its metadata named another
    leader, or none) starts with every follower's LEO and broker epoch unknown. A broker
    re-elected while it still led (its metadata never showed the epochs in between, as
    when one metadata delta brings several) keeps what the leader_reelection rule says
    (kept_views): under `keep`, Kafka since 0.9.0, the LEO and broker epoch of each
    follower's last fetch (ReplicaTest testResetReplicaStateWhenLeaderIsReelected*), even
    from an epoch in which that follower truncated while following another leader: the
    re-election finding, docs/FINDINGS.md.

    A re-elected leader also keeps its purgatory: ReplicaManager completes the waiting
    acks=all produces whenever the HW passes them (makeLeader's tryCompleteDelayedRequests,
    DelayedProduce.tryComplete, Partition.checkEnoughReplicasReachOffset, which reads the HW
    and the ISR but no leader epoch). Only a broker that becomes a follower answers them with
    an error (ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader).
    """
    c = state.controller
    old = state.broker(b)
    br = as_follower(old)
    views, vbepochs = kept_views(cfg, c, old, b)
    cache = br.cache
    if cfg.rule("leader_epoch_cache") == "on_election":
        cache = assign_epoch(cache, c.epoch, br.leo)  # KAFKA-7415; before it, only an append records the epoch
    br = replace(
        br,
        leader=b,
        epoch=c.epoch,
        pepoch=c.pepoch,
        isr=c.isr,
        start=br.leo,
        cache=cache,
        truncating=False,
        stalled=False,
        views=views,
        vbepochs=vbepochs,
        purgatory=old.purgatory if old.leader == b else (),
    )
    return advance_leader_hw(cfg, state.with_broker(b, br), b)


def kept_views(cfg: Config, c: Controller, old: Broker, b: int) -> tuple[tuple, tuple]:
    """The followers' LEOs and broker epochs a broker becoming leader of epoch c.epoch starts
    with (Replica.resetReplicaState, the leader_reelection rule).

    For a follower outside the new ISR Kafka keeps the LEO too, but sets its last fetch and
    caught-up times to 0 so that it cannot rejoin the ISR before it fetches again: until
    that fetch, which replaces the LEO, the kept LEO neither holds the HW back (isCaughtUp
    then holds only for a LEO equal to the leader's) nor brings it into the ISR
    (maybeExpandIsr runs only on a fetch). The model has no fetch times and lets a leader
    propose an ISR addition from its views at any step, so it forgets that LEO instead: the
    same behaviour. Its broker epoch is kept, as in Kafka.
    """
    rule = cfg.rule("leader_reelection")
    keep = old.leader == b and (rule == "keep" or (rule == "reset_on_epoch_gap" and c.epoch == old.epoch + 1))
    if not keep:
        # Not leading before; or 0.8.2's makeLeader, which reset every remote replica; or the
        # proposed fix: an epoch was missed, and a follower may have truncated in it.
        n = len(cfg.brokers)
        return (UNKNOWN,) * n, (0,) * n
    views = tuple(v if c.isr & bit(f) else UNKNOWN for f, v in enumerate(old.views, 1))
    return views, old.vbepochs


def become_follower(cfg: Config, state: State, b: int) -> State:
    """makeFollower: follow the new leader; how divergence is found depends on the truncation rule.

    A follower keeps only the leader and its epoch: the ISR matters to a leader alone.
    """
    c = state.controller
    old = state.broker(b)
    br = replace(as_follower(old), leader=c.leader, epoch=c.epoch, pepoch=0, isr=0)
    if old.leader == c.leader and cfg.rule("truncate_on") == "leader_change":
        return state.with_broker(b, br)  # before KAFKA-7164: same leader, new epoch, no truncation
    rule = cfg.rule("truncation")
    if rule == "hw":
        at_end = cfg.rule("epoch_cache_truncation") == "at_log_end"
        log, cache = truncate(br.log, br.cache, br.hw, at_end)  # before KIP-101: back to our own HW
        br = replace(br, log=log, cache=cache, flushed=min(br.flushed, len(log)))
    elif rule in ("leader_epoch", "leader_epoch_kip279"):
        br = replace(br, truncating=True)  # ask OffsetsForLeaderEpoch first
    return state.with_broker(b, br)


def metadata_update(cfg: Config, state: State, a: MetadataUpdate) -> State | None:
    b = a.broker
    br = state.broker(b)
    c = state.controller
    if not needs_metadata(c, br, b):
        return None
    if b not in c.replicas:
        return state.with_broker(b, without_partition(br))
    if c.leader == b and br.bepoch == 0:
        return state.with_broker(b, inert(cfg, br, c))
    if c.leader != b:
        return become_follower(cfg, state, b)
    view = ineligible_view(c, b)
    if br.leader == b and br.epoch == c.epoch:
        if (br.leader, br.epoch, br.pepoch, br.isr) == c.meta():
            # Only brokers' registrations moved: the partition, a pending change included, is
            # untouched, and nothing tries the HW until the next fetch or produce (applyDelta
            # visits changed partitions only).
            return state.with_broker(b, replace(br, ineligible=view))
        # Same leadership, newer ISR: take it as committed; a late response is then stale. A
        # prepared request still on its way names the old partition epoch: the controller will
        # refuse it (INVALID_UPDATE_VERSION), so it is dropped here, to the same effect.
        br = replace(br, isr=c.isr, pepoch=c.pepoch, pending=0, request=None, ineligible=view)
        return advance_leader_hw(cfg, state.with_broker(b, br), b)
    # The view comes with the same metadata; the HW, which reads it (waits_for_joining), is
    # tried again with it (become_leader's own try, without it, can only have stopped lower).
    nxt = become_leader(cfg, state, b)
    return advance_leader_hw(cfg, nxt.with_broker(b, replace(nxt.broker(b), ineligible=view)), b)


def without_partition(br: Broker) -> Broker:
    """A live broker that hosts no replica of the partition: one outside the replica set, or
    one a reassignment removed once it applied that (ReplicaManager.applyDelta deletes the
    local log, StopPartition with deleteLocalLog)."""
    return Broker(alive=br.alive, bepoch=br.bepoch, clean=br.clean)


def inert(cfg: Config, br: Broker, c: Controller) -> Broker:
    """A new process, not registered yet, whose metadata still shows it leading (its previous
    incarnation, not fenced yet): Partition.makeLeader runs, but the process answers no request
    until it is unfenced (BrokerServer.startup enables request processing last), and the
    registration's cleanup takes the leadership away first. So it neither leads nor follows.
    makeLeader still writes its leader-epoch cache entry (UnifiedLog.maybeAssignEpochStartOffset,
    KAFKA-7415), which the files keep: the epoch may be one the controller elected it to after its
    restart, which no incarnation of it led before (seed 903 on 4.1.1: broker 2's new process,
    refused with DUPLICATE_BROKER_REGISTRATION, logged "Leader conform-0 ... starts at leader
    epoch 1 from offset 3" and its leader-epoch-checkpoint held (1, 3))."""
    cache = assign_epoch(br.cache, c.epoch, br.leo) if cfg.rule("leader_epoch_cache") == "on_election" else br.cache
    return replace(as_follower(br), leader=NO_LEADER, epoch=c.epoch, pepoch=0, isr=0, truncating=False, cache=cache)


def stale(c: Controller, br: Broker, b: int) -> bool:
    """Whether the controller's metadata holds news that broker b acts on."""
    if b not in c.replicas:
        return br != without_partition(br)  # it still hosts a replica it must delete
    if c.leader == b and br.bepoch == 0:
        return (br.leader, br.epoch) != (NO_LEADER, c.epoch)
    if c.leader == b:
        return (br.leader, br.epoch, br.pepoch, br.isr) != c.meta() or br.ineligible != ineligible_view(c, b)
    return (br.leader, br.epoch) != (c.leader, c.epoch)


# ---------------------------------------------------------------- how a trace tells it


def metadata_html(a: MetadataUpdate, state: State, prev: State, draw) -> None:
    br = state.broker(a.broker)
    leader = "none" if br.leader == NO_LEADER else br.leader
    draw.msg("controller", draw.lane(a.broker), f"metadata: leader {leader}, epoch {br.epoch}")


def metadata_truncation(cfg: Config, a: MetadataUpdate, b: int, prev: State, state: State) -> tuple[str, str]:
    """Before KIP-101 a new follower truncated to its own HW as it applied the metadata."""
    br = state.broker(b)
    return (
        f"broker {b} became follower of {br.leader} in epoch {br.epoch} and",
        f"its own HW {br.hw} (the rule before KIP-101)",
    )


METADATA_WORDS = Wording(html=metadata_html, truncation=metadata_truncation)
