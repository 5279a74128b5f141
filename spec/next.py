"""Next: every action of the protocol, in the order the search tries them.

Each entry declares, as data, everything the rest of the tool needs about one action:
its dataclass, how its candidates are enumerated (from one broker's view, the
controller and the budget), its guarded step function, the bounds whose budget it may
spend (at 0 none of them, it never fires), the protocol rule it belongs to, and how a
trace describes it. The engines, the command line, the trace renderers and the
coverage report read this list; adding an action means writing its RPC module's
functions and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from kafkamc.spec import alter_partition as ap
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec import controlled_shutdown as cs
from kafkamc.spec import elect_leaders as el
from kafkamc.spec import fetch as fe
from kafkamc.spec import metadata as md
from kafkamc.spec import produce as pr
from kafkamc.spec import reassignment as ra
from kafkamc.spec import retention as rt
from kafkamc.spec.bounds import Bound


def describe(action) -> str:
    """An action as a trace prints it: its type and its fields, Fetch(follower=2, leader=1)."""
    args = ", ".join(
        f"{f.name}={getattr(action, f.name)}" for f in fields(action) if getattr(action, f.name) is not None
    )
    return f"{type(action).__name__}({args})"


FAIRNESS = ("weak", "strong", "none", "fault")


@dataclass(frozen=True)
class Action:
    type: type  # the action's dataclass
    candidates: Callable[..., Any]  # (cfg, controller, broker, budget, b) -> a tuple or list of broker b's actions
    step: Callable[..., Any]  # (cfg, state, action) -> next state, or None when the guard fails
    # Fairness for liveness (checker/liveness.py), stated by every entry (FAIRNESS holds the
    # values): "weak", a step of the protocol itself that cannot stay enabled forever without
    # being taken (each instance, e.g. one follower's fetch); "strong", one that is taken if it
    # is enabled again and again; "none", a client's or operator's choice, which may never
    # come; "fault", which also happens only finitely often, so no cycle of a lasso takes it.
    fairness: str
    bounds: tuple[Bound, ...] = ()  # budgets it spends; with all of them 0 it never fires
    enabled_by: tuple[Bound, ...] = ()  # bounds without which it never fires, though it spends none
    rule: tuple[str, tuple[str, ...]] | None = None  # (rule, values) under which alone it fires
    setting: tuple[str, object] | None = None  # (Config field, value) under which alone it fires
    moves_replicas: bool = False  # it may change the replica set's order (symmetry must relabel)
    rare: bool = False  # enabled only in corners most bounds never reach: no warning when it never fires
    describe: Callable[[Any], str] = describe

    def __post_init__(self) -> None:
        if self.fairness not in FAIRNESS:
            raise ValueError(f"{self.type.__name__}: fairness {self.fairness!r} is not one of {FAIRNESS}")

    @property
    def name(self) -> str:
        return self.type.__name__

    @property
    def needs(self) -> tuple[Bound, ...]:
        """The bounds of which at least one must be above 0 for the action to fire."""
        return self.bounds + self.enabled_by


_DEAD = (lc.CRASHES, lc.UNCLEAN_CRASHES)  # a broker's session times out only after one of these
_STOPS = (*_DEAD, cs.CONTROLLED_SHUTDOWNS)  # a broker can only restart after one of these

NEXT: tuple[Action, ...] = (
    Action(lc.BrokerRestart, lc.restart_candidates, lc.broker_restart, enabled_by=_STOPS, fairness="none"),
    Action(pr.Produce, pr.produce_candidates, pr.produce, bounds=(pr.RECORDS,), fairness="none"),
    Action(
        pr.ProduceRetry, pr.retry_candidates, pr.produce_retry, enabled_by=(pr.RECORDS,), rare=True, fairness="weak"
    ),
    Action(
        rt.LogRetention, rt.retention_candidates, rt.log_retention, enabled_by=(pr.RECORDS,), rare=True, fairness="weak"
    ),
    Action(
        ap.AlterPartition,
        ap.alter_partition_candidates,
        ap.alter_partition,
        bounds=(ap.ISR_SHRINKS,),
        fairness="strong",
    ),
    Action(
        ap.HandleAlterPartitionResponse,
        ap.alter_partition_response_candidates,
        ap.handle_alter_partition_response,
        fairness="weak",
    ),
    Action(
        fe.OffsetsForLeaderEpoch,
        fe.offsets_candidates,
        fe.offsets_for_leader_epoch,
        rule=("truncation", ("leader_epoch", "leader_epoch_kip279")),
        fairness="weak",
    ),
    Action(fe.Fetch, fe.fetch_candidates, fe.fetch, fairness="weak"),
    Action(fe.ReplicaStall, fe.stall_candidates, fe.replica_stall, enabled_by=(ap.ISR_SHRINKS,), fairness="fault"),
    Action(md.MetadataUpdate, md.metadata_candidates, md.metadata_update, fairness="weak"),
    Action(lc.BrokerCrash, lc.crash_candidates, lc.broker_crash, bounds=_DEAD, fairness="fault"),
    Action(
        lc.BrokerSessionTimeout,
        lc.session_timeout_candidates,
        lc.broker_session_timeout,
        enabled_by=_DEAD,
        fairness="weak",
    ),
    Action(
        lc.CheckpointHighWatermarks,
        lc.checkpoint_candidates,
        lc.checkpoint_high_watermarks,
        enabled_by=(lc.UNCLEAN_CRASHES,),
        fairness="weak",
    ),
    Action(
        lc.ControllerFenceBroker,
        lc.fence_candidates,
        lc.controller_fence_broker,
        bounds=(lc.FENCES,),
        fairness="fault",
    ),
    Action(lc.BrokerHeartbeat, lc.heartbeat_candidates, lc.broker_heartbeat, enabled_by=(lc.FENCES,), fairness="weak"),
    Action(
        el.AutoLeaderRebalance,
        el.auto_rebalance_candidates,
        el.auto_leader_rebalance,
        bounds=(el.LEADER_ELECTIONS,),
        setting=("auto_rebalance", True),
        fairness="weak",  # the controller retries every leader.imbalance.check.interval.seconds
    ),
    Action(
        el.ElectLeaders,
        el.elect_leaders_candidates,
        el.elect_leaders,
        bounds=(el.LEADER_ELECTIONS,),
        fairness="none",
        setting=("auto_rebalance", False),
    ),
    Action(
        cs.ControlledShutdown,
        cs.controlled_shutdown_candidates,
        cs.controlled_shutdown,
        bounds=(cs.CONTROLLED_SHUTDOWNS,),
        fairness="none",
    ),
    Action(
        cs.ControlledShutdownComplete,
        cs.complete_candidates,
        cs.controlled_shutdown_complete,
        enabled_by=(cs.CONTROLLED_SHUTDOWNS,),
        fairness="weak",
    ),
    Action(
        ra.AlterPartitionReassignments,
        ra.reassignment_candidates,
        ra.alter_partition_reassignments,
        bounds=(ra.REASSIGNMENTS,),
        moves_replicas=True,
        fairness="none",
    ),
    Action(
        ra.CancelPartitionReassignment,
        ra.cancel_candidates,
        ra.cancel_partition_reassignment,
        bounds=(ra.CANCELS,),  # and a move in flight, which needs --max-reassignments
        moves_replicas=True,  # the reverted list may start with another replica
        fairness="none",
    ),
)


def bounds_of(actions: tuple[Action, ...]) -> tuple[Bound, ...]:
    """Every bound the actions declare, each once, in the order they first appear."""
    out: list[Bound] = []
    for a in actions:
        for b in a.needs:
            if b not in out:
                out.append(b)
    return tuple(out)


BOUNDS: tuple[Bound, ...] = bounds_of(NEXT)
