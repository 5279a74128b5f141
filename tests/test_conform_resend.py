"""Trace validation of a recorded run in which librdkafka sent a record twice (issue 41), and a
mutant without the second request.

tests/data/conform/rf3-minisr2-resend-seed904.json is the first 28 observations of what
`kafkamc conform --kafka-version 4.1.1 --seed 904 --faults 30` observed (3 brokers, RF 3, min ISR 2,
ELR on; the run's observations.json cut after the cut that follows r4's acknowledgement), with the
producer's requests as its librdkafka log named them (realkafka/attempts.py, "attempts"). Broker 3
shut down under control (observations 13 to 17); r4 was sent to leader 1 just before the run
paused it past the session timeout (18, 20); the controller fenced broker 1 and made broker 2
leader in epoch 1 (21, 22). Resumed, broker 1 still led in its own metadata and appended r4 at
offset 3 in epoch 0 (its log: "Follower conform-0 starts at leader epoch 1 from offset 4"), then
learned it followed broker 2, truncated to offset 3 and answered NOT_LEADER_OR_FOLLOWER.
librdkafka sent r4 again, to broker 2, retries=0 notwithstanding (rd_kafka_handle_Produce_error
sets incr_retry=0 on a refresh error), and broker 2 appended it at offset 3 in epoch 1 and
acknowledged it (26); the cut (27) shows r4 in epoch 1 on brokers 1 and 2.

The validator takes r4's two requests (to broker 1, then broker 2) and validates the run. A
mutant that knows only each record's first request (one request per record, as the validator
took it before) can append r4 only at broker 1, in epoch 0 (and even acknowledge it there: a
follower with stale metadata may still fetch from the zombie), so no consistent state has the
files of the cut at observation 27, r4 in epoch 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_recorded
from kafkamc.realkafka import attempts, validate

RUN = Path(__file__).parent / "data" / "conform" / "rf3-minisr2-resend-seed904.json"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    setup, events, data = load_recorded(tmp_path_factory.mktemp("run"), RUN)
    return setup, events, data["attempts"]


def test_r4_went_in_two_requests_to_two_brokers(recorded):
    _setup, events, sent = recorded
    assert attempts.targets(sent)["r4"] == (1, 2)
    assert [validate.describe_event(events[i]) for i in (18, 20, 23, 26)] == [
        "send r4",
        "pause 1",
        "resume 1",
        "r4 acknowledged at offset 3",
    ]
    assert events[22]["view"].leader == 2 and events[22]["view"].unfenced == (2,)
    assert events[27]["logs"]["2"][3] == [1, "r4"] and events[27]["logs"]["1"][3] == [1, "r4"]


def test_the_validator_takes_the_second_request(recorded):
    setup, events, sent = recorded
    v = validate.validate(setup.config(), (1, 2, 3), events, sent=sent)
    assert v.discrepancy is None and v.too_large is None
    assert (v.events, v.cuts, v.batches) == (28, 5, 10)


def test_one_request_per_record_fails_at_the_cut_after_the_acknowledgement(recorded):
    setup, events, sent = recorded
    first = [a for a in sent if a["n"] == 1]
    v = validate.validate(setup.config(), (1, 2, 3), events, sent=first)
    assert v.discrepancy is not None
    assert v.discrepancy.index == 27
    assert v.discrepancy.reason.startswith("no consistent state has the logs 1:[r1@e0 r2@e0 r3@e0 r4@e1]")


def test_the_recorded_file_is_a_prefix_of_a_run():
    data = json.loads(RUN.read_text())
    assert data["seed"] == 904 and data["setup"]["version"] == "4.1.1" and len(data["events"]) == 28
