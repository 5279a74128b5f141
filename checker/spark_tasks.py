"""What runs on the executors for the Spark search (checker/spark.py): the Part each partition
keeps, the level's task, and the functions that expand a frontier, merge the successors into
the visited set and count what the driver asks for at a stop.

Everything here is a top-level name, so that Spark pickles it by reference: the executors
import it from the shipped package zip.
"""

from __future__ import annotations

import bisect
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kafkamc.checker.codec import decode, encode
from kafkamc.checker.fast import FastModel as Model
from kafkamc.checker.level import Findings, expand_part
from kafkamc.spec.config import Config

if TYPE_CHECKING:  # z3 is imported only where states are checked
    from kafkamc.invariants.properties import PropertyFile

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
    properties: PropertyFile | None = None  # user-defined properties (--properties)


def _maybe_fail(task: _Task, partition: int, stage: str) -> None:
    for fault in task.faults:
        fault.maybe_fail(task.level, partition, stage)


_TOOLS: dict = {}


def _tools(task: _Task):
    """Model and InvariantSuite of the task's configuration, built once per Python worker
    (Spark reuses workers across tasks and levels)."""
    key = (task.cfg, task.invariants, task.properties)
    if key not in _TOOLS:
        from kafkamc.invariants.suite import InvariantSuite  # z3: only where states are checked

        _TOOLS.clear()
        names = list(task.invariants) if task.invariants is not None else None
        _TOOLS[key] = (Model(task.cfg), InvariantSuite(task.cfg, names, task.properties))
    return _TOOLS[key]


def _owner(fp: int) -> int:
    """The partitioner: fingerprint fp belongs to partition fp % P (PySpark applies the % P).
    One function object for the whole run: Spark tells partitioners apart by its identity."""
    return fp


def _expand(task: _Task, split: int, parts: Iterator[Part]) -> Iterator[tuple]:
    """Successors of this partition's frontier as (child fp, (key, bytes, violated state
    invariant)), then one (split, (None, Findings)) record, which the shuffle routes back to
    partition `split`: findings that travel with the data are exact even when tasks re-run,
    unlike accumulators updated in transformations."""
    model, suite = _tools(task)
    check_state = suite.check_state
    found = Findings()
    frontier = ((path, decode(data)) for part in parts for path, data in part.frontier)
    for fp, key, nxt in expand_part(model, frontier, suite, task.unreached, found):
        yield fp, (key, encode(nxt), check_state(nxt))
    _maybe_fail(task, split, "expand")
    yield split, (None, found)


def _merge(task: _Task, split: int, items: Iterator) -> Iterator[Part]:
    """Partition `split` of parts.union(successors): the previous Part, then the successor
    records and expand findings this partition owns; yields the next level's Part."""
    old = None
    best: dict = {}  # fp -> (key, bytes, bad) of its first arrival (smallest key)
    found = []
    for item in items:
        if isinstance(item, Part):
            old = item
            continue
        fp, value = item
        if value[0] is None:
            found.append(value[1])
        elif fp not in best or value[0] < best[fp][0]:
            best[fp] = value
    if old is None:
        raise RuntimeError(f"partition {split} has no visited set: the union is not co-partitioned")
    fresh = sorted((v[0], fp, v[1], v[2]) for fp, v in best.items() if not _contains(old.visited, fp))
    stats = {
        "found": Findings.total(found),
        "new": len(fresh),
        "min_key": fresh[0][0] if fresh else None,
        "state_bad": next(((key, bad) for key, _, _, bad in fresh if bad), None),
    }
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
