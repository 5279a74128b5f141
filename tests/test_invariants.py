"""Each invariant against a hand-built state that breaks it the way a Kafka engineer knows it.

Every violating state is checked three ways: the compiled fast path reports it, Z3 itself
evaluates the declared formula to false, and the explanation names the failing part with
the offending values. Where the state is one the model can really reach (an unsafe
configuration: acks=1, min.insync.replicas=1 with unclean election), the test also replays
the Kafka story through the model's step function and checks that it lands on exactly the
hand-built state, so the hand-built states are not fantasies. States that only a buggy
step could produce (two leaders in one epoch, a HW above the LEO, ...) are built by
corrupting one field of a reachable state.

The model's defaults changed with ELR (KIP-966): clean shutdowns cost max_clean_shutdowns (default 0),
an ISR shrink needs the follower to have stalled first (isr_lag="time"), and a fenced last ISR
member leaves the ISR. Stories that need the old behaviour say so in their Config. A crashed
broker stays registered until its session times out (BrokerSessionTimeout, the controller's
fence); stories in which the controller reacts to a crash take that step after it.

This file holds the healthy states, WellFormed and the suite's own mechanics (explanations,
the changed-components test, the catalog guard); the stories that break the other invariants
are in tests/test_invariant_scenarios.py, and what both share in tests/invariant_helpers.py.
"""

from __future__ import annotations

import dataclasses

import pytest
from invariant_helpers import (
    ALL3,
    B1,
    B2,
    B3,
    CFG,
    ELR_OFF,
    HEALTHY_TRACE,
    SHRINK_TO_LEADER,
    UNCLEAN,
    assert_holds,
    assert_violation,
    dead,
    failing,
    healthy_state,
    run,
    suite,
)
from kafkamc.invariants.catalog import INVARIANTS, well_formed
from kafkamc.invariants.view import View
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import BrokerCrash, BrokerSessionTimeout
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.hw import observe
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import NO_LEADER, initial_state, replace

# ---------------------------------------------------------------- healthy states


@pytest.mark.parametrize("rf", [1, 2, 3, 4, 5])
def test_initial_state_passes_every_invariant(rf):
    cfg = Config(rf=rf, minisr=1)
    s0 = initial_state(rf)
    assert_holds(cfg, s0)
    # The action property holds for the stutter from the initial state too.
    assert suite(cfg).check_step(s0, s0) is None
    assert suite(cfg).evaluate_z3("HighWatermarkMonotonic", s0, s0) is True


def test_healthy_replicated_state_passes_every_invariant():
    s = healthy_state()
    assert run(CFG, *HEALTHY_TRACE) == s  # the hand-built state is what the model reaches
    assert_holds(CFG, s)
    assert failing(CFG, s) == set()
    # Every step along the way keeps the HW monotonic.
    prev = initial_state(3)
    for a in HEALTHY_TRACE:
        nxt = run(CFG, a, state=prev)
        assert suite(CFG).check_step(prev, nxt) is None
        assert suite(CFG).evaluate_z3("HighWatermarkMonotonic", nxt, prev) is True
        prev = nxt


def test_explain_refuses_a_state_that_holds():
    from kafkamc.invariants.suite import Disagreement

    with pytest.raises(Disagreement):
        suite(CFG, "NoCommittedDataLoss").explain("NoCommittedDataLoss", healthy_state())


# ---------------------------------------------------------------- WellFormed


def _committed_one():
    return run(CFG, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1))


def test_well_formed_hw_above_leo():
    """Broker 3 crashed losing its unflushed record (only 0 records survive), but its HW
    checkpoint still says 1: recovery must cut the HW to the surviving log (the model's
    BrokerCrash does min(hw, keep))."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_hard_crashes=1)
    good = run(cfg, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1), BrokerCrash(3, keep=0))
    assert good.broker(3) == dead(hw=0, clean=False) and failing(cfg, good) == set()
    s = good.with_broker(3, replace(good.broker(3), hw=1))
    assert_violation(cfg, s, "WellFormed", "0 <= hw[3] <= leo[3]", {"hw[3]": 1, "leo[3]": 0})


def test_well_formed_record_twice_in_a_log():
    """Follower 2 appended the same fetch response twice (a fetch whose offset it did not
    check against its LEO): record 1 sits at offsets 0 and 1."""
    base = _committed_one()
    s = base.with_broker(2, replace(base.broker(2), log=((1, 1), (1, 1))))
    assert_violation(
        CFG, s, "WellFormed", "log[2] holds a record once (offsets 0, 1)", {"log[2][0]": 1, "log[2][1]": 1}
    )


def test_well_formed_isr_empty():
    """Without ELR: leader 1 had shrunk the ISR to itself and shut down; the controller must
    keep the last ISR member (the partition goes offline, leader -1) but here it removed it too."""
    cfg = dataclasses.replace(CFG, protocol=ELR_OFF)
    good = run(cfg, *SHRINK_TO_LEADER, BrokerCrash(1), BrokerSessionTimeout(1))
    assert good.controller.leader == NO_LEADER and good.controller.isr == B1
    assert failing(cfg, good) == set()
    s = replace(good, controller=replace(good.controller, isr=0))
    assert_violation(
        cfg, s, "WellFormed", "the ISR is not empty", {"in_isr[1]": False, "in_isr[2]": False, "in_isr[3]": False}
    )
    # With ELR the same story empties the ISR, and that is well formed: broker 3, which left
    # the ISR below min.insync.replicas, is in the ELR and is elected from it.
    elr = run(CFG, *SHRINK_TO_LEADER, BrokerCrash(1), BrokerSessionTimeout(1))
    assert elr.controller.leader == 3 and elr.controller.isr == B3 and elr.controller.elr == B1
    assert failing(CFG, elr) == set()
    # ... and with min.insync.replicas=1 nothing is eligible: the ISR stays empty, offline.
    cfg1 = dataclasses.replace(CFG, minisr=1)
    offline = run(cfg1, *SHRINK_TO_LEADER, BrokerCrash(1), BrokerSessionTimeout(1))
    c = offline.controller
    assert (c.leader, c.isr, c.elr, c.lastelr) == (NO_LEADER, 0, B1, B1)
    assert failing(cfg1, offline) == set()


def test_well_formed_leader_outside_isr():
    """Broker 2 was dropped from the ISR as lagging; when leader 1 crashes and its session times
    out the controller (without unclean election) must pick broker 3, but here it picked broker 2."""
    good = run(
        CFG,
        ReplicaStall(2),
        AlterPartition(1, (1, 3)),
        HandleAlterPartitionResponse(1),
        BrokerCrash(1),
        BrokerSessionTimeout(1),
    )
    # Broker 1 left the ISR {1, 3} below min.insync.replicas=2: it is in the ELR now.
    assert good.controller.leader == 3 and good.controller.isr == B3 and good.controller.elr == B1
    s = replace(good, controller=replace(good.controller, leader=2))
    assert_violation(
        CFG,
        s,
        "WellFormed",
        "the controller's leader is in the ISR",
        {"c_leader": 2, "in_isr[2]": False, "in_isr[3]": True},
    )


def test_well_formed_isr_and_elr_overlap():
    """KIP-966: leader 1 shrank the ISR {1, 3} to itself, below min.insync.replicas=2, so
    broker 3 moved to the ELR. A controller that put 3 back in the ISR must take it out of
    the ELR; here it stays in both."""
    good = run(CFG, *SHRINK_TO_LEADER)
    assert good.controller.isr == B1 and good.controller.elr == B3
    assert failing(CFG, good) == set()
    s = replace(good, controller=replace(good.controller, isr=B1 | B3))
    assert_violation(
        CFG,
        s,
        "WellFormed",
        "broker 3 is not in the ISR and the ELR at once",
        {"in_isr[3]": True, "in_elr[3]": True},
        also={"MaximalIsrCoversIsr"},  # leader 1 never learned of 3's return
    )
    # Without ELR the controller keeps no ELR at all.
    cfg = dataclasses.replace(CFG, protocol=ELR_OFF)
    off = run(cfg, *SHRINK_TO_LEADER)
    assert off.controller.isr == B1 and off.controller.elr == 0
    s = replace(off, controller=replace(off.controller, elr=B3))
    assert_violation(cfg, s, "WellFormed", "broker 3 is in no ELR with ELR off", {"in_elr[3]": True})


def test_well_formed_fenced_last_isr_member_with_elr():
    """min.insync.replicas=1: leader 1, alone in the ISR, shuts down. Without ELR the
    controller keeps the fenced broker as the last ISR member; with ELR it moves it to the
    ELR and the ISR empties. The pre-KIP-966 state is malformed under ELR rules."""
    off_cfg = dataclasses.replace(CFG, minisr=1, protocol=ELR_OFF)
    on_cfg = dataclasses.replace(CFG, minisr=1)
    kept = run(off_cfg, *SHRINK_TO_LEADER, BrokerCrash(1), BrokerSessionTimeout(1))
    c = kept.controller
    assert (c.leader, c.isr, c.elr, c.registered) == (NO_LEADER, B1, 0, B2 | B3)
    assert failing(off_cfg, kept) == set()
    assert_violation(
        on_cfg, kept, "WellFormed", "fenced broker 1 is not in the ISR", {"in_isr[1]": True, "registered[1]": False}
    )
    # The ELR model's own state for the story passes; under the old rules it has an empty ISR.
    moved = run(on_cfg, *SHRINK_TO_LEADER, BrokerCrash(1), BrokerSessionTimeout(1))
    assert moved.controller.isr == 0 and moved.controller.elr == B1
    assert failing(on_cfg, moved) == set()
    assert_violation(
        off_cfg,
        moved,
        "WellFormed",
        "the ISR is not empty",
        {"in_isr[1]": False, "in_isr[2]": False, "in_isr[3]": False},
        parts={"the ISR is not empty", "broker 1 is in no ELR with ELR off"},
    )


def test_well_formed_dead_broker_registered():
    """Not a violation: a crashed broker stays registered, in the ISR and even the leader, until
    its session times out (broker.session.timeout.ms); only then does the controller fence it.
    WellFormed once required a dead broker to be fenced, as when the crash fenced at once."""
    follower_down = run(CFG, BrokerCrash(3))
    c = follower_down.controller
    assert not follower_down.broker(3).alive and c.registered == ALL3 and c.isr == ALL3
    assert failing(CFG, follower_down) == set()
    assert_holds(CFG, follower_down)
    # The dead leader too: the controller still names it, and the partition is offline in
    # practice until the fence elects another leader.
    leader_down = run(CFG, BrokerCrash(1))
    assert leader_down.controller.leader == 1 and leader_down.controller.registered & B1
    assert failing(CFG, leader_down) == set()
    fenced = run(CFG, BrokerSessionTimeout(1), state=leader_down)
    assert not fenced.controller.registered & B1 and fenced.controller.leader == 2
    assert failing(CFG, fenced) == set()
    # No part of WellFormed speaks of dead brokers any more.
    parts = [name for name, _formula in well_formed(CFG, View(CFG))]
    assert parts and not any("dead" in name for name in parts)


def test_well_formed_recovering_with_two_isr_members():
    """Leader 1, alone in the ISR (min.insync.replicas=1), shuts down; once its session times
    out broker 2 is elected uncleanly and the partition is RECOVERING with the ISR {2}. It recovers only through
    its leader's first accepted AlterPartition; a RECOVERING partition with two ISR members
    is one the controller never builds."""
    good = run(UNCLEAN, *SHRINK_TO_LEADER, BrokerCrash(1), BrokerSessionTimeout(1))
    c = good.controller
    assert (c.leader, c.isr, c.recovering) == (2, B2, True)
    assert failing(UNCLEAN, good) == set()
    s = replace(good, controller=replace(c, isr=B2 | B3))
    assert_violation(
        UNCLEAN,
        s,
        "WellFormed",
        "a RECOVERING partition has at most one ISR member (2, 3)",
        {"c_recovering": True, "in_isr[2]": True, "in_isr[3]": True},
    )
    # The real way out: broker 3 follows and fetches, leader 2 adds it; the partition recovers.
    prev = run(UNCLEAN, MetadataUpdate(2), MetadataUpdate(3), Fetch(3, 2), state=good)
    nxt = run(UNCLEAN, AlterPartition(2, (2, 3)), state=prev)
    c = nxt.controller
    assert (c.isr, c.recovering) == (B2 | B3, False)
    assert failing(UNCLEAN, nxt) == set()
    reach = dict(suite(UNCLEAN).reach_functions())
    assert reach["Recovered"](prev, nxt) is True
    assert suite(UNCLEAN).confirm_reached("Recovered", nxt, prev) is True


def test_well_formed_record_from_a_future_epoch():
    """A follower holds a record stamped with leader epoch 3 while the controller is at
    epoch 1: no leader of epoch 3 ever existed to write it."""
    base = _committed_one()
    s = base.with_broker(3, replace(base.broker(3), log=((1, 1), (3, 2)), cache=((1, 0), (3, 1))))
    assert_violation(
        CFG,
        s,
        "WellFormed",
        "log[3][1] was written in a leader epoch that exists",
        {"leo[3]": 2, "logep[3][1]": 3, "c_epoch": 1},
    )


def test_state_test_reads_only_the_changed_components():
    """The search tests a new state only on the parts that read what its step changed
    (its parent passed them all): broker 3's broken HW is seen by the test of a step that
    changed broker 3 (or of unknown changes, -1), not by that of a step that changed only
    broker 1, the controller or the ghost; a rewritten ghost is seen by the ghost's test."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_hard_crashes=1)
    good = run(cfg, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1), BrokerCrash(3, keep=0))
    bad = good.with_broker(3, replace(good.broker(3), hw=1))
    s = suite(cfg)
    ghost = 1 << (cfg.rf + 1)
    assert all(s.state_test(changed)(good) for changed in (-1, 1, 2, 4, 8, ghost))
    assert [s.state_test(changed)(bad) for changed in (-1, 8, 8 | 2, 2, 1, ghost)] == [
        False,
        False,
        False,
        True,
        True,
        True,
    ]
    assert s.check_state(bad) == "WellFormed"
    assert s.state_test(0)(bad) and s.state_test(-1) is s._all_states
    # A ghost that says another record was committed: every part comparing a log with it fails.
    rewritten = replace(good, ghost=replace(good.ghost, committed=(2,)))
    assert not s.state_test(ghost)(rewritten) and s.state_test(1 << (cfg.rf + 2))(rewritten)


def test_quiet_test_groups_read_few_components_of_each_state():
    """The native core remembers the quiet test's verdicts per group of conjuncts, keyed on
    the components each reads in the step's two states (bits 0-5 the state before: controller,
    brokers 1-3, ghost, budget; bits 6-11 the state after). At rf 3, with fences: HW
    monotonicity reads the ghost before and the controller, one broker and the ghost after;
    the unreached properties split per broker (HealthyFollowerShrunk's Or over followers, four
    components each); for a step that keeps the controller only the HW parts are left."""
    cfg = Config(rf=3, minisr=2, max_fences=1)
    s = suite(cfg)
    names = ["HighWatermarkAdvances", "ElrElection", "RecoveringElection", "Recovered", "HealthyFollowerShrunk"]
    moved, same = s.quiet_step(names).groups
    hw = [0b10011010000, 0b10101010000, 0b11001010000]
    assert sorted(same) == sorted([0b10000010000, *hw])
    assert sorted(moved) == sorted([0b1000001, 0b11000011, 0b101000101, 0b1001001001, 0b10000010000, *hw])
    assert s.quiet_step([]).groups == (tuple(hw), tuple(hw))


def test_consumers_saw_uncommitted_hw():
    """A corrupted ghost: consumers are recorded as having read HW 2 while only one record
    was committed and the leader's HW is 1. WellFormed no longer has a part for this (the
    catalog dropped "consumers never saw an HW above what was committed"); the leader's
    next step is judged a regression of the HW consumers can read."""
    base = _committed_one()
    s = replace(base, ghost=replace(base.ghost, hw_seen=2))
    nxt = run(CFG, Fetch(2, 1), state=s)  # a step that leaves the leader's HW at 1
    assert nxt.true_leader() == 1 and nxt.broker(1).hw == 1
    name = "HighWatermarkMonotonic"
    hwm = suite(CFG, name)
    assert hwm.check_step(s, nxt) == name
    assert hwm.evaluate_z3(name, nxt, s) is False
    exp = hwm.explain(name, nxt, s)
    assert [p.name for p in exp.parts] == ["HW exposed by leader 1 is not below the HW consumers saw before"]
    assert exp.parts[0].values["prev.hw_seen"] == 2 and exp.parts[0].values["exposed_hw[1]"] == 1


def test_every_invariant_has_a_violation_test():
    """Guard: a new invariant in the catalog needs a test here."""
    covered = {
        "NoCommittedDataLoss",
        "LeaderCompleteness",
        "EligibleReplicasComplete",  # tests/test_invariant_scenarios.py
        "AckedWriteDurability",
        "HighWatermarkMonotonic",
        "NoSplitBrain",
        "LogMatching",  # tests/test_invariant_scenarios.py
        "ConsistentReads",  # tests/test_invariant_scenarios.py
        "MaximalIsrCoversIsr",  # tests/test_invariant_scenarios.py
        "MaximalIsrCoversElr",  # tests/test_peer_properties.py
        "AckedWriteSurvives",  # tests/test_peer_properties.py
        "LastKnownLeaderKept",  # tests/test_peer_properties.py
        "WellFormed",
    }
    assert {inv.name for inv in INVARIANTS} == covered


def test_committed_record_is_extended_never_rewritten():
    """A true leader exposing a different history must not overwrite the committed ghost."""
    s = healthy_state()
    other = ((2, 3), (2, 4), (2, 5))
    s = replace(s, brokers=(replace(s.broker(1), log=other, hw=3, cache=((2, 0),), epoch=1),) + s.brokers[1:])
    after = observe(CFG, s)
    assert after.ghost.committed == (1, 2)
    assert "NoCommittedDataLoss" in failing(CFG, after)


def test_action_property_needs_the_previous_state():
    s = initial_state(3)
    with pytest.raises(ValueError, match="pass the state before it"):
        suite(CFG).evaluate_z3("HighWatermarkMonotonic", s)
    with pytest.raises(ValueError):
        suite(CFG).explain("HighWatermarkMonotonic", s)
    assert suite(CFG).evaluate_z3("HighWatermarkMonotonic", s, s)
