"""The story of a counterexample: a few lines an engineer would write after the incident.

Generated from the trace alone: each step's state is diffed with the one before it (logs,
the controller's leader, ISR and ELR, what producers and consumers were told) and the
action that made the difference names the cause, in the words of its entry in Next
(spec/wording.py: each action's module writes them). Nothing here is written per action.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

from kafkamc.invariants.reach import catalog as reach_catalog
from kafkamc.spec.config import Config
from kafkamc.spec.hw import consumer_hw, hw_isr
from kafkamc.spec.next import entry
from kafkamc.spec.protocol import NEWEST, PRESETS
from kafkamc.spec.state import NO_LEADER, UNKNOWN, Broker, Controller, Ghost, State, bit, members
from kafkamc.spec.wording import Told

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
    words = entry(action).wording
    out = []
    told_lost = 0  # the broker whose lost records the action's own event told
    if words.event is not None:
        text, told_lost = words.event(cfg, action, prev, state, SAY)
        out.append(text)
    told = False  # a truncation sentence of the action's own broker already says what it did (a restart)
    for b in cfg.brokers:
        lost = _lost(prev.broker(b).log, state.broker(b).log)
        if lost and b != told_lost:
            out.append(_truncation(cfg, action, b, prev, state, lost))
            told |= words.truncation is not None and getattr(action, "broker", None) == b
    if words.isr_change is not None:
        out += words.isr_change(cfg, steps, i, SAY)
    else:
        out += _controller(cfg, action, prev.controller, state, told)
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


def _truncation(cfg: Config, action, b: int, prev: State, state: State, lost: list[Entry]) -> str:
    """Why follower b dropped records: the truncation rule at work in this step."""
    br = state.broker(b)
    who: str | None = f"broker {b}, follower of {br.leader} in epoch {br.epoch},"
    truncation = entry(action).wording.truncation
    if truncation is None:
        to = f"offset {br.leo} during {type(action).__name__}"
    else:
        said, to = truncation(cfg, action, b, prev, state)
        who = said or who
    return f"{who} truncated its log to {to}, dropping {_entries(prev.ghost, lost)}"


def _controller(cfg: Config, action, before: Controller, state: State, told: bool = False) -> list[str]:
    """What the controller decided in this step, after what made it decide, in the action's own
    words (a session timeout, a fence, a registration unless `told`: the truncation said it, an
    operator's request), then what any step may bring: a completed reassignment, an election."""
    after = state.controller
    words = entry(action)
    hook = words.wording.controller
    said = hook(cfg, action, before, state, told, SAY) if hook is not None else Told()
    cause, did = said.cause, list(said.did)
    if before.replicas != after.replicas and not words.moves_replicas:  # one that moves them says so
        did.append(f"completed the reassignment: replicas now {list(after.replicas)}")
    did += said.after
    if after.leader != before.leader:
        did.append(_election(cfg, action, before, state))
    elif (after.isr, after.elr) != (before.isr, before.elr) and not said.after:
        if not did:
            did.append("changed the partition")
        did[0] += ": " + _membership(cfg, after, before)
    if not did:
        return [cause] if cause else []
    said_text = "the controller " + " and ".join(did)
    return [f"{cause}; {said_text}" if cause else said_text]


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
    election = entry(action).wording.election
    said = election(action, before, after) if election is not None else None
    if said is not None:
        how = said
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


# The phrases an action's own words may use (spec/wording.py: `say`).
SAY = SimpleNamespace(ids=_ids, log=_log, entries=_entries, lost=_lost, assignment=_assignment, election=_election)
