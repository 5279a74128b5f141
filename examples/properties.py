"""Properties of your own, checked like the built-in ones.

    kafkamc invariants --properties examples/properties.py
    kafkamc check --rf 3 --minisr 2 --properties examples/properties.py --invariant NoAckBelowMinIsr
    kafkamc check --rf 3 --minisr 2 --properties examples/properties.py --invariant AckedOnMinIsrReplicas
    kafkamc check --rf 2 --minisr 1 --properties examples/properties.py --invariant HwWithinLog
    kafkamc check --rf 3 --minisr 2 --properties examples/properties.py --reach IsrShrinksToLeaderOnly

Each property is a function over the symbolic view of a state (V) and, for a step, of the
state before it (P). The view's variables are listed in kafkamc/invariants/view.py: for
broker b, V.alive[b], V.leads[b], V.in_isr[b], V.hw[b], V.log[b][offset] (the record id
there, 0 for none), V.has_record(b, r); for the controller V.c_leader, V.c_epoch; for what
producers and consumers saw, V.acked[r], V.committed[offset], V.hw_seen. An invariant
returns a list of (description, formula) parts: a counterexample names the part that failed.
"""

import z3
from kafkamc.invariants.properties import isr_size, newly_acked, reachable, state_invariant, step_invariant


@state_invariant("no live broker's high watermark is beyond its log end offset")
def HwWithinLog(cfg, V):
    return [(f"broker {b}'s HW is within its log", z3.Implies(V.alive[b], V.hw[b] <= V.leo[b])) for b in cfg.brokers]


@step_invariant("no write is acknowledged while the controller's ISR is below min.insync.replicas")
def NoAckBelowMinIsr(cfg, P, V):
    # Stronger than what Kafka promises: the leader counts its own view of the ISR (the maximal
    # ISR of KIP-841), which can still name a replica the controller has already removed.
    return [
        (
            "a write acknowledged in this step had an ISR of min.insync.replicas",
            z3.Implies(newly_acked(cfg, P, V), isr_size(cfg, V) >= cfg.effective_minisr),
        )
    ]


@step_invariant("a write acknowledged with acks=all is in the logs of at least min.insync.replicas brokers")
def AckedOnMinIsrReplicas(cfg, P, V):
    # Fails, and the counterexample is worth reading: the leader counts a follower's fetch
    # (Partition.checkEnoughReplicasReachOffset), not its fsync, so a follower that fetched the
    # record and then crashed hard, losing its unflushed tail, still counts towards the ack.
    if cfg.acks != "all":
        return []
    return [
        (
            f"record {r}, acknowledged in this step, is on min.insync.replicas brokers",
            z3.Implies(
                z3.And(z3.Not(P.acked[r]), V.acked[r]),
                z3.Sum([z3.If(V.has_record(b, r), 1, 0) for b in cfg.brokers]) >= cfg.effective_minisr,
            ),
        )
        for r in range(1, cfg.max_records + 1)
    ]


@reachable("the controller's ISR shrinks to the leader alone")
def IsrShrinksToLeaderOnly(cfg, P, V):
    return z3.And(isr_size(cfg, P) > 1, isr_size(cfg, V) == 1)
