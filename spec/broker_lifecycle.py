"""The broker lifecycle: crash, restart and re-registration, fencing and unfencing
(BrokerLifecycleManager on the broker; ReplicationControlManager.registerBroker,
fenceStaleBroker and the heartbeat handling on the controller).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.controller import fence, register, unfence
from kafkamc.spec.log import truncate
from kafkamc.spec.metadata import MetadataUpdate, metadata_update
from kafkamc.spec.state import Broker, Budget, Controller, State, bit, replace

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

# Renamed in Kafka's words (--max-crashes, --max-unclean-crashes read like unclean election);
# the budget counters keep their names so that saved traces still replay.
CRASHES = Bound(
    "crashes",
    0,
    "clean shutdowns (the whole log flushed to disk and marked clean)",
    setting_name="clean_shutdowns",
    aliases=("crashes",),
)
UNCLEAN_CRASHES = Bound(
    "unclean_crashes",
    1,
    "hard crashes (kill -9, power loss) that lose the unflushed log tail",
    setting_name="hard_crashes",
    aliases=("unclean_crashes",),
)
FENCES = Bound("fences", 0, "live brokers fenced by the controller (makes zombie leaders)")


@dataclass(frozen=True)
class BrokerCrash:
    """The broker process dies; the controller fences it and re-elects if it led.

    keep = None is a clean crash. Otherwise only the first `keep` records of the log
    were flushed to disk and survive (page cache lost).
    """

    broker: int
    keep: int | None = None


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


def restart_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return () if br.alive else (BrokerRestart(b),)


def crash_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> list[BrokerCrash]:
    if not br.alive:
        return []
    out = [BrokerCrash(b)] if cfg.allows(u, CRASHES) else []
    if cfg.allows(u, UNCLEAN_CRASHES):
        out += [BrokerCrash(b, keep) for keep in range(br.leo + 1)]
    return out


def fence_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    if br.alive and c.registered & bit(b) and cfg.allows(u, FENCES):
        return (ControllerFenceBroker(b),)
    return ()


def heartbeat_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (BrokerHeartbeat(b),) if br.alive and not c.registered & bit(b) else ()


def broker_crash(cfg: Config, state: State, a: BrokerCrash) -> State | None:
    """keep = None: a clean shutdown, the log flushed whole. Otherwise a hard crash (kill -9,
    power loss): only the first `keep` records had reached disk, and the next registration
    tells the controller the shutdown was unclean."""
    b = a.broker
    br = state.broker(b)
    budget = state.budget
    if not br.alive:
        return None
    if a.keep is None:
        if not cfg.allows(budget, CRASHES):
            return None
        budget = budget.spend(CRASHES.name)
        log, cache, hw = br.log, br.cache, br.hw
    else:
        if not cfg.allows(budget, UNCLEAN_CRASHES) or not 0 <= a.keep <= br.leo:
            return None
        budget = budget.spend(UNCLEAN_CRASHES.name)
        log, cache = truncate(br.log, br.cache, a.keep)
        hw = min(br.hw, a.keep)
    # Everything else in memory is gone; the metadata is replayed on restart.
    dead = Broker(alive=False, bepoch=br.bepoch, log=log, cache=cache, hw=hw, clean=a.keep is None)
    return fence(cfg, replace(state.with_broker(b, dead), budget=budget), b)


def broker_restart(cfg: Config, state: State, a: BrokerRestart) -> State | None:
    """Register with a new broker epoch; the broker replays the metadata log before it serves,
    so it acts on the controller's latest metadata at once."""
    b = a.broker
    br = state.broker(b)
    if br.alive:
        return None
    bepoch = state.controller.bepochs[b - 1] + 1
    fresh = Broker(alive=True, bepoch=bepoch, log=br.log, cache=br.cache, hw=min(br.hw, br.leo))
    registered = register(cfg, state.with_broker(b, fresh), b, br.clean)
    return metadata_update(cfg, registered, MetadataUpdate(b)) or registered


def controller_fence_broker(cfg: Config, state: State, a: ControllerFenceBroker) -> State | None:
    b = a.broker
    if not state.broker(b).alive or not state.controller.registered & bit(b):
        return None
    if not cfg.allows(state.budget, FENCES):
        return None
    return fence(cfg, replace(state, budget=state.budget.spend(FENCES.name)), b)


def broker_heartbeat(cfg: Config, state: State, a: BrokerHeartbeat) -> State | None:
    b = a.broker
    if not state.broker(b).alive or state.controller.registered & bit(b):
        return None
    return unfence(cfg, state, b)
