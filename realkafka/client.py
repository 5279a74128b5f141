"""The client side of the harness: a producer that records every acknowledgement, a reader, and
the admin operations, plus the controller's own record of a partition.

Why confluent-kafka: it is Confluent's maintained Python binding of librdkafka, a complete client
whose wheels bundle librdkafka (nothing to build or download besides PyPI), with acks=all,
per-record delivery reports (offset or error: exactly what an acknowledgement is) and an
AdminClient (topics with a replica assignment, describe, preferred election). kafka-python is pure
Python but lags the brokers' protocol versions. Two things no Python client offers are done with
Kafka's own Java code from the same jars as the brokers: a preferred election that gets past a
paused broker (librdkafka sends ElectLeaders to the Metadata response's "controller", which KRaft
picks at random among the unfenced brokers, paused ones included), and reassignment
(realkafka/java/Probe.java); and the controller's view of a
partition (leader epoch, partition epoch, ISR, ELR), read from its metadata log with
kafka.tools.DumpLogSegments, since no client API returns the leader epoch.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kafkamc.checker.spark.cluster import _die_with_parent
from kafkamc.realkafka import jars, metadata_log


class Cluster(Protocol):
    """What the admin calls need of a running cluster (realkafka/cluster.py's Cluster has it).
    A protocol, not an import: cluster.py uses this module to wait for its brokers, so an
    import back would be a cycle (import-linter forbids it, pyproject.toml)."""

    version: str
    folder: Path

    def data_dir(self, node: int) -> Path: ...


def interrupted(e: BaseException | None) -> bool:
    """Whether e is Ctrl-C or SIGTERM (raised as KeyboardInterrupt), or an error a C extension made
    of one: when the handler raises while confluent-kafka's C code runs, the call returns a
    SystemError ("returned a result with an exception set") whose cause is the KeyboardInterrupt
    (measured: 50 of 60 signals sent during produce came back so)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _log(logger: logging.Logger | None) -> dict[str, Any]:
    """Where librdkafka's own log goes: to `logger` (a run's log file, served by each handle's
    poll) when given, else its errors to stderr, as before callers passed one."""
    return {"log_level": 3} if logger is None else {"logger": logger}


@contextmanager
def log_file(path: Path) -> Iterator[logging.Logger]:
    """A logger writing to `path` alone, for the `logger` setting of every client of one run:
    librdkafka logs each refused connection and each handle's teardown, which on a terminal would
    bury the run's own report. Not registered with logging (no global state), closed at the end."""
    logger = logging.Logger(f"librdkafka {path}", logging.DEBUG)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        yield logger
    finally:
        handler.close()
        logger.disabled = True  # a handle torn down later logs nowhere (not logging's stderr fallback)


class Clients:
    """The client handles of one run, created once and reused: one AdminClient per bootstrap list
    (librdkafka counts each as a producer handle, with its own connections, and a new one per
    describe made hundreds in a run) and the producers it hands out, all logging to `logger`.
    `created` counts the handles, so a run can say how many it needed."""

    def __init__(self, logger: logging.Logger | None = None):
        self.logger = logger
        self.created = 0
        self._admins: dict[str, Any] = {}

    def admin(self, bootstrap: str) -> Any:
        from confluent_kafka.admin import AdminClient

        if bootstrap not in self._admins:
            self._admins[bootstrap] = AdminClient({"bootstrap.servers": bootstrap, **_log(self.logger)})
            self.created += 1
        return self._admins[bootstrap]

    def describe(
        self, bootstrap: str, topic: str, partition: int = 0, timeout: float = 10.0, keep: bool = True
    ) -> dict[str, Any]:
        """describe() through the kept admin of bootstrap, or with keep=False a new one. A kept
        handle has learnt every broker and asks whichever it is connected to (on a real cluster
        its answers for a bootstrap of broker 3 alone came from broker 2, every time), so a
        question for some brokers only, such as the live ones while another shuts down with stale
        metadata, needs a new handle: its first answer comes from its bootstrap brokers."""
        if keep:
            admin = self.admin(bootstrap)
        else:
            from confluent_kafka.admin import AdminClient

            admin = AdminClient({"bootstrap.servers": bootstrap, **_log(self.logger)})
            self.created += 1
        try:
            return describe(bootstrap, topic, partition, timeout, admin=admin)
        finally:
            admin.poll(0)  # hand what librdkafka logged meanwhile to the logger

    def create_topic(
        self, bootstrap: str, topic: str, replicas: list[int], min_isr: int, unclean: bool = False
    ) -> None:
        create_topic(bootstrap, topic, replicas, min_isr, unclean, admin=self.admin(bootstrap))

    def producer(self, bootstrap: str, topic: str, **settings: Any) -> Producer:
        self.created += 1
        return Producer(bootstrap, topic, logger=self.logger, **settings)

    def read_all(self, bootstrap: str, topic: str, partition: int = 0, timeout: float = 20.0) -> list[tuple[int, str]]:
        self.created += 1
        return read_all(bootstrap, topic, partition, timeout, logger=self.logger)

    def close(self) -> None:
        """Tear the admin handles down now, while their log still has its file."""
        for admin in self._admins.values():
            admin.poll(0)
        self._admins.clear()


def live_brokers(bootstrap: str, timeout: float = 2.0) -> set[int]:
    """The broker ids in the cluster's metadata (KRaft lists only unfenced brokers); empty when
    no broker of bootstrap answers in time."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        return set(admin.list_topics(timeout=timeout).brokers)
    except Exception:
        return set()


def create_topic(
    bootstrap: str,
    topic: str,
    replicas: list[int],
    min_isr: int,
    unclean: bool = False,
    timeout: float = 30.0,
    admin: Any = None,
) -> None:
    """CreateTopics with an explicit assignment (replicas[0] is the preferred leader), through
    `admin` (Clients.admin) or a new AdminClient."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap}) if admin is None else admin
    config = {"min.insync.replicas": str(min_isr), "unclean.leader.election.enable": str(unclean).lower()}
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=config)
    admin.create_topics([new], request_timeout=timeout)[topic].result(timeout)


def describe(
    bootstrap: str, topic: str, partition: int = 0, timeout: float = 10.0, admin: Any = None
) -> dict[str, Any]:
    """Leader, replicas and ISR as the brokers' metadata has them (DescribeTopicPartitions),
    through `admin` (Clients.admin) or a new AdminClient."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap}) if admin is None else admin
    desc = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic].result(timeout)
    p = desc.partitions[partition]
    return {
        "leader": -1 if p.leader is None else p.leader.id,
        "replicas": [n.id for n in p.replicas],
        "isr": [n.id for n in p.isr],
    }


def wait_partition(bootstrap: str, topic: str, leader: int, isr: list[int], timeout: float = 30.0) -> dict[str, Any]:
    """describe() until the partition has leader and isr (in that order); a new topic is unknown
    to a broker until its metadata arrives, which is retried like any other answer."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] | Exception = {}
    while time.monotonic() < deadline:
        try:
            last = describe(bootstrap, topic, timeout=3.0)
            if last["leader"] == leader and last["isr"] == isr:
                return last
        except Exception as e:
            last = e
        time.sleep(0.1)
    raise TimeoutError(f"{topic}: not leader {leader} with ISR {isr} after {timeout:.0f} s (last: {last})")


SEND_MARK = "kafkamc producer:"  # the producer's own lines in its librdkafka log (realkafka/attempts.py)


@dataclass
class Ack:
    """One produced record and what the broker answered: its offset, or the error."""

    value: str
    sent: float
    offset: int | None = None
    error: str | None = None
    answered: float | None = None


@dataclass
class Producer:
    """acks=all, no retries (each record is one attempt, so an answer is the broker's answer to
    that request), long timeouts (a request may wait in a paused leader's purgatory)."""

    bootstrap: str
    topic: str
    partition: int = 0
    request_timeout_ms: int = 120000
    acks: list[Ack] = field(default_factory=list)
    required_acks: str = "all"  # the producer's acks setting: "all", "1" or "0"
    logger: logging.Logger | None = None  # where librdkafka's log goes (log_file), else errors to stderr
    debug: str = ""  # librdkafka's debug contexts ("msg": each request built, realkafka/attempts.py)

    def __post_init__(self) -> None:
        from confluent_kafka import Producer as RdProducer

        self._p = RdProducer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": self.required_acks,
                "enable.idempotence": False,
                "retries": 0,
                "linger.ms": 0,
                "request.timeout.ms": self.request_timeout_ms,
                "message.timeout.ms": self.request_timeout_ms + 10000,
                **_log(self.logger),
                **({"debug": self.debug} if self.debug else {}),
            }
        )

    def send(self, value: str) -> Ack:
        ack = Ack(value, time.time())
        self.acks.append(ack)

        def report(err: Any, msg: Any) -> None:
            ack.answered = time.time()
            if err is not None:
                ack.error = err.name()
            else:
                ack.offset = msg.offset()
            if self.logger is not None:  # served by poll in order with librdkafka's own lines
                self.logger.info(f"{SEND_MARK} answer {value} {ack.error or ack.offset}")

        if self.logger is not None:  # before librdkafka may log a request with it (attempts.py)
            self.logger.info(f"{SEND_MARK} send {value}")
        self._p.produce(self.topic, value.encode(), partition=self.partition, on_delivery=report)
        self._p.poll(0)
        return ack

    def wait(self, ack: Ack, timeout: float) -> bool:
        """Serve delivery reports until ack is answered or timeout passes; whether it was."""
        deadline = time.monotonic() + timeout
        while ack.answered is None and time.monotonic() < deadline:
            self._p.poll(0.05)
        return ack.answered is not None

    def serve(self, timeout: float = 0.0) -> None:
        """Serve the delivery reports that have arrived, waiting up to timeout for one."""
        self._p.poll(timeout)

    def flush(self, timeout: float) -> None:
        """Wait up to timeout for every request still in flight to be answered."""
        self._p.flush(timeout)

    def give_up(self) -> None:
        """Forget every request still unanswered (librdkafka's purge of queued and in-flight
        messages): the client will not send them again, whatever the broker answers."""
        self._p.purge(in_queue=True, in_flight=True, blocking=False)
        self._p.poll(0)

    def acknowledged(self) -> list[Ack]:
        return [a for a in self.acks if a.offset is not None]


def read_all(
    bootstrap: str, topic: str, partition: int = 0, timeout: float = 20.0, logger: logging.Logger | None = None
) -> list[tuple[int, str]]:
    """(offset, value) of every record a consumer reads from the beginning up to the partition's
    high watermark (read_committed has nothing to add: no transactions here)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafkamc-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **_log(logger),
        }
    )
    try:
        deadline = time.monotonic() + timeout
        while True:  # a new leader answers OFFSET_NOT_AVAILABLE until its HW is known (KIP-207)
            try:
                high = int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)[1])
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[tuple[int, str]] = []
        while (not out or out[-1][0] < high - 1) and high > 0 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append((int(m.offset() or 0), (m.value() or b"").decode()))
        return out
    finally:
        c.close()


def high_watermark(bootstrap: str, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkamc-reader", "log_level": 3})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)[1])
    finally:
        c.close()


# ---- Kafka's own Java code: the probe (realkafka/java/Probe.java) and DumpLogSegments


def _run_java(cluster: Cluster, main: str, args: list[str], extra_cp: str = "", timeout: float = 60.0) -> str:
    cp = jars.classpath(cluster.version) + (f":{extra_cp}" if extra_cp else "")
    cmd = [jars.java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp, main, *args]
    log4j = f"-Dlog4j2.configurationFile=file:{cluster.folder / 'tools-log4j2.properties'}"
    cmd.insert(2, log4j)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=_die_with_parent())
    if p.returncode != 0:
        raise RuntimeError(f"{main} {' '.join(args)} failed: {p.stderr[-1500:]}")
    return p.stdout


def _probe(cluster: Cluster, args: list[str]) -> dict[str, Any]:
    out = _run_java(cluster, "Probe", args, extra_cp=str(jars.probe_classes(cluster.version)))
    return dict(json.loads(out.strip().splitlines()[-1]))


def elect(cluster: Cluster, bootstrap: str, topic: str, partition: int = 0, kind: str = "PREFERRED") -> dict:
    """ElectLeaders through the brokers of bootstrap (the controller's listener does not take it
    from an Admin: UnsupportedEndpointTypeException); {"attempts": n, "error": None or a name}."""
    return _probe(cluster, ["elect", bootstrap, topic, str(partition), kind])


def describe_elr(cluster: Cluster, bootstrap: str, topic: str, partition: int = 0) -> dict[str, Any]:
    """Leader, replicas, ISR, ELR and last known ELR, by Kafka's Java Admin (KIP-966 fields)."""
    return _probe(cluster, ["describe", bootstrap, topic, str(partition)])


def reassign(cluster: Cluster, bootstrap: str, topic: str, replicas: list[int] | None, partition: int = 0) -> None:
    """AlterPartitionReassignments (KIP-455): move to replicas, or cancel with None."""
    target = "cancel" if replicas is None else ",".join(map(str, replicas))
    err = _probe(cluster, ["reassign", bootstrap, topic, str(partition), target])["error"]
    if err:
        raise RuntimeError(err)


def metadata_dump(cluster: Cluster) -> str:
    """The controller's metadata log as kafka.tools.DumpLogSegments --cluster-metadata-decoder prints it."""
    folder = cluster.data_dir(0) / "__cluster_metadata-0"
    segments = sorted(str(p) for p in folder.glob("*.log"))
    tool = jars.first_class(cluster.version, "kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments")
    return _run_java(cluster, tool, ["--cluster-metadata-decoder", "--files", ",".join(segments)])


def controller_history(cluster: Cluster, topic: str, partition: int = 0) -> list[dict[str, Any]]:
    """The partition's registrations in the order the controller committed them, read from its
    metadata log (realkafka/metadata_log.py says how the records are read)."""
    return metadata_log.history(metadata_dump(cluster), topic, partition)
