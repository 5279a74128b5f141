"""Conformance with ReplicaFetcherThreadTest (core/src/test/scala/unit/kafka/server/): where a
follower truncates, from OffsetsForLeaderEpoch answers (KIP-101, KIP-279) or from the diverging
epoch in a fetch response (KAFKA-10554), and what it takes from the response.

Kafka's tests mock the leader's answers (epoch 4 ending at 155, ...); here the answers come from
a real leader log built to give them at a small scale: the follower (broker 2) wrote epochs
1, 3, 3, 5, 5 and the leader (broker 1, epoch 6) epochs 1, 3, 4, 4, 4, so the leader answers
the follower's epoch 5 with "epoch 4, ending at 5", an epoch the follower never had.
"""

from __future__ import annotations

import pytest
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, OffsetsForLeaderEpoch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.protocol import Protocol
from scenario import (
    cache_of,
    controller,
    crash,
    enabled,
    follower_broker,
    leader_broker,
    log_of,
    mask,
    model,
    step,
    with_own_epoch,
)
from scenario import with_brokers as build


def cfg_with(**rules) -> Config:
    return Config(rf=2, minisr=1, protocol=Protocol().with_rules(**rules))


def pair(follower_epochs, leader_epochs, epoch=6, truncating=False, follower_hw=0, leader_hw=0, leader_cache=None):
    """Leader 1 (epoch `epoch`, its cache ending with its own epoch) and follower 2; the leader's
    log shares the follower's records wherever both wrote the same epoch at the same offset."""
    c = controller(2, 1, mask(1, 2), epoch=epoch)
    flog = log_of(*follower_epochs)
    llog = tuple(flog[i] if i < len(flog) and flog[i][0] == e else (e, 11 + i) for i, e in enumerate(leader_epochs))
    lcache = with_own_epoch(cache_of(llog), epoch, len(llog)) if leader_cache is None else leader_cache
    return build(
        c,
        leader_broker(c, 1, log=llog, cache=lcache, hw=leader_hw),
        follower_broker(c, flog, cache_of(flog), hw=follower_hw, truncating=truncating),
    )


@pytest.mark.parametrize("rule", ["leader_epoch", "leader_epoch_kip279"])
def test_should_truncate_to_offset_specified_in_epoch_offset_response(rule):
    """Kafka: ReplicaFetcherThreadTest.shouldTruncateToOffsetSpecifiedInEpochOffsetResponse: the
    leader answers the follower's last epoch (5) with its own end offset for it; the follower
    truncates there and goes on fetching."""
    cfg = cfg_with(truncation=rule)
    s = pair((1, 1, 5, 5, 5), (1, 1, 5, 5, 6), truncating=True)
    follower = step(cfg, s, OffsetsForLeaderEpoch(2, 1)).broker(2)
    assert (follower.leo, follower.truncating) == (4, False)


def test_should_fetch_leader_epoch_second_time_if_leader_replies_with_epoch_not_known_to_follower():
    """Kafka: ReplicaFetcherThreadTest.shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNotKnownToFollower:
    the leader answers epoch 4, which the follower never had: it truncates to the end of its
    largest epoch below 4 (epoch 3, offset 3) and asks again (KIP-279, 2.0); the second answer,
    epoch 3 ending at 2, is final, and it fetches."""
    cfg = cfg_with(truncation="leader_epoch_kip279")
    s = pair((1, 3, 3, 5, 5), (1, 3, 4, 4, 4), truncating=True)
    s = step(cfg, s, OffsetsForLeaderEpoch(2, 1))
    assert (s.broker(2).leo, s.broker(2).truncating) == (3, True)
    s = step(cfg, s, OffsetsForLeaderEpoch(2, 1))
    assert (s.broker(2).leo, s.broker(2).truncating) == (2, False)
    assert enabled(cfg, s, Fetch(2, 1))


def test_should_use_leader_end_offset_if_inter_broker_version_below_20():
    """Kafka: ReplicaFetcherThreadTest.shouldUseLeaderEndOffsetIfInterBrokerVersionBelow20: before
    KIP-279 (inter-broker protocol below 2.0) one answer is final: the follower truncates to the
    leader's end offset (5, here its own log end) without asking again."""
    cfg = cfg_with(truncation="leader_epoch")
    s = pair((1, 3, 3, 5, 5), (1, 3, 4, 4, 4), truncating=True)
    follower = step(cfg, s, OffsetsForLeaderEpoch(2, 1)).broker(2)
    assert (follower.leo, follower.truncating) == (5, False)


def test_should_truncate_if_leader_replies_with_diverging_epoch_not_known_to_follower():
    """Kafka: ReplicaFetcherThreadTest.shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower:
    with truncation on fetch (2.8) the follower never asks OffsetsForLeaderEpoch; a response with
    a diverging epoch it never had (4) truncates it to the end of its largest epoch below (3)
    and it keeps fetching, next to the leader's end of epoch 3 (2), then appends."""
    cfg = cfg_with(truncation="diverging_epoch")
    s = pair((1, 3, 3, 5, 5), (1, 3, 4, 4, 4))
    leos = []
    for _ in range(3):
        assert not enabled(cfg, s, OffsetsForLeaderEpoch(2, 1))
        s = step(cfg, s, Fetch(2, 1))
        leos.append(s.broker(2).leo)
    assert leos == [3, 2, 3]
    assert s.broker(2).log == s.broker(1).log[:3]


def test_should_truncate_to_initial_fetch_offset_if_leader_returns_undefined_offset():
    """Kafka: ReplicaFetcherThreadTest.shouldTruncateToInitialFetchOffsetIfLeaderReturnsUndefinedOffset:
    the leader knows no end for the follower's last epoch (UNDEFINED): the follower truncates to
    its initial fetch offset, its HW (1).
    Here the follower wrote epoch 3 under a leader that died; the new leader (epoch 4) predates
    KAFKA-7415 and has not written in its epoch, so it knows epochs 1 and 2 only."""
    rules = dict(truncation="leader_epoch_kip279", leader_epoch_cache="on_append")
    s = pair((1, 3), (1, 2), epoch=4, truncating=True, follower_hw=1, leader_cache=((1, 0), (2, 1)))
    follower = step(cfg_with(**rules), s, OffsetsForLeaderEpoch(2, 1)).broker(2)
    assert (follower.leo, follower.hw, follower.truncating) == (1, 1, False)


def test_truncate_on_fetch_does_not_update_high_watermark():
    """Kafka: ReplicaFetcherThreadTest.testTruncateOnFetchDoesNotUpdateHighWatermark: a response
    with a diverging epoch truncates the follower (to 2) but does not give it the leader's HW,
    though the leader's is higher (4 against the follower's 1)."""
    cfg = cfg_with(truncation="diverging_epoch")
    s = pair((1, 1, 2), (1, 1, 3, 3), epoch=3, follower_hw=1, leader_hw=4)
    follower = step(cfg, s, Fetch(2, 1)).broker(2)
    assert (follower.leo, follower.hw) == (2, 1)


@pytest.mark.parametrize("rule", ["diverging_epoch", "leader_epoch_kip279"])
def test_should_not_fetch_leader_epoch_on_first_fetch_with_truncate_on_fetch(rule):
    """Kafka: ReplicaFetcherThreadTest.shouldNotFetchLeaderEpochOnFirstFetchWithTruncateOnFetch: a
    follower of a new leader fetches at once when truncation happens on fetch (2.8); with an
    older inter-broker protocol it asks OffsetsForLeaderEpoch first
    (shouldFetchLeaderEpochOnFirstFetchOnlyIfLeaderEpochKnownToBothIbp26)."""
    cfg = Config(rf=3, minisr=1, max_clean_shutdowns=1, protocol=Protocol().with_rules(truncation=rule))
    s = crash(cfg, model(cfg).initial_states()[0], 1)
    s = step(cfg, step(cfg, s, MetadataUpdate(2)), MetadataUpdate(3))
    on_fetch = rule == "diverging_epoch"
    assert s.broker(3).leader == 2 and s.broker(3).truncating != on_fetch
    assert enabled(cfg, s, Fetch(3, 2)) == on_fetch
    assert enabled(cfg, s, OffsetsForLeaderEpoch(3, 2)) != on_fetch
