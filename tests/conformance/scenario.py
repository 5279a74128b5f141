"""What the conformance scenarios share: configurations, builders of controller records and
hand-made states, and the replay of actions through the model's own step function.

Broker ids: Kafka's tests number brokers from 0 (or use arbitrary ids); the model numbers
them 1..rf. Each scenario maps Kafka's ids onto the model's in its docstring when they differ.
Offsets: Kafka's tests use logs of tens or hundreds of records; the scenarios keep the shape
of each log (which epochs wrote which offsets) at the smallest size that shows the fact.
"""

from __future__ import annotations

from functools import cache

from kafkamc.spec.broker_lifecycle import BrokerCrash
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import Protocol
from kafkamc.spec.state import NO_LEADER, UNKNOWN, Broker, Controller, State, replace

ELR_OFF = Protocol().with_rules(elr="off")


def mask(*brokers: int) -> int:
    """A set of brokers as the model keeps it: bit (b - 1) is broker b."""
    out = 0
    for b in brokers:
        out |= 1 << (b - 1)
    return out


@cache
def model(cfg: Config) -> Model:
    return Model(cfg)


def outcomes(cfg: Config, state: State, action) -> list[State]:
    """Every state the action leads to (empty when its guard fails)."""
    return model(cfg).step(state, action)


def step(cfg: Config, state: State, action) -> State:
    """The one state the action leads to; the action must be enabled and deterministic."""
    outs = outcomes(cfg, state, action)
    assert len(outs) == 1, f"{action} has {len(outs)} outcomes from {state}"
    return outs[0]


def run(cfg: Config, *actions, state: State | None = None) -> State:
    """Replay actions from `state` (by default the initial state with assignment 1..rf)."""
    s = model(cfg).initial_states()[0] if state is None else state
    for a in actions:
        s = step(cfg, s, a)
    return s


def follower_with_hw(cfg: Config) -> State:
    """Leader 1 wrote records 1 and 2; followers 2 and 3 hold both and have learned HW 2."""
    s = run(cfg, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Produce(1, 2), Fetch(2, 1), Fetch(3, 1))
    while s.broker(2).hw < 2 or s.broker(3).hw < 2:
        s = run(cfg, Fetch(2, 1), Fetch(3, 1), state=s)
    return s


def enabled(cfg: Config, state: State, action) -> bool:
    return bool(outcomes(cfg, state, action))


def fenced_after_crash(cfg: Config, state: State, b: int) -> State:
    """The controller's fence of a dead broker b, when it has not happened yet: the model either
    fences in the crash step itself or leaves a dead broker registered until its session times
    out (Kafka's broker.session.timeout.ms), a step of its own. Whichever it does, this returns
    the state after the fence, found among broker b's candidate actions."""
    c = state.controller
    if state.broker(b).alive or not c.registered & (1 << (b - 1)):
        return state
    m = model(cfg)
    for a in m.broker_candidates(c, state.broker(b), state.budget, b):
        for nxt in m.step(state, a):
            if not nxt.broker(b).alive and not nxt.controller.registered & (1 << (b - 1)):
                return nxt
    raise AssertionError(f"no step fences dead broker {b} in {state}")


def crash(cfg: Config, state: State, b: int, keep: int | None = None) -> State:
    """Broker b stops (keep=None: a clean shutdown; otherwise a hard crash keeping `keep`
    records) and the controller fences it."""
    return fenced_after_crash(cfg, step(cfg, state, BrokerCrash(b, keep)), b)


def controller(
    rf: int,
    leader: int,
    isr: int,
    *,
    registered: int | None = None,
    elr: int = 0,
    lastelr: int = 0,
    epoch: int = 5,
    pepoch: int = 10,
    recovering: bool = False,
    replicas: tuple | None = None,
) -> Controller:
    """A partition registration as Kafka's controller tests write one by hand."""
    everyone = (1 << rf) - 1
    return Controller(
        leader=leader,
        epoch=epoch,
        pepoch=pepoch,
        isr=isr,
        registered=everyone if registered is None else registered,
        bepochs=(1,) * rf,
        elr=elr,
        lastelr=lastelr,
        recovering=recovering,
        replicas=tuple(range(1, rf + 1)) if replicas is None else tuple(replicas),
    )


def on_controller(c: Controller) -> State:
    """A state around a controller record: live brokers that know nothing yet (enough for the
    controller's decisions, which read the controller record alone)."""
    rf = len(c.replicas)
    return State(c, tuple(Broker() for _ in range(rf)))


def leader_broker(c: Controller, b: int, log=(), cache=(), hw: int = 0, views=None, **kw) -> Broker:
    """Broker b leading the controller's current epoch, with its log; follower positions unknown
    unless given."""
    rf = len(c.replicas)
    return Broker(
        leader=b,
        epoch=c.epoch,
        pepoch=c.pepoch,
        isr=c.isr,
        log=tuple(log),
        cache=tuple(cache),
        hw=hw,
        start=len(log),
        views=(UNKNOWN,) * rf if views is None else tuple(views),
        vbepochs=(1,) * rf,
        **kw,
    )


def follower_broker(c: Controller, log=(), cache=(), hw: int = 0, **kw) -> Broker:
    """A follower of the controller's current leader and epoch, with its log."""
    return Broker(leader=c.leader, epoch=c.epoch, log=tuple(log), cache=tuple(cache), hw=hw, **kw)


def with_brokers(c: Controller, *brokers: Broker) -> State:
    return State(c, tuple(brokers))


def log_of(*epochs: int, first_id: int = 1) -> tuple:
    """A log whose offset i was written in leader epoch epochs[i], record ids from first_id."""
    return tuple((e, first_id + i) for i, e in enumerate(epochs))


def cache_of(log: tuple) -> tuple:
    """The leader-epoch cache a log implies: each epoch at the offset of its first record."""
    out: list = []
    for offset, (epoch, _rec) in enumerate(log):
        if not out or out[-1][0] != epoch:
            out.append((epoch, offset))
    return tuple(out)


def with_own_epoch(cache: tuple, epoch: int, leo: int) -> tuple:
    """A leader's cache once it has recorded its own epoch at its log end (makeLeader, KAFKA-7415)."""
    return cache if cache and cache[-1][0] >= epoch else cache + ((epoch, leo),)


__all__ = [
    "ELR_OFF",
    "NO_LEADER",
    "UNKNOWN",
    "cache_of",
    "controller",
    "crash",
    "enabled",
    "fenced_after_crash",
    "follower_broker",
    "follower_with_hw",
    "leader_broker",
    "log_of",
    "mask",
    "model",
    "on_controller",
    "outcomes",
    "replace",
    "run",
    "step",
    "with_brokers",
    "with_own_epoch",
]
