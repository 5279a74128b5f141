"""The invariants, each declared once as named Z3 parts over the symbolic view of a state.

State invariants take one View (V). Action properties take the View of the state before
(P) and after (V) a step. Quantifiers over brokers, offsets and records are expanded when
the formula is built, so every formula is quantifier-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import z3
from kafkamc.invariants.view import View
from kafkamc.spec.config import Config
from kafkamc.spec.produce import RECORDS

Parts = list[tuple[str, z3.BoolRef]]


@dataclass(frozen=True)
class Invariant:
    name: str
    # "safety": what Kafka promises; "sanity": the model is well formed; "named": a safety
    # promise checked only when named (--invariant), because every configuration documented
    # to lose data breaks it first and would hide the promise its story is about (ON_DEMAND).
    tier: str
    kind: str  # "state" or "action"
    meaning: str
    build: Callable[..., Parts]


def _offsets(cfg: Config) -> range:
    return range(cfg.bound(RECORDS))


def no_committed_data_loss(cfg: Config, V: View) -> Parts:
    return [
        (
            f"broker {b} in the ISR holds committed offset {i}",
            z3.Implies(z3.And(V.alive[b], V.in_isr[b], V.committed_len > i), V.log[b][i] == V.committed[i]),
        )
        for b in cfg.brokers
        for i in _offsets(cfg)
    ]


def leader_completeness(cfg: Config, V: View) -> Parts:
    return [
        (
            f"leader {b} holds committed offset {i}",
            z3.Implies(z3.And(V.true_leader_is(b), V.committed_len > i), V.log[b][i] == V.committed[i]),
        )
        for b in cfg.brokers
        for i in _offsets(cfg)
    ]


def eligible_replicas_complete(cfg: Config, V: View) -> Parts:
    # Only members of the replica set: a completed reassignment may leave a removed replica in
    # the ELR (PartitionChangeBuilder does not filter it to the target), but elections follow
    # the replica set, so it never leads.
    # KIP-966: the ELR is "replicas that are not in the ISR but are guaranteed to have the
    # committed data"; the controller elects from it only unfenced members. A dead member
    # still registered (its session not yet expired) serves nothing, and one that crashed
    # hard leaves the ELR when it registers again (KAFKA-15586), so live ones must hold it.
    return [
        (
            f"live unfenced ELR member {b} holds committed offset {i}",
            z3.Implies(
                z3.And(V.in_elr[b], V.replica[b], V.alive[b], V.registered[b], V.committed_len > i),
                V.log[b][i] == V.committed[i],
            ),
        )
        for b in cfg.brokers
        for i in _offsets(cfg)
    ]


def acked_durability(cfg: Config, V: View) -> Parts:
    return [
        (
            f"acknowledged record {r} is in leader {b}'s log",
            z3.Implies(z3.And(V.acked[r], V.true_leader_is(b)), V.has_record(b, r)),
        )
        for r in range(1, cfg.bound(RECORDS) + 1)
        for b in cfg.brokers
    ]


def hw_monotonic(cfg: Config, P: View, V: View) -> Parts:
    # A leader that exposes no HW (KIP-207: below its own epoch's start offset) is exempt. Log
    # retention (spec/retention.py) renumbers offsets one lower: the one step that shortens
    # what the ghost holds as committed, which otherwise only grows.
    retired = z3.If(V.committed_len < P.committed_len, 1, 0)
    return [
        (
            f"HW exposed by leader {b} is not below the HW consumers saw before",
            z3.Implies(z3.And(V.true_leader_is(b), V.exposed[b] >= 0), V.exposed[b] >= P.hw_seen - retired),
        )
        for b in cfg.brokers
    ]


def no_split_brain(cfg: Config, V: View) -> Parts:
    # The controller gives each leader epoch to one broker; the epoch bump is what fences
    # the one before (KIP-320 on the fetch path).
    return [
        (
            f"brokers {b} and {c} do not both lead the same epoch",
            z3.Not(z3.And(V.leads[b], V.leads[c], V.epoch[b] == V.epoch[c])),
        )
        for b, c in combinations(cfg.brokers, 2)
    ]


def log_matching(cfg: Config, V: View) -> Parts:
    # KIP-101 / KIP-279: truncation by leader epoch leaves no divergence in the prefix that
    # both replicas have marked committed.
    return [
        (
            f"brokers {b} and {c} agree at offset {i} below both HWs",
            z3.Implies(z3.And(V.alive[b], V.alive[c], V.hw[b] > i, V.hw[c] > i), V.log[b][i] == V.log[c][i]),
        )
        for b, c in combinations(cfg.brokers, 2)
        for i in _offsets(cfg)
    ]


def consistent_reads(cfg: Config, V: View) -> Parts:
    # A consumer reads from any broker that believes it leads, a zombie included (whose
    # exposure the committed ghost takes in, spec.hw.observe): what it can read below that
    # broker's HW is the committed history, never another record at the same offset.
    return [
        (
            f"broker {b} serves offset {i} as committed",
            z3.Implies(
                z3.And(V.leads[b], V.exposed[b] > i),
                z3.And(V.committed_len > i, V.log[b][i] == V.committed[i]),
            ),
        )
        for b in cfg.brokers
        for i in _offsets(cfg)
    ]


def maximal_isr_covers_isr(cfg: Config, V: View) -> Parts:
    # KIP-497: the ISR a leader advances its HW over contains every member of the ISR the
    # controller has committed, so the HW never passes a record some ISR member lacks.
    return [
        (
            f"leader {b} counts ISR member {f} in its HW",
            z3.Implies(z3.And(V.true_leader_is(b), V.in_isr[f]), V.in_hw_isr[b][f]),
        )
        for b in cfg.brokers
        for f in cfg.brokers
        if f != b
    ]


def maximal_isr_covers_elr(cfg: Config, V: View) -> Parts:
    """The peer's ReplicationQuorumSupersetProperty (Vanlightly's KIP-966 TLA+ specification).

    KIP-966: while the ISR a leader knows is at min ISR its HW may advance
    (Partition.maybeIncrementLeaderHW), so the ISR that HW is computed over must contain
    every broker the controller may elect: the members of its ISR and of its ELR. Below min
    ISR the HW stands still and a proposal in flight may leave an ELR member out, which is
    safe. The ISR half is MaximalIsrCoversIsr, which holds at any ISR size; this is the ELR
    half. The peer also asks that with no AlterPartition in flight the maximal ISR be the
    committed one: ours is the committed ISR joined with the proposal in flight (Broker.
    pending, 0 when none), which holds by construction.
    """
    parts: Parts = []
    for b in cfg.brokers:
        at_min = z3.Sum([z3.If(V.knows_isr[b][f], 1, 0) for f in cfg.brokers]) >= cfg.effective_minisr
        for f in cfg.brokers:
            if f != b:
                parts.append(
                    (
                        f"leader {b} at min ISR counts ELR member {f} in its HW",
                        z3.Implies(z3.And(V.true_leader_is(b), at_min, V.in_elr[f]), V.in_hw_isr[b][f]),
                    )
                )
    return parts


def acked_write_survives(cfg: Config, V: View) -> Parts:
    """The peer's NoCommittedRecordLostGlobally. AckedWriteDurability looks at the current
    leader only, and says nothing while the partition has none; this asks that some replica,
    running or stopped (a stopped broker's log is what its disk holds, spec.broker_lifecycle.
    stopped), still has the record: lost from every disk, no election can bring it back. Log
    retention deletes a record only with its acknowledgement (spec/retention.py renumbers both).

    Checked only when named: every configuration documented to lose acknowledged data (acks=1,
    min.insync.replicas=1, unclean election, correlated hard crashes) breaks it at the crash
    that loses the last copy, before the promise its story is about (AckedWriteDurability,
    NoCommittedDataLoss, HighWatermarkMonotonic) can be seen. The peer, too, leaves it out
    when crashes may outnumber min ISR.
    """
    return [
        (
            f"acknowledged record {r} is on some broker's disk",
            z3.Implies(V.acked[r], z3.Or([V.has_record(b, r) for b in cfg.brokers])),
        )
        for r in range(1, cfg.bound(RECORDS) + 1)
    ]


def last_known_leader_kept(cfg: Config, V: View) -> Parts:
    """The shipped form of the peer's MinIsrRecoveryQuorum (see docs/MODEL.md: the peer's
    last known ELR collects min ISR members, Kafka's lastKnownElr holds one broker).

    PartitionChangeBuilder.maybeUpdateLastKnownLeader records the leader the first time the
    ISR empties (the model: the last ISR member, spec.controller.maintain_elr) and clears it
    once the partition has a leader again; canElectLastKnownLeader elects it when the ISR and
    the ELR are both empty. So whenever they are, the controller names exactly one last known
    leader, a replica of the partition, to recover from. Without ELR Kafka keeps none (and the
    ISR never empties, WellFormed): no parts.
    """
    if cfg.rule("elr") != "on":
        return []
    none_left = z3.Not(z3.Or([z3.Or(V.in_isr[b], V.in_elr[b]) for b in cfg.brokers]))
    one = z3.Sum([z3.If(V.last_known[b], 1, 0) for b in cfg.brokers]) == 1
    parts: Parts = [("with the ISR and ELR empty, one broker is the last known leader", z3.Implies(none_left, one))]
    parts += [
        (
            f"last known leader {b} is a replica",
            z3.Implies(z3.And(none_left, V.last_known[b]), V.replica[b]),
        )
        for b in cfg.brokers
    ]
    return parts


def well_formed(cfg: Config, V: View) -> Parts:
    parts: Parts = []
    R = cfg.bound(RECORDS)
    for b in cfg.brokers:
        parts.append((f"0 <= hw[{b}] <= leo[{b}]", z3.And(0 <= V.hw[b], V.hw[b] <= V.leo[b])))
        parts.append((f"epoch[{b}] <= controller epoch", V.epoch[b] <= V.c_epoch))
        for i in range(R):
            parts.append((f"log[{b}][{i}] is present exactly below the LEO", (V.log[b][i] != 0) == (V.leo[b] > i)))
            parts.append(
                (
                    f"log[{b}][{i}] was written in a leader epoch that exists",
                    z3.Implies(V.leo[b] > i, z3.And(1 <= V.logep[b][i], V.logep[b][i] <= V.c_epoch)),
                )
            )
            if i + 1 < R:
                parts.append(
                    (
                        f"log[{b}] epochs do not decrease at offset {i}",
                        z3.Implies(V.leo[b] > i + 1, V.logep[b][i] <= V.logep[b][i + 1]),
                    )
                )
            for j in range(i + 1, R):
                parts.append(
                    (
                        f"log[{b}] holds a record once (offsets {i}, {j})",
                        z3.Implies(V.log[b][i] != 0, V.log[b][i] != V.log[b][j]),
                    )
                )
    elr = cfg.rule("elr") == "on"
    for b in cfg.brokers:
        parts.append((f"broker {b} is not in the ISR and the ELR at once", z3.Not(z3.And(V.in_isr[b], V.in_elr[b]))))
        parts.append((f"ISR member {b} is in the replica set", z3.Implies(V.in_isr[b], V.replica[b])))
        if not elr:
            parts.append((f"broker {b} is in no ELR with ELR off", z3.Not(V.in_elr[b])))
        # A fenced broker leaves the ISR; only without ELR does the last member stay.
        others = z3.Or([V.in_isr[o] for o in cfg.brokers if o != b]) if cfg.rf > 1 else z3.BoolVal(False)
        fenced_ok = z3.Not(others) if not elr else z3.BoolVal(False)
        parts.append(
            (
                f"fenced broker {b} is not in the ISR" + ("" if elr else " unless it is the last member"),
                z3.Implies(z3.And(V.in_isr[b], z3.Not(V.registered[b])), fenced_ok),
            )
        )
    parts.append(
        (
            "the controller's leader is in the ISR",
            z3.Or(V.c_leader == 0, z3.Or([z3.And(V.c_leader == b, V.in_isr[b]) for b in cfg.brokers])),
        )
    )
    if not elr:
        parts.append(("the ISR is not empty", z3.Or([V.in_isr[b] for b in cfg.brokers])))
    for b, o in combinations(cfg.brokers, 2):
        parts.append(
            (
                f"a RECOVERING partition has at most one ISR member ({b}, {o})",
                z3.Implies(V.c_recovering, z3.Not(z3.And(V.in_isr[b], V.in_isr[o]))),
            )
        )
    return parts


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "NoCommittedDataLoss",
        "safety",
        "state",
        "a record ever committed stays at its offset in every live ISR member",
        no_committed_data_loss,
    ),
    Invariant(
        "LeaderCompleteness",
        "safety",
        "state",
        "the partition's leader holds every record ever committed, at its offset",
        leader_completeness,
    ),
    Invariant(
        "EligibleReplicasComplete",
        "safety",
        "state",
        "every live, unfenced member of the ELR holds every committed record at its offset (KIP-966)",
        eligible_replicas_complete,
    ),
    Invariant(
        "AckedWriteDurability",
        "safety",
        "state",
        "a write acknowledged to a producer is in the current leader's log",
        acked_durability,
    ),
    Invariant(
        "HighWatermarkMonotonic",
        "safety",
        "action",
        "the HW consumers can read from the leader never goes backwards",
        hw_monotonic,
    ),
    Invariant(
        "NoSplitBrain",
        "safety",
        "state",
        "no two brokers lead the same leader epoch",
        no_split_brain,
    ),
    Invariant(
        "LogMatching",
        "safety",
        "state",
        "two live replicas hold the same record at every offset below both their HWs (KIP-101)",
        log_matching,
    ),
    Invariant(
        "ConsistentReads",
        "safety",
        "state",
        "every broker serving reads, a zombie included, exposes only committed records",
        consistent_reads,
    ),
    Invariant(
        "MaximalIsrCoversIsr",
        "safety",
        "state",
        "the leader's HW counts every member of the committed ISR (KIP-497 maximal ISR)",
        maximal_isr_covers_isr,
    ),
    Invariant(
        "MaximalIsrCoversElr",
        "safety",
        "state",
        "once the leader's ISR is at min ISR, its HW also counts every member of the controller's ELR (KIP-966)",
        maximal_isr_covers_elr,
    ),
    Invariant(
        "AckedWriteSurvives",
        "named",
        "state",
        "a write acknowledged to a producer is on the disk of some broker, running or not",
        acked_write_survives,
    ),
    Invariant(
        "LastKnownLeaderKept",
        "safety",
        "state",
        "with the ISR and the ELR empty, the controller names exactly one last known leader, a replica (KIP-966)",
        last_known_leader_kept,
    ),
    Invariant(
        "WellFormed",
        "sanity",
        "state",
        "the state is one the model should be able to build (catches spec bugs)",
        well_formed,
    ),
)


# What a check tests when no invariant is named.
DEFAULT: tuple[Invariant, ...] = tuple(inv for inv in INVARIANTS if inv.tier != "named")
ON_DEMAND: tuple[Invariant, ...] = tuple(inv for inv in INVARIANTS if inv.tier == "named")


def by_name(name: str, pool: tuple[Invariant, ...] = INVARIANTS) -> Invariant:
    for inv in pool:
        if inv.name.lower() == name.lower():
            return inv
    raise KeyError(name)
