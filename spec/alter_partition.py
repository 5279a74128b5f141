"""ISR changes on the leader's side: the AlterPartition request and its response (KIP-497).

Sources: Partition.maybeShrinkIsr / maybeExpandIsr / isFollowerInSync (when a leader
proposes a change), Partition.handleAlterPartitionUpdate (the response), and the
controller's validation in ReplicationControlManager (spec/controller.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.controller import handle_alter_partition
from kafkamc.spec.hw import advance_leader_hw
from kafkamc.spec.state import Broker, Budget, Controller, State, bit, members, replace, size

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

ISR_SHRINKS = Bound("isr_shrinks", 2, "ISR shrinks the leaders may request")
LAG_MAX_MESSAGES = 1  # replica.lag.max.messages in the model: more than one record behind is out


@dataclass(frozen=True)
class AlterPartition:
    """The leader asks the controller to change the ISR; the controller validates and decides."""

    leader: int
    isr: tuple


@dataclass(frozen=True)
class HandleAlterPartitionResponse:
    """The leader commits (or rolls back) its pending ISR change."""

    leader: int


def behind(br: Broker, f: int) -> bool:
    """Whether the leader has seen follower f short of its log end: never dropped otherwise."""
    return br.views[f - 1] < br.leo


def may_drop(cfg: Config, state: State, br: Broker, f: int) -> bool:
    """Whether the leader considers follower f out of sync (the isr_lag rule)."""
    if not behind(br, f):
        return False
    stuck = state.is_stalled(f)  # no fetch for replica.lag.time.max.ms
    if cfg.rule("isr_lag") == "messages":
        return stuck or br.leo - br.views[f - 1] > LAG_MAX_MESSAGES
    return stuck


def may_join(cfg: Config, br: Broker, f: int) -> bool:
    """Whether follower f has caught up enough to rejoin the ISR (the isr_join rule)."""
    view = br.views[f - 1]
    if cfg.rule("isr_lag") == "messages" and br.leo - view > LAG_MAX_MESSAGES:
        # Kafka adds a follower only on its fetch, which refreshes the leader's view of it; a
        # view the lag rule would drop again at once is one no fetch refreshed since the drop.
        return False
    if cfg.rule("isr_join") == "hw_and_epoch_start":
        return view >= br.hw and view >= br.start
    return view >= br.hw


def alter_partition_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> list[AlterPartition]:
    """Proposals the leader's own view already rules out are left out (a follower it sees
    caught up is never dropped, one behind never added): a third of the candidates
    otherwise. The step checks every guard again."""
    if not br.alive or br.leader != b or br.pending or br.alter is not None:
        return []
    shrinks_left = cfg.allows(u, ISR_SHRINKS)
    messages = cfg.rule("isr_lag") == "messages"
    current = members(br.isr)
    out = []
    for f in cfg.brokers:
        if f == b or f not in c.replicas and f not in current:  # only the assignment may join
            continue
        if f in current:
            if (shrinks_left or messages) and behind(br, f):
                out.append(AlterPartition(b, tuple(m for m in current if m != f)))
        elif may_join(cfg, br, f):
            out.append(AlterPartition(b, tuple(sorted(current + (f,)))))
    return out


def alter_partition_response_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    if br.alive and br.leader == b and br.alter is not None:
        return (HandleAlterPartitionResponse(b),)
    return ()


def alter_partition(cfg: Config, state: State, a: AlterPartition) -> State | None:
    """The leader proposes adding or removing one follower.

    Under isr_update=zookeeper Kafka added a follower inside the fetch that showed it caught
    up; here the leader may add it at any later step, from its last view of the follower,
    even one recorded before the follower restarted. Before 2.2 that is what a missed fast
    bounce did (KAFKA-1120; the controller noticed bounces from KIP-380, KAFKA-7235): the
    restarted follower stayed in the ISR on its previous life's position. From 2.2 to 2.7 it
    is a deviation that can only add behaviours, never hide one."""
    b = a.leader
    br = state.broker(b)
    if not state.leads(b) or br.pending or br.alter is not None:
        return None
    proposed = 0
    for m in a.isr:
        proposed |= bit(m)
    removed, added = br.isr & ~proposed, proposed & ~br.isr
    if proposed & bit(b) == 0 or size(removed) + size(added) != 1:
        return None
    budget = state.budget
    added_bepoch = 0
    if removed:
        f = members(removed)[0]
        if not may_drop(cfg, state, br, f):
            return None
        # The bound counts the shrinks that follow a stall (the fault); a follower that still
        # fetches but lags by records (isr_lag=messages) is dropped by the protocol itself.
        if state.is_stalled(f):
            if not cfg.allows(budget, ISR_SHRINKS):
                return None
            budget = budget.spend(ISR_SHRINKS.name)
    elif added:
        f = members(added)[0]
        if not may_join(cfg, br, f):
            return None
        added_bepoch = br.vbepochs[f - 1]
    state, resp = handle_alter_partition(cfg, state, br.epoch, br.pepoch, proposed, added_bepoch)
    nxt = replace(state.with_broker(b, replace(br, pending=proposed, alter=resp)), budget=budget)
    if cfg.rule("isr_update") == "zookeeper":
        # The leader wrote the ISR itself (a conditional ZooKeeper write): no window in flight.
        return handle_alter_partition_response(cfg, nxt, HandleAlterPartitionResponse(b))
    return nxt


def handle_alter_partition_response(cfg: Config, state: State, a: HandleAlterPartitionResponse) -> State | None:
    """The leader commits the change it proposed, or rolls back to the ISR it last committed.

    NEW_LEADER_ELECTED (the change completed a reassignment that removed this leader) is the
    exception: the change was made, but this broker no longer leads and does not know it yet,
    so it stays in its pending state, the maximal ISR holding its HW, until the metadata
    overrides it (Partition.handleAlterPartitionError, KRaft only)."""
    b = a.leader
    br = state.broker(b)
    resp = br.alter
    if not br.alive or resp is None:
        return None
    if resp.error == "NEW_LEADER_ELECTED":
        return state.with_broker(b, replace(br, alter=None))
    br = replace(br, alter=None, pending=0)
    if resp.ok and br.leader == b and resp.epoch == br.epoch and resp.pepoch > br.pepoch:
        br = replace(br, isr=resp.isr, pepoch=resp.pepoch)
    nxt = state.with_broker(b, br)
    return advance_leader_hw(cfg, nxt, b) if br.leader == b else nxt
