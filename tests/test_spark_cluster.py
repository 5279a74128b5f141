"""`kafkamc check --engine spark` on a real Spark standalone cluster: a master and two workers
of one core each on 127.0.0.1 (checker/spark/cluster.py), driven through the installed CLI as
a user would drive it, against `--engine local`; a worker killed mid-run; no process left.

Every test is marked `spark` (select with `-m spark`). One cluster serves the module: it
takes about 8 s to start, and each run adds about 10 s for the application and its executors.

What a run on the cluster needs from its environment:
  * PYSPARK_PYTHON in the driver's environment. PySpark's driver sends that path (default:
    `python3`) to the executors, which run it from their worker's PATH (kafkamc also takes
    `--conf spark.pyspark.python=...` for it). Here it is the bare interpreter this venv was
    made from: executors need the standard library only.
  * spark.driver.host and spark.driver.bindAddress = 127.0.0.1, so that the executors reach
    the driver on loopback whatever the machine's name resolves to.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import EXE
from kafkamc.checker.spark.cluster import Cluster, ClusterFailed, standalone_cluster

pytestmark = pytest.mark.spark

HOLDS = ["--rf", "2", "--minisr", "1", "--max-hard-crashes", "0", "--max-clean-shutdowns", "1"]  # 4,774 states
VIOLATED = ["--rf", "3", "--minisr", "2", "--protocol", "2.7.0"]  # HighWatermarkMonotonic, 8 steps, 12,127 states
# Without KAFKA-7128's fix a follower rejoins the ISR at the leader's HW: NoCommittedDataLoss in
# 14 steps after 198,314 states (89,514 when it was timed at about 35 s on this cluster), long
# enough to kill a worker at level 5.
LONG_VIOLATED = ["--rf", "3", "--minisr", "2", "--rule", "isr_join=hw"]

# What depends on the engine, not on the search.
ENGINE_FIELDS = {"elapsed_s", "states_per_s", "engine", "core", "workers", "partitions", "spark_master"}
ENGINE_FIELDS |= {"visited_bytes_per_state", "peak_rss_mib", "peak_bytes_per_state"}


def without_venv_path() -> dict[str, str]:
    """PATH without this interpreter's folder: `python3` on the workers is not the venv's."""
    here = os.path.dirname(sys.executable)
    return {"PATH": os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != here)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(
        workers=2, cores=1, memory="3g", folder=tmp_path_factory.mktemp("cluster"), env=without_venv_path()
    ) as c:
        yield c
    assert c.processes() == [], "a process of the cluster outlived its teardown"


def running(pid: int) -> bool:
    """A process that has not ended (a zombie has: it only waits for its parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def spark_args(cluster: Cluster, *args: str) -> list[str]:
    conf = [x for k, v in cluster.driver_conf().items() for x in ("--conf", f"{k}={v}")]
    return [EXE, "check", *args, "--engine", "spark", "--spark-master", cluster.master_url, "--partitions", "2", *conf]


# The executors run the interpreter this venv was made from: the standard library and none of
# kafkamc's dependencies (test_executors_need_only_the_standard_library). Everything they run
# arrives with the job: kafkamc as a zip, the invariants compiled to Python text.
BARE_PYTHON = getattr(sys, "_base_executable", sys.executable)


def driver_env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": BARE_PYTHON}


def test_executors_need_only_the_standard_library():
    """The Python every test here gives the executors has no Z3 (what the executors import
    is checked in tests/test_shipped_checks.py: no z3, networkx, click or rich)."""
    p = subprocess.run([BARE_PYTHON, "-c", "import z3"], capture_output=True, text=True)
    if p.returncode == 0:
        pytest.skip(f"{BARE_PYTHON} has z3: no bare interpreter to give the executors here")
    assert "ModuleNotFoundError" in p.stderr


def local(tmp_path: Path, *args: str) -> tuple[dict, dict | None]:
    trace = tmp_path / "local-trace.json"
    p = subprocess.run(
        [EXE, "check", *args, "--engine", "local", "--workers", "1", "--json", "--quiet", "--trace-out", str(trace)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout), json.loads(trace.read_text()) if trace.exists() else None


def comparable(summary: dict) -> dict:
    out = {k: v for k, v in summary.items() if k not in ENGINE_FIELDS}
    if out.get("violation"):
        out["violation"] = {k: v for k, v in out["violation"].items() if k != "trace_file"}
    return out


def assert_same_run(tmp_path: Path, spark: dict, args: list[str]) -> None:
    """Counts, depth, verdict, coverage, witnesses and the counterexample, in the summary and
    in the saved trace file, equal those of the local engine."""
    expected, expected_trace = local(tmp_path, *args)
    assert spark["engine"] == "spark" and spark["spark_master"].startswith("spark://127.0.0.1:")
    # The local engine's fields (the Spark engine adds its own, partitions and memory).
    assert comparable({k: v for k, v in spark.items() if k in expected}) == comparable(expected)
    if expected_trace is not None:
        assert json.loads(Path(spark["violation"]["trace_file"]).read_text()) == expected_trace


def test_two_workers_of_one_core_are_alive(cluster):
    status = cluster.status()
    alive = [w for w in status["workers"] if w["state"] == "ALIVE"]
    assert status["aliveworkers"] == 2 and [w["cores"] for w in alive] == [1, 1]
    assert [w["memory"] for w in alive] == [3072, 3072]
    for pid in cluster.worker_pids():  # spark-class exec'ed java: the pid started is the JVM
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert os.path.basename(cmdline[0]) == b"java" and b"org.apache.spark.deploy.worker.Worker" in cmdline


@pytest.mark.parametrize("args", [HOLDS, VIOLATED], ids=["holds", "violated"])
def test_check_on_the_cluster_agrees_with_local(cluster, tmp_path, args):
    trace = tmp_path / "spark-trace.json"
    p = subprocess.run(
        [*spark_args(cluster, *args), "--json", "--quiet", "--trace-out", str(trace)],
        capture_output=True,
        text=True,
        env=driver_env(),
        timeout=600,
    )
    assert p.returncode == (1 if args is VIOLATED else 0), p.stderr
    spark = json.loads(p.stdout)
    assert spark["verdict"] == ("violated" if args is VIOLATED else "holds")
    assert_same_run(tmp_path, spark, args)
    # Both workers ran executors of this application.
    apps = {d.name for w in ("worker-0", "worker-1") for d in (cluster.folder / "work" / w).iterdir()}
    assert any(app.startswith("app-") for app in apps)


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def test_a_worker_killed_mid_run_changes_nothing(cluster, tmp_path):
    """SIGKILL worker 0's JVM once level 5 is reported. Its executor notices the worker gone and
    exits; the driver loses it and, since on loopback every executor is on host 127.0.0.1,
    Spark drops the shuffle files of the whole host. The lost partitions are recomputed on
    worker 1 from the last checkpoint (level 4: every 4 levels), and the run ends with the
    counts, verdict and trace of the local engine.

    --checkpoint-dir: on a standalone master kafkamc writes no checkpoint unless told where
    (it needs storage every executor sees; a local folder is that on loopback, whatever the
    warning Spark logs about it). Without one the run survives too, recomputing every level
    from level 0 through the lineage: 7 stages instead of 1 at level 6 of this run.
    No spark.task.maxFailures is needed: a task lost with its executor because the worker
    died is not counted as a task failure, and a stage whose shuffle input is gone is
    resubmitted (spark.stage.maxConsecutiveAttempts, 4)."""
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    trace = tmp_path / "spark-trace.json"
    args = [*spark_args(cluster, *LONG_VIOLATED), "--json", "--trace-out", str(trace)]
    args += ["--checkpoint-dir", f"file://{checkpoints}"]
    worker0 = cluster.folder / "work" / "worker-0"
    with open(tmp_path / "stdout.json", "w") as out:
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, text=True, env=driver_env())
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(p.stderr, lines), daemon=True).start()
    seen, killed_after, deadline = [], None, time.monotonic() + 600
    try:
        while (line := lines.get(timeout=max(deadline - time.monotonic(), 0.1))) is not None:
            seen.append(line)
            level = re.search(r"BFS level (\d+)", line)
            if killed_after is None and level and int(level.group(1)) >= 5:
                assert cluster.processes(under=worker0), "worker 0 runs no executor"
                cluster.kill_worker(0)
                killed_after = len(seen)
        assert p.wait(timeout=60) == 1, "".join(seen)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert killed_after is not None, "".join(seen)
    after = [ln for ln in seen[killed_after:] if "BFS level" in ln]
    assert len(after) >= 3, f"the run ended too soon after the kill; lengthen LONG_VIOLATED:\n{''.join(seen)}"
    spark = json.loads((tmp_path / "stdout.json").read_text())
    assert spark["verdict"] == "violated" and spark["violation"]["length"] == 14
    assert_same_run(tmp_path, spark, LONG_VIOLATED)
    assert list(checkpoints.iterdir()) == [], "the run's checkpoints were left behind"
    # Worker 0's executor (and its Python workers) went with it; worker 1's ended with the run.
    _wait_until(lambda: not cluster.processes(under=worker0), 30, "worker 0's executor outlived it")
    _wait_until(lambda: cluster.status()["aliveworkers"] == 1, 30, "the master still counts worker 0")
    cluster.start_worker(0)  # for the tests after this one
    cluster.wait_for_workers()


def _wait_until(done, seconds: float, failure: str) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, failure
        time.sleep(0.2)


def test_stopping_the_cluster_kills_running_executors(tmp_path):
    """The context's exit while an application runs: the master, the worker, its executor and
    the executor's Python workers all end."""
    with standalone_cluster(workers=1, folder=tmp_path) as c:
        p = subprocess.Popen(
            [*spark_args(c, *LONG_VIOLATED), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=driver_env(),
        )
        try:
            for line in p.stderr:  # running: the first level is done
                if "BFS level 1" in line:
                    break
            executors = c.processes(under=c.folder / "work")
            assert executors, "no executor runs"
        except BaseException:
            p.kill()
            raise
    try:
        assert c.processes() == [] and not any(running(pid) for pid in executors)
    finally:
        p.kill()
        p.communicate()


_PARENT = """
import sys, time
from kafkamc.checker.spark.cluster import standalone_cluster
with standalone_cluster(workers=1, folder=sys.argv[1]) as c:
    print(c.folder, flush=True)
    time.sleep(600)
"""


def test_the_cluster_dies_with_the_process_that_started_it(tmp_path):
    """SIGKILL leaves no teardown to run: PR_SET_PDEATHSIG takes the JVMs down with their parent."""
    p = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        folder = p.stdout.readline().strip()
        assert folder, "the cluster did not start"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    cluster = Cluster(Path(folder), 0, 1, "1g", {})  # to look for its processes, by folder
    _wait_until(lambda: not cluster.processes(), 30, "the cluster outlived the process that started it")


def test_a_cluster_that_cannot_start_is_one_clean_error(tmp_path):
    began = time.monotonic()
    with pytest.raises(ClusterFailed) as e:
        with standalone_cluster(workers=1, folder=tmp_path, env={"JAVA_HOME": "/nonexistent"}):
            pass
    assert str(e.value).startswith("the Spark master exited with code 1: ") and "/nonexistent/bin/java" in str(e.value)
    assert "\n" not in str(e.value) and time.monotonic() - began < 30
    with pytest.raises(ValueError, match="worker memory"):
        with standalone_cluster(workers=1, memory="lots"):
            pass
