"""The Spark explorer: the same answers as the local BFS, through retries, and clean failures.

Every test is marked `spark` (select with `-m spark`). One local SparkContext serves the whole
module: starting one costs seconds. Its master, local[2,3], retries a failed task up to 3 times,
which the fault-injection test needs.
"""

from __future__ import annotations

import marshal
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import CONTROLLED_SHUTDOWN_SMALL, REASSIGNMENT_SMALL, bfs_states
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import Limits, explore
from kafkamc.checker.spark.search import (
    FaultInjection,
    SparkJobFailed,
    SparkUnavailable,
    _SparkBFS,
    build_package_zip,
    explore_spark,
    spark_context,
    state_from_key,
)
from kafkamc.checker.store.codec import encode
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.protocol import Protocol
from kafkamc.traces.trace import Trace, load

pytestmark = pytest.mark.spark

ONE_CRASH_RF1 = Config(rf=1, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1)
ONE_CRASH_RF2 = Config(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1)
UNCLEAN = Config(rf=2, minisr=1, unclean=True)

# (config, verdict, distinct states (holds) or violated invariant, depth or counterexample length,
#  partitions, checkpoint every): P and checkpoints vary so that several layouts are exercised.
# The counts follow tests/test_pinned.py and tests/test_controlled_shutdown.py: trace validation
# (Kafka 4.1.1) moved them, a crashed follower may be dropped from the ISR by the leader's lag
# check before its fence (4,243 -> 4,774, 8,549 -> 9,291, 5,862 -> 6,457, 69,996 -> 79,914), and a follower's
# controlled shutdown may take the leader's path, hasLeaderships being cluster-wide (2,018 -> 2,132).
CASES = {
    "rf1-one-crash": (ONE_CRASH_RF1, "holds", 15, 5, 4, 1),
    "rf2-minisr1-one-crash": (ONE_CRASH_RF2, "holds", 4774, 22, 3, 4),
    "rf2-minisr2": (Config(rf=2, minisr=2), "holds", 9291, 22, 2, 4),
    "unclean-election": (UNCLEAN, "violated", "NoCommittedDataLoss", 6, 4, 2),
    "acks1": (Config(rf=3, minisr=2, acks="1", max_records=1), "violated", "AckedWriteDurability", 4, 3, 4),
    "elr-off": (
        Config(rf=3, minisr=2, max_records=1, protocol=Protocol().with_rules(elr="off")),
        "violated",
        "HighWatermarkMonotonic",
        11,
        2,
        4,
    ),
    # Issue 16's moves: the pinned configurations of tests/test_controlled_shutdown.py and
    # tests/test_reassignment.py (a broker pool: the codec carries the replica set's changes).
    # 2,070 until issue 29: a broker that leads nothing now stops at once (SHUTDOWN_NOW).
    "controlled-shutdown": (Config(**CONTROLLED_SHUTDOWN_SMALL), "holds", 2132, 21, 2, 4),
    "reassignment-four-brokers": (Config(**REASSIGNMENT_SMALL), "holds", 5499, 18, 2, 4),
    # The rest of the pinned table (tests/test_pinned.py) and the bug zoo (tests/test_protocols.py).
    "two-shutdowns-rf2": (
        Config(rf=2, minisr=2, max_records=1, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1),
        "holds",
        6457,
        22,
        2,
        4,
    ),
    "rf1-hard-crash": (Config(rf=1, minisr=1), "violated", "HighWatermarkMonotonic", 4, 2, 4),
    "rf2-two-hard-crashes": (
        Config(rf=2, minisr=2, max_hard_crashes=2),
        "violated",
        "HighWatermarkMonotonic",
        9,
        2,
        4,
    ),
    # KIP-101: the restarted follower truncates to its lagging HW while in the ELR, which
    # EligibleReplicasComplete reports before anyone elects it.
    "zoo-truncation-hw": (
        Config(
            rf=2,
            minisr=2,
            max_records=1,
            max_clean_shutdowns=2,
            max_hard_crashes=0,
            max_isr_shrinks=1,
            protocol=Protocol().with_rules(truncation="hw"),
        ),
        "violated",
        "EligibleReplicasComplete",
        6,
        2,
        4,
    ),
    "zoo-kip903": (
        Config(
            rf=3,
            minisr=2,
            max_records=1,
            max_clean_shutdowns=1,
            max_hard_crashes=1,
            max_isr_shrinks=0,
            protocol=Protocol().with_rules(isr_join_broker_epoch="unchecked"),
        ),
        "violated",
        "NoCommittedDataLoss",
        10,
        2,
        4,
    ),
    "zoo-kip207": (
        Config(rf=3, minisr=2, max_records=1, protocol=Protocol().with_rules(consumer_hw="leader_hw")),
        "violated",
        "HighWatermarkMonotonic",
        8,
        2,
        4,
    ),
    "rf3-minisr2-one-record": (Config(rf=3, minisr=2, max_records=1), "holds", 79914, 24, 2, 4),
}


@pytest.fixture(scope="module")
def sc():
    with spark_context("local[2,3]") as context:
        yield context


def local_bfs(cfg: Config, limits: Limits = Limits(), reach=()):
    return explore(FastModel(cfg), InvariantSuite(cfg), "bfs", limits, stop_when_reached=frozenset(reach))


def assert_same(local, spark):
    """Every number the CLI reports, and the traces themselves."""
    for name in ("verdict", "distinct_states", "states_generated", "depth", "stop_reason", "coverage"):
        assert getattr(spark, name) == getattr(local, name), name
    assert spark.reached == local.reached
    if local.violation is None:
        assert spark.violation is None
    else:
        assert (spark.violation.invariant, spark.violation.kind) == (local.violation.invariant, local.violation.kind)
        assert spark.violation.trace == local.violation.trace


# ---------------------------------------------------------------- states as bytes, the package as a zip


def test_state_from_key_round_trips():
    configs = (Config(), UNCLEAN, Config(rf=3, minisr=2, acks="1", max_fences=1))
    states = [s for cfg in configs for s in bfs_states(Model(cfg), 4000)]
    for s in states:
        back = state_from_key(marshal.loads(encode(s)))
        assert back == s and back.key() == s.key() and encode(back) == encode(s)
    # The sample reaches the fields with nested structure, so the round trip is not vacuous.
    brokers = [b for s in states for b in s.brokers]
    assert any(b.alter is not None for b in brokers) and any(b.purgatory for b in brokers)
    assert any(not b.alive for b in brokers) and any(s.ghost.committed for s in states)


def test_package_zip_imports_alone(tmp_path):
    """With only the zip (and third-party packages, no .pth finder) on sys.path, as on an executor."""
    import z3

    zip_path = build_package_zip(tmp_path)
    site = str(Path(z3.__file__).parents[1])
    code = textwrap.dedent(f"""
        import sys
        sys.path[:] = [p for p in sys.path if 'site-packages' not in p]
        sys.path.append({site!r})      # z3 and the rest, without processing .pth files
        try:
            import kafkamc.spec
            sys.exit('kafkamc is importable without the zip: the test proves nothing')
        except ImportError:
            pass
        sys.path.insert(0, {str(zip_path)!r})
        import kafkamc.checker.spark.search, kafkamc.invariants.suite, kafkamc.traces.trace
        from kafkamc.checker.engines.explorer import explore
        from kafkamc.invariants.suite import InvariantSuite
        from kafkamc.spec.config import Config
        from kafkamc.checker.cache.fast import FastModel
        where = kafkamc.checker.spark.search.__file__
        assert where.startswith({str(zip_path)!r}), where
        cfg = Config(rf=1, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1)
        print(explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states)
    """)
    p = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr + p.stdout
    assert p.stdout.strip() == "15"


def test_the_driver_keeps_importing_its_own_kafkamc(sc):
    """Shipping the zip leaves the driver's sys.path alone: the copy Spark keeps is deleted
    when the context stops, and later imports must not look for kafkamc modules there."""
    assert not any(p.endswith("kafkamc.zip") for p in sys.path)
    import kafkamc.traces.html

    assert ".zip" not in kafkamc.traces.html.__file__


def test_executors_import_kafkamc_from_the_shipped_zip(sc):
    # A lambda: cloudpickle ships it by value (this test module is not importable there).
    files = sc.parallelize([0], 1).map(lambda _: __import__("kafkamc.spec.model", fromlist=["_"]).__file__).collect()
    assert files[0].endswith("kafkamc.zip/kafkamc/spec/model.py")


# ---------------------------------------------------------------- agreement with the local engine


@pytest.mark.parametrize("case", list(CASES))
def test_agrees_with_local_bfs(sc, case, tmp_path):
    cfg, verdict, what, steps, partitions, every = CASES[case]
    local = local_bfs(cfg)
    spark = explore_spark(cfg, None, Limits(), partitions, sc=sc, checkpoint_every=every)
    assert_same(local, spark)
    assert spark.verdict == verdict
    if verdict == "holds":
        assert (spark.distinct_states, spark.depth) == (what, steps)
    else:
        assert (spark.violation.invariant, spark.violation.length) == (what, steps)
        # A real path of the model: saved, loaded and replayed as a user would.
        v = spark.violation
        path = Trace(cfg, v.trace, v.invariant, v.kind).save(tmp_path / "trace.json")
        assert load(path).length == steps


@pytest.mark.parametrize("case", ["rf2-minisr1-one-crash", "elr-off", "controlled-shutdown"])
def test_spilled_visited_sets_give_the_same_answers(sc, case, tmp_path):
    """--spill-dir: the visited sets live on disk as sorted runs (checker/store/spill.py); counts,
    verdicts and traces are those of the in-memory search, and the run's folder goes at the end."""
    cfg, _, _, _, partitions, every = CASES[case]
    seen = []
    spilled = explore_spark(
        cfg, None, Limits(), partitions, sc=sc, checkpoint_every=every, spill_dir=str(tmp_path), progress=seen.append
    )
    assert_same(local_bfs(cfg), spilled)
    assert seen[-2]["visited_bytes"] >= 8 * spilled.distinct_states  # the level's states, on disk
    assert 0 < seen[-1]["worker_peak_mib"] < 4096
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "cfg, limits, reach",
    [
        (UNCLEAN, Limits(max_states=100), ()),
        (ONE_CRASH_RF2, Limits(max_states=1), ()),
        (ONE_CRASH_RF2, Limits(max_depth=7), ()),
        (ONE_CRASH_RF2, Limits(), ("ElrElection", "HighWatermarkAdvances")),
    ],
    ids=["max-states", "max-states-1", "max-depth", "reach"],
)
def test_limits_agree_with_local_bfs(sc, cfg, limits, reach):
    local = local_bfs(cfg, limits, reach)
    spark = explore_spark(cfg, None, limits, 3, sc=sc, stop_when_reached=frozenset(reach))
    assert_same(local, spark)
    assert spark.verdict == ("reached" if reach else "incomplete")


def test_time_limit_stops_incomplete(sc):
    r = explore_spark(ONE_CRASH_RF2, None, Limits(time_limit=1e-6), 2, sc=sc)
    assert (r.verdict, r.stop_reason, r.distinct_states) == ("incomplete", "time limit 1e-06s", 1)


def test_progress_reports_each_level(sc):
    seen = []
    r = explore_spark(ONE_CRASH_RF1, None, Limits(), 2, sc=sc, progress=seen.append)
    levels = [p for p in seen if not p["final"]]
    assert [p["level"] for p in levels] == [1, 2, 3, 4, 5, 6]  # the last level finds nothing new
    assert [p["new"] for p in levels] == [2, 3, 3, 3, 3, 0]
    assert levels[-1]["distinct"] == r.distinct_states == 15 and seen[-1]["final"]
    assert all(p["rate"] >= 0 and {"generated", "queue", "depth", "elapsed"} <= set(p) for p in seen)


# ---------------------------------------------------------------- the Spark plan


def test_one_shuffle_per_level_and_a_co_partitioned_union(sc):
    """The visited set is never shuffled: each level's union is partitioner-aware, with narrow
    dependencies on the previous level's cached parts themselves and on the successors'
    shuffle, and each level adds exactly one shuffle to the plan."""
    run = _SparkBFS(sc, ONE_CRASH_RF2, None, Limits(), 3, None, 0, None, frozenset(), ())
    parts = run._initial_level()
    try:
        for level in (1, 2, 3):
            previous = parts
            parts, _ = run._run_level(parts, run._task(level))
            union = parts._jrdd.rdd().dependencies().apply(0).rdd()
            assert union.getClass().getSimpleName() == "PartitionerAwareUnionRDD"
            deps = [union.dependencies().apply(i) for i in range(union.dependencies().size())]
            assert [d.getClass().getSimpleName() for d in deps] == ["OneToOneDependency"] * 2
            assert deps[0].rdd().id() == previous.id()
            shuffles = set(re.findall(r"ShuffledRDD\[(\d+)\]", parts.toDebugString().decode()))
            assert len(shuffles) == level + 1  # + the one that placed the initial states
    finally:
        run._cleanup()


def test_checkpoints_are_written_then_removed(sc, tmp_path):
    found = []
    r = explore_spark(
        ONE_CRASH_RF1,
        None,
        Limits(),
        2,
        sc=sc,
        checkpoint_dir=str(tmp_path),
        checkpoint_every=1,
        progress=lambda p: found.extend(tmp_path.rglob("rdd-*")),
    )
    assert r.distinct_states == 15
    assert found, "no checkpoint was written"
    assert list(tmp_path.iterdir()) == [], "the run's checkpoint folder was left behind"


def test_failed_tasks_are_retried_with_the_same_result(sc, tmp_path):
    """A Python worker fails once in an expand task and once in a merge task; Spark re-runs
    them, and the counts, verdict and trace are exactly those of a run without faults."""
    faults = (
        FaultInjection(level=3, partition=1, flag=str(tmp_path / "expand"), stage="expand"),
        FaultInjection(level=4, partition=0, flag=str(tmp_path / "merge"), stage="merge"),
    )
    spark = explore_spark(UNCLEAN, None, Limits(), 2, sc=sc, inject_faults=faults)
    assert [(tmp_path / f).read_text() for f in ("expand", "merge")] == ["1", "1"], "a fault did not fire"
    assert_same(local_bfs(UNCLEAN), spark)
    assert (spark.verdict, spark.violation.invariant, spark.violation.length) == ("violated", "NoCommittedDataLoss", 6)


def test_a_job_failing_every_retry_is_one_clean_error(sc, tmp_path):
    fault = FaultInjection(level=2, partition=0, flag=str(tmp_path / "flag"), stage="merge", attempts=3)
    with pytest.raises(SparkJobFailed) as e:
        explore_spark(ONE_CRASH_RF1, None, Limits(), 2, sc=sc, inject_faults=(fault,))
    assert str(e.value) == (
        "a Spark job of the search failed: RuntimeError: injected fault: level 2, partition 0, merge"
    )
    assert (tmp_path / "flag").read_text() == "3"  # local[2,3]: three attempts, then the job fails
    assert explore_spark(ONE_CRASH_RF1, None, Limits(), 2, sc=sc).distinct_states == 15  # the context lives on


# ---------------------------------------------------------------- Spark that cannot start


@pytest.mark.parametrize("master", ["nonsense", "bogus://nowhere", "local[two]", "spark://127.0.0.1:1"])
def test_bad_master_is_unavailable_at_once(master):
    began = time.monotonic()
    with pytest.raises(SparkUnavailable) as e:
        explore_spark(ONE_CRASH_RF1, master=master)
    assert time.monotonic() - began < 5
    assert "\n" not in str(e.value) and master in str(e.value)


def test_a_second_context_is_unavailable(sc):
    with pytest.raises(SparkUnavailable) as e:
        explore_spark(ONE_CRASH_RF1, master="local[1]")
    assert "\n" not in str(e.value)


_START = """
from kafkamc.checker.spark.search import SparkUnavailable, explore_spark
from kafkamc.spec.config import Config
try:
    explore_spark(Config(rf=1, minisr=1), master="local[1]", conf={conf!r})
except SparkUnavailable as e:
    print("unavailable:", e)
"""


@pytest.mark.parametrize(
    "conf, env, says",
    [
        ({"spark.driver.memory": "lots"}, {}, "Invalid maximum heap size"),
        ({}, {"JAVA_HOME": "/nonexistent"}, "Spark needs Java"),
    ],
    ids=["jvm-cannot-start", "no-java"],
)
def test_start_failure_is_one_line_without_java_noise(tmp_path, conf, env, says):
    """In a fresh process (the module's context already owns this one's JVM)."""
    p = subprocess.run(
        [sys.executable, "-c", _START.format(conf=conf)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env},
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("unavailable: ") and says in lines[0], p.stdout
    assert p.stderr == "", p.stderr
