"""`kafkamc conform`: random fault schedules on a real KRaft cluster, checked against the model.

A run starts a cluster with the model's configuration, creates the topic, plays a schedule
(realkafka/schedule.py) and records what it observes (`Run.events`, in time order):

- what we did: each send, kill, restart, controlled shutdown, election, reassignment, pause and
  resume, with its time;
- what the producer was told: each acknowledgement with its offset, each error;
- at a cut after each step, with every running broker paused: each broker's log (offset, leader
  epoch and value of each record, from its segment files), its leader-epoch-checkpoint, its
  replication-offset-checkpoint and whether its process runs; then, resumed, what a consumer reads;
- at the end, the controller's metadata log: every batch that changed the partition or a
  broker's registration, with its time (realkafka/metadata_log.py).

Then it validates the observations against the model (realkafka/validate.py) and checks the
client's promises directly: every acknowledged write is read at its offset at the end, and no
record a consumer read disappears from a later read (unless unclean election is on, which
gives up that promise). Everything is saved in the run's folder: observations.json (schedule
and events: `kafkamc conform --validate FOLDER` checks them again without Kafka), metadata.txt,
report.txt, and the cluster's logs and data.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafkamc.realkafka import attempts, client, inflight, validate
from kafkamc.realkafka.cluster import Cluster, Settings, kraft_cluster
from kafkamc.realkafka.faults import KINDS as FAULT_KINDS
from kafkamc.realkafka.faults import Faults, counterparts
from kafkamc.realkafka.metadata_log import batches, reregistrations
from kafkamc.realkafka.observe import ControllerView, batch_view, checkpoint, epoch_cache, log_clock, read_log
from kafkamc.realkafka.schedule import schedule
from kafkamc.spec.config import Config

TOPIC = "conform"
RANK = {"controller": 1, "ack": 2, "refused": 2, "error": 2, "cut": 2}  # commands first at a tie
PENDING = ("send", "restart", "shutdown", "elect", "reassign", "cancel")
EARLY = 0.1  # seconds: more than the controller's append linger (sorted_events)


@dataclass(frozen=True)
class Setup:
    """The cluster and topic configuration, in the model's terms."""

    rf: int = 3
    brokers: int = 3
    minisr: int = 2
    unclean: bool = False
    elr: bool = True
    version: str = "4.1.1"
    # Network partitions of these links (faults.LINKS, comma-separated; none: no namespace) and
    # power-loss crashes (realkafka/faults.py).
    links: str = ""
    power_loss: bool = False

    def link_list(self) -> tuple[str, ...]:
        return tuple(x for x in self.links.split(",") if x)

    def config(self) -> Config:
        return validate.model_config(self.rf, self.brokers, self.minisr, self.unclean, self.elr, self.version)

    def settings(self) -> Settings:
        # Short timeouts so that a stall shrinks the ISR in seconds and a zombie is fenced in ten.
        # The session outlasts a kill, its cut and the new JVM's start (about 3 s), so that a
        # restarted process fetches before it may register (broker epoch -1); the controller
        # checks for stale sessions every eighth of it (QuorumController.
        # maybeFenceStaleBrokerPeriodNs) and a refused registration is retried every heartbeat
        # interval (BrokerLifecycleManager.scheduleNextCommunicationAfterFailure), so a new
        # incarnation may register before or after the fence of the old one.
        # The readers' consumer group needs __consumer_offsets: one partition, not fifty.
        return Settings(
            session_timeout_ms=10000,
            heartbeat_ms=500,
            replica_lag_ms=2000,
            elr=self.elr,
            network=bool(self.links),
            extra_broker={"offsets.topic.num.partitions": "1"},
        )

    def words(self) -> str:
        return (
            f"Kafka {self.version}, {self.brokers} brokers, RF {self.rf}, min.insync.replicas={self.minisr}, "
            f"unclean.leader.election.enable={str(self.unclean).lower()}, ELR {'on' if self.elr else 'off'}"
            + (f", cuts {self.links.replace(',', ' ')}" if self.links else "")
            + (", power losses" if self.power_loss else "")
        )


class Run:
    """One schedule on one cluster; the observations as it goes."""

    def __init__(
        self,
        cluster: Cluster,
        setup: Setup,
        seed: int,
        say: Callable[[str], None],
        logger: logging.Logger | None = None,
    ):
        self.c, self.setup, self.say, self.logger = cluster, setup, say, logger
        self.rng = random.Random(seed)
        self.brokers = tuple(range(1, setup.brokers + 1))
        self.events: list[dict[str, Any]] = []
        self.reads: list[tuple[float, list[tuple[int, str]]]] = []
        self.sent = 0
        self.starting: set[int] = set()  # restarted, perhaps not registered yet
        self.producer: client.Producer | None = None
        self.faults = Faults()

    def note(self, kind: str, t: float | None = None, **fields: Any) -> None:
        self.events.append({"kind": kind, "t": time.time() if t is None else t, **fields})

    def running(self) -> list[int]:
        return [b for b in self.brokers if self.c.alive(b)]

    def start(self) -> None:
        client.create_topic(
            self.c.bootstrap, TOPIC, list(range(1, self.setup.rf + 1)), self.setup.minisr, self.setup.unclean
        )
        client.wait_partition(self.c.bootstrap, TOPIC, 1, list(range(1, self.setup.rf + 1)))
        # The model starts with every replica on the topic and broker 1 leading epoch 0, its
        # leader-epoch-checkpoint naming it (Partition.makeLeader -> UnifiedLog.
        # assignEpochStartOffset, which LeaderEpochFileCache.assign writes at once). Some broker's
        # metadata may say so before broker 1 has done it: a fault then is in no model state
        # (seed 702 lost broker 1's power 0.5 s after the topic was created, before it led).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            epoch_cache(self.c.partition_dir(1, TOPIC)) == [(0, 0)]
            and all(self.c.partition_dir(b, TOPIC).exists() for b in range(1, self.setup.rf + 1))
        ):
            time.sleep(0.1)
        # librdkafka's log of every request it builds (attempts.py): a record it sends again after
        # NOT_LEADER_OR_FOLLOWER, retries=0 notwithstanding, is one more attempt the validator allows.
        self.producer = client.Producer(
            self.c.bootstrap, TOPIC, request_timeout_ms=30000, logger=self.logger, debug=attempts.SETTING["debug"]
        )

    def idle(self, seconds: float) -> None:
        """Wait, serving the producer's delivery reports."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            assert self.producer is not None
            self.producer.serve(min(0.05, max(0.0, end - time.monotonic())))

    def send(self, wait: float = 3.0) -> None:
        assert self.producer is not None
        self.sent += 1
        ack = self.producer.send(f"r{self.sent}")
        self.note("send", t=ack.sent, value=ack.value)
        self.producer.wait(ack, wait)

    def step(self, step: dict[str, Any]) -> None:
        do, b = step["do"], int(step.get("broker", 0))
        s = self.setup.settings()
        if do not in ("produce", "kill"):
            # A process not registered yet answers no request and has no session to shut down
            # in: a pause, a shutdown, an election or a reassignment waits for the registrations.
            for started in sorted(self.starting):
                self.wait_registered(started)
            self.starting.clear()
        if do == "produce":
            self.send()
        elif do == "kill":
            self.c.kill(b)
            self.note("kill", broker=b)
            self.starting.discard(b)
        elif do == "restart":
            # At once, killed or not: the new process fetches with broker epoch -1 and registers
            # once the old session expired, before or after the fence (the validator's model
            # runs incarnations=kraft_steps; docs/KAFKA.md, "Broker incarnations"). Its cut comes
            # before it registered; only a later step that needs it registered waits (above).
            self.note("restart", args=[b])
            self.c.start(b)
            self.starting.add(b)
        elif do in ("stall", "zombie"):
            self.note("pause", broker=b)
            self.c.pause(b)
            self.send(wait=0.0)
            # A send the zombie took before the pause is answered NOT_LEADER_OR_FOLLOWER once it
            # resumes, and librdkafka sends it again to the new leader (seed 702 again: r17 at
            # offsets 3 and 4): the run logs each attempt (attempts.py) and the validator allows
            # each one append, at the broker it went to.
            self.idle((s.replica_lag_ms * 1.75 if do == "stall" else s.session_timeout_ms + 2000) / 1000)
            self.c.resume(b)
            self.note("resume", broker=b)
        elif do == "shutdown":
            self.note("shutdown", args=[b])
            self.c.stop(b, timeout=60)
        elif do == "elect":
            self.note("elect")
            client.elect(self.c, self.c.bootstrap_of(self.running()), TOPIC)
        elif do == "reassign":
            self.reassign(step["index"])
        elif do in FAULT_KINDS:
            self.faults.play(self, step)
        self.idle(1.5)

    def wait_registered(self, b: int) -> None:
        try:
            self.c.wait_brokers([b], timeout=30)
        except Exception as e:  # observed as it is: the validation sees the registrations
            self.say(f"  broker {b} not back in the cluster's metadata: {e}")

    def reassign(self, index: int) -> None:
        for attempt in range(6):
            # Admin requests go to the metadata's "controller", a random unfenced broker
            # (KRaftMetadataCache.getRandomAliveBrokerId): a killed broker whose session has not
            # expired yet may be the one, and a new admin client picks again.
            try:
                replicas = client.describe(self.c.bootstrap_of(self.running()), TOPIC)["replicas"]
                break
            except Exception as e:
                if attempt == 5:
                    raise
                self.say(f"  describe before the reassignment failed ({e}); again")
        outside = [b for b in self.brokers if b not in replicas]
        if not outside:
            return
        target = list(replicas)
        target[index % len(target)] = self.rng.choice(outside)
        self.note("reassign", args=[target])
        try:
            client.reassign(self.c, self.c.bootstrap_of(self.running()), TOPIC, target)
        except RuntimeError as e:
            self.say(f"  reassignment to {target} refused: {e}")

    def cut(self) -> None:
        """Pause every running broker, read the files, resume; then a consumer's read."""
        paused = self.running()
        try:  # resumed even when SIGTERM comes while they are paused: answers() still asks them
            for b in paused:
                self.c.pause(b)
            time.sleep(0.05)
            t = time.time()
            logs = {b: [[e, v] for _o, e, v in read_log(self.c.partition_dir(b, TOPIC))] for b in self.brokers}
            # A checkpoint entry means something only beside the replica it is for: a broker that
            # deleted its replica (a reassignment moved it) may never write that file again.
            ckpts = {
                b: checkpoint(self.c.data_dir(b) / "replication-offset-checkpoint", TOPIC) or 0
                for b in self.brokers
                if self.c.partition_dir(b, TOPIC).exists()
            }
            epochs = {b: epoch_cache(self.c.partition_dir(b, TOPIC)) for b in ckpts}
            self.faults.seen(logs, ckpts, epochs, paused)
        finally:
            for b in paused:
                self.c.resume(b)
        self.note("cut", t=t, logs=logs, checkpoints=ckpts, epochs=epochs, up=paused)
        try:
            self.reads.append((time.time(), client.read_all(self.c.bootstrap_of(paused), TOPIC, timeout=3.0)))
        except Exception:
            pass  # no leader to read from: nothing to compare

    def answers(self) -> None:
        """The producer's answers as observations."""
        assert self.producer is not None
        self.producer.flush(5)
        for a in self.producer.acks:
            if a.offset is not None:
                self.note("ack", t=a.answered, value=a.value, offset=a.offset)
            elif a.error == "NOT_ENOUGH_REPLICAS":
                self.note("refused", t=a.answered, value=a.value)
            elif a.error is not None:
                self.note("error", t=a.answered, value=a.value, error=a.error)

    def controller(self, dump: str) -> None:
        self.events += controller_events(dump, self.brokers)


def controller_events(dump: str, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
    """The controller's records as observations: each change of what ControllerView shows."""
    out: list[dict[str, Any]] = []
    last = None
    for record in batches(dump, TOPIC):
        if record.partition is None:
            continue
        view = batch_view(record.partition, record.brokers, brokers)
        if view != last:
            out.append({"kind": "controller", "t": record.t, "offset": record.offset, "view": view})
        last = view
    return out


def promises(setup: Setup, acks: list[dict[str, Any]], reads: list[tuple[float, list]]) -> list[str]:
    """The client's promises, checked directly: each write acknowledged before the last read began
    is read at its offset there (an answer after it, as an interrupted run's flush gives, has no
    read to be checked against), and no record read once is missing from a later read."""
    out = []
    last = dict(reads[-1][1]) if reads else {}
    began = reads[-1][0] if reads else float("-inf")
    for a in acks:
        if a.get("t", began) <= began and last.get(a["offset"]) != a["value"]:
            out.append(f"{a['value']} acknowledged at offset {a['offset']} is not read there at the end")
    for (t1, r1), (t2, r2) in zip(reads, reads[1:]):
        later = dict(r2)
        gone = [f"{v}@{o}" for o, v in r1 if later.get(o) != v]
        if gone:
            out.append(f"read at {t1:.3f} saw {', '.join(gone)}; the read at {t2:.3f} does not")
    return out


def sorted_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The observations in the order the validator takes them: by time, the topic's creation
    first. A controller batch's CreateTime is when the batch was opened, which may be before the
    record in it was written (the raft client lingers up to controller.quorum.append.linger.ms,
    25 ms, to fill a batch): a batch a command caused can be stamped a few milliseconds before the
    command. So a command that only becomes pending (a send, restart, shutdown, election,
    reassignment) is taken EARLY before its time: pending sooner only allows more. A kill is not:
    it is noted once the process is dead."""
    batches = [e for e in events if e["kind"] == "controller"]
    first = min(batches, key=lambda e: e["t"]) if batches else None

    def key(e: dict[str, Any]) -> tuple[float, int]:
        return (e["t"] - (EARLY if e["kind"] in PENDING else 0.0), RANK.get(e["kind"], 0))

    rest = sorted((e for e in events if e is not first), key=key)
    return ([first] if first is not None else []) + rest


def save(
    folder: Path, setup: Setup, seed: int, faults: int, steps: list, events: list, reads: list, sent: list
) -> None:
    data = {
        "setup": asdict(setup),
        "seed": seed,
        "faults": faults,
        "schedule": steps,
        "events": [e | {"view": asdict(e["view"])} if "view" in e else e for e in events],
        "reads": reads,
        "attempts": sent,  # the producer's requests, each record's in order (attempts.py)
    }
    (folder / "observations.json").write_text(json.dumps(data, indent=1))


def load(folder: Path) -> tuple[Setup, list[dict[str, Any]], dict[str, Any]]:
    """A saved run: its setup, its events and the whole file. The controller's observations are
    read again from metadata.txt when the folder has it (the metadata log is their source, so a
    better reading of it applies to old runs), else rebuilt from the file."""
    data = json.loads((folder / "observations.json").read_text())
    setup = Setup(**data["setup"])
    dump = folder / "metadata.txt"
    events: list[dict[str, Any]] = []
    for e in data["events"]:
        if "view" in e:
            if dump.exists():
                continue
            fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in e["view"].items()}
            e = e | {"view": ControllerView(**fields)}
        events.append(e)
    if dump.exists():
        events += controller_events(dump.read_text(), tuple(range(1, setup.brokers + 1)))
    if (folder / "cluster" / "logs" / attempts.LOG).exists():  # read again, as metadata.txt is
        data["attempts"] = attempts.read(folder / "cluster", TOPIC)
    if (folder / "cluster" / "logs").exists() and events:  # the leaders' shrinks (inflight.py)
        data["shrinks"] = inflight.read(folder / "cluster", TOPIC, min(e["t"] for e in events))
    return setup, sorted_events(events), data


@dataclass
class Outcome:
    folder: Path
    events: int = 0
    cuts: int = 0
    faults: int = 0
    seconds: float = 0.0
    validation: validate.Validation | None = None
    broken: list[str] | None = None  # the client's promises that failed
    interrupted: bool = False
    steps: int = 0  # schedule steps played
    scheduled: int = 0
    # New incarnations registered while the previous one was unfenced (before its fence), and
    # after it; None without the metadata log (a bare observations.json).
    early: int | None = None
    late: int | None = None


def run(setup: Setup, seed: int, faults: int, folder: Path, say: Callable[[str], None] = print) -> Outcome:
    """One run: schedule, observations, validation, promises. Raises ClusterFailed and
    JarsMissing when the cluster cannot start (every process it started is stopped)."""
    folder.mkdir(parents=True, exist_ok=True)
    steps = schedule(seed, faults, setup.brokers, setup.rf, setup.link_list(), setup.power_loss)
    out = Outcome(folder, faults=faults, scheduled=len(steps))
    start = time.monotonic()
    with (
        kraft_cluster(setup.version, setup.brokers, setup.settings(), folder=folder / "cluster") as c,
        client.log_file(c.folder / "logs" / attempts.LOG) as logger,
    ):
        r = Run(c, setup, seed, say, logger)
        try:
            r.start()
            for i, step in enumerate(steps):
                say(f"  {i + 1}/{len(steps)} {step['do']} {step.get('broker', step.get('index', ''))}".rstrip())
                r.step(step)
                r.cut()
                out.steps = i + 1
        except (KeyboardInterrupt, SystemError) as e:
            if not client.interrupted(e):
                raise
            out.interrupted = True
            say(f"interrupted after {out.steps} of {len(steps)} steps: validating what was observed")
        finally:
            r.answers()
            dump = client.metadata_dump(c)
    (folder / "metadata.txt").write_text(dump)
    r.controller(dump)
    events = sorted_events(r.events)
    save(folder, setup, seed, faults, steps, events, r.reads, attempts.read(folder / "cluster", TOPIC))
    out.seconds = time.monotonic() - start
    return check(folder, out, say)


def check(folder: Path, out: Outcome, say: Callable[[str], None], actions: tuple | None = None) -> Outcome:
    """Validate a saved run (the model's Next unless `actions` is given) and check the promises."""
    setup, events, data = load(folder)
    out.events, out.cuts = len(events), sum(e["kind"] == "cut" for e in events)
    out.validation = validate.validate(
        setup.config(),
        tuple(range(1, setup.rf + 1)),
        events,
        actions=actions,
        sent=data.get("attempts", []),
        shrinks=data.get("shrinks", []),
    )
    acks = [e for e in events if e["kind"] == "ack"]
    out.broken = promises(setup, acks, [(t, [tuple(x) for x in r]) for t, r in data["reads"]])
    if (folder / "metadata.txt").exists():
        again = reregistrations((folder / "metadata.txt").read_text())
        out.early, out.late = sum(e for _t, _b, e in again), sum(not e for _t, _b, e in again)
    report(folder, setup, out, events, say, data.get("seed"))
    return out


def real_logs(logs: Path, t: float, around: float = 3.0, most: int = 40) -> list[str]:
    """The lines of the processes' logs that name the topic (or fence or register a broker)
    within `around` seconds of t, by their [HH:MM:SS,mmm] stamps (the machine's local time)."""
    clock = log_clock(t)
    out = []
    for path in sorted(logs.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("[") or not (TOPIC in line or "ence" in line or "egist" in line):
                continue
            try:
                stamp = clock(line[1:13])
            except ValueError:
                continue
            if abs(stamp - t) <= around:
                out.append((stamp, f"{path.stem}: {line[:240]}"))
    return [line for _s, line in sorted(out)][:most]


def report(
    folder: Path, setup: Setup, out: Outcome, events: list[dict[str, Any]], say: Callable[[str], None], seed: Any
) -> None:
    v = out.validation
    assert v is not None
    lines = [
        f"{setup.words()}: {out.events} observations ({out.cuts} cuts, {v.batches} controller records), "
        f"validated {v.events} in {v.seconds:.1f} s, at most {v.peak} model states at once"
        + (f", {v.two_step} matched in two model steps" if v.two_step else "")
        + (f", {v.on_the_way} taken as records on the way to the next" if v.on_the_way else ""),
        f"schedule of seed {seed}: the same seed gives the same commands, not Kafka's timing",
    ]
    if v.discrepancy is not None:
        d = v.discrepancy
        lines.append(f"DISCREPANCY at observation {d.index}: {validate.describe_event(d.event)}")
        lines.append(f"  {d.reason}")
        lines.append("  consistent model states just before it (up to 5):")
        lines += [f"    {validate.item_words(i, tuple(range(1, setup.brokers + 1)))}" for i in d.before]
        lines.append("  the observations around it:")
        lines += [f"    {j}: {validate.describe_event(e)}" for j, e in enumerate(events) if abs(j - d.index) <= 6]
        lines.append("  the brokers' and the controller's log lines on the partition, 3 s either side:")
        lines += [f"    {line}" for line in real_logs(folder / "cluster" / "logs", d.event["t"])]
    elif v.too_large is not None:
        lines.append(f"not validated past observation {v.too_large}: more than {validate.MAX_FRONTIER} model states")
    else:
        lines.append("consistent: every observation is one the model can make")
    if out.early is not None and out.late is not None and out.early + out.late:
        lines.append(f"restarts: {out.early} registered before the previous incarnation's fence, {out.late} after it")
    if setup.links or setup.power_loss:
        lines.append("the faults, each with its counterpart in the model:")
        lines += [f"  {line}" for line in counterparts(events)]
    for p in out.broken or []:
        allowed = " (allowed: unclean.leader.election.enable=true)" if setup.unclean else ""
        lines.append(f"PROMISE BROKEN{allowed}: {p}")
    if out.interrupted:
        lines.append(
            f"interrupted after {out.steps} of {out.scheduled} steps: observations, report and logs in {folder}"
        )
    text = "\n".join(lines)
    (folder / "report.txt").write_text(text + "\n")
    for line in lines:
        say(line)
