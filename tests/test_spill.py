"""The visited set spilled to disk as sorted runs (checker/store/spill.py)."""

from __future__ import annotations

import random

import pytest
from kafkamc.checker.store.spill import SpilledRuns


def test_runs_answer_membership_like_a_set(tmp_path):
    rng = random.Random(7)
    runs, kept = SpilledRuns(str(tmp_path), head=(5, 9)), {5, 9}
    for size in (1, 3, 10, 200, 7, 70000, 2, 150000):
        batch = {rng.getrandbits(64) for _ in range(size)} - kept
        asked = list(batch)[:50] + list(kept)[:50] + [rng.getrandbits(64) for _ in range(50)]
        assert runs.present(asked) == kept.intersection(asked)
        runs = runs.with_run(batch)
        kept |= batch
        assert len(runs) == len(kept)
    assert runs.present(kept) == kept
    assert 0 not in runs and 5 in runs
    # Merged pairwise as a binary counter: few runs, sizes falling.
    sizes = [n for _, n in runs.runs]
    assert len(sizes) <= 4 and sizes == sorted(sizes, reverse=True)
    assert {p.name for p in tmp_path.iterdir()} >= {name for name, _ in runs.runs}


def test_a_value_never_changes_when_runs_are_added(tmp_path):
    """A task that Spark runs again reads the files the first attempt read."""
    first = SpilledRuns(str(tmp_path)).with_run([3, 1, 2])
    second = first.with_run([10, 11, 12, 13])  # merges into one new file
    assert first.present([1, 2, 3, 10]) == {1, 2, 3}
    assert second.present([1, 2, 3, 10, 99]) == {1, 2, 3, 10}
    assert len(second.runs) == 1 and second.runs[0][0] != first.runs[0][0]


def test_a_lost_run_is_one_clear_error(tmp_path):
    runs = SpilledRuns(str(tmp_path)).with_run([1, 2])
    (tmp_path / runs.runs[0][0]).unlink()
    with pytest.raises(RuntimeError, match="a spilled run of the visited set is gone"):
        runs.present([1])
