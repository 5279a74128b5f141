"""Issue 43, item 9: the real-Kafka scripts keep librdkafka's log out of their report and create
few client handles. Needs confluent-kafka, not Kafka: the clients point at a closed port, where
librdkafka logs a refused connection at once."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import KafkaException  # noqa: E402
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
            k.describe("{CLOSED}", "t", timeout=0.05)
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


def test_a_question_for_some_brokers_only_gets_a_new_handle():
    """The one real run with a kept admin for broker 3 alone waited 48 s for "leader 3" and
    stopped: a kept handle asks any broker it learnt (its answers came from broker 2, each of 30
    times, in a check on a real cluster), so the finding keeps one only for all brokers."""
    k = client.Clients()
    for _ in range(3):
        with pytest.raises((KafkaException, TimeoutError)):  # nothing answers
            k.describe(CLOSED, "t", timeout=0.05, keep=False)
    assert k.created == 3
    source = inspect.getsource(finding._describe)
    assert "keep = set(nodes) == set(cluster.broker_ids)" in source
    k.close()


def test_the_finding_creates_its_handles_through_the_run_clients():
    """Every admin, producer and consumer of the schedule is the run's (Clients), logging to the
    run's file: a kept admin for questions to every broker, a producer at the start and one per
    try of broker 2's leadership (at most four), two readers. Questions to some brokers only still
    take a new admin each (see above); their log lines, which filled the terminal, go to the file."""
    source = inspect.getsource(finding)
    for direct in ("client.describe(", "client.Producer(", "client.read_all(", "client.create_topic(", "AdminClient("):
        assert direct not in source
    run = inspect.getsource(finding.Scenario.run)
    assert run.count("k.producer(") == 2 and run.count("for attempt in range(4)") == 1
    assert run.count("k.read_all(") == 2
