"""SIGTERM (what CI runners send) and a killed parent: a partial summary with exit 3, and no
worker process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from helpers import EXE

DEFAULT_MODEL = ["check", "--rf", "3", "--minisr", "2", "--quiet"]


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def start_with_workers(tmp_path) -> tuple[subprocess.Popen, list[int]]:
    p = subprocess.Popen(
        [EXE, *DEFAULT_MODEL, "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    deadline = time.monotonic() + 30
    while len(children(p.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = children(p.pid)
    assert len(workers) == 2, "the two workers did not start"
    time.sleep(1)  # inside the search
    return p, workers


def gone(pids: list[int], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_sigterm_stops_check_with_the_summary_and_reaps_workers(tmp_path):
    p, workers = start_with_workers(tmp_path)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    assert "incomplete: interrupted;" in out
    assert gone(workers)


def test_workers_die_with_a_killed_parent(tmp_path):
    p, workers = start_with_workers(tmp_path)
    p.kill()  # SIGKILL: no cleanup runs in the parent
    p.communicate(timeout=60)
    assert gone(workers)


def test_sigterm_stops_the_whole_gate(tmp_path):
    gate = tmp_path / "g.toml"
    gate.write_text(
        '[[check]]\nname = "first"\nrf = 3\nminisr = 2\nexpect = "holds"\n\n'
        '[[check]]\nname = "second"\nrf = 3\nminisr = 2\nexpect = "holds"\n'
    )
    junit = tmp_path / "j.xml"
    p = subprocess.Popen(
        [EXE, "gate", str(gate), "--junit", str(junit)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(4)  # inside the first check
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    assert "the rest of the matrix is not run" in err and "gate: second" not in err
    assert "0/2 expectations met" in out
    xml = junit.read_text()
    assert 'skipped="1"' in xml and 'failures="0"' in xml and "<skipped" in xml
