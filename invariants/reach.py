"""Reachability ("sometimes") properties: events a passing check should have seen happen.

A safety verdict is only as good as the behaviours the search covered. Each property is
a Z3 formula over one step (the views P before and V after); the explorer records the
first step that makes it true, which under BFS is a shortest witness. `expected` says
when a configuration should reach it: a pass that never did is reported as suspect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import z3
from kafkamc.invariants.view import View
from kafkamc.spec.config import Config


@dataclass(frozen=True)
class Reachable:
    name: str
    meaning: str
    build: Callable[[Config, View, View], z3.BoolRef]
    expected: Callable[[Config], bool]


def hw_advances(cfg: Config, P: View, V: View) -> z3.BoolRef:
    return V.hw_seen > P.hw_seen


def elr_election(cfg: Config, P: View, V: View) -> z3.BoolRef:
    # A clean election from the ELR; a last-known-leader election (RECOVERING) is not one.
    return z3.Or([z3.And(P.c_leader != b, V.c_leader == b, P.in_elr[b], z3.Not(V.c_recovering)) for b in cfg.brokers])


def recovering_election(cfg: Config, P: View, V: View) -> z3.BoolRef:
    return z3.And(V.c_recovering, V.c_epoch > P.c_epoch)


def recovered(cfg: Config, P: View, V: View) -> z3.BoolRef:
    return z3.And(P.c_recovering, z3.Not(V.c_recovering))


def healthy_follower_shrunk(cfg: Config, P: View, V: View) -> z3.BoolRef:
    return z3.Or(
        [
            z3.And(P.in_isr[f], z3.Not(V.in_isr[f]), P.alive[f], V.alive[f], V.registered[f], z3.Not(P.stalled[f]))
            for f in cfg.brokers
        ]
    )


def acked_with_down(k: int) -> Callable[[Config, View, View], z3.BoolRef]:
    def build(cfg: Config, P: View, V: View) -> z3.BoolRef:
        return z3.And(P.acked_down < k, V.acked_down >= k)

    return build


def _crashes(cfg: Config) -> int:
    return cfg.max_clean_shutdowns + cfg.max_hard_crashes + cfg.max_fences


def catalog(cfg: Config) -> tuple[Reachable, ...]:
    elr = cfg.rule("elr") == "on"
    props = [
        Reachable(
            "HighWatermarkAdvances", "consumers see the HW move forward", hw_advances, lambda c: c.max_records > 0
        ),
        Reachable(
            "ElrElection",
            "a replica from the ELR is elected leader (KIP-966)",
            elr_election,
            lambda c: (
                elr
                and c.effective_minisr >= 2
                and not c.unclean
                and _crashes(c) >= 1
                and c.max_isr_shrinks + _crashes(c) >= 3
            ),
        ),
        Reachable(
            "RecoveringElection",
            "an unclean or last-known-leader election leaves the partition RECOVERING",
            recovering_election,
            lambda c: (
                _crashes(c) >= 2
                and _crashes(c) + c.max_isr_shrinks >= c.rf
                and (c.unclean or (elr and c.max_hard_crashes >= 1))
            ),
        ),
        Reachable(
            "Recovered", "a RECOVERING partition recovers when its leader expands the ISR", recovered, lambda c: False
        ),
        Reachable(
            "HealthyFollowerShrunk",
            "a follower that is alive, registered and not stalled is removed from the ISR",
            healthy_follower_shrunk,
            lambda c: False,
        ),
    ]
    for k in range(1, cfg.rf + 1 if cfg.track_down else 1):
        props.append(
            Reachable(
                f"AckedWith{k}Down",
                f"an acks=all write is appended and acknowledged while {k} broker(s) are down",
                acked_with_down(k),
                lambda c: False,
            )
        )
    return tuple(props)
