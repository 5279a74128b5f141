"""Preferred leader election: leadership moves back to the first replica of the assignment.

Two ways ask for it, with one effect (preferred_election):
- AutoLeaderRebalance: the controller's own periodic step when auto.leader.rebalance.enable
  is true, Kafka's default (QuorumController's periodic maybeBalancePartitionLeaders task,
  every leader.imbalance.check.interval.seconds; ReplicationControlManager.
  maybeBalancePartitionLeaders tries every partition whose leader is not its preferred
  replica). No operator is needed: a rolling restart with default settings ends in it.
- ElectLeaders with ElectionType.PREFERRED (KIP-460; `kafka-leader-election.sh
  --election-type PREFERRED`): an operator's request. With auto rebalancing on it reaches
  no state the controller's own step does not, so only the controller's is generated then.

The controller handles it in ReplicationControlManager.electLeader through a
PartitionChangeBuilder with Election.PREFERRED: the first replica of the assignment
becomes leader when it is a valid new leader (in the ISR, or in the ELR with the ISR
empty, and unfenced: isValidNewLeader). The answer is ELECTION_NOT_NEEDED when it leads
already and PREFERRED_LEADER_NOT_AVAILABLE when it is not valid; neither changes
anything. The new leader and the old one learn of the change from the metadata log.

Simplification: a preferred replica in the ELR with an empty ISR is left out, because
there the partition has no leader and the controller's own election (spec/controller.py,
elect) has already chosen the first eligible replica in assignment order: the preferred one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.controller import partition_change
from kafkamc.spec.state import Broker, Budget, Controller, State, bit, replace
from kafkamc.spec.wording import Told, Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

LEADER_ELECTIONS = Bound(
    "leader_elections",
    0,
    "preferred leader elections: the controller's own (AutoLeaderRebalance, auto.leader.rebalance.enable=true, "
    "Kafka's default), or an operator's (ElectLeaders) when it is off",
)


@dataclass(frozen=True)
class ElectLeaders:
    """An operator asks the controller to make `preferred`, the first replica, the leader."""

    preferred: int


def can_lead(c: Controller, b: int) -> bool:
    """PartitionChangeBuilder.isValidNewLeader for a partition with an ISR: in it, unfenced and
    not in controlled shutdown (isAcceptableLeader)."""
    return bool(c.isr & c.active & bit(b))


@dataclass(frozen=True)
class AutoLeaderRebalance:
    """The controller's periodic rebalance makes `preferred`, the first replica, the leader."""

    preferred: int


def may_rebalance(cfg: Config, c: Controller, u: Budget, b: int) -> bool:
    """AutoLeaderRebalance's guard: the controller's own step, with auto rebalancing on."""
    return cfg.auto_rebalance and preferred_ok(cfg, c, u, b)


def elect_leaders_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    # A reduction, not a guard: with auto rebalancing on, an operator's request reaches no state
    # the controller's own step does not, so it is not generated (an operator may still send it).
    return (ElectLeaders(b),) if not cfg.auto_rebalance and preferred_ok(cfg, c, u, b) else ()


def auto_rebalance_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (AutoLeaderRebalance(b),) if may_rebalance(cfg, c, u, b) else ()


def preferred_ok(cfg: Config, c: Controller, u: Budget, b: int) -> bool:
    """The guard both requests share: b is the preferred replica, a valid leader that does not
    lead, and the election budget is not spent."""
    return c.replicas[0] == b and c.leader != b and can_lead(c, b) and cfg.allows(u, LEADER_ELECTIONS)


def elect_leaders(cfg: Config, state: State, a: ElectLeaders) -> State | None:
    if not preferred_ok(cfg, state.controller, state.budget, a.preferred):
        return None  # ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, or no budget left
    return preferred_election(cfg, state, a.preferred)


def auto_leader_rebalance(cfg: Config, state: State, a: AutoLeaderRebalance) -> State | None:
    if not may_rebalance(cfg, state.controller, state.budget, a.preferred):
        return None
    return preferred_election(cfg, state, a.preferred)


def preferred_election(cfg: Config, state: State, b: int) -> State:
    """PartitionChangeBuilder with Election.PREFERRED: b becomes leader (the caller checked
    that it may)."""
    c = state.controller
    state = replace(state, budget=state.budget.spend(LEADER_ELECTIONS.name))
    return partition_change(cfg, state, replace(c, leader=b))


# ---------------------------------------------------------------- how a trace tells them


def elect_leaders_html(a: ElectLeaders, state: State, prev: State, draw) -> None:
    # An operator's request: no lane of its own, so a mark on the controller's.
    draw.mark("controller", f"ElectLeaders: preferred broker {a.preferred}", "elect")


def rebalance_html(a: AutoLeaderRebalance, state: State, prev: State, draw) -> None:
    draw.mark("controller", f"auto rebalance: preferred broker {a.preferred}", "elect")  # the controller's own step


def elect_leaders_told(cfg: Config, a: ElectLeaders, before: Controller, state: State, told: bool, say) -> Told:
    return Told(f"an operator asked for a preferred leader election of broker {a.preferred} (ElectLeaders)")


def rebalance_told(cfg: Config, a: AutoLeaderRebalance, before: Controller, state: State, told: bool, say) -> Told:
    return Told(
        f"the controller's automatic leader rebalance (auto.leader.rebalance.enable, on by default) "
        f"found preferred replica {a.preferred} not leading"
    )


def as_preferred(a, before: Controller, after: Controller) -> str:
    return "as the preferred replica"


ELECT_LEADERS_WORDS = Wording(html=elect_leaders_html, controller=elect_leaders_told, election=as_preferred)
REBALANCE_WORDS = Wording(html=rebalance_html, controller=rebalance_told, election=as_preferred)
