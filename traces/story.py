"""The story of a counterexample: a few lines an engineer would write after the incident.

Generated from the trace alone: each step's state is diffed with the one before it (logs,
the controller's leader, ISR and ELR, what producers and consumers were told) and the
action that made the difference names the cause. Nothing here is written per case.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkamc.invariants.reach import catalog as reach_catalog
from kafkamc.spec.alter_partition import AlterPartition
from kafkamc.spec.broker_lifecycle import (
    BrokerCrash,
    BrokerHeartbeat,
    BrokerRestart,
    BrokerSessionTimeout,
    ControllerFenceBroker,
)
from kafkamc.spec.config import Config
from kafkamc.spec.controlled_shutdown import ControlledShutdown, ControlledShutdownComplete
from kafkamc.spec.elect_leaders import AutoLeaderRebalance, ElectLeaders
from kafkamc.spec.fetch import Fetch, OffsetsForLeaderEpoch
from kafkamc.spec.hw import consumer_hw, hw_isr
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.protocol import NEWEST, PRESETS
from kafkamc.spec.reassignment import AlterPartitionReassignments, CancelPartitionReassignment
from kafkamc.spec.state import NO_LEADER, UNKNOWN, Broker, Controller, Ghost, State, bit, members

if TYPE_CHECKING:
    from kafkamc.traces.trace import Trace

Entry = tuple[int, tuple[int, int]]  # (offset, (leader epoch, record id))


def story(trace: Trace) -> list[str]:
    """The incident summary of a violation; one line for a reachability witness; else nothing."""
    steps = trace.steps
    if trace.invariant is None:
        return _reached(trace)
    cfg = trace.config
    era = cfg.protocol.era()
    if era == "custom":
        changed = cfg.protocol.differences(PRESETS[NEWEST])
        era = "newest but " + ", ".join(f"{k}={v}" for k, v in changed.items())
    lines = [
        f"What happened (rf={cfg.rf}, min.insync.replicas={cfg.effective_minisr}, acks={cfg.acks}, "
        f"unclean election {'on' if cfg.unclean else 'off'}, protocol {era}):"
    ]
    loop, cycle = trace.loop, forever(trace)  # a lasso's: told before the steps that repeat
    for i in range(1, len(steps)):
        if loop is not None and i == loop + 1:
            lines.append(f"from step {loop}: {cycle}")
        events = step_events(cfg, steps, i)
        if events:
            lines.append(f"step {i}: " + "; ".join(events))
    last = len(steps) - 1
    lines.append(f"at step {last}: " + "; ".join(_ending(cfg, steps[-1][1], steps[-2][1] if last else None)))
    if loop == last:
        lines.append(f"from step {last}: {cycle}")
    meaning = (trace.explanation or {}).get("meaning")
    broken = "promise broken" if cycle is None else "never happens"  # a lasso breaks no step: it goes on forever
    lines.append(f"{broken}: {meaning} ({trace.invariant})" if meaning else f"{broken}: {trace.invariant}")
    return lines


def forever(trace: Trace) -> str | None:
    """What a liveness lasso does from its loop step on (None for any other trace): every view says it so."""
    loop, last = trace.loop, len(trace.steps) - 1
    if loop is None:
        return None
    if loop == last:
        return f"the state of step {last} stays forever (no fair step is enabled in it)"
    run = f"step {last} repeats" if loop + 1 == last else f"steps {loop + 1} to {last} repeat"
    return f"{run} forever (step {last} returns to the state of step {loop})"


def loop_marker(trace: Trace, index: int) -> str | None:
    """The mark on a lasso's loop step: where its cycle starts, or the state that stays forever."""
    if trace.loop is None or index != trace.loop:
        return None
    return "stays here forever" if trace.loop == len(trace.steps) - 1 else "cycle starts here"


def _reached(trace: Trace) -> list[str]:
    """A witness gets one line: the property, and what its last step did."""
    name = trace.reached
    if name is None or len(trace.steps) < 2:
        return []
    known = list(reach_catalog(trace.config))
    if trace.property_file is not None:
        known += trace.property_file.declared()[1]
    meaning = next((r.meaning for r in known if r.name == name), "")
    last = len(trace.steps) - 1
    events = step_events(trace.config, trace.steps, last) or ["see the last step"]
    return [f"how {name} was reached" + (f" ({meaning})" if meaning else "") + f": at step {last} " + "; ".join(events)]


def step_events(cfg: Config, steps: list, i: int) -> list[str]:
    """What step i did that an incident summary reports, in Kafka's words; [] for routine steps."""
    action, state = steps[i]
    prev = steps[i - 1][1]
    out = []
    crashed = action.broker if isinstance(action, BrokerCrash) else None
    if crashed is not None:
        out.append(_crash(action, prev, state))
    restart_told = False  # a truncation on restart already says the broker restarted
    for b in cfg.brokers:
        lost = _lost(prev.broker(b).log, state.broker(b).log)
        if lost and b != crashed:
            out.append(_truncation(cfg, action, b, prev, state, lost))
            restart_told |= isinstance(action, BrokerRestart) and action.broker == b
    if isinstance(action, AlterPartition):
        out += _isr_change(cfg, steps, i)
    else:
        out += _controller(cfg, action, prev.controller, state, restart_told)
    out += _told(cfg, action, prev, state)
    return [e for e in out if e]


# ---------------------------------------------------------------- records and logs


def _ids(mask: int) -> str:
    return "{" + ",".join(map(str, members(mask))) + "}"


def _lost(before: tuple, after: tuple) -> list[Entry]:
    """The entries of `before` that are no longer at their offset in `after`."""
    same = 0
    while same < min(len(before), len(after)) and before[same] == after[same]:
        same += 1
    return list(enumerate(before))[same:]


def _tags(g: Ghost, offset: int, rec: int) -> list[str]:
    tags = []
    if offset < len(g.committed) and g.committed[offset] == rec:
        tags.append("committed")
    if g.acked >> (rec - 1) & 1:
        tags.append("acknowledged")
    return tags


def _entries(g: Ghost, entries: list[Entry]) -> str:
    """r1 at offset 0 (epoch 1, committed, acknowledged), ..."""
    return ", ".join(
        f"r{rec} at offset {off} (" + ", ".join([f"epoch {ep}", *_tags(g, off, rec)]) + ")"
        for off, (ep, rec) in entries
    )


def _log(br: Broker) -> str:
    if not br.log:
        return "an empty log"
    if br.leo == 1:
        return f"r{br.log[0][1]} at offset 0"
    return " ".join(f"r{rec}" for _, rec in br.log) + f" at offsets 0-{br.leo - 1}"


def _missing(g: Ghost, br: Broker) -> list[str]:
    """What producers or consumers were promised that this log lacks."""
    held = {rec for _, rec in br.log}
    out = []
    for off, rec in enumerate(g.committed):
        if off >= br.leo or br.log[off][1] != rec:
            out.append(f"r{rec} (" + ", ".join(_tags(g, off, rec)) + ")")
    for rec in range(1, g.acked.bit_length() + 1):
        if g.acked >> (rec - 1) & 1 and rec not in held and rec not in g.committed:
            out.append(f"r{rec} (acknowledged)")
    return out


def _holders(state: State, off: int, rec: int) -> tuple[int, ...]:
    return tuple(b for b, br in enumerate(state.brokers, 1) if off < br.leo and br.log[off][1] == rec)


# ---------------------------------------------------------------- what a step did


def _crash(a: BrokerCrash, prev: State, state: State) -> str:
    """The crash itself: the controller learns nothing of it (BrokerSessionTimeout does)."""
    b = a.broker
    if a.keep is None:
        return f"broker {b} shut down cleanly, its log flushed"
    lost = _lost(prev.broker(b).log, state.broker(b).log)
    if not lost:
        text = f"broker {b} hard-crashed (kill -9, power loss) with its whole log flushed"
    else:
        kept = f"; the {a.keep} record(s) before it had been flushed" if a.keep else ""
        text = (
            f"broker {b} hard-crashed (kill -9, power loss) and lost the unflushed tail of its log: "
            f"{_entries(prev.ghost, lost)}{kept}"
        )
    return text + _checkpoint_lag(a.keep, prev.broker(b), state.broker(b))


def _checkpoint_lag(keep: int, before: Broker, after: Broker) -> str:
    """HW progress a hard crash loses because the checkpoint file lagged the HW in memory; ""
    when the checkpoint was current (the surviving log end alone caps the HW, if anything)."""
    if after.hw >= min(before.hw, keep):
        return ""
    return (
        f"; its HW checkpoint (replication-offset-checkpoint) still said {before.checkpoint_hw}, behind "
        f"its HW {before.hw} in memory, so it will restart with HW {after.hw}"
    )


def _truncation(cfg: Config, action, b: int, prev: State, state: State, lost: list[Entry]) -> str:
    """Why follower b dropped records: the truncation rule at work in this step."""
    br, before = state.broker(b), prev.broker(b)
    who = f"broker {b}, follower of {br.leader} in epoch {br.epoch},"
    to = f"offset {br.leo}"
    if isinstance(action, OffsetsForLeaderEpoch):
        to += f" where leader {action.leader} said epoch {before.last_epoch()} ends (OffsetsForLeaderEpoch)"
    elif isinstance(action, Fetch) and cfg.rule("truncation") == "diverging_epoch":
        to += f" on a diverging-epoch fetch response from leader {action.leader}"
    elif isinstance(action, Fetch):
        to += f" on OFFSET_OUT_OF_RANGE from leader {action.leader}: it was ahead of the leader's log end"
    elif isinstance(action, (MetadataUpdate, BrokerRestart)):
        to = f"its own HW {br.hw} (the rule before KIP-101)"
        who = f"broker {b} became follower of {br.leader} in epoch {br.epoch} and"
        if isinstance(action, BrokerRestart):
            who = f"broker {b} restarted (broker epoch {br.bepoch}), became follower of {br.leader} and"
    else:
        to += f" during {type(action).__name__}"
    return f"{who} truncated its log to {to}, dropping {_entries(prev.ghost, lost)}"


def _isr_change(cfg: Config, steps: list, i: int) -> list[str]:
    """An ISR change the leader asked for (AlterPartition), with why a follower was dropped."""
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
            f"replicas {list(after.replicas)}, ISR {_ids(after.isr)}"
        )
        if after.leader != before.leader:
            out.append("the controller " + _election(cfg, action, before, state))
        return out
    if removed:
        f = removed[0]
        out.append(f"leader {ld} shrank the ISR to {_ids(after.isr)}: follower {f} {_lag(steps, i, f)}")
    if added:
        f = added[0]
        out.append(f"leader {ld} expanded the ISR to {_ids(after.isr)} with broker {f}" + _caught_up(steps, i, f))
    if after.elr != before.elr:
        out.append(f"ELR now {_ids(after.elr)}")
    if before.recovering and not after.recovering:
        out.append("the partition is RECOVERED")
    return out


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


def _controller(cfg: Config, action, before: Controller, state: State, restart_told: bool = False) -> list[str]:
    """What the controller decided in this step, after what made it decide: a session timeout,
    a fence, a registration (unless `restart_told`: the truncation said it), an operator's request."""
    after = state.controller
    b = getattr(action, "broker", getattr(action, "preferred", NO_LEADER))
    cause, did = "", []
    if isinstance(action, BrokerSessionTimeout):
        cause = f"broker {b}'s session timed out (broker.session.timeout.ms)"
        did.append("fenced it")
    elif isinstance(action, ControllerFenceBroker):
        did.append(f"fenced broker {b} though it is still running (missed heartbeats)")
    elif isinstance(action, BrokerRestart) and not restart_told:
        br = state.broker(b)
        cause = f"broker {b} restarted (broker epoch {br.bepoch}) with {_log(br)}"
    elif isinstance(action, BrokerHeartbeat):
        did.append(f"unfenced broker {b} on its heartbeat")
    elif isinstance(action, ElectLeaders):
        cause = f"an operator asked for a preferred leader election of broker {b} (ElectLeaders)"
    elif isinstance(action, AutoLeaderRebalance):
        cause = (
            f"the controller's automatic leader rebalance (auto.leader.rebalance.enable, on by default) "
            f"found preferred replica {b} not leading"
        )
    elif isinstance(action, ControlledShutdown):
        cause = f"broker {b} asked for a controlled shutdown (a rolling restart)"
        did.append("marked it as shutting down, no longer eligible to lead or join the ISR")
    elif isinstance(action, ControlledShutdownComplete):
        cause = f"broker {b} led nothing and every active broker had applied its shutdown"
        did.append("told it to stop and fenced it; it stopped cleanly")
    elif isinstance(action, AlterPartitionReassignments):
        incoming = [r for r in action.target if r not in before.replicas]
        cause = f"an operator moved the partition to replicas {list(action.target)} (AlterPartitionReassignments)"
        one = len(incoming) == 1
        brokers = f"broker {incoming[0]} as an adding replica" if one else f"brokers {incoming} as adding replicas"
        did.append(f"added {brokers} ({_assignment(after)})")
    elif isinstance(action, CancelPartitionReassignment):
        cause = "an operator cancelled the reassignment (AlterPartitionReassignments with no target)"
        did.append(f"reverted it (PartitionReassignmentRevert): replicas now {list(after.replicas)}")
    if before.replicas != after.replicas and not isinstance(
        action, (AlterPartitionReassignments, CancelPartitionReassignment)
    ):
        did.append(f"completed the reassignment: replicas now {list(after.replicas)}")
    dropped = isinstance(action, BrokerRestart) and (before.isr | before.elr) & ~(after.isr | after.elr) & bit(b)
    if dropped:
        lists = " and ".join(n for n, m in (("ISR", before.isr), ("ELR", before.elr)) if m & bit(b))
        did.append(f"dropped it from the {lists} after its unclean shutdown (KAFKA-15586)")
    if after.leader != before.leader:
        did.append(_election(cfg, action, before, state))
    elif (after.isr, after.elr) != (before.isr, before.elr) and not dropped:
        if not did:
            did.append("changed the partition")
        did[0] += ": " + _membership(cfg, after, before)
    if not did:
        return [cause] if cause else []
    said = "the controller " + " and ".join(did)
    return [f"{cause}; {said}" if cause else said]


def _assignment(c: Controller) -> str:
    """The replica set, with a reassignment's adding and removing replicas."""
    text = f"replicas {list(c.replicas)}"
    if c.adding or c.removing:
        text += f", adding {_ids(c.adding)}, removing {_ids(c.removing)}"
    return text


def _membership(cfg: Config, c: Controller, before: Controller | None = None) -> str:
    """The ISR, and the ELR when it has or had members."""
    elr = cfg.rule("elr") == "on" and (c.elr or before is None or before.elr)
    return f"ISR {_ids(c.isr)}" + (f", ELR {_ids(c.elr)}" if elr else "")


def _election(cfg: Config, action, before: Controller, state: State) -> str:
    """The new leader, how it was chosen (the kind of election), and what its log lacks."""
    after = state.controller
    b = after.leader
    if b == NO_LEADER:
        return f"left the partition offline: no eligible leader ({_membership(cfg, after)})"
    if isinstance(action, (ElectLeaders, AutoLeaderRebalance)):
        how = "as the preferred replica"
    elif isinstance(action, ControlledShutdown):
        how = f"in place of broker {action.broker}, which is shutting down"
    elif isinstance(action, CancelPartitionReassignment) and before.leader not in after.replicas:
        how = f"in place of broker {before.leader}, an adding replica the cancel removed"
    elif before.replicas != after.replicas and before.leader not in after.replicas:
        how = f"in place of broker {before.leader}, which the reassignment removed"
    elif after.recovering and before.lastelr & bit(b):
        how = "as the last known leader (KIP-966: ISR and ELR were empty); the partition is RECOVERING"
    elif after.recovering and not (before.recovering and before.isr & bit(b)):
        how = (
            f"in an unclean election (unclean.leader.election.enable) though it was not in the ISR "
            f"{_ids(before.isr)}; the partition is RECOVERING"
        )
    elif (before.isr | after.isr) & bit(b):
        how = f"from the ISR {_ids(after.isr if after.isr & bit(b) else before.isr)} (a clean election)"
    elif before.elr & bit(b):
        how = f"from the ELR {_ids(before.elr)} (KIP-966)"
    else:
        how = ""
    who = "it" if getattr(action, "broker", None) == b else f"broker {b}"
    br = state.broker(b)
    if not br.alive:  # still registered: the controller does not know it crashed
        how += f", though broker {b} is down (its session has not timed out yet)"
    missing = _missing(state.ghost, br)
    has = f"{who} has {_log(br)}" if who != "it" or br.log else ""
    lacks = f"{who} lacks " + ", ".join(missing) if missing else has
    return f"elected {who} leader of epoch {after.epoch} {how}".rstrip() + (f"; {lacks}" if lacks else "")


def _told(cfg: Config, action, prev: State, state: State) -> list[str]:
    """What producers and consumers learned in this step: acknowledgements and commits."""
    g0, g = prev.ghost, state.ghost
    acked = [r for r in range(1, g.acked.bit_length() + 1) if (g.acked & ~g0.acked) >> (r - 1) & 1]
    committed = list(enumerate(g.committed))[len(g0.committed) :]
    out = []
    t = state.true_leader()
    if committed and t != NO_LEADER:
        text = f"leader {t}'s HW reached {state.broker(t).hw} {_over(cfg, state, t)}: {_recs(committed)} committed"
        if sorted(rec for _, rec in committed) == acked:
            text += f" and acknowledged to the producer (acks={cfg.acks})"
            acked = []
        out.append(text + _copies(state, committed))
    ld = _acking_leader(action, prev, acked[0]) if acked else NO_LEADER
    if ld != NO_LEADER:
        entries = [(off, rec) for off, (_, rec) in enumerate(state.broker(ld).log) if rec in acked]
        when = (
            "as soon as it appended, before any follower fetched (acks=1)"
            if cfg.acks == "1"
            else f"(acks=all) {_over(cfg, state, ld)}"
        )
        role = "leader" if ld == state.true_leader() else "zombie leader"
        out.append(f"{role} {ld} acknowledged {_recs(entries)} to the producer {when}" + _copies(state, entries))
    return out


def _over(cfg: Config, state: State, leader: int) -> str:
    """The ISR a leader counted, and how it differs from what it should have been."""
    isr = hw_isr(cfg, state.broker(leader))
    text = f"over its ISR {_ids(isr)}"
    if isr != state.controller.isr:
        text += f" (the controller's ISR: {_ids(state.controller.isr)})"
    if len(members(isr)) < cfg.effective_minisr:
        text += f", below min.insync.replicas={cfg.effective_minisr}"
    views = state.broker(leader).views
    for f in members(isr):
        if f != leader and not state.broker(f).alive:  # counted until its session times out
            seen = f"a fetch at offset {views[f - 1]}" if views[f - 1] != UNKNOWN else "no fetch"
            text += f", going by {seen} from broker {f} before it crashed"
    return text


def _recs(entries: list) -> str:
    return ", ".join(f"r{rec} at offset {off}" for off, rec in entries)


def _acking_leader(action, prev: State, rec: int) -> int:
    """The leader that answered the producer: the one holding the request in purgatory (acks=all),
    or the one it produced to (acks=1)."""
    for b, br in enumerate(prev.brokers, 1):
        if any(r == rec for _, r, _ in br.purgatory):
            return b
    return getattr(action, "leader", NO_LEADER)


def _copies(state: State, entries: list) -> str:
    """Where the records are now: the brokers whose logs hold them at their offsets."""
    holders = sorted(set.intersection(*(set(_holders(state, off, rec)) for off, rec in entries)))
    them = "it" if len(entries) == 1 else "them"
    if not holders:
        return f"; no broker has {them}"
    if len(holders) == 1:
        return f"; only broker {holders[0]} has {them}"
    return "; brokers " + ",".join(map(str, holders)) + f" have {them}"


# ---------------------------------------------------------------- the end


def _ending(cfg: Config, last: State, before: State | None) -> list[str]:
    """The facts at the last step that the broken promise is about."""
    g = last.ghost
    facts = []
    t = last.true_leader()
    if t != NO_LEADER:
        br = last.broker(t)
        fact = f"leader {t} (epoch {br.epoch}) has {_log(br)} and HW {br.hw}"
        missing = _missing(g, br)
        if missing:
            fact += ", lacking " + ", ".join(missing)
        facts.append(fact)
        seen = before.ghost.hw_seen if before is not None else g.hw_seen
        exposed = consumer_hw(cfg, br)
        if 0 <= exposed < seen:
            facts.append(f"consumers now read HW {exposed} from it after seeing HW {seen}")
    else:
        c = last.controller
        if c.leader == NO_LEADER:
            facts.append("no broker leads the partition")
        elif not last.broker(c.leader).alive:
            facts.append(
                f"broker {c.leader}, the controller's leader of epoch {c.epoch}, is down "
                "(its session has not timed out yet)"
            )
        else:
            facts.append(f"broker {c.leader} is the controller's leader of epoch {c.epoch} but does not know it yet")
    c = last.controller
    for name, mask in (("ISR", c.isr), ("ELR", c.elr & c.registered)):  # those that may lead next
        for b in members(mask):
            br = last.broker(b)
            if b != t and br.alive:
                gaps = [f"r{rec}" for off, rec in enumerate(g.committed) if off >= br.leo or br.log[off][1] != rec]
                if gaps:
                    facts.append(f"{name} member {b} lacks committed {', '.join(gaps)}")
    for b, br in enumerate(last.brokers, 1):
        if br.alive and br.leader == b and b != t:
            facts.append(f"broker {b} still acts as leader of epoch {br.epoch} (a zombie)")
    return facts
