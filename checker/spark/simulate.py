"""`kafkamc check --simulate --engine spark`: the walks spread across Spark executors.

The driver runs rounds: each round is one job of up to P tasks, each task a range of walk
indices (checker/simulation/simulate.py, run_range) that comes back as one Batch. Walk i draws from
its own seed, so the Batches are those one process would make, and the driver adds them in
index order (Tally): the counts, the distinct states (the union of the ranges' fingerprint
sets) and the first violation are the local simulation's. Rounds start small and double,
so an early violation ends the run soon and a long run pays for few jobs. The violating walk
is shrunk on the driver.

Executors build the model and the invariants from the Config once per Python worker, as
for the Spark search (checker/spark/tasks.py); everything here is a top-level name, so that
Spark pickles it by reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from kafkamc.checker.engines.search import Limits
from kafkamc.checker.simulation.simulate import (
    Batch,
    SimResult,
    Simulation,
    Tally,
    deadline_of,
    finish,
    gather,
    run_range,
)
from kafkamc.checker.spark.context import SparkJobFailed, _python_error, ship_package, spark_context
from kafkamc.spec.config import Config

if TYPE_CHECKING:
    from kafkamc.invariants.properties import PropertyFile
    from kafkamc.invariants.source import ShippedChecks

FIRST_ROUND = 8  # walks per task in the first round; each round doubles it
LARGEST_ROUND = 4096


@dataclass(frozen=True)
class _WalkTask:
    """What every task of a run needs: small, pickled with each task."""

    cfg: Config
    checks: ShippedChecks  # the driver's compiled invariants as text: executors need no Z3
    sim: Simulation
    deadline: float | None  # time.time(): executors compare it with their own clock


_TOOLS: dict = {}


def _tools(task: _WalkTask):
    """FastModel and the shipped checks of the task's configuration, kept once per Python
    worker (Spark reuses workers across tasks), replaced when another configuration comes."""
    key = (task.cfg, task.checks.digest)
    if key not in _TOOLS:
        from kafkamc.checker.cache.fast import FastModel

        _TOOLS.clear()
        _TOOLS[key] = (FastModel(task.cfg), task.checks)
    return _TOOLS[key]


def _walk_ranges(task: _WalkTask, ranges: Iterator[tuple[int, int]]) -> Iterator[Batch]:
    model, suite = _tools(task)
    for start, stop in ranges:
        yield run_range(model, suite, task.sim.seed, start, stop, task.sim.depth, task.deadline)


def round_ranges(start: int, walks: int, tasks: int, per_task: int) -> list[tuple[int, int]]:
    """The next round: up to `tasks` consecutive ranges of `per_task` walks from `start`."""
    stop = min(walks, start + tasks * per_task)
    return [(a, min(a + per_task, stop)) for a in range(start, stop, per_task)]


def _batches(sc, task: _WalkTask, tasks: int) -> Iterator[Batch]:
    """Every Batch in walk order, one round (one Spark job) at a time."""
    from py4j.protocol import Py4JJavaError

    start, per_task = 0, FIRST_ROUND
    while start < task.sim.walks:
        todo = round_ranges(start, task.sim.walks, tasks, per_task)
        try:
            got = sc.parallelize(todo, len(todo)).mapPartitions(partial(_walk_ranges, task)).collect()
        except Py4JJavaError as e:
            raise SparkJobFailed(f"a Spark job of the simulation failed: {_python_error(e)}", str(e)) from None
        yield from got
        start = todo[-1][1]
        per_task = min(2 * per_task, LARGEST_ROUND)


def simulate_spark(
    cfg: Config,
    invariants,
    sim: Simulation,
    limits: Limits = Limits(),
    tasks: int = 4,
    master: str | None = "local[*]",
    conf: Mapping | None = None,
    progress: Callable[[dict], None] | None = None,
    properties: PropertyFile | None = None,
    sc=None,
    tools: tuple | None = None,
) -> SimResult:
    """The simulation of checker/simulation/simulate.py with the walks on Spark, `tasks` tasks a round:
    the same SimResult as simulate() for the same seed. sc: a running SparkContext to use
    (left running); otherwise one is started for this run. tools: the driver's (FastModel,
    InvariantSuite) of cfg, which shrink the violating walk; built here when not given.
    Raises SparkUnavailable and SparkJobFailed as the Spark search does."""
    if sc is None:
        with spark_context(master, conf) as own:
            return simulate_spark(cfg, invariants, sim, limits, tasks, None, None, progress, properties, own, tools)
    ship_package(sc)
    if tools is None:
        from kafkamc.checker.cache.fast import FastModel
        from kafkamc.invariants.suite import InvariantSuite

        names = None if invariants is None else list(invariants)
        tools = (FastModel(cfg), InvariantSuite(cfg, names, properties))
    model, suite = tools
    task = _WalkTask(cfg, suite.shipped([]), sim, deadline_of(limits))
    tally = Tally(sim, limits)
    gather(tally, _batches(sc, task, max(1, tasks)), progress)
    return finish(model, suite, tally)
