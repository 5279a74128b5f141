"""Replication to followers: Fetch, OffsetsForLeaderEpoch and a follower that stalls.

Sources: Partition.fetchRecords and updateFollowerFetchState (the leader's side),
AbstractFetcherThread.processFetchRequest and truncate (the follower's side),
KIP-101/KIP-279 (OffsetsForLeaderEpoch), KAFKA-10554 (diverging epoch in the fetch
response), KIP-320 (current leader epoch fencing), KIP-903 (broker epoch in fetch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.alter_partition import ISR_SHRINKS, expand_isr_in_fetch, prepare_isr_expand
from kafkamc.spec.hw import advance_leader_hw
from kafkamc.spec.log import UNDEFINED, append, end_offset_for_epoch, truncate, truncation_offset
from kafkamc.spec.rpc import RoundTrip
from kafkamc.spec.state import NO_LEADER, Broker, Budget, Controller, FetchRequest, FetchResponse, State, bit, replace
from kafkamc.spec.wording import Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

# fetch.max.bytes in the model: an answer carries at most one record (one producer batch).
# Smaller answers leave a follower behind the offset it fetched from, the window in which
# KAFKA-7128 let a follower into the ISR without the records below the new epoch's start.
FETCH_MAX_RECORDS = 1


@dataclass(frozen=True)
class Fetch:
    """The follower fetches from the leader it knows, from its LEO with its last fetched epoch.

    The leader records the follower's position from the request and answers with records
    and its HW, or with a diverging epoch; the follower appends or truncates.
    """

    follower: int
    leader: int


@dataclass(frozen=True)
class OffsetsForLeaderEpoch:
    """A follower that must truncate asks the leader where its last epoch ends (KIP-101 rules)."""

    follower: int
    leader: int


@dataclass(frozen=True)
class ReplicaStall:
    """A follower stops fetching (GC pause, slow disk) for longer than replica.lag.time.max.ms."""

    follower: int


def follows(br: Broker, b: int) -> bool:
    """Broker b is up and follows another broker in its own metadata."""
    return br.alive and br.leader not in (NO_LEADER, b)


def must_truncate(br: Broker, b: int) -> bool:
    """The guard's follower side for OffsetsForLeaderEpoch: a follower that must truncate first."""
    return follows(br, b) and br.truncating


def may_fetch(br: Broker, b: int) -> bool:
    """The guard's follower side for Fetch: a follower that need not truncate first."""
    return follows(br, b) and not br.truncating


def offsets_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (OffsetsForLeaderEpoch(b, br.leader),) if must_truncate(br, b) else ()


def fetch_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (Fetch(b, br.leader),) if may_fetch(br, b) else ()


def may_stall(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> bool:
    """Whether broker b, in the ISR and not stalled yet, is a follower whose fetches may stop: a
    live one that follows someone in its own view, or a crashed one that does not lead; and
    an ISR shrink is left to drop it (replica_stall says why)."""
    following = br.leader not in (NO_LEADER, b) if br.alive else c.leader != b
    return following and not br.stalled and bool(c.isr & bit(b)) and cfg.allows(u, ISR_SHRINKS)


def stall_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (ReplicaStall(b),) if may_stall(cfg, c, br, u, b) else ()


def epoch_fenced(cfg: Config, leader: Broker, follower_epoch: int) -> bool:
    """KIP-320: a request carrying another leader epoch than the leader's own is rejected."""
    return cfg.rule("fetch_fencing") == "current_leader_epoch" and leader.epoch != follower_epoch


def send_fetch(cfg: Config, state: State, a: Fetch) -> FetchRequest | None:
    """The follower's request to the leader its own metadata names (AbstractFetcherThread's
    fetch for the partition), from its LEO, with its last fetched epoch, its current leader
    epoch and its broker epoch; None when it sends none."""
    f, ld = a.follower, a.leader
    fol = state.broker(f)
    if not (may_fetch(fol, f) and fol.leader == ld):
        return None
    return FetchRequest(fol.leo, fol.last_epoch(), fol.epoch, fol.bepoch)


def handle_fetch(cfg: Config, state: State, a: Fetch, req: FetchRequest) -> tuple[State, FetchResponse] | None:
    """The leader's side (Partition.fetchRecords): check divergence, read the answer, then learn
    the follower's LEO from the fetch offset (updateFollowerFetchState), add it to the ISR in
    the ZooKeeper eras, and maybe advance the HW. None when the leader refuses the request,
    and nothing changes on either side: it is down, no longer leads, or leads in another
    epoch than the request's (Partition.localLogWithEpochOrThrow: NOT_LEADER_OR_FOLLOWER,
    FENCED_LEADER_EPOCH with KIP-320).

    The answer carries the HW read with the records, before the update: ReplicaManager's
    readFromLog reads the log and the HW first and updateFollowerFetchState runs after it.
    So a follower learns an HW its fetch made possible one fetch later, the window KIP-101's
    loss needs. (A caught-up follower's fetch waits in purgatory and re-reads the HW when it
    completes; the model's next fetch delivers that same HW, so no behaviour is lost.)"""
    ld, f = a.leader, a.follower
    lead = state.broker(ld)
    if not (lead.alive and lead.leader == ld and not epoch_fenced(cfg, lead, req.epoch)):
        return None
    fetch_offset = req.fetch_offset
    if cfg.rule("truncation") == "diverging_epoch":
        last_epoch = req.last_epoch
        if last_epoch != UNDEFINED:
            epoch, end = end_offset_for_epoch(lead.cache, lead.leo, last_epoch)
            if end < fetch_offset or epoch < last_epoch:
                # Diverging: the leader does not record the follower's offset.
                return state, FetchResponse(ld, lead.epoch, fetch_offset, hw=lead.hw, diverging=(epoch, end))
    elif fetch_offset > lead.leo:
        # OFFSET_OUT_OF_RANGE: the follower is ahead and truncates to the leader's LEO.
        return state, FetchResponse(ld, lead.epoch, fetch_offset, hw=lead.hw, diverging=(UNDEFINED, lead.leo))
    answer = FetchResponse(
        ld, lead.epoch, fetch_offset, records=lead.log[fetch_offset : fetch_offset + FETCH_MAX_RECORDS], hw=lead.hw
    )
    views, vbepochs = list(lead.views), list(lead.vbepochs)
    views[f - 1] = fetch_offset  # learned from the request, never from the response
    vbepochs[f - 1] = req.bepoch  # KIP-903: the fetch names the follower's broker epoch
    state = state.with_broker(ld, replace(lead, views=tuple(views), vbepochs=tuple(vbepochs)))
    if cfg.rule("isr_update") == "zookeeper":
        state = expand_isr_in_fetch(cfg, state, ld, f)  # no AlterPartition: added right here
    elif cfg.rule("incarnations") == "kraft_steps":
        state = prepare_isr_expand(cfg, state, ld, f)  # Partition.maybeExpandIsr, in this fetch
    return advance_leader_hw(cfg, state, ld), answer


def handle_fetch_response(cfg: Config, state: State, a: Fetch, resp: FetchResponse) -> State:
    """The follower's side (AbstractFetcherThread.processFetchRequest): truncate to the
    divergence point, or append and take the HW."""
    fol = state.broker(a.follower)
    if resp.diverging is not None:
        offset, _done = truncation_offset(fol.cache, fol.leo, fol.hw, *resp.diverging)
        log, cache = truncate(fol.log, fol.cache, offset, cfg.rule("epoch_cache_truncation") == "at_log_end")
        flushed = min(fol.flushed, len(log))
        fol = replace(fol, log=log, cache=cache, hw=min(fol.hw, len(log)), stalled=False, flushed=flushed)
    else:
        log, cache = append(fol.log, fol.cache, resp.records)
        fol = replace(fol, log=log, cache=cache, hw=min(resp.hw, len(log)), stalled=False)
    return state.with_broker(a.follower, fol)


# One fetch round trip: the follower's request, the leader's handling, the follower's handling.
fetch = RoundTrip(send_fetch, handle_fetch, handle_fetch_response)


def offsets_for_leader_epoch(cfg: Config, state: State, a: OffsetsForLeaderEpoch) -> State | None:
    """KIP-101: a new follower asks where its last epoch ends on the leader and truncates there.

    Under KIP-279 it compares the epoch the leader answered for with its own and asks again
    until they agree; before it, one answer is taken as final.
    """
    f, ld = a.follower, a.leader
    fol = state.broker(f)
    if not must_truncate(fol, f) or fol.leader != ld:
        return None
    lead = state.broker(ld)
    if not state.leads(ld) or epoch_fenced(cfg, lead, fol.epoch):
        return None
    epoch, end = end_offset_for_epoch(lead.cache, lead.leo, fol.last_epoch())
    if cfg.rule("truncation") == "leader_epoch_kip279":
        offset, done = truncation_offset(fol.cache, fol.leo, fol.hw, epoch, end)
    elif end == UNDEFINED:
        offset, done = min(fol.hw, fol.leo), True  # no epoch to ask about: fall back to the HW
    else:
        offset, done = min(end, fol.leo), True
    log, cache = truncate(fol.log, fol.cache, offset, cfg.rule("epoch_cache_truncation") == "at_log_end")
    fol = replace(
        fol, log=log, cache=cache, hw=min(fol.hw, len(log)), truncating=not done, flushed=min(fol.flushed, len(log))
    )
    return state.with_broker(f, fol)


def replica_stall(cfg: Config, state: State, a: ReplicaStall) -> State | None:
    """A follower in the ISR goes quiet for longer than replica.lag.time.max.ms; its next fetch ends it.
    A crashed follower too: the leader sees only that its fetches stopped (Replica.isCaughtUp in
    Partition.getOutOfSyncReplicas), and with replica.lag.time.max.ms below the time the
    controller takes to fence it, the leader drops it first (seen on Kafka 4.1.1 by
    `kafkamc conform`: ISR [2] ELR [3] two seconds after broker 3's SIGKILL, its fence later).

    Only useful to the search while an ISR shrink can still happen, so it waits on that budget;
    it spends none, so several followers may stall on the last shrink left, which can drop
    them all in one request (Partition.maybeShrinkIsr).
    """
    f = a.follower
    fol = state.broker(f)
    if not may_stall(cfg, state.controller, fol, state.budget, f):
        return None
    return state.with_broker(f, replace(fol, stalled=True))


# ---------------------------------------------------------------- how a trace tells them


def fetch_html(a: Fetch, state: State, prev: State, draw) -> None:
    """The request from the follower's log end, and the leader's answer: records and the HW it
    read with them (before this fetch moved it), or where to truncate."""
    f, ld = draw.lane(a.follower), draw.lane(a.leader)
    before = prev.broker(a.follower)
    same, added = draw.log_change(before.log, state.broker(a.follower).log)
    draw.msg(f, ld, f"Fetch offset {before.leo}")
    hw = prev.broker(a.leader).hw
    if same < before.leo:
        answer = f"diverging epoch: truncate to {same}"
    elif added:
        answer = f"{added} record{'s' if added > 1 else ''}, HW {hw}"
    else:
        answer = f"no records, HW {hw}"
    draw.msg(ld, f, answer, "response")


def offsets_html(a: OffsetsForLeaderEpoch, state: State, prev: State, draw) -> None:
    f, ld = draw.lane(a.follower), draw.lane(a.leader)
    before = prev.broker(a.follower)
    same, _added = draw.log_change(before.log, state.broker(a.follower).log)
    draw.msg(f, ld, f"OffsetsForLeaderEpoch e{before.last_epoch()}")
    draw.msg(ld, f, f"epoch end: truncate to {same}" if same < before.leo else "epoch end: keep log", "response")


def fetch_truncation(cfg: Config, a: Fetch, b: int, prev: State, state: State) -> tuple[None, str]:
    to = f"offset {state.broker(b).leo}"
    if cfg.rule("truncation") == "diverging_epoch":
        return None, to + f" on a diverging-epoch fetch response from leader {a.leader}"
    return None, to + f" on OFFSET_OUT_OF_RANGE from leader {a.leader}: it was ahead of the leader's log end"


def offsets_truncation(cfg: Config, a: OffsetsForLeaderEpoch, b: int, prev: State, state: State) -> tuple[None, str]:
    said = f"where leader {a.leader} said epoch {prev.broker(b).last_epoch()} ends (OffsetsForLeaderEpoch)"
    return None, f"offset {state.broker(b).leo} {said}"


def stall_html(a: ReplicaStall, state: State, prev: State, draw) -> None:
    draw.mark(draw.lane(a.follower), "stalls: stops fetching", "stall")


FETCH_WORDS = Wording(html=fetch_html, truncation=fetch_truncation)
OFFSETS_WORDS = Wording(html=offsets_html, truncation=offsets_truncation)
STALL_WORDS = Wording(html=stall_html)
