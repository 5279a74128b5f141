"""A KRaft cluster of real Kafka brokers on this machine's loopback, for tests and replays.

    with kraft_cluster("4.1.1", brokers=3, settings=Settings(session_timeout_ms=12000)) as c:
        c.create_topic("t", replicas=[1, 2, 3], min_isr=2)
        c.pause(2); ...; c.resume(2)

One controller (node 0, a single voter) and N brokers (nodes 1..N), each its own JVM started from
the jars of realkafka/pom.xml, in a temporary folder with a log per process (`logs/NAME.log`).
Start-up is judged by asking: the controller is ready when its port accepts a connection, the
brokers when the cluster's metadata (a Metadata request through confluent-kafka) lists all of
them, which a broker only is once the controller has unfenced it (BrokerHeartbeatManager). A
process that exits while we wait fails the start with the end of its log.

Faults as a Kafka engineer causes them: kill (SIGKILL), pause and resume (SIGSTOP, SIGCONT),
stop (SIGTERM: controlled shutdown, since controlled.shutdown.enable is on), start (a restart on
the same folder). Every JVM is started in a session of its own with PR_SET_PDEATHSIG (the helper
of checker/spark/cluster.py), so it dies with the Python process that started it, SIGKILL
included; leaving the `with` kills every process of the cluster that still runs.

    python -m kafkamc.realkafka.cluster --kafka-version 4.1.1      # runs until Ctrl-C
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kafkamc.checker.spark.cluster import _die_with_parent, free_ports
from kafkamc.realkafka import jars
from kafkamc.realkafka.netns import Network

CONTROLLER = 0
GID_BASE = 61000
LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{HH:mm:ss,SSS}] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
"""
# The tools' (StorageTool, DumpLogSegments, the probe): warnings only, on stderr, so that stdout
# is the tool's answer alone.
LOG4J2_TOOLS = """status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""
# C1 only and the serial collector: these JVMs are short-lived and the machine has two cores.
JVM_FLAGS = ["-Xms64m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


class ClusterFailed(RuntimeError):
    """A process that did not come up (its log is named), or a cluster that is not ready in time."""


@dataclass(frozen=True)
class Settings:
    """The cluster-wide settings; the defaults shorten Kafka's timeouts for testing.

    session_timeout_ms is the controller's broker.session.timeout.ms (a broker that sends no
    heartbeat for that long is fenced: BrokerHeartbeatManager); replica_lag_ms is
    replica.lag.time.max.ms (Partition.maybeShrinkIsr); elr turns on the
    eligible.leader.replicas.version feature on or off at format time (KIP-966; None: the
    release's default, which is on for a new 4.1 or 4.4 cluster); auto_rebalance is the
    controller's auto.leader.rebalance.enable (QuorumController.maybeBalancePartitionLeaders)."""

    session_timeout_ms: int = 6000
    heartbeat_ms: int = 500
    replica_lag_ms: int = 10000
    elr: bool | None = None
    auto_rebalance: bool = False
    imbalance_check_s: int = 1
    heap: str = "256m"
    # The finding's proposed fix (realkafka/patched.py): the patched Partition classes first.
    patched: bool = False
    # In a network namespace of the harness's own, where links can be cut (realkafka/netns.py).
    network: bool = False
    extra_broker: dict[str, str] = field(default_factory=dict)
    extra_controller: dict[str, object] = field(default_factory=dict)


def _props(values: dict[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


class Cluster:
    """A running cluster: its processes, ports and folder, and the faults and moves on them."""

    def __init__(self, version: str, brokers: int, settings: Settings, folder: Path):
        self.version, self.settings, self.folder = version, settings, folder
        self.broker_ids = list(range(1, brokers + 1))
        ports = free_ports(brokers + 1)
        self.controller_port = ports[0]
        self.ports = dict(zip(self.broker_ids, ports[1:]))
        self.procs: dict[int, subprocess.Popen] = {}
        self.cluster_id = _cluster_id()
        self.net: Network | None = None
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        (folder / "log4j2.properties").write_text(LOG4J2)
        (folder / "tools-log4j2.properties").write_text(LOG4J2_TOOLS)

    # ---- addresses and files

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def controller_bootstrap(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    def name(self, node: int) -> str:
        return "controller" if node == CONTROLLER else f"broker-{node}"

    def log_path(self, node: int) -> Path:
        return self.folder / "logs" / f"{self.name(node)}.log"

    def data_dir(self, node: int) -> Path:
        return self.folder / "data" / self.name(node)

    def partition_dir(self, node: int, topic: str, partition: int = 0) -> Path:
        return self.data_dir(node) / f"{topic}-{partition}"

    # ---- configuration (Kafka's own setting names, KafkaConfig / KRaftConfigs)

    def _common(self, node: int) -> dict[str, object]:
        return {
            "node.id": node,
            "controller.quorum.voters": f"{CONTROLLER}@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": self.data_dir(node),
        }

    def controller_config(self) -> dict[str, object]:
        s = self.settings
        return (
            self._common(CONTROLLER)
            | {
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "broker.session.timeout.ms": s.session_timeout_ms,
                "auto.leader.rebalance.enable": str(s.auto_rebalance).lower(),
                "leader.imbalance.check.interval.seconds": s.imbalance_check_s,
                "leader.imbalance.per.broker.percentage": 0,
            }
            | s.extra_controller
        )

    def broker_config(self, node: int) -> dict[str, object]:
        s = self.settings
        port = self.ports[node]
        return (
            self._common(node)
            | {
                "process.roles": "broker",
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "broker.heartbeat.interval.ms": s.heartbeat_ms,
                "broker.session.timeout.ms": s.session_timeout_ms,
                "replica.lag.time.max.ms": s.replica_lag_ms,
                "replica.fetch.wait.max.ms": 100,
                "replica.fetch.backoff.ms": 100,
                "replica.high.watermark.checkpoint.interval.ms": 500,
                "log.flush.offset.checkpoint.interval.ms": 1000,
                "log.flush.start.offset.checkpoint.interval.ms": 1000,
                "controlled.shutdown.enable": "true",
                "auto.create.topics.enable": "false",
                "num.partitions": 1,
                "offsets.topic.replication.factor": 1,
                "transaction.state.log.replication.factor": 1,
                "transaction.state.log.min.isr": 1,
                "group.initial.rebalance.delay.ms": 0,
                "log.segment.bytes": 1048576,
                "num.network.threads": 2,
                "num.io.threads": 2,
                "num.recovery.threads.per.data.dir": 1,
                "background.threads": 2,
            }
            | s.extra_broker
        )

    # ---- processes

    def _config_file(self, node: int) -> Path:
        path = self.folder / f"{self.name(node)}.properties"
        cfg = self.controller_config() if node == CONTROLLER else self.broker_config(node)
        path.write_text(_props(cfg))
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        log4j = f"-Dlog4j2.configurationFile=file:{self.folder / 'log4j2.properties'}"
        return [
            jars.java(),
            f"-Xmx{self.settings.heap}",
            *JVM_FLAGS,
            log4j,
            "-cp",
            self.classpath(),
            main,
            *args,
        ]

    def classpath(self) -> str:
        """The release's jars; with Settings.patched, the patched classes ahead of them (the JVM
        loads a class from the first classpath entry that has it)."""
        if not self.settings.patched:
            return jars.classpath(self.version)
        from kafkamc.realkafka import patched

        return f"{patched.build(self.version)}{os.pathsep}{jars.classpath(self.version)}"

    def format(self, nodes: list[int]) -> None:
        """kafka-storage format (kafka.tools.StorageTool) of fresh log dirs, all at once."""
        procs = {}
        for node in nodes:
            cmd = self._java(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={self.cluster_id}",
                "-c",
                str(self._config_file(node)),
            )
            if self.settings.elr is not None:
                cmd += ["--feature", f"eligible.leader.replicas.version={int(self.settings.elr)}"]
            procs[node] = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=_die_with_parent()
            )
        for node, p in procs.items():
            out, _ = p.communicate()
            if p.returncode != 0:
                raise ClusterFailed(f"formatting {self.name(node)} failed: {out[-1500:]}")

    def start(self, node: int) -> None:
        """Start (or restart, on its existing folder) one process; not waited for."""
        if self.alive(node):
            raise ClusterFailed(f"{self.name(node)} is already running")
        with open(self.log_path(node), "ab") as out:
            out.write(f"==== start {time.strftime('%H:%M:%S')} ====\n".encode())
            out.flush()
            self.procs[node] = subprocess.Popen(
                self._java("kafka.Kafka", str(self._config_file(node))),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                start_new_session=True,
                preexec_fn=_die_with_parent(),
                group=self.gid(node) if self.net is not None else None,
            )

    # ---- network partitions (Settings.network)

    def gid(self, node: int) -> int:
        """The group id node's JVM runs with: how the namespace's nft rules tell nodes apart."""
        return GID_BASE + node

    def _endpoint(self, node: int) -> tuple[int, int, int]:
        port = self.controller_port if node == CONTROLLER else self.ports[node]
        return (node, self.gid(node), port)

    def cut(self, a: int, b: int) -> None:
        """Drop all traffic between nodes a and b (0 is the controller), both ways."""
        if self.net is None:
            raise ClusterFailed("a link can be cut only in a cluster started with Settings(network=True)")
        self.net.cut(self._endpoint(a), self._endpoint(b))

    def heal(self, a: int, b: int) -> None:
        if self.net is not None:
            self.net.heal(self._endpoint(a), self._endpoint(b))

    def alive(self, node: int) -> bool:
        proc = self.procs.get(node)
        return proc is not None and proc.poll() is None

    def pid(self, node: int) -> int:
        return self.procs[node].pid

    def _signal(self, node: int, sig: signal.Signals) -> None:
        if self.alive(node):
            os.kill(self.procs[node].pid, sig)

    def kill(self, node: int) -> None:
        """SIGKILL: a hard crash of the process (written pages stay in the page cache)."""
        self._signal(node, signal.SIGKILL)
        if node in self.procs:
            self.procs[node].wait()

    def pause(self, node: int) -> None:
        """SIGSTOP: the process stalls (no heartbeat, no fetch, no answer) until resume()."""
        self._signal(node, signal.SIGSTOP)

    def resume(self, node: int) -> None:
        self._signal(node, signal.SIGCONT)

    def stop(self, node: int, timeout: float = 60.0) -> int:
        """SIGTERM: a controlled shutdown (the broker hands its leaderships over, then exits)."""
        self.resume(node)
        self._signal(node, signal.SIGTERM)
        return self.procs[node].wait(timeout)

    def signal_stop(self, node: int) -> None:
        """SIGTERM without waiting: the controlled shutdown begins; stop() waits for the exit."""
        self.resume(node)
        self._signal(node, signal.SIGTERM)

    def close(self) -> None:
        """Kill every process still running (a paused one dies too: SIGKILL needs no SIGCONT)."""
        for node in list(self.procs):
            self.kill(node)

    # ---- readiness, by asking

    def _check_alive(self, nodes: list[int]) -> None:
        for node in nodes:
            proc = self.procs.get(node)
            if proc is not None and proc.poll() is not None:
                raise ClusterFailed(
                    f"{self.name(node)} exited with code {proc.returncode}; its log: {self.log_path(node)}\n"
                    + self.tail(node)
                )

    def wait_port(self, node: int, timeout: float = 60.0) -> None:
        port = self.controller_port if node == CONTROLLER else self.ports[node]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive([node])
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise ClusterFailed(
            f"{self.name(node)} did not listen on {port} in {timeout:.0f} s; log: {self.log_path(node)}"
        )

    def wait_brokers(self, nodes: list[int] | None = None, timeout: float = 90.0) -> None:
        """Until the cluster's metadata lists every broker of nodes (registered and unfenced)."""
        from kafkamc.realkafka.client import live_brokers

        want = set(self.broker_ids if nodes is None else nodes)
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while time.monotonic() < deadline:
            self._check_alive([CONTROLLER, *want])
            seen = live_brokers(self.bootstrap_of(want))
            if want <= seen:
                return
            time.sleep(0.1)
        raise ClusterFailed(f"brokers {sorted(want - seen)} not in the cluster's metadata after {timeout:.0f} s")

    def bootstrap_of(self, nodes: set[int] | list[int]) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in sorted(nodes))

    def tail(self, node: int, chars: int = 3000) -> str:
        try:
            return self.log_path(node).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def log_lines(self, node: int, *needles: str) -> list[str]:
        """The lines of node's log that contain every needle."""
        text = self.log_path(node).read_text(errors="replace") if self.log_path(node).exists() else ""
        return [line for line in text.splitlines() if all(n in line for n in needles)]


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (Uuid.randomUuid)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@contextmanager
def kraft_cluster(
    version: str = "4.1.1",
    brokers: int = 3,
    settings: Settings | None = None,
    folder: Path | None = None,
    timeout: float = 90.0,
) -> Iterator[Cluster]:
    """Format, start and wait for a cluster; on exit kill every process, and remove the folder
    unless the caller gave it (the logs are kept there then)."""
    own = folder is None
    root = Path(tempfile.mkdtemp(prefix="kafkamc-kafka-")) if folder is None else folder
    cluster = Cluster(version, brokers, settings or Settings(), root)
    net = None
    try:
        if cluster.settings.network:
            # Entered by this thread: every JVM is started from it, so each starts inside.
            net = Network({n: cluster.gid(n) for n in [CONTROLLER, *cluster.broker_ids]}).__enter__()
            cluster.net = net
        cluster.format([CONTROLLER, *cluster.broker_ids])
        cluster.start(CONTROLLER)
        for node in cluster.broker_ids:
            cluster.start(node)
        cluster.wait_port(CONTROLLER, timeout)
        cluster.wait_brokers(timeout=timeout)
        yield cluster
    finally:
        cluster.close()
        if net is not None:
            net.__exit__(None, None, None)
        if own:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kafkamc.realkafka.cluster")
    ap.add_argument("--kafka-version", default="4.1.1")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--folder", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    with kraft_cluster(args.kafka_version, args.brokers, folder=args.folder) as c:
        print(f"Kafka {args.kafka_version}: ready in {time.monotonic() - t0:.1f} s; bootstrap {c.bootstrap}")
        print(f"controller {c.controller_bootstrap}; logs in {c.folder / 'logs'}")
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
