"""How a trace tells an action: the words each entry of Next carries (spec/next.py, `wording`).

An action's module writes its own words, and traces/ lays them out: the terminal prints
`terminal` (the action as a call), the HTML page draws what `html` draws, and the incident
summary (traces/story.py) asks the story hooks at each point where what a step did depends
on the action. A renderer passes in its own phrase helpers (`say` for the story, `draw` for
the page), so nothing here imports traces/ and a new action needs no renderer edit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any


def describe(action) -> str:
    """An action as a trace prints it: its type and its fields, Fetch(follower=2, leader=1)."""
    args = ", ".join(
        f"{f.name}={getattr(action, f.name)}" for f in fields(action) if getattr(action, f.name) is not None
    )
    return f"{type(action).__name__}({args})"


@dataclass(frozen=True)
class Told:
    """What an action's own words say of the controller's decision in its step."""

    cause: str = ""  # what made the controller decide (an operator's request, a timeout)
    did: list[str] = field(default_factory=list)  # what it did, before any election
    after: list[str] = field(default_factory=list)  # said after a completed reassignment; the ISR change is told


@dataclass(frozen=True)
class Wording:
    """The words of one action. Every hook is optional; without one the renderers say what
    any step says (its log changes, the controller's election, acknowledgements).

    terminal(action) -> str: the step's title, the same in every view.
    html(action, state, prev, draw): the step's messages between lanes and marks on lanes,
      through draw.msg(src, dst, label, kind) and draw.mark(lane, label, kind).
    event(cfg, action, prev, state, say) -> (text, broker): the step's own first event, and
      the broker whose lost records it already told (0 for none).
    truncation(cfg, action, b, prev, state) -> (who or None, to): why follower b truncated in
      this step; who None is the usual "broker b, follower of ...". Without it: "during <type>".
    controller(cfg, action, before, state, told, say) -> Told: what made the controller decide;
      `told` says a truncation sentence already named the action's broker.
    election(action, before, after) -> str or None: how the new leader was chosen, when the
      action says it (None: the usual reasons).
    isr_change(cfg, steps, i, say) -> lines: said in place of the controller's decision.
    """

    terminal: Callable[[Any], str] = describe
    html: Callable[..., None] | None = None
    event: Callable[..., tuple[str, int]] | None = None
    truncation: Callable[..., tuple[str | None, str]] | None = None
    controller: Callable[..., Told] | None = None
    election: Callable[..., str | None] | None = None
    isr_change: Callable[..., list[str]] | None = None
