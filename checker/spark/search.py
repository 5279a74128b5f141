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
fingerprints are the model's (checker/cache/fast.py), the same in every process. Executors build
the Model and the InvariantSuite from the Config once per Python worker (the suite
compiles Python with exec: it is never pickled).
The `kafkamc` package reaches the executors as a zip built at run time.
Starting Spark and shipping the package live in checker/spark/context.py; what runs on the
executors lives in checker/spark/tasks.py.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from kafkamc.checker.cache.fast import FastModel as Model
from kafkamc.checker.engines.level import Findings, Tally, initial_level, smaller, time_is_up
from kafkamc.checker.engines.search import Limits, Result

# Re-exported as well as used: callers and tests import SparkUnavailable, SparkJobFailed,
# spark_context, build_package_zip, ship_package, PACKAGES, FaultInjection, Part and _Task
# from kafkamc.checker.spark.search.
from kafkamc.checker.spark.context import (  # noqa: F401
    PACKAGES,
    SparkJobFailed,
    SparkUnavailable,
    _python_error,
    _remove_dir,
    build_package_zip,
    ship_package,
    spark_context,
)
from kafkamc.checker.spark.tasks import (  # noqa: F401
    FaultInjection,
    Part,
    _count_new_until,
    _count_steps_until,
    _expand,
    _frontier_keys,
    _has_successor,
    _merge,
    _owner,
    _stats_of,
    _Task,
    _values,
    initial_parts,
)
from kafkamc.checker.store.codec import state_from_key  # noqa: F401 (state_from_key: tests)
from kafkamc.checker.store.keys import AFTER_EVERY_STEP as _AFTER_EVERY_STEP
from kafkamc.spec.config import Config

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


class _SparkBFS(Tally):
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
        properties=None,
        spill_dir: str | None = None,
    ):
        from kafkamc.invariants.suite import InvariantSuite

        if partitions < 1:
            raise ValueError(f"partitions must be at least 1 (got {partitions})")
        model = Model(cfg)  # the configuration with its bounds fixed, checked at the command's edge
        self.sc, self.cfg, self.limits, self.P = sc, model.config, limits, partitions
        super().__init__(model, time.monotonic())
        self.suite = InvariantSuite(self.cfg, invariants, properties)  # bad names fail here, not on an executor
        self.progress = progress
        self.checkpoint_every = checkpoint_every
        self.targets = set(stop_when_reached)
        self.unreached = [name for name, _ in self.suite.reach_functions()]
        # Each run spills into a folder of its own, removed at the end (checker/store/spill.py).
        self.spill = None if spill_dir is None else os.path.join(spill_dir, f"kafkamc-{uuid.uuid4().hex[:12]}")
        checks = self.suite.shipped([tuple(self.unreached)])
        self.base = _Task(self.cfg, checks, partitions, faults=faults, spill=self.spill)
        self.worker_peak_mib = 0.0  # the largest Python worker's peak resident memory
        self.shuffled = (0, 0)  # successor rows, and their bytes, that crossed the shuffle
        self.queue = 0
        self.min_key: bytes | None = None  # the first state of the frontier, in BFS order
        self.reached_all = False
        self.cached: list = []  # the parts RDDs still cached, oldest first
        self._check_round_trip()
        self.checkpoint_dir = self._checkpoint_dir(checkpoint_dir)

    def _check_round_trip(self) -> None:
        for s in self.model.initial_states():
            if state_from_key(s.key()) != s:
                raise RuntimeError("state_from_key no longer inverts State.key(): update checker/spark/search.py")

    def _checkpoint_dir(self, given: str | None) -> str | None:
        """This run's checkpoint folder, inside the one given. On a cluster,
        checkpoints need storage that every executor sees (HDFS, S3...): none is guessed.
        In local mode without one, every level is checkpointed locally instead (_keep)."""
        if self.checkpoint_every <= 0 or given is None:
            return None
        run_dir = given.rstrip("/") + f"/kafkamc-{uuid.uuid4().hex[:12]}"
        self.sc.setCheckpointDir(run_dir)
        return run_dir

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
        initial, self.generated, self.violation = initial_level(self.model, self.suite)
        self.distinct = len(initial) + (self.violation is not None)
        if self.violation is not None:
            return None
        self.queue = len(initial)
        self.min_key = min((key for _, key, _ in initial), default=None)
        parts = (
            self.sc.parallelize(initial_parts(self.model, initial, self.P, self.spill), self.P)
            .partitionBy(self.P, _owner)
            .map(_values, preservesPartitioning=True)
        )
        return self._keep(parts, level=0)

    def _levels(self, parts) -> None:
        level = 0
        while self.queue:
            if self.limits.max_depth is not None and level >= self.limits.max_depth:
                if any(self._collect(parts.mapPartitions(partial(_has_successor, self.base)))):
                    self.stop_reason = f"max depth {self.limits.max_depth}"
                return
            # The state limit is met inside a level, where the local explorer meets it.
            self.stop_reason = time_is_up(self.limits, self.start)
            if self.stop_reason is not None:
                return
            level += 1
            began = time.monotonic()
            task = self._task(level)
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

    def _task(self, level: int) -> _Task:
        unreached = tuple(self.unreached)
        checks = self.suite.shipped([unreached])
        return dataclasses.replace(self.base, level=level, unreached=unreached, checks=checks)

    def _run_level(self, parts, task: _Task):
        """The level's one job; returns the new parts and the level's counters, all partitions added."""
        successors = parts.mapPartitionsWithIndex(partial(_expand, task)).partitionBy(self.P, _owner)
        nxt = parts.union(_read_like(parts, successors)).mapPartitionsWithIndex(
            partial(_merge, task), preservesPartitioning=True
        )
        nxt = self._keep(nxt, task.level)
        stats = self._collect(nxt.map(_stats_of))
        totals = {
            "found": Findings.total(s["found"] for s in stats),
            "new": sum(s["new"] for s in stats),
            "min_key": min((s["min_key"] for s in stats if s["min_key"] is not None), default=None),
            "state_bad": None,
        }
        self.visited_bytes = sum(s["visited_bytes"] for s in stats)
        self.worker_peak_mib = max([self.worker_peak_mib, *(s["worker_peak_mib"] for s in stats)])
        for s in stats:
            self.shuffled = (self.shuffled[0] + s["shuffled"][0], self.shuffled[1] + s["shuffled"][1])
        for s in stats:
            totals["state_bad"] = smaller(totals["state_bad"], s["state_bad"])
        return nxt, totals

    def _keep(self, rdd, level: int):
        """Cache a level's parts, and checkpoint every few levels to cut the lineage: a lost
        partition is then recomputed from the last checkpoint, not from level 0, and each
        job's plan stays short (Spark walks the whole lineage when it plans a job: without
        checkpoints a level's fixed cost grew from 0.35 s to 2.8 s over the default search).
        In local mode, with no checkpoint folder given, every level is checkpointed locally,
        in the cache itself: the only executor is the driver, so nothing it holds can be
        lost without the run. Two older levels stay cached: the parents, for the counts at
        a stop, and a short way back."""
        from pyspark import StorageLevel

        rdd.persist(StorageLevel.MEMORY_AND_DISK)
        if level > 0 and self.checkpoint_every > 0:
            if self.checkpoint_dir and level % self.checkpoint_every == 0:
                rdd.checkpoint()
            elif self.checkpoint_dir is None and self.sc.master.startswith("local"):
                rdd.localCheckpoint()
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
        reach = totals["found"].reach
        if totals["found"].action_bad:
            key, name = totals["found"].action_bad
            found.append(_Stop(key, 0, "action", name))
        remaining = self.targets - set(self.witnesses)
        if remaining and remaining <= set(reach):
            found.append(_Stop(max(reach[n] for n in remaining), 1, "reached"))
        if totals["state_bad"]:
            key, name = totals["state_bad"]
            found.append(_Stop(key, 2, "state", name))
        if self.limits.max_states is not None and self.distinct + totals["new"] >= self.limits.max_states:
            found.append(_Stop(self._max_states_key(nxt), 3, "max_states"))
        return min(found, key=lambda s: (s.key, s.order), default=None)

    def _max_states_key(self, nxt) -> bytes:
        """The local explorer checks the state limit after each parent: it stops after the parent
        of the state that reaches the limit (after the first parent, if already there)."""
        need = (self.limits.max_states or 0) - self.distinct
        if need <= 0:
            assert self.min_key is not None  # the limit is reached: a state was kept
            parent = self.min_key
        else:
            parent = self._job(nxt.flatMap(_frontier_keys).takeOrdered, need)[-1][:-2]
        return parent + _AFTER_EVERY_STEP

    def _take_level(self, level: int, totals: dict) -> int:
        """Count the whole level; returns its number of new states."""
        self.generated += totals["found"].generated
        self.coverage.update(totals["found"].coverage)
        self.distinct += totals["new"]
        self.queue = totals["new"]
        self.min_key = totals["min_key"]
        if totals["new"]:
            self.depth = level
        self._take_witnesses(totals["found"].reach, lambda key: True)
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
        self._take_witnesses(
            totals["found"].reach, lambda key: key < stop.key or (stop.counts_reach and key == stop.key)
        )
        if stop.kind in ("action", "state"):
            self.violation = (stop.key, stop.invariant, stop.kind)
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
        stats = self.stats(self.queue, final)
        stats.update(level=level, new=new, level_seconds=seconds, level_rate=new / seconds if seconds > 0 else 0.0)
        stats.update(worker_peak_mib=self.worker_peak_mib, visited_bytes=self.visited_bytes, shuffled=self.shuffled)
        self.progress(stats)

    def _result(self) -> Result:
        result = self.result(bool(self.targets) and self.reached_all)
        return dataclasses.replace(result, worker_peak_mib=round(self.worker_peak_mib, 1))

    def _cleanup(self) -> None:
        for rdd in self.cached:
            try:
                rdd.unpersist()
            except Exception:  # noqa: BLE001 - a stopped context has nothing left to free
                pass
        self.cached = []
        if self.spill is not None:
            shutil.rmtree(self.spill, ignore_errors=True)
        if self.checkpoint_dir:
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
    properties=None,
    spill_dir: str | None = None,
) -> Result:
    """Level-synchronous BFS on Spark, returning the local explorer's Result.

    Distinct and generated counts, depth, verdict, stop reason, coverage, counterexample and
    reachability witnesses equal those of kafkamc.checker.engines.explorer.explore with BFS: same order,
    same stopping point, same traces.

    sc: a running SparkContext to use (then master and conf are ignored and it is left running);
    otherwise one is started for this run (master=None: spark-submit's, else local[*]) and
    stopped at the end. partitions: P, fixed for the run. checkpoint_dir: where reliable
    checkpoints go every `checkpoint_every` levels (0: never); on a cluster, storage every
    executor sees; locally a temporary folder by default. progress: called after each level with
    the local explorer's keys (distinct, generated, queue, depth, elapsed, rate, final) plus
    level, new, level_seconds and level_rate. stop_when_reached: as in explore (--reach).
    inject_faults: FaultInjection records, for tests. properties: a PropertyFile whose text
    each executor runs (kafkamc.invariants.properties).

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
                properties=properties,
                spill_dir=spill_dir,
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
        properties,
        spill_dir,
    ).run()
