"""realkafka/netns.py without Kafka: the namespace, a cut and a heal between two processes told
apart by their group ids, and nothing left behind after a normal end or a killed parent. Skipped,
with the reason in one line, where a network namespace cannot be made."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from kafkamc.realkafka.netns import Network, NoNetwork


def _network(gids: dict[int, int]) -> Network:
    try:
        return Network(gids).__enter__()
    except NoNetwork as e:
        pytest.skip(str(e))


CONNECT = """
import socket, sys
s = socket.socket(); s.settimeout(1.0)
try:
    s.connect(("127.0.0.1", int(sys.argv[1]))); s.sendall(b"x"); print("connected")
except OSError as e:
    print("cut", type(e).__name__)
"""


def _connect(port: int, gid: int) -> str:
    return subprocess.run(
        [sys.executable, "-c", CONNECT, str(port)], group=gid, capture_output=True, text=True
    ).stdout.strip()


def _holders(inode: str) -> list[int]:
    """The processes whose network namespace is `inode` (net:[N])."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.readlink(f"/proc/{pid}/ns/net") == inode:
                out.append(int(pid))
        except OSError:
            pass
    return out


def test_a_cut_drops_one_link_both_ways_and_a_heal_restores_it():
    host = Network.inode()
    net = _network({0: 61100, 1: 61101, 2: 61102})
    try:
        inside = Network.inode()
        assert inside != host
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        assert _connect(port, 61101) == "connected"
        net.cut((1, 61101, 40001), (0, 61100, port))  # node 1 to node 0's listener
        assert _connect(port, 61101).startswith("cut")
        assert _connect(port, 61102) == "connected"  # node 2 keeps its link
        assert _connect(port, 0) == "connected"  # the harness (group 0) is never cut
        rules = subprocess.run(["nft", "list", "chain", "inet", "kafkamc", "cuts"], capture_output=True, text=True)
        assert f"ct mark 0x{61101:08x} tcp dport {port} drop" in rules.stdout
        net.heal((0, 61100, port), (1, 61101, 40001))
        assert _connect(port, 61101) == "connected"
        srv.close()
    finally:
        net.__exit__(None, None, None)
    assert Network.inode() == host
    assert _holders(inside) == []  # no process keeps the namespace: it is gone, its table with it


PARENT = """
import subprocess, sys, time
from kafkamc.checker.spark.cluster import _die_with_parent
from kafkamc.realkafka.netns import Network
with Network({0: 61200}) as net:
    child = subprocess.Popen(["sleep", "600"], preexec_fn=_die_with_parent(), group=61200)
    print(Network.inode(), child.pid, flush=True)
    sys.stdin.read()
"""


def test_a_killed_parent_leaves_no_namespace_and_no_process():
    probe = _network({0: 61200})
    probe.__exit__(None, None, None)
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    inode, pid = parent.stdout.readline().split()
    assert inode != Network.inode() and int(pid) in _holders(inode)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _holders(inode) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _holders(inode) == []
