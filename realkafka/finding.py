"""The re-election finding of issue 29, played on a real KRaft cluster.

    python -m kafkamc.realkafka.finding --kafka-version 4.1.1 [--runs 3] [--keep DIR]
        [--auto-rebalance]   the controller's own preferred election (auto.leader.rebalance.enable)
        [--control]          broker 2 applies epoch N+1 by itself: nothing is acknowledged, nothing lost
        [--patched]          on brokers with the proposed fix (realkafka/patched.py): nothing lost

The model's trace, in Kafka's words: broker 2 leads epoch N with follower 3 holding a record r1
that broker 1 (in the ISR, stalled) lacks, so r1 is not committed and its acks=all produce waits
in broker 2's purgatory. Broker 2 stalls; a preferred election makes broker 1 leader of epoch
N+1, and follower 3 truncates r1 against it. Broker 1 shuts down (controlled), so the controller
elects broker 2 again, epoch N+2, while broker 2 is still stalled. Broker 2 then loads both
PartitionChangeRecords in one metadata delta (MetadataLoader.handleCommit builds one delta per
commit it reads), so Partition.makeLeader sees a leader that stays leader (isNewLeader false):
Replica.resetReplicaState keeps follower 3's log end offset from epoch N, maybeIncrementLeaderHW
moves the HW over r1, and tryCompleteDelayedRequests acknowledges the waiting produce. Broker 3
was stalled before broker 2 came back, so it never fetches r1 again; broker 2 crashes, 3 is
elected, and r1, acknowledged, is in no log.

The stalls are SIGSTOP, each shorter than the session timeout, so no broker is fenced by them.
Each step's observation comes from Kafka itself: the segment file of broker 3's log (its size
rises when r1 is fetched and falls when it is truncated), the producer's delivery report, what
a consumer reads, the brokers' state-change log lines, and the controller's metadata log.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kafkamc.realkafka import client
from kafkamc.realkafka.cluster import Cluster, Settings, kraft_cluster

TOPIC = "finding"
# The stalls last a few seconds; the session timeout is well above them, so that the controller
# fences no stalled broker (BrokerHeartbeatManager), and the lag time too (Partition.maybeShrinkIsr).
SETTINGS = Settings(session_timeout_ms=18000, replica_lag_ms=30000)
# A broker's outstanding KRaft fetch is answered within metadata.max.idle.interval.ms (500 ms by
# default: the controller's NoOpRecord), so after this long a stalled broker has nothing pending
# and every later metadata record reaches it in the first fetch after it resumes.
RAFT_DRAIN_S = 1.5
LIBRDKAFKA_LOG = "librdkafka.log"  # the clients' own log, beside the brokers' (client.log_file)
LOG_LINES = (
    "starts at leader epoch",
    "Truncating",
    "high watermark",
    "Skipped the become-leader",
    "skipped leader epochs",
)


@dataclass
class Outcome:
    version: str
    acked_offset: int | None = None
    ack_error: str | None = None
    r1_truncated_on_3: bool = False
    read_after: list[tuple[int, str]] = field(default_factory=list)
    offset_now_holds: str | None = None
    steps: list[str] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    log_excerpts: dict[str, list[str]] = field(default_factory=dict)
    stalls_s: dict[str, float] = field(default_factory=dict)
    hw_checkpoint_2: int | None = None
    clients: int = 0  # librdkafka handles the run created (admins, producers, consumers)

    @property
    def lost(self) -> bool:
        """An acknowledged r1 that no consumer reads at its offset."""
        return self.acked_offset is not None and (self.acked_offset, "r1") not in self.read_after


def _log_size(cluster: Cluster, node: int) -> int:
    return sum(p.stat().st_size for p in cluster.partition_dir(node, TOPIC).glob("*.log"))


def _until(what: str, check: Callable[[], Any], timeout: float, poll: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(poll)
    raise TimeoutError(f"not seen in {timeout:.0f} s: {what}")


def _epoch(cluster: Cluster, node: int, role: str, leader: int) -> int:
    """The last leader epoch node's state-change log shows it taking up as role ("Leader" or
    "Follower") under leader (Partition.makeLeader, makeFollower); -1 if none."""
    epoch = -1
    for line in cluster.log_lines(node, f"{role} {TOPIC}-0", "starts at leader epoch"):
        if role == "Leader" and node != leader or role == "Follower" and f"Current leader is {leader}." not in line:
            continue
        epoch = int(line.split("starts at leader epoch ", 1)[1].split()[0])
    return epoch


def _next_tick(cluster: Cluster) -> float:
    """When (time.time()) the controller's electPreferred task runs next: its last logged run
    plus the interval (PeriodicTaskControlManager logs each run of a VERBOSE task)."""
    import datetime

    lines = cluster.log_lines(0, "Periodic task electPreferred")
    if not lines:
        raise TimeoutError("the controller has not logged its electPreferred task yet")
    stamp = lines[-1][1:13]  # [HH:MM:SS,mmm]
    today = datetime.date.today()
    when = datetime.datetime.combine(today, datetime.datetime.strptime(stamp, "%H:%M:%S,%f").time())
    return when.timestamp() + cluster.settings.imbalance_check_s


def _checkpointed_hw(cluster: Cluster, node: int) -> int | None:
    """The partition's HW in node's replication-offset-checkpoint (lines: topic partition offset)."""
    path = cluster.data_dir(node) / "replication-offset-checkpoint"
    for line in path.read_text().splitlines()[2:] if path.exists() else []:
        topic, partition, offset = line.split()
        if topic == TOPIC and partition == "0":
            return int(offset)
    return None


def _describe(k: client.Clients, cluster: Cluster, nodes: list[int]) -> dict[str, Any] | None:
    try:
        # Every broker: the run's kept admin. Some of them: a new one, which asks only those.
        keep = set(nodes) == set(cluster.broker_ids)
        return k.describe(cluster.bootstrap_of(nodes), TOPIC, timeout=3.0, keep=keep)
    except Exception:
        return None


def _leader_is(k: client.Clients, cluster: Cluster, nodes: list[int], leader: int, isr: set[int] | None = None) -> bool:
    d = _describe(k, cluster, nodes)
    return d is not None and d["leader"] == leader and (isr is None or set(d["isr"]) == isr)


class Scenario:
    """One run of the schedule on a fresh cluster; each step appends a line to outcome.steps.
    Its client handles come from `clients` (one admin per set of brokers asked, logging to the
    run's file); the terminal gets only the steps."""

    def __init__(
        self,
        cluster: Cluster,
        outcome: Outcome,
        echo: bool,
        control: bool = False,
        auto: bool = False,
        clients: client.Clients | None = None,
    ):
        self.c, self.o, self.echo, self.t0 = cluster, outcome, echo, time.monotonic()
        self.control, self.auto = control, auto
        self.k = client.Clients() if clients is None else clients

    def leader_is(self, nodes: list[int], leader: int, isr: set[int] | None = None) -> bool:
        return _leader_is(self.k, self.c, nodes, leader, isr)

    def isr(self, nodes: list[int]) -> list[int]:
        return (_describe(self.k, self.c, nodes) or {}).get("isr", [])

    def note(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:6.1f}s  {text}"
        self.o.steps.append(line)
        if self.echo:
            print(line, flush=True)

    def run(self) -> None:
        c, o, k = self.c, self.o, self.k
        k.create_topic(c.bootstrap, TOPIC, [1, 2, 3], min_isr=2)
        _until("leader 1, ISR [1,2,3]", lambda: self.leader_is([1, 2, 3], 1, {1, 2, 3}), 30)
        producer = k.producer(c.bootstrap, TOPIC)
        r0 = producer.send("r0")
        producer.wait(r0, 20)
        self.note(f"topic {TOPIC}: replicas [1,2,3], min.insync.replicas=2; r0 acked at offset {r0.offset}")

        # Broker 2 leads epoch N: broker 1 shuts down (controlled) and comes back into the ISR.
        for attempt in range(4):
            c.stop(1)
            _until("leader 2", lambda: self.leader_is([2, 3], 2), 30)
            # A new producer: the last one's metadata may still name broker 1 as the leader, and
            # without retries its send would fail. Every later send goes to broker 2 or 3 as leader.
            producer = k.producer(c.bootstrap_of([2, 3]), TOPIC)
            r0b = producer.send(f"r0b{'' if attempt == 0 else attempt}")
            producer.wait(r0b, 20)
            c.start(1)
            _until("ISR [1,2,3]", lambda: self.isr([2, 3]) in ([1, 2, 3], [2, 3, 1]), 60, 0.05)
            if not self.auto:
                break
            # The controller's electPreferred task (QuorumController.registerElectPreferred) runs
            # every leader.imbalance.check.interval.seconds and logs each run; its next run moves
            # the leadership back to broker 1. The stalls start 3 s before it; when it is nearer,
            # let it run and move the leadership to broker 2 again.
            wait = _next_tick(c) - 3.0 - time.time()
            if wait >= 0 and self.leader_is([2, 3], 2):
                time.sleep(wait)
                break
            _until("leader 1 (the controller's rebalance)", lambda: self.leader_is([2, 3], 1), 30)
            self.note("the controller's rebalance came too soon after broker 1 rejoined: again")
        self.note(
            f"r0b acked at offset {r0b.offset} by leader 2; broker 1 restarted (controlled shutdown, then start): "
            "broker 2 leads, ISR [1,2,3]"
        )

        # r1 reaches 2 and 3 but not 1 (stalled, still in the ISR): not committed, its ack waits.
        # Broker 1's last fetch must be answered before r1 arrives, or the answer carries r1 into
        # its socket and it appends r1 when it resumes: wait out replica.fetch.wait.max.ms first.
        c.pause(1)
        t_pause1 = time.monotonic()
        time.sleep(0.5)
        size0 = _log_size(c, 3)
        r1 = producer.send("r1")
        _until("r1 in broker 3's log", lambda: _log_size(c, 3) > size0, 10, poll=0.02)
        time.sleep(0.5)  # broker 3's next fetch tells leader 2 its log end offset past r1
        producer.wait(r1, 0.2)
        n = _epoch(c, 2, "Leader", 2)
        self.note(
            f"broker 1 paused; r1 produced to leader 2 (epoch {n}), fetched by broker 3; "
            f"ack pending: {r1.answered is None}"
        )

        # Broker 2 stalls and misses epoch N+1; broker 1 resumes and leads it (preferred election).
        c.pause(2)
        t_pause2 = time.monotonic()
        time.sleep(RAFT_DRAIN_S)
        c.resume(1)
        o.stalls_s["broker 1"] = time.monotonic() - t_pause1
        if self.auto:
            elected = "by the controller's auto.leader.rebalance.enable"
            _until(f"broker 1 leads epoch {n + 1}", lambda: _epoch(c, 1, "Leader", 1) == n + 1, 15, poll=0.05)
        else:
            elected = f"by ElectLeaders {client.elect(c, c.bootstrap_of([1, 3]), TOPIC)}"
            _until(f"broker 1 leads epoch {n + 1}", lambda: _epoch(c, 1, "Leader", 1) == n + 1, 10, poll=0.05)
        self.note(f"broker 2 paused; broker 1 resumed; preferred election {elected}: broker 1 leads epoch {n + 1}")
        try:
            _until("broker 3 truncates r1", lambda: _log_size(c, 3) == size0, 10, poll=0.02)
            o.r1_truncated_on_3 = True
        except TimeoutError:
            pass
        self.note(f"broker 3 follows broker 1; r1 truncated from broker 3's log: {o.r1_truncated_on_3}")
        if self.control:
            # The control: broker 2 applies epoch N+1 on its own (it becomes a follower of 1),
            # then stalls again, so that epoch N+2 reaches it in a delta of its own.
            c.resume(2)
            _until(f"broker 2 follows 1 in epoch {n + 1}", lambda: _epoch(c, 2, "Follower", 1) == n + 1, 15, 0.05)
            c.pause(2)
            time.sleep(RAFT_DRAIN_S)
            self.note(f"control: broker 2 resumed until it followed broker 1 in epoch {n + 1}, then paused again")

        # Broker 3 stalls (so it cannot fetch r1 again); broker 1 asks to shut down, the controller
        # elects broker 2 (epoch N+2). Broker 1 itself stays in PENDING_CONTROLLED_SHUTDOWN until
        # the unfenced brokers' metadata offsets pass its shutdown offset
        # (BrokerHeartbeatManager), so the sign of the election is broker 1's own follower line.
        c.pause(3)
        t_pause3 = time.monotonic()
        c.signal_stop(1)
        _until(f"epoch {n + 2} led by 2 (broker 1's view)", lambda: _epoch(c, 1, "Follower", 2) == n + 2, 15, 0.05)
        self.note(
            f"broker 3 paused; broker 1 asked to shut down (SIGTERM): the controller elects broker 2, epoch {n + 2}"
        )

        c.resume(2)
        o.stalls_s["broker 2"] = time.monotonic() - t_pause2
        producer.wait(r1, 10)
        o.acked_offset, o.ack_error = r1.offset, r1.error
        self.note(
            f"broker 2 resumed: r1's produce answered {r1.answered is not None}: offset {r1.offset}, error {r1.error}"
        )
        # The HW broker 2 checkpoints (ReplicaManager, every replica.high.watermark.checkpoint.interval.ms).
        time.sleep(1.0)
        o.hw_checkpoint_2 = _checkpointed_hw(c, 2)
        self.note(f"broker 2's replication-offset-checkpoint: HW {o.hw_checkpoint_2}")

        # Broker 2 crashes; broker 3, without r1, is elected once 2's session expires.
        c.kill(2)
        c.resume(3)
        o.stalls_s["broker 3"] = time.monotonic() - t_pause3
        self.note("broker 2 killed (SIGKILL); broker 3 resumed")
        _until("leader 3", lambda: self.leader_is([3], 3), SETTINGS.session_timeout_ms / 1000 + 30, poll=0.5)
        try:
            o.read_after = k.read_all(c.bootstrap_of([3]), TOPIC)
            self.note(f"broker 3 leads; a consumer reads {o.read_after}")
        except Exception as e:  # KIP-966: with ISR [3] below min ISR the HW cannot pass the epoch start
            self.note(f"broker 3 leads; no read yet: {e}")

        # Both come back; broker 2 truncates r1 as a follower of 3; the next record takes r1's offset.
        c.procs[1].wait(60)  # broker 1's controlled shutdown ends once 2 is fenced and 3 caught up
        c.start(2)
        c.start(1)
        _until("ISR of 3 with another broker", lambda: len(self.isr([1, 2, 3])) >= 2, 60)
        r2 = producer.send("r2")
        producer.wait(r2, 20)
        final = k.read_all(c.bootstrap, TOPIC)
        if o.acked_offset is not None:
            o.offset_now_holds = dict(final).get(o.acked_offset)
        self.note(f"brokers 1 and 2 restarted; r2 acked at offset {r2.offset}; a consumer reads {final}")
        if o.acked_offset is None:  # the fix: r1's produce never succeeded; say how it ended
            producer.wait(r1, 1.0)
            o.ack_error = r1.error if r1.answered is not None else "no answer yet"
            self.note(f"r1's produce in the end: offset {r1.offset}, error {o.ack_error}")


def collect(cluster: Cluster, outcome: Outcome) -> None:
    """The controller's record of the partition and the brokers' state-change lines about it."""
    try:
        outcome.history = client.controller_history(cluster, TOPIC)
    except Exception as e:  # the story is still worth printing without it
        outcome.history = [{"error": str(e)}]
    for node in cluster.broker_ids:
        lines = [ln for ln in cluster.log_lines(node, f"{TOPIC}-0") if any(k in ln for k in LOG_LINES)]
        outcome.log_excerpts[cluster.name(node)] = lines


def run_once(
    version: str,
    folder: Path | None = None,
    echo: bool = False,
    control: bool = False,
    auto: bool = False,
    patched: bool = False,
) -> Outcome:
    """One run on a fresh cluster; control=True lets broker 2 apply epoch N+1 by itself;
    patched=True runs brokers with the proposed fix (realkafka/patched.py);
    auto=True leaves the preferred election to the controller (auto.leader.rebalance.enable,
    checked every 10 s here, every 300 s by default)."""
    outcome = Outcome(version)
    settings = replace(SETTINGS, auto_rebalance=True, imbalance_check_s=10) if auto else SETTINGS
    settings = replace(settings, patched=patched)
    with (
        kraft_cluster(version, 3, settings, folder=folder) as cluster,
        client.log_file(cluster.folder / "logs" / LIBRDKAFKA_LOG) as logger,
    ):
        clients = client.Clients(logger)
        try:
            Scenario(cluster, outcome, echo, control, auto, clients).run()
        except Exception as e:  # a step that did not happen ends the run; the story says which
            outcome.steps.append(f"stopped: {type(e).__name__}: {e}")
        finally:
            collect(cluster, outcome)
            outcome.clients = clients.created
            clients.close()
    return outcome


def story(o: Outcome) -> str:
    out = [f"== Kafka {o.version}", *o.steps]
    out.append("controller's metadata log (leader, leader epoch, partition epoch, ISR, ELR):")
    out += [
        f"  leader {h.get('leader')} epoch {h.get('leaderEpoch')} partition epoch {h.get('partitionEpoch')} "
        f"ISR {h.get('isr')} ELR {h.get('elr')}"
        for h in o.history
    ]
    for name, lines in o.log_excerpts.items():
        out.append(f"{name} (state-change and log lines):")
        out += [f"  {ln[:400]}" for ln in lines]
    out.append("stalls: " + ", ".join(f"{k} {v:.1f} s" for k, v in o.stalls_s.items()))
    out.append(f"client handles: {o.clients}; librdkafka's log: logs/{LIBRDKAFKA_LOG} of the run's folder (--keep)")
    verdict = (
        f"LOST: r1 acknowledged at offset {o.acked_offset}; offset {o.acked_offset} now holds {o.offset_now_holds!r}"
        if o.lost
        else f"not lost: ack offset {o.acked_offset}, error {o.ack_error}"
    )
    out.append(verdict)
    return "\n".join(out)


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kafkamc.realkafka.finding")
    ap.add_argument("--kafka-version", default="4.1.1")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None, help="keep each run's folder (logs, data) under DIR")
    ap.add_argument("--control", action="store_true", help="broker 2 applies epoch N+1 by itself (no merged delta)")
    ap.add_argument("--auto-rebalance", action="store_true", help="the controller elects broker 1 by itself")
    ap.add_argument("--patched", action="store_true", help="brokers with the proposed fix (realkafka/patched.py)")
    args = ap.parse_args(argv)
    if args.patched:  # built before any broker starts; 4.4.0 has no sources jar to build from
        from kafkamc.realkafka.jars import JarsMissing
        from kafkamc.realkafka.patched import build

        try:
            build(args.kafka_version)
        except JarsMissing as e:
            print(f"cannot build the fix for Kafka {args.kafka_version}: {e}", file=sys.stderr)
            return 2
    lost = 0
    for i in range(args.runs):
        folder = None if args.keep is None else args.keep / f"{args.kafka_version}-run{i + 1}"
        o = run_once(
            args.kafka_version, folder, echo=True, control=args.control, auto=args.auto_rebalance, patched=args.patched
        )
        print(story(o), flush=True)
        lost += o.lost
    fix = " with the proposed fix" if args.patched else ""
    print(f"Kafka {args.kafka_version}{fix}: acknowledged write lost in {lost} of {args.runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
