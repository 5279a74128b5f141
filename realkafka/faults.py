"""The faults of `kafkamc conform` beyond signals: power-loss crashes and network partitions, how
a run plays them on a real cluster, and what each is in the model.

    powerloss B    SIGKILL, then the topic partition's segments cut back to a prefix of whole
                   batches between what Kafka had fsynced (its recovery point) and the log end
                   (realkafka/powerloss.py). The model's BrokerCrash(B, keep=k).
    cut LINK       nft drops every packet between two nodes of the cluster's network namespace
                   (realkafka/netns.py) for as long as the timeout the cut is meant to pass, a send
                   meanwhile, then heals. LINKS says which links there are and what each is in
                   the model; any other link has no counterpart in the model and is refused
                   before any process starts (`link_refusal`).

The model's counterparts are Kafka's own steps, always allowed by the validator (a fence, a
stall, a heartbeat: realkafka/validate.py's SILENT), so a partition adds no observation the
validator must match: what it provokes (a zombie leader serving, a follower fenced while it
fetches, an ISR shrink on the leader's lag clock) is seen in the controller's records, the
producer's answers and the files, and is checked like everything else.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from kafkamc.realkafka import client, powerloss
from kafkamc.realkafka.observe import checkpoint, read_log


class Run(Protocol):
    """What the faults need of a conform run (realkafka/conform.py Run), named here so that
    conform, which plays them, is not imported back."""

    @property
    def c(self) -> Any: ...
    @property
    def producer(self) -> Any: ...
    @property
    def setup(self) -> Any: ...
    @property
    def idle(self) -> Any: ...
    @property
    def note(self) -> Any: ...
    @property
    def running(self) -> Any: ...
    @property
    def say(self) -> Any: ...
    @property
    def send(self) -> Any: ...


KINDS = ("powerloss", "cut")
CONTROLLER = 0
# The links a run may cut, each with its ends, the timeout it passes and the model's counterpart.
LINKS = {
    "leader-controller": (
        "session",
        "ControllerFenceBroker(leader) once broker.session.timeout.ms passes without a heartbeat: a "
        "zombie that still leads in its own view and serves its producers; BrokerHeartbeat(leader) "
        "when healed",
    ),
    "leader-follower": (
        "lag",
        "ReplicaStall(follower): its fetches stop, its heartbeats go on; the leader drops it on its "
        "lag clock (AlterPartition); its next Fetch when healed",
    ),
    "follower-controller": (
        "session",
        "ControllerFenceBroker(follower) once its session times out, while it still fetches from its "
        "leader; BrokerHeartbeat(follower) when healed",
    ),
}
# Links people may ask for that the model has no counterpart of, and why (one line each).
NOT_IN_MODEL = {
    "follower-follower": "the model has no link between two followers (a follower talks only to its leader "
    "and the controller)",
    "leader-client": "the model's producers always reach the broker they send to (a client cut off is a "
    "request never sent, which the model has as no Produce)",
    "follower-client": "the model has no client of a follower",
    "controller-client": "the model's operator commands always reach the controller",
    "one-way": "the model has no one-way link: a cut drops both directions",
}


def link_refusal(links: tuple[str, ...], rf: int) -> str | None:
    """Why these links cannot be cut in a run the model validates, or None."""
    for link in links:
        if link in LINKS:
            continue
        why = NOT_IN_MODEL.get(link, "the model has no such link")
        return f"--links {link}: {why}; the links the model has are {', '.join(LINKS)}"
    if rf < 2 and any("follower" in link for link in links):
        return "--links leader-follower and follower-controller need a follower: --rf 1 has none"
    return None


class Faults:
    """What a run keeps to play power losses and to read the files of a broker that lost power
    as its restart will (see `seen`)."""

    def __init__(self) -> None:
        # The fewest records each broker's log held since its process started: the model's
        # Broker.flushed is at most that (what the process recovered, lowered by truncations), and
        # a power loss may keep no fewer (spec/broker_lifecycle.may_crash).
        self.floor: dict[int, int] = {}
        self.last: dict[int, tuple[int, bool]] = {}  # broker -> (log length, running) at the last cut
        self.lost: set[int] = set()  # brokers down after a power loss that lost records

    # ---- playing them

    def play(self, run: Run, step: dict[str, Any]) -> None:
        if step["do"] == "powerloss":
            self.power_loss(run, int(step["broker"]), float(step["pick"]))
        else:
            self.cut(run, step["link"], float(step["pick"]))

    def power_loss(self, run: Run, b: int, pick: float) -> None:
        c = run.c
        if not c.alive(b):
            return
        c.kill(b)
        part = c.partition_dir(b, "conform")
        end = len(read_log(part))
        flushed = checkpoint(c.data_dir(b) / "recovery-point-offset-checkpoint", "conform") or 0
        low = max(flushed, self.floor.get(b, 0))
        keeps = sorted({k for k in powerloss.boundaries(part) if low <= k <= end} | {end})
        keep = keeps[min(int(pick * len(keeps)), len(keeps) - 1)]
        if keep < end:
            powerloss.cut(part, c.data_dir(b), "conform", keep)
            self.lost.add(b)
        run.note("kill", broker=b, keep=keep, end=end, flushed=flushed)
        getattr(run, "killed", {})[b] = time.monotonic()  # a restart may wait out its session

    def ends(self, run: Run, link: str, pick: float) -> tuple[int, int] | None:
        """The two nodes of `link` now: the leader as the brokers' metadata has it, a follower
        among the other running replicas (`pick` chooses), the controller as node 0."""
        up = run.running()
        if not up:
            return None
        try:
            desc = client.describe(run.c.bootstrap_of(up), "conform", timeout=5.0)
        except Exception:
            return None
        leader = desc["leader"]
        followers = [b for b in desc["replicas"] if b != leader and b in up]
        follower = followers[min(int(pick * len(followers)), len(followers) - 1)] if followers else None
        if link == "leader-controller":
            return (leader, CONTROLLER) if leader in up else None
        if link == "leader-follower":
            return (follower, leader) if leader in up and follower is not None else None
        return (follower, CONTROLLER) if follower is not None else None

    def cut(self, run: Run, link: str, pick: float) -> None:
        ends = self.ends(run, link, pick)
        if ends is None:
            run.note("partition", a=0, b=0, link=link, skipped=True)
            run.say(f"  no {link} link to cut now (no live leader or follower): skipped")
            return
        a, b = ends
        s = run.setup.settings()
        run.note("partition", a=a, b=b, link=link)
        run.c.cut(a, b)
        run.send(wait=0.0)
        run.idle((s.session_timeout_ms + 2000 if LINKS[link][0] == "session" else s.replica_lag_ms * 1.75) / 1000)
        if link == "leader-controller" and run.producer is not None:
            # A request the zombie refuses once healed (NOT_LEADER_OR_FOLLOWER) is sent again by
            # librdkafka to the new leader, retries=0 notwithstanding (docs/REAL_KAFKA.md, the
            # control): a second append of one send, which no model step is. Given up first.
            run.producer.give_up()
        run.c.heal(a, b)
        run.note("heal", a=a, b=b, link=link)

    # ---- reading the files

    def seen(self, logs: dict[int, list], ckpts: dict[int, int], epochs: dict[int, list], up: list[int]) -> None:
        """At a cut: track each broker's log floor, and read a broker down after a power loss as
        its restart will: LogLoader truncates the leader-epoch cache to the log end
        (LeaderEpochFileCache.truncateFromEndAsyncFlush) and UnifiedLog.updateHighWatermark caps
        the checkpointed HW at the log end, where the files still hold what was fsynced before
        the cut (the model's crashed broker is already what it will read: BrokerCrash)."""
        for b, log in logs.items():
            n, running = len(log), b in up
            before = self.last.get(b, (0, True))
            if running and not before[1]:  # restarted since the last cut: it recovered what it had
                self.floor[b] = before[0]
            self.floor[b] = min(self.floor.get(b, 0), n)
            self.last[b] = (n, running)
            if b not in self.lost:
                continue
            # A restarted process holds the capped values too, and its files say so only once it
            # rewrites them (ReplicaManager.checkpointHighWatermarks, every interval; a restart at
            # once, issue 41, is cut before that): read capped until the checkpoint is within the log.
            if running and ckpts.get(b, 0) <= n:
                self.lost.discard(b)
                continue
            if b in ckpts:
                ckpts[b] = min(ckpts[b], n)
            if b in epochs:
                epochs[b] = [x for x in epochs[b] if x[1] < n]


def counterparts(events: list[dict[str, Any]]) -> list[str]:
    """Each fault a run made, in the model's terms (for the report)."""
    out = []
    opened: dict[tuple[int, int], float] = {}
    for e in events:
        kind = e["kind"]
        if kind == "kill" and "keep" in e:
            out.append(
                f"power loss of broker {e['broker']}: {e['end']} record(s) written, {e['keep']} kept "
                f"(recovery point {e['flushed']}): BrokerCrash({e['broker']}, keep={e['keep']})"
            )
        elif kind == "kill":
            out.append(f"SIGKILL of broker {e['broker']}: BrokerCrash({e['broker']}, keep=its log end)")
        elif kind == "partition" and e.get("skipped"):
            out.append(f"cut {e['link']}: skipped (no such link at that moment)")
        elif kind == "partition":
            opened[(e["a"], e["b"])] = e["t"]
        elif kind == "heal":
            ends = " and ".join("the controller" if n == CONTROLLER else f"broker {n}" for n in (e["a"], e["b"]))
            took = e["t"] - opened.pop((e["a"], e["b"]), e["t"])
            out.append(f"cut {e['link']} ({ends}, {took:.1f} s): {LINKS[e['link']][1]}")
        elif kind == "restart":
            out.append(f"restart of broker {e['args'][0]}: BrokerRestart({e['args'][0]})")
        elif kind == "shutdown":
            out.append(f"SIGTERM of broker {e['args'][0]}: ControlledShutdown({e['args'][0]})")
        elif kind == "elect":
            out.append("preferred election: ElectLeaders")
        elif kind == "reassign":
            out.append(f"reassignment to {e['args'][0]}: AlterPartitionReassignments")
        elif kind == "pause":
            out.append(f"SIGSTOP of broker {e['broker']}: ReplicaStall or ControllerFenceBroker, by its length")
    return out
