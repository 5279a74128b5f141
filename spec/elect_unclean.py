"""An unclean leader election an operator asks for: ElectLeaders with ElectionType.UNCLEAN.

KIP-460 (Kafka 2.4) added the election type to the ElectLeaders RPC
(`kafka-leader-election.sh --election-type UNCLEAN`): an offline partition gets a leader
from outside the ISR for this one request, with unclean.leader.election.enable left off.
The controller handles it in ReplicationControlManager.electLeader: ELECTION_NOT_NEEDED
when the partition has a leader (PartitionRegistration.hasLeader); otherwise a
PartitionChangeBuilder with Election.UNCLEAN, the election the topic's
unclean.leader.election.enable=true selects too. So the step is a partition change under
the unclean setting (spec/controller.py, elect: the clean choices first, then the first
active replica in assignment order, the partition RECOVERING under KIP-966); with no
active replica the answer is ELIGIBLE_LEADERS_NOT_AVAILABLE and nothing changes.

It fires only within --max-unclean-elections (default 0), and only where the controller's
own election left the partition offline; with unclean.leader.election.enable on, that
election is already unclean, so the request is never needed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.controller import partition_change
from kafkamc.spec.state import NO_LEADER, Broker, Budget, Controller, State, replace
from kafkamc.spec.wording import Told, Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

ELECTIONS = Bound(
    "unclean_elections",
    0,
    "unclean leader elections an operator asks for on an offline partition (ElectLeaders, ElectionType.UNCLEAN)",
)


@dataclass(frozen=True)
class ElectLeadersUnclean:
    """An operator asks for an unclean election of the offline partition; `leader` is the replica
    the controller will choose: the first active one in assignment order."""

    leader: int


def unclean_choice(c: Controller) -> int:
    """The replica an unclean election chooses on an offline partition (NO_LEADER for none)."""
    active = c.in_order(c.active)
    return active[0] if c.leader == NO_LEADER and active else NO_LEADER


def may_elect_unclean(cfg: Config, c: Controller, u: Budget, b: int) -> bool:
    """The guard: the partition has no leader, b is the replica the election chooses, and an
    unclean election is left."""
    return unclean_choice(c) == b != NO_LEADER and cfg.allows(u, ELECTIONS)


def candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (ElectLeadersUnclean(b),) if may_elect_unclean(cfg, c, u, b) else ()


def elect_leaders_unclean(cfg: Config, state: State, a: ElectLeadersUnclean) -> State | None:
    """ReplicationControlManager.electLeader with ElectionType.UNCLEAN: a PartitionChangeBuilder
    with Election.UNCLEAN, the election unclean.leader.election.enable=true selects."""
    if not may_elect_unclean(cfg, state.controller, state.budget, a.leader):
        return None  # ELECTION_NOT_NEEDED or ELIGIBLE_LEADERS_NOT_AVAILABLE, or no budget left
    state = replace(state, budget=state.budget.spend(ELECTIONS.name))
    return partition_change(dataclasses.replace(cfg, unclean=True), state, state.controller)


# ---------------------------------------------------------------- how a trace tells it


def unclean_html(a: ElectLeadersUnclean, state: State, prev: State, draw) -> None:
    draw.mark("controller", "ElectLeaders: unclean election", "elect")  # an operator's request


def unclean_told(cfg: Config, a: ElectLeadersUnclean, before: Controller, state: State, told: bool, say) -> Told:
    return Told("an operator asked for an unclean leader election of the offline partition (ElectLeaders UNCLEAN)")


def unclean_election(a: ElectLeadersUnclean, before: Controller, after: Controller) -> str:
    return "in the unclean election the operator asked for, though it was not in the ISR; the partition is RECOVERING"


WORDS = Wording(html=unclean_html, controller=unclean_told, election=unclean_election)
