"""Protocol rules and era presets: the bug zoo.

Each historical rule, switched back to its old behaviour on top of the newest preset,
must produce the violation its KIP or JIRA describes, at bounds where the newest preset
holds. The shortest counterexample length is pinned; if a spec change moves one, the
change must say why.
"""

from __future__ import annotations

import pytest
from kafkamc.checker.run import run_check
from kafkamc.spec.config import Config, ConfigError
from kafkamc.spec.protocol import (
    ERAS,
    NEWEST,
    OLDEST,
    PRESETS,
    RULES,
    Protocol,
    ProtocolError,
    as_of,
    parse_rule,
    preset,
)

# Bounds, each small enough for the fast suite unless marked.
ONE_HARD_CRASH = dict(rf=3, minisr=2, max_records=1, max_clean_shutdowns=0, max_hard_crashes=1, max_isr_shrinks=2)
SHUTDOWN_AND_HARD_CRASH = dict(
    rf=3, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=1, max_isr_shrinks=0
)
TWO_SHUTDOWNS_RF2 = dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1)
ONE_SHUTDOWN = dict(rf=3, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_isr_shrinks=0)
TWO_SHUTDOWNS_RF3 = dict(rf=3, minisr=2, max_records=2, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1)

# (rule=old value, bounds, invariant its KIP/JIRA describes, shortest counterexample length)
ZOO = [
    # KIP-101: a follower truncates to its own (lagging) HW and is then elected.
    ("truncation=hw", TWO_SHUTDOWNS_RF2, "NoCommittedDataLoss", 11),
    # KIP-497: the HW moves over the committed ISR while an expansion is in flight.
    ("hw_pending_isr=committed", ONE_HARD_CRASH, "NoCommittedDataLoss", 8),
    # KAFKA-15583: with the HW moving below min ISR, an ELR member may lack committed data.
    ("hw_min_isr=any", ONE_HARD_CRASH, "NoCommittedDataLoss", 8),
    # KIP-903: a broker that lost its log rejoins the ISR on fetch state from its previous life.
    ("isr_join_broker_epoch=unchecked", SHUTDOWN_AND_HARD_CRASH, "NoCommittedDataLoss", 9),
    # KIP-207: a new leader exposes an HW below what consumers already saw.
    ("consumer_hw=leader_hw", ONE_HARD_CRASH, "HighWatermarkMonotonic", 7),
    # KIP-966: the last ISR member loses its unflushed tail and is re-elected.
    ("elr=off", ONE_HARD_CRASH, "HighWatermarkMonotonic", 10),
    # KIP-279: one OffsetsForLeaderEpoch answer leaves logs diverged after fast leader changes.
    pytest.param("truncation=leader_epoch", TWO_SHUTDOWNS_RF3, "NoCommittedDataLoss", 12, marks=pytest.mark.slow),
    # KAFKA-7128: a follower joins the ISR at a lagging HW, below the new epoch's start offset.
    pytest.param("isr_join=hw", TWO_SHUTDOWNS_RF3, "NoCommittedDataLoss", 12, marks=pytest.mark.slow),
]

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
]
LAG = dict(rf=2, minisr=1, max_records=2, max_clean_shutdowns=0, max_hard_crashes=0, max_isr_shrinks=1)


def _with(rule: str) -> Protocol:
    name, value = parse_rule(rule)
    return Protocol().with_rules(**{name: value})


@pytest.mark.parametrize(
    "bounds",
    [
        pytest.param(ONE_HARD_CRASH, marks=pytest.mark.slow),
        pytest.param(SHUTDOWN_AND_HARD_CRASH, marks=pytest.mark.slow),
        TWO_SHUTDOWNS_RF2,
        ONE_SHUTDOWN,
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
    assert run.summary()["protocol"]["rules"][rule.split("=")[0]] == rule.split("=")[1]


@pytest.mark.parametrize("rule,bounds", HARMLESS_ON_NEWEST)
def test_old_rules_without_a_bug_on_newest(rule, bounds):
    assert run_check(Config(protocol=_with(rule), **bounds)).result.verdict == "holds"


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


def test_oldest_preset_loses_committed_data_with_one_clean_shutdown():
    cfg = Config(protocol=preset("oldest"), **ONE_SHUTDOWN)
    run = run_check(cfg, invariants=["NoCommittedDataLoss"])
    assert (run.result.violation.invariant, run.result.violation.length) == ("NoCommittedDataLoss", 7)
    assert run.summary()["protocol"]["era"] == OLDEST


@pytest.mark.parametrize(
    "era,verdict",
    [("0.8.2", "violated"), ("2.1.0", "violated"), ("2.2.0", "holds"), ("3.5.0", "holds"), (NEWEST, "holds")],
)
def test_eras_on_one_clean_shutdown(era, verdict):
    assert run_check(Config(protocol=PRESETS[era], **ONE_SHUTDOWN)).result.verdict == verdict


# Expected losses: configurations Kafka documents as unsafe must produce a counterexample.
EXPECTED_LOSSES = [
    (dict(rf=2, minisr=1, unclean=True), "NoCommittedDataLoss", 5),
    (dict(rf=3, minisr=1, unclean=True, max_records=1), "NoCommittedDataLoss", 8),
    (dict(rf=3, minisr=2, acks="1", max_records=1), "AckedWriteDurability", 3),
    # Correlated page-cache loss: both ISR members crash hard; the last known leader returns RECOVERING.
    (dict(rf=3, minisr=2, max_records=1, max_hard_crashes=2), "HighWatermarkMonotonic", 10),
]


@pytest.mark.parametrize("kw,invariant,length", EXPECTED_LOSSES)
def test_expected_losses(kw, invariant, length):
    run = run_check(Config(**kw))
    assert (run.result.verdict, run.result.violation.invariant, run.result.violation.length) == (
        "violated",
        invariant,
        length,
    )


def test_correlated_loss_goes_through_a_recovering_election():
    run = run_check(Config(rf=3, minisr=2, max_records=1, max_hard_crashes=2))
    assert run.reached()["RecoveringElection"] is not None
    assert run.result.violation.trace[-1][1].controller.recovering


def test_acks_0_promises_nothing_and_loses_nothing_committed():
    run = run_check(Config(rf=2, minisr=2, acks="0", max_records=1))
    assert run.result.verdict == "holds" and run.result.coverage["Produce"] > 0


def test_presets_follow_the_release_history():
    assert ERAS[0] == OLDEST == "0.8.2" and ERAS[-1] == NEWEST
    assert PRESETS[NEWEST] == Protocol()
    for rule in RULES:
        assert getattr(PRESETS[OLDEST], rule.name) == rule.values[0]
        for value, since, _ref in rule.changes:
            assert getattr(as_of(since), rule.name) == value
    assert as_of("2.7.0").truncation == "leader_epoch_kip279" and as_of("2.8.0").truncation == "diverging_epoch"
    assert preset("2.7") == PRESETS["2.7.0"] and preset("newest") == Protocol()


@pytest.mark.parametrize("bad", ["nope=1", "elr", "elr=maybe"])
def test_bad_rules_are_errors(bad):
    with pytest.raises(ProtocolError):
        name, value = parse_rule(bad)
        Protocol().with_rules(**{name: value})
    with pytest.raises(ProtocolError):
        preset("9.9")


def test_config_round_trips_its_protocol():
    cfg = Config(protocol=_with("elr=off"))
    assert Config.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError):
        Config.from_dict({**cfg.to_dict(), "protocol": {"elr": "sometimes"}})
