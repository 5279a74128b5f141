"""Small things a user hits on the command line (issue 32): one verdict word for text and JSON,
flags that cannot do anything refused, and a first run that does not look broken."""

from __future__ import annotations

import json

from helpers import run_kafkamc

SMALL = ("check", "--rf", "2", "--minisr", "2", "--max-records", "1", "--quiet")


def test_an_unreachable_target_is_one_verdict_in_text_and_json():
    text = run_kafkamc(*SMALL, "--reach", "HealthyFollowerShrunk", "--reach", "ElrElection", "--trace-out", "/dev/null")
    assert text.returncode == 1, text.stderr
    # Only the target never seen is named (ElrElection was reached on the way).
    assert "unreachable: HealthyFollowerShrunk never happens within the bounds" in text.stdout
    out = run_kafkamc(*SMALL, "--reach", "HealthyFollowerShrunk", "--json")
    assert out.returncode == 1, out.stderr
    assert json.loads(out.stdout)["verdict"] == "unreachable"


def test_a_reached_target_is_reached_in_both():
    out = run_kafkamc(*SMALL, "--reach", "ElrElection", "--json", "--trace-out", "/dev/null")
    assert out.returncode == 0 and json.loads(out.stdout)["verdict"] == "reached"


def test_reassignments_without_a_broker_pool_are_an_error():
    for flag in ("--max-reassignments", "--max-reassignment-cancels"):
        p = run_kafkamc(*SMALL, flag, "1")
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr == (
            f"kafkamc: error: {flag} needs --brokers above --rf (2): a reassignment moves to another broker\n"
        )
        p = run_kafkamc(*SMALL, "--brokers", "2", flag, "1")
        assert p.returncode == 2 and p.stderr.startswith(f"kafkamc: error: {flag} needs --brokers above --rf")


def test_reassignments_with_a_broker_pool_run():
    p = run_kafkamc(*SMALL, "--brokers", "3", "--max-reassignments", "1", "--max-isr-shrinks", "0", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["coverage"]["AlterPartitionReassignments"] > 0


def test_depth_first_liveness_is_refused_not_run_breadth_first():
    """The liveness graph is built breadth-first whatever --strategy says: asking for dfs is an
    error, as it is with --workers, Spark and the reference engine."""
    for args in (["--liveness"], ["--invariant", "EventuallyLeader"]):
        p = run_kafkamc(*SMALL, "--strategy", "dfs", *args)
        assert (p.returncode, p.stdout) == (2, "")
        assert p.stderr == "kafkamc: error: liveness is checked breadth-first only; drop --strategy dfs\n"
    p = run_kafkamc(*SMALL, "--strategy", "dfs", "--json")  # dfs alone still runs
    assert p.returncode == 0 and json.loads(p.stdout)["strategy"] == "dfs"


LEFT_OFF = (
    "left off by bounds: ControllerFenceBroker, BrokerHeartbeat (max_fences=0); "
    "AutoLeaderRebalance (max_leader_elections=0); ElectLeadersUnclean (max_unclean_elections=0); "
    "ControlledShutdown, ControlledShutdownComplete (max_controlled_shutdowns=0); "
    "AlterPartitionReassignments (max_reassignments=0); CancelPartitionReassignment (max_reassignment_cancels=0)"
)


def test_a_first_run_names_what_its_bounds_leave_off_in_one_line_and_warns_of_nothing():
    p = run_kafkamc("check", "--rf", "2", "--minisr", "2", "--quiet", columns=1000)
    assert p.returncode == 0, p.stderr
    assert LEFT_OFF + "\n" in p.stdout
    assert "warning" not in p.stdout + p.stderr
    s = json.loads(run_kafkamc("check", "--rf", "2", "--minisr", "2", "--quiet", "--json").stdout)
    assert s["never_fired"] == []
    assert s["left_off"] == {
        "ControllerFenceBroker": ["max_fences"],
        "BrokerHeartbeat": ["max_fences"],
        "AutoLeaderRebalance": ["max_leader_elections"],
        "ElectLeadersUnclean": ["max_unclean_elections"],
        "ControlledShutdown": ["max_controlled_shutdowns"],
        "ControlledShutdownComplete": ["max_controlled_shutdowns"],
        "AlterPartitionReassignments": ["max_reassignments"],
        "CancelPartitionReassignment": ["max_reassignment_cancels"],
    }


def test_an_action_the_bounds_allow_that_never_fired_is_warned_about():
    """--max-fences 1 allows a heartbeat that unfences, but at depth 1 no broker is fenced yet."""
    p = run_kafkamc(*SMALL, "--max-fences", "1", "--max-depth", "1", columns=1000)
    assert p.returncode == 3, p.stderr
    assert "warning: action BrokerHeartbeat never fired, though these bounds allow it\n" in p.stdout
    assert "ControllerFenceBroker" not in p.stdout.split("left off by bounds:")[1].splitlines()[0]
