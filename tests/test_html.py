"""`kafkamc trace html`: a self-contained page, stepped through in a real headless browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kafkamc.traces.trace import action_from_json, format_action

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


def embedded(page: Path) -> dict:
    m = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page.read_text(), re.S)
    assert m, "the page embeds no trace data"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def counterexample(tmp_path_factory):
    """A real 10-step HighWatermarkMonotonic counterexample ending in a RECOVERING election, as a page."""
    d = tmp_path_factory.mktemp("html")
    trace, page = d / "t.json", d / "t.html"
    p = kafkamc(
        *"check --rf 3 --minisr 2 --max-records 1 --max-unclean-crashes 2 --quiet --trace-out".split(), str(trace)
    )
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
    assert data["invariant"] == "HighWatermarkMonotonic" and len(data["steps"]) == 11
    assert "RECOVERING (unclean election)" in data["steps"][-1]["health"]


def test_reachability_witness_page(tmp_path):
    trace, page = tmp_path / "r.json", tmp_path / "r.html"
    p = kafkamc("check", "--rf", "2", "--minisr", "2", "--reach", "ElrElection", "--quiet", "--trace-out", str(trace))
    assert p.returncode == 0, p.stderr
    assert kafkamc("trace", "html", str(trace), "-o", str(page)).returncode == 0
    data = embedded(page)
    assert data["reached"] == "ElrElection" and data["invariant"] is None
    assert "ElrElection reached in" in page.read_text()


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


def test_browser_steps_through_the_trace(counterexample, tmp_path):
    if not Path(CHROMIUM).exists():
        if os.environ.get("KAFKAMC_SKIP_BROWSER") == "1":
            pytest.skip(f"{CHROMIUM} is missing and KAFKAMC_SKIP_BROWSER=1")
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) "
            "or set KAFKAMC_SKIP_BROWSER=1 to skip this test",
            pytrace=False,
        )
    from playwright.sync_api import expect, sync_playwright

    trace, page_file = counterexample
    recorded = [action_from_json(s["action"]) for s in json.loads(trace.read_text())["steps"]]
    actions = [format_action(a) for a in recorded]
    last = len(actions) - 1
    artefacts = Path(os.environ.get("KAFKAMC_ARTIFACTS") or tmp_path)
    artefacts.mkdir(parents=True, exist_ok=True)
    shot = artefacts / "trace-html.png"

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            counter, action, violation = (
                page.locator("#step-counter"),
                page.locator("#action"),
                page.locator("#violation"),
            )
            expect(counter).to_have_text(f"step 0 / {last}")
            expect(action).to_have_text("Init")
            expect(page.locator(".lane[data-broker]")).to_have_count(3)
            expect(page.locator('.lane[data-lane="controller"]')).to_have_count(1)
            expect(violation).to_be_hidden()

            for i in range(1, last + 1):
                page.keyboard.press("ArrowRight")
                expect(counter).to_have_text(f"step {i} / {last}")
                expect(action).to_have_text(actions[i])
                a = recorded[i]
                if type(a).__name__ == "Fetch":  # the request and the answer, as arrows between the lanes
                    expect(page.locator(f'.msg[data-from="b{a.follower}"][data-to="b{a.leader}"]')).to_have_count(1)
                    expect(page.locator(f'.msg[data-from="b{a.leader}"][data-to="b{a.follower}"]')).to_have_count(1)
                if i < last:
                    expect(violation).to_be_hidden()
            page.keyboard.press("ArrowRight")  # already at the end: stays there
            expect(counter).to_have_text(f"step {last} / {last}")
            expect(violation).to_be_visible()
            expect(violation.get_by_test_id("invariant")).to_have_text("HighWatermarkMonotonic")
            expect(violation).to_contain_text("HW exposed by leader 2 is not below the HW consumers saw before")
            expect(page.locator("#health")).to_contain_text("RECOVERING")
            page.screenshot(path=str(shot), full_page=True)

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
            assert errors == []
        finally:
            browser.close()
    assert shot.exists() and shot.stat().st_size > 0
