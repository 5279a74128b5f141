"""KIP-966's trade-off, computed: availability against durability per election policy.

For each RF x min.insync.replicas, with ELR on and off and unclean election on and off, two
answers from the checker:
- offline: can the partition stay without a leader forever while a replica of it is up,
  registered and unfenced (the liveness property EventuallyAvailable is violated)?
- loses: can committed data be lost (the invariant NoCommittedDataLoss is violated)?

The bounds are small and the same for every cell: one record, one hard crash, one clean
shutdown, up to RF - 1 ISR shrinks. A "no" holds within them; a "yes" comes with a
counterexample `kafkamc check` reproduces with the cell's flags.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkamc.checker.engines.search import Limits
from kafkamc.jobs.run import run_check
from kafkamc.spec.config import Config
from kafkamc.spec.protocol import Protocol


@dataclass
class TradeoffCell:
    rf: int
    minisr: int
    elr: bool
    unclean: bool
    offline: bool | None  # None: the search hit a limit
    loses: bool | None
    states: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def flags(self) -> str:
        """The `kafkamc check` flags that reproduce the cell."""
        return (
            f"--rf {self.rf} --minisr {self.minisr} --max-records 1 --max-hard-crashes 1 "
            f"--max-clean-shutdowns 1 --max-isr-shrinks {self.rf - 1} --rule elr={'on' if self.elr else 'off'}"
            + (" --unclean" if self.unclean else "")
        )


def cell_config(rf: int, minisr: int, elr: bool, unclean: bool, protocol: Protocol) -> Config:
    return Config(
        rf=rf,
        minisr=minisr,
        unclean=unclean,
        protocol=protocol.with_rules(elr="on" if elr else "off"),
        max_records=1,
        max_hard_crashes=1,
        max_clean_shutdowns=1,
        max_isr_shrinks=rf - 1,
    )


def _violated(cfg: Config, name: str, limits: Limits) -> tuple[bool | None, int]:
    run = run_check(cfg, limits=limits, invariants=[name])
    verdict = run.result.verdict
    return (None if verdict == "incomplete" else verdict == "violated"), run.result.distinct_states


def tradeoff_table(
    rfs=(2, 3),
    protocol: Protocol = Protocol(),
    limits: Limits = Limits(),
    on_cell: Callable[[TradeoffCell], None] = lambda c: None,
) -> list[TradeoffCell]:
    cells = []
    for rf in rfs:
        for m in range(1, rf + 1):
            for elr in (False, True):
                for unclean in (False, True):
                    cfg = cell_config(rf, m, elr, unclean, protocol)
                    offline, s1 = _violated(cfg, "EventuallyAvailable", limits)
                    loses, s2 = _violated(cfg, "NoCommittedDataLoss", limits)
                    cell = TradeoffCell(rf, m, elr, unclean, offline, loses, s1 + s2)
                    on_cell(cell)
                    cells.append(cell)
    return cells
