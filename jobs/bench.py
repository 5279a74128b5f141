"""The benchmark: a fixed table of runs, each in a fresh process, printed as JSON.

Each run is its own Python process so that its peak memory (ru_maxrss) is its own, and so
that caches warmed by one run do not flatter the next. Timing is end to end inside that
process: building the model and compiling the invariants included, start-up of the
interpreter not.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import replace

from kafkamc.spec.config import Config
from kafkamc.spec.next import BOUNDS

BENCH_CONFIG = Config()  # the default check: `kafkamc check --rf 3 --minisr 2`
# Past a million distinct states (reduced; six times as many unreduced): rf 3, min ISR 2,
# two records, two clean shutdowns, two ISR shrinks.
LARGE_CONFIG = Config(rf=3, minisr=2, max_records=2, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=2)
# Issue 33's thorough checks, each cut at TEN_MILLION distinct states (neither is exhausted
# within that): a fenced zombie; a rolling restart's controlled shutdown.
FENCES_CONFIG = Config(rf=3, minisr=2, max_fences=1)
SHUTDOWNS_CONFIG = Config(rf=3, minisr=2, max_controlled_shutdowns=1)
# Issue 33's all-faults model: one record, one clean shutdown, one hard crash, one fence; and
# its reassignment check: four brokers, one reassignment, one record.
ALL_FAULTS_CONFIG = Config(rf=3, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=1, max_fences=1)
REASSIGNMENT_CONFIG = Config(rf=3, minisr=2, broker_count=4, max_reassignments=1, max_records=1)
TEN_MILLION = 10_000_000
# Issue 40's TLC side by side: kafkamc's match for Vanlightly's kip-966 cfg (one record, one hard
# crash, one fence, no clean shutdown; jobs/tlc.py's KAFKAMC_ARGS), and TLC on that cfg itself.
PEER_CONFIG = Config(rf=3, minisr=2, max_records=1, max_hard_crashes=1, max_fences=1, max_clean_shutdowns=0)

# name -> (config, engine). The engines: "local" (one process, the native core where built),
# "python" (one process, the Python engine), "workers[N]" (--workers N),
# "spark-local[T]" (Spark local mode with T threads and T partitions), "simulate" (--simulate
# with SIMULATE_RUN's walks, one process), "tlc" (TLC 2.18 on the peer's own cfg, jobs/tlc.py: only
# where KAFKAMC_TLA2TOOLS and KAFKAMC_TLC_SPEC name the jar and the specification).
RUNS = {
    "default": (BENCH_CONFIG, "local"),
    "default-python": (BENCH_CONFIG, "python"),
    "default-no-symmetry": (replace(BENCH_CONFIG, symmetry=False), "local"),
    "default-workers[2]": (BENCH_CONFIG, "workers[2]"),
    "default-python-workers[2]": (BENCH_CONFIG, "python-workers[2]"),
    "default-spark-local[2]": (BENCH_CONFIG, "spark-local[2]"),
    # A standalone master and 2 workers of 1 core on loopback (checker/spark/cluster.py), started
    # before the clock starts: elapsed_s is the check's, the application's start included.
    "default-spark-standalone[2]": (BENCH_CONFIG, "spark-standalone[2]"),
    "large": (LARGE_CONFIG, "local"),
    "large-python": (LARGE_CONFIG, "python"),
    "large-workers[2]": (LARGE_CONFIG, "workers[2]"),
    "large-spark-local[2]": (LARGE_CONFIG, "spark-local[2]"),
    "large-no-symmetry": (replace(LARGE_CONFIG, symmetry=False), "local"),
    "simulate-default": (BENCH_CONFIG, "simulate"),
    "liveness-default": (BENCH_CONFIG, "liveness"),
    "liveness-default-workers[2]": (BENCH_CONFIG, "liveness-workers[2]"),
    # Issue 40's thorough checks exhausted in one process on the core (tens of minutes each).
    "fences": (FENCES_CONFIG, "local"),
    "shutdowns": (SHUTDOWNS_CONFIG, "local"),
    "all-faults": (ALL_FAULTS_CONFIG, "local"),
    "fences-workers[2]": (FENCES_CONFIG, "workers[2]"),
    "shutdowns-workers[2]": (SHUTDOWNS_CONFIG, "workers[2]"),
    "all-faults-workers[2]": (ALL_FAULTS_CONFIG, "workers[2]"),
    "reassignment-workers[2]": (REASSIGNMENT_CONFIG, "workers[2]"),
    "peer-kip966": (PEER_CONFIG, "local"),
    "tlc-kip966": (PEER_CONFIG, "tlc"),
}
CUT = {"fences-workers[2]": TEN_MILLION, "shutdowns-workers[2]": TEN_MILLION}  # run -> max distinct states
SIMULATE_RUN = (200, 100, 0)  # walks, steps at most per walk, seed
QUICK = (
    "default",
    "default-python",
    "default-workers[2]",
    "default-no-symmetry",
)  # the core and the Python engine back to back


def describe(cfg: Config) -> str:
    bounds = " ".join(f"{k}={v}" for k, v in cfg.bounded(BOUNDS).bounds().items())
    return f"rf={cfg.rf} minisr={cfg.minisr} symmetry={'on' if cfg.symmetry else 'off'} {bounds}"


def cpu_time() -> float:
    """CPU seconds of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_memory_mib() -> float:
    """This process's peak resident memory (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_children_mib() -> float:
    """The largest peak resident memory among this process's finished children."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def unavailable(name: str, env) -> str | None:
    """Why a run of the table cannot run here (one line), or None: TLC's row needs the jar and
    the specification, checked as jobs/tlc.py checks them."""
    from kafkamc.jobs.tlc import TlcProblem, configured, inputs_from

    if RUNS[name][1] != "tlc":
        return None
    if not configured(env):
        return f"benchmark run {name} needs KAFKAMC_TLA2TOOLS (tla2tools.jar) and KAFKAMC_TLC_SPEC (the .tla)"
    try:
        inputs_from(env)
    except TlcProblem as e:
        return f"benchmark run {name}: {e}"
    return None


def runs_here(env) -> tuple:
    """The whole table (`bench --all`): TLC's row only where the environment names TLC."""
    from kafkamc.jobs.tlc import configured

    return tuple(n for n in RUNS if RUNS[n][1] != "tlc" or configured(env))


def run_one(name: str) -> dict:
    """One run of the table, in this process."""
    cfg, engine = RUNS[name]
    if engine == "tlc":  # the JVM's own wall time, CPU time and peak, from jobs/tlc.py
        from kafkamc.jobs.tlc import inputs_from, run_tlc

        return run_tlc(inputs_from(os.environ)) | {"run": name}
    levels: list = []  # Spark's progress reports: the last one has the shuffle's totals
    caches = None  # one process: each cache's lookups, misses and hit rate
    tables: dict = {}  # one process on the core: its tables' MiB claimed
    start, cpu = time.monotonic(), cpu_time()
    if engine in ("local", "python"):  # one process: the native core where built, or the Python engine
        from kafkamc.checker.cache.budget import cache_stats
        from kafkamc.checker.cache.fast import FastModel
        from kafkamc.checker.engines.explorer import explore
        from kafkamc.invariants.suite import InvariantSuite

        model = FastModel(cfg, grows=True)  # the command's default budget
        result = explore(model, InvariantSuite(cfg), engine="auto" if engine == "local" else "python")
        caches = cache_stats(model.fast)
        tables = _mib(model.fast.budget.core_tables)
    elif engine == "simulate":
        from kafkamc.checker.cache.fast import FastModel
        from kafkamc.checker.simulation.run import simulate
        from kafkamc.checker.simulation.simulate import Simulation
        from kafkamc.invariants.suite import InvariantSuite

        result = simulate(FastModel(cfg), InvariantSuite(cfg), Simulation(*SIMULATE_RUN))
    elif "workers[" in engine and not engine.startswith("liveness"):  # "python-workers[N]": without the core
        from kafkamc.checker.cache.budget import DEFAULT_MIB, share_of
        from kafkamc.checker.cache.fast import FastModel
        from kafkamc.checker.engines.search import Limits
        from kafkamc.checker.engines.workers import explore_workers
        from kafkamc.invariants.suite import InvariantSuite

        n = int(engine[engine.index("[") + 1 : -1])
        result = explore_workers(
            FastModel(cfg, cache_entries=share_of(DEFAULT_MIB, n), grows=True),  # the command's default budget
            InvariantSuite(cfg),
            n,
            Limits(max_states=CUT.get(name)),
            engine="python" if engine.startswith("python") else "auto",
        )
    elif engine.startswith("liveness"):
        from kafkamc.jobs.run import run_check  # the safety pass, then the graph: as `check --liveness`

        n = int(engine[len("liveness-workers[") : -1]) if "[" in engine else 1
        result = run_check(cfg, liveness=True, workers=n).result
    elif engine.startswith("spark-standalone["):
        from kafkamc.checker.spark.cluster import standalone_cluster
        from kafkamc.checker.spark.search import explore_spark

        n = int(engine[len("spark-standalone[") : -1])
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python: see spark_cluster
        with standalone_cluster(workers=n, cores=1, memory="3g") as cluster:
            start = time.monotonic()
            result = explore_spark(
                cfg, None, partitions=n, master=cluster.master_url, conf=cluster.driver_conf(), progress=levels.append
            )
            elapsed = time.monotonic() - start
    else:
        from kafkamc.checker.spark.search import explore_spark

        threads = int(engine[len("spark-local[") : -1])
        result = explore_spark(cfg, None, partitions=threads, master=f"local[{threads}]", progress=levels.append)
    if not engine.startswith("spark-standalone["):
        elapsed = time.monotonic() - start
    return {
        "run": name,
        "config": describe(cfg),
        "engine": engine,
        "core": result.core,
        "verdict": result.verdict,
        "distinct_states": result.distinct_states,
        "states_generated": result.states_generated,
        "depth": result.depth,
        "elapsed_s": round(elapsed, 2),
        # CPU time, this process's and its finished children's (--workers): steadier than elapsed
        # on a machine shared with other work.
        "cpu_s": round(cpu_time() - cpu, 2),
        "distinct_states_per_s": round(result.distinct_states / elapsed),
        # This process's peak, plus the largest worker's: a --workers process, or a Spark
        # Python worker (Spark's JVMs are not counted).
        "peak_memory_mib": round(peak_memory_mib()),
        "peak_worker_memory_mib": _worker_peak(engine, result),
        **(_shuffled(levels[-1]["shuffled"], result.distinct_states) if levels else {}),
        "visited_bytes_per_state": round(result.bytes_per_state, 1) if not engine.startswith("spark") else None,
        # Every process's peak resident memory, summed, per distinct state (0: not measured).
        "peak_bytes_per_state": round(result.peak_bytes_per_state),
        "collision_probability": float(f"{result.collision_probability:.1e}"),
        **({} if engine != "simulate" else _walk_rates(result, elapsed)),
        **({} if caches is None else {"caches": caches}),
        **({"core_tables_mib": tables} if tables else {}),
    }


def _mib(tables: dict) -> dict:
    """The core's tables in MiB claimed, as it closed (native/src/search/memory.rs)."""
    return {name: round(b / 2**20, 1) for name, b in tables.items()}


def _worker_peak(engine: str, result) -> int | None:
    if "workers[" in engine and not engine.startswith("liveness"):
        return round(peak_children_mib())
    return round(result.worker_peak_mib) if engine.startswith("spark") else None


def _shuffled(shuffled: tuple, distinct: int) -> dict:
    """What crossed Spark's shuffle, per distinct state: successor rows and bytes."""
    rows, nbytes = shuffled
    return {"shuffled_rows_per_state": round(rows / distinct, 2), "shuffled_bytes_per_state": round(nbytes / distinct)}


def _walk_rates(result, elapsed: float) -> dict:
    """A simulation's own rates, end to end as the rest of the row."""
    return {"walks_per_s": round(result.walks / elapsed, 1), "steps_per_s": round(result.steps / elapsed)}


def run_table(names) -> dict:
    """Every named run, each in a fresh process, with the machine it ran on."""
    rows = []
    for name in names:
        p = subprocess.run([sys.executable, "-m", "kafkamc.jobs.bench", name], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"benchmark run {name} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        rows.append(json.loads(p.stdout))
    return {"machine": machine(), "runs": rows}


def machine() -> dict:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "processor": _cpu_model(),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    print(json.dumps(run_one(sys.argv[1])))
