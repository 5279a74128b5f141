"""Protocol rules and era presets: the bug zoo.

Each historical rule, switched back to its old behaviour on top of the newest preset,
must produce the violation its KIP or JIRA describes, at bounds where the newest preset
holds. The shortest counterexample's invariant, length and path are pinned, so that each
reads as the bug as its KIP or JIRA tells it (the README's bug zoo tells each in Kafka's
words); if a spec change moves one, the change must say why.

Issue 15 moved most pins (old -> new, and why):
- every path that fences a crashed broker gained a BrokerSessionTimeout step per crash: a
  crashed broker stays registered until its session times out, and only that step fences it
  (consumer_hw 7 -> 8, elr=off 10 -> 11, isr_join_broker_epoch 9 -> 10, truncation=leader_epoch
  and isr_join=hw 12 -> 14, the oldest preset 7 -> 8, the expected losses 5 -> 6, 8 -> 9,
  3 -> 4, 10 -> 12, 3 -> 4 and 7 -> 9, the era sweep's lengths by one);
- a fetch answer carries the HW from before the fetch's own update, so a follower learns
  an HW one fetch later: the KIP-101 window, in which truncation=hw now loses a committed
  record after a plain restart;
- the new invariant EligibleReplicasComplete (KIP-966's promise) reports an ELR member
  without a committed record when it happens, before anyone elects it: truncation=hw
  NoCommittedDataLoss 11 -> EligibleReplicasComplete 6, hw_min_isr=any NoCommittedDataLoss 8
  -> EligibleReplicasComplete 7 (now without any crash);
- the HW checkpoint and the rules hw_joining_replica and last_known_leader (new rows) moved
  no pinned length.

Issue 29 moved these: a shrink drops both stalled followers in one request, so
hw_min_isr=any needs one request, not two (EligibleReplicasComplete 7 -> 5, both followers in
the ELR) and elr=off's path drops both at once (length 11 kept); the leader proposes a
follower only once its own metadata shows it unfenced, so the paths that restart a fenced
follower and add it back apply the metadata after the restart (isr_join_broker_epoch and the
oldest preset at RF 2: same lengths, steps reordered).
"""

from __future__ import annotations

import pytest
from kafkamc.jobs.run import run_check
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.next import describe
from kafkamc.spec.protocol import (
    OLDEST,
    PRESETS,
    Protocol,
    parse_rule,
    preset,
)
from kafkamc.spec.state import bit

# Bounds, each small enough for the fast suite unless marked.
ONE_HARD_CRASH = dict(rf=3, minisr=2, max_records=1, max_clean_shutdowns=0, max_hard_crashes=1, max_isr_shrinks=2)
SHUTDOWN_AND_HARD_CRASH = dict(
    rf=3, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=1, max_isr_shrinks=0
)
TWO_SHUTDOWNS_RF2 = dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1)
ONE_SHUTDOWN = dict(rf=3, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_isr_shrinks=0)
TWO_SHUTDOWNS_RF3 = dict(rf=3, minisr=2, max_records=2, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1)
NO_CRASH = dict(rf=3, minisr=2, max_records=1, max_clean_shutdowns=0, max_hard_crashes=0, max_isr_shrinks=2)
LOST_LOGS = dict(rf=2, minisr=2, max_records=0, max_clean_shutdowns=1, max_hard_crashes=2, max_isr_shrinks=0)

# (rule=old value, bounds, invariant its KIP/JIRA describes, shortest counterexample length)
ZOO = [
    # KIP-101: a follower truncates to its own lagging HW after a restart, while electable (in the ELR).
    ("truncation=hw", TWO_SHUTDOWNS_RF2, "EligibleReplicasComplete", 6),
    # KIP-497: the HW moves over the committed ISR while an expansion is in flight.
    ("hw_pending_isr=committed", ONE_HARD_CRASH, "MaximalIsrCoversIsr", 5),
    # KAFKA-15583: the HW moves with the ISR below min ISR, past what an ELR member holds.
    ("hw_min_isr=any", NO_CRASH, "EligibleReplicasComplete", 5),
    # KIP-903: a broker that lost its log rejoins the ISR on fetch state from its previous life.
    ("isr_join_broker_epoch=unchecked", SHUTDOWN_AND_HARD_CRASH, "NoCommittedDataLoss", 10),
    # KIP-207: a new leader exposes an HW below what consumers already saw.
    ("consumer_hw=leader_hw", ONE_HARD_CRASH, "HighWatermarkMonotonic", 8),
    # KIP-966: the last ISR member loses its unflushed tail and is elected again.
    ("elr=off", ONE_HARD_CRASH, "HighWatermarkMonotonic", 11),
    # KAFKA-19522 (the 4.0.0 preset): a fenced last known leader is elected, alone in the ISR.
    ("last_known_leader=any", LOST_LOGS, "WellFormed", 8),
    # KIP-279: one OffsetsForLeaderEpoch answer leaves logs diverged after fast leader changes.
    pytest.param("truncation=leader_epoch", TWO_SHUTDOWNS_RF3, "NoCommittedDataLoss", 14, marks=pytest.mark.slow),
    # KAFKA-7128: a follower joins the ISR at a lagging HW, below the new epoch's start offset.
    pytest.param("isr_join=hw", TWO_SHUTDOWNS_RF3, "NoCommittedDataLoss", 14, marks=pytest.mark.slow),
]

# The shortest counterexample of each row, step by step (the README tells each in Kafka's words).
PATHS = {
    # Broker 2's second fetch commits r1 but is answered with the HW read before it (0); it
    # shuts down with HW 0, its session times out (ISR {1} below min ISR: 2 enters the ELR),
    # and on restart it truncates to its own HW, dropping committed r1 while in the ELR.
    "truncation=hw": (
        "Produce(leader=1, record=1)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=2, leader=1)",
        "BrokerCrash(broker=2)",
        "BrokerSessionTimeout(broker=2)",
        "BrokerRestart(broker=2)",
    ),
    # 2 stalls and leaves the ISR; it fetches again and the leader proposes it back. The
    # controller commits {1,2,3} at once, while the leader's HW still moves over {1,3} until
    # the answer arrives: the promise KIP-497's maximal ISR keeps is broken (the loss it
    # leads to: test_kip_497_the_hw_passes_a_member_without_the_record).
    "hw_pending_isr=committed": (
        "ReplicaStall(follower=2)",
        "AlterPartition(leader=1, isr=(1, 3))",
        "HandleAlterPartitionResponse(leader=1)",
        "Fetch(follower=2, leader=1)",
        "AlterPartition(leader=1, isr=(1, 2, 3))",
    ),
    # Both followers stall before fetching r1; one request shrinks the ISR to {1} (2 and 3
    # enter the ELR) and the HW moves to 1 with the leader alone: the ELR members lack
    # committed r1.
    "hw_min_isr=any": (
        "Produce(leader=1, record=1)",
        "ReplicaStall(follower=2)",
        "ReplicaStall(follower=3)",
        "AlterPartition(leader=1, isr=(1,))",
        "HandleAlterPartitionResponse(leader=1)",
    ),
    # 2 reaches offset 1, crashes hard with nothing flushed and is fenced out of the ISR; it
    # restarts empty, and the leader, once its metadata shows 2 unfenced, adds it back on the
    # position of its previous life (the late fetch KIP-903 guards against); 3's fetches then
    # commit r1, which 2 lacks.
    "isr_join_broker_epoch=unchecked": (
        "Produce(leader=1, record=1)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=2, leader=1)",
        "BrokerCrash(broker=2, keep=0)",
        "BrokerSessionTimeout(broker=2)",
        "BrokerRestart(broker=2)",
        "MetadataUpdate(broker=1)",
        "AlterPartition(leader=1, isr=(1, 2, 3))",
        "Fetch(follower=3, leader=1)",
        "Fetch(follower=3, leader=1)",
    ),
    # r1 is committed and read by consumers (HW 1) while both followers' HWs are still 0; the
    # leader crashes, 2 is elected and exposes HW 0.
    "consumer_hw=leader_hw": (
        "Produce(leader=1, record=1)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=3, leader=1)",
        "Fetch(follower=3, leader=1)",
        "BrokerCrash(broker=1, keep=0)",
        "BrokerSessionTimeout(broker=1)",
        "MetadataUpdate(broker=2)",
    ),
    # One request shrinks the ISR to the leader alone; while it is in flight both followers'
    # fetches commit r1 over the maximal ISR; the leader crashes hard with r1 unflushed, stays
    # the last ISR member when fenced, and restarts into leadership with an empty log.
    "elr=off": (
        "Produce(leader=1, record=1)",
        "Fetch(follower=2, leader=1)",
        "ReplicaStall(follower=2)",
        "Fetch(follower=3, leader=1)",
        "ReplicaStall(follower=3)",
        "AlterPartition(leader=1, isr=(1,))",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=3, leader=1)",
        "BrokerCrash(broker=1, keep=0)",
        "BrokerSessionTimeout(broker=1)",
        "BrokerRestart(broker=1)",
    ),
    # tests/test_era_4_0.py tells it: the last known leader 2 is fenced when broker 1's
    # unclean restart empties the ELR, and is elected anyway.
    "last_known_leader=any": (
        "BrokerCrash(broker=1, keep=0)",
        "BrokerSessionTimeout(broker=1)",
        "BrokerCrash(broker=2, keep=0)",
        "BrokerSessionTimeout(broker=2)",
        "BrokerRestart(broker=2)",
        "BrokerCrash(broker=2)",
        "BrokerSessionTimeout(broker=2)",
        "BrokerRestart(broker=1)",
    ),
    # r1 (epoch 1) reaches 3 only; 2 leads epoch 2 and writes r2 at offset 0; 3 leads epoch 3;
    # 2 asks OffsetsForLeaderEpoch for epoch 2, gets epoch 1's end offset 1 and keeps r2 there
    # without checking the epoch (before KIP-279); it rejoins the ISR and r1 is committed
    # over logs that differ at offset 0.
    "truncation=leader_epoch": (
        "Produce(leader=1, record=1)",
        "Fetch(follower=3, leader=1)",
        "BrokerCrash(broker=1)",
        "BrokerSessionTimeout(broker=1)",
        "MetadataUpdate(broker=2)",
        "Produce(leader=2, record=2)",
        "BrokerCrash(broker=2)",
        "BrokerSessionTimeout(broker=2)",
        "BrokerRestart(broker=2)",
        "MetadataUpdate(broker=3)",
        "OffsetsForLeaderEpoch(follower=2, leader=3)",
        "Fetch(follower=2, leader=3)",
        "AlterPartition(leader=3, isr=(2, 3))",
        "HandleAlterPartitionResponse(leader=3)",
    ),
    # r1 and r2 are committed over ISR {1,2}; 2 becomes leader with its HW still 0 and epoch
    # 2 starting at offset 2; 3 fetches r1 alone and joins the ISR at offset 0 (at the
    # lagging HW, below the epoch's start offset) without committed r2.
    "isr_join=hw": (
        "Produce(leader=1, record=1)",
        "Produce(leader=1, record=2)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=2, leader=1)",
        "ReplicaStall(follower=3)",
        "AlterPartition(leader=1, isr=(1, 2))",
        "HandleAlterPartitionResponse(leader=1)",
        "BrokerCrash(broker=1)",
        "BrokerSessionTimeout(broker=1)",
        "MetadataUpdate(broker=2)",
        "MetadataUpdate(broker=3)",
        "Fetch(follower=3, leader=2)",
        "AlterPartition(leader=2, isr=(2, 3))",
    ),
}

# Old behaviours that find nothing on top of the newest preset, and why (see the README).
HARMLESS_ON_NEWEST = [
    # the diverging-epoch check in Fetch still catches a follower on a stale epoch
    pytest.param("fetch_fencing=none", ONE_HARD_CRASH, marks=pytest.mark.slow),
    ("fetch_fencing=none", TWO_SHUTDOWNS_RF2),
    ("isr_update=zookeeper", ONE_HARD_CRASH),  # a synchronous ISR write has no in-flight window
    # the same truncation point as the diverging epoch, one more round trip
    pytest.param("truncation=leader_epoch_kip279", ONE_HARD_CRASH, marks=pytest.mark.slow),
    ("truncation=leader_epoch_kip279", TWO_SHUTDOWNS_RF2),
    pytest.param("isr_lag=messages", ONE_HARD_CRASH, marks=pytest.mark.slow),  # operability, not safety
    # Fixes to the OffsetsForLeaderEpoch path; the diverging epoch in every fetch covers both.
    ("leader_epoch_cache=on_append", TWO_SHUTDOWNS_RF2),  # KAFKA-7415
    ("truncate_on=leader_change", TWO_SHUTDOWNS_RF2),  # KAFKA-7164
    pytest.param("truncate_on=leader_change", ONE_HARD_CRASH, marks=pytest.mark.slow),
    # KAFKA-4485 and KAFKA-15021 keep the HW from running ahead of a joining follower, or from
    # waiting for one that cannot join: availability, not safety. The ISR (maximal while an
    # addition is in flight) already holds the HW wherever a member could lack a record.
    ("hw_joining_replica=ignore", TWO_SHUTDOWNS_RF2),
    ("hw_joining_replica=ignore", NO_CRASH),
    ("hw_joining_replica=ignore", LOST_LOGS),
    pytest.param("hw_joining_replica=ignore", ONE_HARD_CRASH, marks=pytest.mark.slow),
    pytest.param("hw_joining_replica=ignore", SHUTDOWN_AND_HARD_CRASH, marks=pytest.mark.slow),
    ("hw_joining_replica=wait", TWO_SHUTDOWNS_RF2),
    ("hw_joining_replica=wait", NO_CRASH),
    ("hw_joining_replica=wait", LOST_LOGS),
    pytest.param("hw_joining_replica=wait", ONE_HARD_CRASH, marks=pytest.mark.slow),
    pytest.param("hw_joining_replica=wait", SHUTDOWN_AND_HARD_CRASH, marks=pytest.mark.slow),
]
LAG = dict(rf=2, minisr=1, max_records=2, max_clean_shutdowns=0, max_hard_crashes=0, max_isr_shrinks=1)


def _with(rule: str) -> Protocol:
    name, value = parse_rule(rule)
    return Protocol().with_rules(**{name: value})


def _path(violation) -> tuple:
    return tuple(describe(a) for a, _ in violation.trace[1:])


@pytest.mark.parametrize(
    "bounds",
    [
        pytest.param(ONE_HARD_CRASH, marks=pytest.mark.slow),
        pytest.param(SHUTDOWN_AND_HARD_CRASH, marks=pytest.mark.slow),
        pytest.param(TWO_SHUTDOWNS_RF3, marks=pytest.mark.slow),
        TWO_SHUTDOWNS_RF2,
        ONE_SHUTDOWN,
        NO_CRASH,
        LOST_LOGS,
    ],
)
def test_newest_holds_where_the_zoo_runs(bounds):
    run = run_check(Config(**bounds))
    assert run.result.verdict == "holds"
    assert run.vacuity_warnings() == []


@pytest.mark.parametrize("rule,bounds,invariant,length", ZOO)
def test_old_rule_reproduces_its_bug(rule, bounds, invariant, length):
    run = run_check(Config(protocol=_with(rule), **bounds))
    v = run.result.violation
    assert run.result.verdict == "violated"
    assert (v.invariant, v.length) == (invariant, length)
    assert _path(v) == PATHS[rule]
    assert run.summary()["protocol"]["rules"][rule.split("=")[0]] == rule.split("=")[1]


@pytest.mark.parametrize("rule,bounds", HARMLESS_ON_NEWEST)
def test_old_rules_without_a_bug_on_newest(rule, bounds):
    assert run_check(Config(protocol=_with(rule), **bounds)).result.verdict == "holds"


def test_every_zoo_row_has_its_path():
    rules = [p.values[0] if hasattr(p, "values") else p[0] for p in ZOO]
    assert sorted(rules) == sorted(PATHS)
    # That row is the 4.0.0 preset, but for a reassignment rule its bounds never exercise.
    assert _with("last_known_leader=any").differences(PRESETS["4.0.0"]) == {
        "reassignment_completion": "adding_unless_shrinking"
    }


def test_kip_497_the_hw_passes_a_member_without_the_record():
    """KIP-497's loss, told whole: 2 leaves the ISR and is proposed back while its fetch
    position is 0; 3's fetches move the HW over the committed ISR {1,3}, and the controller's
    ISR {1,2,3} holds 2 without committed r1."""
    run = run_check(
        Config(protocol=_with("hw_pending_isr=committed"), **ONE_HARD_CRASH), invariants=["NoCommittedDataLoss"]
    )
    v = run.result.violation
    assert (v.invariant, v.length) == ("NoCommittedDataLoss", 8)
    assert _path(v) == (
        "Fetch(follower=2, leader=1)",
        "Produce(leader=1, record=1)",
        "ReplicaStall(follower=2)",
        "AlterPartition(leader=1, isr=(1, 3))",
        "HandleAlterPartitionResponse(leader=1)",
        "AlterPartition(leader=1, isr=(1, 2, 3))",
        "Fetch(follower=3, leader=1)",
        "Fetch(follower=3, leader=1)",
    )


def test_kip_101_the_truncated_follower_is_elected():
    """KIP-101's scenario, told whole: the zoo's truncation=hw path goes on until the follower
    that truncated to its lagging HW is elected. The leader shuts down too (before the
    follower restarts), and its session timeout leaves the ISR empty: the controller elects
    from the ELR the only registered member, broker 2, without committed r1."""
    run = run_check(Config(protocol=_with("truncation=hw"), **TWO_SHUTDOWNS_RF2), invariants=["NoCommittedDataLoss"])
    v = run.result.violation
    assert (v.invariant, v.length) == ("NoCommittedDataLoss", 8)
    assert _path(v) == (
        "Produce(leader=1, record=1)",
        "Fetch(follower=2, leader=1)",
        "Fetch(follower=2, leader=1)",
        "BrokerCrash(broker=1)",
        "BrokerCrash(broker=2)",
        "BrokerSessionTimeout(broker=2)",
        "BrokerRestart(broker=2)",
        "BrokerSessionTimeout(broker=1)",
    )
    states = [s for _, s in v.trace]
    # After the second fetch r1 is committed (leader HW 1) but broker 2 still has HW 0.
    assert (states[3].broker(1).hw, states[3].broker(2).hw, states[3].ghost.committed) == (1, 0, (1,))
    assert states[7].broker(2).log == ()  # the restart truncated to HW 0
    c = states[8].controller
    assert (c.leader, c.isr, c.elr) == (2, bit(2), bit(1))  # elected from the ELR
    assert run.reached()["ElrElection"] is not None


# The oldest preset: KIP-101 without ELR. At RF 3 the textbook path: the leader shuts down,
# and the follower that did not become leader truncates to its lagging HW when it follows
# the new one, in the ISR all along.
OLDEST_KIP_101 = (
    "Produce(leader=1, record=1)",
    "Fetch(follower=2, leader=1)",
    "Fetch(follower=2, leader=1)",
    "Fetch(follower=3, leader=1)",
    "Fetch(follower=3, leader=1)",
    "BrokerCrash(broker=1)",
    "BrokerSessionTimeout(broker=1)",
    "MetadataUpdate(broker=3)",
)


def test_oldest_preset_loses_committed_data_with_one_clean_shutdown():
    cfg = Config(protocol=preset("oldest"), **ONE_SHUTDOWN)
    run = run_check(cfg, invariants=["NoCommittedDataLoss"])
    v = run.result.violation
    assert (v.invariant, v.length) == ("NoCommittedDataLoss", 8)
    assert _path(v) == OLDEST_KIP_101
    assert run.summary()["protocol"]["era"] == OLDEST
    before_crash, last = v.trace[5][1], v.trace[-1][1]
    # The fourth fetch committed r1; both followers were answered with the HW before it.
    assert (before_crash.broker(1).hw, before_crash.broker(2).hw, before_crash.broker(3).hw) == (1, 0, 0)
    c = last.controller
    assert (c.leader, c.isr, c.elr) == (2, bit(2) | bit(3), 0)
    assert last.broker(3).log == () and last.broker(3).leader == 2


def test_message_lag_drops_healthy_followers_and_time_lag_does_not():
    old = run_check(Config(protocol=_with("isr_lag=messages"), **LAG), reach=("HealthyFollowerShrunk",))
    new = run_check(Config(**LAG))
    assert old.result.verdict == "reached"
    # A record lands before the follower's first fetch (its LEO still unknown to the leader):
    # more than one behind, out it goes, though it never stalled.
    assert [type(a).__name__ for a, _ in old.result.reached["HealthyFollowerShrunk"][1:]] == [
        "Produce",
        "AlterPartition",
    ]
    assert new.reached()["HealthyFollowerShrunk"] is None and new.result.verdict == "holds"


# KIP-320 (issue 16): a follower that missed two leader changes fetches from the preferred
# replica re-elected by the controller's automatic rebalance. One fence (a live broker misses its heartbeats) takes
# leadership away from broker 1 and one preferred leader election gives it back; no crash,
# no shutdown, no ISR shrink. The diverging epoch in every fetch (KAFKA-10554, 2.8.0) would
# catch the stale follower, so the older OffsetsForLeaderEpoch truncation is switched back too.
KIP_320_BOUNDS = dict(
    rf=3,
    minisr=2,
    max_records=2,
    max_clean_shutdowns=0,
    max_hard_crashes=0,
    max_isr_shrinks=0,
    max_fences=1,
    max_leader_elections=1,
)
KIP_320_PATH = (
    "Produce(leader=1, record=1)",
    "ControllerFenceBroker(broker=1)",  # 2 leads epoch 2 over ISR {2,3}; 1 is a zombie
    "BrokerHeartbeat(broker=1)",
    "MetadataUpdate(broker=2)",
    "Produce(leader=2, record=2)",  # r2 at offset 0, epoch 2
    "Fetch(follower=3, leader=1)",  # 3, still on epoch 1, takes r1 from the zombie
    "MetadataUpdate(broker=1)",
    "OffsetsForLeaderEpoch(follower=1, leader=2)",  # 1 drops r1
    "Fetch(follower=1, leader=2)",
    "AlterPartition(leader=2, isr=(1, 2, 3))",
    "AutoLeaderRebalance(preferred=1)",  # the controller's own: 1 leads epoch 3, from offset 1
    "MetadataUpdate(broker=1)",
    "MetadataUpdate(broker=2)",
    "OffsetsForLeaderEpoch(follower=2, leader=1)",
    "Fetch(follower=2, leader=1)",
    "Fetch(follower=3, leader=1)",  # epoch 1 against epoch 3, accepted: r2 committed
)


def test_kip_320_a_stale_follower_fetches_from_the_re_elected_preferred_leader():
    """KIP-320's case for fencing fetches by the current leader epoch. Broker 1 is fenced
    while it runs: 2 leads epoch 2 and writes r2 at offset 0, while follower 3, which has
    applied neither epoch 2 nor what follows, fetches r1 (epoch 1) from the zombie 1. Broker
    1 applies epoch 2, truncates r1 and fetches r2; 2 adds it back to the ISR, and a
    preferred leader election makes 1 leader of epoch 3. Follower 3, still on epoch 1,
    fetches from 1 at offset 1: it never saw a leader change (same leader as in its epoch),
    so it never truncated, and without the current leader epoch in the fetch the leader takes
    its position. The HW reaches 1 over {1,2,3}: r2 is committed, ISR member 3 has r1 there.
    With the fetch fenced (2.1.0) the last fetch is refused; without the election (or with
    the diverging epoch, 2.8.0) the bounds hold."""
    old = Protocol().with_rules(fetch_fencing="none", truncation="leader_epoch_kip279")
    run = run_check(Config(protocol=old, **KIP_320_BOUNDS))
    v = run.result.violation
    assert run.result.verdict == "violated"
    assert (v.invariant, v.length) == ("NoCommittedDataLoss", 16)
    assert _path(v) == KIP_320_PATH
    zombie_fetch, last = v.trace[6][1], v.trace[-1][1]
    assert zombie_fetch.controller.leader == 2 and zombie_fetch.broker(1).leader == 1  # 1 acts as leader
    assert zombie_fetch.broker(3).log == ((1, 1),)  # (record, epoch): r1 of epoch 1
    assert (last.broker(1).leader, last.broker(1).epoch, last.broker(1).log) == (1, 3, ((2, 2),))
    assert (last.broker(3).epoch, last.broker(3).log) == (1, ((1, 1),))  # the stale follower
    assert last.ghost.committed == (2,) and last.controller.isr == bit(1) | bit(2) | bit(3)

    # The same era with fetch fencing on: the last fetch (epoch 1, leader on epoch 3) is
    # refused, and the search holds.
    fenced = Protocol().with_rules(truncation="leader_epoch_kip279")
    model = Model(Config(protocol=fenced, **KIP_320_BOUNDS))
    s = v.trace[0][1]
    for a, expected in v.trace[1:-1]:
        (s,) = model.step(s, a)
        assert s == expected
    assert not model.step(s, v.trace[-1][0])  # FENCED_LEADER_EPOCH: nothing changes
    assert run_check(Config(protocol=fenced, **KIP_320_BOUNDS)).result.verdict == "holds"
    # The election opens the window: without it the old rules hold.
    no_election = dict(KIP_320_BOUNDS, max_leader_elections=0)
    assert run_check(Config(protocol=old, **no_election)).result.verdict == "holds"
    # fetch_fencing=none alone on the newest preset holds (the diverging epoch catches 3).
    assert run_check(Config(protocol=_with("fetch_fencing=none"), **KIP_320_BOUNDS)).result.verdict == "holds"
    # The era presets: 2.0.1, the last before KIP-320, loses r2 on the same path (its
    # consumer_hw bug shows first unless the check keeps to NoCommittedDataLoss); 2.1.0 holds.
    # Under ZooKeeper the leader adds broker 1 inside its fetch, so the path has no
    # AlterPartition step: 15 steps (16 until issue 29, when the addition was a step of its own).
    era = run_check(Config(protocol=preset("2.0.1"), **KIP_320_BOUNDS), invariants=["NoCommittedDataLoss"])
    assert _path(era.result.violation) == tuple(a for a in KIP_320_PATH if not a.startswith("AlterPartition"))
    assert era.result.violation.trace[9][1].controller.isr == bit(1) | bit(2) | bit(3)  # Fetch(1, 2) added 1
    assert preset("2.1.0") == preset("2.0.1").with_rules(fetch_fencing="current_leader_epoch")
    kip_320 = run_check(Config(protocol=preset("2.1.0"), **KIP_320_BOUNDS), invariants=["NoCommittedDataLoss"])
    assert kip_320.result.verdict == "holds"
