"""Controlled shutdown: a broker of a rolling restart hands its leadership over before it stops
(controlled.shutdown.enable, on by default since Kafka 0.8.2; KAFKA-340 brought it in 0.8.0).

KRaft (KIP-631). The broker's heartbeat says wantShutDown, and
BrokerHeartbeatManager.calculateNextBrokerState decides from the broker's state (the same from
2.8.0 to 4.1.1). hasLeaderships asks whether the broker leads any partition of the cluster,
not only this one, so a broker that does not lead this partition takes either path (it leads
another one or none; `kafkamc conform` saw the second path on Kafka 4.1.1, a follower marked and
taken out of the ISR in one batch and fenced in a later one). A broker that leads nothing
gets SHUTDOWN_NOW at once: ReplicationControlManager.processBrokerHeartbeat fences it
(handleBrokerFenced: out of the ISR, into the ELR below min ISR) and it stops, one step here. A
broker that leads moves to CONTROLLED_SHUTDOWN: handleBrokerInControlledShutdown writes its
BrokerRegistrationChangeRecord (inControlledShutdown) and, through generateLeaderAndIsrUpdates,
one partition change per partition it hosts: out of the ISR (into the ELR below min ISR: a
clean shutdown leaves it eligible, KIP-966), and a new leader where it led. From then on it is
no acceptable leader (PartitionChangeBuilder.isAcceptableLeader), the controller refuses to add
it to an ISR (AlterPartition: INELIGIBLE_REPLICA, KIP-841) and a leader's HW does not wait for it
(Partition.isReplicaIsrEligible, KAFKA-15021). It stays alive and registered, and acts on the
metadata it has applied, stale or not: a leader it was keeps leading until it applies the change.
QuorumController.processBrokerHeartbeat records the end offset of that batch as the broker's
controlledShutdownOffset (maybeUpdateControlledShutdownOffset), and a later heartbeat gets
SHUTDOWN_NOW once it leads nothing and the lowest metadata offset of the active brokers
(lowestActiveOffset: unfenced, not shutting down) has reached it. The controller fences the
broker in that step and the process exits cleanly (log flushed, HW checkpointed, a
clean-shutdown marker for the next registration).

ZooKeeper (the controlled_shutdown=zookeeper rule, before KRaft in 2.8.0): the ControlledShutdown
request; KafkaController.doControlledShutdown moves leadership to another ISR member
(ControlledShutdownLeaderSelector), takes the broker out of the ISR where it follows (never the
last member), and the broker exits once no partition is left to move, without waiting for the
other brokers to learn anything.

Simplifications. The metadata offset the controller waits for is read as the partition's leader
epoch after the change. For this partition's leader that identifies the shutdown's record:
moving its leadership (to another broker or to none) always bumps the leader epoch, so a broker
that applied that epoch or a later one applied the record (a broker applies the metadata log in
order). For a follower that enters CONTROLLED_SHUTDOWN because it leads another partition, the
epoch does not move and the wait is none (sooner than Kafka). The brokers counted are the live, active replicas: a
crashed broker that is still registered reported its last offset before it died, which the
model does not keep, and a broker outside the replica set keeps no metadata of the partition;
both are taken as caught up, so the model may let a shutdown end sooner than Kafka, never later.
The offset is the one a broker applied, not the one its last heartbeat reported. A broker in
controlled shutdown that hard-crashes instead is the BrokerCrash step; its session timeout
fences it and clears the mark. The clean shutdowns of --max-clean-shutdowns
remain process exits without controlled shutdown (controlled.shutdown.enable=false).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.broker_lifecycle import matters, stopped
from kafkamc.spec.controller import fence, leave_isr, partition_change, with_shutdown
from kafkamc.spec.state import Broker, Budget, Controller, State, bit, replace
from kafkamc.spec.wording import Told, Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

CONTROLLED_SHUTDOWNS = Bound(
    "controlled_shutdowns",
    0,
    "controlled shutdowns (leadership handed over, then a clean stop) of a rolling restart",
)


@dataclass(frozen=True)
class ControlledShutdown:
    """The broker asks to shut down; the controller marks it as shutting down, takes it out of
    the ISR and moves its leadership (handleBrokerInControlledShutdown), or, under KRaft, stops
    it at once if it leads no partition at all (SHUTDOWN_NOW)."""

    broker: int


@dataclass(frozen=True)
class ControlledShutdownComplete:
    """The controller tells the broker it may stop (shouldShutDown), fences it, and the process
    exits cleanly."""

    broker: int


def may_shut_down(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> bool:
    """The guard: b is up and active (unfenced, not shutting down already), and a controlled
    shutdown is left. A new process not registered yet has no session to ask in (its old
    incarnation's registration is another process's)."""
    return br.alive and br.bepoch != 0 and bool(c.active & bit(b)) and cfg.allows(u, CONTROLLED_SHUTDOWNS)


def shutting_down(c: Controller, b: int) -> bool:
    """b is in controlled shutdown and leads nothing at the controller."""
    return bool(c.shutdown) and bool(c.shutdown[b - 1]) and c.leader != b


def controlled_shutdown_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    # `matters` is a reduction of the search (broker_lifecycle.matters). A broker outside the
    # replica set may lead another partition too and take either path (Kafka 4.1.1 marked such
    # a broker in controlled shutdown: `kafkamc conform`).
    return (ControlledShutdown(b),) if may_shut_down(cfg, c, br, u, b) and matters(cfg, c, u, b) else ()


def awaits_stop(c: Controller, br: Broker, b: int) -> bool:
    """The guard's part its candidates can see: b is up, in controlled shutdown, leading nothing
    at the controller. The step also asks may_stop whether every active broker has caught up."""
    return br.alive and br.bepoch != 0 and shutting_down(c, b)


def complete_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (ControlledShutdownComplete(b),) if awaits_stop(c, br, b) else ()


def controlled_shutdown(cfg: Config, state: State, a: ControlledShutdown) -> State | list[State] | None:
    b = a.broker
    c = state.controller
    if not may_shut_down(cfg, c, state.broker(b), state.budget, b):
        return None
    state = replace(state, budget=state.budget.spend(CONTROLLED_SHUTDOWNS.name))
    # Marked first, so that the election skips it; the mark then takes the epoch the change wrote.
    marked = partition_change(cfg, state, with_shutdown(leave_isr(cfg, c, b), b, c.epoch))
    marked = replace(marked, controller=with_shutdown(marked.controller, b, marked.controller.epoch))
    if cfg.rule("controlled_shutdown") == "kraft" and c.leader != b:
        # Leading no partition of the cluster: SHUTDOWN_NOW; leading another: CONTROLLED_SHUTDOWN.
        return [shutdown_now(cfg, state, b), marked]
    return marked


def may_stop(cfg: Config, state: State, b: int) -> bool:
    """BrokerHeartbeatManager.calculateNextBrokerState in CONTROLLED_SHUTDOWN, for a broker that
    leads nothing at the controller (awaits_stop): under KRaft controlledShutdownOffset <=
    lowestActiveOffset, every active broker has applied the metadata of its controlled shutdown
    (read as the leader epoch that shutdown wrote; the module's docstring says why that suffices)."""
    c = state.controller
    if cfg.rule("controlled_shutdown") == "zookeeper":
        return True
    # Broker.applied is the epoch plus one, 0 while down: a live broker has applied the
    # shutdown's epoch when it is past it. Read through applied_epoch alone, so that the fast
    # path keys this step on that number of each replica, not on the whole broker.
    active, wrote = c.active, c.shutdown[b - 1]
    return all(
        state.applied_epoch(o) > wrote for o in c.replicas if o != b and active & bit(o) and state.applied_epoch(o)
    )


def shutdown_now(cfg: Config, state: State, b: int) -> State:
    """SHUTDOWN_NOW: the controller fences the broker (ReplicationControlManager.
    handleBrokerFenced) and it stops with its whole log flushed and its HW checkpointed
    (ReplicaManager.shutdown); its next registration says the shutdown was clean."""
    return fence(cfg, state.with_broker(b, stopped(cfg, state.budget, state.broker(b))), b)


def controlled_shutdown_complete(cfg: Config, state: State, a: ControlledShutdownComplete) -> State | None:
    """A heartbeat of a broker in controlled shutdown that may stop: SHUTDOWN_NOW."""
    b = a.broker
    if not awaits_stop(state.controller, state.broker(b), b) or not may_stop(cfg, state, b):
        return None
    return shutdown_now(cfg, state, b)


# ---------------------------------------------------------------- how a trace tells them


def shutdown_html(a: ControlledShutdown, state: State, prev: State, draw) -> None:
    draw.msg(draw.lane(a.broker), "controller", "heartbeat: wants to shut down")
    draw.mark("controller", f"broker {a.broker} in controlled shutdown", "fence")


def complete_html(a: ControlledShutdownComplete, state: State, prev: State, draw) -> None:
    draw.msg("controller", draw.lane(a.broker), "shouldShutDown", "response")
    draw.mark(draw.lane(a.broker), "controlled shutdown: stops cleanly", "crash")


def shutdown_told(cfg: Config, a: ControlledShutdown, before: Controller, state: State, told: bool, say) -> Told:
    return Told(
        f"broker {a.broker} asked for a controlled shutdown (a rolling restart)",
        ["marked it as shutting down, no longer eligible to lead or join the ISR"],
    )


def complete_told(
    cfg: Config, a: ControlledShutdownComplete, before: Controller, state: State, told: bool, say
) -> Told:
    return Told(
        f"broker {a.broker} led nothing and every active broker had applied its shutdown",
        ["told it to stop and fenced it; it stopped cleanly"],
    )


def shutdown_election(a: ControlledShutdown, before: Controller, after: Controller) -> str:
    return f"in place of broker {a.broker}, which is shutting down"


SHUTDOWN_WORDS = Wording(html=shutdown_html, controller=shutdown_told, election=shutdown_election)
COMPLETE_WORDS = Wording(html=complete_html, controller=complete_told)
