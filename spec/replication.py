"""Produce, fetch and follower truncation: how records reach the leader and its followers.

Each step function takes (config, state, action) and returns the next state, or None when
its guard does not hold.
"""
from __future__ import annotations

from typing import Optional

from kafkamc.spec.actions import Fetch, OffsetsForLeaderEpoch, Produce, ReplicaStall
from kafkamc.spec.config import Config
from kafkamc.spec.log import UNDEFINED, append, end_offset_for_epoch, truncate, truncation_offset
from kafkamc.spec.state import NO_LEADER, Broker, FetchRequest, FetchResponse, State, bit, members, size, replace


# fetch.max.bytes in the model: an answer carries at most one record (one producer batch).
# Smaller answers leave a follower behind the offset it fetched from, the window in which
# KAFKA-7128 let a follower into the ISR without the records below the new epoch's start.
FETCH_MAX_RECORDS = 1


def hw_isr(cfg: Config, br: Broker) -> int:
    """The ISR the leader computes its HW over while an AlterPartition may be in flight."""
    if cfg.rule("hw_pending_isr") == "maximal":
        return br.isr | br.pending       # additions count at once, removals once committed
    return br.isr


def advance_leader_hw(cfg: Config, state: State, b: int) -> State:
    """maybeIncrementLeaderHW: HW = min LEO over the ISR in use (since 3.7 only at or above min ISR).

    acks=all produce requests waiting in purgatory are answered once the HW passes them.
    """
    br = state.broker(b)
    if size(br.isr) < cfg.effective_minisr and cfg.rule("hw_min_isr") == "min_isr":
        return state
    isr = hw_isr(cfg, br)
    new_hw = br.leo
    for f in members(isr):
        if f != b:
            new_hw = min(new_hw, br.views[f - 1])
    if new_hw <= br.hw:
        return state
    acked, acked_down = state.ghost.acked, state.ghost.acked_down
    down_now = sum(1 for other in state.brokers if not other.alive) if cfg.track_down else 0
    waiting = []
    for entry in br.purgatory:
        offset, rec, down = entry
        if offset < new_hw:
            if size(isr) >= cfg.effective_minisr:
                acked |= 1 << (rec - 1)
                acked_down = max(acked_down, min(down, down_now))   # down through append and ack
            # else: NOT_ENOUGH_REPLICAS_AFTER_APPEND, the producer is told the write failed
        else:
            waiting.append(entry)
    nxt = state.with_broker(b, replace(br, hw=new_hw, purgatory=tuple(waiting)))
    if acked != state.ghost.acked:
        nxt = replace(nxt, ghost=replace(nxt.ghost, acked=acked, acked_down=acked_down))
    return nxt


# ---------------------------------------------------------------- producer

def produce(cfg: Config, state: State, a: Produce) -> Optional[State]:
    """The leader appends the record; acks=1 answers at once, acks=all once the HW passes it,
    acks=0 never answers (the producer learns nothing)."""
    b = a.leader
    br = state.broker(b)
    if not state.leads(b) or state.budget.records >= cfg.max_records or a.record != state.budget.records + 1:
        return None
    if cfg.acks == "all" and size(br.isr) < cfg.effective_minisr:
        return state            # NOT_ENOUGH_REPLICAS: rejected before append, nothing changes
    offset = br.leo
    log, cache = append(br.log, br.cache, ((br.epoch, a.record),))
    br = replace(br, log=log, cache=cache)
    ghost = state.ghost
    if cfg.acks == "1":
        ghost = replace(ghost, acked=ghost.acked | 1 << (a.record - 1))
    elif cfg.acks == "all":
        # The ghost count of brokers down at append time lets the durability table ask
        # whether writes are still acknowledged with k brokers lost.
        down = sum(1 for other in state.brokers if not other.alive) if cfg.track_down else 0
        br = replace(br, purgatory=br.purgatory + ((offset, a.record, down),))
    nxt = replace(state.with_broker(b, br), ghost=ghost,
                  budget=replace(state.budget, records=state.budget.records + 1))
    return advance_leader_hw(cfg, nxt, b)


# ---------------------------------------------------------------- replication

def epoch_fenced(cfg: Config, leader: Broker, follower_epoch: int) -> bool:
    """KIP-320: a request carrying another leader epoch than the leader's own is rejected."""
    return cfg.rule("fetch_fencing") == "current_leader_epoch" and leader.epoch != follower_epoch


def fetch(cfg: Config, state: State, a: Fetch) -> Optional[State]:
    """One fetch round trip: the follower's request, the leader's handling, the follower's handling."""
    f, ld = a.follower, a.leader
    fol, lead = state.broker(f), state.broker(ld)
    if not fetch_answered(cfg, f, fol, ld, lead):
        return None
    state, resp = leader_handle_fetch(cfg, state, ld, f, fetch_request(fol))
    return state.with_broker(f, follower_handle_fetch_response(fol, resp))


def fetch_answered(cfg: Config, f: int, fol: Broker, ld: int, lead: Broker) -> bool:
    """The follower fetches from the leader it knows, which leads in the follower's epoch.
    Otherwise NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH: nothing changes."""
    return (fol.alive and fol.leader == ld and ld != f and not fol.truncating
            and lead.alive and lead.leader == ld and not epoch_fenced(cfg, lead, fol.epoch))


def fetch_request(fol: Broker) -> FetchRequest:
    return FetchRequest(fol.leo, fol.last_epoch(), fol.epoch, fol.bepoch)


def leader_handle_fetch(cfg: Config, state: State, ld: int, f: int, req: FetchRequest):
    """The leader's side of Fetch: check divergence, learn the follower's LEO, maybe advance the HW.
    It reads the leader, the request and (through the HW advance) the ghost, nothing else."""
    lead = state.broker(ld)
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
    views, vbepochs = list(lead.views), list(lead.vbepochs)
    views[f - 1] = fetch_offset          # learned from the request, never from the response
    vbepochs[f - 1] = req.bepoch         # KIP-903: the fetch names the follower's broker epoch
    lead = replace(lead, views=tuple(views), vbepochs=tuple(vbepochs))
    state = advance_leader_hw(cfg, state.with_broker(ld, lead), ld)
    lead = state.broker(ld)
    return state, FetchResponse(ld, lead.epoch, fetch_offset, records=lead.log[fetch_offset:fetch_offset + FETCH_MAX_RECORDS], hw=lead.hw)


def follower_handle_fetch_response(fol: Broker, resp: FetchResponse) -> Broker:
    """The follower's side of Fetch: truncate to the divergence point, or append and take the HW."""
    if resp.diverging is not None:
        offset, _done = truncation_offset(fol.cache, fol.leo, fol.hw, *resp.diverging)
        log, cache = truncate(fol.log, fol.cache, offset)
        return replace(fol, log=log, cache=cache, hw=min(fol.hw, len(log)), stalled=False)
    log, cache = append(fol.log, fol.cache, resp.records)
    return replace(fol, log=log, cache=cache, hw=min(resp.hw, len(log)), stalled=False)


def offsets_for_leader_epoch(cfg: Config, state: State, a: OffsetsForLeaderEpoch) -> Optional[State]:
    """KIP-101: a new follower asks where its last epoch ends on the leader and truncates there.

    Under KIP-279 it compares the epoch the leader answered for with its own and asks again
    until they agree; before it, one answer is taken as final.
    """
    f, ld = a.follower, a.leader
    fol = state.broker(f)
    if not fol.alive or not fol.truncating or fol.leader != ld or ld == f:
        return None
    lead = state.broker(ld)
    if not state.leads(ld) or epoch_fenced(cfg, lead, fol.epoch):
        return None
    epoch, end = end_offset_for_epoch(lead.cache, lead.leo, fol.last_epoch())
    if cfg.rule("truncation") == "leader_epoch_kip279":
        offset, done = truncation_offset(fol.cache, fol.leo, fol.hw, epoch, end)
    elif end == UNDEFINED:
        offset, done = min(fol.hw, fol.leo), True     # no epoch to ask about: fall back to the HW
    else:
        offset, done = min(end, fol.leo), True
    log, cache = truncate(fol.log, fol.cache, offset)
    fol = replace(fol, log=log, cache=cache, hw=min(fol.hw, len(log)), truncating=not done)
    return state.with_broker(f, fol)


def replica_stall(cfg: Config, state: State, a: ReplicaStall) -> Optional[State]:
    """A follower in the ISR goes quiet for longer than replica.lag.time.max.ms; its next fetch ends it.

    Only useful to the search while an ISR shrink can still happen, so it waits on that budget.
    """
    f = a.follower
    fol = state.broker(f)
    if (not fol.alive or fol.stalled or fol.leader in (NO_LEADER, f)
            or not state.controller.isr & bit(f) or state.budget.shrinks >= cfg.max_isr_shrinks):
        return None
    return state.with_broker(f, replace(fol, stalled=True))
