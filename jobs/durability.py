"""The durability arithmetic of RF and min.insync.replicas, computed by the checker.

For each (RF, min ISR) two numbers, each the largest k for which the model shows it:
- writes: with k brokers down for good (lost by clean shutdown, so no data goes with them;
  a restart may never come) and the rest healthy, the partition eventually accepts and
  acknowledges every acks=all write: the liveness property EventuallyWritable holds under the
  fairness of invariants/liveness.py (no follower falls behind: no ISR shrinks);
- durable: no acknowledged write is lost when k brokers crash hard and lose their unflushed
  page cache (AckedWriteDurability holds in every reachable state).
For durability, followers may drop out of the ISR by lag (up to RF - 1 shrinks) as they do
in production.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkamc.checker.engines.explorer import Limits
from kafkamc.jobs.run import run_check
from kafkamc.spec.config import Config
from kafkamc.spec.protocol import Protocol


@dataclass
class Cell:
    rf: int
    minisr: int
    writes: int | None  # None: a search hit the limit before deciding
    durable: int | None
    states: int  # distinct states explored for this cell, all runs
    seed_writes: int  # the seed document's formula: max(RF - M, 0), M capped at RF
    seed_durable: int  # the seed table's rows: min(M, RF) - 1

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _base(rf: int, minisr: int, protocol: Protocol) -> dict:
    return dict(
        rf=rf,
        minisr=minisr,
        protocol=protocol,
        track_down=True,
        max_records=1,
        max_isr_shrinks=rf - 1,
        max_clean_shutdowns=0,
        max_hard_crashes=0,
        max_fences=0,
    )


def _largest_k(
    rf: int, minisr: int, protocol: Protocol, limits: Limits, bound: str, passes: str, base=None, **check
) -> tuple[int | None, int]:
    """The largest k (from 0) for which run_check with `bound` = k ends in verdict `passes`;
    None when a search hit a limit first. Also the distinct states explored in all."""
    states, best = 0, 0
    for k in range(1, rf + 1):
        cfg = Config(**{**(base or _base(rf, minisr, protocol)), bound: k})
        kw = {name: (value(k) if callable(value) else value) for name, value in check.items()}
        run = run_check(cfg, limits=limits, **kw)
        states += run.result.distinct_states
        if run.result.verdict == "incomplete":
            return None, states
        if run.result.verdict != passes:
            break
        best = k
    return best, states


def keeps_writing(rf: int, minisr: int, protocol: Protocol, limits: Limits) -> tuple[int | None, int]:
    healthy = dict(_base(rf, minisr, protocol), max_isr_shrinks=0)  # the rest healthy: no follower falls behind
    return _largest_k(
        rf, minisr, protocol, limits, "max_clean_shutdowns", "holds", base=healthy, invariants=["EventuallyWritable"]
    )


def loses_nothing(rf: int, minisr: int, protocol: Protocol, limits: Limits) -> tuple[int | None, int]:
    return _largest_k(rf, minisr, protocol, limits, "max_hard_crashes", "holds", invariants=["AckedWriteDurability"])


def durability_table(
    rfs=(1, 2, 3),
    minisrs=(1, 2, 3),
    protocol: Protocol = Protocol(),
    limits: Limits = Limits(),
    on_cell: Callable[[Cell], None] = lambda c: None,
) -> list[Cell]:
    cells = []
    for rf in rfs:
        for m in minisrs:
            writes, s1 = keeps_writing(rf, m, protocol, limits)
            durable, s2 = loses_nothing(rf, m, protocol, limits)
            eff = min(m, rf)
            cell = Cell(rf, m, writes, durable, s1 + s2, max(rf - eff, 0), eff - 1)
            on_cell(cell)
            cells.append(cell)
    return cells
