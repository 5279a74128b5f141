"""The step caches' budget (checker/cache/budget.py): which entries it frees, and that freeing
them never changes what the search finds."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from kafkamc.checker.cache.budget import CacheBudget, entries_for, share_of
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.cache.outcomes import StepCache
from kafkamc.checker.engines.explorer import explore
from kafkamc.checker.engines.workers import explore_workers
from kafkamc.checker.store.memory import map_large_blocks
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config


def _fill(cache: StepCache, keys: range, hits: int = 0) -> None:
    """One entry per key (a miss, then stored), each looked up `hits` times more."""
    for k in keys:
        cache.lookups += 1 + hits
        cache.runs += 1
        cache.put([k], ("outcome", k), {0})


def test_a_sweep_empties_a_cache_that_hardly_hits_and_skips_it_for_one_period():
    budget = CacheBudget(1 << 20)  # the first sweep after 262,144 entries: these sweeps are by hand
    useless, useful, busy = (StepCache(budget=budget) for _ in range(3))
    _fill(useless, range(1000))
    _fill(useful, range(1000), hits=1)
    _fill(busy, range(2000), hits=4)
    budget.sweep()  # under the budget: only the cache that hit on fewer than 1 lookup in 20 goes
    assert (useless.size(), useful.size(), busy.size()) == (0, 1000, 2000)
    assert useless.skip and budget.emptied == 1 and budget.entries == 3000
    _fill(useless, range(500))  # it still runs its steps, and stores nothing
    assert useless.size() == 0 and budget.entries == 3000
    budget.sweep()
    assert not useless.skip  # tried again in the next period
    _fill(useless, range(500))
    assert useless.size() == 500


def test_past_the_budget_the_caches_with_fewest_hits_per_entry_lose_their_older_half_first():
    budget = CacheBudget(1 << 20)
    useful, busy = StepCache(budget=budget), StepCache(budget=budget)
    _fill(useful, range(1000), hits=1)
    _fill(busy, range(2000), hits=4)
    budget.limit = 2000  # 3,000 held: down to half the budget, 1,000
    budget.sweep()
    # Round one halves useful (1 hit an entry), then busy (4); round two the same: 250 + 500.
    assert (useful.size(), busy.size()) == (250, 500)
    assert next(iter(useful.store)) == 750  # the newer entries stay


def test_a_dict_cache_drops_its_older_half_past_its_share():
    from kafkamc.checker.cache.budget import store

    cache: dict = {}
    for k in range(10):
        store(cache, k, k, limit=4)
    assert list(cache) == [6, 7, 8, 9]  # 0-3 filled, 2-4, 4-6, 6-9 (each halving drops the oldest)


CONFIGS = [
    (dict(rf=2, minisr=2), 9291),
    (dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1), 4774),
    pytest.param(dict(rf=3, minisr=2), 541729, marks=pytest.mark.slow),  # the default check
]


@pytest.mark.parametrize("settings, pinned", CONFIGS)
def test_a_tiny_budget_finds_the_same_states(settings, pinned):
    """The smallest budget (1,024 entries, swept every 1,024) empties and halves caches all the
    search long: the states found, depth and verdict are those of the default budget."""
    cfg = Config(**settings).validated()
    full = explore(FastModel(cfg), InvariantSuite(cfg))
    tiny = FastModel(cfg, cache_entries=entries_for(0))
    small = explore(tiny, InvariantSuite(cfg))
    # At least 2 sweeps (4,774 states: 2, 9,291: 5): the core keeps a Fetch's whole outcome
    # itself, asks Python's caches for its halves only, and holds nine tenths of the budget
    # (checker/cache/budget.py PY_SHARE), so fewer entries reach them than before.
    assert tiny.fast.budget.sweeps >= 2 and tiny.fast.budget.emptied > 0
    assert (small.verdict, small.distinct_states, small.depth) == (full.verdict, full.distinct_states, full.depth)
    assert full.distinct_states == pinned  # tests/test_pinned.py
    two = explore_workers(FastModel(cfg, cache_entries=entries_for(0)), InvariantSuite(cfg), 2)
    assert (two.verdict, two.distinct_states, two.depth) == (full.verdict, full.distinct_states, full.depth)


def test_a_small_budget_on_the_command_line_finds_the_pinned_count():
    """--cache-mib 0.5 (749 entries, so the 1,024 floor, swept all along as above)."""
    from helpers import run_kafkamc

    p = run_kafkamc("check", "--rf", "2", "--minisr", "2", "--cache-mib", "0.5", "--workers", "1", "--json", "--quiet")
    assert p.returncode == 0 and '"distinct_states": 9291' in p.stdout


@pytest.mark.skipif(not Path("/proc/self/maps").exists() or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_maps_the_large_blocks_a_search_frees():
    """checker/store/memory.py map_large_blocks: glibc takes the fixed mmap threshold (mallopt
    says 1), so a table that doubles gives its old copy back instead of a hole in the heap."""
    assert map_large_blocks() is True


@pytest.mark.parametrize("workers,entries", [(1, 766_958), (2, 383_479)])
def test_the_workers_share_one_budget(monkeypatch, workers, entries):
    """--cache-mib is the run's: two workers at the default 512 MiB hold 256 MiB of entries each."""
    import kafkamc.jobs.run as run

    asked = []

    def recording(mib, processes):
        asked.append(share_of(mib, processes))
        return asked[-1]

    monkeypatch.setattr(run, "share_of", recording)
    result = run.run_check(Config(rf=2, minisr=2), workers=workers).result
    assert (asked, result.distinct_states) == ([entries], 9_291)


def test_a_budget_that_grows_follows_the_states_held_past_its_floor():
    """CacheBudget.follow: 20 bytes a state held once that passes the floor by an eighth; the
    core's share in bytes with it, this process's tenth in entries; an explicit cap never moves."""
    budget = CacheBudget(entries_for(256), grows=True)
    assert budget.share_with_core() == (241_591_770, 383_479) and budget.limit == 38_347
    assert budget.follow(15_000_000) is None and budget.limit == 38_347  # 428,571 entries: not an eighth more
    assert budget.follow(16_000_000) == 287_999_460 and (budget.total, budget.limit) == (457_142, 45_714)
    assert budget.follow(17_000_000) is None and budget.total == 457_142
    assert budget.share_with_core() == (287_999_460, 383_479)  # the verdicts' count stays as set
    alone = CacheBudget(1024, grows=True)  # no core: all of it here
    assert alone.follow(100_000) is None and (alone.limit, alone.dict_limit) == (2_857, 1024)
    capped = CacheBudget(entries_for(256))
    assert capped.follow(10**9) is None and capped.limit == entries_for(256)


@pytest.mark.parametrize("mib,grows", [(None, True), (512, False)])
def test_only_the_default_budget_grows(monkeypatch, mib, grows):
    """Without --cache-mib the budget grows with the states; a --cache-mib given is a cap."""
    import kafkamc.jobs.run as run

    made: list = []

    def recording(*args, **kwargs):
        made.append(FastModel(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(run, "FastModel", recording)
    result = run.run_check(Config(rf=2, minisr=2), workers=1, cache_mib=mib).result
    assert (made[0].fast.budget.grows, result.distinct_states) == (grows, 9_291)
