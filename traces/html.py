"""A trace as one self-contained HTML page: a sequence diagram of the whole trace, then a
swim lane per broker and one for the controller with the step's messages as arrows between
lanes, stepped through with the keyboard, the buttons or a `#step=N` link.

Python computes what each step shows (reusing the terminal renderer's wording) and draws the
diagram; the page's script only lays out the step, so the page and `kafkamc trace show` say
the same things. The page opens at the step the verdict is about: the last one. A liveness
lasso's loop step is marked ("cycle starts here") and the cycle it starts is said at the end.
"""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

from kafkamc.spec.next import entry
from kafkamc.spec.state import NO_LEADER, State, members
from kafkamc.traces.html_diagram import sequence_svg
from kafkamc.traces.html_page import PAGE as _PAGE  # the page's template: CSS and JavaScript
from kafkamc.traces.render import STORY_LABEL, broker_row, controller_fields, cycle_line, ghost_fields, health
from kafkamc.traces.story import loop_marker, story
from kafkamc.traces.trace import Trace, format_action
from kafkamc.traces.words import kafka_value, kafka_words


def _ids(mask: int) -> str:
    return "{" + ",".join(str(b) for b in members(mask)) + "}"


def _role_kind(role: str) -> str:
    """A CSS class for the role badge: the first word of the role names it."""
    for kind in ("leader", "zombie", "follower", "crashed"):
        if role.startswith(kind):
            return kind
    return "none"


def _broker_view(state: State, b: int) -> dict:
    br = state.broker(b)
    row = broker_row(state, b)
    fields = {
        "leader epoch": str(br.epoch) if br.alive else "-",
        "broker epoch": str(br.bepoch),
        "LEO": row["LEO"],
        "HW": row["HW"],
        "ISR view": row["ISR view"],
        "leader state": row["leader state"],
    }
    return {
        "id": b,
        "role": row["role"],
        "kind": _role_kind(row["role"]),
        "fields": fields,
        "log": [list(entry) for entry in br.log],
        "hw": br.hw,
        "leo": br.leo,
    }


def _lane(b: int) -> str:
    return f"b{b}"


def _log_change(before, after) -> tuple[int, int]:
    """(offset the logs agree up to, records appended after it)."""
    same = 0
    while same < min(len(before), len(after)) and before[same] == after[same]:
        same += 1
    return same, len(after) - same


class _Draw:
    """What an action's own words draw on the page (spec/wording.py, `html`): messages between
    lanes and marks on single lanes, with the page's names for the lanes."""

    def __init__(self) -> None:
        self.msgs: list[dict] = []
        self.marks: list[dict] = []

    def msg(self, src: str, dst: str, label: str, kind: str = "request") -> None:
        self.msgs.append({"from": src, "to": dst, "label": label, "kind": kind})

    def mark(self, lane: str, label: str, kind: str) -> None:
        self.marks.append({"lane": lane, "label": label, "kind": kind})

    lane = staticmethod(_lane)
    log_change = staticmethod(_log_change)
    ids = staticmethod(_ids)


def messages(action, state: State, prev: State | None) -> tuple[list, list]:
    """The step's messages between lanes and its marks on single lanes, as the page draws them:
    the action's own (its entry's words), then what any step may bring."""
    if action is None or prev is None:
        return [], []
    words = entry(action)
    draw = _Draw()
    if words.wording.html is not None:
        words.wording.html(action, state, prev, draw)
    msgs, marks = draw.msgs, draw.marks
    if state.controller.replicas != prev.controller.replicas and not words.moves_replicas:
        done = ",".join(map(str, state.controller.replicas))
        marks.append({"lane": "controller", "label": f"reassignment complete: [{done}]", "kind": "elect"})
    # The controller's decisions ride on other actions (a session timeout, a registration): mark them on its lane.
    c, pc = state.controller, prev.controller
    if (c.leader, c.epoch) != (pc.leader, pc.epoch):
        label = "partition offline" if c.leader == NO_LEADER else f"elects broker {c.leader}, epoch {c.epoch}"
        marks.append(
            {
                "lane": "controller",
                "kind": "elect",
                "label": label + (" (unclean: RECOVERING)" if c.recovering and not pc.recovering else ""),
            }
        )
    elif pc.recovering and not c.recovering:
        marks.append({"lane": "controller", "label": "RECOVERED", "kind": "elect"})
    # A write acknowledged in this step: the leader that handled it answers the producer.
    acked = state.ghost.acked & ~prev.ghost.acked
    if acked:
        src = getattr(action, "leader", None) or state.true_leader()
        if src:
            draw.msg(_lane(src), "producer", "ack " + ",".join(f"r{r}" for r in members(acked)), "response")
    return msgs, marks


def step_view(cfg, index: int, action, state: State, prev: State | None) -> dict:
    msgs, marks = messages(action, state, prev)
    return {
        "index": index,
        "action": format_action(action),
        "type": type(action).__name__ if action is not None else "Init",
        "brokers": [_broker_view(state, b) for b in cfg.brokers],
        "controller": controller_fields(state),
        "producer": {"acks": cfg.acks},
        "observed": ghost_fields(state),  # what clients were told: no broker or controller knows it
        "health": health(cfg, state),
        "messages": msgs,
        "marks": marks,
    }


def failed_parts(explanation: dict | None) -> list[dict]:
    """The explanation's failed parts with each value named in Kafka's words (the variable's
    own name kept for a tooltip)."""
    return [
        {
            "part": part["part"],
            "values": [
                {"name": k, "words": kafka_words(k), "value": kafka_value(k, v)} for k, v in part["values"].items()
            ],
        }
        for part in (explanation or {}).get("failed_parts", [])
    ]


def page_data(trace: Trace) -> dict:
    cfg = trace.config
    steps = [step_view(cfg, i, a, s, trace.steps[i - 1][1] if i else None) for i, (a, s) in enumerate(trace.steps)]
    epochs = sorted({e for _, s in trace.steps for br in s.brokers for e, _ in br.log})
    lasso = {}  # only a liveness lasso's page has these: every other page's data is as it was
    if trace.loop is not None:
        steps[trace.loop]["loop_marker"] = loop_marker(trace, trace.loop)
        lasso = {"loop": trace.loop, "cycle": cycle_line(trace)}
    return {
        "trace": {**trace.to_json(), **trace.extra},
        "steps": steps,
        "epochs": epochs,
        "summary": f"{cfg.kafka_settings()} protocol {cfg.protocol.era()}",
        "invariant": trace.invariant,
        "explanation": trace.explanation,
        "failed_parts": failed_parts(trace.explanation),
        "reached": trace.extra.get("reached"),
        **lasso,
    }


def _embed(data: dict) -> str:
    # '<' escaped so no string in the data can close the <script> element early.
    return json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")


def render_html(trace: Trace) -> str:
    if trace.invariant and trace.loop is not None:
        title = f"kafkamc trace: {trace.invariant} never happens (a lasso of {trace.length} steps looping from step {trace.loop})"
    elif trace.invariant:
        title = f"kafkamc trace: {trace.invariant} violated after {trace.length} steps"
    elif trace.extra.get("reached"):
        title = f"kafkamc trace: {trace.extra['reached']} reached in {trace.length} steps"
    else:
        title = f"kafkamc trace: {trace.length} steps"
    data = page_data(trace)
    fill = {
        "TITLE": escape(title),
        "STORY": story_html(trace),
        "DIAGRAM": sequence_svg(data["steps"], data["invariant"], data["reached"], data.get("loop"), data.get("cycle")),
        "DATA": _embed(data),
    }
    # One pass, so text in one filling (a label, the data) is never taken for another placeholder.
    return re.sub(r"__(TITLE|STORY|DIAGRAM|DATA)__", lambda m: fill[m[1]], _PAGE)


def story_html(trace: Trace) -> str:
    """The story the terminal prints above the steps (traces/story.py), the same lines: a
    `step N:` label beside its text, a header or a witness's line on its own."""
    lines = story(trace)
    if not lines:
        return ""
    out, rows = [], []
    for line in lines:
        label, _, body = line.partition(": ")
        if body and STORY_LABEL.fullmatch(label):
            broken = ' class="broken"' if label in ("promise broken", "never happens") else ""
            rows.append(f'<tr><td class="label">{escape(label)}:</td><td{broken}>{escape(body)}</td></tr>')
            continue
        if rows:
            out.append("<table>" + "".join(rows) + "</table>")
            rows = []
        out.append(f"<p>{escape(line)}</p>")
    if rows:
        out.append("<table>" + "".join(rows) + "</table>")
    kind = "" if trace.invariant else ' class="witness"'
    return f'<section id="story"{kind} data-testid="story">' + "".join(out) + "</section>"


def write(trace: Trace, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(trace), encoding="utf-8")
    return path
