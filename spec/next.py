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
from dataclasses import dataclass
from typing import Any

from kafkamc.spec import alter_partition as ap
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec import controlled_shutdown as cs
from kafkamc.spec import elect_leaders as el
from kafkamc.spec import elect_unclean as eu
from kafkamc.spec import fetch as fe
from kafkamc.spec import metadata as md
from kafkamc.spec import produce as pr
from kafkamc.spec import reassignment as ra
from kafkamc.spec import retention as rt
from kafkamc.spec.bounds import Bound
from kafkamc.spec.wording import Wording
from kafkamc.spec.wording import describe as describe  # where traces and validation import it from

FAIRNESS = ("weak", "strong", "none", "fault")


@dataclass(frozen=True)
class Action:
    type: type  # the action's dataclass
    candidates: Callable[..., Any]  # (cfg, controller, broker, budget, b) -> a tuple or list of broker b's actions
    step: Callable[..., Any]  # (cfg, state, action) -> next state, or None when the guard fails
    # Fairness for liveness (checker/liveness/check.py), stated by every entry (FAIRNESS holds the
    # values): "weak", a step of the protocol itself that cannot stay enabled forever without
    # being taken (each instance, e.g. one follower's fetch); "strong", one that is taken if it
    # is enabled again and again; "none", a client's or operator's choice, which may never
    # come; "fault", which also happens only finitely often, so no cycle of a lasso takes it.
    fairness: str
    # How a trace tells it: the terminal's line, the HTML page's messages and marks, the
    # incident summary's sentences (spec/wording.py); written in the action's own module.
    wording: Wording
    bounds: tuple[Bound, ...] = ()  # budgets it spends; with all of them 0 it never fires
    enabled_by: tuple[Bound, ...] = ()  # bounds without which it never fires, though it spends none
    # (rule, values, bounds): under that rule these bounds enable it too (what needs says it needs)
    enabled_under: tuple | None = None
    rule: tuple[str, tuple[str, ...]] | None = None  # (rule, values) under which alone it fires
    setting: tuple[str, object] | None = None  # (Config field, value) under which alone it fires
    moves_replicas: bool = False  # it may change the replica set's order (symmetry must relabel)
    rare: bool = False  # enabled only in corners most bounds never reach: no warning when it never fires

    def __post_init__(self) -> None:
        if self.fairness not in FAIRNESS:
            raise ValueError(f"{self.type.__name__}: fairness {self.fairness!r} is not one of {FAIRNESS}")

    @property
    def name(self) -> str:
        return self.type.__name__

    @property
    def describe(self) -> Callable[[Any], str]:
        return self.wording.terminal

    @property
    def needs(self) -> tuple[Bound, ...]:
        """The bounds of which at least one must be above 0 for the action to fire (under any rule)."""
        return self.bounds + self.enabled_by + (self.enabled_under[2] if self.enabled_under else ())

    def needs_under(self, cfg) -> tuple[Bound, ...]:
        """The bounds of which at least one must be above 0 for the action to fire under cfg's rules."""
        under = self.enabled_under
        extra = under[2] if under and cfg.rule(under[0]) in under[1] else ()
        return self.bounds + self.enabled_by + tuple(b for b in extra if b not in self.enabled_by)

    def in_force(self, cfg) -> bool:
        """Whether its protocol rule and Kafka setting, if it has them, are those of cfg."""
        rule, setting = self.rule, self.setting
        if rule and cfg.rule(rule[0]) not in rule[1]:
            return False
        return not (setting and getattr(cfg, setting[0]) != setting[1])

    def bounded_off(self, cfg) -> list:
        """The bounds, all at 0 in cfg, without which it cannot fire ([] if one is above 0)."""
        needs = self.needs_under(cfg)
        if needs and all(cfg.bound(b) == 0 for b in needs):
            return [b.setting for b in needs]
        return []

    def may_fire(self, cfg) -> bool:
        """Whether, by its declaration, it may fire under cfg (a search enumerates only those)."""
        return self.in_force(cfg) and not self.bounded_off(cfg)


_DEAD = (lc.CRASHES, lc.UNCLEAN_CRASHES)  # a broker's session times out only after one of these
_STOPS = (*_DEAD, cs.CONTROLLED_SHUTDOWNS)  # a broker can only restart after one of these

NEXT: tuple[Action, ...] = (
    Action(lc.BrokerRestart, lc.restart_candidates, lc.broker_restart, "none", lc.RESTART_WORDS, enabled_by=_STOPS),
    Action(
        lc.BrokerRegistration,
        lc.registration_candidates,
        lc.broker_registration,
        "weak",  # BrokerLifecycleManager retries until the old session expires
        lc.REGISTRATION_WORDS,
        enabled_by=_STOPS,
        rule=("incarnations", ("kraft_steps",)),
    ),
    Action(pr.Produce, pr.produce_candidates, pr.produce, "none", pr.PRODUCE_WORDS, bounds=(pr.RECORDS,)),
    Action(
        pr.ProduceRetry,
        pr.retry_candidates,
        pr.produce_retry,
        "weak",
        pr.RETRY_WORDS,
        enabled_by=(pr.RECORDS,),
        rare=True,
    ),
    Action(
        rt.LogRetention,
        rt.retention_candidates,
        rt.log_retention,
        "weak",
        rt.RETENTION_WORDS,
        enabled_by=(pr.RECORDS,),
        rare=True,
    ),
    Action(
        ap.AlterPartition,
        ap.alter_partition_candidates,
        ap.alter_partition,
        "strong",
        ap.ALTER_PARTITION_WORDS,
        # A shrink spends an ISR shrink; an expansion spends nothing, so with no shrinks left
        # it still fires (a restarted or reassigned replica joins), and it declares no bound.
    ),
    Action(
        ap.HandleAlterPartitionResponse,
        ap.alter_partition_response_candidates,
        ap.handle_alter_partition_response,
        "weak",
        ap.RESPONSE_WORDS,
    ),
    Action(
        fe.OffsetsForLeaderEpoch,
        fe.offsets_candidates,
        fe.offsets_for_leader_epoch,
        "weak",
        fe.OFFSETS_WORDS,
        rule=("truncation", ("leader_epoch", "leader_epoch_kip279")),
    ),
    Action(fe.Fetch, fe.fetch_candidates, fe.fetch, "weak", fe.FETCH_WORDS),
    Action(
        fe.ReplicaStall, fe.stall_candidates, fe.replica_stall, "fault", fe.STALL_WORDS, enabled_by=(ap.ISR_SHRINKS,)
    ),
    Action(md.MetadataUpdate, md.metadata_candidates, md.metadata_update, "weak", md.METADATA_WORDS),
    Action(lc.BrokerCrash, lc.crash_candidates, lc.broker_crash, "fault", lc.CRASH_WORDS, bounds=_DEAD),
    Action(
        lc.BrokerSessionTimeout,
        lc.session_timeout_candidates,
        lc.broker_session_timeout,
        "weak",
        lc.SESSION_TIMEOUT_WORDS,
        enabled_by=_DEAD,
    ),
    Action(
        lc.CheckpointHighWatermarks,
        lc.checkpoint_candidates,
        lc.checkpoint_high_watermarks,
        "weak",
        lc.CHECKPOINT_WORDS,
        enabled_by=(lc.UNCLEAN_CRASHES,),
    ),
    Action(
        lc.ControllerFenceBroker,
        lc.fence_candidates,
        lc.controller_fence_broker,
        "fault",
        lc.FENCE_WORDS,
        bounds=(lc.FENCES,),
    ),
    Action(
        lc.BrokerHeartbeat,
        lc.heartbeat_candidates,
        lc.broker_heartbeat,
        "weak",
        lc.HEARTBEAT_WORDS,
        enabled_by=(lc.FENCES,),
        enabled_under=("incarnations", ("kraft_steps",), _STOPS),  # a new incarnation registers fenced
    ),
    Action(
        el.AutoLeaderRebalance,
        el.auto_rebalance_candidates,
        el.auto_leader_rebalance,
        "weak",  # the controller retries every leader.imbalance.check.interval.seconds
        el.REBALANCE_WORDS,
        bounds=(el.LEADER_ELECTIONS,),
        setting=("auto_rebalance", True),
    ),
    Action(
        el.ElectLeaders,
        el.elect_leaders_candidates,
        el.elect_leaders,
        "none",
        el.ELECT_LEADERS_WORDS,
        bounds=(el.LEADER_ELECTIONS,),
        setting=("auto_rebalance", False),
    ),
    Action(eu.ElectLeadersUnclean, eu.candidates, eu.elect_leaders_unclean, "none", eu.WORDS, bounds=(eu.ELECTIONS,)),
    Action(
        cs.ControlledShutdown,
        cs.controlled_shutdown_candidates,
        cs.controlled_shutdown,
        "none",
        cs.SHUTDOWN_WORDS,
        bounds=(cs.CONTROLLED_SHUTDOWNS,),
    ),
    Action(
        cs.ControlledShutdownComplete,
        cs.complete_candidates,
        cs.controlled_shutdown_complete,
        "weak",
        cs.COMPLETE_WORDS,
        enabled_by=(cs.CONTROLLED_SHUTDOWNS,),
    ),
    Action(
        ra.AlterPartitionReassignments,
        ra.reassignment_candidates,
        ra.alter_partition_reassignments,
        "none",
        ra.REASSIGNMENT_WORDS,
        bounds=(ra.REASSIGNMENTS,),
        moves_replicas=True,
    ),
    Action(
        ra.CancelPartitionReassignment,
        ra.cancel_candidates,
        ra.cancel_partition_reassignment,
        "none",
        ra.CANCEL_WORDS,
        bounds=(ra.CANCELS,),  # and a move in flight, which needs --max-reassignments
        moves_replicas=True,  # the reverted list may start with another replica
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


def entry(action) -> Action:
    """The entry of Next an action (a dataclass instance) belongs to: what renderers read its words from."""
    return _BY_TYPE[type(action)]


_BY_TYPE = {a.type: a for a in NEXT}
