"""The command line through the installed `kafkamc` entry point: exit codes, JSON, errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kafkamc.checker.core import native

EXE = shutil.which("kafkamc", path=os.path.dirname(sys.executable)) or shutil.which("kafkamc")


def kafkamc(*args, cwd=None):
    assert EXE, "the kafkamc entry point is not installed"
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_small_check_holds_with_json(tmp_path):
    p = kafkamc("check", "--rf", "2", "--minisr", "2", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["verdict"] == "holds"
    assert out["distinct_states"] == 9291 and out["depth"] == 22  # tests/test_pinned.py (8,549 before trace validation)
    assert out["protocol"]["era"] == "4.3.0" and out["protocol"]["rules"]["elr"] == "on"
    assert out["reached"]["ElrElection"] == 4 and out["vacuity_warnings"] == []
    assert out["states_generated"] > out["distinct_states"]
    assert out["violation"] is None
    assert out["config"]["rf"] == 2 and out["bounds"]["max_records"] == 2
    assert set(out) >= {"verdict", "distinct_states", "states_generated", "depth", "elapsed_s", "config", "violation"}


def test_violation_saves_a_trace_that_replays(tmp_path):
    trace = tmp_path / "t.json"
    p = kafkamc("check", "--rf", "3", "--minisr", "1", "--unclean", "--json", "--trace-out", str(trace))
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["verdict"] == "violated"
    v = out["violation"]
    assert v["invariant"] == "NoCommittedDataLoss" and v["length"] == 7  # issue 29: one shrink of two
    assert v["trace_file"] == str(trace) and trace.exists()
    assert v["explanation"]["failed_parts"][0]["part"] == "broker 2 in the ISR holds committed offset 0"
    r = kafkamc("trace", "replay", str(trace))
    assert r.returncode == 0
    assert "replayed 7 steps: a real path of the model; NoCommittedDataLoss is violated" in r.stdout


def test_rendered_counterexample(tmp_path):
    p = kafkamc("check", "--acks", "1", "--quiet", "--trace-out", str(tmp_path / "a.json"))
    assert p.returncode == 1
    text = p.stdout
    for expected in (
        "step 0: Init",
        "step 1: Produce(leader=1, record=1)",
        "step 2: BrokerCrash(broker=1, keep=0)",
        "step 3: BrokerSessionTimeout(broker=1)",
        "step 4: MetadataUpdate(broker=2)",
        "VIOLATED AckedWriteDurability",
        "fails: acknowledged record 1 is in leader 2's log",
        "violated: AckedWriteDurability after 4 steps (shortest: yes)",
    ):
        assert expected in text, expected
    shown = kafkamc("trace", "show", str(tmp_path / "a.json"), "--step", "4")
    assert shown.returncode == 0 and "step 4: MetadataUpdate" in shown.stdout and "step 3" not in shown.stdout


def test_limits_exit_3(tmp_path):
    p = kafkamc("check", "--max-states", "200", "--json", "--quiet", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    out = json.loads(p.stdout)
    assert out["verdict"] == "incomplete" and out["stop_reason"] == "max states 200"
    assert out["distinct_states"] >= 200


def test_human_summary_names_bounds_and_coverage(tmp_path):
    p = kafkamc("check", "--rf", "2", "--minisr", "2", "--quiet", cwd=tmp_path)
    assert p.returncode == 0
    bounds = [line.split()[0] for line in p.stdout.split("bounds:\n")[1].splitlines()[:5]]
    assert (
        " ".join(bounds)
        == "max_clean_shutdowns=0 max_hard_crashes=1 max_controlled_shutdowns=0 max_records=2 max_isr_shrinks=2"
    )
    assert "protocol: 4.3.0 (rules as of Kafka 4.3.0)" in p.stdout
    # Off at their default bounds of 0: one plain line, no warning (tests/test_cli_hits.py).
    assert "left off by bounds: ControllerFenceBroker, BrokerHeartbeat (max_fences=0);" in p.stdout
    assert "OffsetsForLeaderEpoch never fired" not in p.stdout  # not used by the newest truncation rule
    assert "reached: HighWatermarkAdvances (3 steps), ElrElection (4 steps)" in p.stdout
    assert "holds: every invariant" in p.stdout


def test_protocol_flags_and_presets(tmp_path):
    p = kafkamc(
        *"check --rf 3 --minisr 2 --max-records 1 --no-elr --json --quiet --trace-out".split(), str(tmp_path / "t.json")
    )
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    # The newest minus ELR is no preset: 3.7.0 also has last_known_leader=any (4.0.0 logged the check).
    rules = out["protocol"]["rules"]
    assert out["protocol"]["era"] == "custom" and (rules["elr"], rules["last_known_leader"]) == ("off", "unfenced")
    assert out["violation"]["invariant"] == "HighWatermarkMonotonic" and out["violation"]["length"] == 11
    # Without ELR there is no last-known-leader election: the same search, the same counterexample as 3.7.0.
    q = kafkamc(
        *"check --rf 3 --minisr 2 --max-records 1 --protocol 3.7.0 --json --quiet --trace-out".split(),
        str(tmp_path / "t37.json"),
    )
    old = json.loads(q.stdout)
    assert old["protocol"]["era"] == "3.7.0" and old["distinct_states"] == out["distinct_states"]
    steps = [json.loads((tmp_path / name).read_text())["steps"] for name in ("t.json", "t37.json")]
    assert steps[0] == steps[1]
    p = kafkamc(
        *"check --rf 2 --minisr 2 --max-records 1 --protocol 0.8.2 --rule isr_lag=time --quiet --json".split(),
        cwd=tmp_path,
    )
    assert json.loads(p.stdout)["protocol"]["rules"]["truncation"] == "hw"
    p = kafkamc("protocols")
    assert p.returncode == 0
    assert "0.8.2: isr_lag=messages, truncation=hw" in p.stdout
    assert "4.3.0 (newest, the default): every rule at its newest behaviour" in p.stdout
    out = json.loads(kafkamc("protocols", "--json").stdout)
    assert out["newest"] == "4.3.0" and out["presets"]["2.8.0"]["truncation"] == "diverging_epoch"


def test_reach_saves_a_witness(tmp_path):
    w = tmp_path / "w.json"
    p = kafkamc(*"check --rf 2 --minisr 2 --max-records 1 --reach ElrElection --quiet --trace-out".split(), str(w))
    assert p.returncode == 0, p.stderr
    assert "reached: ElrElection; shortest witness saved to" in p.stdout
    r = kafkamc("trace", "replay", str(w))
    assert r.returncode == 0 and "replayed 4 steps" in r.stdout
    p = kafkamc(
        *"check --rf 2 --minisr 2 --max-records 1 --reach HealthyFollowerShrunk --quiet --trace-out".split(), str(w)
    )
    assert p.returncode == 1 and "unreachable: HealthyFollowerShrunk" in p.stdout


def test_durability_table_small(tmp_path):
    p = kafkamc("durability", "--max-rf", "2", "--json")
    assert p.returncode == 0, p.stderr
    cells = {(c["rf"], c["minisr"]): (c["writes"], c["durable"]) for c in json.loads(p.stdout)["cells"]}
    assert cells == {(1, 1): (0, 0), (1, 2): (0, 0), (1, 3): (0, 0), (2, 1): (1, 0), (2, 2): (0, 1), (2, 3): (0, 1)}


def test_invariants_listed():
    p = kafkamc("invariants")
    assert p.returncode == 0
    names = [line.split()[0] for line in p.stdout.splitlines()]
    assert names == [
        "NoCommittedDataLoss",
        "LeaderCompleteness",
        "EligibleReplicasComplete",
        "AckedWriteDurability",
        "HighWatermarkMonotonic",
        "NoSplitBrain",
        "LogMatching",
        "ConsistentReads",
        "MaximalIsrCoversIsr",
        "MaximalIsrCoversElr",  # issue 29: the peer's promises
        "AckedWriteSurvives",
        "LastKnownLeaderKept",
        "WellFormed",
        "EventuallyLeader",
        "AckedEventuallyFullyReplicated",
        "WriteEventuallyAnswered",
        "FollowerEventuallyInSync",
        "FollowerStaysInSync",
        "RecoveringEventuallyClears",
        "ControlledShutdownCompletes",
        "EventuallyUnfenced",  # issue 29: the peer's promises
        "AlterPartitionSettles",
        "MetadataConverges",
        "ReassignmentCompletes",
        "EventuallyWritable",
        "EventuallyAvailable",
    ]
    kinds = {line.split()[0]: line.split()[1:3] for line in p.stdout.splitlines()}
    assert kinds["EventuallyLeader"] == ["promise", "liveness"]
    assert kinds["EventuallyAvailable"] == ["trade-off", "liveness"]
    assert kinds["AckedWriteSurvives"] == ["named", "state"]  # checked only when named


BAD = [
    (["check", "--protocol", "9.9"], "unknown protocol preset '9.9'"),
    (["check", "--rule", "elr=maybe"], "rule elr has no behaviour 'maybe'"),
    (["check", "--rule", "nope=1"], "unknown protocol rule 'nope'"),
    (["check", "--rule", "elr"], "--rule expects NAME=VALUE"),
    (["check", "--reach", "Nope"], "unknown reachability property 'Nope'"),
    (["check", "--engine", "spark", "--spark-master", "nonsense://x"], "Spark could not start"),
    (["check", "--engine", "spark", "--strategy", "dfs"], "--engine spark runs breadth-first only"),
    (["check", "--engine", "spark", "--conf", "novalue"], "--conf expects KEY=VALUE"),
    (["check", "--rf", "0"], "--rf must be at least 1"),
    (["check", "--max-clean-shutdowns", "-1"], "--max-clean-shutdowns must not be negative"),
    (["check", "--acks", "2"], "Invalid value for '--acks'"),
    (["check", "--strategy", "random"], "Invalid value for '--strategy'"),
    (["check", "--rf", "three"], "Invalid value for '--rf'"),
    (["check", "--no-such-flag"], "No such option"),
    (["check", "--invariant", "Nope"], "unknown invariant 'Nope'"),
    (["check", "--time-limit", "0"], "--time-limit must be a positive number (got 0)"),
    (["check", "--time-limit", "nan"], "--time-limit must be a positive number (got nan)"),
    (["check", "--time-limit", "inf"], "--time-limit must be a positive number (got inf)"),
    (["check", "--cache-mib", "-1"], "--cache-mib must be a positive number (got -1)"),
    (["check", "--spark-master", "local[2]"], "--spark-master only applies with --engine spark"),
    (["check", "--partitions", "3", "--conf", "a=b"], "--partitions, --conf only apply with --engine spark"),
    (["check", "--elr", "--rule", "elr=off"], "--elr and --rule elr=off disagree"),
    (["check", "--trace-out", "/proc/version/t.json"], "/proc/version is a file, not a folder"),
    (["check", "--trace-out", "/"], "is a directory"),
    (["trace", "show", "/nonexistent/trace.json"], "no such trace file"),
    (["frobnicate"], "No such command"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_is_one_line_and_exit_2(args, message):
    p = kafkamc(*args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("kafkamc: error: ") and message in lines[0]


def _saved_trace(tmp_path) -> Path:
    path = tmp_path / "ok.json"
    assert kafkamc("check", "--acks", "1", "--quiet", "--trace-out", str(path)).returncode == 1
    return path


def _previous_release(d: dict) -> str:
    """The file as the previous release wrote it: schema 4, no leader's view of ineligible brokers."""
    steps = [
        {
            **s,
            "state": {
                **s["state"],
                "brokers": [{k: v for k, v in b.items() if k != "ineligible"} for b in s["state"]["brokers"]],
            },
        }
        for s in d["steps"]
    ]
    return json.dumps({**d, "schema": "kafkamc.trace/4", "steps": steps})


@pytest.mark.parametrize(
    "mangle,message",
    [
        (lambda d: "not json at all {", "is not JSON"),
        (lambda d: json.dumps({**d, "schema": "kafkamc.trace/0"}), "has schema 'kafkamc.trace/0'"),
        (_previous_release, "has schema 'kafkamc.trace/4'; this kafkamc reads 'kafkamc.trace/5'"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "schema"}), "no schema field"),
        (
            lambda d: json.dumps(
                {
                    **d,
                    "steps": d["steps"][:1]
                    + [{"action": {"type": "Produce", "leader": 2, "record": 1}, "state": d["steps"][1]["state"]}],
                }
            ),
            "does not lead to the recorded state",
        ),
        (lambda d: json.dumps({**d, "config": {**d["config"], "colour": "blue"}}), "unknown configuration key"),
        (lambda d: json.dumps({**d, "steps": [{"state": 1}]}), "malformed"),
    ],
)
@pytest.mark.parametrize("command", ["show", "replay"])
def test_bad_trace_files_exit_2(tmp_path, mangle, message, command):
    data = json.loads(_saved_trace(tmp_path).read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(mangle(data))
    p = kafkamc("trace", command, str(bad))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert message in p.stderr


@pytest.mark.slow
def test_bench_prints_the_table_as_json():
    p = kafkamc("bench", "--json", "--run", "default")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    (row,) = out["runs"]
    assert out["machine"]["cpus"] >= 1
    # 485,539 -> 541,729: tests/test_pinned.py (a crashed follower dropped by the leader's lag check).
    assert (row["run"], row["verdict"], row["distinct_states"], row["depth"]) == ("default", "holds", 541729, 30)
    assert row["distinct_states_per_s"] > 0 and row["peak_memory_mib"] > 0
    assert 0 < row["visited_bytes_per_state"] <= 32
    assert row["core"] == ("native" if native.load() is not None else "python")
    # Keyed on every broker before issue 40: 288,090; 4,462 while Python kept a quarter of the
    # budget; 4,475 while Python filled a Fetch handle cache beside the core's, which never hit.
    assert row["caches"]["BrokerCrash"]["misses"] == 4462
    if row["core"] == "native":  # where the core's memory went (native/src/search/memory.rs)
        # 746,496 slots of 8 bytes: the visited set grows by half (checker/store/visited.py).
        assert row["core_tables_mib"]["visited"] == 5.7 and row["core_tables_mib"]["parcels"] == 0


def test_bench_unknown_run_is_one_line():
    p = kafkamc("bench", "--run", "nope")
    assert p.returncode == 2 and "unknown benchmark run 'nope'" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.mark.parametrize("args", [[], ["trace"]])
def test_bare_commands_print_help(args):
    p = kafkamc(*args)
    assert p.returncode == 0 and p.stdout.startswith("Usage: kafkamc") and "Commands:" in p.stdout, p.stderr


def test_output_path_is_checked_before_the_search(tmp_path):
    """A trace path under a file is refused at once (exit 2), not after the search."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = kafkamc(*"check --rf 3 --minisr 2 --quiet --trace-out".split(), str(blocker / "t.json"))
    assert p.returncode == 2 and "is a file, not a folder" in p.stderr and p.stdout == ""


def test_trace_out_into_a_missing_folder_is_refused_before_the_search(tmp_path):
    p = kafkamc(*"check --rf 3 --minisr 2 --trace-out /nonexistent/dir/t.json".split(), cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "kafkamc: error: --trace-out /nonexistent/dir/t.json: folder /nonexistent/dir does not exist\n"
    assert not Path("/nonexistent").exists()


def test_a_trace_that_cannot_be_written_at_the_end_is_printed_and_said(tmp_path):
    """/dev/full passes the check before the search and fails the write: no traceback, the
    counterexample on stdout, the verdict line saying where it could not be saved."""
    p = kafkamc(*"check --rf 2 --minisr 1 --protocol 0.11 --quiet --trace-out /dev/full".split(), cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "step 6: BrokerRestart(broker=1)" in p.stdout
    last = p.stdout.splitlines()[-1]
    assert last.endswith("trace could not be saved (/dev/full: No space left on device); it is printed above"), last
    q = kafkamc(*"check --rf 2 --minisr 1 --protocol 0.11 --quiet --json --trace-out /dev/full".split(), cwd=tmp_path)
    v = json.loads(q.stdout)["violation"]
    assert (v["trace_file"], v["trace_error"]) == (None, "/dev/full: No space left on device")


def test_output_to_a_pipe_keeps_lines_whole(tmp_path):
    """Not on a terminal (CI logs, a pipe) and without COLUMNS, a result line is not wrapped."""
    out = tmp_path / "a-long-folder-name-to-push-the-line-past-eighty-columns" / "unclean-election-trace.json"
    out.parent.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    p = subprocess.run(
        [EXE, *"check --rf 2 --minisr 1 --unclean --quiet --trace-out".split(), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 1, p.stderr
    saved = [line for line in p.stdout.splitlines() if "trace saved to" in line]
    assert saved and saved[0].endswith(str(out)), p.stdout


def test_incomplete_run_says_what_was_covered(tmp_path):
    """Every state within the explored depth was found: a search bounded by that depth finds
    no more states than the stopped one did."""
    p = kafkamc(*"check --rf 3 --minisr 2 --max-states 5000 --workers 1 --json --quiet".split(), cwd=tmp_path)
    stopped = json.loads(p.stdout)
    n = stopped["explored_depth"]
    assert p.returncode == 3 and n == stopped["depth"] - 1 > 0
    q = kafkamc(*f"check --rf 3 --minisr 2 --max-depth {n} --workers 1 --json --quiet".split(), cwd=tmp_path)
    assert json.loads(q.stdout)["distinct_states"] <= stopped["distinct_states"]
    text = kafkamc(*"check --rf 3 --minisr 2 --max-states 5000 --workers 1 --quiet".split(), cwd=tmp_path).stdout
    assert f"every path of up to {n} steps explored" in text
