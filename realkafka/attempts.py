"""The producer's attempts, as librdkafka's own log shows them (`debug=msg`).

retries=0 does not make one request per record. librdkafka (rdkafka_request.c,
rd_kafka_handle_Produce_error) takes NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE and the other
errors whose action is a metadata refresh as "the request was rejected or not sent - there is no
chance of duplicate delivery", sets `incr_retry = 0` and puts the messages back in the partition's
queue; rd_kafka_retry_msgq retries a message while `retries + incr_retry <= max_retries`, which
holds with retries=0. So the record is sent again, to the leader the new metadata names, until it
is answered otherwise or message.timeout.ms passes. Kafka, though, may have appended it before
that answer: a leader appends, waits in purgatory for the ISR, and answers NOT_LEADER_OR_FOLLOWER
when it loses the leadership (ReplicaManager completes the DelayedProduce; seeds 700 and 710, the
zombie leader that appended r4 in its old epoch). No setting turns that off (the idempotent
producer would make the second append a duplicate it drops, but the model's producer is not
idempotent), so the run logs every request librdkafka builds and the validator lets each one
append once, at the broker it went to.

Which records a request carries is not in librdkafka's log (a producer that is not idempotent
logs "MsgId 0": rd_kafka_msgbatch_set_first_msg sets it only with a producer id), so the
producer writes its own lines into the same log (client.SEND_MARK: "send rK" before produce(),
"answer rK ..." from the delivery report, which poll serves in order with librdkafka's lines) and
the requests are replayed as librdkafka builds them: a request takes the first N messages of the
partition's queue in message order (rd_kafka_msgset_writer_init takes from the queue's head; a
message sent again goes back to its sorted place, rd_kafka_toppar_retry_msgq), each line
"Produce MessageSet with N message(s)" of rdkafka_msgset_writer.c names the broker the request
is for (the `127.0.0.1:PORT/ID` of rd_rkb_dbg), and a broker answers a connection's requests in
order ("MessageSet with N message(s) ... delivered" or "... encountered error: ... (actions
...)", rd_kafka_handle_Produce). A record answered with an error goes back to the queue until its
delivery report takes it out for good (retries=0 makes every error but a refresh final).

A broker takes one connection's requests in the order they came, one at a time (SocketServer's
Processor mutes a channel from a request until its response is sent), so a request is taken only
after the one before it on the same connection: `after` names that one. A connection ends with
librdkafka's "Disconnected" or a failed connect to that broker ("FAIL" lines); the next request
to it is on a new one.
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from pathlib import Path
from typing import Any

LOG = "librdkafka.log"  # beside the brokers' logs, in the cluster's logs/ folder
SETTING = {"debug": "msg"}  # what makes librdkafka log each request it builds and each answer
MARK = "kafkamc producer:"  # client.SEND_MARK

_BUILT = re.compile(r"/(?P<broker>\d+): (?P<topic>\S+) \[(?P<partition>\d+)\]: Produce MessageSet with (?P<n>\d+) ")
_ANSWERED = re.compile(
    r"/(?P<broker>\d+): (?P<topic>\S+) \[(?P<partition>\d+)\]: MessageSet with (?P<n>\d+) message\(s\) "
    r"\(MsgId \d+, BaseSeq -?\d+\) (?P<how>delivered|encountered error: (?P<error>.*))"
)
_OWN = re.compile(MARK + r" (?P<what>send|answer) r(?P<k>\d+)")
_FAIL = re.compile(r" FAIL .*?/(?P<broker>\d+): (Disconnected|Connect to)")


class Unreadable(ValueError):
    """The log does not replay: a request with more messages than the queue holds."""


def attempts(text: str, topic: str, partition: int = 0) -> list[dict[str, Any]]:
    """The producer's requests for the topic partition, in the order librdkafka built them: one
    observation per record in each ({"kind": "attempt", "value": "rK", "broker": B, "n": i}, the
    i-th request with rK, from 1, "after": [rJ, j], the record and request just before it on the
    same connection, or None). Empty for a log without the producer's own lines."""
    queue: list[int] = []  # records waiting for a request, in message order
    flight: dict[int, deque[list[int]]] = {}  # each broker's requests not answered yet
    count: dict[int, int] = {}
    last: dict[int, list | None] = {}  # each broker's connection: its last record's [value, request]
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        fail = _FAIL.search(line)
        if fail is not None:
            last[int(fail["broker"])] = None
            continue
        own = _OWN.search(line)
        if own is not None:
            k = int(own["k"])
            if own["what"] == "send":
                bisect.insort(queue, k)
            else:  # its delivery report: no request will carry it again
                if k in queue:
                    queue.remove(k)
                for requests in flight.values():
                    for request in requests:
                        if k in request:
                            request.remove(k)
            continue
        m = _BUILT.search(line) or _ANSWERED.search(line)
        if m is None or m["topic"] != topic or int(m["partition"]) != partition:
            continue
        b, n = int(m["broker"]), int(m["n"])
        if "how" not in m.groupdict():  # a request built
            if len(queue) < n:
                raise Unreadable(f"a request of {n} message(s) to broker {b} with {queue} queued: {line[:200]}")
            request, queue[:] = queue[:n], queue[n:]
            flight.setdefault(b, deque()).append(request)
            for k in request:
                count[k] = count.get(k, 0) + 1
                out.append({"kind": "attempt", "value": f"r{k}", "broker": b, "n": count[k], "after": last.get(b)})
                last[b] = [f"r{k}", count[k]]
        elif flight.get(b):
            request = flight[b].popleft()
            if m["how"] != "delivered":  # back to the queue until sent again or answered for good
                for k in request:
                    bisect.insort(queue, k)
    return out


def read(folder: Path, topic: str) -> list[dict[str, Any]]:
    """The attempts of a run's cluster folder: none when it has no librdkafka log or the log does
    not replay (the validator then takes one request per record, to any broker)."""
    path = folder / "logs" / LOG
    try:
        return attempts(path.read_text(errors="replace"), topic) if path.exists() else []
    except Unreadable:
        return []


def targets(records: list[dict[str, Any]]) -> dict[str, tuple[int, ...]]:
    """Each record's requests: the broker of each, in order (a record absent: one request, to
    any broker)."""
    out: dict[str, tuple[int, ...]] = {}
    for e in records:
        out[e["value"]] = out.get(e["value"], ()) + (int(e["broker"]),)
    return out


def order(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[str, int]]:
    """(record, request index from 0) -> the one just before it on the same connection."""
    return {(e["value"], e["n"] - 1): (e["after"][0], e["after"][1] - 1) for e in records if e.get("after")}
