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
from kafkamc.spec.alter_partition import ISR_SHRINKS
from kafkamc.spec.broker_lifecycle import CRASHES, FENCES, UNCLEAN_CRASHES
from kafkamc.spec.config import Config
from kafkamc.spec.controlled_shutdown import CONTROLLED_SHUTDOWNS
from kafkamc.spec.produce import RECORDS
from kafkamc.spec.reassignment import CANCELS, REASSIGNMENTS

# Each bound is read from its declaration with Config.bound (its default when not given): CRASHES is
# --max-clean-shutdowns and UNCLEAN_CRASHES --max-hard-crashes (the counters kept their old names).


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
            z3.And(
                P.in_isr[f],
                z3.Not(V.in_isr[f]),
                V.replica[f],  # a completed reassignment removes replicas from the ISR on purpose
                P.alive[f],
                V.alive[f],
                V.registered[f],
                z3.Not(V.shutting[f]),  # a controlled shutdown leaves the ISR on purpose
                z3.Not(P.stalled[f]),
            )
            for f in cfg.brokers
        ]
    )


def reassignment_completed(cfg: Config, P: View, V: View) -> z3.BoolRef:
    # Completed, not cancelled: the replicas it was removing have left the set.
    return z3.And(
        P.c_reassigning,
        z3.Not(V.c_reassigning),
        *[z3.Implies(P.removing[b], z3.Not(V.replica[b])) for b in cfg.brokers],
    )


def reassignment_cancelled(cfg: Config, P: View, V: View) -> z3.BoolRef:
    # Reverted: the replicas it was adding have left the set, the ones it was removing stay.
    return z3.And(
        P.c_reassigning,
        z3.Not(V.c_reassigning),
        *[z3.Implies(P.adding[b], z3.Not(V.replica[b])) for b in cfg.brokers],
        *[z3.Implies(P.removing[b], V.replica[b]) for b in cfg.brokers],
    )


def acked_with_down(k: int) -> Callable[[Config, View, View], z3.BoolRef]:
    def build(cfg: Config, P: View, V: View) -> z3.BoolRef:
        return z3.And(P.acked_down < k, V.acked_down >= k)

    return build


# When each property is expected: exactly the configurations whose exhaustive search reaches it
# (tests/test_reach_expected.py measures both directions). Preferred elections
# (--max-leader-elections) change none of them: they only move leadership inside the ISR. A
# controlled shutdown counts as a way out of the ISR that leaves the replica eligible.


def _outages(c: Config) -> int:
    """Brokers the controller may fence: each clean shutdown and hard crash ends in a session
    timeout, each fence is one, each controlled shutdown ends in one; every one takes a replica
    out of the ISR, the leader included."""
    return c.bound(CRASHES) + c.bound(UNCLEAN_CRASHES) + c.bound(FENCES) + c.bound(CONTROLLED_SHUTDOWNS)


def _clean_exits(c: Config) -> int:
    """Ways out of the ISR that leave the replica eligible (clean, or alive): clean and
    controlled shutdowns and fences."""
    return c.bound(CRASHES) + c.bound(FENCES) + c.bound(CONTROLLED_SHUTDOWNS)


def _can_empty(c: Config) -> bool:
    """Whether every replica can leave the ISR: rf removals, of which the last a fence (a
    leader never shrinks itself away; an ISR shrink removes only followers)."""
    return _outages(c) >= 1 and c.bound(ISR_SHRINKS) + _outages(c) >= c.rf


def hw_expected(c: Config) -> bool:
    """One record is enough: the full initial ISR is at min.insync.replicas."""
    return c.bound(RECORDS) > 0


def elr_election_expected(c: Config) -> bool:
    """KIP-966 elects from the ELR only once the ISR is empty. Either a replica that left the
    ISR below min ISR (so min ISR >= 2) is still registered when the last one is fenced: it
    left by a shrink, a fence or a clean shutdown, not a hard crash (re-registering after one
    drops it from the ELR, KAFKA-15586). Or the last member itself comes back after a fence
    or a clean shutdown; with unclean election on, only if no other replica was registered
    when the ISR emptied (else one is elected uncleanly and the ELR cleared)."""
    if c.rule("elr") != "on" or not _can_empty(c):
        return False
    registered_elr = c.effective_minisr >= 2 and c.bound(ISR_SHRINKS) + _clean_exits(c) >= 1
    returning = _clean_exits(c) >= 1 and (not c.unclean or _outages(c) >= c.rf)
    return registered_elr or returning


def recovering_election_expected(c: Config) -> bool:
    """Without ELR the ISR never empties: an unclean election needs its members all fenced and
    another replica registered. With ELR, the min ISR replicas that leave the ISR last all enter
    the ELR; the last known leader is elected (KAFKA-15585) once each of them has re-registered
    after a hard crash, the one way out of the ELR. An unclean election instead needs them all
    fenced while another replica is registered: one that left the ISR above min ISR, or, when
    rf = min ISR, one out of the ELR after a hard crash."""
    if not _can_empty(c):
        return False
    if c.rule("elr") != "on":
        return c.unclean and c.rf >= 2
    m = c.effective_minisr
    if c.bound(UNCLEAN_CRASHES) >= m:
        return True
    if not c.unclean:
        return False
    if c.rf > m:
        return _outages(c) >= m
    return _outages(c) >= c.rf and c.bound(UNCLEAN_CRASHES) >= 1


def recovered_expected(c: Config) -> bool:
    """The first accepted ISR change recovers the partition; the ISR is its leader alone, so
    that change adds a follower: none with rf 1."""
    return c.rf >= 2 and recovering_election_expected(c)


def healthy_follower_shrunk_expected(c: Config) -> bool:
    """Only replica.lag.max.messages (before 0.9.0, KAFKA-1546) drops a follower that still
    fetches: a record appended before its first fetch leaves it more than one record behind
    (the leader counts an unknown follower end offset as -1). Such a shrink spends no budget: the
    bound counts the shrinks that follow a stall. Under replica.lag.time.max.ms a shrink needs a
    stalled follower."""
    return c.rule("isr_lag") == "messages" and c.rf >= 2 and c.bound(RECORDS) >= 1


def reassignment_completed_expected(c: Config) -> bool:
    """A broker outside the replica set to move to, one reassignment, and nothing else: the
    incoming replica fetches, catches up and joins the ISR with no budget spent."""
    return c.bound(REASSIGNMENTS) >= 1 and len(c.brokers) > c.rf


def reassignment_cancelled_expected(c: Config) -> bool:
    """A move started and a cancel allowed: the cancel is enabled as soon as the move starts."""
    return reassignment_completed_expected(c) and c.bound(CANCELS) >= 1


def acked_with_down_expected(k: int) -> Callable[[Config], bool]:
    def expected(c: Config) -> bool:
        """acks=all: k brokers dead (each a clean, controlled or hard stop), their sessions timed
        out so the ISR of the live ones still holds min.insync.replicas, and one record."""
        return (
            c.track_down
            and c.acks == "all"
            and c.bound(RECORDS) >= 1
            and c.bound(CRASHES) + c.bound(UNCLEAN_CRASHES) + c.bound(CONTROLLED_SHUTDOWNS) >= k
            and c.rf - k >= c.effective_minisr
        )

    return expected


def catalog(cfg: Config) -> tuple[Reachable, ...]:
    props = [
        Reachable("HighWatermarkAdvances", "consumers see the HW move forward", hw_advances, hw_expected),
        Reachable(
            "ElrElection",
            "a replica from the ELR is elected leader (KIP-966)",
            elr_election,
            elr_election_expected,
        ),
        Reachable(
            "RecoveringElection",
            "an unclean or last-known-leader election leaves the partition RECOVERING",
            recovering_election,
            recovering_election_expected,
        ),
        Reachable(
            "Recovered",
            "a RECOVERING partition recovers when its leader expands the ISR",
            recovered,
            recovered_expected,
        ),
        Reachable(
            "HealthyFollowerShrunk",
            "a follower that is alive, registered, not shutting down and not stalled is removed from the ISR",
            healthy_follower_shrunk,
            healthy_follower_shrunk_expected,
        ),
    ]
    if len(cfg.brokers) > cfg.rf:
        props.append(
            Reachable(
                "ReassignmentCompleted",
                "a partition reassignment completes: the target replicas are the replica set (KIP-455)",
                reassignment_completed,
                reassignment_completed_expected,
            )
        )
        props.append(
            Reachable(
                "ReassignmentCancelled",
                "a partition reassignment in flight is cancelled: the replica set is the original one (KIP-455)",
                reassignment_cancelled,
                reassignment_cancelled_expected,
            )
        )
    for k in range(1, cfg.rf + 1 if cfg.track_down else 1):
        props.append(
            Reachable(
                f"AckedWith{k}Down",
                f"an acks=all write is appended and acknowledged while {k} broker(s) are down",
                acked_with_down(k),
                acked_with_down_expected(k),
            )
        )
    return tuple(props)
