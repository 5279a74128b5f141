"""Every view of a liveness counterexample (a lasso) shows where its cycle starts: `trace show`
(the story and the step panels), `trace html` (the page data and the sequence diagram) and
`trace itf` (ITF's top-level "loop"); a trace without a loop shows none of it.

The lassos are real: saved by `kafkamc check` through the installed entry point, once per module.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import test_html
from helpers import run_kafkamc
from itf_py import trace_from_json
from kafkamc.traces.story import story
from kafkamc.traces.trace import load

# tests/test_html.py's fixtures, reused: one headless chromium for the module, and a page in it.
browser, open_page = test_html.browser, test_html.open_page

# name -> (configurations to try in turn for `kafkamc check`, the liveness property). "cycle" wants
# a lasso whose cycle has at least one step (KAFKA-10706 under the old rule, as tests/test_liveness.py
# pins it; the next configuration if the shortest stem ever changes), "stutter" one whose last state
# stays forever.
OLD_10706 = "--rf 2 --minisr 1 --max-records 1 --max-fences 1 --rule epoch_cache_truncation=log_only"
LASSOS = {
    "cycle": ((f"{OLD_10706} --max-isr-shrinks 0", OLD_10706), "FollowerEventuallyInSync"),
    "stutter": (("--rf 2 --minisr 1 --max-records 1",), "EventuallyAvailable"),
}
# "cycle2": the "cycle" lasso with its cycle gone round once more, so a cycle of at least two steps.
PROPS = {name: prop for name, (_, prop) in LASSOS.items()} | {"cycle2": LASSOS["cycle"][1]}
SAFETY = "--acks 1 --max-records 1"  # an AckedWriteDurability counterexample: no loop


def _check(path: Path, flags: str) -> bool:
    """Whether `kafkamc check` found a violation and saved it (exit 1) rather than none (exit 0)."""
    path.unlink(missing_ok=True)
    p = run_kafkamc("check", *flags.split(), "--quiet", "--trace-out", path, timeout=120)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr
    return p.returncode == 1 and path.exists()


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    """name -> a trace file `kafkamc check` saved; for a lasso, from the first configuration that gives its shape."""
    d = tmp_path_factory.mktemp("lassos")
    out = {"safety": d / "safety.json"}
    assert _check(out["safety"], SAFETY)
    for name, (configs, prop) in LASSOS.items():
        out[name] = d / f"{name}.json"
        for flags in configs:
            if _check(out[name], f"{flags} --invariant {prop}"):
                loop, length = loop_and_length(out[name])
                if (loop < length) == (name == "cycle"):
                    break
        else:
            pytest.fail(f"no configuration of {LASSOS[name][0]} gives a {name} lasso of {prop}")
    data = json.loads(out["cycle"].read_text())
    data["steps"] += data["steps"][data["violation"]["loop"] + 1 :]  # the same actions again, from the same state
    data["violation"]["length"] = len(data["steps"]) - 1
    out["cycle2"] = d / "cycle2.json"
    out["cycle2"].write_text(json.dumps(data))
    return out


def violation(path: Path) -> dict:
    return json.loads(path.read_text())["violation"]


def loop_and_length(path: Path) -> tuple[int, int]:
    v = violation(path)
    return v["loop"], v["length"]


def forever(path: Path) -> str:
    """What goes on forever from the loop step, spelt out here for each shape of lasso."""
    loop, length = loop_and_length(path)
    if loop == length:
        return f"the state of step {length} stays forever (no fair step is enabled in it)"
    if loop + 1 == length:
        return f"step {length} repeats forever (step {length} returns to the state of step {loop})"
    return f"steps {loop + 1} to {length} repeat forever (step {length} returns to the state of step {loop})"


def closing(name: str, path: Path) -> str:
    """The sentence every view ends a lasso with."""
    return f"from step {loop_and_length(path)[0]} on: {forever(path)}, so {PROPS[name]} never happens"


def marker(path: Path) -> str:
    loop, length = loop_and_length(path)
    return "stays here forever" if loop == length else "cycle starts here"


def test_the_lassos_have_the_shapes_the_tests_need(saved):
    """Lassos with a cycle of one step or more, of two steps or more, and one whose last state
    stays forever; each replays as a real, fair lasso that violates its property."""
    for name, prop in PROPS.items():
        v = violation(saved[name])
        assert (v["invariant"], v["kind"]) == (prop, "liveness")
        assert 0 <= v["loop"] <= v["length"]
        p = run_kafkamc("trace", "replay", saved[name])
        assert p.returncode == 0, p.stdout + p.stderr
    cycle_loop, cycle_length = loop_and_length(saved["cycle"])
    assert cycle_loop < cycle_length
    assert loop_and_length(saved["cycle2"]) == (cycle_loop, cycle_loop + 2 * (cycle_length - cycle_loop))
    stutter_loop, stutter_length = loop_and_length(saved["stutter"])
    assert stutter_loop == stutter_length
    assert "loop" not in violation(saved["safety"])


# ---------------------------------------------------------------- trace show


TITLE = re.compile(r"^╭─ (step \d+)(?:: (.*?))? ─+╮$")


def panel_titles(out: str) -> dict[int, str]:
    """step index -> its panel's whole title (the action and any marker)."""
    titles = {}
    for line in out.splitlines():
        m = TITLE.match(line)
        if m:
            titles[int(m[1].split()[1])] = line[3:].rstrip("─╮").rstrip()
    return titles


def story_labels(out: str) -> list[str]:
    """The labels the story panel hangs to the left of its lines, in order."""
    return re.findall(r"^│ ((?:at |from )?step \d+|never happens|promise broken): ", out, re.M)


@pytest.mark.parametrize("name", PROPS)
def test_show_marks_the_loop_step_and_closes_with_the_cycle(saved, name):
    path = saved[name]
    loop, length = loop_and_length(path)
    prop = PROPS[name]
    p = run_kafkamc("trace", "show", path, columns=250)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    titles = panel_titles(out)
    assert sorted(titles) == list(range(length + 1))
    marked = {i: t for i, t in titles.items() if "(" + marker(path) + ")" in t}
    assert list(marked) == [loop], titles
    assert marked[loop].endswith(f" ({marker(path)})")
    assert not any("cycle starts here" in t or "stays here forever" in t for i, t in titles.items() if i != loop)
    # The closing line is the output's last, after the last step's panel.
    lines = out.rstrip("\n").splitlines()
    assert lines[-1].rstrip() == closing(name, path)
    assert out.index(f"╭─ step {length}") < out.index(closing(name, path))
    # The violation note says the property never happens.
    assert f"VIOLATED {prop} (never happens)" in out
    # The story: its title, a "from step L" line where the cycle starts, and "never happens", not "promise broken".
    assert f"╭─ story: {prop} never happens (from step {loop} on) " in out
    labels = story_labels(out)
    assert labels[-1] == "never happens" and "promise broken" not in labels
    assert labels.count(f"from step {loop}") == 1
    at = labels.index(f"from step {loop}")
    before = [int(x.split()[-1]) for x in labels[:at] if x.startswith("step ")]
    after = [int(x.split()[-1]) for x in labels[at:] if x.startswith("step ")]
    assert all(i <= loop for i in before) and all(i > loop for i in after)


@pytest.mark.parametrize("name", PROPS)
def test_story_lines_of_a_lasso(saved, name):
    """The story's last lines, exactly: the cycle told where it starts, and the promise that never happens."""
    trace = load(saved[name])
    loop, length = loop_and_length(saved[name])
    lines = story(trace)
    meaning = trace.explanation["meaning"] if trace.explanation else ""
    assert meaning and lines[-1] == f"never happens: {meaning} ({trace.invariant})"
    cycle = f"from step {loop}: {forever(saved[name])}"
    assert lines.count(cycle) == 1
    at = lines.index(cycle)
    if loop == length:  # after the facts at the last step, which is the state that stays
        assert lines[at - 1].startswith(f"at step {length}: ") and at == len(lines) - 2
    else:  # after the events up to the loop step, before those of the steps that repeat
        told = [int(m[1]) for line in lines if (m := re.match(r"step (\d+): ", line))]
        assert told == sorted(told)
        assert [i for i in told if i <= loop] == [int(m[1]) for x in lines[:at] if (m := re.match(r"step (\d+): ", x))]
        assert lines[-2].startswith(f"at step {length}: ")


@pytest.mark.parametrize("name", PROPS)
def test_show_one_step(saved, name):
    """--step L shows the marker; a step before it shows neither the marker nor the closing line."""
    path = saved[name]
    loop, length = loop_and_length(path)
    at_loop = run_kafkamc("trace", "show", path, "--step", loop, columns=250)
    assert at_loop.returncode == 0, at_loop.stderr
    assert list(panel_titles(at_loop.stdout)) == [loop]
    assert f" ({marker(path)})" in panel_titles(at_loop.stdout)[loop]
    assert (closing(name, path) in at_loop.stdout) == (loop == length)  # the closing line goes with the last step
    first = run_kafkamc("trace", "show", path, "--step", 0, columns=250)
    assert first.returncode == 0 and loop > 0
    assert marker(path) not in first.stdout and "never happens" not in first.stdout


def test_narrow_show_keeps_the_marker(saved):
    """On a console too narrow for the title, the marker stays on the loop step's panel."""
    path = saved["cycle"]
    loop, _ = loop_and_length(path)
    p = run_kafkamc("trace", "show", path, "--step", loop, columns=32)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"╭─ step {loop} ")
    head = "\n".join(lines[:3])
    assert "cycle starts here" in head


def test_a_trace_without_loop_shows_no_cycle(saved):
    p = run_kafkamc("trace", "show", saved["safety"], columns=200)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for words in ("cycle starts here", "stays here forever", "never happens", "repeat forever", "from step"):
        assert words not in out
    length = violation(saved["safety"])["length"]
    assert "promise broken: " in out and f"╭─ story: AckedWriteDurability broken in {length} steps " in out


# ---------------------------------------------------------------- trace html


def page(saved, name: str, tmp_path: Path) -> str:
    out = tmp_path / f"{name}.html"
    p = run_kafkamc("trace", "html", saved[name], "-o", out)
    assert p.returncode == 0, p.stderr
    return out.read_text()


def embedded(text: str) -> dict:
    m = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', text, re.S)
    assert m, "the page embeds no trace data"
    return json.loads(m.group(1))


def diagram(text: str) -> ET.Element:
    m = re.search(r'<svg id="sequence".*?</svg>', text, re.S)
    assert m, "the page has no sequence diagram"
    return ET.fromstring(m.group(0))


def rows(svg: ET.Element) -> list[ET.Element]:
    return [g for g in svg.iter("g") if g.get("data-testid") == "seq-row"]


def classed(svg: ET.Element, cls: str) -> list[int]:
    return [int(r.get("data-step", "-1")) for r in rows(svg) if cls in r.get("class", "").split()]


def texts(el: ET.Element, cls: str) -> list[str]:
    return [t.text or "" for t in el.iter("text") if cls in t.get("class", "").split()]


@pytest.mark.parametrize("name", PROPS)
def test_html_page_data_marks_the_loop(saved, name, tmp_path):
    text = page(saved, name, tmp_path)
    loop, length = loop_and_length(saved[name])
    data = embedded(text)
    assert data["loop"] == loop and data["trace"]["violation"]["loop"] == loop
    assert data["cycle"] == closing(name, saved[name])
    assert {i: s["loop_marker"] for i, s in enumerate(data["steps"]) if "loop_marker" in s} == {
        loop: marker(saved[name])
    }
    prop = PROPS[name]
    want = f"kafkamc trace: {prop} never happens (a lasso of {length} steps looping from step {loop})"
    assert f"<title>{want}</title>" in text and f'<h1 id="title">{want}</h1>' in text


@pytest.mark.parametrize("name", PROPS)
def test_html_diagram_shows_the_cycle(saved, name, tmp_path):
    svg = diagram(page(saved, name, tmp_path))
    loop, length = loop_and_length(saved[name])
    assert classed(svg, "seq-loop-start") == [loop]
    assert classed(svg, "seq-cycle") == list(range(loop, length + 1))
    assert classed(svg, "seq-violation") == [length]
    (loop_row,) = [r for r in rows(svg) if r.get("data-step") == str(loop)]
    assert texts(loop_row, "seq-loop-label") == [f"\u21bb {marker(saved[name])}"]
    assert (loop_row.findtext("title") or "").endswith(f" ({marker(saved[name])})")
    assert sum(texts(r, "seq-loop-label") != [] for r in rows(svg)) == 1
    arrows = [p for p in svg.iter("path") if p.get("data-testid") == "seq-cycle-arrow"]
    assert len(arrows) == (1 if loop < length else 0)  # a state that stays has no cycle to go round
    assert texts(svg, "seq-verdict") == [f"\u21bb {closing(name, saved[name])}"]


@pytest.mark.parametrize("name", PROPS)
def test_browser_shows_the_cycle(saved, name, tmp_path, open_page):
    """In the browser: the page opens at the last step with the cycle said in the verdict; the
    loop step carries the marker; steps before it none; steps after it say they are in the cycle."""
    from playwright.sync_api import expect

    loop, length = loop_and_length(saved[name])
    prop, said = PROPS[name], closing(name, saved[name])
    page(saved, name, tmp_path)
    url = (tmp_path / f"{name}.html").as_uri()
    shown = open_page(url)
    expect(shown.locator("#step-counter")).to_have_text(f"step {length} / {length}")
    expect(shown.locator("#summary")).to_contain_text(
        f"liveness counterexample to {prop}: a lasso looping from step {loop}"
    )
    verdict = shown.locator("#violation")
    expect(verdict).to_be_visible()
    expect(verdict.locator(".name")).to_have_text(f"VIOLATED {prop} (never happens)")
    expect(verdict.get_by_test_id("cycle")).to_have_text(f"\u21bb {said}")
    mark = shown.get_by_test_id("cycle-mark")
    expect(mark).to_have_text(f"\u21bb {marker(saved[name])}" if loop == length else f"in the cycle from step {loop}")
    shown.goto(f"{url}#step={loop}")
    expect(shown.locator("#step-counter")).to_have_text(f"step {loop} / {length}")
    expect(mark).to_be_visible()
    expect(mark).to_have_text(f"\u21bb {marker(saved[name])}")
    expect(shown.locator("#outcome-note")).to_have_text("" if loop == length else said)
    shown.goto(f"{url}#step=0")
    expect(shown.locator("#step-counter")).to_have_text(f"step 0 / {length}")
    expect(mark).to_be_hidden()
    expect(shown.locator("#outcome-note")).to_have_text(said)


def test_html_without_loop_has_no_cycle(saved, tmp_path):
    text = page(saved, "safety", tmp_path)
    data = embedded(text)
    assert "loop" not in data and "cycle" not in data
    assert not any("loop_marker" in s for s in data["steps"])
    svg = diagram(text)
    assert classed(svg, "seq-cycle") == [] and classed(svg, "seq-loop-start") == []
    assert not [p for p in svg.iter("path") if p.get("data-testid") == "seq-cycle-arrow"]
    length = violation(saved["safety"])["length"]
    assert texts(svg, "seq-verdict") == [f"\u2715 AckedWriteDurability violated at step {length}"]
    assert f"<title>kafkamc trace: AckedWriteDurability violated after {length} steps</title>" in text


# ---------------------------------------------------------------- trace itf


@pytest.mark.parametrize("name", PROPS)
def test_itf_loop_is_the_violations_loop(saved, name, tmp_path):
    loop, length = loop_and_length(saved[name])
    p = run_kafkamc("trace", "itf", saved[name])
    assert p.returncode == 0, p.stderr
    itf = json.loads(p.stdout)
    assert itf["loop"] == loop and type(itf["loop"]) is int
    assert list(itf) == ["#meta", "vars", "states", "loop"]
    # An independent ITF reader takes it as the lasso's loop.
    assert trace_from_json(itf).loop == loop
    assert len(itf["states"]) == length + 1
    # The state the loop starts at is the last one again, but for the action that led into it.
    first, last = itf["states"][loop], itf["states"][length]
    assert {k: v for k, v in first.items() if k not in ("#meta", "action")} == {
        k: v for k, v in last.items() if k not in ("#meta", "action")
    }
    prop = PROPS[name]
    assert (
        itf["#meta"]["description"] == f"kafkamc liveness counterexample to {prop}: a lasso looping from state {loop}"
    )
    assert (itf["#meta"]["invariant"], itf["#meta"]["kind"], itf["#meta"]["length"]) == (prop, "liveness", length)
    # Written to a file, the same JSON, and the message says it is a lasso.
    out = tmp_path / "t.itf.json"
    w = run_kafkamc("trace", "itf", saved[name], "-o", out)
    assert w.returncode == 0 and json.loads(out.read_text()) == itf
    assert w.stderr == f"wrote {length + 1} states ({length} steps, a lasso looping from state {loop}) to {out}\n"


def test_itf_without_loop_has_no_loop_field(saved, tmp_path):
    p = run_kafkamc("trace", "itf", saved["safety"])
    assert p.returncode == 0, p.stderr
    itf = json.loads(p.stdout)
    assert "loop" not in itf and trace_from_json(itf).loop is None
    assert itf["#meta"]["description"] == "kafkamc counterexample to AckedWriteDurability"
    out = tmp_path / "s.itf.json"
    w = run_kafkamc("trace", "itf", saved["safety"], "-o", out)
    length = violation(saved["safety"])["length"]
    assert w.returncode == 0 and w.stderr == f"wrote {length + 1} states ({length} steps) to {out}\n"
