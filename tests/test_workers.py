"""The multi-process engine (--workers) against the single-process one.

Where every invariant holds, the counts, depth, generated states, coverage and reachability
witnesses are the same; at a violation, the same invariant is reported with the very same
(shortest) trace. Only the counts at a violation may differ: a worker finishes its level.
"""

from __future__ import annotations

import json

import pytest
from helpers import CONTROLLED_SHUTDOWN_SMALL, REASSIGNMENT_SMALL
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import Limits, explore
from kafkamc.checker.engines.workers import explore_workers
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.protocol import preset

HOLDS = [
    dict(rf=2, minisr=2),
    dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1, symmetry=False),
    dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_fences=1),
    pytest.param(dict(rf=3, minisr=2, max_records=1), marks=pytest.mark.slow),
    # Issue 16: a broker pool with a reassignment, and a controlled shutdown with an election.
    REASSIGNMENT_SMALL,
    CONTROLLED_SHUTDOWN_SMALL,
]

VIOLATED = [
    dict(rf=2, minisr=1, unclean=True),
    dict(rf=3, minisr=2, acks="1", max_records=1),
    dict(rf=1, minisr=1),
    dict(rf=2, minisr=2, max_hard_crashes=2),
    dict(rf=2, minisr=1, max_records=1, max_clean_shutdowns=1, protocol=preset("0.9.0")),
]


def _both(kw, n=2):
    cfg = Config(**kw)
    return explore(FastModel(cfg), InvariantSuite(cfg)), explore_workers(FastModel(cfg), InvariantSuite(cfg), n)


@pytest.mark.parametrize("kw", HOLDS)
def test_same_counts_coverage_and_witnesses_where_it_holds(kw):
    one, two = _both(kw)
    assert two.verdict == one.verdict == "holds"
    assert (two.distinct_states, two.states_generated, two.depth) == (
        one.distinct_states,
        one.states_generated,
        one.depth,
    )
    assert two.coverage == one.coverage
    assert {k: v for k, v in two.reached.items()} == one.reached
    assert two.visited_bytes > 0


@pytest.mark.parametrize("kw", VIOLATED)
def test_same_violation_and_trace(kw):
    one, two = _both(kw)
    assert two.verdict == one.verdict == "violated"
    assert (two.violation.invariant, two.violation.kind) == (one.violation.invariant, one.violation.kind)
    assert two.violation.trace == one.violation.trace


def test_three_workers_agree_too():
    one, three = _both(dict(rf=2, minisr=2), n=3)
    assert (three.distinct_states, three.states_generated, three.depth) == (
        one.distinct_states,
        one.states_generated,
        one.depth,
    )


def test_limits_stop_between_or_within_levels():
    cfg = Config(rf=2, minisr=2)
    r = explore_workers(FastModel(cfg), InvariantSuite(cfg), 2, Limits(max_depth=5))
    assert (r.verdict, r.stop_reason, r.depth) == ("incomplete", "max depth 5", 5)
    r = explore_workers(FastModel(cfg), InvariantSuite(cfg), 2, Limits(max_states=100))
    assert r.verdict == "incomplete" and r.stop_reason == "max states 100" and r.distinct_states >= 100


def test_cli_reports_workers_and_the_same_counts(kafkamc_cli):
    args = ("check", "--rf", "2", "--minisr", "2", "--json", "--quiet")
    two = json.loads(kafkamc_cli(*args, "--workers", "2").stdout)
    one = json.loads(kafkamc_cli(*args, "--workers", "1").stdout)
    assert (two["workers"], one["workers"]) == (2, 1)
    assert (two["verdict"], two["distinct_states"], two["depth"]) == (
        one["verdict"],
        one["distinct_states"],
        one["depth"],
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (("--workers", "0"), "--workers must be at least 1"),
        (("--workers", "many"), "--workers expects a number or auto"),
        (("--workers", "2", "--strategy", "dfs"), "--workers runs breadth-first only"),
        (("--workers", "2", "--engine", "spark"), "--workers is for the local engine"),
    ],
)
def test_cli_bad_workers_is_one_line(kafkamc_cli, args, message):
    p = kafkamc_cli("check", "--rf", "1", "--minisr", "1", *args)
    assert p.returncode == 2 and message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_cli_dfs_runs_in_one_process_by_default(kafkamc_cli):
    p = kafkamc_cli("check", "--rf", "2", "--minisr", "2", "--strategy", "dfs", "--json", "--quiet")
    assert p.returncode == 0 and json.loads(p.stdout)["workers"] == 1


def test_a_worker_that_fails_while_the_other_waits_for_its_states_stops_the_run():
    """Worker 1 fails mid-level while worker 0 waits for the states it would send: the run stops
    with worker 1's error (it once hung, the coordinator waiting on worker 0's reply), and no
    worker is left."""
    import dataclasses
    import multiprocessing

    from kafkamc.checker.engines.workers import WorkerFailed
    from kafkamc.spec import alter_partition as ap
    from kafkamc.spec.next import NEXT

    # AlterPartition declared to spend ISR shrinks: at 0 the search leaves it out, and the
    # fast path's check of that declaration fails in the worker that meets an expansion first.
    actions = tuple(
        dataclasses.replace(a, bounds=(ap.ISR_SHRINKS,)) if a.type is ap.AlterPartition else a for a in NEXT
    )
    cfg = Config(rf=2, minisr=2, max_records=1, broker_count=3, max_reassignments=1, max_isr_shrinks=0)
    with pytest.raises(WorkerFailed, match="^worker 1: FastPathError: AlterPartition is declared unable to fire"):
        explore_workers(FastModel(cfg, actions=actions), InvariantSuite(cfg), 2)
    assert multiprocessing.active_children() == []
