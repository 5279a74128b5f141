"""The liveness graph recorded by the safety search (checker/liveness/graph.py) is the graph the second
search builds (liveness.build_graph), array for array, in one process and with workers; and
`kafkamc check --liveness` takes it from there."""

from __future__ import annotations

import json

import pytest
from helpers import run_kafkamc
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.checker.engines.search import Limits
from kafkamc.checker.engines.workers import explore_workers
from kafkamc.checker.liveness.check import build_graph
from kafkamc.checker.liveness.fairness import find_lasso
from kafkamc.checker.liveness.graph import Recording
from kafkamc.invariants.liveness import LivenessSuite
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.protocol import PRESETS

SMALL = dict(rf=2, minisr=1, max_records=1)
FIELDS = ("offsets", "targets", "labels", "preds", "initial", "actions", "classes", "depth")
OLD_10706 = PRESETS["4.1.0"].with_rules(epoch_cache_truncation="log_only")
CONFIGS = {
    "small": SMALL,
    "fence": dict(SMALL, max_fences=1),
    # The configurations of test_liveness's lassos: ELR offline, KAFKA-10706.
    "kafka-10706": dict(SMALL, max_fences=1, protocol=OLD_10706),
    "rf3": dict(rf=3, minisr=2, max_records=1, max_hard_crashes=0),
}


def _recorded(cfg: Config, suite: LivenessSuite, workers: int):
    """The graph the safety search records, with no invariant to stop it."""
    model, checks, recording = FastModel(cfg), InvariantSuite(cfg, []), Recording(suite)
    if workers == 1:
        result = explore(model, checks, recording=recording)
    else:
        result = explore_workers(model, checks, workers, recording=recording)
    assert result.verdict == "holds"
    return recording.graph(model)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_recorded_graph_is_the_built_graph(name, workers):
    cfg = Config(**CONFIGS[name]).validated()
    suite = LivenessSuite(cfg, None if name != "kafka-10706" else ["FollowerEventuallyInSync"])
    built, stop = build_graph(FastModel(cfg), suite)
    assert stop is None
    recorded = _recorded(cfg, suite, workers)
    for f in FIELDS:
        assert getattr(recorded, f) == getattr(built, f), f
    lassos = [find_lasso(recorded, k, p.form) for k, (p, _) in enumerate(suite.obligations)]
    assert lassos == [find_lasso(built, k, p.form) for k, (p, _) in enumerate(suite.obligations)]
    if name == "kafka-10706":  # the lasso is the same either way, and there is one
        assert any(lasso is not None for lasso in lassos)


def test_a_search_cut_short_records_no_graph():
    cfg = Config(**SMALL, max_fences=1).validated()
    model, recording = FastModel(cfg), Recording(LivenessSuite(cfg))
    result = explore(model, InvariantSuite(cfg, []), limits=Limits(max_states=200), recording=recording)
    assert result.stop_reason == "max states 200"
    assert recording.graph(model) is None


def test_the_graph_is_recorded_breadth_first_only():
    cfg = Config(**SMALL).validated()
    with pytest.raises(ValueError, match="breadth-first"):
        explore(FastModel(cfg), None, "dfs", recording=Recording(LivenessSuite(cfg)))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_check_liveness_takes_the_graph_from_the_safety_search(workers):
    # rf 2, min ISR 2, one record: the safety search holds, and with it every promise. The
    # counts are build_graph's for this configuration (test_the_recorded_graph_is_the_built_graph).
    args = ["check", "--rf", "2", "--minisr", "2", "--max-records", "1", "--liveness", "--json", "--workers", workers]
    p = run_kafkamc(*args)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    live = out["liveness"]
    assert (out["distinct_states"], live["states"], live["edges"], live["verdict"]) == (2231, 2231, 5753, "holds")
    assert set(live["verdicts"].values()) == {"holds"} and live["graph"] == "recorded by the search"


def test_a_broker_pool_builds_its_graph_after_the_search():
    # Liveness turns symmetry off with a broker pool (liveness.symmetry_for_liveness): the safety
    # search's reduced graph is not the one checked, so it is built afterwards, 648 states
    # against the search's 108.
    args = ["check", "--rf", "2", "--minisr", "2", "--brokers", "3", "--max-records", "1", "--max-hard-crashes", "0"]
    p = run_kafkamc(*args, "--liveness", "--json", "--quiet")
    out = json.loads(p.stdout)
    live = out["liveness"]
    assert (out["distinct_states"], live["states"], live["graph"]) == (108, 648, "built after the search")
    text = run_kafkamc(*args, "--liveness").stdout
    assert "liveness graph: 648 states" in text and "built and analysed in" in text
