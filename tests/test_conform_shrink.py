"""An ISR shrink in flight (issue 41, seeds 905 and 920): the leader prepares it, the followers
fetch and the HW passes a record over the current ISR, and only then does the controller write it.

Kafka: `Partition.maybeShrinkIsr` logs "Shrinking ISR from ... to ..." and calls
`prepareIsrShrink`; the partition is then `PendingShrinkIsr`, whose `maximalIsr` is the current
ISR ("we cannot assume that the update will succeed as this could erroneously advance the HW"),
and `submitAlterPartition` hands the request to the AlterPartitionManager; the answer is taken by
`handleAlterPartitionUpdate`. The model under incarnations=kraft_steps takes the same two steps
(spec/alter_partition.py, prepare_isr_shrink); under the default (fenced_first) the decision and
the controller's write are one step.

tests/data/conform/rf3-minisr1-unclean-shrink-seed920.json is the first 62 observations of what
`kafkamc conform --kafka-version 4.4.0 --seed 920 --minisr 1 --unclean --faults 30` observed
(3 brokers, RF 3, ELR on, the restart at once; issue 41's run b920), cut after the cut that shows
r7 on every broker, with the producer's requests ("attempts") and the leaders' "Shrinking ISR"
lines of its brokers' logs ("shrinks", realkafka/inflight.py). r7 is sent to leader 2, which the
run pauses for 3.5 s (observations 52, 54); resumed (55), broker 2 appends r7 and logs "Shrinking
ISR from 1,3,2 to 2. Leader: (highWatermark: 6, endOffset: 7)" at 27.512; its followers fetch r7,
the HW passes it over ISR [1, 2, 3] and r7 is acknowledged at offset 6 (56, at 27.516); the
controller writes ISR [2] at 27.520 (57). The validator lets that shrink stay in flight across
observations 56 and 57 and validates the run; without the log's shrinks every shrink goes to the
controller in the step that prepares it, as the model took it before, and the run fails at 57.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_recorded, play
from kafkamc.realkafka import inflight, validate
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import NEWEST, preset

RUN = Path(__file__).parent / "data" / "conform" / "rf3-minisr1-unclean-shrink-seed920.json"
KRAFT = preset(NEWEST).with_rules(incarnations="kraft_steps")


def mask(*brokers: int) -> int:
    return sum(1 << (b - 1) for b in brokers)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    setup, events, data = load_recorded(tmp_path_factory.mktemp("run"), RUN)
    return setup, events, data


def test_the_shrink_is_logged_before_the_ack_and_written_after_it(recorded):
    _setup, events, data = recorded
    assert [validate.describe_event(events[i]) for i in (52, 54, 55, 56)] == [
        "send r7",
        "pause 2",
        "resume 2",
        "r7 acknowledged at offset 6",
    ]
    assert events[57]["view"].isr == (2,) and events[57]["view"].pepoch == 11
    shrink = data["shrinks"][-1]
    assert (shrink["broker"], shrink["isr"]) == (2, [2])
    assert events[55]["t"] < shrink["t"] < events[56]["t"] < events[57]["t"]
    flights = inflight.windows(events, data["shrinks"])
    assert [i for i, f in enumerate(flights) if (2, mask(2)) in f] == [56, 57]


def test_the_validator_takes_the_shrink_in_flight(recorded):
    setup, events, data = recorded
    v = validate.validate(setup.config(), (1, 2, 3), events, sent=data["attempts"], shrinks=data["shrinks"])
    assert v.discrepancy is None and v.too_large is None
    assert (v.events, v.cuts, v.batches) == (62, 14, 20)


def test_without_the_logged_shrinks_it_fails_at_the_controllers_isr(recorded):
    """Every shrink delivered in the step that prepares it: the model before the shrink was in flight."""
    setup, events, data = recorded
    v = validate.validate(setup.config(), (1, 2, 3), events, sent=data["attempts"])
    assert v.discrepancy is not None and v.discrepancy.index == 57
    assert v.discrepancy.reason == (
        "no model step leads to the controller's leader 2 epoch 1 partition epoch 11 replicas [1, 2, 3] "
        "ISR [2] ELR [] unfenced [1, 2, 3]"
    )


def test_the_recorded_file_is_a_prefix_of_a_run():
    data = json.loads(RUN.read_text())
    assert data["seed"] == 920 and data["setup"]["version"] == "4.4.0" and len(data["events"]) == 62


def test_a_fetch_moves_the_hw_over_the_current_isr_while_the_shrink_is_in_flight():
    """The model's path: the shrink prepared, the followers' fetches advance the HW over ISR
    [1, 2, 3] (the maximal ISR of PendingShrinkIsr) and acknowledge r1, then the controller
    writes ISR [1] and the answer commits it (handleAlterPartitionUpdate)."""
    cfg = Config(rf=3, minisr=1, max_records=1, protocol=KRAFT)
    s = play(cfg, Produce(1, 1), ReplicaStall(2), ReplicaStall(3), AlterPartition(1, (1,)))
    leader = s.broker(1)
    assert (leader.isr, leader.pending, leader.hw, s.controller.isr) == (mask(1, 2, 3), mask(1), 0, mask(1, 2, 3))
    s = play(cfg, Fetch(2, 1), Fetch(2, 1), Fetch(3, 1), Fetch(3, 1), state=s)
    assert s.broker(1).hw == 1 and s.ghost.acked == 0b1 and s.controller.isr == mask(1, 2, 3)
    s = play(cfg, AlterPartition(1, (1,)), state=s)
    assert s.controller.isr == mask(1) and s.broker(1).isr == mask(1, 2, 3)
    s = play(cfg, HandleAlterPartitionResponse(1), state=s)
    assert (s.broker(1).isr, s.broker(1).pending, s.broker(1).hw) == (mask(1), 0, 1)


def test_under_the_default_the_shrink_is_one_step_and_needs_the_followers_behind():
    cfg = Config(rf=3, minisr=1, max_records=1, protocol=preset(NEWEST))
    s = play(cfg, Produce(1, 1), ReplicaStall(2), ReplicaStall(3), AlterPartition(1, (1,)))
    assert s.controller.isr == mask(1) and s.broker(1).request is None
    caught = play(cfg, Produce(1, 1), ReplicaStall(2), ReplicaStall(3), Fetch(2, 1), Fetch(2, 1), Fetch(3, 1))
    caught = play(cfg, Fetch(3, 1), state=caught)
    assert caught.ghost.acked == 0b1 and not Model(cfg).step(caught, AlterPartition(1, (1,)))


def test_a_shrinking_isr_line_is_read_with_its_time_and_proposed_isr(tmp_path):
    """inflight.read: the leader's "Shrinking ISR" lines of the partition, stamped by the
    machine's clock on the run's day (realkafka/observe.py log_clock), other partitions left out."""
    import time

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "broker-2.log").write_text(
        "[10:00:01,250] INFO [Partition t-0 broker=2] Shrinking ISR from 1,3,2 to 2. Leader: (...)\n"
        "[10:00:02,000] INFO [Partition other-0 broker=2] Shrinking ISR from 1,2 to 2. Leader: (...)\n"
        "[10:00:03,000] INFO [Partition t-0 broker=2] ISR updated to 2\n"
    )
    start = time.mktime((2026, 11, 28, 9, 59, 0, 0, 0, -1))
    assert inflight.read(tmp_path, "t", start) == [{"t": start + 61.25, "broker": 2, "isr": [2]}]
