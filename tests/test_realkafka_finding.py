"""The re-election finding (issue 29) on real brokers: what Kafka 4.1 and 4.4 really do with the
schedule of realkafka/finding.py. Marked kafka: run with -m kafka."""

from __future__ import annotations

import re

import pytest
from kafkamc.realkafka.finding import run_once

pytestmark = pytest.mark.kafka


def _lines(outcome, broker: str, needle: str) -> list[str]:
    return [ln for ln in outcome.log_excerpts[broker] if needle in ln]


@pytest.mark.parametrize("version", ["4.1.1", "4.4.0"])
def test_a_re_elected_leader_acknowledges_a_record_that_is_then_lost(version, tmp_path):
    o = run_once(version, folder=tmp_path)
    story = "\n".join(o.steps)
    assert not story.count("stopped:"), story
    # The controller's epochs: 1 leads 0, 2 leads 1, 1 leads 2 (preferred election), 2 leads 3
    # (1 shut down), 3 leads 4 (2 fenced after its crash), with ELR [2] on both releases' defaults.
    epochs = [(h["leader"], h["leaderEpoch"]) for h in o.history]
    assert [e for i, e in enumerate(epochs) if i == 0 or e != epochs[i - 1]] == [(1, 0), (2, 1), (1, 2), (2, 3), (3, 4)]
    # Broker 3 truncated r1 (offset 2) while it followed broker 1 in epoch 2 ...
    assert o.r1_truncated_on_3
    assert _lines(o, "broker-3", "Truncating to offset 2")
    # ... broker 2 never applied epoch 2: it went from leading epoch 1 to leading epoch 3,
    # Partition.makeLeader with isNewLeader false, so follower 3's position from epoch 1 stayed ...
    jump = _lines(o, "broker-2", "starts at leader epoch 3")
    assert jump and re.search(r"Previous leader Some\(2\) and previous leader epoch was 1\.", jump[-1])
    # ... and the produce of r1, waiting since epoch 1, was acknowledged at offset 2.
    assert (o.acked_offset, o.ack_error) == (2, None)
    assert o.hw_checkpoint_2 == 3  # broker 2's own HW covered r1
    # Broker 3, elected after 2 crashed, never had r1: the acknowledged record is lost.
    assert o.read_after == [(0, "r0"), (1, "r0b")]
    assert o.lost and o.offset_now_holds == "r2"


def test_the_controllers_own_rebalance_loses_it_too(tmp_path):
    """No operator: the preferred election is the controller's auto.leader.rebalance.enable
    (checked every 10 s here). If the check comes too soon after broker 1 rejoins, the schedule
    lets it run and starts again, which shifts the offsets and epochs by one a time."""
    o = run_once("4.4.0", folder=tmp_path, auto=True)
    story = "\n".join(o.steps)
    assert not story.count("stopped:"), story
    assert o.r1_truncated_on_3 and o.acked_offset is not None and o.ack_error is None, story
    k = o.acked_offset
    assert o.hw_checkpoint_2 == k + 1
    assert [off for off, _ in o.read_after] == list(range(k))  # up to r1's offset, not r1
    assert o.lost and o.offset_now_holds == "r2"
    # Broker 2 skipped the epoch the controller's rebalance gave broker 1.
    last = [ln for ln in o.log_excerpts["broker-2"] if "Leader finding-0" in ln and "starts at leader epoch" in ln][-1]
    epoch = int(last.split("starts at leader epoch ")[1].split()[0])
    assert f"Previous leader Some(2) and previous leader epoch was {epoch - 2}." in last


def test_the_proposed_fix_on_a_real_broker_keeps_the_write(tmp_path):
    """The same schedule on brokers whose kafka.cluster.Partition has the fix of docs/FINDINGS.md
    (realkafka/patch/makeleader-epoch-gap.diff, compiled by realkafka/patched.py from 4.1.1's
    sources jar): broker 2 still goes from epoch 1 to epoch 3 in one delta, but forgets follower
    3's position, so the HW stays below r1 and its produce is never acknowledged."""
    from kafkamc.realkafka.patched import SIGNATURE

    o = run_once("4.1.1", folder=tmp_path, patched=True)
    story = "\n".join(o.steps)
    assert not story.count("stopped:"), story
    epochs = [(h["leader"], h["leaderEpoch"]) for h in o.history]
    assert [e for i, e in enumerate(epochs) if i == 0 or e != epochs[i - 1]] == [(1, 0), (2, 1), (1, 2), (2, 3), (3, 4)]
    assert o.r1_truncated_on_3
    jump = _lines(o, "broker-2", "starts at leader epoch 3")
    assert jump and re.search(r"Previous leader Some\(2\) and previous leader epoch was 1\.", jump[-1])
    # The patched class was the one loaded, and it took the new branch.
    assert _lines(o, "broker-2", f"skipped leader epochs 2 to 2: {SIGNATURE}")
    assert o.acked_offset is None and o.hw_checkpoint_2 == 2, story
    assert not o.lost and o.read_after == [(0, "r0"), (1, "r0b")]
