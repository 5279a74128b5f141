"""Issue 32: an action's wording comes with its entry in Next (spec/wording.py), so the
renderers hold no branch per action and a new action needs no renderer edit."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from kafkamc.spec import next as spec_next
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.next import NEXT, entry
from kafkamc.spec.wording import Told, Wording
from kafkamc.traces import html, story
from kafkamc.traces.trace import format_action

ROOT = Path(__file__).resolve().parent.parent
ACTION_MODULES = {f"kafkamc.spec.{a.type.__module__.rsplit('.', 1)[1]}" for a in NEXT}


def test_every_entry_states_its_wording():
    for a in NEXT:
        assert isinstance(a.wording, Wording), a.name
        assert entry(a.type.__new__(a.type)) is a  # what the renderers look it up by


def test_the_renderers_import_no_action_module():
    """The trace renderers know the actions only through Next: no import of an action's module."""
    for path in sorted((ROOT / "traces").glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & ACTION_MODULES, (path.name, imported & ACTION_MODULES)


def test_the_words_of_an_entry_reach_every_view(monkeypatch):
    """Changing an entry's wording changes the terminal line, the page and the story alike."""
    from kafkamc.spec.config import Config
    from kafkamc.spec.model import Model

    cfg = Config(rf=2, minisr=1, max_records=1)
    m = Model(cfg)
    s0 = m.initial_states()[0]
    produced = next(s for a, s in m.successors(s0) if type(a).__name__ == "Produce")
    a, s1 = next((a, s) for a, s in m.successors(produced) if isinstance(a, Fetch))

    def drawn(action, state, prev, draw):
        draw.mark(draw.lane(action.follower), "fetched", "stall")

    def said(cfg, action, before, state, told, say):
        return Told(f"broker {action.follower} fetched")

    fetch = entry(a)
    words = Wording(terminal=lambda action: "F!", html=drawn, controller=said)
    monkeypatch.setitem(spec_next._BY_TYPE, Fetch, dataclasses.replace(fetch, wording=words))
    assert html.messages(a, s1, produced)[1][0] == {"lane": f"b{a.follower}", "label": "fetched", "kind": "stall"}
    steps = [(None, s0), (None, produced), (a, s1)]
    assert story.step_events(cfg, steps, 2)[0] == f"broker {a.follower} fetched"
    assert format_action(a) == "F!"
