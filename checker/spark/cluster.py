"""A Spark standalone cluster on this machine's loopback: one master and N workers, started
with the launcher of the pip-installed pyspark, for the tests and the benchmark.

    os.environ["PYSPARK_PYTHON"] = sys.executable     # before the driver starts: see below
    with standalone_cluster(workers=2) as cluster:
        explore_spark(cfg, master=cluster.master_url, conf=cluster.driver_conf())

The executors run the Python whose path the driver sends them: $PYSPARK_PYTHON of the
driver's process, else `python3` on the workers' PATH (the conf spark.pyspark.python is
read by spark-submit only, not by a driver started from Python such as `kafkamc check`).
They need kafkamc's dependencies (z3-solver, networkx, ...) and the driver's pyspark
version; kafkamc itself is shipped to them as a zip. driver_conf() makes the driver listen
and advertise itself on 127.0.0.1, where the executors look for it.

Every process is a `spark-class` (a bash script that execs java) in a session of its own,
so that its process group holds the JVM and what it starts: a worker's executor JVMs, and
the PySpark daemons those fork (each daemon moves to a group of its own, but runs in the
executor's folder, under the cluster's). On exit every one of them is killed: the groups of
the processes not killed yet, then any process still running in or naming the cluster's
folder (whose name is unique). On Linux the
master and worker JVMs also die with the process that started them (PR_SET_PDEATHSIG, which
survives bash's exec); an executor whose worker is gone exits by itself (Spark's
WorkerWatcher). Start the cluster from the main thread: the signal comes when the thread
that started a process ends.

Logs (each JVM's output, the executors' stdout and stderr under work/) stay in the
cluster's folder, removed on exit unless the caller gave the folder.

    python -m kafkamc.checker.spark.cluster --workers 2     # runs until Ctrl-C
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterFailed(RuntimeError):
    """The cluster did not come up (no Java, a JVM that exited, workers that never registered)."""


def spark_home() -> Path:
    """The installed pyspark package: it carries bin/spark-class and the jars."""
    import pyspark

    return Path(os.path.dirname(pyspark.__file__))


def free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 now (all held open together, so no two are the same)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _die_with_parent() -> Callable[[], object] | None:
    """A preexec_fn for Linux: prctl(PR_SET_PDEATHSIG, SIGKILL) in the child, which keeps it
    across exec. Looked up here, in the parent: the child, forked from a process that may run
    threads (a driver's py4j threads), only makes the call; no import, no dlopen."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    kill = int(signal.SIGKILL)
    return lambda: prctl(1, kill)  # 1: PR_SET_PDEATHSIG


class Cluster:
    """A running standalone cluster: its master URL, its processes, and how to stop them."""

    def __init__(self, folder: Path, workers: int, cores: int, memory: str, env: dict):
        self.folder, self.cores, self.memory, self.env = folder, cores, memory, env
        self.port, self.web_port = free_ports(2)
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.web_url = f"http://127.0.0.1:{self.web_port}"
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * workers

    # ---- starting

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen:
        log = self.folder / "logs" / f"{name}.out"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.folder,
                start_new_session=True,
                preexec_fn=_die_with_parent(),
            )
        return proc

    def start_master(self) -> None:
        args = [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.web_port)]
        self.master = self._launch("master", args)

    def start_worker(self, i: int) -> None:
        """Start worker i (again, after kill_worker(i)); wait_for_workers() to see it registered."""
        work = self.folder / "work" / f"worker-{i}"
        work.mkdir(exist_ok=True)
        args = [WORKER_CLASS, self.master_url, "--cores", str(self.cores), "--memory", self.memory]
        args += ["--host", "127.0.0.1", "--webui-port", str(free_ports(1)[0]), "--work-dir", str(work)]
        self.workers[i] = self._launch(f"worker-{i}", args)

    def wait_for_workers(self, n: int | None = None, timeout: float = 120.0) -> None:
        """Until the master's status shows n (default: all) ALIVE workers; ClusterFailed on a
        JVM that exits or at the timeout, with the end of the logs."""
        n = len(self.workers) if n is None else n
        deadline = time.monotonic() + timeout
        alive = -1
        while True:
            for name, proc in self._named():
                if proc.poll() is not None:
                    raise ClusterFailed(f"the Spark {name} exited with code {proc.returncode}: {self._tail(name)}")
            try:
                alive = self.status().get("aliveworkers", 0)
            except (OSError, ValueError):
                pass  # the master's web UI is not up yet (or answered half a page)
            if alive == n:
                return
            if time.monotonic() > deadline:
                said = "the master did not answer" if alive < 0 else f"{alive} of {n} workers alive"
                raise ClusterFailed(
                    f"the Spark cluster was not up after {timeout:.0f}s ({said}): {self._tail('master')}"
                )
            time.sleep(0.25)

    def _named(self) -> list[tuple[str, subprocess.Popen]]:
        """The processes that should be running: the master and the workers not killed."""
        named = [("master", self.master)] + [(f"worker-{i}", w) for i, w in enumerate(self.workers)]
        return [(name, p) for name, p in named if p is not None]

    def _tail(self, name: str, lines: int = 3) -> str:
        try:
            text = (self.folder / "logs" / f"{name}.out").read_text(errors="replace")
        except OSError:
            return "no log"
        said = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
        return " | ".join(said) or "an empty log"

    # ---- looking at it

    def status(self, timeout: float = 2.0) -> dict:
        """The master's JSON status (workers, their state, cores used, applications)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=timeout) as answer:
            return json.load(answer)

    def worker_pids(self) -> list[int]:
        """The worker JVMs' pids (spark-class execs java: the pid Popen started), -1 for a killed one."""
        return [w.pid if w is not None else -1 for w in self.workers]

    def kill_worker(self, i: int) -> int:
        """SIGKILL worker i's JVM, only it: its executor sees the worker gone and exits by itself."""
        proc = self.workers[i]
        if proc is None:
            raise ValueError(f"worker {i} is not running")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        self.workers[i] = None
        return proc.pid

    def driver_conf(self) -> dict[str, str]:
        """What a driver on this machine needs: answer the executors on loopback."""
        return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}

    def processes(self, under: Path | None = None) -> list[int]:
        """Every live process of the cluster: in a group it started, or running in or naming its
        folder (executors, PySpark daemons and their workers). Zombies are not counted.
        under: only those running in or naming that folder (worker i's: work/worker-i)."""
        mark = str(self.folder if under is None else under)
        # The groups of the processes started and not yet reaped: a pid reaped may be reused,
        # and so may a group's id once the group is empty.
        groups = {p.pid for _, p in self._named() if p.returncode is None} if under is None else set()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
                if fields[0] == "Z":
                    continue
                ours = int(fields[2]) in groups
                if not ours:
                    cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    ours = mark in cmdline or os.readlink(entry / "cwd").startswith(mark)
            except (OSError, ValueError, IndexError):
                continue  # gone, or not ours to look at
            if ours:
                found.append(int(entry.name))
        return sorted(found)

    # ---- stopping

    def stop(self, timeout: float = 30.0) -> list[int]:
        """SIGKILL the process group of every process started and not killed yet (its JVM and
        what that started), then whatever of the cluster still runs (a killed worker's executor,
        PySpark daemons, which make groups of their own), until none does; returns the pids
        killed after the groups (leftovers)."""
        for _, proc in self._named():
            if proc.returncode is None:  # not reaped: its pid, the group's id, is still ours
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for _, proc in self._named():
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass  # still there: the loop below reports it
        self.master, self.workers = None, [None] * len(self.workers)
        leftovers: list[int] = []
        deadline = time.monotonic() + timeout
        while pids := self.processes():
            leftovers += [p for p in pids if p not in leftovers]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() > deadline:
                raise ClusterFailed(f"processes of the Spark cluster survive SIGKILL: {pids}")
            time.sleep(0.1)
        return leftovers


def cluster_env(folder: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the master and the workers (and so of the executors they start):
    this process's, then `extra`, then the cluster's own folders."""
    conf = folder / "conf"  # an empty conf dir: no spark-env.sh or spark-defaults.conf of the user's
    conf.mkdir(exist_ok=True)
    env = {**os.environ, **(extra or {})}
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_CONF_DIR=str(conf),
        SPARK_LOG_DIR=str(folder / "logs"),
        SPARK_WORKER_DIR=str(folder / "work"),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(folder / "tmp"),  # shuffle files and blocks spilled to disk
        SPARK_NO_DAEMONIZE="1",
    )
    return env


@contextmanager
def standalone_cluster(
    workers: int = 2,
    cores: int = 1,
    memory: str = "3g",
    folder: Path | str | None = None,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> Iterator[Cluster]:
    """A master and `workers` workers of `cores` cores and `memory` each on 127.0.0.1, up (every
    worker ALIVE at the master) when this yields; every process stopped on exit, even on an
    error. folder: where the cluster's folder (logs, work dirs) goes; kept when given. env:
    environment variables for the JVMs, over this process's (PATH, JAVA_HOME...).
    Raises ClusterFailed when the cluster does not come up within `timeout` seconds."""
    if workers < 1 or cores < 1:
        raise ValueError(f"a cluster needs at least one worker and one core (got {workers}, {cores})")
    if not re.fullmatch(r"\d+[kmgt]?", memory, re.IGNORECASE):  # a worker only prints its usage
        raise ValueError(f"worker memory as Spark writes it, 512m or 3g (got {memory!r})")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise ClusterFailed("Spark needs Java 17 or newer: no java on the PATH and JAVA_HOME is not set")
    parent = None if folder is None else Path(folder)
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="kafkamc-cluster-", dir=parent)).resolve()  # unique: it tags our processes
    for sub in ("logs", "work", "tmp"):
        (home / sub).mkdir()
    cluster = Cluster(home, workers, cores, memory, cluster_env(home, env))
    try:
        cluster.start_master()
        for i in range(workers):
            cluster.start_worker(i)
        cluster.wait_for_workers(timeout=timeout)
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            if folder is None:
                shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Start a cluster, print its master URL, and keep it up until Ctrl-C or SIGTERM."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kafkamc.checker.spark.cluster", description=main.__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="3g", help="memory per worker")
    parser.add_argument("--folder", default=None, help="keep the logs and work dirs under this folder")
    args = parser.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell's `&` starts us with it ignored
        signal.signal(sig, signal.default_int_handler)
    began = time.monotonic()
    try:
        with standalone_cluster(args.workers, args.cores, args.memory, args.folder) as cluster:
            print(f"{cluster.master_url} (web UI {cluster.web_url}, up in {time.monotonic() - began:.1f}s)", flush=True)
            print(
                f"run: PYSPARK_PYTHON={sys.executable} kafkamc check --engine spark --spark-master {cluster.master_url}"
                " --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1",
                flush=True,
            )
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    except ClusterFailed as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
