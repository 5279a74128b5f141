"""The broker lifecycle: crash, session timeout, restart and re-registration, fencing and
unfencing (BrokerLifecycleManager on the broker; on the controller ClusterControlManager.
registerBroker, BrokerHeartbeatManager and ReplicationControlManager.maybeFenceOneStaleBroker).

A crashed broker stays registered until its session times out (broker.session.timeout.ms,
9 s by default). The controller learns of a crash from nothing but missing heartbeats:
BrokerHeartbeatManager.hasValidSession holds while lastContactNs + sessionTimeoutNs is not
past, and QuorumController.rescheduleMaybeFenceStaleBrokers schedules maybeFenceOneStaleBroker
for the moment the oldest session ends; it fences the broker (handleBrokerFenced: out of every
ISR, leaders re-elected). So BrokerCrash changes the broker alone and BrokerSessionTimeout is
the controller's fence. In between, the ISR still names a dead broker and a dead leader still
leads at the controller: the partition is offline in practice, and no metadata tells anyone.

A clean shutdown here is a process exit without controlled shutdown (controlled.shutdown.
enable=false; spec/controlled_shutdown.py has the controlled one): it too is noticed only when
the session times out.

The restart waits for the fence. ClusterControlManager.registerBroker refuses a new
incarnation with DuplicateBrokerRegistrationException while the old incarnation's session is
valid, and BrokerLifecycleManager retries until it is accepted; the fence is scheduled for
the instant the session expires, so the accepted registration comes after it. (A registration
landing after the expiry but before the controller's queue ran the fence is a race the model
leaves out.)

What the window costs: the default check (--rf 3 --minisr 2) grows from 262,297 to 279,259
distinct states (+6.5%; 981,157 to 1,033,925 generated; depth 27 to 28). While a crashed
broker waits for its fence the others go on producing, fetching, stalling and shrinking the
ISR around it. No budget is needed: the fence fires once per crash.

The HW after a hard crash comes from the checkpoint file, not from memory. ReplicaManager.
checkpointHighWatermarks writes every partition's HW every replica.high.watermark.checkpoint.
interval.ms (5 s), and ReplicaManager.shutdown writes it once more; on restart Partition.
createLog reads it back and UnifiedLog.updateHighWatermark caps it at the log end. So a broker
keeps checkpoint_hw, CheckpointHighWatermarks writes it (lagging: any time after the HW moved),
a clean shutdown writes it, and a hard crash restarts with min(checkpoint_hw, surviving log
end). The restart counts as a checkpoint: the thread starts with the first metadata a broker
applies, with no initial delay (BrokerMetadataPublisher.finishInitializingReplicaManager).

Only a hard crash reads the checkpoint. So the step is left out once no hard crash is left in
the budget, and the hard crash that spends the last one sets every checkpoint to 0: states
that differ only in checkpoints nobody will read are one state. What it costs: the default
check grows from 279,259 to 332,445 distinct states (+19%; 1,033,925 to 1,405,325 generated).
Without that reduction, at --max-records 1 (47,377 states before), the step always enabled
gives 99,882 states, and leaving it out after the last hard crash but keeping the values
78,307; with it, 50,405. (Each figure was measured when its change landed; the default check's
count today is pinned in tests/pins.py.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.controller import fence, register, unfence
from kafkamc.spec.log import truncate
from kafkamc.spec.metadata import MetadataUpdate, metadata_update
from kafkamc.spec.reassignment import REASSIGNMENTS
from kafkamc.spec.state import Broker, Budget, Controller, State, bit, replace
from kafkamc.spec.wording import Told, Wording

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
    """The broker process dies. The controller does not know yet: the broker stays
    registered, in the ISR and maybe the leader, until BrokerSessionTimeout.

    keep = None is a clean crash. Otherwise only the first `keep` records of the log
    were flushed to disk and survive (page cache lost).
    """

    broker: int
    keep: int | None = None


@dataclass(frozen=True)
class BrokerSessionTimeout:
    """The controller fences a dead broker whose session timed out (maybeFenceOneStaleBroker):
    out of the ISR (into the ELR below min ISR), and a new leader if it led."""

    broker: int


@dataclass(frozen=True)
class CheckpointHighWatermarks:
    """The broker writes its HW to the checkpoint file (ReplicaManager.checkpointHighWatermarks,
    every replica.high.watermark.checkpoint.interval.ms)."""

    broker: int


@dataclass(frozen=True)
class BrokerRestart:
    """The broker restarts, recovers its log, re-registers with a new broker epoch, once the
    controller has fenced its previous incarnation."""

    broker: int


@dataclass(frozen=True)
class ControllerFenceBroker:
    """The controller fences a live broker that missed heartbeats; it may not know yet."""

    broker: int


@dataclass(frozen=True)
class BrokerHeartbeat:
    """A fenced but live broker heartbeats again and the controller unfences it."""

    broker: int


def matters(cfg: Config, c: Controller, u: Budget, b: int) -> bool:
    """Whether broker b's faults and moves matter to the partition: it hosts a replica, or a
    reassignment may still make it one (a broker outside the replica set is otherwise inert)."""
    return b in c.replicas or cfg.allows(u, REASSIGNMENTS)


# Each step's guard, which its candidates and its step share (one home per guard).


def may_restart(c: Controller, br: Broker, b: int) -> bool:
    """b is down and the controller has fenced its previous incarnation."""
    return not br.alive and not c.registered & bit(b)


def session_expires(c: Controller, br: Broker, b: int) -> bool:
    """b is down and still registered: its session will time out."""
    return not br.alive and bool(c.registered & bit(b))


def may_crash(cfg: Config, br: Broker, u: Budget, keep: int | None) -> bool:
    """b is up and a crash of that kind is left; a hard crash keeps a prefix of its log."""
    if not br.alive:
        return False
    if keep is None:
        return cfg.allows(u, CRASHES)
    return cfg.allows(u, UNCLEAN_CRASHES) and 0 <= keep <= br.leo


def may_fence(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> bool:
    """b is up and registered, and a fence is left."""
    return br.alive and bool(c.registered & bit(b)) and cfg.allows(u, FENCES)


def may_heartbeat(c: Controller, br: Broker, b: int) -> bool:
    """b is up and fenced: its next heartbeat unfences it."""
    return br.alive and not c.registered & bit(b)


def may_checkpoint(cfg: Config, br: Broker, u: Budget) -> bool:
    """The HW moved since the last checkpoint, and a hard crash that would read it is left."""
    return br.alive and br.checkpoint_hw != br.hw and cfg.allows(u, UNCLEAN_CRASHES)


def restart_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (BrokerRestart(b),) if may_restart(c, br, b) else ()


def session_timeout_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (BrokerSessionTimeout(b),) if session_expires(c, br, b) else ()


def crash_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> list[BrokerCrash]:
    if b not in c.replicas:  # hosts nothing: it matters only as a reassignment's target (spec/reassignment.py)
        keeps: list[int | None] = [None] if cfg.allows(u, REASSIGNMENTS) else []
    else:
        keeps = [None, *range(br.leo + 1)]
    return [BrokerCrash(b, keep) for keep in keeps if may_crash(cfg, br, u, keep)]


def fence_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    # `matters` is a reduction of the search, not a guard: a broker that hosts nothing is inert.
    return (ControllerFenceBroker(b),) if may_fence(cfg, c, br, u, b) and matters(cfg, c, u, b) else ()


def heartbeat_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (BrokerHeartbeat(b),) if may_heartbeat(c, br, b) else ()


def checkpoint_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (CheckpointHighWatermarks(b),) if may_checkpoint(cfg, br, u) else ()


def checkpoint_high_watermarks(cfg: Config, state: State, a: CheckpointHighWatermarks) -> State | None:
    """The periodic checkpoint writes the HW in memory, whichever way it moved since the last one
    (a follower's HW can go down when it truncates)."""
    b = a.broker
    br = state.broker(b)
    if not may_checkpoint(cfg, br, state.budget):
        return None
    return state.with_broker(b, replace(br, checkpoint_hw=br.hw))


def forget_checkpoint(br: Broker) -> Broker:
    """No hard crash is left: no checkpoint will be read again, so none is kept (0). A
    reduction of the model, not Kafka's behaviour: the files stay, unread."""
    return replace(br, checkpoint_hw=0) if br.checkpoint_hw else br


def forget_checkpoints(state: State) -> State:
    """forget_checkpoint on every broker, each on its own (State.map_brokers)."""
    return state.map_brokers(forget_checkpoint)


def broker_crash(cfg: Config, state: State, a: BrokerCrash) -> State | None:
    """keep = None: a clean shutdown, the log flushed whole and the HW checkpointed. Otherwise a
    hard crash (kill -9, power loss): only the first `keep` records had reached disk, the HW
    restarts from the last checkpoint, and the next registration tells the controller the
    shutdown was unclean."""
    b = a.broker
    br = state.broker(b)
    budget = state.budget
    if not may_crash(cfg, br, budget, a.keep):
        return None
    if a.keep is None:
        budget = budget.spend(CRASHES.name)
        log, cache, hw = br.log, br.cache, br.hw  # ReplicaManager.shutdown checkpoints the HW
    else:
        budget = budget.spend(UNCLEAN_CRASHES.name)
        log, cache = truncate(br.log, br.cache, a.keep)
        hw = min(br.checkpoint_hw, a.keep)  # the in-memory HW is lost; the file's is read back
        if not cfg.allows(budget, UNCLEAN_CRASHES):
            state = forget_checkpoints(state)
    # The controller still counts the broker as registered until its session times out.
    dead = stopped(cfg, budget, replace(br, log=log, cache=cache, hw=hw), clean=a.keep is None)
    return replace(state.with_broker(b, dead), budget=budget)


def stopped(cfg: Config, budget: Budget, br: Broker, clean: bool = True) -> Broker:
    """The broker after its process ended: the log, cache and HW on disk (as `br` has them),
    and nothing else in memory; the metadata is replayed on restart. What the restart will read
    (the checkpoint clipped to the log end) is kept as both the HW and the checkpoint, the
    latter only while a hard crash may still read one."""
    ckpt = br.hw if cfg.allows(budget, UNCLEAN_CRASHES) else 0
    return Broker(alive=False, bepoch=br.bepoch, log=br.log, cache=br.cache, hw=br.hw, clean=clean, checkpoint_hw=ckpt)


def broker_session_timeout(cfg: Config, state: State, a: BrokerSessionTimeout) -> State | None:
    """ReplicationControlManager.maybeFenceOneStaleBroker: the broker's session ended
    (BrokerHeartbeatManager.findOneStaleBroker) and handleBrokerFenced fences it, takes it out
    of the ISR and re-elects where it led. Once per crash: the broker is dead and registered."""
    b = a.broker
    if not session_expires(state.controller, state.broker(b), b):
        return None
    return fence(cfg, state, b)


def broker_restart(cfg: Config, state: State, a: BrokerRestart) -> State | None:
    """Register with a new broker epoch; the broker replays the metadata log before it serves,
    so it acts on the controller's latest metadata at once. Refused while the previous
    incarnation is registered (DuplicateBrokerRegistrationException: its session is valid)."""
    b = a.broker
    br = state.broker(b)
    if not may_restart(state.controller, br, b):
        return None
    bepoch = state.controller.bepochs[b - 1] + 1
    hw = min(br.hw, br.leo)  # UnifiedLog.updateHighWatermark: the checkpoint, at most the log end
    ckpt = hw if cfg.allows(state.budget, UNCLEAN_CRASHES) else 0
    fresh = Broker(alive=True, bepoch=bepoch, log=br.log, cache=br.cache, hw=hw, checkpoint_hw=ckpt)
    registered = register(cfg, state.with_broker(b, fresh), b, br.clean)
    return metadata_update(cfg, registered, MetadataUpdate(b)) or registered


def controller_fence_broker(cfg: Config, state: State, a: ControllerFenceBroker) -> State | None:
    b = a.broker
    if not may_fence(cfg, state.controller, state.broker(b), state.budget, b):
        return None
    return fence(cfg, replace(state, budget=state.budget.spend(FENCES.name)), b)


def broker_heartbeat(cfg: Config, state: State, a: BrokerHeartbeat) -> State | None:
    b = a.broker
    if not may_heartbeat(state.controller, state.broker(b), b):
        return None
    return unfence(cfg, state, b)


# ---------------------------------------------------------------- how a trace tells them


def crash_html(a: BrokerCrash, state: State, prev: State, draw) -> None:
    label = (
        "crash (clean shutdown)"
        if a.keep is None
        else f"hard crash: {a.keep} flushed record{'' if a.keep == 1 else 's'} survive"
    )
    draw.mark(draw.lane(a.broker), label, "crash")


def crash_event(cfg: Config, a: BrokerCrash, prev: State, state: State, say) -> tuple[str, int]:
    """The crash itself (the controller learns nothing of it: BrokerSessionTimeout does), and
    its lost log tail, which no truncation sentence repeats."""
    b = a.broker
    if a.keep is None:
        return f"broker {b} shut down cleanly, its log flushed", b
    lost = say.lost(prev.broker(b).log, state.broker(b).log)
    if not lost:
        text = f"broker {b} hard-crashed (kill -9, power loss) with its whole log flushed"
    else:
        kept = f"; the {a.keep} record(s) before it had been flushed" if a.keep else ""
        text = (
            f"broker {b} hard-crashed (kill -9, power loss) and lost the unflushed tail of its log: "
            f"{say.entries(prev.ghost, lost)}{kept}"
        )
    return text + _checkpoint_lag(a.keep, prev.broker(b), state.broker(b)), b


def _checkpoint_lag(keep: int, before: Broker, after: Broker) -> str:
    """HW progress a hard crash loses because the checkpoint file lagged the HW in memory; ""
    when the checkpoint was current (the surviving log end alone caps the HW, if anything)."""
    if after.hw >= min(before.hw, keep):
        return ""
    return (
        f"; its HW checkpoint (replication-offset-checkpoint) still said {before.checkpoint_hw}, behind "
        f"its HW {before.hw} in memory, so it will restart with HW {after.hw}"
    )


def session_timeout_html(a: BrokerSessionTimeout, state: State, prev: State, draw) -> None:
    # The controller's own step: the dead broker hears nothing.
    draw.mark("controller", f"session timeout: fence broker {a.broker}", "fence")


def session_timeout_told(
    cfg: Config, a: BrokerSessionTimeout, before: Controller, state: State, told: bool, say
) -> Told:
    return Told(f"broker {a.broker}'s session timed out (broker.session.timeout.ms)", ["fenced it"])


def checkpoint_html(a: CheckpointHighWatermarks, state: State, prev: State, draw) -> None:
    hw = state.broker(a.broker).checkpoint_hw
    draw.mark(draw.lane(a.broker), f"HW {hw} checkpointed", "checkpoint")


def restart_html(a: BrokerRestart, state: State, prev: State, draw) -> None:
    draw.mark(draw.lane(a.broker), "restart", "restart")
    draw.msg(draw.lane(a.broker), "controller", f"register, broker epoch {state.broker(a.broker).bepoch}")


def restart_truncation(cfg: Config, a: BrokerRestart, b: int, prev: State, state: State) -> tuple[str, str]:
    br = state.broker(b)
    who = f"broker {b} restarted (broker epoch {br.bepoch}), became follower of {br.leader} and"
    return who, f"its own HW {br.hw} (the rule before KIP-101)"


def restart_told(cfg: Config, a: BrokerRestart, before: Controller, state: State, told: bool, say) -> Told:
    """The registration (unless a truncation sentence told the restart), and KAFKA-15586's drop."""
    b, after = a.broker, state.controller
    br = state.broker(b)
    cause = "" if told else f"broker {b} restarted (broker epoch {br.bepoch}) with {say.log(br)}"
    if not (before.isr | before.elr) & ~(after.isr | after.elr) & bit(b):
        return Told(cause)
    lists = " and ".join(n for n, m in (("ISR", before.isr), ("ELR", before.elr)) if m & bit(b))
    return Told(cause, [], [f"dropped it from the {lists} after its unclean shutdown (KAFKA-15586)"])


def fence_html(a: ControllerFenceBroker, state: State, prev: State, draw) -> None:
    draw.mark("controller", f"fences broker {a.broker}", "fence")
    draw.mark(draw.lane(a.broker), "fenced (it may not know yet)", "fence")


def fence_told(cfg: Config, a: ControllerFenceBroker, before: Controller, state: State, told: bool, say) -> Told:
    return Told("", [f"fenced broker {a.broker} though it is still running (missed heartbeats)"])


def heartbeat_html(a: BrokerHeartbeat, state: State, prev: State, draw) -> None:
    draw.msg(draw.lane(a.broker), "controller", "heartbeat: unfenced")


def heartbeat_told(cfg: Config, a: BrokerHeartbeat, before: Controller, state: State, told: bool, say) -> Told:
    return Told("", [f"unfenced broker {a.broker} on its heartbeat"])


CRASH_WORDS = Wording(html=crash_html, event=crash_event)
SESSION_TIMEOUT_WORDS = Wording(html=session_timeout_html, controller=session_timeout_told)
CHECKPOINT_WORDS = Wording(html=checkpoint_html)
RESTART_WORDS = Wording(html=restart_html, truncation=restart_truncation, controller=restart_told)
FENCE_WORDS = Wording(html=fence_html, controller=fence_told)
HEARTBEAT_WORDS = Wording(html=heartbeat_html, controller=heartbeat_told)
