"""The native core (native/src/search.rs, checker/core/native_search.py) against the Python engine.

Every search that runs on the core must give exactly what the Python engine gives: verdict,
distinct and generated states, depth, every action's count, the same shortest path and the
same reachability witnesses. The pinned tests (tests/test_pinned.py, test_protocols.py's bug
zoo, test_findings.py) run on the core by default; these compare it with the Python engine
run by run, and pin which searches fall back and what the summary says then.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.core import native
from kafkamc.checker.engines.explorer import explore
from kafkamc.checker.engines.search import Limits
from kafkamc.checker.engines.workers import explore_workers
from kafkamc.cli.main import cli, main
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.protocol import Protocol, preset
from test_findings import FINDING, FIX
from test_protocols import ZOO, _with

pytestmark = pytest.mark.skipif(native.load() is None, reason="the native core is not built")

SEARCHES = [
    dict(rf=2, minisr=1, max_records=1),
    dict(rf=2, minisr=2),
    dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1),
    dict(rf=3, minisr=2, acks="1", max_records=1),
    dict(rf=2, minisr=1, unclean=True, max_clean_shutdowns=1, max_fences=1, max_records=1),
    dict(rf=2, minisr=1, max_records=1, max_hard_crashes=2, symmetry=False),
    dict(rf=3, minisr=2, max_records=1, max_controlled_shutdowns=1, max_leader_elections=1, max_hard_crashes=0),
    dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_fences=1),
    dict(FINDING),
    dict(FINDING, protocol=FIX),
    dict(rf=2, minisr=1, max_records=1, protocol=preset("4.0.0")),
    # Issue 41's restart steps: 307,927 states (228,951 before the shrink was in flight under
    # kraft_steps: prepared, then delivered at a later step), as the reference engine gives.
    dict(
        rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, protocol=Protocol().with_rules(incarnations="kraft_steps")
    ),
    dict(rf=2, minisr=1, max_records=1, protocol=Protocol().with_rules(incarnations="kraft_steps")),
] + [dict(row[1], protocol=_with(row[0])) for row in ZOO if not hasattr(row, "marks")]  # the zoo's fast rows


def _both(kw: dict, **options):
    cfg = Config(**kw)
    python = explore(FastModel(cfg), InvariantSuite(cfg), engine="python", **options)
    core = explore(FastModel(cfg), InvariantSuite(cfg), **options)
    return python, core


def _same(python, core) -> None:
    assert (python.core, core.core) == ("python", "native")
    for field in ("verdict", "distinct_states", "states_generated", "depth", "stop_reason", "coverage"):
        assert getattr(core, field) == getattr(python, field), field
    assert core.violation == python.violation  # its invariant, kind and the whole trace
    assert core.reached == python.reached  # every witness trace


@pytest.mark.parametrize("kw", SEARCHES, ids=lambda kw: " ".join(f"{k}={v}" for k, v in kw.items())[:80])
def test_the_core_gives_what_the_python_engine_gives(kw):
    _same(*_both(kw))


WORKER_SEARCHES = [SEARCHES[i] for i in (0, 3, 4, 6, 8)] + [dict(rf=3, minisr=2, max_records=1)]


@pytest.mark.parametrize("kw", WORKER_SEARCHES, ids=lambda kw: " ".join(f"{k}={v}" for k, v in kw.items())[:80])
def test_two_workers_on_the_core_give_what_two_python_workers_give(kw):
    """Each worker expands its part of a level on a core of its own (expand_native), which
    holds that worker's visited set: the level's states, keys and findings are the same."""
    cfg = Config(**kw)
    python = explore_workers(FastModel(cfg), InvariantSuite(cfg), 2, engine="python")
    core = explore_workers(FastModel(cfg), InvariantSuite(cfg), 2)
    _same(python, core)


def test_the_core_stops_where_the_python_engine_stops_at_a_limit_and_a_target():
    """A level is not finished first: both stop after the state that reaches the bound."""
    kw = dict(rf=3, minisr=2, max_records=1)
    _same(*_both(kw, limits=Limits(max_states=5000)))
    _same(*_both(kw, stop_when_reached=frozenset({"ElrElection"})))


def test_a_violation_at_the_state_cap_reports_the_cap_as_the_python_engine_does():
    """The core runs the loop over states (native/src/search/run.rs); a violation found while a
    state is expanded still reads the cap at that state's end, as the Python engine does."""
    whole = _both(FINDING)[1]
    assert whole.verdict == "violated" and whole.stop_reason is None
    python, core = _both(FINDING, limits=Limits(max_states=whole.distinct_states))
    _same(python, core)
    assert (core.verdict, core.stop_reason) == ("violated", f"max states {whole.distinct_states}")


def test_a_core_over_its_budget_empties_its_caches_and_finds_the_same():
    """The core's caches are bounded by its share of the caches' budget, in bytes: past it,
    between two states, it empties its step and candidate caches and refills them from the
    Python ones."""
    cfg = Config(rf=3, minisr=2, max_records=1)
    python = explore(FastModel(cfg, cache_entries=1024), InvariantSuite(cfg), engine="python")
    model = FastModel(cfg, cache_entries=1024)
    core = explore(model, InvariantSuite(cfg))
    _same(python, core)
    # The core got nine tenths of 1,024 entries at 700 bytes; Python kept the floor of 1,024.
    assert model.fast.budget.share_with_core() == (645120, 1024) and model.fast.budget.limit == 1024
    assert model.fast.budget.core_forgets > 0
    # Its tables as it closed, in bytes claimed: the observations kept to a quarter of its share.
    tables = model.fast.budget.core_tables
    names = "visited paths queue level_kept frontier parcels steps candidates observations outcomes verdicts"
    assert [t.replace(" ", "_") for t in tables] == [*names.split(), "quiet_verdicts", "components"]
    assert 0 < tables["observations"] <= 645120 // 4 and tables["level kept"] == tables["parcels"] == 0


def test_searches_the_core_does_not_serve_run_on_the_python_engine_and_say_why():
    cfg = Config(rf=2, minisr=1, max_records=1)
    dfs = explore(FastModel(cfg), InvariantSuite(cfg), "dfs")
    assert (dfs.core, dfs.core_note) == (
        "python",
        "the native core does not serve depth-first search; using the Python engine",
    )
    verify = explore(FastModel(cfg, verify=0.5), InvariantSuite(cfg))
    assert verify.core_note == "the native core does not serve --verify; using the Python engine"


ARGS = ["check", "--rf", "2", "--minisr", "2", "--max-records", "1", "--workers", "1", "--quiet"]


def test_the_summary_says_when_the_python_engine_ran_in_place_of_the_core(monkeypatch):
    runner = CliRunner()
    assert json.loads(runner.invoke(cli, [*ARGS, "--json"]).output)["core"] == "native"
    assert "native core" not in runner.invoke(cli, ARGS).output  # nothing to say when the core ran
    monkeypatch.setattr(native, "_import", lambda: (None, "the native core is not built (no Rust)"))
    out = runner.invoke(cli, ARGS).output.splitlines()
    assert "the native core is not built (no Rust); using the Python engine" in out
    assert json.loads(runner.invoke(cli, [*ARGS, "--engine", "python", "--json"]).output)["core"] == "python"


def test_a_panic_in_the_core_is_one_error_line_and_exit_2(monkeypatch, capsys):
    from kafkamc.checker.core import native_search

    def panics(*args, **kwargs):
        native.load()._panic("a broken invariant of the core")

    monkeypatch.setattr(native_search, "_explore", panics)
    with pytest.raises(SystemExit) as stop:
        main(ARGS[:])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        "kafkamc: error: the native core failed (a broken invariant of the core); --engine python runs without it"
    ]


def test_the_core_follows_a_budget_that_grows():
    """Attached.follow: the core's limit moves with the budget (CacheBudget.follow), and only
    when the budget does."""
    from kafkamc.checker.core.native_search import Attached

    cfg = Config(rf=2, minisr=2)
    model = FastModel(cfg, cache_entries=1024, grows=True)
    attached = Attached(native.load(), model, None, InvariantSuite(cfg), keep=False)
    try:
        assert attached.core.limit == 645_120
        attached.follow(40_000)  # 1,142 entries: not an eighth more than 1,024
        assert attached.core.limit == 645_120
        attached.follow(70_000)
        assert attached.core.limit == 2_000 * 630 == model.fast.budget.core_limit
    finally:
        attached.close()
