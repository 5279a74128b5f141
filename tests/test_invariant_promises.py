"""The promises that NoSplitBrain once bundled, and the ones only implied before, each on its own.

- LogMatching: two live replicas agree below both their HWs (KIP-101, KIP-279).
- ConsistentReads: a broker serving reads, a zombie included, shows only committed records.
- MaximalIsrCoversIsr: the leader's HW counts every member of the controller's ISR (KIP-497).

And the ghost they read: consumers read from every broker that believes it leads, so a
zombie's exposure counts (spec.hw.observe). Each violating state is checked three ways
(tests/invariant_helpers.py); the divergence and zombie stories replayed through the step
functions are in tests/test_invariant_scenarios.py, KIP-497's search in tests/test_protocols.py.
"""

from __future__ import annotations

import dataclasses

from invariant_helpers import ALL3, B1, B2, B3, CFG, assert_holds, assert_violation, failing, follower, healthy_state
from kafkamc.spec.config import Config
from kafkamc.spec.hw import observe
from kafkamc.spec.protocol import Protocol
from kafkamc.spec.state import UNKNOWN, Broker, Controller, Ghost, State, replace

THREE = Config(rf=3, minisr=2, max_records=3, max_clean_shutdowns=1)


def deposed(zombie_log: tuple, zombie_hw: int) -> State:
    """The controller moved leadership to broker 2 (epoch 2); broker 1 has not heard and
    still serves reads as leader of epoch 1. Records 1 and 2 were committed; leader 2 and
    follower 3 hold them but learned only HW 1 so far."""
    log = ((1, 1), (1, 2))
    return State(
        Controller(leader=2, epoch=2, pepoch=2, isr=B2 | B3, registered=ALL3, bepochs=(1, 1, 1), replicas=(1, 2, 3)),
        (
            Broker(leader=1, epoch=1, pepoch=1, isr=ALL3, log=zombie_log, hw=zombie_hw, views=(UNKNOWN, 2, 2)),
            Broker(leader=2, epoch=2, pepoch=2, isr=B2 | B3, log=log, hw=1, start=2, views=(UNKNOWN,) * 3),
            follower(2, 2, log, hw=1),
        ),
        Ghost(acked=0b11, committed=(1, 2), hw_seen=2),
        healthy_state().budget,
    )


def test_consistent_reads_a_zombie_serves_another_record():
    """Zombie 1 serves record 3 at offset 1, where record 2 was committed: a consumer whose
    metadata still names broker 1 reads a record that was never committed there. The true
    leader and the ISR hold the committed history, and no two live replicas have both
    marked offset 1 committed, so only this promise breaks."""
    s = deposed(((1, 1), (1, 3)), 2)
    assert_violation(
        THREE,
        s,
        "ConsistentReads",
        "broker 1 serves offset 1 as committed",
        {"leads[1]": True, "exposed_hw[1]": 2, "log[1][1]": 3, "committed[1]": 2},
    )
    # The same zombie serving the committed records is harmless.
    assert_holds(THREE, deposed(((1, 1), (1, 2)), 2))


def test_log_matching_near_miss_only_one_replica_marked_it_committed():
    """Divergence above a replica's HW is what truncation repairs (KIP-101): not a violation."""
    s = deposed(((1, 1), (1, 3)), 1)
    assert "LogMatching" not in failing(THREE, s)
    assert_holds(THREE, s)


def test_a_zombie_exposure_reaches_the_ghost():
    """Observation takes in every broker that serves reads: zombie 1, still at HW 2, raises
    what consumers saw and what is committed, though the true leader 2 exposes nothing yet
    (KIP-207: its HW 1 is below its epoch's start offset 2)."""
    s = replace(deposed(((1, 1), (1, 2)), 2), ghost=Ghost(acked=0b11))
    seen = observe(THREE, s).ghost
    assert (seen.committed, seen.hw_seen) == ((1, 2), 2)
    # Had the zombie learned it was deposed, only leader 2 would serve: its HW 1 commits
    # record 1, and consumers see nothing new (the ghost's initial HW seen, 0).
    learned = s.with_broker(1, follower(2, 2, ((1, 1), (1, 2)), hw=2))
    seen = observe(THREE, learned).ghost
    assert (seen.committed, seen.hw_seen) == ((1,), 0)


def maximal_state(pending: int) -> State:
    """Leader 1 has committed ISR {1,3}; the controller already holds {1,2,3} (it accepted
    the leader's proposal to add 2, whose answer is in flight when pending is set)."""
    s = healthy_state()
    b1 = replace(s.broker(1), isr=B1 | B3, pending=pending)
    return replace(s.with_broker(1, b1), controller=replace(s.controller, isr=ALL3, pepoch=3))


def test_maximal_isr_covers_the_controllers_isr():
    """KIP-497: while an addition is in flight the leader counts the proposed ISR (maximal)."""
    assert_holds(CFG, maximal_state(pending=ALL3))
    # Before KIP-497 the HW moved over the committed ISR {1,3}: member 2 is not counted.
    old = dataclasses.replace(CFG, protocol=Protocol().with_rules(hw_pending_isr="committed"))
    assert_violation(
        old,
        maximal_state(pending=ALL3),
        "MaximalIsrCoversIsr",
        "leader 1 counts ISR member 2 in its HW",
        {"in_hw_isr[1][2]": False, "in_isr[2]": True, "c_leader": 1},
    )
    # A leader that forgot its proposal breaks it under any rule.
    assert_violation(
        CFG,
        maximal_state(pending=0),
        "MaximalIsrCoversIsr",
        "leader 1 counts ISR member 2 in its HW",
        {"in_hw_isr[1][2]": False, "in_isr[2]": True},
    )
