"""Finding 2 on real brokers (docs/FINDINGS.md): an ISR expansion prepared on a fetch that names
broker epoch -1, delayed past a power loss and a re-registration of that broker, lets a broker
with an empty log into the ISR; it is then elected and the acknowledged write is gone.

The schedule (topic rf 3, assignment [1, 3, 2], min.insync.replicas=2, unclean election off,
ELR on), in a network namespace of the harness's own (realkafka/netns.py) so that links can be cut:

1. The link 1-3 is cut, broker 3 is killed (its old session runs from its last heartbeat) and a
   second process started: it replays the metadata and starts its fetcher before it may
   register (the old session is valid: DUPLICATE_BROKER_REGISTRATION), so with broker epoch -1.
2. r1 is sent; it waits for the dead incarnation until leader 1 shrinks the ISR to [1, 2] on its
   lag clock, and is acknowledged; broker 3's log is empty.
3. Before the old session expires, leader 1's link to the controller is cut and the link 1-3
   healed: the new process fetches r1 with -1, and leader 1, whose metadata shows broker 3's old
   registration unfenced, sends AlterPartition ISR [1, 2, 3] naming BrokerState(3, -1)
   (Partition.maybeExpandIsr, addBrokerEpochToIsr). The request is stuck in the cut link;
   AlterPartitionManager never times it out.
4. The link 1-3 is cut again, the process is killed and r1 is cut from its segment (a power loss:
   the fetched record was never flushed; realkafka/powerloss.py). A third process starts with an
   empty log, registers once the old session expired (the cleanup changes nothing: broker 3 is
   in no ISR or ELR) and is unfenced.
5. The link 1-controller heals within leader 1's own session: the request lands; leader and
   partition epochs match, broker 3 is registered and unfenced, -1 skips the epoch check
   (ReplicationControlManager.ineligibleReplicasForIsr). ISR [1, 2, 3], broker 3's log empty.
6. Broker 1 is killed at once (before its lag check drops broker 3 again); once fenced, the
   controller elects the first ISR member of the assignment, broker 3, whose log is empty.
   Broker 2 follows it and truncates r1; a consumer reads nothing, and r2 is acknowledged at
   offset 0, r1's offset.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkamc.realkafka import client, powerloss
from kafkamc.realkafka.cluster import CONTROLLER, Cluster, Settings, kraft_cluster
from kafkamc.realkafka.observe import read_log

TOPIC = "unregistered"
SESSION_MS = 20000  # broker.session.timeout.ms: room for steps 2 to 5 inside one session
UNFENCED = "The broker has been unfenced"  # BrokerLifecycleManager: RECOVERY to RUNNING
LAG_MS = 6000  # replica.lag.time.max.ms: leader 1 checks every 3 s, time to kill it in step 6


@dataclass
class Result:
    acked: dict[str, int] = field(default_factory=dict)  # value -> offset
    expanded: list[int] = field(default_factory=list)  # the ISR after the request landed
    log3_then: list = field(default_factory=list)  # broker 3's log when the ISR took it
    leader_after: int = -1
    read: list = field(default_factory=list)  # what a consumer reads at the end
    lines: list[str] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        return self.acked.get("r1") == 0 and self.acked.get("r2") == 0 and (0, "r1") not in self.read


class Play:
    def __init__(self, c: Cluster, say: Callable[[str], None]):
        self.c, self.say, self.t0 = c, say, time.monotonic()
        self.result = Result()
        self.producer = client.Producer(c.bootstrap_of([1, 2]), TOPIC, request_timeout_ms=60000)

    def note(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:6.1f} s  {text}"
        self.result.lines.append(line)
        self.say(line)

    def isr(self) -> list[int]:
        return sorted(client.describe(self.c.bootstrap_of([2]), TOPIC, timeout=3.0)["isr"])

    def until(self, what: str, test: Callable[[], bool], timeout: float, step: float = 0.1) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if test():
                    return
            except Exception:
                pass
            time.sleep(step)
        raise TimeoutError(f"{what}: not within {timeout:.0f} s")

    def logged(self, node: int, needle: str, after: int) -> bool:
        return len(self.c.log_lines(node, needle)) > after

    def produce(self, value: str) -> None:
        ack = self.producer.send(value)
        self.producer.wait(ack, 30)
        self.note(f"{value}: offset {ack.offset} error {ack.error}")
        if ack.offset is not None:
            self.result.acked[value] = ack.offset

    def run(self) -> Result:
        c = self.c
        client.create_topic(c.bootstrap, TOPIC, [1, 3, 2], 2)
        client.wait_partition(c.bootstrap, TOPIC, 1, [1, 3, 2])  # the ISR in assignment order
        # 1. broker 3 killed, a second process started at once, cut from leader 1: it replays the
        # metadata and starts its fetcher, not allowed to register (the old session is valid)
        c.cut(1, 3)
        c.kill(3)
        killed = time.monotonic()
        registered = len(c.log_lines(3, "Successfully registered broker 3"))
        fetchers = len(c.log_lines(3, "Added fetcher to broker 1"))
        c.start(3)
        self.note("link 1-3 cut; broker 3 killed (its old session runs from here) and started again")
        # 2. r1 waits for the dead incarnation, which is not caught up with it (Replica.isCaughtUp:
        # a follower at the leader's log end never lags), until leader 1 drops it on its lag
        # clock; r1 is committed without it
        ack = self.producer.send("r1")
        self.until("ISR [1, 2]", lambda: self.isr() == [1, 2], LAG_MS / 1000 * 3)
        self.note("ISR [1, 2]")
        self.producer.wait(ack, 30)
        self.note(f"r1: offset {ack.offset} error {ack.error}")
        if ack.offset is not None:
            self.result.acked["r1"] = ack.offset
        self.until("the new process's fetcher", lambda: self.logged(3, "Added fetcher to broker 1", fetchers), 15)
        if self.logged(3, "Successfully registered broker 3", registered):
            raise TimeoutError("the second process registered before it fetched: the old session had expired")
        self.note("broker 3's new process follows leader 1, not registered (broker epoch -1)")
        # 3. the expansion, prepared on a -1 fetch, stuck in the cut link to the controller
        c.cut(1, CONTROLLER)
        c.heal(1, 3)
        self.note("link 1-controller cut, link 1-3 healed")
        seg = c.partition_dir(3, TOPIC)
        self.until("broker 3 fetched r1", lambda: [v for _o, _e, v in read_log(seg)] == ["r1"], 10, 0.05)
        time.sleep(0.5)  # its next fetch, at offset 1, is the one that makes leader 1 expand
        if self.logged(3, "Successfully registered broker 3", registered):
            raise TimeoutError("the second process registered before leader 1 expanded the ISR")
        left = SESSION_MS / 1000 - (time.monotonic() - killed)
        self.note(f"broker 3 fetched r1 with broker epoch -1; {left:.1f} s left of its old session")
        # 4. a power loss of the second process, a third process with an empty log
        c.cut(1, 3)
        c.kill(3)
        self.note(f"broker 3 killed; {powerloss.cut(seg, c.data_dir(3), TOPIC, 0)}")
        unfences = len(c.log_lines(3, UNFENCED))
        c.start(3)
        self.until(
            "the third process registered", lambda: self.logged(3, "Successfully registered broker 3", registered), 40
        )
        self.note("broker 3's third process registered")
        self.until("broker 3 unfenced", lambda: self.logged(3, UNFENCED, unfences), 20)
        time.sleep(0.5)  # leader 1 heals into a controller whose record unfences broker 3
        self.note("broker 3 unfenced; its log: " + str([v for _o, _e, v in read_log(seg)]))
        # 5. the request lands
        c.heal(1, CONTROLLER)
        self.note("link 1-controller healed")
        self.until("ISR [1, 2, 3]", lambda: self.isr() == [1, 2, 3], 30, 0.05)
        # 6. leader 1 killed before its lag check drops broker 3; broker 3 elected
        c.kill(1)
        self.result.expanded = [1, 2, 3]
        self.result.log3_then = [v for _o, _e, v in read_log(seg)]
        self.note(f"ISR [1, 2, 3] with broker 3's log {self.result.log3_then}; broker 1 killed")
        self.until(
            "a new leader", lambda: client.describe(c.bootstrap_of([2]), TOPIC, timeout=3.0)["leader"] in (2, 3), 40
        )
        self.result.leader_after = client.describe(c.bootstrap_of([2]), TOPIC, timeout=3.0)["leader"]
        self.note(f"leader {self.result.leader_after}")
        time.sleep(2)
        self.result.read = client.read_all(c.bootstrap_of([2, 3]), TOPIC, timeout=10)
        self.note(f"a consumer reads {self.result.read}")
        self.producer = client.Producer(c.bootstrap_of([2, 3]), TOPIC, request_timeout_ms=60000)
        self.produce("r2")
        return self.result


def reproduce(version: str, folder: Path | None, say: Callable[[str], None] = print) -> Result:
    """One run; the logs are kept in folder (None: a temporary folder, removed)."""
    settings = Settings(session_timeout_ms=SESSION_MS, replica_lag_ms=LAG_MS, elr=True, network=True)
    with kraft_cluster(version, 3, settings, folder=folder) as c:
        return Play(c, say).run()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafkamc.realkafka.unregistered")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--keep", type=Path, default=None, help="a folder for the logs (kept)")
    args = ap.parse_args(argv)
    r = reproduce(args.kafka_version, args.keep)
    where = f"; logs in {args.keep}" if args.keep else ""
    print(("LOST: r1 acknowledged at offset 0, r2 acknowledged at offset 0" if r.lost else "not lost") + where)
    return 1 if r.lost else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
