"""Render a trace in the terminal with rich: a table per step, what changed highlighted."""

from __future__ import annotations

from kafkamc.spec.state import NO_LEADER, UNKNOWN, State, members
from kafkamc.traces.trace import Trace, format_action
from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

CHANGED = "bold yellow"


def _ids(mask: int) -> str:
    return "{" + ",".join(str(b) for b in members(mask)) + "}"


def _log(br) -> str:
    if not br.log:
        return "-"
    cells = []
    for offset, (epoch, rec) in enumerate(br.log):
        mark = "|" if offset == br.hw else " "
        cells.append(f"{mark}{offset}:r{rec}@e{epoch}")
    tail = " |" if br.hw == len(br.log) else ""
    return "".join(cells).strip() + tail


def role(state: State, b: int) -> str:
    br = state.broker(b)
    c = state.controller
    if not br.alive:
        return "crashed"
    fenced = "" if c.registered & (1 << (b - 1)) else ", fenced"
    if br.leader == b:
        if state.true_leader() == b:
            return "leader" + fenced
        return "zombie leader" + fenced
    if br.leader == NO_LEADER:
        return "no leader known" + fenced
    extra = ", truncating" if br.truncating else ""
    extra += ", stalled" if br.stalled else ""
    return f"follower of {br.leader}" + fenced + extra


def broker_row(state: State, b: int) -> dict:
    """The columns of one broker's lane, as strings."""
    br = state.broker(b)
    if br.leader == b and br.alive:
        isr = _ids(br.isr) + (f" pending {_ids(br.pending)}" if br.pending else "")
        views = " ".join(f"{f}:{'?' if v == UNKNOWN else v}" for f, v in enumerate(br.views, 1) if f != b)
        extra = f"start {br.start}; follower LEOs {views}"
        if br.purgatory:
            extra += "; waiting acks " + ",".join(f"r{r}" for _, r, _ in br.purgatory)
        if br.alter is not None:
            a = br.alter
            extra += "; AlterPartition reply " + (f"ok {_ids(a.isr)}" if a.ok else a.error) + " in flight"
    else:
        isr, extra = "", ""
    return {
        "broker": str(b),
        "role": role(state, b),
        "epochs": f"le {br.epoch if br.alive else '-'} / be {br.bepoch}",
        "log (| = HW)": _log(br),
        "LEO": str(br.leo),
        "HW": str(br.hw),
        "ISR view": isr,
        "leader state": extra,
    }


def controller_line(state: State) -> dict:
    c, g = state.controller, state.ghost
    acked = [str(r) for r in range(1, 64) if g.acked >> (r - 1) & 1]
    return {
        "leader": str(c.leader) if c.leader != NO_LEADER else "none (offline)",
        "leader epoch": str(c.epoch),
        "partition epoch": str(c.pepoch),
        "ISR": _ids(c.isr),
        "ELR": _ids(c.elr),
        "last known leader": _ids(c.lastelr),
        "recovery": "RECOVERING" if c.recovering else "RECOVERED",
        "unfenced": _ids(c.registered),
        "broker epochs": " ".join(f"{b}:{e}" for b, e in enumerate(c.bepochs, 1)),
        "committed": " ".join(f"r{r}" for r in g.committed) or "-",
        "acked": ",".join("r" + r for r in acked) or "-",
        "HW seen by consumers": str(g.hw_seen),
    }


def health(cfg, state: State) -> list[str]:
    """The partition's condition as Kafka's metrics name it."""
    c = state.controller
    out = []
    if c.leader == NO_LEADER:
        out.append("OfflinePartition")
    isr = len(members(c.isr))
    if isr < cfg.rf:
        out.append("UnderReplicated")
    if isr < cfg.effective_minisr:
        out.append("UnderMinIsr")
    if c.recovering:
        out.append("RECOVERING (unclean election)")
    return out


def step_panel(
    cfg, index: int, action, state: State, prev: State | None, diff_only: bool = False, note: Text | None = None
) -> Panel:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    diff_only = diff_only and prev is not None  # step 0 has nothing to compare with: show it all
    cols = list(broker_row(state, 1).keys())
    for col in cols:
        table.add_column(col, overflow="fold")
    for b in cfg.brokers:
        now = broker_row(state, b)
        before = broker_row(prev, b) if prev is not None else now
        if diff_only and now == before:
            continue
        table.add_row(*[Text(now[k], style=CHANGED if now[k] != before[k] and prev is not None else "") for k in cols])
    ctl_now = controller_line(state)
    ctl_before = controller_line(prev) if prev is not None else ctl_now
    ctl = Text("controller: ")
    first = True
    for k, v in ctl_now.items():
        if diff_only and v == ctl_before[k]:
            continue
        if not first:
            ctl.append("  ")
        first = False
        ctl.append(f"{k} ")
        ctl.append(v, style=CHANGED if v != ctl_before[k] and prev is not None else "bold")
    if first:
        ctl.append("unchanged", style="dim")
    parts = [table, ctl]
    hl = health(cfg, state)
    parts.append(Text("health: " + (", ".join(hl) if hl else "healthy"), style="dim"))
    if note is not None:
        parts.append(note)
    title = f"step {index}: {format_action(action)}"
    return Panel(Group(*parts), title=title, title_align="left", border_style="red" if note is not None else "blue")


def violation_note(trace: Trace) -> Text | None:
    if trace.invariant is None:
        return None
    t = Text(f"VIOLATED {trace.invariant}", style="bold red")
    exp = trace.explanation or {}
    if exp.get("meaning"):
        t.append(f": {exp['meaning']}", style="red")
    for part in exp.get("failed_parts", []):
        vals = ", ".join(f"{k}={v}" for k, v in part["values"].items())
        t.append(f"\n  fails: {part['part']}  [{vals}]", style="red")
    if exp.get("also_violated"):
        t.append("\n  also violated here: " + ", ".join(exp["also_violated"]), style="red")
    return t


def render(trace: Trace, console: Console, only_step: int | None = None, diff_only: bool = False) -> None:
    cfg = trace.config
    note = violation_note(trace)
    last = len(trace.steps) - 1
    for i, (action, state) in enumerate(trace.steps):
        if only_step is not None and i != only_step:
            continue
        prev = trace.steps[i - 1][1] if i > 0 else None
        console.print(step_panel(cfg, i, action, state, prev, diff_only, note if i == last else None))
