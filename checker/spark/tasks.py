"""What runs on the executors for the Spark search (checker/spark/search.py): the Part each partition
keeps, the level's task, and the functions that expand a frontier, merge the successors into
the visited set and count what the driver asks for at a stop.

States travel as blobs: one marshal string per (task, destination) holding each component
the states use once, as its fingerprint, kind and plain tuple, then each state as the
fingerprints of its components (the way --workers ships them). A Python worker keeps its
model, compiled checks and intern tables across tasks and levels (Spark reuses workers), so
a component it met before costs a dictionary lookup; only new ones are built. Expanding a
part runs the local explorer's fused loop (level.expand_fresh): cached step outcomes, the
cached quiet test, the state invariants tested on the components a step changed; a
successor this part knows is not new (its own visited set, or sent already in this task)
is dropped before the shuffle.

Everything here is a top-level name, so that Spark pickles it by reference: the executors
import it from the shipped package zip.
"""

from __future__ import annotations

import gc
import marshal
import os
import resource
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import kafkamc.checker.engines.transport as transport
from kafkamc.checker.cache.fast import FastModel as Model
from kafkamc.checker.engines.explorer import cyclic_gc_paused
from kafkamc.checker.engines.level import Findings, expand_fresh
from kafkamc.checker.store.codec import component_from_tuple
from kafkamc.checker.store.spill import SpilledRuns
from kafkamc.checker.store.visited import FingerprintSet
from kafkamc.spec.config import Config
from kafkamc.spec.state import as_tuple

if TYPE_CHECKING:
    from kafkamc.invariants.source import ShippedChecks

# ---------------------------------------------------------------- what runs on the executors


class Part(NamedTuple):
    """What one partition owns after a level: its share of the visited set, its states of
    the newest depth (a blob of (key, component fingerprints) rows sorted by key, see pack)
    and the level's counters."""

    visited: FingerprintSet | SpilledRuns  # SpilledRuns: on local disk (--spill-dir)
    frontier: bytes
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
    """What the executors need for one level: small, pickled with each task. The checks are
    the driver's compiled invariants as text (invariants/source.py): executors need neither
    Z3 nor the user's --properties file."""

    cfg: Config
    checks: ShippedChecks | None  # None: no invariants (tests)
    partitions: int = 1
    level: int = 0
    unreached: tuple = ()  # reachability properties not seen before this level
    faults: tuple = ()  # FaultInjection, for tests
    spill: str | None = None  # the folder of this run's spilled visited sets (checker/store/spill.py)


def _maybe_fail(task: _Task, partition: int, stage: str) -> None:
    for fault in task.faults:
        fault.maybe_fail(task.level, partition, stage)


class Tools:
    """A Python worker's model and checks for one configuration, kept warm across tasks and
    levels."""

    def __init__(self, task: _Task):
        self.model = Model(task.cfg)
        self.checks = task.checks  # its functions, defined on first use, stay with it
        self.floor = resident_mib()  # this worker's memory when these tools were built

    def states(self, blob: bytes) -> list:
        """[(key, state)] of a frontier blob, each state made of interned components."""
        comps, rows = marshal.loads(blob)
        model = self.model
        by_fp = model.fast.components.by_fp
        for cfp, kind, values in comps:
            if cfp not in by_fp:
                transport.learn(model, kind, component_from_tuple(kind, values))
        assemble = partial(transport.assemble, model)
        return [(key, assemble(cfps)) for key, cfps in rows]


def pack(model, rows) -> bytes:
    """One blob of rows (..., state): each state becomes the tuple of its components'
    fingerprints, and each component goes once into the blob's table as (fingerprint,
    kind, plain tuple). (A cache of the plain tuples across blobs doubled what a worker
    holds for each component it ever shipped.)"""
    shipped = partial(transport.shipped, model)
    table: dict = {}
    out = []
    for row in rows:
        cfps = []
        for cfp, kind, x in shipped(row[-1]):
            if cfp not in table:
                table[cfp] = (cfp, kind, as_tuple(x))
            cfps.append(cfp)
        out.append((*row[:-1], tuple(cfps)))
    return marshal.dumps((tuple(table.values()), tuple(out)), 2)


_TOOLS: dict = {}
BLOB_ROWS = 1 << 15  # successors per blob, at most


def cache_budget_mib() -> float | None:
    """How large a Python worker may grow before its caches are dropped: 60% of
    spark.executor.pyspark.memory (which PySpark passes as PYSPARK_EXECUTOR_MEMORY_MB and
    enforces as a hard limit), else no bound. The model's caches, not the visited set, are
    what a worker holds most of: 1.4 GiB after 1.9 million states of a spilled search."""
    limit = int(os.environ.get("PYSPARK_EXECUTOR_MEMORY_MB", "-1"))
    return 0.6 * limit if limit > 0 else None


def resident_mib() -> float:
    """This process's resident memory now (Linux /proc; elsewhere its peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _malloc_trim() -> None:
    """Hand the freed heap back to the system (glibc); elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _tools(task: _Task) -> Tools:
    """The Tools of the task's configuration, built once per Python worker (Spark reuses
    workers across tasks and levels), and built afresh, with empty caches, when the worker
    has outgrown its budget (cache_budget_mib)."""
    key = (task.cfg, task.checks.digest if task.checks is not None else None)
    tools = _TOOLS.get(key)
    budget = cache_budget_mib()
    # Freed memory does not always go back to the system: past a reset, the bound is what
    # was left then, plus a quarter of the budget.
    if tools is not None and budget is not None and resident_mib() > max(budget, tools.floor + budget / 4):
        _TOOLS.clear()
        tools = None
        # Each task ends by freezing what it made (explorer.cyclic_gc_paused), and frozen
        # objects are never collected: without this the dropped caches stayed, and a spilled
        # run of 15 million states died of MemoryError at level 18.
        gc.unfreeze()
        gc.collect()
        _malloc_trim()
    if tools is None:
        _TOOLS.clear()
        tools = _TOOLS[key] = Tools(task)
    elif task.checks is not None:
        tools.checks.quiet.update(task.checks.quiet)  # this level's quiet test
    return tools


def _owner(key: int) -> int:
    """The partitioner: records are keyed by the partition that owns them (PySpark applies
    the % P). One function object for the whole run: Spark tells partitioners apart by its
    identity."""
    return key


def _only(parts: Iterator[Part]) -> Part:
    (part,) = parts
    return part


def _expand(task: _Task, split: int, parts: Iterator[Part]) -> Iterator[tuple]:
    """Successors of this partition's frontier, as (owner, blob of (fp, key, violated state
    invariant, components) rows) records of at most BLOB_ROWS rows each, then one (split,
    Findings) record, which the shuffle routes back to partition `split`: findings that
    travel with the data are exact even when tasks re-run, unlike accumulators updated in
    transformations. A state is owned by partition owner_key % P (the fingerprint of its
    controller, as --workers splits them: states that share a controller share most cache
    entries)."""
    tools = _tools(task)
    model, P = tools.model, task.partitions
    part = _only(parts)
    visited, emitted = part.visited, set[int]()
    if isinstance(visited, FingerprintSet):
        seen = lambda fp: fp in emitted or fp in visited  # noqa: E731
    else:  # spilled: its merge finds the visited ones, a level at a time
        seen = emitted.__contains__
    found = Findings()
    out: list = [[] for _ in range(P)]
    owner_of = partial(transport.owner_key, model)
    with cyclic_gc_paused():
        frontier = tools.states(part.frontier)
        for fp, key, nxt, bad in expand_fresh(model, frontier, tools.checks, task.unreached, found, seen):
            emitted.add(fp)
            rows = out[owner_of(nxt) % P]
            rows.append((fp, key, bad, nxt))
            if len(rows) >= BLOB_ROWS:  # a big level leaves in pieces: memory holds one
                yield owner_of(nxt) % P, pack(model, rows)
                rows.clear()
        records = [(owner, pack(model, rows)) for owner, rows in enumerate(out) if rows]
    _maybe_fail(task, split, "expand")
    yield from records
    yield split, found


def _merge(task: _Task, split: int, items: Iterator) -> Iterator[Part]:
    """Partition `split` of parts.union(successors): the previous Part, then the successor
    blobs and expand findings this partition owns; yields the next level's Part."""
    old = None
    blobs, found = [], []
    for item in items:
        if isinstance(item, Part):
            old = item
        elif isinstance(item[1], Findings):
            found.append(item[1])
        else:
            blobs.append(item[1])
    if old is None:
        raise RuntimeError(f"partition {split} has no visited set: the union is not co-partitioned")
    visited = old.visited
    if isinstance(visited, FingerprintSet):
        known = visited.__contains__
    else:  # spilled: the level's candidates first, then the runs read once for all of them
        known = visited.present({row[0] for blob in blobs for row in marshal.loads(blob)[1]}).__contains__
    best: dict = {}  # fp -> (key, violated state invariant, component fingerprints) of its first arrival
    table: dict = {}
    received = 0
    for blob in blobs:
        comps, rows = marshal.loads(blob)
        received += len(rows)
        for fp, key, bad, cfps in rows:
            if not known(fp):
                first = best.get(fp)
                if first is None or key < first[0]:
                    best[fp] = (key, bad, cfps)
        for c in comps:
            table[c[0]] = c
    if isinstance(visited, FingerprintSet):
        for fp in best:
            visited.add(fp)
    else:
        visited = visited.with_run(best)
    fresh = sorted(best.items(), key=lambda item: item[1][0])
    rows = tuple((key, cfps) for _, (key, _, cfps) in fresh)
    needed = {cfp for _, cfps in rows for cfp in cfps}
    stats = {
        "found": Findings.total(found),
        "new": len(fresh),
        "min_key": rows[0][0] if rows else None,
        "state_bad": next(((key, bad) for _, (key, bad, _) in fresh if bad), None),
        "visited_bytes": visited.nbytes,
        "worker_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "shuffled": (received, sum(map(len, blobs))),  # successor rows and their bytes
    }
    _maybe_fail(task, split, "merge")
    yield Part(visited, marshal.dumps((tuple(table[c] for c in needed), rows), 2), stats)


def initial_parts(model, entries: list, partitions: int, spill: str | None = None) -> list:
    """(partition, Part) of level 0 from the initial states' (fp, key, state); with `spill`,
    each partition's visited set goes to disk under that folder (spill_folder)."""
    shares: list = [[] for _ in range(partitions)]
    for fp, key, state in entries:
        shares[transport.owner_key(model, state) % partitions].append((key, fp, state))
    out = []
    for i, share in enumerate(shares):
        share.sort(key=lambda e: e[0])
        fps = sorted(fp for _, fp, _ in share)
        visited: FingerprintSet | SpilledRuns
        if spill is not None:
            visited = SpilledRuns(spill_folder(spill, i), head=tuple(fps))
        else:
            visited = FingerprintSet()
            for fp in fps:
                visited.add(fp)
        frontier = pack(model, [(key, state) for key, _, state in share])
        out.append((i, Part(visited, frontier, {})))
    return out


def spill_folder(root: str, partition: int) -> str:
    return os.path.join(root, f"partition-{partition}")


def _values(item: tuple) -> Part:
    return item[1]


def _stats_of(part: Part) -> dict:
    return part.stats


def _frontier_keys(part: Part) -> list:
    return [key for key, _ in marshal.loads(part.frontier)[1]]


def _count_new_until(cut: bytes, inclusive: bool, part: Part) -> int:
    """States of this level that the local explorer had added when it stopped at `cut`."""
    return sum(1 for key in _frontier_keys(part) if key < cut or (inclusive and key == cut))


def _count_steps_until(task: _Task, cut: bytes, parts: Iterator[Part]) -> Iterator[tuple]:
    """(steps, coverage) of this partition's parents up to and including the step `cut`. The
    keys of one level have one length, so bytes order is (parent, index) order."""
    tools = _tools(task)
    parent, last = cut[:-2], int.from_bytes(cut[-2:], "big")
    steps, coverage = 0, Counter[str]()
    for part in parts:
        for path, state in tools.states(part.frontier):
            if path > parent:
                break
            for index, (action, _) in enumerate(tools.model.successors(state)):
                if path == parent and index > last:
                    break
                steps += 1
                coverage[type(action).__name__] += 1
    yield steps, coverage


def _has_successor(task: _Task, parts: Iterator[Part]) -> Iterator[bool]:
    tools = _tools(task)
    yield any(
        next(iter(tools.model.successors(state)), None) is not None
        for part in parts
        for _, state in tools.states(part.frontier)
    )
