"""Liveness ("eventually") properties, each declared once with Z3 state predicates.

A property is a set of obligations. An obligation says: once `trigger` holds, `goal`
must hold at some later point of every fair behaviour that keeps `hold` true from some
point on. It is violated by a lasso (checker/liveness/check.py): a path to a state where the
trigger holds and the goal does not, then states where the goal never holds, ending in a
cycle that keeps `hold` and is fair (see `fairness` below, and `Action.fairness` in
spec/next.py for each step's class). Obligations are instantiated per broker where the
promise is about one broker (a follower, a broker shutting down).

The fairness every verdict rests on (FAIRNESS) is the same for all properties: each step
of the protocol itself that stays enabled is eventually taken; clients and operators may
stop at any time; faults happen finitely often (the budgets bound them), so a cycle
never takes one. `tier` "promise" is what `check --liveness` checks; "trade-off" names
what a configuration may give up on purpose (KIP-966 trades availability for durability),
checked only when named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import z3
from kafkamc.invariants.compile import Conjunction
from kafkamc.invariants.view import View, z3_value
from kafkamc.spec.config import Config
from kafkamc.spec.produce import RECORDS

FAIRNESS = (
    "weak fairness for each step of the protocol: a follower's fetch and OffsetsForLeaderEpoch, "
    "a producer's retry of a timed-out acks=all request, the AlterPartition response, metadata "
    "propagation, session timeouts, heartbeats, HW checkpoints and the end of a controlled "
    "shutdown are each taken if they stay enabled; strong fairness for each ISR change a leader "
    "may propose (AlterPartition: taken if enabled again and again, as Kafka retries it on the "
    "follower's next fetch once none is in flight); none for producers, restarts and operator "
    "requests (they may never come); faults (crashes, fences, stalls) happen only finitely often"
)


@dataclass(frozen=True)
class Obligation:
    label: str  # which instance: "" or "broker 2"
    trigger: z3.BoolRef  # when the obligation starts
    goal: z3.BoolRef  # what must then eventually hold
    hold: z3.BoolRef  # the premise a violating cycle keeps throughout


@dataclass(frozen=True)
class Liveness:
    name: str
    tier: str  # "promise" (checked by --liveness) or "trade-off" (checked when named)
    meaning: str
    source: str  # the KIP, class or JIRA the promise comes from
    build: Callable[[Config, View], list[Obligation]]
    kind: str = "liveness"
    # "leads_to": once triggered, the goal eventually holds; "stays": the goal eventually holds
    # for good (violated by a fair cycle that keeps `hold` and leaves the goal somewhere).
    form: str = "leads_to"


def _active(V: View, b: int) -> z3.BoolRef:
    """Alive, registered, unfenced and not shutting down: a broker the controller may elect."""
    return z3.And(V.replica[b], V.alive[b], V.registered[b], z3.Not(V.shutting[b]))


def _has_leader(V: View, brokers) -> z3.BoolRef:
    return z3.Or([V.true_leader_is(b) for b in brokers])


def eventually_leader(cfg: Config, V: View) -> list[Obligation]:
    eligible = z3.Or([z3.And(_active(V, b), z3.Or(V.in_isr[b], V.in_elr[b])) for b in cfg.brokers])
    return [Obligation("", eligible, _has_leader(V, cfg.brokers), eligible)]


def eventually_available(cfg: Config, V: View) -> list[Obligation]:
    live = z3.Or([_active(V, b) for b in cfg.brokers])
    return [Obligation("", live, _has_leader(V, cfg.brokers), live)]


def acked_eventually_fully_replicated(cfg: Config, V: View) -> list[Obligation]:
    # A record the true leader holds; one it lost is a safety matter (AckedWriteDurability).
    spread = [
        z3.Implies(
            z3.And(V.acked[r], V.true_leader_is(leader), V.has_record(leader, r), V.in_isr[b], V.alive[b]),
            V.has_record(b, r),
        )
        for r in range(1, cfg.bound(RECORDS) + 1)
        for leader in cfg.brokers
        for b in cfg.brokers
    ]
    goal = z3.And(spread) if spread else z3.BoolVal(True)
    return [Obligation("", z3.Not(goal), goal, _has_leader(V, cfg.brokers))]


def write_eventually_answered(cfg: Config, V: View) -> list[Obligation]:
    waiting = z3.Or([z3.And(V.alive[b], V.waiting[b] > 0) for b in cfg.brokers])
    healthy = z3.Sum([z3.If(_active(V, b), 1, 0) for b in cfg.brokers]) >= cfg.effective_minisr
    return [Obligation("", waiting, z3.Not(waiting), healthy)]


def follower_eventually_in_sync(cfg: Config, V: View) -> list[Obligation]:
    out = []
    for f in cfg.brokers:
        others = [b for b in cfg.brokers if b != f]
        keeps_fetching = z3.And(_active(V, f), _has_leader(V, others))
        out.append(Obligation(f"broker {f}", z3.And(V.replica[f], z3.Not(V.in_isr[f])), V.in_isr[f], keeps_fetching))
    return out


def eventually_writable(cfg: Config, V: View) -> list[Obligation]:
    # A leader that would take an acks=all write (an ISR of at least min.insync.replicas,
    # Partition.appendRecordsToLeader) and holds none unanswered.
    size = z3.Sum([z3.If(V.in_isr[b], 1, 0) for b in cfg.brokers])
    writable = z3.Or(
        [z3.And(V.true_leader_is(b), size >= cfg.effective_minisr, V.waiting[b] == 0) for b in cfg.brokers]
    )
    return [Obligation("", z3.Not(writable), writable, z3.BoolVal(True))]


def follower_stays_in_sync(cfg: Config, V: View) -> list[Obligation]:
    out = []
    for f in cfg.brokers:
        others = [b for b in cfg.brokers if b != f]
        keeps_fetching = z3.And(_active(V, f), _has_leader(V, others))
        out.append(
            Obligation(f"broker {f}", z3.BoolVal(True), z3.Or(V.in_isr[f], z3.Not(V.replica[f])), keeps_fetching)
        )
    return out


def recovering_eventually_clears(cfg: Config, V: View) -> list[Obligation]:
    # The leader marks the partition RECOVERED in its own state (Partition.makeLeader); the
    # controller learns it only from the leader's next AlterPartition, which needs a follower
    # to add or drop. A leader with no live follower stays RECOVERING in the metadata forever,
    # as in Kafka: the premise asks for one.
    leader_up = z3.Or([z3.And(V.c_leader == b, V.alive[b], V.registered[b]) for b in cfg.brokers])
    follower_up = z3.Or([z3.And(V.c_leader != b, _active(V, b)) for b in cfg.brokers])
    return [Obligation("", V.c_recovering, z3.Not(V.c_recovering), z3.And(leader_up, follower_up))]


def shutdown_eventually_completes(cfg: Config, V: View) -> list[Obligation]:
    return [Obligation(f"broker {b}", V.shutting[b], z3.Not(V.shutting[b]), V.alive[b]) for b in cfg.brokers]


def eventually_unfenced(cfg: Config, V: View) -> list[Obligation]:
    """The peer's EventuallyUnfenced. A fenced broker whose process runs heartbeats until the
    controller unfences it (BrokerLifecycleManager, BrokerHeartbeatManager). A stopped one may
    never restart here (restarts are no step of the protocol), so it must stay up."""
    return [
        Obligation(f"broker {b}", z3.And(V.alive[b], z3.Not(V.registered[b])), V.registered[b], V.alive[b])
        for b in cfg.brokers
    ]


def alter_partition_settles(cfg: Config, V: View) -> list[Obligation]:
    """The peer's AlterPartitionEpochEventuallyReachedOrZero. The proposal in flight ends when the
    leader takes the controller's answer (Partition.handleAlterPartitionUpdate: the ISR and
    partition epoch the controller committed) or its error (handleAlterPartitionError, which
    rolls back), or when newer metadata replaces its state (Partition.makeLeader /
    makeFollower); a crash ends it too. No premise: every one of those steps is fair."""
    return [Obligation(f"broker {b}", V.pending[b], z3.Not(V.pending[b]), z3.BoolVal(True)) for b in cfg.brokers]


def metadata_current(cfg: Config, V: View, b: int) -> z3.BoolRef:
    """Broker b acts on the controller's latest metadata (spec.metadata.stale is false): a
    replica knows the leader and leader epoch, the leader also the ISR and partition epoch; a
    broker outside the replica set has deleted its replica."""
    leader_knows = z3.And(V.pepoch[b] == V.c_pepoch, z3.And([V.knows_isr[b][f] == V.in_isr[f] for f in cfg.brokers]))
    replica = z3.And(
        V.knows_leader[b] == V.c_leader, V.epoch[b] == V.c_epoch, z3.Implies(V.c_leader == b, leader_knows)
    )
    deleted = z3.And(V.knows_leader[b] == 0, V.leo[b] == 0)
    return z3.Or(z3.Not(V.alive[b]), z3.If(V.replica[b], replica, deleted))


def metadata_converges(cfg: Config, V: View) -> list[Obligation]:
    """The peer's EventuallyMetadataConverges: infinitely often every running broker is current at
    once (a trigger of "not yet" and a premise of nothing make it always eventually).
    ReplicaManager.applyDelta applies each delta the broker's metadata listener replays
    (BrokerMetadataPublisher)."""
    current = z3.And([metadata_current(cfg, V, b) for b in cfg.brokers])
    return [Obligation("", z3.Not(current), current, z3.BoolVal(True))]


def reassignment_completes(cfg: Config, V: View) -> list[Obligation]:
    """The peer's EventuallyReassignmentCompletes; reach.ReassignmentCompleted only asks that one
    can. The move ends once every target replica is in the ISR (PartitionChangeBuilder.
    completeReassignmentIfNeeded): the target replicas must stay up and unfenced and the
    partition keep a leader to copy from, or nothing can bring them in."""
    targets_up = z3.And([z3.Implies(z3.And(V.replica[b], z3.Not(V.removing[b])), _active(V, b)) for b in cfg.brokers])
    premise = z3.And(targets_up, _has_leader(V, cfg.brokers))
    return [Obligation("", V.c_reassigning, z3.Not(V.c_reassigning), premise)]


CATALOG: tuple[Liveness, ...] = (
    Liveness(
        "EventuallyLeader",
        "promise",
        "while a live, unfenced ISR or ELR member stays up, the partition eventually has a leader that knows it leads",
        "KIP-966 (PartitionChangeBuilder elects from the ISR, then the ELR)",
        eventually_leader,
    ),
    Liveness(
        "AckedEventuallyFullyReplicated",
        "promise",
        "every acknowledged record the leader holds eventually reaches every live ISR member",
        "Partition.maybeIncrementLeaderHW, ReplicaFetcherThread",
        acked_eventually_fully_replicated,
    ),
    Liveness(
        "WriteEventuallyAnswered",
        "promise",
        "while at least min.insync.replicas replicas stay up, every acks=all request in purgatory is answered",
        "DelayedProduce, Partition.checkEnoughReplicasReachOffset",
        write_eventually_answered,
    ),
    Liveness(
        "FollowerEventuallyInSync",
        "promise",
        "a live, unfenced follower of a partition with a leader eventually rejoins the ISR",
        "Partition.maybeExpandIsr, KIP-497 (AlterPartition)",
        follower_eventually_in_sync,
    ),
    Liveness(
        "FollowerStaysInSync",
        "promise",
        "a live, unfenced follower that keeps fetching from a leader eventually stays in the ISR for good",
        "KAFKA-1546 (replica.lag.time.max.ms replaced replica.lag.max.messages), Partition.maybeShrinkIsr",
        follower_stays_in_sync,
        form="stays",
    ),
    Liveness(
        "RecoveringEventuallyClears",
        "promise",
        "a RECOVERING partition whose leader and one follower stay up eventually recovers",
        "KIP-704 (LeaderRecoveryState), Partition.makeLeader",
        recovering_eventually_clears,
    ),
    Liveness(
        "ControlledShutdownCompletes",
        "promise",
        "a broker in controlled shutdown is eventually let go",
        "KIP-631, BrokerHeartbeatManager (shouldShutDown)",
        shutdown_eventually_completes,
    ),
    Liveness(
        "EventuallyUnfenced",
        "promise",
        "a fenced broker that keeps running is eventually unfenced",
        "BrokerHeartbeatManager, ClusterControlManager (the peer's EventuallyUnfenced)",
        eventually_unfenced,
    ),
    Liveness(
        "AlterPartitionSettles",
        "promise",
        "every AlterPartition a leader sends is eventually accepted, rejected or overtaken by newer metadata",
        "Partition.handleAlterPartitionUpdate / handleAlterPartitionError (KIP-497)",
        alter_partition_settles,
    ),
    Liveness(
        "MetadataConverges",
        "promise",
        "again and again, every running broker acts on the controller's latest metadata for the partition",
        "ReplicaManager.applyDelta, BrokerMetadataPublisher",
        metadata_converges,
    ),
    Liveness(
        "ReassignmentCompletes",
        "promise",
        "a started reassignment whose target replicas stay up, with a leader, eventually completes",
        "PartitionChangeBuilder.completeReassignmentIfNeeded (KIP-455)",
        reassignment_completes,
    ),
    Liveness(
        "EventuallyWritable",
        "trade-off",
        "the partition eventually has a leader that accepts acks=all writes and answers them "
        "(what the durability table's writes column measures with brokers down for good)",
        "Partition.appendRecordsToLeader (NOT_ENOUGH_REPLICAS), DelayedProduce",
        eventually_writable,
    ),
    Liveness(
        "EventuallyAvailable",
        "trade-off",
        "while any live, unfenced replica stays up, the partition eventually has a leader "
        "(what ELR without unclean election gives up)",
        "KIP-966 (the availability it trades for durability)",
        eventually_available,
    ),
)


def by_name(name: str) -> Liveness:
    for p in CATALOG:
        if p.name.lower() == name.lower():
            return p
    raise KeyError(name)


def is_liveness(name: str) -> bool:
    return any(p.name.lower() == name.lower() for p in CATALOG)


class LivenessSuite:
    """The chosen properties' obligations, with one compiled function giving every predicate
    of a state at once: obligation i's trigger, goal and hold are bits 3i, 3i + 1, 3i + 2."""

    def __init__(self, cfg: Config, names: list[str] | None = None):
        self.cfg = cfg
        self.V = View(cfg, "", "s")
        chosen = [p for p in CATALOG if p.tier == "promise"] if names is None else [by_name(n) for n in names]
        self.properties = chosen
        self.obligations: list[tuple[Liveness, Obligation]] = [(p, o) for p in chosen for o in p.build(cfg, self.V)]
        formulas = [f for _, o in self.obligations for f in (o.trigger, o.goal, o.hold)]
        sources = {v.name: v.source for v in self.V.vars.values()}
        self.bits = Conjunction(["s"], self.V.prelude, formulas, sources).bits("LivenessPredicates")
        self._values = self.V.values_fn()

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.properties]

    def predicates(self, i: int, state) -> tuple[bool, bool, bool]:
        """(trigger, goal, hold) of obligation i in `state`, compiled."""
        b = self.bits(state) >> (3 * i)
        return bool(b & 1), bool(b & 2), bool(b & 4)

    def confirm(self, i: int, state) -> tuple[bool, bool, bool]:
        """(trigger, goal, hold) of obligation i in `state`, as Z3 evaluates the declarations:
        a lasso is confirmed this way before it is reported."""
        _, o = self.obligations[i]
        values = self._values(state)
        subst = [(v.const, z3_value(values[v.name])) for v in self.V.vars.values()]
        return tuple(z3.is_true(z3.simplify(z3.substitute(f, *subst))) for f in (o.trigger, o.goal, o.hold))
