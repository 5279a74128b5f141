"""Issue 15's promises: windows Kafka has open are open in the model too, and the checker
finds the historical losses they allow, the way the KIPs and JIRAs tell them."""

from __future__ import annotations

import pytest
from kafkamc.jobs.run import run_check
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import Protocol, preset
from kafkamc.spec.state import bit
from kafkamc.traces.trace import format_action


def _walk(cfg: Config, *actions):
    """The states along `actions` from the first initial state (each step must be enabled
    and deterministic)."""
    model = Model(cfg)
    states = [model.initial_states()[0]]
    for a in actions:
        nxt = model.step(states[-1], a)
        assert len(nxt) == 1, (format_action(a), nxt)
        states.append(nxt[0])
    return states


def test_a_fetch_answer_carries_the_hw_from_before_the_fetch():
    """ReplicaManager reads the log and the HW for the answer before updateFollowerFetchState
    records the follower's position: the fetch that lets the leader's HW pass r1 answers with
    the old HW, and the follower learns the new one from its next fetch."""
    cfg = Config(rf=2, minisr=1, max_records=1)
    s = _walk(cfg, Produce(1, 1), Fetch(2, 1), Fetch(2, 1), Fetch(2, 1))
    lead, fol = [st.broker(1) for st in s], [st.broker(2) for st in s]
    assert [b.hw for b in lead] == [0, 0, 0, 1, 1]  # the second fetch (offset 1) advances it
    assert [b.hw for b in fol] == [0, 0, 0, 0, 1]  # and only the third one tells the follower
    assert [b.leo for b in fol] == [0, 0, 1, 1, 1]


def _kip101(minisr: int, rf: int = 3):
    cfg = Config(
        rf=rf,
        minisr=minisr,
        max_records=1 if rf == 3 else 2,
        max_clean_shutdowns=1 if rf == 3 else 2,
        max_hard_crashes=0,
        max_isr_shrinks=0,
        protocol=preset("oldest"),
    )
    return run_check(cfg, invariants=["NoCommittedDataLoss"])


def test_kip101_loss_on_the_oldest_preset_without_isr_shrinks_or_elr():
    """KIP-101: a follower truncates to its own HW, which lags the leader's by one fetch; the
    record it drops was committed. Found with one clean shutdown (the leader's) and no ISR
    shrink, at min ISR 1 and 2, and no state of the trace has an ELR: the follower that did
    not become leader truncates when it follows the new one, in the ISR all along.

    At RF 2 (two clean restarts, two records) the bounds hold: the follower's own restart takes
    it out of the ISR (the restart waits for the fence), and it rejoins only in a fetch at or
    past the leader's HW. Until issue 29 the leader re-added it on the position of its previous
    life, which ZooKeeper-era Kafka never did (maybeExpandIsr ran inside a fetch)."""
    for minisr in (1, 2):
        run = _kip101(minisr)
        v = run.result.violation
        assert v is not None and v.invariant == "NoCommittedDataLoss", minisr
        assert all(state.controller.elr == 0 for _action, state in v.trace)
        truncated = [
            i
            for i in range(1, len(v.trace))
            if v.trace[i][1].broker(3).leo < v.trace[i - 1][1].broker(3).leo and v.trace[i][1].broker(3).alive
        ]
        assert truncated == [len(v.trace) - 1], "the follower's own truncation to its HW is the loss"
        assert v.trace[-1][1].controller.isr & bit(3)  # in the ISR all along
        assert _kip101(minisr, rf=2).result.verdict == "holds"


def test_eligible_replicas_complete_names_kafka_15583():
    """KIP-966 promises that an ELR member holds the committed data. Before KAFKA-15583 a
    leader advanced the HW with an ISR below min.insync.replicas, so a record committed by
    the leader alone was missing on the ELR members: EligibleReplicasComplete says so at
    once, without waiting for the election that would expose it."""
    cfg = Config(
        rf=3,
        minisr=2,
        max_records=1,
        max_clean_shutdowns=0,
        max_hard_crashes=0,
        max_isr_shrinks=2,
        protocol=preset("newest").with_rules(hw_min_isr="any"),
    )
    v = run_check(cfg).result.violation
    assert v is not None and v.invariant == "EligibleReplicasComplete"
    assert [format_action(a) for a, _ in v.trace[1:]] == [
        "Produce(leader=1, record=1)",
        "ReplicaStall(follower=2)",
        "ReplicaStall(follower=3)",
        "AlterPartition(leader=1, isr=(1,))",  # both out in one request (Partition.maybeShrinkIsr)
        "HandleAlterPartitionResponse(leader=1)",
    ]
    assert v.trace[-1][1].controller.elr == 0b110  # brokers 2 and 3 left an ISR that fell below min ISR


@pytest.mark.parametrize("value,hw", [("ignore", 1), ("wait", 0), ("wait_eligible", 0)])
def test_hw_joining_replica_holds_the_hw_for_a_caught_up_follower(value, hw):
    """Harmless is not idle: the rule changes what the HW does. Follower 2 stalls and leaves
    the ISR, then fetches again at the leader's log end (caught up, about to rejoin); the next
    record moves the HW past it only under `ignore` (before KAFKA-4485)."""
    cfg = Config(
        protocol=Protocol().with_rules(hw_joining_replica=value), rf=2, minisr=1, max_records=1, max_isr_shrinks=1
    )
    model = Model(cfg)
    s = model.initial_states()[0]
    for a in (
        ReplicaStall(2),
        AlterPartition(1, (1,)),
        HandleAlterPartitionResponse(1),
        Fetch(2, 1),
        Produce(1, 1),
    ):
        (s,) = model.step(s, a)
    assert s.broker(1).isr == bit(1) and s.broker(1).views[1] == 0
    assert s.broker(1).hw == hw
