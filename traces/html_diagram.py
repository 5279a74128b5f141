"""The trace page's sequence diagram: the whole trace as one inline SVG.

The producer, the controller and each broker are vertical lifelines; each step is a row,
its messages (traces/html.py's messages()) arrows between them and its marks (crash,
restart, session timeout, HW checkpoint, election) symbols on one lifeline. Drawn here
rather than by the page's script so the picture is in the file itself: a screenshot or a
browser without JavaScript shows it. A liveness lasso's rows from its loop step on are shaded
as its cycle, the loop step labelled and an arrow drawn from the last row back to it.
"""

from __future__ import annotations

from html import escape

LEFT = 220  # the step column: number (a #step=N link) and action type
LANE_W = 170  # px between lifelines; a label is centred on its arrow and may overhang
HEAD = 30  # the lifelines' names
LINE = 20  # one message or mark per line of a row
PAD = 8
RIGHT = 150  # room for a mark's label on the last lifeline
SYMBOL = {
    "crash": "\u2715",
    "restart": "\u21bb",
    "stall": "\u2016",
    "fence": "\u2298",
    "elect": "\u2605",
    "checkpoint": "\u2193",  # the HW written down to the checkpoint file
}


def lane_names(steps: list[dict]) -> list[tuple[str, str]]:
    """(lane key, name) for every lifeline, left to right."""
    brokers = [(f"b{b['id']}", f"broker {b['id']}") for b in steps[0]["brokers"]]
    return [("producer", "producer"), ("controller", "controller"), *brokers]


def _text(x: float, y: float, label: str, cls: str, anchor: str = "middle") -> str:
    return f'<text class="{cls}" x="{x:g}" y="{y:g}" text-anchor="{anchor}">{escape(label)}</text>'


def _row(
    i: int, step: dict, lanes: list[str], x: dict, y0: float, width: float, end: str, cycle: bool = False
) -> tuple[str, float]:
    """One step's row and its height; `cycle` when the row is in a lasso's cycle."""
    lines = len(step["messages"]) + len(step["marks"])
    marker = step.get("loop_marker")  # a lasso's loop step: its label goes under the action type
    h = max(2 if marker else 1, lines) * LINE + PAD
    cls = (
        "seq-row"
        + (" seq-cycle" if cycle else "")
        + (" seq-loop-start" if marker else "")
        + (f" seq-{end}" if end else "")
    )
    title = escape(f"step {i}: {step['action']}" + (f" ({marker})" if marker else ""))
    out = [
        f'<g class="{cls}" data-step="{i}" data-testid="seq-row"><title>{title}</title>',
        f'<rect class="seq-bg" x="0" y="{y0:g}" width="{width:g}" height="{h:g}"/>',
        f'<a href="#step={i}" class="seq-link">{_text(10, y0 + LINE - 4, str(i), "seq-num", "start")}</a>',
        _text(40, y0 + LINE - 4, step["type"], "seq-type", "start"),
    ]
    if marker:
        out.append(_text(40, y0 + 2 * LINE - 4, f"\u21bb {marker}", "seq-loop-label", "start"))
    # Each broker's lifeline segment shows its role in this step: leader, zombie, crashed...
    kinds = {"producer": "plain", "controller": "plain"} | {f"b{b['id']}": b["kind"] for b in step["brokers"]}
    out += [f'<line class="life {kinds[k]}" x1="{x[k]:g}" x2="{x[k]:g}" y1="{y0:g}" y2="{y0 + h:g}"/>' for k in lanes]
    y = y0 + PAD / 2
    for m in step["messages"]:
        y += LINE
        x1, x2 = x[m["from"]], x[m["to"]]
        tip = x2 - 6 if x2 > x1 else x2 + 6
        out.append(
            f'<g class="seq-msg {m["kind"]}" data-testid="seq-message" data-from="{m["from"]}" data-to="{m["to"]}">'
            f'<line x1="{x1:g}" x2="{tip:g}" y1="{y - 4:g}" y2="{y - 4:g}" marker-end="url(#seq-head-{m["kind"]})"/>'
            + _text((x1 + x2) / 2, y - 8, m["label"], "seq-label")
            + "</g>"
        )
    for m in step["marks"]:
        y += LINE
        sym = SYMBOL.get(m["kind"], "\u2022")
        out.append(
            f'<g class="seq-mark {m["kind"]}" data-testid="seq-mark" data-lane="{m["lane"]}">'
            + _text(x[m["lane"]], y - 4, sym, "seq-sym")
            + _text(x[m["lane"]] + 10, y - 4, m["label"], "seq-label", "start")
            + "</g>"
        )
    return "".join(out) + "</g>", h


def sequence_svg(
    steps: list[dict], invariant: str | None, reached: str | None, loop: int | None = None, cycle: str | None = None
) -> str:
    """The diagram as an <svg> element; the last row is marked when the trace ends in a verdict.
    A lasso's (`loop`: its loop step, `cycle`: what goes on forever) rows from `loop` on are its cycle."""
    lanes = lane_names(steps)
    keys = [k for k, _ in lanes]
    x = {k: LEFT + LANE_W * (n + 0.5) for n, k in enumerate(keys)}
    width = LEFT + LANE_W * len(lanes) + RIGHT
    last = len(steps) - 1
    end = "violation" if invariant else "reached" if reached else ""
    rows, y, back = [], float(HEAD), 0.0
    for i, step in enumerate(steps):
        row, h = _row(i, step, keys, x, y, width, end if i == last else "", loop is not None and i >= loop)
        rows.append(row)
        back = y + LINE / 2 if i == loop else back  # where the cycle's arrow comes back to
        y += h
    if loop is not None and loop < last:  # from the last row back to the loop step, left of the numbers
        rows.append(
            f'<path class="seq-cycle-arrow" data-testid="seq-cycle-arrow" d="M8,{y - LINE / 2:g} H3 V{back:g} H8" '
            'marker-end="url(#seq-head-cycle)"/>'
        )
    heads = "".join(_text(x[k], HEAD - 10, name, "seq-lane") for k, name in lanes)
    head_col = _text(10, HEAD - 10, "step", "seq-lane", "start")
    if invariant and cycle:
        verdict = _text(10, y + 18, f"\u21bb {cycle}", "seq-verdict bad", "start")
    elif invariant:
        verdict = _text(10, y + 18, f"\u2715 {invariant} violated at step {last}", "seq-verdict bad", "start")
    elif reached:
        verdict = _text(10, y + 18, f"\u2605 {reached} reached at step {last}", "seq-verdict good", "start")
    else:
        verdict = ""
    height = y + (28 if verdict else 6)
    defs = "".join(
        f'<marker id="seq-head-{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="seq-head {kind}"/></marker>'
        for kind in ("request", "response", *(("cycle",) if loop is not None else ()))
    )
    return (
        f'<svg id="sequence" data-testid="sequence" width="{width:g}" '
        f'height="{height:g}" viewBox="0 0 {width:g} {height:g}" role="img" aria-label="sequence diagram of the trace">'
        f"<defs>{defs}</defs>{head_col}{heads}{''.join(rows)}{verdict}</svg>"
    )
