"""Partition reassignment (KIP-455, spec/reassignment.py) over a broker pool larger than the
replication factor (--brokers): the move, its completion, and symmetry over the pool."""

from __future__ import annotations

import json
from dataclasses import replace as dc_replace
from itertools import permutations

import pytest
from helpers import bfs, play, run_kafkamc, sample_states
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.jobs.run import run_check
from kafkamc.spec import symmetry
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import (
    BrokerCrash,
    BrokerHeartbeat,
    BrokerRestart,
    BrokerSessionTimeout,
    ControllerFenceBroker,
)
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import PRESETS
from kafkamc.spec.reassignment import AlterPartitionReassignments, CancelPartitionReassignment
from kafkamc.spec.state import NO_LEADER, Broker, bit

CFG = Config(rf=3, minisr=2, broker_count=4, max_records=1, max_hard_crashes=0, max_reassignments=1)
ISR_123 = bit(1) | bit(2) | bit(3)


def caught_up(cfg: Config, target: tuple, leader: int = 1):
    """Record 1 committed on 1..3, then the move to `target` started (the leader applies its new
    partition epoch: an AlterPartition on the old one is INVALID_UPDATE_VERSION) and broker 4
    caught up."""
    s = play(cfg, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1))
    moving = play(cfg, AlterPartitionReassignments(target), MetadataUpdate(leader), MetadataUpdate(4), state=s)
    return play(cfg, Fetch(4, leader), Fetch(4, leader), state=moving)


def test_the_move_starts_with_the_target_first_and_no_new_leader_epoch():
    s = play(CFG, AlterPartitionReassignments((4, 2, 3)))
    c = s.controller
    assert c.replicas == (4, 2, 3, 1) and (c.adding, c.removing) == (bit(4), bit(1))
    assert (c.leader, c.epoch, c.pepoch, c.isr) == (1, 1, 2, ISR_123)  # only the partition epoch moves
    # Broker 4 learns from the metadata that it hosts the partition and follows the leader.
    assert play(CFG, MetadataUpdate(4), state=s).broker(4).leader == 1
    assert not Model(CFG).step(s, AlterPartitionReassignments((1, 4, 3)))  # one move at a time


def test_completion_moves_leadership_off_a_removed_leader():
    s = caught_up(CFG, (4, 2, 3))
    assert s.broker(4).log == s.broker(1).log
    done = play(CFG, AlterPartition(1, (1, 2, 3, 4)), state=s)
    c = done.controller
    assert c.replicas == (4, 2, 3) and (c.adding, c.removing) == (0, 0)
    assert (c.leader, c.epoch, c.isr) == (4, 2, bit(2) | bit(3) | bit(4))  # the first target replica in the ISR
    # The old leader hears NEW_LEADER_ELECTED and keeps its pending ISR until metadata tells it.
    assert done.broker(1).alter.error == "NEW_LEADER_ELECTED"
    answered = play(CFG, HandleAlterPartitionResponse(1), state=done)
    assert answered.broker(1).pending == bit(1) | bit(2) | bit(3) | bit(4) and answered.broker(1).leader == 1
    # Once it applies the change, broker 1 deletes its replica.
    gone = play(CFG, MetadataUpdate(1), state=answered).broker(1)
    assert gone == Broker(alive=True, bepoch=1) and gone.leader == NO_LEADER


def test_removing_a_follower_keeps_the_leader_in_a_new_leader_epoch():
    s = caught_up(CFG, (1, 4, 3))
    c = play(CFG, AlterPartition(1, (1, 2, 3, 4)), state=s).controller
    assert c.replicas == (1, 4, 3) and (c.leader, c.epoch) == (1, 2)  # replicas left: the epoch is bumped
    assert c.isr == bit(1) | bit(3) | bit(4)


def test_a_two_replica_move_completes_once_both_new_replicas_are_in_the_isr():
    """[1, 2] -> [3, 4] (PartitionReassignmentReplicas): both replicas move in one reassignment;
    the move completes in the AlterPartition that adds the second of them, and leadership goes
    to the first target replica."""
    cfg = Config(rf=2, minisr=1, broker_count=4, max_records=1, max_hard_crashes=0, max_reassignments=1)
    s = play(cfg, Produce(1, 1), Fetch(2, 1), Fetch(2, 1), AlterPartitionReassignments((3, 4)), MetadataUpdate(1))
    c = s.controller
    assert c.replicas == (3, 4, 1, 2) and (c.adding, c.removing) == (bit(3) | bit(4), bit(1) | bit(2))
    s = play(cfg, MetadataUpdate(3), MetadataUpdate(4), Fetch(3, 1), Fetch(4, 1), Fetch(3, 1), Fetch(4, 1), state=s)
    s = play(cfg, AlterPartition(1, (1, 2, 3)), HandleAlterPartitionResponse(1), state=s)
    assert s.controller.adding  # 4 is not in the ISR yet
    c = play(cfg, AlterPartition(1, (1, 2, 3, 4)), state=s).controller
    assert c.replicas == (3, 4) and c.isr == bit(3) | bit(4) and (c.leader, c.epoch) == (3, 2)


def test_a_fenced_or_dead_broker_may_be_the_target():
    """validateManualPartitionAssignment asks only that a target broker be registered: a fenced
    broker is accepted, joins the ISR only once unfenced (INELIGIBLE_REPLICA before), and then
    completes the move; a dead one is accepted too. Brokers outside the set stop or are fenced
    only while a reassignment may still bring them in."""
    cfg = Config(rf=2, minisr=1, broker_count=3, max_records=0, max_fences=1, max_reassignments=1)
    # The leader applies the move before the fence, so its own view still shows 3 unfenced and
    # it proposes 3: the controller refuses (the leader's KIP-841 check uses its own metadata).
    s = play(cfg, AlterPartitionReassignments((1, 3)), MetadataUpdate(1), ControllerFenceBroker(3), MetadataUpdate(3))
    s = play(cfg, Fetch(3, 1), AlterPartition(1, (1, 2, 3)), state=s)
    assert s.broker(1).alter.error == "INELIGIBLE_REPLICA" and s.controller.adding == bit(3)
    s = play(cfg, HandleAlterPartitionResponse(1), BrokerHeartbeat(3), Fetch(3, 1), state=s)
    s = play(cfg, AlterPartition(1, (1, 2, 3)), state=s)
    assert s.controller.replicas == (1, 3) and not s.controller.adding
    dead = Config(rf=2, minisr=1, broker_count=3, max_records=0, max_clean_shutdowns=1, max_reassignments=1)
    s = play(dead, BrokerCrash(3), BrokerSessionTimeout(3), AlterPartitionReassignments((3, 2)))
    assert s.controller.adding == bit(3) and not s.broker(3).alive
    assert play(dead, BrokerRestart(3), state=s).broker(3).leader == 1  # back, it follows the leader
    # With no reassignment left to bring it in, an outsider neither stops nor is fenced.
    idle = Model(dc_replace(dead, max_reassignments=0, max_fences=1))
    assert not [a for a, _ in idle.successors(idle.initial_states()[0]) if getattr(a, "broker", 0) == 3]


def test_a_cancel_reverts_and_the_adding_replica_deletes_its_log():
    """PartitionReassignmentRevert: the adding replica leaves the set and the ISR, the leader stays
    in a new leader epoch, the replicas keep the target's order (so [2, 1]: the preferred replica
    changed); the removed broker deletes its replica once it applies the change. On 4.1.0's rules
    (Kafka 3.8 to 4.2, KAFKA-15665), where a target replica out of the ISR keeps the move open."""
    cfg = dc_replace(CFG, max_reassignment_cancels=1, max_fences=1, protocol=PRESETS["4.1.0"])
    s = play(cfg, ControllerFenceBroker(3), MetadataUpdate(1), state=caught_up(cfg, (4, 2, 3)))
    s = play(cfg, AlterPartition(1, (1, 2, 4)), state=s)  # 3 fenced out of the ISR, 4 in
    assert s.controller.isr == bit(1) | bit(2) | bit(4) and s.controller.adding  # 3 is a target replica out of the ISR
    c = play(cfg, HandleAlterPartitionResponse(1), CancelPartitionReassignment(), state=s).controller
    assert c.replicas == (2, 3, 1) and c.isr == bit(1) | bit(2) and (c.leader, c.epoch) == (1, 2)
    gone = play(cfg, HandleAlterPartitionResponse(1), CancelPartitionReassignment(), MetadataUpdate(4), state=s)
    assert gone.broker(4) == Broker(alive=True, bepoch=1)


@pytest.mark.parametrize("era,completes", [("3.7.0", True), ("4.1.0", False), ("4.3.0", True), ("2.8.0", False)])
def test_a_move_completes_with_a_kept_replica_out_of_the_isr_only_where_kafka_allows_it(era, completes):
    """The move [1, 2, 3] -> [4, 2, 3] while 3, a replica it keeps, is fenced out of the ISR: the
    ISR [1, 2, 4] holds the adding replica 4 but not the whole target. KRaft before 3.8
    (PartitionChangeBuilder.completeReassignmentIfNeeded) and from 4.3.0 (KAFKA-19975:
    PartitionReassignmentReplicas.maybeCompleteReassignment, seen on Kafka 4.4.0 by conform's seed
    902) complete it; 3.8 to 4.2 (KAFKA-15665) and ZooKeeper's controller wait for 3."""
    cfg = dc_replace(CFG, max_fences=1, protocol=PRESETS[era])
    s = play(cfg, ControllerFenceBroker(3), MetadataUpdate(1), state=caught_up(cfg, (4, 2, 3)))
    c = play(cfg, AlterPartition(1, (1, 2, 4)), state=s).controller
    if completes:
        assert (c.replicas, c.isr, c.adding, c.removing) == ((4, 2, 3), bit(2) | bit(4), 0, 0)
        assert c.leader == 4  # the removed leader 1 gives way to the first target replica in the ISR
    else:
        assert (c.replicas, c.isr, c.adding) == ((4, 2, 3, 1), bit(1) | bit(2) | bit(4), bit(4))


def test_outsiders_are_interchangeable_only_among_themselves():
    cfg = Config(rf=2, minisr=1, broker_count=4, max_records=1, max_reassignments=1)
    s = play(cfg, Produce(1, 1), AlterPartitionReassignments((3, 2)), MetadataUpdate(3), Fetch(3, 1))
    # Swapping the two brokers outside the initial set (3, moving in, and 4) is a relabelling
    # the canonical form does not undo: 3 is now in the replica set and 4 is not.
    swapped_out = symmetry.relabel(s, (1, 2, 4, 3))
    assert symmetry.canonical(swapped_out) == symmetry.canonical(s)  # a relabelling: same class
    idle = play(cfg, Produce(1, 1))
    assert symmetry.canonical(symmetry.relabel(idle, (1, 2, 4, 3))) == symmetry.canonical(idle)
    # Relabelling a replica with an outsider is a different broker layout, told apart by canonical().
    other = symmetry.relabel(idle, (1, 3, 2, 4))
    assert other.controller.replicas == (1, 3)
    assert symmetry.canonical(other) == symmetry.canonical(idle)  # still the same class...
    moved = play(cfg, AlterPartitionReassignments((1, 3)), state=idle)
    assert symmetry.canonical(moved) != symmetry.canonical(idle)  # ...but a move is not a relabelling


def test_every_relabelling_of_the_pool_maps_transitions_to_transitions():
    """The soundness argument over a pool (tests/test_symmetry.py's, with brokers outside the
    set): for every permutation p of all the brokers, succ(p(s)) = p(succ(s)), the invariants
    agree on s and p(s), and p(s) has the canonical form of s."""
    cfg = Config(rf=2, minisr=1, broker_count=3, max_records=1, max_reassignments=1, max_controlled_shutdowns=1)
    suite = InvariantSuite(cfg)
    model = Model(dc_replace(cfg, symmetry=False))
    states = sample_states(cfg, 300)
    assert any(s.controller.adding for s in states) and any(len(s.controller.replicas) == 3 for s in states)
    for s in states:
        successors = [t for _, t in model.successors(s)]
        for perm in permutations((1, 2, 3)):
            r = symmetry.relabel(s, perm)
            assert symmetry.canonical(r) == symmetry.canonical(s)
            assert suite.all_violated(r) == suite.all_violated(s)
            mapped = sorted(repr(symmetry.relabel(t, perm)) for t in successors)
            assert sorted(repr(t) for _, t in model.successors(r)) == mapped


def _orbits(cfg: Config) -> int:
    """Canonical forms of every state the unreduced search reaches: what the reduced one must count."""
    model = Model(dc_replace(cfg, symmetry=False))
    return len({symmetry.canonical(s).key() for _p, _a, s, new in bfs(model) if new})


@pytest.mark.slow  # 35 s: the unreduced search's every state canonicalised
def test_symmetry_over_the_pool_counts_each_class_once():
    """The reduced search counts exactly the classes the unreduced one reaches."""
    cfg = Config(rf=2, minisr=1, broker_count=3, max_records=1, max_hard_crashes=0, max_reassignments=1)
    reduced = explore(FastModel(cfg), InvariantSuite(cfg))
    # 17,028 -> 15,257 (issue 29): a leader that a completed move re-elects into a new epoch
    # keeps its purgatory (DelayedProduce); the answer completing a move carries the new leader
    # epoch and leaves the leader pending; INVALID_UPDATE_VERSION keeps the pending ISR; the
    # leader's own view of fencing. 15,257 -> 14,911 (4.3.0's reassignment_completion, KAFKA-19975:
    # a move completes with a kept replica out of the ISR, so fewer states wait for it).
    assert (reduced.verdict, reduced.distinct_states) == ("holds", 14911)
    assert _orbits(cfg) == 14911


@pytest.mark.slow
def test_two_outsiders_reduce_exactly():
    """With two brokers outside the set, canonical() takes the least of their orders, and a
    two-replica move brings both in: the reduced search still counts exactly the classes the
    unreduced one reaches (6,472; 6,816 before the leader kept its own view of fencing and the
    other AlterPartition fixes of issue 29). It did not while the removing replicas were listed
    by the model's broker ids (5,494 of 6,816): that step depended on labels, so each order of the
    removing replicas is now a candidate (AlterPartitionReassignments.removing). Before
    two-replica moves the second outsider added no class (17,028 at one record, as with three
    brokers); now one record gives 174,099 (issue 29: two-replica moves, whose removing replicas
    come in either order). 6,550 since 4.3.0's reassignment_completion (KAFKA-19975): a move that
    completes with a kept replica out of the ISR leads to states the old rule never reached."""
    cfg = Config(rf=2, minisr=1, broker_count=4, max_records=0, max_hard_crashes=0, max_reassignments=1)
    assert explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states == _orbits(cfg) == 6550


def test_relabelling_a_pool_of_four_maps_transitions_to_transitions():
    """The soundness argument again with two brokers outside the set, so with two-replica moves
    whose removing replicas come in every order."""
    cfg = Config(rf=2, minisr=1, broker_count=4, max_records=0, max_hard_crashes=0, max_reassignments=1)
    model = Model(dc_replace(cfg, symmetry=False))
    states = sample_states(cfg, 120)
    assert any(len(s.controller.replicas) == 4 for s in states)
    for s in states:
        successors = [t for _, t in model.successors(s)]
        for perm in permutations((1, 2, 3, 4)):
            mapped = sorted(repr(symmetry.relabel(t, perm)) for t in successors)
            assert sorted(repr(t) for _, t in model.successors(symmetry.relabel(s, perm))) == mapped


def test_engines_agree_and_the_move_completes():
    small = dc_replace(CFG, max_isr_shrinks=0)
    fast = explore(FastModel(small), InvariantSuite(small))
    assert fast.coverage["AlterPartitionReassignments"] > 0  # the oracle's count: tests/test_oracle.py (slow)
    assert (fast.verdict, fast.distinct_states, fast.depth) == ("holds", PINNED[0], PINNED[1])
    checked = run_check(small)
    assert checked.result.verdict == "holds"
    assert checked.reached()["ReassignmentCompleted"] is not None
    assert run_check(dc_replace(small, max_reassignments=0)).reached().get("ReassignmentCompleted") is None


# 5,109 -> 5,499 (issue 29): a re-elected leader keeps its purgatory, the answer completing a
# move carries the bumped leader epoch and the leader stays pending until the metadata,
# INVALID_UPDATE_VERSION keeps the pending ISR, and the leader's own view of fencing.
PINNED = (5499, 18)


def test_a_completed_move_is_witnessed_and_every_view_shows_the_replica_set(tmp_path):
    w = tmp_path / "w.json"
    flags = "--rf 2 --minisr 1 --brokers 3 --max-reassignments 1 --max-records 1 --max-hard-crashes 0"
    p = run_kafkamc("check", *flags.split(), "--reach", "ReassignmentCompleted", "--quiet", "--trace-out", w)
    assert p.returncode == 0 and "reached: ReassignmentCompleted; shortest witness saved" in p.stdout
    assert run_kafkamc("trace", "replay", w).returncode == 0
    shown = run_kafkamc("trace", "show", w, columns=220).stdout
    assert "AlterPartitionReassignments(target=(3, 2))" in shown
    assert "replicas 3 2 1 (adding {3}, removing {1})" in shown and "no replica (outside the replica set)" in shown
    assert "leader 1 added broker 3 to the ISR, which completed the" in shown
    html = tmp_path / "w.html"
    assert run_kafkamc("trace", "html", w, "-o", html).returncode == 0
    assert "reassign to [3,2]" in html.read_text() and "reassignment complete: [3,2]" in html.read_text()
    itf = json.loads(run_kafkamc("trace", "itf", w).stdout)
    start = itf["states"][1]
    assert start["action"] == {"type": "AlterPartitionReassignments", "target": [3, 2]}
    assert start["controller"]["replicas"] == [3, 2, 1] and start["controller"]["adding"] == {"#set": [3]}


# Issue 29: cancellation (--max-reassignment-cancels) roughly doubles the move's states: each
# cancel reverts to a partition like the one before the move, with the budget spent.
PINNED_CANCELS = (11501, 18)  # 10,395 before issue 29's AlterPartition and re-election fixes


def test_engines_agree_with_cancels():
    cfg = dc_replace(CFG, max_isr_shrinks=0, max_reassignment_cancels=1)
    fast = explore(FastModel(cfg), InvariantSuite(cfg))
    assert fast.coverage["CancelPartitionReassignment"] > 0
    assert (fast.verdict, fast.distinct_states, fast.depth) == ("holds", *PINNED_CANCELS)
    reached = run_check(cfg).reached()
    assert reached["ReassignmentCancelled"] is not None and reached["ReassignmentCompleted"] is not None


def test_a_cancel_is_witnessed_and_told(tmp_path):
    w = tmp_path / "w.json"
    flags = "--rf 2 --minisr 1 --brokers 3 --max-reassignments 1 --max-reassignment-cancels 1 --max-records 1"
    flags += " --max-hard-crashes 0"
    p = run_kafkamc("check", *flags.split(), "--reach", "ReassignmentCancelled", "--quiet", "--trace-out", w)
    assert p.returncode == 0 and "reached: ReassignmentCancelled; shortest witness saved" in p.stdout
    assert run_kafkamc("trace", "replay", w).returncode == 0
    shown = run_kafkamc("trace", "show", w, columns=220).stdout
    assert "AlterPartitionReassignments(target=(3, 2))" in shown and "CancelPartitionReassignment()" in shown
    assert "an operator cancelled the reassignment" in shown and "replicas now [2, 1]" in shown
    html = tmp_path / "w.html"
    assert run_kafkamc("trace", "html", w, "-o", html).returncode == 0
    assert "reassignment cancelled: [2,1]" in html.read_text()
