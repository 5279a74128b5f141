"""Breadth-first search on Spark: one Spark job per BFS level, the visited set never shuffled.

The driver keeps one RDD per level, `parts`, holding exactly one `Part` per partition: the
sorted fingerprints that partition owns (fp % P) and the states of the newest depth it owns.
One level is one job:

    successors = parts.mapPartitions(expand).partitionBy(P, fp)   # the only shuffle
    parts'     = parts.union(successors).mapPartitions(merge)    # co-partitioned: no shuffle

`expand` decodes each frontier state, generates its successors in the model's order, checks
the invariants and emits (child fp, (key, child bytes, violated state invariant)). `merge`
runs on the partition that owns those fingerprints, beside that partition's visited set, and
keeps the fingerprints not seen before. Both sides of the union have the same partitioner,
so Spark builds a PartitionerAwareUnionRDD: partition i of the union is partition i of each.

Which arrival of a state counts: each state travels with a key, its initial-state index and
the successor indices that lead to it (2 bytes each). Keys order states exactly as the local
BFS queue does (parents in queue order, then successor index), so keeping the smallest key
per fingerprint reproduces the local explorer's visited tree, queue order and first
violation: both engines report the same counts, depth, coverage and the very same traces,
and a trace is rebuilt by replaying its key through the model, with no lookup job. The price
is 2 bytes per level on each frontier state; the visited set stays at 8 bytes per state.

Where the local explorer stops inside a level (a violation, the last --reach target seen,
the state limit), this one finishes the level's job, then counts what the local explorer
had counted up to that key (small jobs, once per run).

States travel as the marshal bytes of `state.key()` and are rebuilt with `state_from_key`;
fingerprints are the model's (spec/memo.py), the same in every process. Executors build
the Model and the InvariantSuite from the Config once per Python worker (the suite
compiles Python with exec: it is never pickled).
The `kafkamc` package reaches the executors as a zip built at run time.
"""

from __future__ import annotations

import atexit
import bisect
import importlib.util
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import uuid
import zipfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path
from typing import NamedTuple

from kafkamc.checker.codec import decode, encode, state_from_key  # noqa: F401 (state_from_key: tests)
from kafkamc.checker.fast import FastModel as Model
from kafkamc.checker.keys import AFTER_EVERY_STEP as _AFTER_EVERY_STEP
from kafkamc.checker.keys import decode_key
from kafkamc.checker.keys import index_bytes as _index_bytes
from kafkamc.checker.search import Limits, Result, Violation, replay_path
from kafkamc.spec.config import Config
from kafkamc.spec.state import State

PACKAGES = ("spec", "checker", "invariants", "traces", "cli")  # the kafkamc.* sub-packages


class SparkUnavailable(Exception):
    """Spark could not start (no Java, a bad or unreachable master, ...). One-line message."""


class SparkJobFailed(RuntimeError):
    """A job of the search failed after Spark's retries. One-line message; .details has the rest."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


# ---------------------------------------------------------------- states as bytes


def _fingerprint_and_bytes(model: Model, state: State) -> tuple[int, bytes]:
    """The model's fingerprint (the same in every process) and the bytes that carry the state."""
    return model.fingerprint(state), encode(state)


# ---------------------------------------------------------------- the package, shipped as a zip


def _package_dirs() -> dict[str, Path]:
    """The source folder of each kafkamc.* sub-package, wherever this copy was imported from."""
    out = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(f"kafkamc.{name}")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"cannot locate the package kafkamc.{name}")
        out[name] = Path(list(spec.submodule_search_locations)[0])
    return out


def build_package_zip(dest: Path) -> Path:
    """dest/kafkamc.zip holding kafkamc/spec/..., kafkamc/checker/... with directory entries:
    `kafkamc` is a namespace package (no __init__.py), and zipimport finds one only through
    its directory entry. Fixed timestamps, so the same sources give the same bytes."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "kafkamc.zip"
    stamp = (1980, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("kafkamc/", stamp), b"")
        for name, folder in _package_dirs().items():
            for sub in sorted([folder, *(p for p in folder.rglob("*") if p.is_dir())]):
                if "__pycache__" in sub.parts:
                    continue
                rel = sub.relative_to(folder).as_posix()
                arc = f"kafkamc/{name}/" + ("" if rel == "." else rel + "/")
                zf.writestr(zipfile.ZipInfo(arc, stamp), b"")
                for f in sorted(sub.iterdir()):
                    if f.is_file() and f.suffix != ".pyc":
                        zf.writestr(zipfile.ZipInfo(arc + f.name, stamp), f.read_bytes())
    return path


def ship_package(sc, directory: Path | None = None) -> Path:
    """Make `kafkamc` importable on the executors, once per SparkContext.

    Local workers could import it from the driver's environment anyway; the zip is what makes
    a real cluster work, where executors have only their Python and its packages. The zip must
    outlive the context (executors fetch it when they first need it): it goes in `directory`,
    or in a temporary folder removed when the interpreter exits."""
    shipped = getattr(sc, "_kafkamc_zip", None)
    if shipped is not None:
        return shipped
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="kafkamc-zip-"))
        atexit.register(shutil.rmtree, directory, True)
    path = build_package_zip(directory)
    before = list(sys.path)
    sc.addPyFile(str(path))
    # PySpark also puts the zip on the driver's own sys.path. The driver has kafkamc already,
    # and Spark deletes its copy of the zip when the context stops: left there, it would serve
    # the driver's later imports of kafkamc modules, and then fail them.
    sys.path[:] = [p for p in sys.path if p in before]
    importlib.invalidate_caches()
    sc._kafkamc_zip = path
    return path


# ---------------------------------------------------------------- starting Spark

_LOG4J2 = """\
# Every JVM log line goes to a file: nothing from Spark's JVM reaches the terminal.
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n
"""

# What spark-submit accepts: "Master must either be yarn or start with spark, k8s, or local".
_MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?$|local-cluster\[\d+,\d+,\d+\]$|yarn$|(spark|k8s)://.")


def _check_master_url(master: str) -> None:
    """Reject at once what spark-submit would reject after the seconds a JVM takes to start."""
    if not _MASTER.match(master):
        raise SparkUnavailable(
            f"not a Spark master URL: {master!r} "
            "(use local, local[N], local[N,maxFailures], spark://HOST:PORT, yarn or k8s://...)"
        )


def _check_master_reachable(master: str, timeout: float = 3.0) -> None:
    """A standalone master that does not answer makes Spark retry for a minute: try a TCP
    connection first, to each master of an HA list."""
    if not master.startswith("spark://"):
        return
    errors = []
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as e:
            errors.append(f"{hostport}: {e}")
    raise SparkUnavailable(f"cannot reach the Spark master {master} ({'; '.join(errors)})")


def _require_java() -> None:
    """spark-submit runs $JAVA_HOME/bin/java when JAVA_HOME is set, else java on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return
    if not home and shutil.which("java"):
        return
    where = f"JAVA_HOME={home} has no bin/java" if home else "no java on the PATH and JAVA_HOME is not set"
    raise SparkUnavailable(f"Spark needs Java 17 or newer: {where}")


def _under_spark_submit() -> bool:
    """Started by spark-submit: the driver JVM is already there, with its --master and --conf."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _settings(master: str | None, conf: Mapping, workdir: Path) -> dict:
    """Our defaults, then the caller's conf; Java options are joined, not replaced."""
    log4j = workdir / "log4j2.properties"
    log4j.write_text(_LOG4J2.format(log=workdir / "spark.log"))
    settings = {
        "spark.app.name": "kafkamc",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",  # only read when the driver JVM starts
        "spark.executorEnv.PYTHONHASHSEED": "0",
    }
    if master is not None:
        settings["spark.master"] = master
    settings.update({k: str(v) for k, v in conf.items()})
    settings["spark.driver.extraJavaOptions"] = (
        f"-Dlog4j2.configurationFile=file:{log4j} " + str(conf.get("spark.driver.extraJavaOptions", ""))
    ).strip()
    return settings


def _start(master: str | None, conf: Mapping, workdir: Path):
    """A bare SparkContext (it starts seconds faster than a SparkSession); SparkUnavailable
    with one line when it cannot start."""
    if master is None and not _under_spark_submit():
        master = "local[*]"
    if master is not None:
        _check_master_url(master)
        _check_master_reachable(master)
    if not _under_spark_submit():
        _require_java()
    # Before the JVM starts, so that it and the Python workers it forks inherit them.
    os.environ.setdefault("PYTHONHASHSEED", "0")
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # PySpark starts workers with $PYSPARK_PYTHON, else python3 from the PATH; locally they
        # must run this interpreter, which has z3 and our other dependencies.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False).setAll(list(_settings(master, conf, workdir).items()))
    console = workdir / "jvm-console.log"
    try:
        gateway = None
        if SparkContext._gateway is None and not _under_spark_submit():
            # The JVM's own output (spark-submit's errors, a JVM that cannot start) goes to a
            # file too: log4j2 only covers what Spark logs once it runs.
            with open(console, "ab") as out:
                gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": out, "stderr": out})
        return SparkContext(conf=spark_conf, gateway=gateway)
    except Exception as e:  # noqa: BLE001 - whatever stops Spark from starting becomes one line
        raise SparkUnavailable(f"Spark could not start with master {master!r}: {_one_line(e, console)}") from None


def _one_line(e: BaseException, console: Path | None = None) -> str:
    """What went wrong, in one line, without a Java stack trace."""
    java = getattr(e, "java_exception", None)
    line = _java_messages(java) if java is not None else ""
    if not line:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        line = lines[0] if lines else type(e).__name__
    if console is not None and console.exists() and "JAVA_GATEWAY_EXITED" in line:
        said = _jvm_complaint(console.read_text(errors="replace"))
        if said:
            line = f"the JVM exited: {said}"
    return line


def _java_messages(java) -> str:
    """A Java exception's message, with its root cause's when that says something else."""
    messages: list = []
    try:
        while java is not None and len(messages) < 20:
            messages.append(str(java.getMessage() or java.getClass().getName()).strip().splitlines()[0])
            java = java.getCause()
    except Exception:  # noqa: BLE001 - the gateway itself may be gone
        pass
    if not messages:
        return ""
    return messages[0] if messages[-1] in messages[0] else f"{messages[0]} ({messages[-1]})"


def _jvm_complaint(text: str) -> str:
    """The first line that says why a JVM (spark-submit) exited, without the exception class."""
    for ln in text.splitlines():
        ln = ln.strip()
        if not ln or ln.startswith(("at ", "WARNING:", "...")):
            continue
        ln = re.sub(r'^Exception in thread "[^"]*" ', "", ln)
        return re.sub(r"^[\w.$]+(Exception|Error): ", "", ln)
    return ""


@contextmanager
def spark_context(master: str | None = "local[*]", conf: Mapping | None = None) -> Iterator:
    """A SparkContext set up for kafkamc, stopped and cleaned up on exit. Raises SparkUnavailable.

    master=None: spark-submit's --master when run under spark-submit, else local[*]. Only the
    first context of a Python process starts the driver JVM, so JVM settings (driver memory,
    Java options) given to later contexts of the same process do not apply.
    """
    workdir = Path(tempfile.mkdtemp(prefix="kafkamc-spark-"))
    try:
        sc = _start(master, conf or {}, workdir)
        try:
            ship_package(sc, workdir)
            yield sc
        finally:
            sc.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------- what runs on the executors


class Part(NamedTuple):
    """What one partition owns after a level: its share of the visited set as sorted 64-bit
    fingerprints, its states of the newest depth (sorted by key) and the level's counters."""

    visited: array  # array('Q'), sorted
    frontier: list  # [(key, state bytes), ...], sorted by key
    stats: dict


@dataclass(frozen=True)
class FaultInjection:
    """For tests: the first `attempts` attempts of the task of `partition` at `level` in `stage`
    ("expand": after emitting all its output; "merge": before yielding its Part) raise; the
    file `flag` counts them, so that a retry in another Python worker knows."""

    level: int
    partition: int
    flag: str
    stage: str = "expand"
    attempts: int = 1

    def maybe_fail(self, level: int, partition: int, stage: str) -> None:
        if (self.level, self.partition, self.stage) != (level, partition, stage):
            return
        flag = Path(self.flag)
        failed = int(flag.read_text()) if flag.exists() else 0
        if failed < self.attempts:
            flag.write_text(str(failed + 1))
            raise RuntimeError(f"injected fault: level {level}, partition {partition}, {stage}")


@dataclass(frozen=True)
class _Task:
    """What the executors need for one level: small, pickled with each task."""

    cfg: Config
    invariants: tuple | None
    level: int = 0
    unreached: tuple = ()  # reachability properties not seen before this level
    faults: tuple = ()  # FaultInjection, for tests


def _maybe_fail(task: _Task, partition: int, stage: str) -> None:
    for fault in task.faults:
        fault.maybe_fail(task.level, partition, stage)


_TOOLS: dict = {}


def _tools(task: _Task):
    """Model and InvariantSuite of the task's configuration, built once per Python worker
    (Spark reuses workers across tasks and levels)."""
    key = (task.cfg, task.invariants)
    if key not in _TOOLS:
        from kafkamc.invariants.suite import InvariantSuite  # z3: only where states are checked

        _TOOLS.clear()
        names = list(task.invariants) if task.invariants is not None else None
        _TOOLS[key] = (Model(task.cfg), InvariantSuite(task.cfg, names))
    return _TOOLS[key]


def _owner(fp: int) -> int:
    """The partitioner: fingerprint fp belongs to partition fp % P (PySpark applies the % P).
    One function object for the whole run: Spark tells partitioners apart by its identity."""
    return fp


def _expand(task: _Task, split: int, parts: Iterator[Part]) -> Iterator[tuple]:
    """Successors of this partition's frontier as (child fp, (key, bytes, violated state
    invariant)), then one (split, (None, counters)) record, which the shuffle routes back to
    partition `split`: counters that travel with the data are exact even when tasks re-run,
    unlike accumulators updated in transformations."""
    model, suite = _tools(task)
    check_state, check_step = suite.check_state, suite.check_step
    reach = [(name, fn) for name, fn in suite.reach_functions() if name in task.unreached]
    generated, coverage = 0, Counter[str]()
    action_bad = None  # (key, invariant) of the first step that breaks an action property
    witnesses: dict = {}  # reachability property -> key of the first step showing it
    for part in parts:
        for path, data in part.frontier:
            state = decode(data)
            for index, (action, nxt, fp) in enumerate(model.expand(state)):
                key = path + _index_bytes(index)
                generated += 1
                coverage[type(action).__name__] += 1
                bad = check_step(state, nxt)
                if bad and (action_bad is None or key < action_bad[0]):
                    action_bad = (key, bad)
                for name, fn in reach:
                    if fn(state, nxt) and (name not in witnesses or key < witnesses[name]):
                        witnesses[name] = key
                yield fp, (key, encode(nxt), check_state(nxt))
    _maybe_fail(task, split, "expand")
    yield split, (None, {"generated": generated, "coverage": coverage, "action_bad": action_bad, "reach": witnesses})


def _merge(task: _Task, split: int, items: Iterator) -> Iterator[Part]:
    """Partition `split` of parts.union(successors): the previous Part, then the successor
    records and expand counters this partition owns; yields the next level's Part."""
    old = None
    best: dict = {}  # fp -> (key, bytes, bad) of its first arrival (smallest key)
    counters = []
    for item in items:
        if isinstance(item, Part):
            old = item
            continue
        fp, value = item
        if value[0] is None:
            counters.append(value[1])
        elif fp not in best or value[0] < best[fp][0]:
            best[fp] = value
    if old is None:
        raise RuntimeError(f"partition {split} has no visited set: the union is not co-partitioned")
    fresh = sorted((v[0], fp, v[1], v[2]) for fp, v in best.items() if not _contains(old.visited, fp))
    stats = _add_counters(counters)
    stats.update(
        new=len(fresh),
        min_key=fresh[0][0] if fresh else None,
        state_bad=next(((key, bad) for key, _, _, bad in fresh if bad), None),
    )
    _maybe_fail(task, split, "merge")
    yield Part(
        _merged(old.visited, sorted(fp for _, fp, _, _ in fresh)), [(key, data) for key, _, data, _ in fresh], stats
    )


def _contains(sorted_fps: array, fp: int) -> bool:
    i = bisect.bisect_left(sorted_fps, fp)
    return i < len(sorted_fps) and sorted_fps[i] == fp


def _merged(sorted_fps: array, new_sorted: list) -> array:
    if not new_sorted:
        return sorted_fps
    # Two sorted runs one after the other: timsort merges them in linear time.
    return array("Q", sorted(chain(sorted_fps, new_sorted)))


def _add_counters(counters) -> dict:
    out: dict = {"generated": 0, "coverage": Counter(), "action_bad": None, "reach": {}}
    for c in counters:
        out["generated"] += c["generated"]
        out["coverage"].update(c["coverage"])
        out["action_bad"] = _first(out["action_bad"], c["action_bad"])
        for name, key in c["reach"].items():
            if name not in out["reach"] or key < out["reach"][name]:
                out["reach"][name] = key
    return out


def _first(a: tuple | None, b: tuple | None) -> tuple | None:
    """Of two (key, ...) pairs, the one with the smaller key; None is absent."""
    if a is None or (b is not None and b[0] < a[0]):
        return b
    return a


def _initial_part(items: Iterator) -> Iterator[Part]:
    """Level 0: the initial states this partition owns, from (fp, (key, fp, bytes)) records."""
    entries = sorted(v for _, v in items)
    yield Part(array("Q", sorted(fp for _, fp, _ in entries)), [(key, data) for key, _, data in entries], {})


def _stats_of(part: Part) -> dict:
    return part.stats


def _frontier_keys(part: Part) -> list:
    return [key for key, _ in part.frontier]


def _count_new_until(cut: bytes, inclusive: bool, part: Part) -> int:
    """States of this level that the local explorer had added when it stopped at `cut`."""
    return sum(1 for key, _ in part.frontier if key < cut or (inclusive and key == cut))


def _count_steps_until(task: _Task, cut: bytes, parts: Iterator[Part]) -> Iterator[tuple]:
    """(steps, coverage) of this partition's parents up to and including the step `cut`. The
    keys of one level have one length, so bytes order is (parent, index) order."""
    model, _ = _tools(task)
    parent, last = cut[:-2], int.from_bytes(cut[-2:], "big")
    steps, coverage = 0, Counter[str]()
    for part in parts:
        for path, data in part.frontier:
            if path > parent:
                break
            for index, (action, _) in enumerate(model.successors(decode(data))):
                if path == parent and index > last:
                    break
                steps += 1
                coverage[type(action).__name__] += 1
    yield steps, coverage


def _has_successor(task: _Task, parts: Iterator[Part]) -> Iterator[bool]:
    model, _ = _tools(task)
    yield any(
        next(iter(model.successors(decode(data))), None) is not None for part in parts for _, data in part.frontier
    )


# ---------------------------------------------------------------- the driver


@dataclass
class _Stop:
    """Where, inside a level, the local explorer stops."""

    key: bytes
    order: int  # at one key the local explorer meets an action violation first,
    kind: str  # then a --reach stop, then a state violation
    invariant: str | None = None

    @property
    def counts_child(self) -> bool:
        """The step's state was added before the stop."""
        return self.kind == "state"

    @property
    def counts_reach(self) -> bool:
        """The step's reachability checks ran before the stop."""
        return self.kind != "action"


class _SparkBFS:
    """One search: the driver's loop over levels and its counters."""

    def __init__(
        self,
        sc,
        cfg: Config,
        invariants,
        limits: Limits,
        partitions: int,
        checkpoint_dir: str | None,
        checkpoint_every: int,
        progress,
        stop_when_reached,
        faults: tuple,
    ):
        from kafkamc.invariants.suite import InvariantSuite

        if partitions < 1:
            raise ValueError(f"partitions must be at least 1 (got {partitions})")
        self.sc, self.cfg, self.limits, self.P = sc, cfg.validated(), limits, partitions
        self.model = Model(self.cfg)
        self.suite = InvariantSuite(self.cfg, invariants)  # bad names fail here, not on an executor
        self.base = _Task(self.cfg, tuple(invariants) if invariants is not None else None, faults=faults)
        self.progress = progress
        self.checkpoint_every = checkpoint_every
        self.targets = set(stop_when_reached)
        self.unreached = [name for name, _ in self.suite.reach_functions()]
        self.witnesses: dict = {}  # reachability property -> key of its first step
        self.distinct = self.generated = self.depth = self.queue = 0
        self.min_key: bytes | None = None  # the first state of the frontier, in BFS order
        self.coverage: Counter = Counter()
        self.stop_reason: str | None = None
        self.violation: tuple | None = None  # (invariant, kind, key)
        self.reached_all = False
        self.cached: list = []  # the parts RDDs still cached, oldest first
        self.start = time.monotonic()
        self._check_round_trip()
        self.checkpoint_dir, self.checkpoint_is_temp = self._checkpoint_dir(checkpoint_dir)

    def _check_round_trip(self) -> None:
        for s in self.model.initial_states():
            if state_from_key(s.key()) != s:
                raise RuntimeError("state_from_key no longer inverts State.key(): update checker/spark.py")

    def _checkpoint_dir(self, given: str | None) -> tuple[str | None, bool]:
        """(this run's checkpoint folder, whether it is a local temporary folder). On a cluster,
        checkpoints need storage that every executor sees (HDFS, S3...): none is guessed."""
        if self.checkpoint_every <= 0:
            return None, False
        if given is not None:
            run_dir = given.rstrip("/") + f"/kafkamc-{uuid.uuid4().hex[:12]}"
        elif self.sc.master.startswith("local"):
            run_dir = tempfile.mkdtemp(prefix="kafkamc-checkpoints-")
        else:
            return None, False
        self.sc.setCheckpointDir(run_dir)
        return run_dir, given is None

    # ---- the search

    def run(self) -> Result:
        try:
            parts = self._initial_level()
            if parts is not None:
                self._levels(parts)
        except KeyboardInterrupt:
            self.stop_reason = "interrupted"
        finally:
            self._cleanup()
        self._report(final=True)
        return self._result()

    def _initial_level(self):
        """The initial states, on the driver, taken exactly as the local explorer takes them."""
        seen, entries = set(), []
        for i, s in enumerate(self.model.initial_states()):
            self.generated += 1
            fp, data = _fingerprint_and_bytes(self.model, s)
            if fp in seen:
                continue
            seen.add(fp)
            self.distinct += 1
            bad = self.suite.check_state(s)
            if bad:
                self.violation = (bad, "state", _index_bytes(i))
                return None
            entries.append((fp, (_index_bytes(i), fp, data)))
        self.queue = len(entries)
        self.min_key = min((key for _, (key, _, _) in entries), default=None)
        parts = (
            self.sc.parallelize(entries, self.P)
            .partitionBy(self.P, _owner)
            .mapPartitions(_initial_part, preservesPartitioning=True)
        )
        return self._keep(parts, level=0)

    def _levels(self, parts) -> None:
        level = 0
        while self.queue:
            if self.limits.max_depth is not None and level >= self.limits.max_depth:
                if any(self._collect(parts.mapPartitions(partial(_has_successor, self.base)))):
                    self.stop_reason = f"max depth {self.limits.max_depth}"
                return
            if self.limits.time_limit is not None and time.monotonic() - self.start >= self.limits.time_limit:
                self.stop_reason = f"time limit {self.limits.time_limit:g}s"
                return
            level += 1
            began = time.monotonic()
            task = _Task(self.base.cfg, self.base.invariants, level, tuple(self.unreached), self.base.faults)
            nxt, totals = self._run_level(parts, task)
            stop = self._stop_in_level(nxt, totals)
            if stop is None:
                new = self._take_level(level, totals)
            else:
                new = self._take_until(level, parts, nxt, totals, stop)
            self._report(level=level, new=new, seconds=time.monotonic() - began)
            if stop is not None:
                return
            parts = nxt

    def _run_level(self, parts, task: _Task):
        """The level's one job; returns the new parts and the level's counters, all partitions added."""
        successors = parts.mapPartitionsWithIndex(partial(_expand, task)).partitionBy(self.P, _owner)
        nxt = parts.union(_read_like(parts, successors)).mapPartitionsWithIndex(
            partial(_merge, task), preservesPartitioning=True
        )
        nxt = self._keep(nxt, task.level)
        stats = self._collect(nxt.map(_stats_of))
        totals = _add_counters(stats)
        totals["new"] = sum(s["new"] for s in stats)
        totals["min_key"] = min((s["min_key"] for s in stats if s["min_key"] is not None), default=None)
        totals["state_bad"] = None
        for s in stats:
            totals["state_bad"] = _first(totals["state_bad"], s["state_bad"])
        return nxt, totals

    def _keep(self, rdd, level: int):
        """Cache a level's parts, and checkpoint every few levels to cut the lineage: a lost
        partition is then recomputed from the last checkpoint, not from level 0. Two older
        levels stay cached: the parents, for the counts at a stop, and a short way back."""
        from pyspark import StorageLevel

        rdd.persist(StorageLevel.MEMORY_AND_DISK)
        if self.checkpoint_dir and level > 0 and level % self.checkpoint_every == 0:
            rdd.checkpoint()
        self.cached.append(rdd)
        while len(self.cached) > 3:
            self.cached.pop(0).unpersist()
        return rdd

    def _collect(self, rdd) -> list:
        return self._job(rdd.collect)

    def _job(self, action: Callable, *args):
        from py4j.protocol import Py4JJavaError

        try:
            return action(*args)
        except Py4JJavaError as e:
            raise SparkJobFailed(f"a Spark job of the search failed: {_python_error(e)}", str(e)) from None

    # ---- where a level stops

    def _stop_in_level(self, nxt, totals: dict) -> _Stop | None:
        """The first event of this level, in local BFS order, that ends the search."""
        found = []
        if totals["action_bad"]:
            key, name = totals["action_bad"]
            found.append(_Stop(key, 0, "action", name))
        remaining = self.targets - set(self.witnesses)
        if remaining and remaining <= set(totals["reach"]):
            found.append(_Stop(max(totals["reach"][n] for n in remaining), 1, "reached"))
        if totals["state_bad"]:
            key, name = totals["state_bad"]
            found.append(_Stop(key, 2, "state", name))
        if self.limits.max_states is not None and self.distinct + totals["new"] >= self.limits.max_states:
            found.append(_Stop(self._max_states_key(nxt), 3, "max_states"))
        return min(found, key=lambda s: (s.key, s.order), default=None)

    def _max_states_key(self, nxt) -> bytes:
        """The local explorer checks the state limit after each parent: it stops after the parent
        of the state that reaches the limit (after the first parent, if already there)."""
        need = self.limits.max_states - self.distinct
        if need <= 0:
            parent = self.min_key
        else:
            parent = self._job(nxt.flatMap(_frontier_keys).takeOrdered, need)[-1][:-2]
        return parent + _AFTER_EVERY_STEP

    def _take_level(self, level: int, totals: dict) -> int:
        """Count the whole level; returns its number of new states."""
        self.generated += totals["generated"]
        self.coverage.update(totals["coverage"])
        self.distinct += totals["new"]
        self.queue = totals["new"]
        self.min_key = totals["min_key"]
        if totals["new"]:
            self.depth = level
        self._take_witnesses(totals["reach"], lambda key: True)
        return totals["new"]

    def _take_until(self, level: int, parents, nxt, totals: dict, stop: _Stop) -> int:
        """Count what the local explorer had counted when it stopped at `stop`; returns the
        number of new states counted."""
        new = sum(self._collect(nxt.map(partial(_count_new_until, stop.key, stop.counts_child))))
        for steps, coverage in self._collect(parents.mapPartitions(partial(_count_steps_until, self.base, stop.key))):
            self.generated += steps
            self.coverage.update(coverage)
        self.distinct += new
        self.queue = 0
        if new:
            self.depth = level
        self._take_witnesses(totals["reach"], lambda key: key < stop.key or (stop.counts_reach and key == stop.key))
        if stop.kind in ("action", "state"):
            self.violation = (stop.invariant, stop.kind, stop.key)
        elif stop.kind == "reached":
            self.reached_all = True
        else:
            self.stop_reason = f"max states {self.limits.max_states}"
        return new

    def _take_witnesses(self, found: dict, before_stop: Callable[[bytes], bool]) -> None:
        for name in list(self.unreached):
            key = found.get(name)
            if key is not None and before_stop(key):
                self.witnesses[name] = key
                self.unreached.remove(name)

    # ---- results

    def _report(self, final: bool = False, level: int | None = None, new: int = 0, seconds: float = 0.0) -> None:
        if self.progress is None:
            return
        elapsed = time.monotonic() - self.start
        self.progress(
            {
                "distinct": self.distinct,
                "generated": self.generated,
                "queue": self.queue,
                "depth": self.depth,
                "elapsed": elapsed,
                "rate": self.distinct / elapsed if elapsed > 0 else 0.0,
                "final": final,
                "level": level,
                "new": new,
                "level_seconds": seconds,
                "level_rate": new / seconds if seconds > 0 else 0.0,
            }
        )

    def _trace(self, key: bytes) -> list:
        init, steps = decode_key(key)
        return replay_path(self.model, init, steps)

    def _result(self) -> Result:
        violation = None
        if self.violation is not None:
            name, kind, key = self.violation
            violation = Violation(name, kind, self._trace(key))
            verdict = "violated"
        elif self.targets and self.reached_all:
            verdict = "reached"
        elif self.stop_reason is not None:
            verdict = "incomplete"
        else:
            verdict = "holds"
        reached = {name: self._trace(key) for name, key in self.witnesses.items()}
        return Result(
            verdict,
            "bfs",
            self.distinct,
            self.generated,
            self.depth,
            time.monotonic() - self.start,
            self.stop_reason,
            violation,
            self.coverage,
            reached,
        )

    def _cleanup(self) -> None:
        for rdd in self.cached:
            try:
                rdd.unpersist()
            except Exception:  # noqa: BLE001 - a stopped context has nothing left to free
                pass
        self.cached = []
        if self.checkpoint_is_temp and self.checkpoint_dir:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        elif self.checkpoint_dir:
            _remove_dir(self.sc, self.checkpoint_dir)


def _read_like(parts, successors):
    """Let the union read the shuffle output with the parts' deserializer.

    Both hold batches of pickled lists (AutoBatchedSerializer differs from BatchedSerializer
    only in how it writes), but PySpark compares the serializer objects and, when they differ,
    adds a Python pass that unpickles and re-pickles every successor before the union: about
    a tenth of the run time. With other serializers than these, PySpark's own path is kept."""
    from pyspark.serializers import AutoBatchedSerializer, BatchedSerializer, CPickleSerializer

    theirs, ours = successors._jrdd_deserializer, parts._jrdd_deserializer
    if (
        type(theirs) is BatchedSerializer
        and type(ours) is AutoBatchedSerializer
        and type(theirs.serializer) is CPickleSerializer
        and type(ours.serializer) is CPickleSerializer
    ):
        successors._jrdd_deserializer = ours
    return successors


def _remove_dir(sc, path: str) -> None:
    """Delete a folder through Hadoop's FileSystem, so that HDFS or S3 checkpoints go too."""
    try:
        jpath = sc._jvm.org.apache.hadoop.fs.Path(path)
        jpath.getFileSystem(sc._jsc.hadoopConfiguration()).delete(jpath, True)
    except Exception:  # noqa: BLE001 - best effort: a leftover folder must not hide the result
        pass


def _python_error(e: BaseException) -> str:
    """The Python exception line inside a failed job's Java error, else its first line."""
    found = re.findall(r"^(\w+(?:\.\w+)*(?:Error|Exception|Interrupt)\b.*)$", str(e), re.M)
    python = [ln.strip() for ln in found if not ln.startswith(("org.", "java.", "py4j.", "scala."))]
    return python[-1] if python else _one_line(e)


# ---------------------------------------------------------------- the entry point


def explore_spark(
    cfg: Config,
    invariants: list[str] | None = None,
    limits: Limits = Limits(),
    partitions: int = 4,
    master: str | None = "local[*]",
    conf: Mapping | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_every: int = 4,
    progress: Callable[[dict], None] | None = None,
    *,
    sc=None,
    stop_when_reached: frozenset = frozenset(),
    inject_faults: tuple = (),
) -> Result:
    """Level-synchronous BFS on Spark, returning the local explorer's Result.

    Distinct and generated counts, depth, verdict, stop reason, coverage, counterexample and
    reachability witnesses equal those of kafkamc.checker.explorer.explore with BFS: same order,
    same stopping point, same traces.

    sc: a running SparkContext to use (then master and conf are ignored and it is left running);
    otherwise one is started for this run (master=None: spark-submit's, else local[*]) and
    stopped at the end. partitions: P, fixed for the run. checkpoint_dir: where reliable
    checkpoints go every `checkpoint_every` levels (0: never); on a cluster, storage every
    executor sees; locally a temporary folder by default. progress: called after each level with
    the local explorer's keys (distinct, generated, queue, depth, elapsed, rate, final) plus
    level, new, level_seconds and level_rate. stop_when_reached: as in explore (--reach).
    inject_faults: FaultInjection records, for tests.

    Raises SparkUnavailable when Spark cannot start and SparkJobFailed when a job fails after
    Spark's retries; the search's own errors (an unknown invariant, say) raise as in explore.
    """
    if sc is None:
        with spark_context(master, conf) as own:
            return explore_spark(
                cfg,
                invariants,
                limits,
                partitions,
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=checkpoint_every,
                progress=progress,
                sc=own,
                stop_when_reached=stop_when_reached,
                inject_faults=inject_faults,
            )
    ship_package(sc)
    return _SparkBFS(
        sc,
        cfg,
        invariants,
        limits,
        partitions,
        checkpoint_dir,
        checkpoint_every,
        progress,
        stop_when_reached,
        tuple(inject_faults),
    ).run()
