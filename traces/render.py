"""Render a trace in the terminal with rich: a table per step, what changed highlighted."""

from __future__ import annotations

import re

from kafkamc.spec.state import NO_LEADER, UNKNOWN, State, members
from kafkamc.traces.story import forever, loop_marker, story
from kafkamc.traces.trace import Trace, format_action
from kafkamc.traces.words import kafka_value, kafka_words
from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
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
    if b not in c.replicas and br.leader == NO_LEADER and not br.log:
        return "no replica (outside the replica set)"
    fenced = "" if c.registered & (1 << (b - 1)) else ", fenced"
    if c.shutting & (1 << (b - 1)):
        fenced += ", shutting down"
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


def controller_fields(state: State) -> dict:
    """The controller's metadata for the partition: protocol state only."""
    c = state.controller
    return {
        "leader": str(c.leader) if c.leader != NO_LEADER else "none (offline)",
        "leader epoch": str(c.epoch),
        "partition epoch": str(c.pepoch),
        "ISR": _ids(c.isr),
        "ELR": _ids(c.elr),
        "last known leader": _ids(c.lastelr),
        "recovery": "RECOVERING" if c.recovering else "RECOVERED",
        "replicas": " ".join(map(str, c.replicas))
        + (f" (adding {_ids(c.adding)}, removing {_ids(c.removing)})" if c.adding or c.removing else ""),
        "unfenced": _ids(c.registered),
        "broker epochs": " ".join(f"{b}:{e}" for b, e in enumerate(c.bepochs, 1)),
        **({"controlled shutdown": _ids(c.shutting)} if c.shutdown else {}),
    }


def _acked(state: State) -> list[str]:
    return [f"r{r}" for r in range(1, state.ghost.acked.bit_length() + 1) if state.ghost.acked >> (r - 1) & 1]


def ghost_fields(state: State) -> dict:
    """What producers and consumers were told (state.ghost): observed, no broker's state."""
    g = state.ghost
    return {
        "committed": ",".join(f"r{r}" for r in g.committed) or "-",
        "acknowledged": ",".join(_acked(state)) or "-",
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


def _fit(mins: list[int], maxs: list[int], room: int) -> list[int] | None:
    """Column widths within `room` that keep every word whole (each at least its longest
    word), the spare shared by how much more each column wants; None when they cannot fit."""
    if sum(maxs) <= room:
        return maxs
    if sum(mins) > room:
        return None
    wants = [hi - lo for lo, hi in zip(mins, maxs)]
    spare = room - sum(mins)
    widths = [lo + want * spare // sum(wants) for lo, want in zip(mins, wants)]
    for i in sorted(range(len(widths)), key=lambda i: wants[i] - (widths[i] - mins[i]), reverse=True):
        if sum(widths) < room and widths[i] < maxs[i]:
            widths[i] += 1
    return widths


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


class Lanes:
    """The brokers' rows: a table whose columns wrap only at spaces and whose headers stay
    whole, or, on a console too narrow for that, one wrapped line per broker. Rich's own
    column collapsing shrinks the widest column first and breaks words on the way, hence
    the widths computed here (each at least its longest word, so "fold" never cuts one)."""

    def __init__(self, rows: list[tuple[dict, dict | None]]):
        self.rows = rows  # (fields now, fields before or None)

    def _table(self, widths: list[int] | None) -> Table:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
        cols = list(self.rows[0][0])
        for i, col in enumerate(cols):
            table.add_column(col, overflow="fold", width=None if widths is None else widths[i])
        for now, before in self.rows:
            table.add_row(*[Text(now[k], style=_changed(now[k], before, k)) for k in cols])
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.rows:
            return
        cols = list(self.rows[0][0])
        # A header stays on one line: a table squeezed further reads worse than a line per broker.
        mins = [max(len(c), *(_longest_word(now[c]) for now, _ in self.rows)) for c in cols]
        maxs = [max(len(c), *(len(now[c]) for now, _ in self.rows)) for c in cols]
        natural = self._table(None)
        # Padding and dividers: the natural width, measured where nothing constrains it, less the text.
        overhead = Measurement.get(console, options.update_width(2 * sum(maxs) + 100), natural).maximum - sum(maxs)
        widths = _fit(mins, maxs, options.max_width - overhead)
        if widths is not None:
            yield natural if widths == maxs else self._table(widths)
            return
        for now, before in self.rows:
            line = Text(f"broker {now['broker']} (", no_wrap=False, overflow="fold")
            line.append(now["role"], style=_changed(now["role"], before, "role") or "bold")
            line.append("): ")
            rest = {_SHORT.get(k, k): v for k, v in now.items() if k not in ("broker", "role")}
            old = None if before is None else {_SHORT.get(k, k): v for k, v in before.items()}
            yield line.append_text(_pairs("", rest, old))


_SHORT = {"log (| = HW)": "log"}  # a column header that explains itself in the table only


def _changed(value: str, before: dict | None, key: str) -> str:
    return CHANGED if before is not None and before.get(key) != value else ""


def _pairs(label: str, now: dict, before: dict | None, diff_only: bool = False) -> Text:
    """label, then `key value` pairs two spaces apart; changed values highlighted. Wrapped at
    spaces whatever the console (a console that soft-wraps would crop it at the panel edge)."""
    t = Text(label, no_wrap=False, overflow="fold")
    first = True
    for k, v in now.items():
        if diff_only and before is not None and v == before[k]:
            continue
        if not v:
            continue
        if not first:
            t.append("  ")
        first = False
        t.append(f"{k} ")
        t.append(v, style=_changed(v, before, k) or "bold")
    if first:
        t.append("unchanged", style="dim")
    return t


def step_panel(
    cfg,
    index: int,
    action,
    state: State,
    prev: State | None,
    diff_only: bool = False,
    note: Text | None = None,
    width: int | None = None,
    marker: str | None = None,
) -> Panel:
    """One step: the brokers' lanes, the controller, what was observed, the partition's health.
    `width` is the console's: a title that would be cut there moves into the panel. `marker`
    (a lasso's loop step: "cycle starts here") ends the title."""
    diff_only = diff_only and prev is not None  # step 0 has nothing to compare with: show it all
    rows = []
    for b in cfg.brokers:
        now = broker_row(state, b)
        before = broker_row(prev, b) if prev is not None else None
        if diff_only and now == before:
            continue
        rows.append((now, before))
    parts: list = [Lanes(rows)] if rows else []
    parts.append(_pairs("controller: ", controller_fields(state), _fields_of(controller_fields, prev), diff_only))
    ghost_now, ghost_before = ghost_fields(state), _fields_of(ghost_fields, prev)
    if not (diff_only and ghost_now == ghost_before):
        parts.append(_pairs("observed (not protocol state): ", ghost_now, ghost_before, diff_only))
    hl = health(cfg, state)
    parts.append(Text("health: " + (", ".join(hl) if hl else "healthy"), style="dim", no_wrap=False))
    if note is not None:
        parts.append(note)
    mark = f" ({marker})" if marker else ""
    title = f"step {index}: {format_action(action)}{mark}"
    if width is not None and len(title) + 8 > width:
        parts.insert(0, Text(format_action(action), style="bold", no_wrap=False, overflow="fold"))
        title = f"step {index}{mark}"
        if len(title) + 8 > width:  # the marker too: then it opens the panel
            parts.insert(0, Text(marker or "", style="bold magenta", no_wrap=False, overflow="fold"))
            title = f"step {index}"
    border = "red" if note is not None else "magenta" if marker else "blue"
    return Panel(Group(*parts), title=title, title_align="left", border_style=border)


def _fields_of(fields, state: State | None) -> dict | None:
    return fields(state) if state is not None else None


def violation_note(trace: Trace) -> Text | None:
    if trace.invariant is None:
        return None
    never = " (never happens)" if trace.loop is not None else ""  # a lasso: the cycle goes on without it
    t = Text(f"VIOLATED {trace.invariant}{never}", style="bold red", no_wrap=False, overflow="fold")
    exp = trace.explanation or {}
    if exp.get("meaning"):
        t.append(f": {exp['meaning']}", style="red")
    for part in exp.get("failed_parts", []):
        vals = "; ".join(f"{kafka_words(k)}: {kafka_value(k, v)}" for k, v in part["values"].items())
        t.append(f"\n  fails: {part['part']}  [{vals}]", style="red")
    if exp.get("also_violated"):
        t.append("\n  also violated here: " + ", ".join(exp["also_violated"]), style="red")
    return t


def story_panel(trace: Trace, width: int | None = None) -> Panel | None:
    """The story (traces/story.py) before the steps; each `step N:` label hangs to the left of
    its text. `width` is the console's: a title that would be cut there is shortened."""
    lines = story(trace)
    if not lines:
        return None
    parts: list = []
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    for line in lines:
        label, _, body = line.partition(": ")
        if body and STORY_LABEL.fullmatch(label):
            grid.add_row(label + ":", Text(body, style="red" if label in ("promise broken", "never happens") else ""))
        else:  # the header, or a witness's one line: no label to hang
            if grid.row_count:
                parts.append(grid)
                grid = Table.grid(padding=(0, 1))
                grid.add_column(no_wrap=True, style="bold")
                grid.add_column(overflow="fold")
            parts.append(Text(line, style="bold", no_wrap=False, overflow="fold"))
    if grid.row_count:
        parts.append(grid)
    title = "story" if trace.invariant is None else f"story: {trace.invariant} broken in {trace.length} steps"
    if trace.invariant is not None and trace.loop is not None:
        title = f"story: {trace.invariant} never happens (from step {trace.loop} on)"
    if width is not None and len(title) + 8 > width:
        title = "story"
    return Panel(Group(*parts), title=title, title_align="left", border_style="red" if trace.invariant else "green")


STORY_LABEL = re.compile(r"(at |from )?step \d+|promise broken|never happens")


def render(trace: Trace, console: Console, only_step: int | None = None, diff_only: bool = False) -> None:
    """The story (not with only_step: it is about the whole trace), then a panel per step."""
    cfg = trace.config
    if only_step is None:
        told = story_panel(trace, console.width)
        if told is not None:
            console.print(told)
    note = violation_note(trace)
    last = len(trace.steps) - 1
    for i, (action, state) in enumerate(trace.steps):
        if only_step is not None and i != only_step:
            continue
        prev = trace.steps[i - 1][1] if i > 0 else None
        note_here = note if i == last else None
        marker = loop_marker(trace, i)
        console.print(step_panel(cfg, i, action, state, prev, diff_only, note_here, console.width, marker))
    said = cycle_line(trace)
    if said is not None and only_step in (None, last):  # a lasso's closing line, under its last step
        console.print(Text(said, style="bold red", no_wrap=False, overflow="fold"))


def cycle_line(trace: Trace) -> str | None:
    """A liveness lasso's last word (None for any other trace): what goes on forever from its loop step."""
    cycle = forever(trace)
    if cycle is None:
        return None
    return f"from step {trace.loop} on: {cycle}, so {trace.invariant} never happens"
