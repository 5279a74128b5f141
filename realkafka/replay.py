"""Replay a saved kafkamc trace on a real KRaft cluster (`kafkamc trace kafka FILE`).

The trace's steps split into segments, each a commanded step (one we can cause) followed by the
steps Kafka takes on its own until the next commanded one. Commanded steps and their primitives:

    Produce                      a producer send (the trace's acks) of the value "r<record>"
    BrokerCrash (keep=None)      SIGKILL; the page cache survives, so nothing unflushed is lost
    BrokerCrash (keep=k)         a power loss: SIGKILL, then the segments cut to k records
                                 (realkafka/powerloss.py; refused at run time below the
                                 recovery point, which Kafka had fsynced)
    BrokerSessionTimeout         nothing: the broker is dead already; the controller fences it
    ControllerFenceBroker        SIGSTOP past broker.session.timeout.ms (a zombie)
    BrokerHeartbeat              SIGCONT
    BrokerRestart                start on the same folder
    ControlledShutdown           SIGTERM (controlled.shutdown.enable)
    ElectLeaders, AutoLeaderRebalance    ElectLeaders PREFERRED (the probe, through a live broker)
    AlterPartitionReassignments, CancelPartitionReassignment    the probe's reassign

Kafka's own steps (Fetch, MetadataUpdate, AlterPartition, HandleAlterPartitionResponse,
OffsetsForLeaderEpoch, CheckpointHighWatermarks, ControlledShutdownComplete) cannot be commanded;
ReplicaStall is a stall we make with SIGSTOP. They are held back instead: before a segment's
commanded step, every live broker that must not change its log during the segment (`hold`) is
paused, and those no longer held are resumed once the step is done. Then the real state is read
until it equals the model's state at the segment's end (observe.abstract, observe.observe), or a
timeout: the first segment that does not get there is where the replay diverged.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kafkamc.realkafka import client, interleave, powerloss, verdict
from kafkamc.realkafka.cluster import Cluster, ClusterFailed, Settings, kraft_cluster
from kafkamc.realkafka.observe import View, abstract, observe, value_of
from kafkamc.realkafka.verdict import same as _same
from kafkamc.spec import alter_partition as ap
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec import controlled_shutdown as cs
from kafkamc.spec import elect_leaders as el
from kafkamc.spec import fetch as fe
from kafkamc.spec import metadata as md
from kafkamc.spec import produce as pr
from kafkamc.spec import reassignment as ra
from kafkamc.spec.protocol import as_of
from kafkamc.spec.state import State, members
from kafkamc.traces.trace import Trace, format_action

TOPIC = "replay"
VERSIONS = ("4.1.1", "4.4.0")
COMMANDED = (
    pr.Produce,
    lc.BrokerCrash,
    lc.BrokerSessionTimeout,
    lc.ControllerFenceBroker,
    lc.BrokerHeartbeat,
    lc.BrokerRestart,
    cs.ControlledShutdown,
    el.ElectLeaders,
    el.AutoLeaderRebalance,
    ra.AlterPartitionReassignments,
    ra.CancelPartitionReassignment,
)
OWN = (
    fe.Fetch,
    fe.OffsetsForLeaderEpoch,
    fe.ReplicaStall,
    md.MetadataUpdate,
    ap.AlterPartition,
    ap.HandleAlterPartitionResponse,
    lc.CheckpointHighWatermarks,
    cs.ControlledShutdownComplete,
)
# A stall is the controller's and the leaders' business only after their own clocks: the session
# timeout fences a silent broker (BrokerHeartbeatManager), the lag time takes a silent follower
# out of the ISR (Partition.maybeShrinkIsr, checked every half of it). The lag is short so that a
# stall shrinks the ISR quickly; the session is long enough that the stalls a trace needs fence
# nobody. Unclean elections run in the controller's periodic task
# (unclean.leader.election.interval.ms, 5 minutes by default): every second here.
SETTINGS = Settings(
    session_timeout_ms=10000,
    replica_lag_ms=3000,
    auto_rebalance=False,  # the model's AutoLeaderRebalance is replayed as an election we make
    extra_controller={"unclean.leader.election.interval.ms": 1000},
)
# A broker paused while its fetch waits in the leader's purgatory (replica.fetch.wait.max.ms)
# would still get the answer into its socket: wait it out before the step (realkafka/finding.py).
SETTLE_S = 0.5


# Rules that only steps of these types exercise (spec/protocol.py).
EXERCISED_BY = {"reassignment_completion": (ra.AlterPartitionReassignments,)}


class Refused(Exception):
    """A trace the real cluster cannot replay; one line, before any process starts."""


def refusal(trace: Trace, version: str) -> str | None:
    """Why this trace cannot be replayed on Kafka `version` (a 4.x release), or None."""
    cfg = trace.config
    kafka = as_of(version)
    # ELR off is a 4.x cluster formatted with eligible.leader.replicas.version=0 (KIP-966); a rule
    # only some steps exercise cannot matter to a trace without one of them.
    unused = {rule for rule, types in EXERCISED_BY.items() if not any(isinstance(a, types) for a, _ in trace.steps)}
    changed = set(cfg.protocol.differences(kafka)) - {"elr"} - unused
    if changed:
        era = cfg.protocol.era()
        return f"the trace's protocol is {era}, not Kafka {version}'s ({kafka.era()}): rules {sorted(changed)}"
    for i, (action, _state) in enumerate(trace.steps[1:], start=1):
        if not isinstance(action, COMMANDED + OWN):
            return f"step {i}: {format_action(action)} has no counterpart on a real cluster"
    moved = interleave.in_crash_order(trace)
    return moved if isinstance(moved, str) else None


@dataclass
class Line:
    """One step of the report: the model's view, and the real one when it was seen."""

    index: int
    action: str
    model: View
    real: View | None = None
    note: str = ""


@dataclass
class Result:
    verdict: str = ""  # "reproduced" or "diverged" (or "interrupted", "failed")
    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    acks: list[client.Ack] = field(default_factory=list)
    read: list[tuple[int, str]] = field(default_factory=list)
    folder: Path | None = None


def segments(steps: list, commanded: tuple = COMMANDED) -> list[tuple[int, int]]:
    """(first, last) step index of each segment: a commanded step and Kafka's own steps after it
    (a trace that starts with Kafka's own steps has them in a segment of their own)."""
    cuts = [i for i, (a, _s) in enumerate(steps) if i > 0 and (i == 1 or isinstance(a, commanded))]
    return [(c, (cuts[k + 1] - 1 if k + 1 < len(cuts) else len(steps) - 1)) for k, c in enumerate(cuts)]


def hold(states: list[State], brokers: tuple[int, ...], network: bool = False, last: bool = False) -> set[int]:
    """The live brokers to keep paused through a segment whose states (the one before it first)
    are `states`: a stalled follower (ReplicaStall) of a live leader; a fenced broker still
    running (a zombie: it would heartbeat and be unfenced); and a follower whose log the segment
    leaves unchanged while a live leader's differs from it (it would fetch or truncate). With
    network partitions the first two are cut off instead, and run. In the `last` segment also a
    follower out of the ISR throughout whose log is the live leader's: its next fetch would put it
    back in the ISR, which the trace, ending, does not take."""
    end = states[-1]
    out = set()
    for b in brokers:
        if not end.broker(b).alive or not states[0].broker(b).alive:
            continue
        if network and (end.broker(b).stalled or not end.controller.registered & (1 << (b - 1))):
            continue
        leader = end.controller.leader
        leader_alive = leader not in (0, b) and end.broker(leader).alive
        if end.broker(b).stalled and leader_alive:
            out.add(b)
        elif not end.controller.registered & (1 << (b - 1)):
            out.add(b)
        elif (
            last
            and leader_alive
            and b in end.controller.replicas
            and not any(s.controller.isr & (1 << (b - 1)) for s in states)
            and end.broker(b).log == end.broker(leader).log
        ):
            out.add(b)
        elif all(s.broker(b).log == states[0].broker(b).log for s in states):
            for s in states[1:]:
                lead = s.controller.leader
                if lead not in (0, b) and s.broker(lead).alive and s.broker(lead).log != s.broker(b).log:
                    out.add(b)
                    break
    return out


class Replay:
    """One replay on a running cluster: the trace's segments in order, the report as it goes."""

    def __init__(
        self, cluster: Cluster, trace: Trace, result: Result, echo: Callable[[str], None], network: bool = False
    ):
        self.c, self.t, self.r, self.echo = cluster, trace, result, echo
        # With network partitions a fence is a cut from the controller, a stall one from the leader.
        self.network = network
        self.commanded = COMMANDED + (fe.ReplicaStall,) if network else COMMANDED
        self.replicas = tuple(trace.steps[0][1].controller.replicas)
        self.views = [abstract(s, trace.config.brokers) for _a, s in trace.steps]
        self.paused: set[int] = set()
        self.producers: list[client.Producer] = []
        self.crashed_at: dict[int, float] = {}
        self.waits = interleave.crash_waits(trace.steps)  # crash step -> the broker fenced first

    def running(self) -> list[int]:
        return [b for b in self.c.broker_ids if self.c.alive(b) and b not in self.paused]

    def look(self) -> View:
        real = observe(self.c, TOPIC, self.t.config.brokers, client.controller_history(self.c, TOPIC))
        if real.leader > 0 and real.leader_hw is not None and not self.c.alive(real.leader):
            # A dead leader's HW is what its restart reads: the checkpoint capped at the log end
            # (UnifiedLog.updateHighWatermark), the model's after a power loss (powerloss.py).
            return replace(real, leader_hw=min(real.leader_hw, len(dict(real.logs)[real.leader])))
        return real

    def until(self, first: int, last: int, timeout: float) -> View | None:
        """Read the real state until it equals the model's at step `last`; each step of the
        segment gets the first real view equal to its model view. None on timeout."""
        deadline = time.monotonic() + timeout
        real = None
        while True:
            for p in self.producers:
                p.serve()
            real = self.look()
            for line in self.r.lines[first : last + 1]:
                if line.real is None and _same(line.model, real):
                    line.real = real
            if _same(self.views[last], real):
                return real
            if time.monotonic() > deadline:
                self.r.lines[last].real = real
                return None
            time.sleep(0.3)

    def start(self) -> None:
        c0 = self.t.steps[0][1].controller
        cfg = self.t.config
        client.create_topic(self.c.bootstrap, TOPIC, list(self.replicas), cfg.minisr, cfg.unclean)
        client.wait_partition(self.c.bootstrap, TOPIC, c0.leader, list(members(c0.isr)))
        self.r.lines.append(Line(0, "Init", self.views[0]))
        if self.until(0, 0, 30) is None:
            raise Diverged(0)
        self.say(self.r.lines[0])

    def say(self, line: Line) -> None:
        seen = "(not seen on its own: Kafka took it with the steps around it)" if line.real is None else "same"
        if line.real is not None and not _same(line.model, line.real):
            seen = "DIFFERENT " + line.real.words()
        self.echo(f"step {line.index}: {line.action}{'  ' + line.note if line.note else ''}")
        self.echo(f"    model: {line.model.words()}")
        self.echo(f"    real:  {seen}")

    def segment(self, first: int, last: int) -> None:
        steps = self.t.steps
        if first in self.waits:  # interleave.crash_waits: just before the other broker's fence
            x = self.waits[first]
            at = self.crashed_at[x] + self.c.settings.session_timeout_ms / 1000 - interleave.BEFORE_FENCE_S
            self.echo(f"(waiting {max(0.0, at - time.monotonic()):.1f} s: broker {x} is fenced first)")
            time.sleep(max(0.0, at - time.monotonic()))
        states = [s for _a, s in steps[first - 1 : last + 1]]
        want = hold(states, tuple(self.c.broker_ids), self.network, last == len(steps) - 1)
        newly = {b for b in want - self.paused if self.c.alive(b)}
        for b in sorted(newly):
            self.c.pause(b)
        self.paused |= newly
        if newly:
            time.sleep(SETTLE_S)
        for i in range(first, last + 1):
            self.r.lines.append(Line(i, format_action(steps[i][0]), self.views[i]))
        action = steps[first][0]
        note = self.command(action, steps[first - 1][1], steps[first][1]) if isinstance(action, self.commanded) else ""
        for b in sorted(self.paused - want):
            self.c.resume(b)
        self.paused &= want
        held = f"paused {sorted(self.paused)}" if self.paused else ""
        self.r.lines[first].note = "; ".join(x for x in (note, held) if x)
        real = self.until(first, last, self.timeout(first, last))
        if isinstance(action, pr.Produce):
            ack = self.r.acks[-1]
            acked = real is not None and steps[last][1].ghost.acked >> (action.record - 1) & 1  # by the model
            wait = time.monotonic() + 10 * acked  # the state may match a moment before the answer is served
            while ack.answered is None and time.monotonic() < wait:
                any(p.serve(0.1) for p in self.producers)  # type: ignore[func-returns-value]
            said = "pending" if ack.answered is None else ack.error or f"acknowledged at offset {ack.offset}"
            self.r.lines[first].note = self.r.lines[first].note.replace(")", f"): {said}", 1)
        for line in self.r.lines[first : last + 1]:
            self.say(line)
        if real is None:
            raise Diverged(last)

    def timeout(self, first: int, last: int) -> float:
        """How long Kafka may take: a fence waits for the session timeout, an ISR shrink for the
        lag time (checked every half of it), anything else a few seconds."""
        kinds = {type(a) for a, _s in self.t.steps[first : last + 1]}
        t = 20.0
        if kinds & {lc.BrokerSessionTimeout, lc.ControllerFenceBroker}:
            t += self.c.settings.session_timeout_ms / 1000
        if fe.ReplicaStall in kinds:
            t += 2 * SETTINGS.replica_lag_ms / 1000
        return t

    def command(self, a: Any, before: State, after: State) -> str:
        """Cause the commanded step on the cluster; a note for the report."""
        c = self.c
        if self.network:
            done = self.cut_or_heal(a, before)
            if done:
                return done
        if isinstance(a, pr.Produce):
            # With partitions the request goes to the model's leader, through its own metadata:
            # a zombie still answers that it leads (its metadata is cut off).
            to = [a.leader] if self.network else self.running()
            p = client.Producer(c.bootstrap_of(to), TOPIC, required_acks=self.t.config.acks)
            self.producers.append(p)
            ack = p.send(value_of(a.record))
            p.wait(ack, 2.0 if self.t.config.acks != "all" else 0.5)
            self.r.acks.append(ack)
            return f"produced {ack.value} (acks={self.t.config.acks})"
        if isinstance(a, lc.BrokerCrash):
            c.kill(a.broker)
            self.crashed_at[a.broker] = time.monotonic()
            self.paused.discard(a.broker)
            if a.keep is None:
                return "SIGKILL (the page cache keeps its writes)"
            part = c.partition_dir(a.broker, TOPIC)
            return "SIGKILL, power loss: " + powerloss.cut(part, c.data_dir(a.broker), TOPIC, a.keep)
        if isinstance(a, lc.BrokerSessionTimeout):
            return "nothing to do: the controller fences the dead broker after broker.session.timeout.ms"
        if isinstance(a, lc.ControllerFenceBroker):
            c.pause(a.broker)
            self.paused.add(a.broker)
            return "SIGSTOP until the session times out (a zombie)"
        if isinstance(a, lc.BrokerHeartbeat):
            c.resume(a.broker)
            self.paused.discard(a.broker)
            return "SIGCONT"
        if isinstance(a, lc.BrokerRestart):
            if c.alive(a.broker):  # a controlled shutdown that has not ended: Kafka's to finish
                c.procs[a.broker].wait(60)
            c.start(a.broker)
            c.wait_brokers([a.broker])
            return "started"
        if isinstance(a, cs.ControlledShutdown):
            c.signal_stop(a.broker)
            self.paused.discard(a.broker)
            return "SIGTERM (controlled shutdown)"
        if isinstance(a, (el.ElectLeaders, el.AutoLeaderRebalance)):
            return f"ElectLeaders PREFERRED: {client.elect(c, c.bootstrap_of(self.running()), TOPIC)}"
        if isinstance(a, ra.AlterPartitionReassignments):
            moved = after.controller
            target = [b for b in moved.replicas if not moved.removing & (1 << (b - 1))]
            client.reassign(c, c.bootstrap_of(self.running()), TOPIC, target)
            return f"reassign to {target}"
        if isinstance(a, ra.CancelPartitionReassignment):
            client.reassign(c, c.bootstrap_of(self.running()), TOPIC, None)
            return "reassignment cancelled"
        raise AssertionError(a)

    def cut_or_heal(self, a: Any, before: State) -> str:
        """The faults that are network partitions here (nft in the cluster's namespace); "" else."""
        if isinstance(a, lc.ControllerFenceBroker):
            self.c.cut(a.broker, 0)
            return "cut from the controller (nft): fenced when its session times out, still running"
        if isinstance(a, lc.BrokerHeartbeat):
            # librdkafka sends a request the zombie refuses again to the new leader, retries=0
            # notwithstanding (REAL_KAFKA.md, the control): the trace has no ProduceRetry.
            pending = [p for p in self.producers if any(x.answered is None for x in p.acks)]
            for p in pending:
                p.give_up()
            self.c.heal(a.broker, 0)
            return "link to the controller healed" + ("; the client gives up the zombie's produce" if pending else "")
        if isinstance(a, fe.ReplicaStall):
            leader = before.controller.leader
            self.c.cut(a.follower, leader)
            return f"cut from its leader {leader} (nft): its fetches stop, its heartbeats go on"
        return ""

    def verdict(self) -> None:
        verdict.verdict(self)


class Diverged(Exception):
    def __init__(self, step: int):
        super().__init__(step)
        self.step = step


def run(
    trace: Trace,
    version: str,
    folder: Path,
    echo: Callable[[str], None] = print,
    settings: Settings = SETTINGS,
    network: bool = False,
) -> Result:
    """Replay `trace` on a fresh cluster in `folder` (kept: the logs and report.txt stay there);
    network=True runs it in a namespace of its own, with fences and stalls as cut links.
    Raises Refused before any process starts; ClusterFailed and JarsMissing when it cannot start,
    NoNetwork when the namespace cannot be made."""
    why = refusal(trace, version)
    if why is not None:
        raise Refused(why)
    moved = interleave.in_crash_order(trace)
    assert not isinstance(moved, str)
    result = Result(folder=folder)
    report = folder / "report.txt"
    folder.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        echo(text)
        with report.open("a") as f:
            f.write(text + "\n")

    cfg = trace.config
    settings = replace(settings, elr=cfg.rule("elr") == "on", network=network)
    if interleave.crash_waits(moved.steps):  # a restart must fit between two fences
        settings = replace(settings, session_timeout_ms=max(settings.session_timeout_ms, interleave.LONG_SESSION_MS))
    old = signal.signal(signal.SIGTERM, _interrupt)
    try:
        say(f"replaying {len(trace.steps) - 1} steps on Kafka {version}; logs and report in {folder}")
        if moved is not trace:
            order = ", ".join(format_action(a) for a, _s in moved.steps[1:])
            say(f"as an equivalent interleaving (interleave.py: crashes fenced in the order they crash): {order}")
            trace = moved
        with kraft_cluster(version, len(cfg.brokers), settings, folder=folder) as cluster:
            rep = Replay(cluster, trace, result, say, network)
            try:
                rep.start()
                for first, last in segments(trace.steps, rep.commanded):
                    rep.segment(first, last)
                rep.verdict()
            except Diverged as d:
                result.verdict = "diverged"
                line = result.lines[d.step] if d.step < len(result.lines) else None
                if line is not None and line.real is not None:
                    result.notes.append(
                        f"first difference at step {d.step} ({line.action}): "
                        + "; ".join(line.model.differences(line.real))
                    )
            except (KeyboardInterrupt, SystemError) as e:
                if not client.interrupted(e):
                    raise
                result.verdict = "interrupted"
            except (ClusterFailed, TimeoutError, RuntimeError, subprocess.SubprocessError) as e:
                result.verdict = "diverged"  # a command Kafka did not carry out
                result.notes.append(f"stopped at step {len(result.lines) - 1}: {type(e).__name__}: {e}")
            result.acks = rep.r.acks
            for p in rep.producers:
                p.serve()
            for n in result.notes:
                say(n)
            say(
                result.verdict
                if result.verdict != "interrupted"
                else f"interrupted: logs and report so far in {folder}"
            )
    finally:
        signal.signal(signal.SIGTERM, old)
    return result


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt
