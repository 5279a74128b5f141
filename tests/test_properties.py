"""User-defined properties (--properties FILE): declared with the built-ins' Z3 API, checked by
every engine, saved with the traces that need them, and bad files refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_kafkamc
from kafkamc.invariants.properties import PropertiesError, PropertyFile
from kafkamc.jobs.run import run_check
from kafkamc.spec.config import Config

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "properties.py"
# Leader 1 proposes the ISR {1, 2} (follower 3 stalled); follower 2, which fetched record 1, has
# crashed, and its session times out before the answer arrives: the controller's ISR is {1}
# when the leader takes the answer's {1, 2}, reaches HW 1 and acknowledges record 1.
NO_ACK_PATH = [
    "Produce(leader=1, record=1)",
    "Fetch(follower=2, leader=1)",
    "Fetch(follower=2, leader=1)",
    "BrokerCrash(broker=2, keep=0)",
    "ReplicaStall(follower=3)",
    "AlterPartition(leader=1, isr=(1, 2))",
    "BrokerSessionTimeout(broker=2)",
    "HandleAlterPartitionResponse(leader=1)",
]


def check_json(*args):
    p = run_kafkamc("check", "--quiet", "--json", "--properties", EXAMPLE, *args)
    return p, (json.loads(p.stdout) if p.stdout.strip() else None)


def test_invariants_lists_the_files_properties():
    p = run_kafkamc("invariants", "--properties", EXAMPLE)
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line.split()[1:3] for line in p.stdout.splitlines()}
    assert rows["NoAckBelowMinIsr"] == ["user", "action"]
    assert rows["AckedOnMinIsrReplicas"] == ["user", "action"]
    assert rows["HwWithinLog"] == ["user", "state"]
    assert rows["IsrShrinksToLeaderOnly"] == ["user", "reach"]
    assert rows["NoCommittedDataLoss"] == ["safety", "state"]


def test_a_user_invariant_finds_its_shortest_violation(tmp_path):
    out = tmp_path / "t.json"
    p, s = check_json("--rf", 3, "--minisr", 2, "--invariant", "NoAckBelowMinIsr", "--trace-out", out)
    assert p.returncode == 1, p.stderr
    assert s["invariants"] == ["NoAckBelowMinIsr"]
    assert s["violation"]["invariant"] == "NoAckBelowMinIsr"
    assert s["violation"]["actions"] == NO_ACK_PATH
    part = s["violation"]["explanation"]["failed_parts"][0]
    assert part["part"] == "a write acknowledged in this step had an ISR of min.insync.replicas"
    assert part["values"]["in_isr[2]"] is False and part["values"]["acked[1]"] is True
    saved = json.loads(out.read_text())
    assert saved["properties"] == {"file": str(EXAMPLE), "sha256": PropertyFile.read(EXAMPLE).digest}
    assert s["properties"] == saved["properties"]


def test_a_user_invariant_that_holds_leaves_the_search_unchanged():
    p, s = check_json("--rf", 2, "--minisr", 1, "--invariant", "HwWithinLog")
    assert p.returncode == 0, p.stderr
    assert s["verdict"] == "holds"
    plain = json.loads(
        run_kafkamc("check", "--quiet", "--json", "--rf", 2, "--minisr", 1, "--invariant", "WellFormed").stdout
    )
    assert (s["distinct_states"], s["states_generated"], s["depth"]) == (
        plain["distinct_states"],
        plain["states_generated"],
        plain["depth"],
    )


def test_a_user_reachability_property_is_searched_for(tmp_path):
    out = tmp_path / "w.json"
    p, s = check_json("--rf", 3, "--minisr", 2, "--reach", "IsrShrinksToLeaderOnly", "--trace-out", out)
    assert p.returncode == 0, p.stderr
    # Issue 29: both followers stall, then one request drops both (4 -> 3 steps).
    assert s["verdict"] == "reached" and s["reached"]["IsrShrinksToLeaderOnly"] == 3
    assert json.loads(out.read_text())["reached"] == "IsrShrinksToLeaderOnly"


@pytest.mark.parametrize("workers", [1, 2])
def test_every_local_engine_runs_the_files_declarations(workers):
    """Forked workers, one process and the reference engine check the user invariant to one path."""
    props = PropertyFile.read(EXAMPLE)
    cfg = Config(rf=3, minisr=2)
    fast = run_check(cfg, invariants=["NoAckBelowMinIsr"], workers=workers, properties=props)
    ref = run_check(cfg, invariants=["NoAckBelowMinIsr"], reference=True, properties=props)
    for run in (fast, ref):
        assert run.result.verdict == "violated"
        assert [a for a, _ in run.result.violation.trace[1:]] == [a for a, _ in ref.result.violation.trace[1:]]
    assert fast.result.depth == ref.result.depth
    if workers == 1:  # worker processes finish the level they were expanding before they stop
        assert fast.result.distinct_states == ref.result.distinct_states


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("def oops(:\n", "properties file {f} failed: SyntaxError"),
        ("raise RuntimeError('no')\n", "properties file {f} failed: RuntimeError: no"),
        ("X = 1\n", "properties file {f} declares no property"),
        (
            "from kafkamc.invariants.properties import state_invariant\n"
            "@state_invariant('clash')\ndef WellFormed(cfg, V):\n    return []\n",
            "properties file {f}: WellFormed is the name of a built-in invariant",
        ),
    ],
)
def test_a_bad_properties_file_is_one_line_and_exit_2(tmp_path, text, says):
    f = tmp_path / "p.py"
    f.write_text(text)
    p = run_kafkamc("check", "--rf", 1, "--minisr", 1, "--properties", f)
    assert p.returncode == 2
    assert p.stderr.startswith("kafkamc: error: " + says.format(f=f)), p.stderr
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr
    with pytest.raises(PropertiesError):
        PropertyFile.read(f)


def test_missing_file_and_unknown_name_are_usage_errors(tmp_path):
    p = run_kafkamc("check", "--properties", tmp_path / "none.py")
    assert (p.returncode, p.stderr.strip()) == (2, f"kafkamc: error: no such properties file: {tmp_path / 'none.py'}")
    p = run_kafkamc("check", "--properties", EXAMPLE, "--invariant", "NoSuchThing")
    assert p.returncode == 2 and "unknown invariant 'NoSuchThing'" in p.stderr


@pytest.mark.spark
def test_spark_executors_run_the_files_declarations(tmp_path):
    """The file travels as text to the executors; the counterexample is the local one."""
    args = ("--rf", 3, "--minisr", 2, "--invariant", "NoAckBelowMinIsr")
    p, s = check_json(*args, "--engine", "spark", "--spark-master", "local[2]", "--trace-out", tmp_path / "t.json")
    assert p.returncode == 1, p.stderr
    assert s["violation"]["actions"] == NO_ACK_PATH
    local = check_json(*args, "--workers", 1, "--trace-out", tmp_path / "l.json")[1]
    assert s["distinct_states"] == local["distinct_states"]
