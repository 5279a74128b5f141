"""Trace validation: is everything a real cluster did something the model can do?

The run (realkafka/conform.py) records, in time order, what we commanded (sends, kills,
restarts, controlled shutdowns, elections, reassignments), what the producer was told (an offset
or an error), the controller's committed batches (realkafka/metadata_log.py) and, at cuts with
every broker paused, each broker's log and HW checkpoint. The validator keeps the set of model
states consistent with all of it so far (the frontier) and, for each observation in turn:

- closes the frontier under Kafka's own steps (SILENT: fetches, metadata propagation,
  AlterPartition, checkpoints, session timeouts, heartbeats) and the commands not yet taken, as
  long as the controller's view (observe.controller_view) stays the last one observed;
- a controller batch: keeps the successors, one step on (two when one step cannot: Kafka wrote in
  one batch what the model takes in two), whose controller view is the batch's;
- a kill: takes BrokerCrash with the whole log kept (SIGKILL keeps the page cache; the HW comes
  back from the checkpoint file) in every state;
- a command: becomes pending; the model may take it at any time from then on, once;
- an acknowledgement: keeps the states where the record is acknowledged at that offset; a
  NOT_ENOUGH_REPLICAS answer, those where it was not appended;
- a cut: keeps the states whose logs, leader-epoch caches and HW checkpoints are the files'.

An empty frontier is a discrepancy: the report names the observation and the states that were
consistent just before it. Timing never causes one: every time-driven step of the model (a
stall, a session timeout, a fence) is always allowed, so a discrepancy is a behaviour.

Model record ids are the order of appends; a state carries the value of each (`values`), so a
send that was never appended leaves no gap. The budget is not part of what is compared (the
bounds are all lifted), nor the consumer ghosts (nothing here reads them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kafkamc.realkafka import attempts, fetch_all, inflight
from kafkamc.realkafka.lookahead import readers, shape
from kafkamc.realkafka.observe import ControllerView, cache_agrees, controller_view, files_view
from kafkamc.spec import alter_partition as ap
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec import controlled_shutdown as cs
from kafkamc.spec import elect_leaders as el
from kafkamc.spec import fetch as fe
from kafkamc.spec import metadata as md
from kafkamc.spec import produce as pr
from kafkamc.spec import reassignment as ra
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.next import BOUNDS, NEXT, describe
from kafkamc.spec.protocol import as_of
from kafkamc.spec.state import Budget, Ghost, State, initial_state

# Kafka takes these by itself; the model may take any of them between two observations.
SILENT = (
    ap.AlterPartition,
    ap.HandleAlterPartitionResponse,
    fe.OffsetsForLeaderEpoch,
    fe.Fetch,
    fe.ReplicaStall,
    md.MetadataUpdate,
    lc.BrokerSessionTimeout,
    lc.CheckpointHighWatermarks,
    lc.ControllerFenceBroker,
    lc.BrokerHeartbeat,
    lc.BrokerRegistration,
    cs.ControlledShutdownComplete,
)
UNBOUNDED = 10**6  # every bound lifted: a real run is not bounded by the search's budgets
LINGER = 0.03  # seconds: controller.quorum.append.linger.ms (25 ms) and a little more
MAX_FRONTIER = 400_000  # states kept at once; past it the run cannot be validated (not a discrepancy)


def model_config(rf: int, brokers: int, minisr: int, unclean: bool, elr: bool = True, version: str = "4.4.0") -> Config:
    """The model of a real cluster: the rules of its Kafka release (as_of) with a restart as the steps Kafka
    takes (incarnations=kraft_steps: the process starts and fetches with broker epoch -1, registers
    once the old session expired, fenced or not, and is unfenced by a heartbeat), ELR as the
    cluster was formatted, acks=all, no automatic rebalance (the cluster runs without it: an
    election is ours)."""
    protocol = as_of(version).with_rules(incarnations="kraft_steps", **({} if elr else {"elr": "off"}))
    return Config(
        rf=rf,
        broker_count=brokers,
        minisr=minisr,
        unclean=unclean,
        acks="all",
        auto_rebalance=False,
        protocol=protocol,
        symmetry=False,
        limits=tuple((b.name, UNBOUNDED) for b in BOUNDS),
    )


class Item(NamedTuple):
    """A model state, the value of each record id it appended, and the commands it has not taken."""

    state: State
    values: tuple[str, ...]
    pending: frozenset


def normal(s: State) -> State:
    """What validation keeps of a state: the budget only as the records appended, the ghost only
    as what was acknowledged."""
    return s._replace(budget=Budget.make(records=s.budget.of(pr.RECORDS.name)), ghost=Ghost(acked=s.ghost.acked))


@dataclass
class Discrepancy:
    index: int  # the observation's position in the run's list
    event: dict[str, Any]
    reason: str
    before: list[Item]  # the states consistent with everything before it (a sample)


@dataclass
class Validation:
    """What a validation did: observations taken, cuts and batches matched, the largest frontier,
    batches matched only in two model steps, and the first discrepancy (None: consistent)."""

    events: int = 0
    cuts: int = 0
    batches: int = 0
    two_step: int = 0
    on_the_way: int = 0  # controller views taken as records on the way to the next
    peak: int = 1
    seconds: float = 0.0
    discrepancy: Discrepancy | None = None
    too_large: int | None = None  # the observation at which the frontier outgrew MAX_FRONTIER
    frontier: list[Item] = field(default_factory=list)


class Validator:
    def __init__(self, cfg: Config, replicas: tuple[int, ...], actions: tuple | None = None, limit: int = MAX_FRONTIER):
        self.cfg, self.limit = cfg, limit
        # A fetch answers with every record the leader has, as a run's brokers do (fetch_all.py).
        self.model = Model(cfg, fetch_all.actions(NEXT if actions is None else actions), prune=False)
        self.brokers = cfg.brokers
        self.frontier = [Item(normal(initial_state(cfg.rf, replicas, len(cfg.brokers))), (), frozenset())]
        self.view = self.cview(self.frontier[0].state)
        self.fates: dict[str, tuple] = {}  # the producer's answer to each send, when known in advance
        self.targets: dict[str, tuple[int, ...]] = {}  # each record's requests: their brokers (attempts.py)
        self.after: dict[tuple[str, int], tuple[str, int]] = {}  # a request -> the one before it on its connection
        self.resent = False  # some record went in more than one request
        self.logged = False
        self.canon: dict[int, int] = {}  # the checkpoints the next observations read (lookahead.py)
        self.memo: dict[State, tuple[list, list[State]]] = {}  # one observation's successors by state
        self.inflight: frozenset = frozenset()  # the shrinks the log shows in flight here (inflight.py)

    def foresee(self, events: list[dict[str, Any]], sent: list[dict[str, Any]] | None = None) -> None:
        """Learn every send's answer before the run is validated: the producer makes one attempt
        per record (no retries), so one request appends a record at most once. A record that will
        be acknowledged at offset o was appended at offset o and was not refused; one refused with
        NOT_ENOUGH_REPLICAS was not appended. Knowing it early prunes what can no longer be."""
        self.targets = attempts.targets(sent or [])
        self.after = attempts.order(sent or [])
        self.logged = bool(sent)  # the run's log names every request the producer made
        self.resent = any(len(t) > 1 for t in self.targets.values())
        for e in events:
            if e["kind"] == "ack":
                self.fates[e["value"]] = ("ack", e["offset"])
            elif e["kind"] == "refused":
                self.fates[e["value"]] = ("refused",)

    def cview(self, s: State) -> ControllerView:
        return controller_view(s, self.brokers)

    # ---- steps

    def command_steps(self, item: Item, token: tuple, candidates: list | None = None) -> Iterable[Item]:
        """The states a pending command leads to (it is then no longer pending)."""
        s, values, rest = item.state, item.values, item.pending - {token}
        kind = token[0]
        if kind == "unacked":
            return
        if kind in ("produce", "resend"):
            yield from self.attempt_steps(item, token, rest)
            return
        for action in self.model.candidates(s) if candidates is None else candidates:
            if self.answers(token, action):
                for nxt in self.model.unobserved_step(s, action):
                    yield Item(normal(nxt), values, rest)

    def attempt_steps(self, item: Item, token: tuple, rest: frozenset) -> Iterable[Item]:
        """One request of the producer's for a record: ("produce", value) is its first,
        ("resend", value, i, k) its i-th again (attempts.py: librdkafka sends it again after
        NOT_LEADER_OR_FOLLOWER, retries=0 notwithstanding), k the record id the one before
        appended (0: none). The run's librdkafka log names the broker each request went to and
        how many there were; without it, one request, to any broker. Only the last is answered
        as the client saw (the fate); one before it was answered NOT_LEADER_OR_FOLLOWER: it was
        not appended (a broker that does not lead refuses it), or it was and the leader lost the
        leadership before the HW passed it (the model drops its purgatory, MetadataUpdate), so
        that record is never acknowledged ("unacked"). A request is sent again only once the one
        before was answered: not while its record waits in a purgatory."""
        s, values = item.state, item.values
        value = token[1]
        i = 0 if token[0] == "produce" else token[2]
        if i and token[3] and any(e[1] == token[3] for b in self.brokers for e in s.broker(b).purgatory):
            return
        before = self.after.get((value, i))
        if before is not None and any(
            t[0] in ("produce", "resend") and t[1] == before[0] and (t[2] if t[0] == "resend" else 0) <= before[1]
            for t in item.pending
        ):
            return  # the request before it on the same connection is not taken yet
        sent = self.targets.get(value)
        last = i + 1 >= (len(sent) if sent else 1)
        fate = self.fates.get(value) if last else None
        k = len(values) + 1
        if not last:  # answered NOT_LEADER_OR_FOLLOWER by a broker that did not append it
            yield Item(s, values, rest | {("resend", value, i + 1, 0)})
        for b in (sent[i],) if sent else self.brokers:
            for nxt in self.model.unobserved_step(s, pr.Produce(b, k)):
                appended = nxt.budget.of(pr.RECORDS.name) > len(values)
                if not appended and (not last or (fate is None and sent is None)):
                    # NOT_ENOUGH_REPLICAS is not sent again (retries=0), so not before the last;
                    # and a last request with no known answer that appends nothing is the same
                    # state as not taking it yet, which the frontier has with more left to do
                    # (unless a request behind it on its connection waits for it to be taken).
                    continue
                if fate is not None and (appended != (fate[0] == "ack") or (appended and s.broker(b).leo != fate[1])):
                    continue
                after = values + (value,) if appended else values
                left = rest if last else rest | {("resend", value, i + 1, k), ("unacked", k)}
                yield Item(normal(nxt), after, left)

    @staticmethod
    def answers(token: tuple, action: object) -> bool:
        """Whether a model action is the command `token`."""
        kind = token[0]
        if kind == "restart":
            return isinstance(action, lc.BrokerRestart) and action.broker == token[1]
        if kind == "shutdown":
            return isinstance(action, cs.ControlledShutdown) and action.broker == token[1]
        if kind == "elect":
            return isinstance(action, el.ElectLeaders)
        if kind == "reassign":
            return isinstance(action, ra.AlterPartitionReassignments) and tuple(action.target) == tuple(token[1])
        if kind == "cancel":
            return isinstance(action, ra.CancelPartitionReassignment)
        return False

    def successors(self, item: Item) -> Iterable[Item]:
        for i in self._successors(item):
            if not self.resent or self.unacked_ok(i):
                yield i._replace(state=shape(i.state, self.canon)) if self.canon else i

    def _successors(self, item: Item) -> Iterable[Item]:
        s = item.state
        known = self.memo.get(s)
        if known is None:  # Kafka's own steps from s, the same whatever is pending
            candidates = list(self.model.candidates(s))
            silent = [
                normal(m)
                for a in candidates
                if isinstance(a, SILENT)
                for n in self.model.unobserved_step(s, a)
                for m in self.settle(s, a, n)
            ]
            known = self.memo[s] = (candidates, silent)
        candidates, silent = known
        for nxt in silent:
            yield Item(nxt, item.values, item.pending)
        for token in item.pending:
            yield from self.command_steps(item, token, candidates)

    def settle(self, s: State, a: object, n: State) -> list[State]:
        """n, or when `a` prepared a shrink the log does not show in flight here, the states its
        delivery leads to at once (inflight.py)."""
        if not isinstance(a, ap.AlterPartition) or not ap.may_propose(s.broker(a.leader), a.leader):
            return [n]
        br = n.broker(a.leader)
        if br.request is None or (a.leader, br.pending) in self.inflight:
            return [n]
        return self.model.unobserved_step(n, a)

    @staticmethod
    def unacked_ok(item: Item) -> bool:
        """No record the client was told NOT_LEADER_OR_FOLLOWER for is acknowledged."""
        acked = item.state.ghost.acked
        return not any(t[0] == "unacked" and acked >> (t[1] - 1) & 1 for t in item.pending)

    def closure(self, items: Iterable[Item]) -> list[Item]:
        """Every item reachable by steps that leave the controller's view as last observed."""
        seen = set(items)
        todo = list(seen)
        while todo:
            item = todo.pop()
            for nxt in self.successors(item):
                if nxt not in seen and self.cview(nxt.state) == self.view:
                    seen.add(nxt)
                    todo.append(nxt)
                    if len(seen) > self.limit:
                        raise OverflowError(len(seen))
        return list(seen)

    # ---- observations

    def batch(self, items: list[Item], view: ControllerView, two: bool = True) -> tuple[list[Item], int]:
        """The items one step on whose controller view is `view` (two steps if none is and `two`):
        and how many steps it took."""
        transit: set[Item] = set()
        out: set[Item] = set()
        for item in items:
            for nxt in self.successors(item):
                v = self.cview(nxt.state)
                if v == view:
                    out.add(nxt)
                elif v != self.view:
                    transit.add(nxt)
        if out or not two:
            return list(out), 1
        for item in transit:
            for nxt in self.successors(item):
                if self.cview(nxt.state) == view:
                    out.add(nxt)
        return list(out), 2

    def observe(self, event: dict[str, Any], two: bool = True) -> str | None:
        """Take one observation; the reason when nothing in the model is consistent with it
        (`two`: a controller view may be two model steps on)."""
        kind = event["kind"]
        if kind in ("send", "restart", "shutdown", "elect", "reassign", "cancel"):
            args = tuple(tuple(a) if isinstance(a, list) else a for a in event.get("args", ()))
            token = ("produce", event["value"]) if kind == "send" else (kind, *args)
            if kind == "send" and self.logged and event["value"] not in self.targets:
                return None  # librdkafka's log shows no request with it: it reached no broker
            self.frontier = [i._replace(pending=i.pending | {token}) for i in self.frontier]
            return None
        if kind in ("pause", "resume", "error", "partition", "heal"):
            return None  # the model's stalls and fences are always allowed; nothing to match
        items = self.closure(self.frontier)
        if kind == "controller":
            view: ControllerView = event["view"]
            if view == self.view:
                return None
            matched, steps = self.batch(items, view, two)
            if not matched:
                return f"no model step leads to the controller's {view.words()}"
            self.frontier, self.view = matched, view
            return "two" if steps == 2 else None
        if kind == "kill":
            b = event["broker"]
            out = []
            for i in items:
                # A power loss (faults.py) names what the log held and what the cut kept.
                keep = i.state.broker(b).leo if event.get("keep") is None else event["keep"]
                if event.get("end", i.state.broker(b).leo) != i.state.broker(b).leo:
                    continue
                out += [
                    Item(normal(n), i.values, i.pending)
                    for n in self.model.unobserved_step(i.state, lc.BrokerCrash(b, keep))
                ]
            self.frontier = [i for i in set(out) if self.cview(i.state) == self.view]
            return None if self.frontier else f"broker {event['broker']} cannot crash in any consistent state"
        test = self.filter_for(event)
        self.frontier = [i for i in items if test(i)]
        return None if self.frontier else f"no consistent state has {describe_event(event)}"

    def filter_for(self, event: dict[str, Any]) -> Callable[[Item], bool]:
        kind = event["kind"]
        if kind == "ack":
            value, offset = event["value"], event["offset"]

            def acked(i: Item) -> bool:
                if value not in i.values:
                    return False
                # The last request's append: a record sent again was appended after the others.
                k = len(i.values) - i.values[::-1].index(value)
                return bool(i.state.ghost.acked >> (k - 1) & 1) and any(
                    len(br.log) > offset and br.log[offset][1] == k for br in i.state.brokers
                )

            return acked
        if kind == "refused":  # NOT_ENOUGH_REPLICAS: checked before the append (the fate: not appended)
            value = event["value"]
            return lambda i: not any(t[0] in ("produce", "resend") and t[1] == value for t in i.pending)
        if kind == "cut":
            logs = {int(b): [tuple(r) for r in log] for b, log in event["logs"].items()}
            hws = {int(b): hw for b, hw in event["checkpoints"].items()}
            caches = {int(b): [tuple(x) for x in c] for b, c in event.get("epochs", {}).items()}
            up = event.get("up")

            def same(i: Item) -> bool:
                for b in self.brokers:
                    log, hw, cache, alive = files_view(i.state, i.values, b)
                    seen = logs.get(b, [])
                    if log != seen or hws.get(b, hw) != hw or not cache_agrees(caches.get(b, cache), cache, len(seen)):
                        return False
                    # The process runs as soon as we start it; the model's BrokerRestart (the
                    # process start) may come later, so a broker still to restart may run.
                    if up is not None and alive != (b in up) and not (b in up and ("restart", b) in i.pending):
                        return False
                return True

            return same
        raise ValueError(f"unknown observation {kind}")


def describe_event(event: dict[str, Any]) -> str:
    kind = event["kind"]
    if kind == "ack":
        return f"{event['value']} acknowledged at offset {event['offset']}"
    if kind == "refused":
        return f"{event['value']} refused with NOT_ENOUGH_REPLICAS"
    if kind == "cut":
        logs = "; ".join(f"{b}:[{' '.join(f'{v}@e{e}' for e, v in log)}]" for b, log in event["logs"].items())
        caches = "; ".join(f"{b}:{[tuple(x) for x in c]}" for b, c in event.get("epochs", {}).items())
        tail = f", epoch caches {caches}" if caches else ""
        return f"the logs {logs}, HW checkpoints {event['checkpoints']}{tail}"
    if kind == "controller":
        return f"controller: {event['view'].words()}"
    if kind in ("partition", "heal"):
        return f"{'cut' if kind == 'partition' else 'healed'} {event['link']} {event['a']}-{event['b']}"
    if kind == "kill" and "keep" in event:
        return f"power loss {event['broker']}: {event['keep']} of {event['end']} records kept"
    args = " ".join(str(a) for a in event.get("args", ()))
    return f"{kind} {event.get('broker', '')}{event.get('value', '')}{args}".strip()


def item_words(item: Item, brokers: tuple[int, ...]) -> str:
    """A model state in the terms the observations use."""
    s = item.state
    parts = []
    for b in brokers:
        br = s.broker(b)
        log = " ".join(f"{item.values[r - 1]}@e{e - 1}" for e, r in br.log)
        status = "up" if br.alive else "down"
        parts.append(f"{b}:{status} leader {br.leader} epoch {br.epoch - 1} HW {br.hw} ckpt {br.checkpoint_hw} [{log}]")
    pending = ", ".join(" ".join(map(str, t)) for t in sorted(item.pending, key=str))
    view = controller_view(s, brokers).words()
    return f"{view} | " + " | ".join(parts) + (f" | pending: {pending}" if pending else "")


def on_the_way(events: list[dict[str, Any]], index: int) -> bool:
    """Whether a controller view no step reaches may be a record on the way to the next view: the
    next observation is a controller view written within the append linger (one event's records,
    a fence's partition change before the fence, are one step of the model)."""
    here = events[index]
    nxt = events[index + 1] if index + 1 < len(events) else None
    return (
        here["kind"] == "controller"
        and nxt is not None
        and nxt["kind"] == "controller"
        and nxt["t"] - here["t"] <= LINGER
    )


def validate(
    cfg: Config,
    replicas: tuple[int, ...],
    events: list[dict[str, Any]],
    echo: Callable[[str], None] | None = None,
    actions: tuple | None = None,
    limit: int = MAX_FRONTIER,
    sent: list[dict[str, Any]] | None = None,
    shrinks: list[dict[str, Any]] | None = None,
) -> Validation:
    """Validate a run's observations, sorted by time, the first the topic's creation batch;
    `sent`: the producer's requests (attempts.py), when the run logged them; `shrinks`: the
    leaders' "Shrinking ISR" lines (inflight.py), when the run kept its brokers' logs."""
    start = time.monotonic()
    v = Validator(cfg, replicas, actions, limit)
    v.foresee(events, sent or [])
    out = Validation()
    ahead = readers(events, v.brokers)
    flights = inflight.windows(events, shrinks or [])
    for index, event in enumerate(events):
        before = v.frontier
        v.canon, v.memo, v.inflight = ahead[index], {}, flights[index]
        v.frontier = list({i._replace(state=shape(i.state, v.canon)) for i in v.frontier})
        try:
            if index == 0 and event["view"] != v.view:
                reason: str | None = (
                    f"the topic was created as {event['view'].words()}, the model starts at {v.view.words()}"
                )
            else:
                reason = v.observe(event, two=not on_the_way(events, index))
        except OverflowError:
            out.too_large = index
            break
        out.events += 1
        out.cuts += event["kind"] == "cut"
        out.batches += event["kind"] == "controller"
        if reason == "two":
            out.two_step += 1
        elif reason is not None and on_the_way(events, index):
            out.on_the_way += 1  # a record of an event whose last record the next view shows
        elif reason is not None:
            out.discrepancy = Discrepancy(index, event, reason, before[:5])
            break
        out.peak = max(out.peak, len(v.frontier))
        if echo:
            echo(f"{index:4} {describe_event(event)}: {len(v.frontier)} states")
    out.seconds = time.monotonic() - start
    out.frontier = v.frontier
    return out


__all__ = ["SILENT", "Validation", "Validator", "describe", "model_config", "validate"]
