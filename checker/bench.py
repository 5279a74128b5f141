"""The benchmark: engines on fixed configurations, timed end to end."""
from __future__ import annotations

import platform
import time

from kafkamc.checker.explorer import explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model

BENCH_CONFIG = Config()   # the default check: `kafkamc check --rf 3 --minisr 2`
# A configuration past a million distinct states, where Spark's cost per level starts to
# be paid back: rf 3, min ISR 2, two records, two clean shutdowns, two ISR shrinks.
LARGE_CONFIG = Config(rf=3, minisr=2, max_records=2, max_crashes=2, max_unclean_crashes=0, max_isr_shrinks=2)


def _record(cfg: Config, engine: str, result, elapsed: float) -> dict:
    return {
        "config": f"rf={cfg.rf} minisr={cfg.minisr} " + " ".join(f"{k}={v}" for k, v in cfg.bounds().items()),
        "engine": engine,
        "verdict": result.verdict,
        "distinct_states": result.distinct_states,
        "states_generated": result.states_generated,
        "depth": result.depth,
        "elapsed_s": round(elapsed, 3),
        "distinct_states_per_s": round(result.distinct_states / elapsed, 1),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def run_bench(cfg: Config = BENCH_CONFIG) -> dict:
    """The local BFS engine, including compiling the invariants."""
    start = time.monotonic()
    result = explore(Model(cfg), InvariantSuite(cfg))
    return _record(cfg, "local-bfs", result, time.monotonic() - start)


def run_spark_bench(cfg: Config, threads: int, partitions: int) -> dict:
    """Spark local mode with `threads` worker threads, start-up of the context included."""
    from kafkamc.checker.spark import explore_spark
    start = time.monotonic()
    result = explore_spark(cfg, None, partitions=partitions, master=f"local[{threads}]")
    return _record(cfg, f"spark-local[{threads}]-P{partitions}", result, time.monotonic() - start)
