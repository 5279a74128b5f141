"""The benchmark: the local engine on a fixed configuration, timed end to end."""
from __future__ import annotations

import platform
import time

from kafkamc.checker.explorer import explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model

BENCH_CONFIG = Config()   # the default check: `kafkamc check --rf 3 --minisr 2`


def run_bench(cfg: Config = BENCH_CONFIG) -> dict:
    start = time.monotonic()
    result = explore(Model(cfg), InvariantSuite(cfg))
    elapsed = time.monotonic() - start
    return {
        "config": f"rf={cfg.rf} minisr={cfg.minisr} " + " ".join(f"{k}={v}" for k, v in cfg.bounds().items()),
        "engine": "local-bfs",
        "verdict": result.verdict,
        "distinct_states": result.distinct_states,
        "states_generated": result.states_generated,
        "depth": result.depth,
        "elapsed_s": round(elapsed, 3),
        "distinct_states_per_s": round(result.distinct_states / elapsed, 1),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
