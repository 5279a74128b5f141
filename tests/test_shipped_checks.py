"""The checks Spark executors run: the driver's compiled invariants shipped as text
(invariants/source.py), equal to the suite's, and enough to run a level with no Z3."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.checker.engines.level import initial_level
from kafkamc.checker.spark.tasks import _Task, initial_parts
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config

SMALL = Config(rf=2, minisr=1, max_records=1, max_hard_crashes=1, max_isr_shrinks=1)


def _steps(cfg: Config, limit: int = 3000):
    """(state, successor) pairs of the first `limit` states in BFS order."""
    model = FastModel(cfg)
    frontier, seen, out = list(model.initial_states()), set(), []
    while frontier and len(seen) < limit:
        state = frontier.pop(0)
        for _, nxt in model.successors(state):
            out.append((state, nxt))
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return out


def test_shipped_checks_agree_with_the_suite_on_every_step():
    cfg = Config(rf=2, minisr=1)  # violates HighWatermarkMonotonic: both answers occur
    suite = InvariantSuite(cfg)
    names = tuple(name for name, _ in suite.reach_functions())
    shipped = pickle.loads(pickle.dumps(suite.shipped([names, ()])))
    quiet_all, quiet_none = suite.quiet_step(list(names)), suite.quiet_step([])
    reach = dict(suite.reach_functions())
    verdicts = set()
    for prev, state in _steps(cfg):
        assert shipped.check_state(state) == suite.check_state(state)
        assert shipped.check_step(prev, state) == suite.check_step(prev, state)
        assert shipped.quiet_step(list(names))(prev, state) == quiet_all(prev, state)
        assert shipped.quiet_step([])(prev, state) == quiet_none(prev, state)
        for name, fn in shipped.reach_functions():
            assert fn(prev, state) == reach[name](prev, state)
        for changed in (-1, 1, 2, 0b110):
            assert shipped.state_test(changed)(state) == suite.state_test(changed)(state)
        verdicts.add(shipped.check_step(prev, state))
    assert None in verdicts and "HighWatermarkMonotonic" in verdicts
    assert shipped.quiet_step(list(names)).leader_only == quiet_all.leader_only


_NO_Z3 = """
import pickle, sys
sys.modules["z3"] = None  # any import of z3 now fails
from kafkamc.checker.spark import tasks as T
T.BLOB_ROWS = 7  # many blobs per level: a big level leaves in pieces
built = []
build = T.Tools.__init__
T.Tools.__init__ = lambda self, task: built.append(1) or build(self, task)
task, parts = pickle.loads(sys.stdin.buffer.read())
total = sum(p.stats.get("new", 0) for p in parts) or {initial}
while True:
    buckets = [[p] for p in parts]
    for i, p in enumerate(parts):
        for owner, value in T._expand(task, i, iter([p])):
            buckets[owner].append((owner, value))
    parts = [next(T._merge(task, i, iter(b))) for i, b in enumerate(buckets)]
    new = sum(p.stats["new"] for p in parts)
    if not new:
        break
    total += new
third_party = [m for m in ("z3", "networkx", "click", "rich") if sys.modules.get(m) is not None]
print(total, bool(third_party), len(built))
"""


@pytest.mark.parametrize("memory_mb, fresh_tools", [(None, 1), ("1", 5)])
def test_a_search_runs_its_levels_where_z3_cannot_be_imported(memory_mb, fresh_tools):
    """What an executor runs (expand, then merge, level after level) needs the package and
    the standard library only (no z3, networkx, click or rich is imported): the checks
    arrive compiled. Under a memory budget below what
    the worker holds (spark.executor.pyspark.memory, passed as PYSPARK_EXECUTOR_MEMORY_MB),
    every task starts with fresh tools, and the answers stay the same."""
    suite = InvariantSuite(SMALL)
    model = FastModel(SMALL)
    initial, _, _ = initial_level(model, suite)
    names = tuple(name for name, _ in suite.reach_functions())
    task = _Task(SMALL, suite.shipped([names]), 2, level=1, unreached=names)
    parts = [part for _, part in initial_parts(model, initial, 2)]
    out = subprocess.run(
        [sys.executable, "-c", _NO_Z3.format(initial=len(initial))],
        input=pickle.dumps((task, parts)),
        capture_output=True,
        check=True,
        env={**os.environ, **({"PYSPARK_EXECUTOR_MEMORY_MB": memory_mb} if memory_mb else {})},
    )
    distinct, imported, built = out.stdout.decode().split()
    assert int(distinct) == explore(FastModel(SMALL)).distinct_states  # every reachable state
    assert imported == "False"
    assert int(built) >= fresh_tools if memory_mb else int(built) == 1
