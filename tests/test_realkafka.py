"""The real-Kafka harness (realkafka/): a KRaft cluster of separate JVMs starts and says it is
ready, a record produced with acks=all is acknowledged and read back, the admin calls answer, and
no JVM outlives the cluster or a parent killed with SIGKILL. Marked kafka: run with -m kafka
(the jars come from Maven Central: `python -m kafkamc.realkafka.jars` resolves them first)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from kafkamc.realkafka import client
from kafkamc.realkafka.cluster import kraft_cluster

pytestmark = pytest.mark.kafka
VERSION = os.environ.get("KAFKAMC_KAFKA_VERSION", "4.4.0")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie is dead too (its parent has not reaped it yet)
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1].startswith("Z")


def _until_gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if not _gone(p)]


def test_cluster_ready_round_trip_and_teardown(tmp_path):
    with kraft_cluster(VERSION, brokers=3, folder=tmp_path) as c:
        pids = [c.pid(n) for n in [0, 1, 2, 3]]
        assert client.live_brokers(c.bootstrap) == {1, 2, 3}  # ready means: all three in the metadata
        client.create_topic(c.bootstrap, "t", [1, 2, 3], min_isr=2)
        described = client.wait_partition(c.bootstrap, "t", leader=1, isr=[1, 2, 3])
        assert described == {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]}
        producer = client.Producer(c.bootstrap, "t")
        acks = [producer.send(f"v{i}") for i in range(3)]
        assert all(producer.wait(a, 20) for a in acks)
        assert [(a.offset, a.error) for a in acks] == [(0, None), (1, None), (2, None)]
        assert client.read_all(c.bootstrap, "t") == [(0, "v0"), (1, "v1"), (2, "v2")]
        assert client.describe_elr(c, c.bootstrap, "t") == {
            "leader": 1,
            "replicas": [1, 2, 3],
            "isr": [1, 2, 3],
            "elr": [],
            "last_known_elr": [],
        }
        history = client.controller_history(c, "t")
        assert [(h["leader"], h["leaderEpoch"], h["isr"]) for h in history] == [(1, 0, [1, 2, 3])]
        # A controlled shutdown (SIGTERM) hands the leadership to broker 2, epoch 1.
        assert c.stop(1) == 143
        assert [(h["leader"], h["leaderEpoch"]) for h in client.controller_history(c, "t")][-1] == (2, 1)
    assert _until_gone(pids) == []
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "broker-1.log",
        "broker-2.log",
        "broker-3.log",
        "controller.log",
    ]


PARENT = """
import sys
from kafkamc.realkafka.cluster import kraft_cluster
with kraft_cluster(sys.argv[1], brokers=1) as c:
    print(c.folder, " ".join(str(c.pid(n)) for n in (0, 1)), flush=True)
    sys.stdin.read()
"""


def test_every_jvm_dies_with_a_killed_parent():
    """PR_SET_PDEATHSIG (checker/spark_cluster._die_with_parent): SIGKILL of the Python process
    that started the cluster, which runs no clean-up, still ends every JVM."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, VERSION], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    folder, *words = parent.stdout.readline().split()
    pids = [int(p) for p in words]
    assert len(pids) == 2 and not any(_gone(p) for p in pids)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert _until_gone(pids) == []
    shutil.rmtree(folder)  # the killed parent could not remove its folder
