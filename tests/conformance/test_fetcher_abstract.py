"""Conformance with AbstractFetcherThreadTest (core/src/test/scala/unit/kafka/server/): the follower's
fetch loop, its truncation phase and its fencing by leader epoch.

Kafka's test runs a fetcher thread against a mock leader; here a follower (broker 2) and its
leader (broker 1) are built by hand and the model's Fetch and OffsetsForLeaderEpoch steps run
between them. Kafka's records "a", "b", "c" are record ids; the same letter written in two
epochs is two different records (ids 1-3 on the follower, 11-13 on the leader). The model's
fetch answer carries one record (fetch.max.bytes as one batch), as Kafka's mock fetcher does
in several of these tests.
"""

from __future__ import annotations

import pytest
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, OffsetsForLeaderEpoch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.protocol import Protocol, preset
from kafkamc.spec.state import Broker
from scenario import (
    cache_of,
    controller,
    enabled,
    follower_broker,
    leader_broker,
    log_of,
    mask,
    replace,
    step,
    with_own_epoch,
)
from scenario import with_brokers as build

KIP279 = Protocol().with_rules(truncation="leader_epoch_kip279")


def pair(follower_epochs, leader_epochs, epoch, leader_hw=0, follower_hw=0, truncating=False, leader_cache=None):
    """Leader 1 and follower 2 of leader epoch `epoch` (ISR both), with logs written in the given
    epochs; the leader's epoch cache also has its own epoch at its log end."""
    c = controller(2, 1, mask(1, 2), epoch=epoch)
    flog = log_of(*follower_epochs)
    llog = log_of(*leader_epochs, first_id=11)
    lcache = with_own_epoch(cache_of(llog), epoch, len(llog)) if leader_cache is None else leader_cache
    return build(
        c,
        leader_broker(c, 1, log=llog, cache=lcache, hw=leader_hw),
        follower_broker(c, flog, cache_of(flog), hw=follower_hw, truncating=truncating),
    )


def reconcile(cfg: Config, s, limit: int = 12):
    """The follower truncates and fetches until its log is the leader's (or `limit` steps)."""
    for _ in range(limit):
        if s.broker(2).log == s.broker(1).log:
            return s
        s = step(cfg, s, OffsetsForLeaderEpoch(2, 1) if s.broker(2).truncating else Fetch(2, 1))
    raise AssertionError(f"logs not reconciled: {s.broker(2).log} vs {s.broker(1).log}")


def test_simple_fetch():
    """Kafka: AbstractFetcherThreadTest.testSimpleFetch: a follower fetches the leader's two records
    and its HW 2."""
    cfg = Config(rf=2, minisr=1)
    c = controller(2, 1, mask(1, 2), epoch=1)
    log = log_of(1, 1)
    s = build(c, leader_broker(c, 1, log=log, cache=cache_of(log), hw=2), follower_broker(c))
    s = step(cfg, step(cfg, s, Fetch(2, 1)), Fetch(2, 1))
    assert (s.broker(2).log, s.broker(2).hw) == (log, 2)


def test_fenced_fetch():
    """Kafka: AbstractFetcherThreadTest.testFencedFetch: once the leader's epoch is bumped, the
    follower's fetch in the old epoch is fenced and makes no progress; it fetches again once it
    has the new metadata."""
    cfg = Config(rf=2, minisr=1)
    s = pair((1, 1), (1, 1, 1), 1)
    s = replace(s, controller=replace(s.controller, epoch=2))
    s = s.with_broker(1, replace(s.broker(1), epoch=2, cache=s.broker(1).cache + ((2, 3),)))
    assert not enabled(cfg, s, Fetch(2, 1))
    s = step(cfg, s, MetadataUpdate(2))
    assert s.broker(2).epoch == 2 and step(cfg, s, Fetch(2, 1)).broker(2).leo == 3


def test_fenced_truncation():
    """Kafka: AbstractFetcherThreadTest.testFencedTruncation: a follower that must truncate, in an
    epoch older than its leader's, is fenced: no truncation, no records."""
    cfg = Config(rf=2, minisr=1, protocol=KIP279)
    s = pair((), (1, 1), 1, leader_hw=2, truncating=True)
    s = s.with_broker(1, replace(s.broker(1), epoch=2))
    s = replace(s, controller=replace(s.controller, epoch=2))
    assert not enabled(cfg, s, OffsetsForLeaderEpoch(2, 1)) and not enabled(cfg, s, Fetch(2, 1))


def test_unknown_leader_epoch_in_truncation():
    """Kafka: AbstractFetcherThreadTest.testUnknownLeaderEpochInTruncation: a follower whose epoch
    is ahead of its leader's stays in its truncation phase without progress; once the leader
    has the epoch, it truncates and fetches."""
    cfg = Config(rf=2, minisr=1, protocol=KIP279)
    s = pair((), (1,), 2, leader_hw=1, truncating=True)
    behind = s.with_broker(1, replace(s.broker(1), epoch=1, cache=((1, 0),)))
    assert not enabled(cfg, behind, OffsetsForLeaderEpoch(2, 1))
    s = step(cfg, s, OffsetsForLeaderEpoch(2, 1))
    assert not s.broker(2).truncating
    assert step(cfg, s, Fetch(2, 1)).broker(2).leo == 1


@pytest.mark.parametrize("rule", ["diverging_epoch", "leader_epoch_kip279"])
def test_truncation(rule):
    """Kafka: AbstractFetcherThreadTest.testTruncation: follower log in epochs 0, 2, 4, leader log in
    epochs 1, 3, 5 (leader epoch 5, HW 2): the follower truncates and fetches until its log is
    the leader's, with the leader's HW. With truncation on fetch (2.8) or OffsetsForLeaderEpoch."""
    cfg = Config(rf=2, minisr=1, protocol=Protocol().with_rules(truncation=rule))
    s = pair((0, 2, 4), (1, 3, 5), 5, leader_hw=2, truncating=rule != "diverging_epoch")
    s = reconcile(cfg, s)
    assert s.broker(2).hw == 2


def test_truncate_to_high_watermark_if_leader_epoch_request_not_supported():
    """Kafka: AbstractFetcherThreadTest.testTruncateToHighWatermarkIfLeaderEpochRequestNotSupported:
    without OffsetsForLeaderEpoch (before KIP-101, 0.11) a new follower truncates to its own HW
    (3 records, HW 2) and fetches from there."""
    cfg = Config(rf=3, minisr=1, protocol=preset("0.9.0"))
    c = controller(3, 3, mask(2, 3), epoch=6)
    log = log_of(0, 2, 4)
    s = build(c, Broker(alive=False), Broker(leader=1, epoch=5, log=log, cache=cache_of(log), hw=2), Broker())
    follower = step(cfg, s, MetadataUpdate(2)).broker(2)
    assert (follower.leader, follower.leo, follower.hw, follower.truncating) == (3, 2, 2, False)


@pytest.mark.parametrize("rule", ["leader_epoch", "leader_epoch_kip279"])
def test_truncate_to_high_watermark_if_leader_epoch_info_not_available(rule):
    """Kafka: AbstractFetcherThreadTest.testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable: a
    follower with no leader-epoch information truncates to its HW (3 records, HW 2) and is ready
    to fetch."""
    cfg = Config(rf=2, minisr=1, protocol=Protocol().with_rules(truncation=rule))
    s = pair((0, 2, 4), (0, 2, 4), 5, leader_hw=2, follower_hw=2, truncating=True)
    s = s.with_broker(2, replace(s.broker(2), cache=()))
    follower = step(cfg, s, OffsetsForLeaderEpoch(2, 1)).broker(2)
    assert (follower.leo, follower.truncating) == (2, False)


@pytest.mark.parametrize("rule", ["diverging_epoch", "leader_epoch_kip279"])
def test_follower_fetch_out_of_range_high(rule):
    """Kafka: AbstractFetcherThreadTest.testFollowerFetchOutOfRangeHigh: the leader's log was
    emptied behind a fetching follower's back; the follower's fetch from offset 3 is beyond the
    leader's log end, and it truncates to it: log end 0, HW 0."""
    cfg = Config(rf=2, minisr=1, protocol=Protocol().with_rules(truncation=rule))
    s = pair((0, 2, 4), (), 4, leader_cache=())
    follower = step(cfg, s, Fetch(2, 1)).broker(2)
    assert (follower.leo, follower.hw) == (0, 0)


def test_diverging_epochs():
    """Kafka: AbstractFetcherThreadTest.testDivergingEpochs: follower log in epochs 0, 2, 4 and
    leader log in 0, 2, 5 (leader epoch 5): the first fetch (last fetched epoch 4) returns the
    diverging epoch 2 ending at 2; the follower truncates there (last fetched epoch 2), then
    fetches the leader's record of epoch 5."""
    cfg = Config(rf=2, minisr=1)
    s = pair((0, 2, 4), (0, 2, 5), 5)
    s = s.with_broker(1, replace(s.broker(1), log=s.broker(2).log[:2] + s.broker(1).log[2:]))
    assert s.broker(2).last_epoch() == 4
    s = step(cfg, s, Fetch(2, 1))
    assert (s.broker(2).leo, s.broker(2).last_epoch()) == (2, 2)
    s = step(cfg, s, Fetch(2, 1))
    assert s.broker(2).log == s.broker(1).log and s.broker(2).last_epoch() == 5
