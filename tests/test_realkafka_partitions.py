"""Network partitions on real KRaft clusters (`kafkamc trace kafka --partitions`, marked kafka):
the cluster runs in a network namespace of the replay's own, and nft cuts the links the model's
faults name (realkafka/netns.py). Each scenario is a model trace (realkafka/scenario.py) and
must end in the model's final state; nothing of the run outlives it."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest
from helpers import skip_without_namespaces
from kafkamc.realkafka.cluster import GID_BASE
from kafkamc.realkafka.netns import Network
from test_realkafka_replay import _jvms_of, _text

pytestmark = pytest.mark.kafka
VERSION = "4.1.1"


@pytest.fixture(autouse=True)
def _namespaces():
    skip_without_namespaces()


def _ours() -> list[str]:
    """Processes running with a group id of the cluster's nodes (GID_BASE + node): none may be left
    (a zombie, dead and not reaped yet by whoever inherited it, does not count)."""
    ps = subprocess.run(["ps", "-eo", "pid,gid,stat,args"], capture_output=True, text=True).stdout
    rows = [ln.split(None, 3) for ln in ps.splitlines()[1:]]
    return [" ".join(r) for r in rows if GID_BASE <= int(r[1]) < GID_BASE + 100 and not r[2].startswith("Z")]


def _replay(kafkamc_cli, tmp_path, name):
    from kafkamc.realkafka.scenario import SCENARIOS

    t = SCENARIOS[name]().save(tmp_path / f"{name}.json")
    run = tmp_path / "run"
    r = kafkamc_cli("trace", "kafka", t, "--partitions", "--kafka-version", VERSION, "--keep", run, timeout=240)
    assert _jvms_of(run) == [] and _ours() == []
    return r


def test_a_leader_cut_from_the_controller_is_fenced_while_serving(kafkamc_cli, tmp_path):
    r = _replay(kafkamc_cli, tmp_path, "zombie-leader")
    assert r.returncode == 0, r.stdout[-4000:]
    assert "step 8: ControllerFenceBroker(broker=1)  cut from the controller (nft)" in r.stdout
    # Fenced, broker 1 still leads epoch 0 in its own view and takes r2, which no follower fetches.
    zombie = "leader 2 epoch 1 replicas [1, 2, 3] ISR [2, 3] ELR [] up [1, 2, 3] HW 1 | logs 1:[r1@e0 r2@e0]"
    assert "step 12: Produce(leader=1, record=2)" in r.stdout and f"model: {zombie}" in r.stdout
    assert "real:  same" in r.stdout.split("step 12:")[1].split("step 13:")[0]
    # Healed, it follows broker 2 and truncates r2: the model's final state.
    logs = "logs 1:[r1@e0]; 2:[r1@e0]; 3:[r1@e0]"
    final = f"leader 2 epoch 1 replicas [1, 2, 3] ISR [1, 2, 3] ELR [] up [1, 2, 3] HW 1 | {logs}"
    assert f"step 20: HandleAlterPartitionResponse(leader=2)\n    model: {final}\n    real:  same" in r.stdout


def test_a_follower_cut_from_its_leader_is_dropped_from_the_isr(kafkamc_cli, tmp_path):
    r = _replay(kafkamc_cli, tmp_path, "isolated-follower")
    assert r.returncode == 0, r.stdout[-4000:]
    assert "ReplicaStall(follower=3)  cut from its leader 1 (nft)" in r.stdout
    logs = "logs 1:[r1@e0 r2@e0]; 2:[r1@e0 r2@e0]; 3:[r1@e0]"
    final = f"leader 1 epoch 0 replicas [1, 2, 3] ISR [1, 2] ELR [] up [1, 2, 3] HW 2 | {logs}"
    assert f"model: {final}\n    real:  same" in r.stdout
    assert "acknowledged at offset 1" in r.stdout


def test_an_interrupted_partition_replay_leaves_nothing(tmp_path):
    from helpers import EXE
    from kafkamc.realkafka.scenario import zombie_leader

    t = zombie_leader().save(tmp_path / "z.json")
    run = tmp_path / "run"
    p = subprocess.Popen(
        [EXE, "trace", "kafka", str(t), "--partitions", "--kafka-version", VERSION, "--keep", str(run)],
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "step 8:" not in _text(run / "report.txt"):
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)  # while broker 1 is cut off
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3, out
    assert _jvms_of(run) == [] and _ours() == []


PARENT = """
import sys
from kafkamc.realkafka.cluster import Settings, kraft_cluster
from kafkamc.realkafka.netns import Network
with kraft_cluster(sys.argv[1], brokers=1, settings=Settings(network=True)) as c:
    c.cut(1, 0)
    print(c.folder, Network.inode(), c.pid(0), c.pid(1), flush=True)
    sys.stdin.read()
"""


def test_a_killed_parent_leaves_no_jvm_and_no_namespace():
    """SIGKILL of the process whose thread holds the namespace: its JVMs die of PR_SET_PDEATHSIG,
    and with no process left in it the namespace (and its nft table) is gone."""
    import os
    import sys

    from test_netns import _holders

    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, VERSION], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    folder, inode, *pids = parent.stdout.readline().split()
    assert inode != Network.inode() and {int(p) for p in pids} <= set(_holders(inode))
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    while _holders(inode) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _holders(inode) == [] and _ours() == []
    shutil.rmtree(folder)  # the killed parent could not remove its folder
