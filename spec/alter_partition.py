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
from kafkamc.spec.hw import advance_leader_hw, broker_epoch_eligible
from kafkamc.spec.state import Broker, Budget, Controller, State, bit, members, replace, size
from kafkamc.spec.wording import Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

ISR_SHRINKS = Bound(
    "isr_shrinks", 2, "stalled followers the leaders may drop from the ISR (one request may drop several)"
)
# The errors after which the leader resets to its last committed ISR (handleAlterPartitionError).
RESETS = ("INELIGIBLE_REPLICA", "OPERATION_NOT_ATTEMPTED")
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


def caught_up(cfg: Config, br: Broker, f: int) -> bool:
    """Whether the leader sees follower f caught up enough to rejoin the ISR (the isr_join
    rule): at the HW (Partition.maybeExpandIsr, 0.8.2), and from 2.0.1 also at the start
    offset of the leader's epoch (Partition.isFollowerInSync, KAFKA-7128)."""
    view = br.views[f - 1]
    if cfg.rule("isr_join") == "hw_and_epoch_start":
        return view >= br.hw and view >= br.start
    return view >= br.hw


def may_join(cfg: Config, br: Broker, f: int) -> bool:
    """Whether the leader may propose follower f back into the ISR after the fetch that
    showed it caught up (isr_update=alter_partition)."""
    if cfg.rule("isr_lag") == "messages" and br.leo - br.views[f - 1] > LAG_MAX_MESSAGES:
        # Kafka adds a follower only on its fetch, which refreshes the leader's view of it; a
        # view the lag rule would drop again at once is one no fetch refreshed since the drop.
        return False
    return caught_up(cfg, br, f)


def eligible_in_view(cfg: Config, c: Controller, br: Broker, f: int) -> bool:
    """Partition.isReplicaIsrEligible on the leader (KIP-841): a follower its own metadata shows
    fenced or in controlled shutdown (KRaftMetadataCache.isBrokerFenced / isBrokerShuttingDown)
    is not proposed for the ISR. The leader's view lags the controller's until it applies the
    metadata (`Broker.ineligible`, spec/metadata.py). Under KIP-903 also its broker-epoch part,
    isBrokerEpochIsrEligible: -1 passes (spec/hw.py, broker_epoch_eligible); under
    incarnations=fenced_first that part is left to the controller's check."""
    if br.ineligible & bit(f):
        return False
    return cfg.rule("incarnations") != "kraft_steps" or broker_epoch_eligible(cfg, c, br, f)


def sent_bepochs(cfg: Config, br: Broker, b: int, proposed: int) -> tuple:
    """The broker epochs the request names for the proposed ISR (Partition.addBrokerEpochToIsr):
    the leader's own, and each follower's from its last fetch; 0 where the leader has none
    (Kafka's -1, which the controller does not check). Before KIP-903 the request has none."""
    if cfg.rule("isr_join_broker_epoch") == "unchecked":
        return ()
    return tuple(
        0 if not proposed & bit(m) else br.bepoch if m == b else br.vbepochs[m - 1] for m in range(1, len(br.views) + 1)
    )


def may_propose(br: Broker, b: int) -> bool:
    """The guard's leader side: b acts as leader with no ISR change pending or unanswered
    (Partition's partitionState.isInflight)."""
    return br.alive and br.leader == b and not br.pending and br.alter is None and br.request is None


def may_deliver(br: Broker, b: int) -> bool:
    """Leader b has an ISR change prepared whose request is still on its way: an expansion
    prepared on a fetch, or (under incarnations=kraft_steps) a shrink (prepare_isr_shrink)."""
    return br.alive and br.leader == b and br.request is not None and br.alter is None


def may_add(cfg: Config, c: Controller, br: Broker, f: int) -> bool:
    """Whether leader b proposes follower f for the ISR: it saw f caught up (may_join) and
    eligible (eligible_in_view); under isr_update=zookeeper additions happen in the fetch."""
    return cfg.rule("isr_update") != "zookeeper" and may_join(cfg, br, f) and eligible_in_view(cfg, c, br, f)


def alter_partition_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> list[AlterPartition]:
    """A prepared change (an expansion prepared on a fetch, a shrink under kraft_steps) reaches
    the controller; or a shrink is proposed. Shrinks the
    leader's own view already rules out are left out (a follower it sees caught up is never
    dropped). A shrink drops any non-empty set of the followers it sees behind
    (`several` adds the sets of two or more). The step checks the rest of the guard (may_drop,
    and the budget per stalled follower)."""
    if may_deliver(br, b):
        return [AlterPartition(b, members(br.pending))]
    if not may_propose(br, b):
        return []
    shrinks_left = cfg.allows(u, ISR_SHRINKS)
    prepared = cfg.rule("incarnations") == "kraft_steps"  # additions come prepared on a fetch
    messages = cfg.rule("isr_lag") == "messages"
    current = members(br.isr)
    out = []
    droppable = 0
    for f in cfg.brokers:
        if f == b or f not in c.replicas and f not in current:  # only the assignment may join
            continue
        if f in current:
            if (shrinks_left or messages) and behind(br, f):
                droppable |= bit(f)
                out.append(AlterPartition(b, tuple(m for m in current if m != f)))
        elif not prepared and may_add(cfg, c, br, f):
            out.append(AlterPartition(b, tuple(sorted(current + (f,)))))
    for dropped in several(droppable):
        out.append(AlterPartition(b, tuple(m for m in current if not dropped & bit(m))))
    return out


def several(droppable: int) -> list[int]:
    """The subsets of two or more of the droppable followers (a bitmask), smallest first: with
    the single ones, every non-empty set a shrink may drop.

    Partition.maybeShrinkIsr drops every follower getOutOfSyncReplicas finds, in one request
    (prepareIsrShrink). Which of several stalled followers have passed replica.lag.time.max.ms
    when the periodic check runs depends on clocks the model does not keep, so any non-empty
    set of them may go together."""
    subsets = []
    sub = droppable
    while sub:
        if sub & (sub - 1):  # two members or more
            subsets.append(sub)
        sub = (sub - 1) & droppable
    return sorted(subsets, key=lambda m: (size(m), m))


def awaits_response(br: Broker) -> bool:
    """The guard of HandleAlterPartitionResponse: b has an answer to its AlterPartition (only a
    leader sends one; becoming a follower drops it, metadata.as_follower)."""
    return br.alive and br.alter is not None


def alter_partition_response_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (HandleAlterPartitionResponse(b),) if awaits_response(br) else ()


def alter_partition(cfg: Config, state: State, a: AlterPartition) -> State | None:
    """The controller decides an ISR change from leader `a.leader`: a change the leader prepared
    (prepare_isr_expand, prepare_isr_shrink) reaches it, or the leader drops a non-empty set of
    followers it considers out of sync (Partition.maybeShrinkIsr: prepared and sent here, or
    under incarnations=kraft_steps prepared here and delivered at a later step).

    An expansion is prepared on the fetch that showed the follower caught up, with the broker
    epochs of that moment, and may reach the controller at any later step: after that follower
    crashed, restarted and registered again, for instance. The controller's broker-epoch check
    (KIP-903) is what refuses a position from the follower's previous life, unless the request
    names -1. Under isr_update=zookeeper there was no such request: the leader added the
    follower inside that fetch (expand_isr_in_fetch), and this step only shrinks. Under
    incarnations=fenced_first (the coarser model, no fetch before registration) nothing is
    prepared: the leader proposes an addition from its view of the follower at any step."""
    b = a.leader
    br = state.broker(b)
    proposed = 0
    for m in a.isr:
        proposed |= bit(m)
    if may_deliver(br, b):
        if proposed != br.pending:
            return None
        state, resp = handle_alter_partition(cfg, state, br.epoch, br.pepoch, proposed, br.request or ())
        return state.with_broker(b, replace(br, request=None, alter=resp))
    if not may_propose(br, b):
        return None
    removed, added = br.isr & ~proposed, proposed & ~br.isr
    # One follower added, or a non-empty set removed (maybeExpandIsr / maybeShrinkIsr), never both.
    if proposed & bit(b) == 0 or (removed and added) or not (removed or added) or size(added) > 1:
        return None
    budget = state.budget
    if removed:
        dropped = members(removed)
        if not all(may_drop(cfg, state, br, f) for f in dropped):
            return None
        # The bound counts the stalled followers dropped (each a fault): one request that drops
        # two spends two, so a bound keeps its meaning whether the drops come together or apart
        # (and the search its size). A follower that still fetches but lags by records
        # (isr_lag=messages) is dropped by the protocol itself and spends nothing.
        for f in dropped:
            if state.is_stalled(f):
                if not cfg.allows(budget, ISR_SHRINKS):
                    return None
                budget = budget.spend(ISR_SHRINKS.name)
    elif cfg.rule("incarnations") == "kraft_steps" or not may_add(cfg, state.controller, br, members(added)[0]):
        return None  # under kraft_steps an addition is only ever a prepared one (above)
    if removed and cfg.rule("incarnations") == "kraft_steps":
        return prepare_isr_shrink(cfg, replace(state, budget=budget), b, proposed)
    return write_isr(cfg, replace(state, budget=budget), b, proposed)


def prepare_isr_shrink(cfg: Config, state: State, b: int, proposed: int) -> State:
    """Partition.maybeShrinkIsr -> prepareIsrShrink (incarnations=kraft_steps): the leader logs
    "Shrinking ISR from ... to ...", builds the request (addBrokerEpochToIsr) and hands it to
    the AlterPartitionManager (submitAlterPartition); it reaches the controller at a later step
    (may_deliver), as a prepared expansion does. Meanwhile the partition is PendingShrinkIsr:
    isInflight, so no other change is prepared, and its maximalIsr is the current ISR ("we
    cannot assume that the update will succeed as this could erroneously advance the HW"), so
    the dropped followers' fetches still move the HW and complete acks=all requests until the
    answer comes back (handleAlterPartitionUpdate; seeds 905 and 920 of issue 41's runs). Under
    the default (fenced_first) the decision and the controller's write are one step."""
    br = state.broker(b)
    return state.with_broker(b, replace(br, pending=proposed, request=sent_bepochs(cfg, br, b, proposed)))


def prepare_isr_expand(cfg: Config, state: State, b: int, f: int) -> State:
    """Partition.maybeExpandIsr, run by the fetch that updated follower f's state on leader b:
    with no ISR change in flight, f outside the ISR, caught up and eligible in the leader's
    view (canAddReplicaToIsr, isFollowerInSync), prepareIsrExpand makes the maximal ISR the
    ISR plus f at once (the HW counts it) and the request names each member's broker epoch as
    stored now (addBrokerEpochToIsr: f's from this fetch, -1 included)."""
    br = state.broker(b)
    c = state.controller
    if not may_propose(br, b) or br.isr & bit(f) or f not in c.replicas or not may_add(cfg, c, br, f):
        return state
    proposed = br.isr | bit(f)
    return state.with_broker(b, replace(br, pending=proposed, request=sent_bepochs(cfg, br, b, proposed)))


def write_isr(cfg: Config, state: State, b: int, proposed: int) -> State | None:
    """Leader b sends the ISR `proposed` to the controller. Under isr_update=zookeeper the
    leader wrote the ISR itself, a ZooKeeper write conditional on the partition's version
    (ReplicationUtils.updateLeaderAndIsr): it took effect, or failed and changed nothing,
    before the leader went on, so no change is ever in flight."""
    br = state.broker(b)
    state, resp = handle_alter_partition(cfg, state, br.epoch, br.pepoch, proposed, sent_bepochs(cfg, br, b, proposed))
    nxt = state.with_broker(b, replace(br, pending=proposed, alter=resp))
    if cfg.rule("isr_update") == "zookeeper":
        return handle_alter_partition_response(cfg, nxt, HandleAlterPartitionResponse(b))
    return nxt


def expand_isr_in_fetch(cfg: Config, state: State, b: int, f: int) -> State:
    """Before AlterPartition (isr_update=zookeeper), the fetch that shows follower f caught up
    adds it to the ISR itself, before the HW is recomputed: Partition.
    updateLeaderHWAndMaybeExpandIsr (0.8.2), maybeExpandIsr called by updateReplicaLogReadResult
    (0.9.0 to 2.3) or by updateFollowerFetchState (2.4 to 2.6). The position is the
    offset of this fetch, so it is the follower's current incarnation's: a leader never adds
    a restarted follower on what it fetched before the restart (it keeps that stale position
    until the next fetch, as Partition.makeLeader resets followers' state only for a new
    leader). No lag check: maybeExpandIsr had none; replica.lag.max.messages only shrank."""
    br = state.broker(b)
    if br.isr & bit(f) or f not in state.controller.replicas or not caught_up(cfg, br, f):
        return state
    if not eligible_in_view(cfg, state.controller, br, f):
        return state
    return write_isr(cfg, state, b, br.isr | bit(f)) or state  # never None: b is alive


def handle_alter_partition_response(cfg: Config, state: State, a: HandleAlterPartitionResponse) -> State | None:
    """The leader commits the change it proposed, or rolls back to the ISR it last committed, or
    stays pending until new metadata arrives (Partition.submitAlterPartition's completion).

    An accepted change is taken only in the leader's own epoch, at a partition epoch not behind
    its own (handleAlterPartitionUpdate): the answer carries the partition's epochs after the
    change, so when the change completed a reassignment that bumped the leader epoch, the leader
    ignores it. Of the errors only INELIGIBLE_REPLICA (and OPERATION_NOT_ATTEMPTED) mean the
    request was not applied, and reset the committed state (handleAlterPartitionError);
    FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INVALID_REQUEST and NEW_LEADER_ELECTED (the
    change was made and removed this leader) leave the proposal pending, its maximal ISR holding
    the HW, until the metadata overrides it. Under isr_update=zookeeper the leader wrote the ISR
    itself in the same step: a failed conditional write leaves its ISR as it was."""
    b = a.leader
    br = state.broker(b)
    resp = br.alter
    if resp is None or not awaits_response(br):
        return None
    zookeeper = cfg.rule("isr_update") == "zookeeper"
    if resp.ok and br.leader == b and (zookeeper or (resp.epoch == br.epoch and resp.pepoch >= br.pepoch)):
        br = replace(br, alter=None, pending=0, isr=resp.isr, pepoch=resp.pepoch)
    elif zookeeper or resp.error in RESETS:
        br = replace(br, alter=None, pending=0)
    else:
        return state.with_broker(b, replace(br, alter=None))
    nxt = state.with_broker(b, br)
    return advance_leader_hw(cfg, nxt, b) if br.leader == b else nxt


# ---------------------------------------------------------------- how a trace tells them


def alter_partition_html(a: AlterPartition, state: State, prev: State, draw) -> None:
    draw.msg(draw.lane(a.leader), "controller", "AlterPartition ISR {" + ",".join(map(str, a.isr)) + "}")


def response_html(a: HandleAlterPartitionResponse, state: State, prev: State, draw) -> None:
    reply = prev.broker(a.leader).alter
    label = (
        "AlterPartition reply"
        if reply is None
        else (f"ok: ISR {draw.ids(reply.isr)}" if reply.ok else f"error {reply.error}")
    )
    draw.msg("controller", draw.lane(a.leader), label, "response")


def isr_change(cfg: Config, steps: list, i: int, say) -> list[str]:
    """An ISR change the leader asked for, with why a follower was dropped."""
    action, state = steps[i]
    before, after = steps[i - 1][1].controller, state.controller
    if before.isr == after.isr:
        return []
    ld = action.leader
    removed, added = members(before.isr & ~after.isr), members(after.isr & ~before.isr)
    out = []
    if before.replicas != after.replicas:  # the expansion completed a reassignment
        f = added[0] if added else members(before.removing)[0]
        out.append(
            f"leader {ld} added broker {f} to the ISR, which completed the reassignment: "
            f"replicas {list(after.replicas)}, ISR {say.ids(after.isr)}"
        )
        if after.leader != before.leader:
            out.append("the controller " + say.election(cfg, action, before, state))
        return out
    if removed:
        f = removed[0]
        j = _prepared_at(steps, i, ld)
        when = f" (prepared at step {j})" if j < i else ""
        out.append(f"leader {ld} shrank the ISR to {say.ids(after.isr)}{when}: follower {f} {_lag(steps, j, f)}")
    if added:
        f = added[0]
        out.append(f"leader {ld} expanded the ISR to {say.ids(after.isr)} with broker {f}" + _caught_up(steps, i, f))
    if after.elr != before.elr:
        out.append(f"ELR now {say.ids(after.elr)}")
    if before.recovering and not after.recovering:
        out.append("the partition is RECOVERED")
    return out


def _prepared_at(steps: list, i: int, ld: int) -> int:
    """The step that prepared the change leader ld delivers at step i (prepare_isr_shrink), or i."""
    j = i
    while j > 1 and steps[j - 1][1].broker(ld).request is not None:
        j -= 1
    return j


def _caught_up(steps: list, i: int, f: int) -> str:
    """What the leader went by when it let follower f back in, when that was not the truth."""
    action, state = steps[i]
    lead, fol = steps[i - 1][1].broker(action.leader), state.broker(f)
    seen, epoch = lead.views[f - 1], lead.vbepochs[f - 1]
    if epoch and epoch != fol.bepoch:
        return f", going by a fetch at offset {seen} from its previous life (broker epoch {epoch}, now {fol.bepoch})"
    if seen > fol.leo:
        return f", going by a fetch at offset {seen}, though its log now ends at offset {fol.leo}"
    return ""


def _lag(steps: list, i: int, f: int) -> str:
    """Why a leader took follower f for out of sync: when it stalled, or how far behind it was."""
    if not steps[i - 1][1].broker(f).stalled:
        return "was behind the leader's log end (replica.lag.max.messages)"
    stalled = [j for j in range(1, i) if steps[j][1].broker(f).stalled and not steps[j - 1][1].broker(f).stalled]
    when = f" at step {stalled[-1]}" if stalled else ""
    return f"had stopped fetching{when} (replica.lag.time.max.ms)"


ALTER_PARTITION_WORDS = Wording(html=alter_partition_html, isr_change=isr_change)
RESPONSE_WORDS = Wording(html=response_html)
