"""The producer's requests as librdkafka's log shows them (realkafka/attempts.py): lines of the
formats a run's logs/librdkafka.log holds (librdkafka 2.16, debug=msg, and the producer's own
send and answer lines), replayed into each record's requests, their brokers and their order on
each connection."""

from __future__ import annotations

import pytest
from kafkamc.realkafka import attempts

STAMP = "2026-11-28 09:02:57,486"
BUILT = (
    STAMP + " DEBUG PRODUCE [rdkafka#producer-6] [thrd:127.0.0.1:37463/{b}]: 127.0.0.1:37463/{b}: conform [0]: "
    "Produce MessageSet with {n} message(s) (70 bytes, ApiVersion 10, MsgVersion 2, MsgId 0, BaseSeq -1, "
    "PID{{Invalid}}, uncompressed)"
)
ANSWER = (
    STAMP + " DEBUG MSGSET [rdkafka#producer-6] [thrd:127.0.0.1:37463/{b}]: 127.0.0.1:37463/{b}: conform [0]: "
    "MessageSet with {n} message(s) (MsgId 0, BaseSeq -1) {how}"
)
NOT_LEADER = "encountered error: Broker: Not leader for partition (actions Refresh,MsgNotPersisted)"
DOWN = (
    STAMP + " INFO FAIL [rdkafka#producer-6] [thrd:127.0.0.1:37463/{b}]: 127.0.0.1:37463/{b}: Disconnected: "
    "connection closed by peer: receive 0 after POLLIN (after 123557ms in state UP)"
)


def send(k: int) -> str:
    return f"{STAMP} INFO {attempts.MARK} send r{k}"


def answer(k: int, what: str) -> str:
    return f"{STAMP} INFO {attempts.MARK} answer r{k} {what}"


def test_a_record_answered_not_leader_is_sent_again_to_the_new_leader():
    log = [
        send(1),
        BUILT.format(b=1, n=1),
        ANSWER.format(b=1, n=1, how="delivered"),
        answer(1, "0"),
        send(2),
        send(3),
        BUILT.format(b=1, n=1),
        BUILT.format(b=1, n=1),
        ANSWER.format(b=1, n=1, how=NOT_LEADER),
        ANSWER.format(b=1, n=1, how=NOT_LEADER),
        BUILT.format(b=3, n=2),  # both again, in one request, to the new leader
        ANSWER.format(b=3, n=2, how="delivered"),
        answer(2, "1"),
        answer(3, "2"),
    ]
    got = attempts.attempts("\n".join(log), "conform")
    assert attempts.targets(got) == {"r1": (1,), "r2": (1, 3), "r3": (1, 3)}
    # Each request after the one before it on its broker's connection.
    assert attempts.order(got) == {("r2", 0): ("r1", 0), ("r3", 0): ("r2", 0), ("r3", 1): ("r2", 1)}


def test_a_new_connection_has_no_request_before_it_and_an_answered_record_is_not_sent_again():
    log = [
        send(1),
        BUILT.format(b=1, n=1),
        DOWN.format(b=1),
        ANSWER.format(
            b=1, n=1, how="encountered error: Local: Broker transport failure (actions Retry,MsgPossiblyPersisted)"
        ),
        answer(1, "_TRANSPORT"),  # retries=0: not again
        send(2),
        BUILT.format(b=2, n=1),
        send(3),
        BUILT.format(b=2, n=1),
    ]
    got = attempts.attempts("\n".join(log), "conform")
    assert attempts.targets(got) == {"r1": (1,), "r2": (2,), "r3": (2,)}
    assert attempts.order(got) == {("r3", 0): ("r2", 0)}


def test_a_log_without_the_producers_own_lines_names_no_request():
    assert attempts.attempts(BUILT.format(b=1, n=1), "other") == []
    with pytest.raises(attempts.Unreadable):
        attempts.attempts(BUILT.format(b=1, n=1), "conform")  # a request with nothing queued


def test_a_checkpoint_is_kept_as_the_next_cut_reads_it_and_whole_before_a_crash():
    from kafkamc.realkafka.lookahead import OTHER, readers

    events = [
        {"kind": "send", "value": "r1"},
        {"kind": "cut", "checkpoints": {"1": 1, "2": 0}},
        {"kind": "kill", "broker": 2},
        {"kind": "cut", "checkpoints": {"1": 2}},
    ]
    assert readers(events, (1, 2)) == [{1: 1, 2: 0}, {1: 1, 2: 0}, {1: 2}, {1: 2, 2: OTHER}]
