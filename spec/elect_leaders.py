"""ElectLeaders with ElectionType.PREFERRED (KIP-460; `kafka-leader-election.sh
--election-type PREFERRED`): an operator moves leadership back to the preferred replica.

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

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

LEADER_ELECTIONS = Bound("leader_elections", 0, "preferred leader elections an operator may request (ElectLeaders)")


@dataclass(frozen=True)
class ElectLeaders:
    """An operator asks the controller to make `preferred`, the first replica, the leader."""

    preferred: int


def can_lead(c: Controller, b: int) -> bool:
    """PartitionChangeBuilder.isValidNewLeader for a partition with an ISR: in it, unfenced and
    not in controlled shutdown (isAcceptableLeader)."""
    return bool(c.isr & c.active & bit(b))


def elect_leaders_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    if c.replicas[0] == b and c.leader != b and can_lead(c, b) and cfg.allows(u, LEADER_ELECTIONS):
        return (ElectLeaders(b),)
    return ()


def elect_leaders(cfg: Config, state: State, a: ElectLeaders) -> State | None:
    c = state.controller
    b = a.preferred
    if c.replicas[0] != b or c.leader == b or not can_lead(c, b) or not cfg.allows(state.budget, LEADER_ELECTIONS):
        return None  # ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, or no budget left
    state = replace(state, budget=state.budget.spend(LEADER_ELECTIONS.name))
    return partition_change(cfg, state, replace(c, leader=b))
