"""`kafkamc trace html`: a self-contained page, stepped through in a real headless browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.invariants.view import View
from kafkamc.spec.broker_lifecycle import BrokerCrash, BrokerSessionTimeout, CheckpointHighWatermarks
from kafkamc.spec.config import Config
from kafkamc.spec.elect_leaders import ElectLeaders
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import initial_state
from kafkamc.traces import html
from kafkamc.traces.trace import action_from_json, format_action, load
from kafkamc.traces.words import kafka_value, kafka_words

EXE = shutil.which("kafkamc", path=os.path.dirname(sys.executable)) or shutil.which("kafkamc")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def kafkamc(*args, cwd=None):
    assert EXE, "the kafkamc entry point is not installed"
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def sequence(page: Path) -> ET.Element:
    """The page's sequence diagram, as written in the file (before any script runs)."""
    m = re.search(r'<svg id="sequence".*?</svg>', page.read_text(), re.S)
    assert m, "the page has no sequence diagram"
    return ET.fromstring(m.group(0))


def rows(svg: ET.Element) -> list[ET.Element]:
    return [g for g in svg.iter("g") if g.get("data-testid") == "seq-row"]


def row_text(row: ET.Element) -> str:
    return " ".join(t.text or "" for t in row.iter("text"))


def embedded(page: Path) -> dict:
    m = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page.read_text(), re.S)
    assert m, "the page embeds no trace data"
    return json.loads(m.group(1))


# Words a reader should never meet in the explanation: the view's variable names.
INTERNAL = re.compile(r"[\[\]_]|\bprev\.|\b(c_\w+|hw_seen|acked_down|exposed_hw|logep|leo|in_isr|in_elr)\b")


@pytest.fixture(scope="module")
def counterexample(tmp_path_factory):
    """A real 12-step HighWatermarkMonotonic counterexample ending in a RECOVERING election, as a page."""
    d = tmp_path_factory.mktemp("html")
    trace, page = d / "t.json", d / "t.html"
    p = kafkamc(*"check --rf 3 --minisr 2 --max-records 1 --max-hard-crashes 2 --quiet --trace-out".split(), str(trace))
    assert p.returncode == 1, p.stderr
    h = kafkamc("trace", "html", str(trace), "-o", str(page))
    assert h.returncode == 0, h.stderr
    assert h.stdout.strip() == str(page)
    return trace, page


def test_page_is_self_contained(counterexample):
    trace, page = counterexample
    text = page.read_text()
    assert not re.search(r"https?://", text), "the page refers to something on the network"
    assert not re.search(r"<(link|img|iframe)\b|<script[^>]*\bsrc=|@import|url\((?!#)", text)
    data = embedded(page)
    assert data["trace"] == json.loads(trace.read_text())
    assert data["invariant"] == "HighWatermarkMonotonic" and len(data["steps"]) == 13
    assert "RECOVERING (unclean election)" in data["steps"][-1]["health"]


@pytest.fixture(scope="module")
def witness(tmp_path_factory):
    """A real ElrElection witness, as a page."""
    d = tmp_path_factory.mktemp("html")
    trace, page = d / "r.json", d / "r.html"
    p = kafkamc("check", "--rf", "2", "--minisr", "2", "--reach", "ElrElection", "--quiet", "--trace-out", str(trace))
    assert p.returncode == 0, p.stderr
    assert kafkamc("trace", "html", str(trace), "-o", str(page)).returncode == 0
    return trace, page


def test_reachability_witness_page(witness):
    _, page = witness
    data = embedded(page)
    assert data["reached"] == "ElrElection" and data["invariant"] is None
    assert "ElrElection reached in" in page.read_text()
    marked = [r.get("data-step") for r in rows(sequence(page)) if "seq-reached" in r.get("class", "")]
    assert marked == [str(len(data["steps"]) - 1)]


def test_sequence_diagram_tells_the_story(counterexample):
    """One row per step, each with its messages' and marks' labels; the violation row marked."""
    trace, page = counterexample
    data, svg = embedded(page), sequence(page)
    steps, last = data["steps"], len(data["steps"]) - 1
    lanes = [t.text for t in svg.iter("text") if t.get("class") == "seq-lane"]
    assert lanes == ["step", "producer", "controller", "broker 1", "broker 2", "broker 3"]
    found = rows(svg)
    assert [r.get("data-step") for r in found] == [str(i) for i in range(len(steps))]
    for row, step in zip(found, steps, strict=True):
        text = row_text(row)
        assert step["type"] in text
        for m in step["messages"] + step["marks"]:
            assert m["label"] in text, (step["index"], m["label"])
        links = [a.get("href") for a in row.iter("a")]
        assert links == [f"#step={step['index']}"]  # the step's permalink
    # The story this counterexample tells, in Kafka's requests and events.
    recorded = [action_from_json(s["action"]) for s in json.loads(trace.read_text())["steps"]]
    for row, a in zip(found[1:], recorded[1:], strict=True):
        kind, text = type(a).__name__, row_text(row)
        expected = {
            "Produce": f"Produce r{getattr(a, 'record', '')}",
            "Fetch": "Fetch offset",
            "AlterPartition": "AlterPartition ISR {",
            "BrokerCrash": "crash",
            "BrokerRestart": "register, broker epoch",
            "BrokerSessionTimeout": f"session timeout: fence broker {getattr(a, 'broker', '')}",
        }.get(kind, "")
        assert expected in text, (kind, text)
    kinds = {type(a).__name__ for a in recorded[1:]}
    assert {"Produce", "Fetch", "AlterPartition", "BrokerCrash", "BrokerSessionTimeout"} <= kinds
    assert any("elects broker" in row_text(r) for r in found)
    bad = [r.get("data-step") for r in found if "seq-violation" in r.get("class", "")]
    assert bad == [str(last)]
    verdict = [t.text for t in svg.iter("text") if "seq-verdict" in t.get("class", "")]
    assert verdict == [f"\u2715 HighWatermarkMonotonic violated at step {last}"]


def test_metadata_update_is_drawn(counterexample):
    """A broker learning the controller's election (LeaderAndIsr, now a metadata record) is an arrow."""
    trace, _ = counterexample
    t = load(trace)
    model, prev = Model(t.config), t.steps[9][1]  # broker 1's session timed out: the controller elected 2
    update = next(a for a in model.candidates(prev) if type(a).__name__ == "MetadataUpdate")
    after = next(iter(model.step(prev, update)))
    msgs, _ = html.messages(update, after, prev)
    assert [(m["from"], m["to"]) for m in msgs] == [("controller", f"b{update.broker}")]
    svg = ET.fromstring(html.sequence_svg([html.step_view(t.config, 1, update, after, prev)] * 2, None, None))
    assert msgs[0]["label"].startswith("metadata: leader ") and msgs[0]["label"] in row_text(rows(svg)[1])
    # An operator's ElectLeaders has no lane of its own: a mark on the controller's.
    _, marks = html.messages(ElectLeaders(preferred=1), after, after)
    assert marks == [{"lane": "controller", "label": "ElectLeaders: preferred broker 1", "kind": "elect"}]


def test_session_timeout_is_the_controllers_mark(counterexample):
    """The crash is a mark on the broker's lane; the fence and the election come later, on the
    controller's, when the session times out."""
    trace, _ = counterexample
    t = load(trace)
    (crash, crashed), (timeout, fenced) = t.steps[8], t.steps[9]
    assert (crash, timeout) == (BrokerCrash(1, keep=0), BrokerSessionTimeout(1))
    assert html.messages(crash, crashed, t.steps[7][1]) == (
        [],
        [{"lane": "b1", "label": "hard crash: 0 flushed records survive", "kind": "crash"}],
    )
    assert html.messages(timeout, fenced, crashed) == (
        [],
        [
            {"lane": "controller", "label": "session timeout: fence broker 1", "kind": "fence"},
            {"lane": "controller", "kind": "elect", "label": "elects broker 2, epoch 2"},
        ],
    )


def _path(cfg: Config, actions: list) -> list:
    """(action, state) along the actions from the initial state, each with one successor."""
    model = Model(cfg)
    steps = [(None, model.observe(initial_state(cfg.rf)))]
    for a in actions:
        (state,) = model.step(steps[-1][1], a)
        steps.append((a, state))
    return steps


def test_a_hw_checkpoint_is_a_small_broker_mark():
    cfg = Config(rf=1, minisr=1, max_records=1)
    steps = _path(cfg, [Produce(1, 1), CheckpointHighWatermarks(1)])
    (a, state), (_, prev) = steps[2], steps[1]
    msgs, marks = html.messages(a, state, prev)
    assert msgs == [] and marks == [{"lane": "b1", "label": "HW 1 checkpointed", "kind": "checkpoint"}]
    views = [html.step_view(cfg, i, a, s, steps[i - 1][1] if i else None) for i, (a, s) in enumerate(steps)]
    svg = ET.fromstring(html.sequence_svg(views, None, None))
    (mark,) = [g for g in svg.iter("g") if g.get("data-testid") == "seq-mark"]
    assert mark.get("data-lane") == "b1" and "checkpoint" in mark.get("class", "")
    assert [t.text for t in mark.iter("text")] == ["\u2193", "HW 1 checkpointed"]


def test_a_fetch_answer_carries_the_hw_from_before_the_fetch():
    """The leader reads the HW with the records, then learns the follower's offset: the
    follower hears of the HW its own fetch moved one fetch later."""
    cfg = Config(rf=2, minisr=1, max_records=1)
    steps = _path(cfg, [Produce(1, 1), Fetch(2, 1), Fetch(2, 1), Fetch(2, 1)])
    answers = [html.messages(a, s, steps[i - 1][1])[0][1]["label"] for i, (a, s) in enumerate(steps) if i > 1]
    assert answers == ["1 record, HW 0", "no records, HW 0", "no records, HW 1"]
    assert (steps[3][1].broker(1).hw, steps[3][1].broker(2).hw) == (1, 0)


@pytest.mark.parametrize("rf", [1, 2, 3, 5])
def test_kafka_words_cover_every_variable(rf):
    """Every variable an explanation can name (the views of the state and of the one before
    it, invariants/view.py) has Kafka's words, none of them the same, none internal."""
    # The names depend on the brokers and the record bound only (a protocol rule changes how
    # a variable is read, never its name).
    for records in (0, 1, 3):
        cfg = Config(rf=rf, minisr=1, max_records=records)
        names = list(View(cfg, "", "s").vars) + list(View(cfg, "prev.", "p").vars)
        words = {n: kafka_words(n) for n in names}
        for name, w in words.items():
            assert w != name and not INTERNAL.search(w), (name, w)
        assert len(set(words.values())) == len(names), "two variables read the same"
        assert words["prev.hw_seen"] == words["hw_seen"] + ", before this step"


def test_kafka_words_examples():
    assert kafka_words("c_epoch") == "controller's leader epoch"
    assert kafka_words("epoch[1]") == "leader epoch of broker 1"
    assert kafka_words("exposed_hw[1]") == "HW broker 1 exposes to consumers"
    assert kafka_words("leads[1]") == "broker 1 believes it leads"
    assert kafka_words("log[2][0]") == "record at offset 0 of broker 2's log"
    assert kafka_words("prev.hw_seen") == "highest HW consumers have seen, before this step"
    assert kafka_words("something_new[3]") == "something_new[3]"  # unknown: unchanged, never an error
    values = [("leads[1]", True), ("log[1][0]", 0), ("log[1][0]", 2)]
    values += [("c_leader", 0), ("exposed_hw[2]", -1), ("hw[2]", 3)]
    assert [kafka_value(n, v) for n, v in values] == ["yes", "none", "r2", "none", "none", "3"]


def test_real_explanations_read_in_kafka_words(counterexample):
    """The explanations of every invariant this counterexample's last step violates (the one
    recorded and the others): each value in Kafka's words on the page's data."""
    trace, page = counterexample
    t = load(trace)
    (_, prev), (_, last) = t.steps[-2], t.steps[-1]
    suite = InvariantSuite(t.config)
    violated = suite.all_violated(last, prev)
    assert len(violated) >= 3
    seen = set()
    for name in violated:
        parts = html.failed_parts(suite.explain(name, last, prev).to_dict())
        for v in (v for p in parts for v in p["values"]):
            seen.add(v["name"])
            assert not INTERNAL.search(v["words"]), v
    assert {n.split("[")[0] for n in seen} >= {"c_epoch", "leads", "exposed_hw", "prev.hw_seen", "log"}
    shown = embedded(page)["failed_parts"]
    assert [v["name"] for v in shown[0]["values"]] == list(t.explanation["failed_parts"][0]["values"])
    assert all(not INTERNAL.search(v["words"]) for p in shown for v in p["values"])


@pytest.mark.parametrize("content", [None, "not json {", '{"schema": "kafkamc.trace/1"}'])
def test_bad_trace_file_is_one_error_line(tmp_path, content):
    src = tmp_path / "t.json" if content is not None else Path("/nonexistent.json")
    if content is not None:
        src.write_text(content)
    p = kafkamc("trace", "html", str(src), "-o", "x.html", cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkamc: error: "), p.stderr
    assert not (tmp_path / "x.html").exists()


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, for the whole module (one launch: the machine is small)."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("KAFKAMC_SKIP_BROWSER") == "1":
            pytest.skip(f"{CHROMIUM} is missing and KAFKAMC_SKIP_BROWSER=1")
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) "
            "or set KAFKAMC_SKIP_BROWSER=1 to skip this test",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def open_page(browser):
    """open_page(url) -> a fresh page loaded from url; the test fails on any script error."""
    pages, errors = [], []

    def open_(url: str):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        pages.append(page)
        page.goto(url)
        return page

    yield open_
    for page in pages:
        page.close()
    assert errors == []


def test_browser_opens_at_the_violation(counterexample, open_page, tmp_path):
    """The page opens at the step the counterexample is about, explained in Kafka's words."""
    from playwright.sync_api import expect

    trace, page_file = counterexample
    last = len(json.loads(trace.read_text())["steps"]) - 1
    page = open_page(page_file.as_uri())
    expect(page.locator("#step-counter")).to_have_text(f"step {last} / {last}")
    assert page.evaluate("document.body.dataset.step") == str(last)
    assert page.evaluate("location.hash") == f"#step={last}"
    expect(page.locator("#permalink")).to_have_attribute("href", f"#step={last}")
    violation = page.locator("#violation")
    expect(violation).to_be_visible()
    expect(violation.get_by_test_id("invariant")).to_have_text("HighWatermarkMonotonic")
    expect(violation).to_contain_text("HW exposed by leader 2 is not below the HW consumers saw before")
    for words in ("controller's leader epoch", "HW broker 2 exposes to consumers", "broker 2 believes it leads"):
        expect(violation).to_contain_text(words)
    expect(violation).to_contain_text("highest HW consumers have seen, before this step")
    shown = violation.inner_text()
    assert not INTERNAL.search(shown.replace("HighWatermarkMonotonic", "")), shown
    # The variable's own name stays within reach, as the row's tooltip.
    tips = violation.get_by_test_id("failed-value").evaluate_all("rows => rows.map(r => r.title)")
    assert tips == list(embedded(page_file)["explanation"]["failed_parts"][0]["values"])
    rows = page.locator("#sequence .seq-row")
    expect(rows).to_have_count(last + 1)
    expect(page.locator("#sequence .seq-row.current")).to_have_attribute("data-step", str(last))
    expect(page.locator("#sequence .seq-row.seq-violation")).to_have_attribute("data-step", str(last))
    expect(page.locator("#health")).to_contain_text("RECOVERING")
    artefacts = Path(os.environ.get("KAFKAMC_ARTIFACTS") or tmp_path)
    artefacts.mkdir(parents=True, exist_ok=True)
    shot = artefacts / "trace-html.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.exists() and shot.stat().st_size > 0


def test_browser_steps_through_the_trace(counterexample, open_page):
    from playwright.sync_api import expect

    trace, page_file = counterexample
    recorded = [action_from_json(s["action"]) for s in json.loads(trace.read_text())["steps"]]
    actions = [format_action(a) for a in recorded]
    last = len(actions) - 1
    page = open_page(page_file.as_uri())
    counter, action, violation = page.locator("#step-counter"), page.locator("#action"), page.locator("#violation")
    expect(counter).to_have_text(f"step {last} / {last}")
    page.keyboard.press("Home")
    expect(counter).to_have_text(f"step 0 / {last}")
    expect(action).to_have_text("Init")
    expect(page.locator(".lane[data-broker]")).to_have_count(3)
    expect(page.locator('.lane[data-lane="controller"]')).to_have_count(1)
    expect(violation).to_be_hidden()
    expect(page.locator("#outcome-note")).to_have_text(f"HighWatermarkMonotonic is violated at step {last}")

    for i in range(1, last + 1):
        page.keyboard.press("ArrowRight")
        expect(counter).to_have_text(f"step {i} / {last}")
        expect(action).to_have_text(actions[i])
        assert page.evaluate("location.hash") == f"#step={i}"  # stepping keeps the link to this step
        a = recorded[i]
        if type(a).__name__ == "Fetch":  # the request and the answer, as arrows between the lanes
            expect(page.locator(f'#lanes .msg[data-from="b{a.follower}"][data-to="b{a.leader}"]')).to_have_count(1)
            expect(page.locator(f'#lanes .msg[data-from="b{a.leader}"][data-to="b{a.follower}"]')).to_have_count(1)
        if i < last:
            expect(violation).to_be_hidden()
    page.keyboard.press("ArrowRight")  # already at the end: stays there
    expect(counter).to_have_text(f"step {last} / {last}")
    expect(violation).to_be_visible()

    page.keyboard.press("ArrowLeft")
    expect(counter).to_have_text(f"step {last - 1} / {last}")
    expect(action).to_have_text(actions[last - 1])
    expect(violation).to_be_hidden()
    page.keyboard.press("Home")
    expect(counter).to_have_text(f"step 0 / {last}")
    page.keyboard.press("n")
    expect(action).to_have_text(actions[1])
    page.locator("#last").click()
    expect(counter).to_have_text(f"step {last} / {last}")


def test_browser_step_links(counterexample, open_page):
    """#step=N opens step N; a fragment that names no step opens the violation."""
    from playwright.sync_api import expect

    trace, page_file = counterexample
    last = len(json.loads(trace.read_text())["steps"]) - 1
    page = open_page(page_file.as_uri() + "#step=2")
    expect(page.locator("#step-counter")).to_have_text(f"step 2 / {last}")
    assert page.evaluate("document.body.dataset.step") == "2"
    expect(page.locator("#permalink")).to_have_attribute("href", "#step=2")
    expect(page.locator("#violation")).to_be_hidden()
    page.evaluate("location.hash = '#step=4'")  # a link followed within the page
    expect(page.locator("#step-counter")).to_have_text(f"step 4 / {last}")
    for garbage in (f"#step={last + 1}", "#step=99", "#step=-1", "#step=abc", "#step=", "#nothing", "#step=1.5"):
        page = open_page(page_file.as_uri() + garbage)
        expect(page.locator("#step-counter")).to_have_text(f"step {last} / {last}")
        assert page.evaluate("location.hash") == f"#step={last}", garbage
        expect(page.locator("#violation")).to_be_visible()


def test_browser_sequence_diagram(counterexample, open_page):
    """Clicking a row of the diagram, or its step number, moves to that step."""
    from playwright.sync_api import expect

    trace, page_file = counterexample
    data = embedded(page_file)
    last = len(data["steps"]) - 1
    page = open_page(page_file.as_uri())
    svg = page.locator("#sequence")
    expect(svg).to_be_visible()
    expect(svg.locator(".seq-row")).to_have_count(last + 1)
    for label in ("Produce r1", "Fetch offset 0", "AlterPartition ISR {1,2}", "ok: ISR {1,2}", "restart"):
        expect(svg).to_contain_text(label)
    expect(svg).to_contain_text("hard crash")
    for i in (3, 0, last - 1):
        svg.locator(f'.seq-row[data-step="{i}"] .seq-type').click()
        expect(page.locator("#step-counter")).to_have_text(f"step {i} / {last}")
        expect(page.locator("#sequence .seq-row.current")).to_have_attribute("data-step", str(i))
        assert page.evaluate("location.hash") == f"#step={i}"
    svg.locator('.seq-row[data-step="5"] a.seq-link').click()
    expect(page.locator("#step-counter")).to_have_text(f"step 5 / {last}")
    assert page.evaluate("location.hash") == "#step=5"


def test_browser_witness_opens_at_reached_step(witness, open_page):
    from playwright.sync_api import expect

    _, page_file = witness
    last = len(embedded(page_file)["steps"]) - 1
    page = open_page(page_file.as_uri())
    expect(page.locator("#step-counter")).to_have_text(f"step {last} / {last}")
    expect(page.locator("#reached")).to_be_visible()
    expect(page.get_by_test_id("reached-name")).to_have_text("ElrElection")
    expect(page.locator("#sequence .seq-row.seq-reached")).to_have_attribute("data-step", str(last))


def test_ghost_values_are_not_the_controllers(counterexample):
    """Committed, acknowledged and the HW consumers saw are what clients were told: they sit
    apart from the controller's metadata, in the producer's lane under "observed"."""
    _, page = counterexample
    data = embedded(page)
    last = data["steps"][-1]
    assert set(last["controller"]) == {
        "leader",
        "leader epoch",
        "partition epoch",
        "ISR",
        "ELR",
        "last known leader",
        "recovery",
        "replicas",
        "unfenced",
        "broker epochs",
    }
    assert set(last["observed"]) == {"committed", "acknowledged", "HW seen by consumers"}
    assert data["summary"].startswith("replication.factor=3 min.insync.replicas=2 acks=all")
