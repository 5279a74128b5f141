"""The promises the closest peer checks that kafkamc did not state (issue 29).

Vanlightly's KIP-966 TLA+ specification (kafka-tlaplus, kip_966_properties.tla) checks, in
its names: ReplicationQuorumSupersetProperty, NoCommittedRecordLostGlobally,
MinIsrRecoveryQuorum, EventuallyUnfenced, EventuallyRuns,
AlterPartitionEpochEventuallyReachedOrZero, EventuallyMetadataConverges and
EventuallyReassignmentCompletes. Ours, in our words: MaximalIsrCoversElr, AckedWriteSurvives,
LastKnownLeaderKept (the shipped form of MinIsrRecoveryQuorum), EventuallyUnfenced,
AlterPartitionSettles, MetadataConverges, ReassignmentCompletes; EventuallyRuns does not
apply (docs/MODEL.md). Each is shown failing on a hand-built state or a mutated step, and
holding on the newest preset at small bounds.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

import pytest
from invariant_helpers import ALL3, B1, B2, B3, CFG, assert_holds, assert_violation, healthy_state, run
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.liveness.check import check_liveness, symmetry_for_liveness
from kafkamc.invariants.lasso import lasso_problem
from kafkamc.invariants.liveness import LivenessSuite
from kafkamc.jobs.run import run_check
from kafkamc.spec import alter_partition as ap
from kafkamc.spec import controller as ctl
from kafkamc.spec import next as spec_next
from kafkamc.spec.broker_lifecycle import BrokerCrash, BrokerHeartbeat, BrokerRestart, BrokerSessionTimeout
from kafkamc.spec.config import Config
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.next import describe
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import replace

# ------------------------------------------------------------------ MaximalIsrCoversElr

TWO_SHUTDOWNS = Config(rf=3, minisr=2, max_records=1, max_clean_shutdowns=2)


def below_min_isr():
    """Followers 3 then 2 shut down and their sessions time out: the controller's ISR is {1}
    and 2 entered the ELR (3 left while the ISR was still at min ISR); leader 1 has not
    applied either change and still counts {1,2,3}."""
    s = run(
        TWO_SHUTDOWNS,
        Produce(1, 1),
        BrokerCrash(3),
        BrokerSessionTimeout(3),
        BrokerCrash(2),
        BrokerSessionTimeout(2),
    )
    assert (s.controller.isr, s.controller.elr, s.broker(1).isr) == (B1, B2, ALL3)
    return s


def test_maximal_isr_covers_elr_holds_while_the_leader_lags_below_min_isr():
    assert_holds(TWO_SHUTDOWNS, below_min_isr())


def test_maximal_isr_covers_elr_a_leader_at_min_isr_that_lost_an_elr_member():
    """Leader 1 counts {1,3}, two members (min ISR), so its HW may move, but ELR member 2,
    which the controller may elect, is not among them."""
    s = below_min_isr()
    bad = s.with_broker(1, replace(s.broker(1), isr=B1 | B3))
    assert_violation(
        TWO_SHUTDOWNS,
        bad,
        "MaximalIsrCoversElr",
        "leader 1 at min ISR counts ELR member 2 in its HW",
        {"in_elr[2]": True, "in_hw_isr[1][2]": False, "knows_isr[1][3]": True, "c_leader": 1},
    )
    # Below min ISR (the leader counts itself alone) the HW stands still: nothing is promised.
    assert_holds(TWO_SHUTDOWNS, s.with_broker(1, replace(s.broker(1), isr=B1)))


# ------------------------------------------------------------------ AckedWriteSurvives

ACKS1 = Config(rf=3, minisr=2, acks="1", max_records=1)


def test_acked_write_survives_acks_1_loses_it_from_every_disk():
    """acks=1: leader 1 acknowledges r1 alone and crashes hard before anyone fetched it. No
    leader exists yet (AckedWriteDurability is silent), but no disk holds the record."""
    s = run(ACKS1, Produce(1, 1), BrokerCrash(1, keep=0))
    assert_violation(
        ACKS1,
        s,
        "AckedWriteSurvives",
        "acknowledged record 1 is on some broker's disk",
        {"acked[1]": True, "log[1][0]": 0, "log[2][0]": 0, "log[3][0]": 0},
    )
    # With acks=all the write was never acknowledged.
    assert_holds(CFG, run(CFG, Produce(1, 1), BrokerCrash(1, keep=0)))


def test_acked_write_survives_a_stopped_brokers_disk_counts():
    """Leader 1 stops cleanly with r1 flushed: its disk still holds the record."""
    cfg = Config(rf=3, minisr=2, acks="1", max_records=1, max_clean_shutdowns=1)
    assert_holds(cfg, run(cfg, Produce(1, 1), BrokerCrash(1)))


def test_acks_1_search_names_it_and_finds_the_loss_at_the_crash():
    """Named, the shortest counterexample is the crash itself (2 steps); unnamed, the check
    keeps telling the story of AckedWriteDurability at the election (4 steps, tests/test_eras.py)."""
    assert run_check(ACKS1).result.violation.invariant == "AckedWriteDurability"
    r = run_check(ACKS1, invariants=["AckedWriteSurvives"]).result
    assert (r.verdict, r.violation.invariant, r.violation.length) == ("violated", "AckedWriteSurvives", 2)
    assert [describe(a) for a, _ in r.violation.trace[1:]] == [
        "Produce(leader=1, record=1)",
        "BrokerCrash(broker=1, keep=0)",
    ]


# ------------------------------------------------------------------ LastKnownLeaderKept

# The bounds of the bug zoo's last_known_leader row: two hard crashes and a clean shutdown let
# the ISR and the ELR both empty while the last known leader is down.
LOST_LOGS = Config(rf=2, minisr=2, max_records=0, max_clean_shutdowns=1, max_hard_crashes=2, max_isr_shrinks=0)

# 2 and then 1 crash hard and are fenced (ISR {}, ELR {1,2}, last known leader 1); 1 returns
# and leaves the ELR (KAFKA-15586) but cannot lead while 2 is in it; 1 stops again; 2 returns
# and leaves the ELR: both empty, the last known leader down.
EMPTY_ISR_AND_ELR = (
    BrokerCrash(2, keep=0),
    BrokerSessionTimeout(2),
    BrokerCrash(1, keep=0),
    BrokerSessionTimeout(1),
    BrokerRestart(1),
    BrokerCrash(1),
    BrokerSessionTimeout(1),
    BrokerRestart(2),
)

# With the mutation: 1 crashes hard, is fenced into the ELR and leaves it on its return; 2
# crashes hard and is fenced (the ISR empties: 2 should be remembered); 2 returns and leaves
# the ELR, and with no last known leader nobody is elected.
FORGOTTEN = [
    "BrokerCrash(broker=1, keep=0)",
    "BrokerSessionTimeout(broker=1)",
    "BrokerRestart(broker=1)",
    "BrokerCrash(broker=2, keep=0)",
    "BrokerSessionTimeout(broker=2)",
    "BrokerRestart(broker=2)",
]


def test_last_known_leader_kept_holds_where_the_isr_and_elr_empty():
    s = run(LOST_LOGS, *EMPTY_ISR_AND_ELR)
    c = s.controller
    assert (c.leader, c.isr, c.elr, c.lastelr) == (0, 0, 0, B1)
    assert_holds(LOST_LOGS, s)
    assert run_check(LOST_LOGS).result.verdict == "holds"


def test_last_known_leader_kept_a_controller_that_forgets_it(monkeypatch):
    """Mutation: the partition change never records the last known leader. The search then
    reaches a partition with the ISR and the ELR empty and no broker to recover from."""
    keep = ctl.maintain_elr
    monkeypatch.setattr(ctl, "maintain_elr", lambda *a, **k: replace(keep(*a, **k), lastelr=0))
    r = run_check(LOST_LOGS).result
    assert (r.verdict, r.violation.invariant) == ("violated", "LastKnownLeaderKept")
    assert [describe(a) for a, _ in r.violation.trace[1:]] == FORGOTTEN


def test_last_known_leader_kept_on_the_hand_built_state():
    s = healthy_state()
    c = replace(s.controller, leader=0, epoch=2, pepoch=3, isr=0, elr=0, lastelr=B1, registered=B2 | B3)
    dead1 = replace(s.broker(1), alive=False, leader=0, views=(), vbepochs=())
    followers = [replace(s.broker(b), leader=0, epoch=2) for b in (2, 3)]
    s = replace(s, controller=c, brokers=(dead1, *followers))
    assert_holds(CFG, s)
    for lastelr in (0, B1 | B2):
        assert_violation(
            CFG,
            replace(s, controller=replace(c, lastelr=lastelr)),
            "LastKnownLeaderKept",
            "with the ISR and ELR empty, one broker is the last known leader",
            {"in_isr[1]": False, "in_elr[1]": False, "last_known[1]": bool(lastelr & B1)},
        )


# ------------------------------------------------------------------ liveness

SMALL = dict(rf=2, minisr=1, max_records=1)


def _check(names, **kw):
    cfg = symmetry_for_liveness(Config(**kw).validated())
    return cfg, check_liveness(FastModel(cfg), LivenessSuite(cfg, names))


def _mutate(monkeypatch, action_type, **changes):
    """Next with one action changed, for the search and for lasso_problem's own Model alike."""
    actions = tuple(dc_replace(a, **changes) if a.type is action_type else a for a in spec_next.NEXT)
    monkeypatch.setattr(spec_next, "NEXT", actions)


def _lasso(cfg, r):
    v = r.result.violation
    assert r.result.verdict == "violated" and v.kind == "liveness"
    assert lasso_problem(cfg, v.invariant, v.trace, v.loop) is None
    return [describe(a) for a, _ in v.trace[1:]], v.loop


NEW = ["EventuallyUnfenced", "AlterPartitionSettles", "MetadataConverges", "ReassignmentCompletes"]


@pytest.mark.parametrize(
    "kw",
    [SMALL, dict(SMALL, max_fences=1), dict(SMALL, broker_count=3, max_reassignments=1, max_hard_crashes=0)],
    ids=["small", "fence", "reassignment"],
)
def test_the_new_liveness_properties_hold_on_the_newest_preset(kw):
    _, r = _check(NEW, **kw)
    assert r.result.verdict == "holds" and set(r.verdicts.values()) == {"holds"}


def test_eventually_unfenced_a_heartbeat_that_never_unfences(monkeypatch):
    """Mutation: the controller ignores a fenced broker's heartbeats."""
    _mutate(monkeypatch, BrokerHeartbeat, step=lambda cfg, state, a: None)
    cfg, r = _check(["EventuallyUnfenced"], **SMALL, max_fences=1)
    path, loop = _lasso(cfg, r)
    # Fenced broker 1 stays fenced and goes on fetching; leader 2, whose own metadata shows it
    # fenced, never proposes it for the ISR (Partition.isReplicaIsrEligible).
    assert path == [
        "ControllerFenceBroker(broker=1)",
        "MetadataUpdate(broker=1)",
        "MetadataUpdate(broker=2)",
        "Fetch(follower=1, leader=2)",
        "Fetch(follower=1, leader=2)",
    ]
    assert loop == 4


def test_alter_partition_settles_a_leader_that_keeps_its_proposal(monkeypatch):
    """Mutation: the leader takes the controller's answer but keeps the proposal as in flight,
    so it never proposes again and nothing clears it."""

    def sticky(cfg, state, a):
        pending = state.broker(a.leader).pending
        nxt = ap.handle_alter_partition_response(cfg, state, a)
        return nxt and nxt.with_broker(a.leader, replace(nxt.broker(a.leader), pending=pending))

    _mutate(monkeypatch, ap.HandleAlterPartitionResponse, step=sticky)
    cfg, r = _check(["AlterPartitionSettles"], **SMALL)
    path, loop = _lasso(cfg, r)
    # The shrink is answered, the proposal stays pending, and follower 2 fetches forever.
    assert path == [
        "ReplicaStall(follower=2)",
        "AlterPartition(leader=1, isr=(1,))",
        "HandleAlterPartitionResponse(leader=1)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=2, leader=1)",
    ]
    assert loop == 4


def test_metadata_converges_a_broker_that_never_applies_metadata(monkeypatch):
    """Mutation: metadata propagation is no longer fair (it may never come)."""
    _mutate(monkeypatch, MetadataUpdate, fairness="none")
    cfg, r = _check(["MetadataConverges"], **SMALL)
    path, loop = _lasso(cfg, r)
    assert "MetadataUpdate" not in " ".join(path[loop:])


def test_reassignment_completes_a_controller_that_never_completes_it(monkeypatch):
    """Mutation: the partition change never completes a reassignment (reach.ReassignmentCompleted
    would be unreachable too; this says the move is stuck forever)."""
    monkeypatch.setattr(ctl, "complete_reassignment", lambda cfg, c: c)
    cfg, r = _check(["ReassignmentCompletes"], **SMALL, broker_count=3, max_reassignments=1, max_hard_crashes=0)
    path, loop = _lasso(cfg, r)
    # Broker 3 replaces leader 1 and joins the ISR; the move never completes.
    assert path[1:7] == [
        "AlterPartitionReassignments(target=(3, 2))",
        "MetadataUpdate(broker=1)",
        "MetadataUpdate(broker=3)",
        "Fetch(follower=3, leader=1)",
        "AlterPartition(leader=1, isr=(1, 2, 3))",
        "HandleAlterPartitionResponse(leader=1)",
    ]


def test_the_new_invariants_hold_on_the_newest_preset_at_small_bounds():
    """Named, so that AckedWriteSurvives (checked only when named) is in too. The default
    bounds (--rf 3 --minisr 2) take minutes here: run by hand for issue 29, not in the suite."""
    names = ["MaximalIsrCoversElr", "AckedWriteSurvives", "LastKnownLeaderKept"]
    for cfg in (Config(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1), LOST_LOGS):
        assert run_check(cfg, invariants=names).result.verdict == "holds", cfg
