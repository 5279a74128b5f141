"""Issue 43, item 9: the real-Kafka scripts keep librdkafka's log out of their report and create
few client handles. Needs confluent-kafka, not Kafka: the clients point at a closed port, where
librdkafka logs a refused connection at once."""

from __future__ import annotations

import inspect
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("confluent_kafka")

from kafkamc.realkafka import client, finding  # noqa: E402

CLOSED = "127.0.0.1:1"  # nothing listens on port 1: each connection attempt is refused and logged

SCRIPT = f"""
import sys
from pathlib import Path
from kafkamc.realkafka import client

log = Path(sys.argv[1])
with client.log_file(log) as logger:
    k = client.Clients(logger if sys.argv[2] == "file" else None)
    producer = k.producer("{CLOSED}", "t")
    producer.send("v")
    for _ in range(30):  # a schedule's polling: the same brokers asked again and again
        try:
            k.describe("{CLOSED}", "t", {{1}}, timeout=0.05)
        except Exception:
            pass
    producer.serve(0.5)
    producer.give_up()
    k.close()
    del producer
print(k.created)
"""


def _run(tmp_path, where: str) -> tuple[subprocess.CompletedProcess, str]:
    log = tmp_path / f"{where}.log"
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log), where], capture_output=True, text=True, timeout=120, check=True
    )
    return p, log.read_text()


def test_librdkafka_logs_to_the_run_file_not_the_terminal(tmp_path):
    p, log = _run(tmp_path, "file")
    assert p.stderr == "" and p.stdout.strip() == "2"  # one admin for 30 describes, one producer
    assert "Connection refused" in log and "FAIL" in log
    # The control: without the run's logger, librdkafka writes its errors to the terminal.
    p, log = _run(tmp_path, "stderr")
    assert "Connection refused" in p.stderr and log == ""


def test_one_admin_per_set_of_brokers_asked():
    k = client.Clients()
    admins = [k.admin(b) for b in (CLOSED, "127.0.0.1:2", CLOSED, "127.0.0.1:2", CLOSED)]
    assert k.created == 2 and admins[0] is admins[2] is admins[4] and admins[1] is admins[3]
    k.close()


def test_the_finding_creates_its_handles_through_the_run_clients():
    """Every admin, producer and consumer of the schedule is the run's (Clients): one admin per set
    of brokers asked (five sets), a producer at the start and one per try of broker 2's leadership
    (at most four), two readers. A handle made per poll (the describe of each _until) made over
    300 in one run and their teardown lines filled the terminal."""
    source = inspect.getsource(finding)
    for direct in ("client.describe(", "client.Producer(", "client.read_all(", "client.create_topic(", "AdminClient("):
        assert direct not in source
    run = inspect.getsource(finding.Scenario.run)
    assert run.count("k.producer(") == 2 and run.count("for attempt in range(4)") == 1
    assert run.count("k.read_all(") == 2


def test_an_answer_from_a_broker_not_asked_is_refused():
    """A kept admin has learnt every broker and may ask one shutting down, whose metadata is stale
    (the one real run of this change waited 48 s for "leader 3" that way): describe names the
    brokers it asks, and an answer from another is refused, as a new handle never got one."""
    part = SimpleNamespace(leader=3, replicas=[1, 2, 3], isrs=[3])
    md = SimpleNamespace(orig_broker_id=1, topics={"t": SimpleNamespace(partitions={0: part})})
    with pytest.raises(LookupError, match=r"answered by broker 1, not one of \[3\]"):
        client.answered_by(md, "t", 0, {3})
    md.orig_broker_id = 3
    assert client.answered_by(md, "t", 0, {3}) == {"leader": 3, "replicas": [1, 2, 3], "isr": [3]}
