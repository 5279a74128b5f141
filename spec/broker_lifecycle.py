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

A clean shutdown here is a process exit without controlled shutdown (controlled.shutdown.enable=false;
spec/controlled_shutdown.py has the controlled one): it too is noticed only when the session times out.

Under incarnations=fenced_first (the default) the restart waits for the fence of the previous
incarnation, and registers, unfenced, in one step (ClusterControlManager.registerBroker refuses
a second registration while the old session is valid). Under incarnations=kraft_steps a
restart is the three steps Kafka takes (BrokerServer.startup, BrokerLifecycleManager):
BrokerRestart, the process start: the log is recovered, the metadata replayed and applied
(BrokerMetadataPublisher's first publish, ReplicaManager.applyDelta), and the fetchers started,
before and whatever the registration: such a fetch names broker epoch -1
(BrokerLifecycleManager._brokerEpoch until registered; the model's 0). The process answers no
request until it is unfenced (SocketServer.enableRequestProcessing comes last in startup), so
a partition its metadata shows it leading (its previous incarnation, not yet fenced) it leaves
alone. BrokerRegistration: ClusterControlManager.registerBroker, refused while the old session
is valid; with no clocks in the model that is "any time after the process started", which
covers both the refusals and an acceptance after the session expired but before the periodic
fence ran (seen on 4.4.0, docs/KAFKA.md). The previous incarnation is cleaned up and the new one
registered fenced (spec/controller.py, register). BrokerHeartbeat then unfences it.

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
from kafkamc.spec.controller import fence, register, register_fenced, unfence
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
    """The broker's process starts: it recovers its log, applies the metadata and fetches as a
    follower with broker epoch -1, before it registers (BrokerServer.startup)."""

    broker: int


@dataclass(frozen=True)
class BrokerRegistration:
    """The new process's BrokerRegistration is accepted (ClusterControlManager.registerBroker):
    the previous incarnation is cleaned up, and the broker gets a new epoch, fenced."""

    broker: int


@dataclass(frozen=True)
class ControllerFenceBroker:
    """The controller fences a live broker that missed heartbeats; it may not know yet."""

    broker: int


@dataclass(frozen=True)
class BrokerHeartbeat:
    """A fenced, live, registered broker heartbeats and the controller unfences it: a zombie
    back, or a new incarnation caught up with its registration
    (BrokerHeartbeatManager.calculateNextBrokerState, FENCED case)."""

    broker: int


def matters(cfg: Config, c: Controller, u: Budget, b: int) -> bool:
    """Whether broker b's faults and moves matter to the partition: it hosts a replica, or a
    reassignment may still make it one (a broker outside the replica set is otherwise inert)."""
    return b in c.replicas or cfg.allows(u, REASSIGNMENTS)


# Each step's guard, which its candidates and its step share (one home per guard).


def kraft_steps(cfg: Config) -> bool:
    """The incarnations rule: Kafka's restart steps, or the restart that waits for the fence."""
    return cfg.rule("incarnations") == "kraft_steps"


def may_restart(cfg: Config, c: Controller, br: Broker, b: int) -> bool:
    """b's process is down (and, under incarnations=fenced_first, its previous incarnation is
    fenced: the registration that comes with the start is refused before)."""
    return not br.alive and (kraft_steps(cfg) or not c.registered & bit(b))


def unregistered(br: Broker) -> bool:
    """b's process runs but has not registered yet: it knows no broker epoch (Kafka's -1)."""
    return br.alive and br.bepoch == 0


def may_register(c: Controller, br: Broker, b: int) -> bool:
    """b's new process has not registered yet; the old session may have expired by now."""
    return unregistered(br)


def session_expires(c: Controller, br: Broker, b: int) -> bool:
    """b's registered incarnation is down (its new process, if any, not registered yet):
    its session will time out."""
    return (not br.alive or br.bepoch == 0) and bool(c.registered & bit(b))


def may_crash(cfg: Config, br: Broker, u: Budget, keep: int | None) -> bool:
    """b is up and a crash of that kind is left; a hard crash keeps a prefix of its log, at
    least what this process recovered from disk at its start (Broker.flushed)."""
    if not br.alive:
        return False
    if keep is None:
        return cfg.allows(u, CRASHES)
    return cfg.allows(u, UNCLEAN_CRASHES) and br.flushed <= keep <= br.leo


def may_fence(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> bool:
    """b's registered incarnation is up and unfenced, and a fence is left."""
    return br.alive and br.bepoch != 0 and bool(c.registered & bit(b)) and cfg.allows(u, FENCES)


def may_heartbeat(c: Controller, br: Broker, b: int) -> bool:
    """b is up, registered and fenced: its next heartbeat unfences it. (Kafka also waits for
    a new incarnation to apply the metadata up to its registration record; the model lets it
    unfence at any later step, which allows more orders, never fewer.)"""
    return br.alive and br.bepoch != 0 and not c.registered & bit(b)


def may_checkpoint(cfg: Config, br: Broker, u: Budget) -> bool:
    """The HW moved since the last checkpoint, and a hard crash that would read it is left."""
    return br.alive and br.checkpoint_hw != br.hw and cfg.allows(u, UNCLEAN_CRASHES)


def restart_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (BrokerRestart(b),) if may_restart(cfg, c, br, b) else ()


def registration_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (BrokerRegistration(b),) if may_register(c, br, b) else ()


def session_timeout_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (BrokerSessionTimeout(b),) if session_expires(c, br, b) else ()


def crash_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> list[BrokerCrash]:
    if b not in c.replicas:  # hosts nothing: it matters only as a reassignment's target (spec/reassignment.py)
        keeps: list[int | None] = [None] if cfg.allows(u, REASSIGNMENTS) else []
    else:
        keeps = [None, *range(br.flushed, br.leo + 1)]
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
    # The controller still counts the broker as registered until its session times out. The
    # clean-shutdown file holds the process's broker epoch (BrokerServer.shutdown passes
    # lifecycleManager.brokerEpoch to LogManager.shutdown): -1 for a process that never
    # registered, which the next registration reports as previousBrokerEpoch and registerBroker
    # takes for an unclean shutdown (it is not the stored epoch).
    clean = a.keep is None and br.bepoch != 0
    dead = stopped(cfg, budget, replace(br, log=log, cache=cache, hw=hw), clean=clean)
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
    """The process starts (BrokerServer.startup): the log recovered, the HW read back from the
    checkpoint (UnifiedLog.updateHighWatermark caps it at the log end), the metadata replayed
    and applied, and the fetchers started with broker epoch -1 (the model's 0), before the
    registration is even sent. The controller learns nothing: the previous incarnation stays
    registered until its session expires or the new one registers."""
    b = a.broker
    br = state.broker(b)
    if not may_restart(cfg, state.controller, br, b):
        return None
    hw = min(br.hw, br.leo)
    ckpt = hw if cfg.allows(state.budget, UNCLEAN_CRASHES) else 0
    if not kraft_steps(cfg):
        # incarnations=fenced_first: registered with a new epoch and unfenced at once, acting on
        # the latest metadata.
        bepoch = state.controller.bepochs[b - 1] + 1
        fresh = Broker(alive=True, bepoch=bepoch, log=br.log, cache=br.cache, hw=hw, checkpoint_hw=ckpt)
        registered = register(cfg, state.with_broker(b, fresh), b, br.clean)
        return metadata_update(cfg, registered, MetadataUpdate(b)) or registered
    # Loading the log drops epoch entries that start at its end (LogLoader.load -> LeaderEpochFileCache.
    # truncateFromEndAsyncFlush): an epoch led without appends (seed 919 on 4.1.1: (2, 5) at log end 5).
    cache = tuple(e for e in br.cache if e[1] < br.leo)
    fresh = Broker(
        alive=True, bepoch=0, log=br.log, cache=cache, hw=hw, checkpoint_hw=ckpt, clean=br.clean, flushed=br.leo
    )
    started = state.with_broker(b, fresh)
    return metadata_update(cfg, started, MetadataUpdate(b)) or started


def broker_registration(cfg: Config, state: State, a: BrokerRegistration) -> State | None:
    """ClusterControlManager.registerBroker accepts the new incarnation: it tells the controller
    whether the last shutdown was clean (the previous broker epoch of the clean-shutdown file),
    the previous incarnation is cleaned up, and the broker learns its new epoch, still fenced."""
    b = a.broker
    br = state.broker(b)
    if not may_register(state.controller, br, b):
        return None
    registered = register_fenced(cfg, state, b, br.clean)
    bepoch = registered.controller.bepochs[b - 1]
    return registered.with_broker(b, replace(br, bepoch=bepoch, clean=True))


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
    br = state.broker(a.broker)
    if br.bepoch == 0:  # incarnations=kraft_steps: the process start alone
        draw.mark(draw.lane(a.broker), "process start: fetches with broker epoch -1", "restart")
        return
    draw.mark(draw.lane(a.broker), "restart", "restart")
    draw.msg(draw.lane(a.broker), "controller", f"register, broker epoch {br.bepoch}")


def restart_truncation(cfg: Config, a: BrokerRestart, b: int, prev: State, state: State) -> tuple[str, str]:
    br = state.broker(b)
    if br.bepoch == 0:
        who = f"broker {b}'s process started (not registered yet), became follower of {br.leader} and"
    else:
        who = f"broker {b} restarted (broker epoch {br.bepoch}), became follower of {br.leader} and"
    return who, f"its own HW {br.hw} (the rule before KIP-101)"


def restart_told(cfg: Config, a: BrokerRestart, before: Controller, state: State, told: bool, say) -> Told:
    """The process start (the controller learns nothing), or under incarnations=fenced_first the
    registration too, unless a truncation sentence told the restart, and KAFKA-15586's drop."""
    b, after = a.broker, state.controller
    br = state.broker(b)
    if br.bepoch == 0:
        return Told("" if told else f"broker {b}'s process started, not registered yet, with {say.log(br)}")
    cause = "" if told else f"broker {b} restarted (broker epoch {br.bepoch}) with {say.log(br)}"
    if not (before.isr | before.elr) & ~(after.isr | after.elr) & bit(b):
        return Told(cause)
    lists = " and ".join(n for n, m in (("ISR", before.isr), ("ELR", before.elr)) if m & bit(b))
    return Told(cause, [], [f"dropped it from the {lists} after its unclean shutdown (KAFKA-15586)"])


def registration_html(a: BrokerRegistration, state: State, prev: State, draw) -> None:
    draw.msg(draw.lane(a.broker), "controller", f"register: broker epoch {state.broker(a.broker).bepoch}, fenced")


def registration_told(cfg: Config, a: BrokerRegistration, before: Controller, state: State, told: bool, say) -> Told:
    """The registration, the cleanup of the previous incarnation, and KAFKA-15586's drop."""
    b, after = a.broker, state.controller
    cause = f"broker {b} registered (broker epoch {after.bepochs[b - 1]}), fenced until its heartbeat"
    did = []
    if before.registered & bit(b):
        did.append("cleaned up its previous incarnation, still registered (its session had expired)")
    if not (before.isr | before.elr) & ~(after.isr | after.elr) & bit(b):
        return Told(cause, did)
    lists = " and ".join(n for n, m in (("ISR", before.isr), ("ELR", before.elr)) if m & bit(b))
    # Only an unclean shutdown's cleanup takes a broker out of the ELR (handleBrokerUncleanShutdown).
    why = "after its unclean shutdown (KAFKA-15586)" if before.elr & ~after.elr & bit(b) else "(cleanup)"
    return Told(cause, did, [f"dropped it from the {lists} {why}"])


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
REGISTRATION_WORDS = Wording(html=registration_html, controller=registration_told)
