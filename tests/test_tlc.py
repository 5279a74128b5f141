"""Issue 40's TLC side by side (jobs/tlc.py, the bench's peer-kip966 and tlc-kip966 rows): bad
input is one line and exit 2; TLC's output is read; no TLC here (the jar is not in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import asdict

import pytest
from helpers import EXE, run_kafkamc
from kafkamc.jobs.bench import PEER_CONFIG, RUNS, runs_here, unavailable
from kafkamc.jobs.tlc import KAFKAMC_ARGS, TlcProblem, inputs_from, main, parse_tlc, peer_bounds, ratio

CFG = """CONSTANTS
    BrokerCount = 3
    Values = { A }
    MinISR = 2
    FenceBrokerLimit = 1
    FENCED = FENCED
INIT Init
"""

# The lines TLC 2.18 ends a run stopped by -Dtlc2.TLC.stopAfter with.
OUTPUT = """TLC2 Version 2.18 of 20 March 2023 (rev: 3ea3222)
Progress(7) at 2026-11-28 09:12:04: 10,350 states generated (10,350 s/min), 3,895 distinct states found
Model checking completed. No error has been found.
206603 states generated, 58013 distinct states found, 29849 states left on queue.
The depth of the complete state graph search is 10.
"""


@pytest.fixture
def peer(tmp_path):
    """A stand-in jar (a zip with tlc2/TLC.class), specification and cfg."""
    jar = tmp_path / "tla2tools.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("tlc2/TLC.class", b"")
    spec = tmp_path / "peer.tla"
    spec.write_text("---- MODULE peer ----\n====\n")
    (tmp_path / "peer.cfg").write_text(CFG)
    return {"KAFKAMC_TLA2TOOLS": str(jar), "KAFKAMC_TLC_SPEC": str(spec)}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"KAFKAMC_TLA2TOOLS": ""}, "KAFKAMC_TLA2TOOLS is not set"),
        ({"KAFKAMC_TLC_SPEC": ""}, "KAFKAMC_TLC_SPEC is not set"),
        ({"KAFKAMC_TLA2TOOLS": "/nonexistent/tla2tools.jar"}, "KAFKAMC_TLA2TOOLS: no such file"),
        ({"KAFKAMC_TLA2TOOLS": "SPEC"}, "not a tla2tools.jar"),
        ({"KAFKAMC_TLC_SPEC": "CFG"}, "KAFKAMC_TLC_SPEC: not a .tla file"),
        ({"KAFKAMC_TLC_LIBRARY": "/nonexistent"}, "KAFKAMC_TLC_LIBRARY: not a folder"),
        ({"KAFKAMC_TLC_SECONDS": "soon"}, "KAFKAMC_TLC_SECONDS: not a number"),
        ({"KAFKAMC_TLC_SECONDS": "-1"}, "KAFKAMC_TLC_SECONDS: not a number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(peer, change, says, capsys):
    paths = {"SPEC": peer["KAFKAMC_TLC_SPEC"], "CFG": peer["KAFKAMC_TLC_SPEC"][:-4] + ".cfg"}
    env = peer | {k: paths.get(v, v) for k, v in change.items()}
    with pytest.raises(TlcProblem, match=says):
        inputs_from(env)
    assert main([], env) == 2
    err = capsys.readouterr().err
    assert err.startswith("kafkamc: error: ") and says in err and len(err.strip().splitlines()) == 1


def test_a_missing_cfg_and_bad_arguments_are_one_line(peer, tmp_path, capsys):
    (tmp_path / "peer.cfg").unlink()
    with pytest.raises(TlcProblem, match="its configuration is missing"):
        inputs_from(peer)
    assert main(["--pairs", "0"], peer) == 2 and main(["--pairs", "x"], peer) == 2 and main(["--nope"], peer) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("kafkamc: error: ") for line in err)


def test_the_script_run_as_a_module_without_tlc(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAMC_TL")}
    p = subprocess.run(
        [sys.executable, "-m", "kafkamc.jobs.tlc"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == "kafkamc: error: KAFKAMC_TLA2TOOLS is not set " + (
        "(TLC side by side needs KAFKAMC_TLA2TOOLS and KAFKAMC_TLC_SPEC)"
    )


def test_tlc_output_is_read():
    assert parse_tlc(OUTPUT) == {
        "tlc_version": "TLC2 Version 2.18 of 20 March 2023 (rev: 3ea3222)",
        "states_generated": 206603,
        "distinct_states": 58013,
        "left_on_queue": 29849,
        "depth": 10,
    }
    with pytest.raises(TlcProblem, match="TLC reported no counts: Error: Parsing or semantic analysis failed"):
        parse_tlc("TLC2 Version 2.18\nError: Parsing or semantic analysis failed.\n")


def test_the_peer_bounds_and_the_ratio(peer, tmp_path):
    assert peer_bounds(tmp_path / "peer.cfg") == "BrokerCount=3 Values={A} MinISR=2 FenceBrokerLimit=1"
    kafkamc = {"distinct_states": 600, "distinct_states_per_s": 60, "cpu_s": 5.0}
    tlc = {"distinct_states": 100, "distinct_states_per_s": 20, "cpu_s": 10.0}
    assert ratio(kafkamc, tlc) == {"per_wall_s": 3.0, "per_cpu_s": 12.0}


def test_the_bench_rows_peer_and_tlc(peer):
    assert RUNS["peer-kip966"] == (PEER_CONFIG, "local") and RUNS["tlc-kip966"] == (PEER_CONFIG, "tlc")
    assert "tlc-kip966" not in runs_here({}) and "tlc-kip966" in runs_here(peer)
    assert "peer-kip966" in runs_here({}) and unavailable("peer-kip966", {}) is None
    assert "needs KAFKAMC_TLA2TOOLS" in unavailable("tlc-kip966", {})
    missing = peer | {"KAFKAMC_TLC_SPEC": "/nonexistent/peer.tla"}
    assert unavailable("tlc-kip966", missing) == "benchmark run tlc-kip966: KAFKAMC_TLC_SPEC: not a .tla file: " + (
        "/nonexistent/peer.tla"
    )


def test_bench_refuses_the_tlc_row_without_tlc_in_one_line(tmp_path):
    assert EXE
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAMC_TL")}
    p = subprocess.run(
        [EXE, "bench", "--run", "peer-kip966", "--run", "tlc-kip966"], capture_output=True, text=True, env=env
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "kafkamc: error: benchmark run tlc-kip966 needs KAFKAMC_TLA2TOOLS (tla2tools.jar) and "
        "KAFKAMC_TLC_SPEC (the .tla)"
    ]


def test_the_matching_flags_are_the_bench_config(tmp_path):
    """jobs/tlc.py runs `kafkamc check` with KAFKAMC_ARGS; the bench's row explores PEER_CONFIG."""
    p = run_kafkamc("check", *KAFKAMC_ARGS, "--max-states", "1", "--json", "--quiet", cwd=tmp_path)
    config = json.loads(p.stdout)["config"]
    assert p.returncode == 3 and all(config[k] == v for k, v in asdict(PEER_CONFIG).items() if k.startswith("max_"))
    assert (config["rf"], config["minisr"], config["symmetry"]) == (3, 2, True)
