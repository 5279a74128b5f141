"""Metadata propagation and the broker lifecycle: become leader or follower, crash, restart, fencing."""
from __future__ import annotations

from typing import Optional

from kafkamc.spec.actions import (
    BrokerCrash, BrokerHeartbeat, BrokerRestart, ControllerFenceBroker, MetadataUpdate,
)
from kafkamc.spec.config import Config
from kafkamc.spec.controller import fence, register, unfence
from kafkamc.spec.log import assign_epoch, truncate
from kafkamc.spec.replication import advance_leader_hw
from kafkamc.spec.state import UNKNOWN, Broker, Controller, State, bit, replace


def _as_follower(br: Broker) -> Broker:
    """Drop leader-only state; requests in purgatory fail with NOT_LEADER_OR_FOLLOWER."""
    return replace(br, start=0, views=(), vbepochs=(), pending=0, purgatory=(), alter=None)


def become_leader(cfg: Config, state: State, b: int) -> State:
    """makeLeader: the new epoch starts at our LEO; follower positions are unknown."""
    c = state.controller
    br = _as_follower(state.broker(b))
    cache = br.cache
    if cfg.rule("leader_epoch_cache") == "on_election":
        cache = assign_epoch(cache, c.epoch, br.leo)   # KAFKA-7415; before it, only an append records the epoch
    br = replace(br, leader=b, epoch=c.epoch, pepoch=c.pepoch, isr=c.isr,
                 start=br.leo, cache=cache, truncating=False,
                 stalled=False, views=(UNKNOWN,) * cfg.rf, vbepochs=(0,) * cfg.rf)
    return advance_leader_hw(cfg, state.with_broker(b, br), b)


def become_follower(cfg: Config, state: State, b: int) -> State:
    """makeFollower: follow the new leader; how divergence is found depends on the truncation rule.

    A follower keeps only the leader and its epoch: the ISR matters to a leader alone.
    """
    c = state.controller
    old = state.broker(b)
    br = replace(_as_follower(old), leader=c.leader, epoch=c.epoch, pepoch=0, isr=0)
    if old.leader == c.leader and cfg.rule("truncate_on") == "leader_change":
        return state.with_broker(b, br)       # before KAFKA-7164: same leader, new epoch, no truncation
    rule = cfg.rule("truncation")
    if rule == "hw":
        log, cache = truncate(br.log, br.cache, br.hw)      # before KIP-101: back to our own HW
        br = replace(br, log=log, cache=cache)
    elif rule in ("leader_epoch", "leader_epoch_kip279"):
        br = replace(br, truncating=True)                  # ask OffsetsForLeaderEpoch first
    return state.with_broker(b, br)


def metadata_update(cfg: Config, state: State, a: MetadataUpdate) -> Optional[State]:
    b = a.broker
    br = state.broker(b)
    c = state.controller
    if not br.alive or not metadata_stale(state, b):
        return None
    if c.leader != b:
        return become_follower(cfg, state, b)
    if br.leader == b and br.epoch == c.epoch:
        # Same leadership, newer ISR: take it as committed; a late response is then stale.
        br = replace(br, isr=c.isr, pepoch=c.pepoch, pending=0)
        return advance_leader_hw(cfg, state.with_broker(b, br), b)
    return become_leader(cfg, state, b)


def metadata_stale(state: State, b: int) -> bool:
    """Whether the controller's metadata holds news that broker b acts on."""
    return stale(state.controller, state.broker(b), b)


def stale(c: Controller, br: Broker, b: int) -> bool:
    if c.leader == b:
        return (br.leader, br.epoch, br.pepoch, br.isr) != c.meta()
    return (br.leader, br.epoch) != (c.leader, c.epoch)


def broker_crash(cfg: Config, state: State, a: BrokerCrash) -> Optional[State]:
    """keep = None: a clean shutdown, the log flushed whole. Otherwise a hard crash (kill -9,
    power loss): only the first `keep` records had reached disk, and the next registration
    tells the controller the shutdown was unclean."""
    b = a.broker
    br = state.broker(b)
    budget = state.budget
    if not br.alive:
        return None
    if a.keep is None:
        if budget.crashes >= cfg.max_crashes:
            return None
        budget = replace(budget, crashes=budget.crashes + 1)
        log, cache, hw = br.log, br.cache, br.hw
    else:
        if budget.unclean >= cfg.max_unclean_crashes or not 0 <= a.keep <= br.leo:
            return None
        budget = replace(budget, unclean=budget.unclean + 1)
        log, cache = truncate(br.log, br.cache, a.keep)
        hw = min(br.hw, a.keep)
    # Everything else in memory is gone; the metadata is replayed on restart.
    dead = Broker(alive=False, bepoch=br.bepoch, log=log, cache=cache, hw=hw, clean=a.keep is None)
    return fence(cfg, replace(state.with_broker(b, dead), budget=budget), b)


def broker_restart(cfg: Config, state: State, a: BrokerRestart) -> Optional[State]:
    """Register with a new broker epoch; the broker catches up on metadata before it serves."""
    b = a.broker
    br = state.broker(b)
    if br.alive:
        return None
    bepoch = state.controller.bepochs[b - 1] + 1
    fresh = Broker(alive=True, bepoch=bepoch, log=br.log, cache=br.cache, hw=min(br.hw, br.leo))
    return _catch_up(cfg, register(cfg, state.with_broker(b, fresh), b, br.clean), b)


def _catch_up(cfg: Config, state: State, b: int) -> State:
    """A restarted broker has replayed the metadata log before it acts on it."""
    return metadata_update(cfg, state, MetadataUpdate(b)) or state


def controller_fence_broker(cfg: Config, state: State, a: ControllerFenceBroker) -> Optional[State]:
    b = a.broker
    if not state.broker(b).alive or not state.controller.registered & bit(b):
        return None
    if state.budget.fences >= cfg.max_fences:
        return None
    return fence(cfg, replace(state, budget=replace(state.budget, fences=state.budget.fences + 1)), b)


def broker_heartbeat(cfg: Config, state: State, a: BrokerHeartbeat) -> Optional[State]:
    b = a.broker
    if not state.broker(b).alive or state.controller.registered & bit(b):
        return None
    return unfence(cfg, state, b)
