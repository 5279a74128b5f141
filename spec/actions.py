"""Protocol steps: one pure function per Kafka RPC or event, guard first, then effect.

Each step function takes (config, state, action) and returns the next state, or None
when the guard does not hold. Actions are frozen dataclasses, so a trace is data that
prints, compares and replays.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from kafkamc.spec.config import Config
from kafkamc.spec.log import UNDEFINED, append, assign_epoch, end_offset_for_epoch, truncate, truncation_offset
from kafkamc.spec.state import (
    NO_LEADER, UNKNOWN, AlterPartitionResponse, Broker, FetchResponse, State, bit, members, size,
)


# ---------------------------------------------------------------- actions as data

@dataclass(frozen=True)
class Produce:
    """A producer sends record `record` to the broker it believes leads."""
    leader: int
    record: int


@dataclass(frozen=True)
class Fetch:
    """The follower fetches from the leader it knows, from its LEO with its last fetched epoch.

    The leader records the follower's position from the request and answers with records
    and its HW, or with a diverging epoch; the follower appends or truncates.
    """
    follower: int
    leader: int


@dataclass(frozen=True)
class AlterPartition:
    """The leader asks the controller to change the ISR; the controller validates and decides."""
    leader: int
    isr: tuple


@dataclass(frozen=True)
class HandleAlterPartitionResponse:
    """The leader commits (or rolls back) its pending ISR change."""
    leader: int


@dataclass(frozen=True)
class MetadataUpdate:
    """The broker applies the controller's latest metadata: becomes leader or follower."""
    broker: int


@dataclass(frozen=True)
class BrokerCrash:
    """The broker process dies; the controller fences it and re-elects if it led.

    keep = None is a clean crash. Otherwise only the first `keep` records of the log
    were flushed to disk and survive (page cache lost).
    """
    broker: int
    keep: Optional[int] = None


@dataclass(frozen=True)
class BrokerRestart:
    """The broker restarts, recovers its log, re-registers with a new broker epoch."""
    broker: int


@dataclass(frozen=True)
class ControllerFenceBroker:
    """The controller fences a live broker that missed heartbeats; it may not know yet."""
    broker: int


@dataclass(frozen=True)
class BrokerHeartbeat:
    """A fenced but live broker heartbeats again and the controller unfences it."""
    broker: int


ACTION_TYPES = (
    Produce, Fetch, AlterPartition, HandleAlterPartitionResponse,
    MetadataUpdate, BrokerCrash, BrokerRestart, ControllerFenceBroker, BrokerHeartbeat,
)


# ---------------------------------------------------------------- shared effects

def advance_leader_hw(cfg: Config, state: State, b: int) -> State:
    """maybeIncrementLeaderHW: HW = min LEO over the maximal ISR, only at or above min ISR.

    Produce requests waiting in purgatory are answered once the HW passes them.
    """
    br = state.broker(b)
    if size(br.isr) < cfg.effective_minisr:
        return state
    maximal = br.isr | br.pending
    new_hw = br.leo
    for f in members(maximal):
        if f != b:
            new_hw = min(new_hw, br.views[f - 1])
    if new_hw <= br.hw:
        return state
    acked = state.ghost.acked
    waiting = []
    for offset, rec in br.purgatory:
        if offset < new_hw:
            if size(maximal) >= cfg.effective_minisr:
                acked |= 1 << (rec - 1)
            # else: NOT_ENOUGH_REPLICAS_AFTER_APPEND, the producer is told the write failed
        else:
            waiting.append((offset, rec))
    br = replace(br, hw=new_hw, purgatory=tuple(waiting))
    nxt = state.with_broker(b, br)
    if acked != state.ghost.acked:
        nxt = replace(nxt, ghost=replace(nxt.ghost, acked=acked))
    return nxt


def _as_follower(br: Broker) -> Broker:
    """Drop leader-only state; requests in purgatory fail with NOT_LEADER_OR_FOLLOWER."""
    return replace(br, start=0, views=(), pending=0, purgatory=(), alter=None)


def _elect(cfg: Config, state: State) -> list[State]:
    """Controller elects a leader for a leaderless partition; several results for unclean choices.

    Clean election takes the first registered ISR member in assignment order. If none is
    available and unclean election is on, any registered replica may be chosen, and the
    ISR becomes that replica alone.
    """
    c = state.controller
    if c.leader != NO_LEADER:
        return [state]
    clean = [b for b in members(c.isr) if c.registered & bit(b)]
    if clean:
        choices = [(clean[0], c.isr)]
    elif cfg.unclean:
        choices = [(b, bit(b)) for b in members(c.registered)]
    else:
        return [state]          # offline: no eligible leader
    return [replace(state, controller=replace(c, leader=b, epoch=c.epoch + 1, isr=isr))
            for b, isr in choices]


def _partition_change(cfg: Config, state: State, c) -> list[State]:
    """Apply a controller change, elect if leaderless, bump the partition epoch once if anything moved."""
    before = state.controller
    out = []
    for s in _elect(cfg, replace(state, controller=c)):
        nc = s.controller
        if (nc.leader, nc.epoch, nc.isr) != (before.leader, before.epoch, before.isr):
            s = replace(s, controller=replace(nc, pepoch=before.pepoch + 1))
        out.append(s)
    return out


def _fence(cfg: Config, state: State, b: int) -> list[State]:
    """Controller-side fencing: unregister b, drop it from the ISR (never to empty), re-elect."""
    c = state.controller
    isr = c.isr & ~bit(b) if c.isr != bit(b) else c.isr
    leader = NO_LEADER if c.leader == b else c.leader
    return _partition_change(cfg, state, replace(c, registered=c.registered & ~bit(b), isr=isr, leader=leader))


# ---------------------------------------------------------------- producer

def produce(cfg: Config, state: State, a: Produce) -> Optional[State]:
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
    else:
        br = replace(br, purgatory=br.purgatory + ((offset, a.record),))
    nxt = replace(state.with_broker(b, br), ghost=ghost,
                  budget=replace(state.budget, records=state.budget.records + 1))
    return advance_leader_hw(cfg, nxt, b)


# ---------------------------------------------------------------- replication

def fetch(cfg: Config, state: State, a: Fetch) -> Optional[State]:
    f, ld = a.follower, a.leader
    fol = state.broker(f)
    if not fol.alive or fol.leader != ld or ld == f:
        return None
    lead = state.broker(ld)
    if not state.leads(ld) or lead.epoch != fol.epoch:
        return None             # NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH: nothing changes
    state, resp = leader_handle_fetch(cfg, state, ld, f, fol.leo, fol.last_epoch())
    return state.with_broker(f, follower_handle_fetch_response(fol, resp))


def leader_handle_fetch(cfg: Config, state: State, ld: int, f: int, fetch_offset: int, last_epoch: int):
    """The leader's side of Fetch: check divergence, learn the follower's LEO, maybe advance the HW."""
    lead = state.broker(ld)
    if last_epoch != UNDEFINED:
        epoch, end = end_offset_for_epoch(lead.cache, lead.leo, last_epoch)
        if end < fetch_offset or epoch < last_epoch:
            # Diverging: the leader does not record the follower's offset.
            return state, FetchResponse(ld, lead.epoch, fetch_offset, hw=lead.hw, diverging=(epoch, end))
    views = list(lead.views)
    views[f - 1] = fetch_offset          # learned from the request, never from the response
    state = advance_leader_hw(cfg, state.with_broker(ld, replace(lead, views=tuple(views))), ld)
    lead = state.broker(ld)
    return state, FetchResponse(ld, lead.epoch, fetch_offset, records=lead.log[fetch_offset:], hw=lead.hw)


def follower_handle_fetch_response(fol: Broker, resp: FetchResponse) -> Broker:
    """The follower's side of Fetch: truncate to the divergence point, or append and take the HW."""
    if resp.diverging is not None:
        offset, _done = truncation_offset(fol.cache, fol.leo, fol.hw, *resp.diverging)
        log, cache = truncate(fol.log, fol.cache, offset)
        return replace(fol, log=log, cache=cache, hw=min(fol.hw, len(log)))
    log, cache = append(fol.log, fol.cache, resp.records)
    return replace(fol, log=log, cache=cache, hw=min(resp.hw, len(log)))


# ---------------------------------------------------------------- ISR changes

def alter_partition(cfg: Config, state: State, a: AlterPartition) -> Optional[State]:
    b = a.leader
    br = state.broker(b)
    if not state.leads(b) or br.pending or br.alter is not None:
        return None
    proposed = 0
    for m in a.isr:
        proposed |= bit(m)
    removed, added = br.isr & ~proposed, proposed & ~br.isr
    if proposed & bit(b) == 0 or size(removed) + size(added) != 1:
        return None
    budget = state.budget
    if removed:
        f = members(removed)[0]
        if br.views[f - 1] >= br.leo or budget.shrinks >= cfg.max_isr_shrinks:
            return None         # only a follower that is behind the leader's LEO can be dropped
        budget = replace(budget, shrinks=budget.shrinks + 1)
    else:
        f = members(added)[0]
        if br.views[f - 1] < br.hw or br.views[f - 1] < br.start:
            return None         # not caught up to the HW and to this epoch's start offset
    c = state.controller
    if br.epoch != c.epoch:
        resp = AlterPartitionResponse(br.epoch, False, 0, 0, "FENCED_LEADER_EPOCH")
    elif br.pepoch != c.pepoch:
        resp = AlterPartitionResponse(br.epoch, False, 0, 0, "INVALID_UPDATE_VERSION")
    elif added and not c.registered & added:
        resp = AlterPartitionResponse(br.epoch, False, 0, 0, "INELIGIBLE_REPLICA")
    else:
        c = replace(c, isr=proposed, pepoch=c.pepoch + 1)
        resp = AlterPartitionResponse(br.epoch, True, proposed, c.pepoch)
    nxt = state.with_broker(b, replace(br, pending=proposed, alter=resp))
    return replace(nxt, controller=c, budget=budget)


def handle_alter_partition_response(cfg: Config, state: State, a: HandleAlterPartitionResponse) -> Optional[State]:
    b = a.leader
    br = state.broker(b)
    resp = br.alter
    if not br.alive or resp is None:
        return None
    br = replace(br, alter=None, pending=0)
    if resp.ok and br.leader == b and resp.epoch == br.epoch and resp.pepoch > br.pepoch:
        br = replace(br, isr=resp.isr, pepoch=resp.pepoch)
    nxt = state.with_broker(b, br)
    return advance_leader_hw(cfg, nxt, b) if br.leader == b else nxt


# ---------------------------------------------------------------- metadata propagation

def metadata_update(cfg: Config, state: State, a: MetadataUpdate) -> Optional[State]:
    b = a.broker
    br = state.broker(b)
    c = state.controller
    if not br.alive or not metadata_stale(state, b):
        return None
    if c.leader == b:
        if br.leader == b and br.epoch == c.epoch:
            # Same leadership, newer ISR: take it as committed; a late response is then stale.
            br = replace(br, isr=c.isr, pepoch=c.pepoch, pending=0)
        else:
            # makeLeader: the new epoch starts at our LEO; follower positions are unknown.
            br = _as_follower(br)
            br = replace(br, leader=b, epoch=c.epoch, pepoch=c.pepoch, isr=c.isr, start=br.leo,
                         cache=assign_epoch(br.cache, c.epoch, br.leo), views=(UNKNOWN,) * cfg.rf)
        return advance_leader_hw(cfg, state.with_broker(b, br), b)
    # makeFollower: no truncation here; divergence is found through fetch. A follower keeps
    # only the leader and its epoch: the ISR matters to a leader alone.
    br = _as_follower(br)
    return state.with_broker(b, replace(br, leader=c.leader, epoch=c.epoch, pepoch=0, isr=0))


def metadata_stale(state: State, b: int) -> bool:
    """Whether the controller's metadata holds news that broker b acts on."""
    br, c = state.broker(b), state.controller
    if c.leader == b:
        return (br.leader, br.epoch, br.pepoch, br.isr) != c.meta()
    return (br.leader, br.epoch) != (c.leader, c.epoch)


# ---------------------------------------------------------------- broker lifecycle

def broker_crash(cfg: Config, state: State, a: BrokerCrash) -> list[State]:
    b = a.broker
    br = state.broker(b)
    budget = state.budget
    if not br.alive:
        return []
    if a.keep is None:
        if budget.crashes >= cfg.max_crashes:
            return []
        budget = replace(budget, crashes=budget.crashes + 1)
        log, cache, hw = br.log, br.cache, br.hw
    else:
        if budget.unclean >= cfg.max_unclean_crashes or not 0 <= a.keep < br.leo:
            return []
        budget = replace(budget, unclean=budget.unclean + 1)
        log, cache = truncate(br.log, br.cache, a.keep)
        hw = min(br.hw, a.keep)
    # Everything else in memory is gone; the metadata is replayed on restart.
    dead = Broker(alive=False, bepoch=br.bepoch, log=log, cache=cache, hw=hw)
    nxt = replace(state.with_broker(b, dead), budget=budget)
    return _fence(cfg, nxt, b)


def broker_restart(cfg: Config, state: State, a: BrokerRestart) -> list[State]:
    """Register with a new broker epoch; the broker catches up on metadata before it serves."""
    b = a.broker
    br = state.broker(b)
    if br.alive:
        return []
    c = state.controller
    bepochs = list(c.bepochs)
    bepochs[b - 1] += 1
    c = replace(c, registered=c.registered | bit(b), bepochs=tuple(bepochs))
    fresh = Broker(alive=True, bepoch=bepochs[b - 1], log=br.log, cache=br.cache, hw=min(br.hw, br.leo))
    nxt = state.with_broker(b, fresh)
    return [_catch_up(cfg, s, b) for s in _partition_change(cfg, nxt, c)]


def _catch_up(cfg: Config, state: State, b: int) -> State:
    """A restarted broker has replayed the metadata log before it acts on it."""
    return metadata_update(cfg, state, MetadataUpdate(b)) or state


def controller_fence_broker(cfg: Config, state: State, a: ControllerFenceBroker) -> list[State]:
    b = a.broker
    if not state.broker(b).alive or not state.controller.registered & bit(b):
        return []
    if state.budget.fences >= cfg.max_fences:
        return []
    nxt = replace(state, budget=replace(state.budget, fences=state.budget.fences + 1))
    return _fence(cfg, nxt, b)


def broker_heartbeat(cfg: Config, state: State, a: BrokerHeartbeat) -> list[State]:
    b = a.broker
    c = state.controller
    if not state.broker(b).alive or c.registered & bit(b):
        return []
    return _partition_change(cfg, state, replace(c, registered=c.registered | bit(b)))
