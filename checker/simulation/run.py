"""`kafkamc check --simulate`'s dispatch: the walks in this process, across forked workers
(checker/simulation/workers.py) or on Spark (checker/spark/simulate.py), all three built on
checker/simulation/simulate.py, which imports none of them."""

from __future__ import annotations

from collections.abc import Callable, Generator

from kafkamc.checker.engines.search import Limits
from kafkamc.checker.simulation.simulate import (
    Batch,
    SimResult,
    Simulation,
    Tally,
    deadline_of,
    finish,
    gather,
    ranges,
    run_range,
)
from kafkamc.checker.simulation.workers import walk_in_workers


def simulate(
    model,
    suite,
    sim: Simulation,
    limits: Limits = Limits(),
    progress: Callable[[dict], None] | None = None,
    workers: int = 1,
    chunk: int = 16,
) -> SimResult:
    """The walks of `sim` in this process, or across `workers` forked processes."""
    tally = Tally(sim, limits)
    deadline = deadline_of(limits)
    if workers > 1:
        batches: Generator[Batch, None, None] = walk_in_workers(model, suite, sim, workers, deadline)
    else:
        batches = (run_range(model, suite, sim.seed, a, b, sim.depth, deadline) for a, b in ranges(0, sim.walks, chunk))
    try:
        gather(tally, batches, progress)
    finally:
        batches.close()  # forked workers end here, whatever stopped the run
    return finish(model, suite, tally)


def run_simulation(
    model, suite, sim: Simulation, limits: Limits, progress, workers: int, spark, invariants, properties
):
    """What `kafkamc check --simulate` runs (jobs/run.py): in this process, across forked
    workers, or on Spark when `spark` (run.SparkSettings) is given."""
    if spark is None:
        return simulate(model, suite, sim, limits, progress, workers)
    from kafkamc.checker.spark.simulate import simulate_spark  # pyspark only where Spark runs

    return simulate_spark(
        model.config,
        invariants,
        sim,
        limits,
        spark.partitions,
        spark.master,
        dict(spark.conf),
        progress,
        properties,
        tools=(model, suite),
    )
