"""What the invariant tests share (tests/test_invariants.py, tests/test_invariant_scenarios.py):
the configurations of their stories, builders of hand-made brokers and states, the replay of
a story through the model's step function, and the three-way check of a violation.
"""

from __future__ import annotations

from functools import cache

from kafkamc.invariants.catalog import INVARIANTS
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import Protocol
from kafkamc.spec.state import UNKNOWN, Broker, Budget, Ghost, State, bit, initial_state, replace

# One clean shutdown: the crash stories below lose no log (hard crashes say keep=...).
CFG = Config(rf=3, minisr=2, max_records=2, max_clean_shutdowns=1)
ELR_OFF = Protocol().with_rules(elr="off")
STATE_INVARIANTS = [inv.name for inv in INVARIANTS if inv.kind == "state"]
ACTION_INVARIANTS = [inv.name for inv in INVARIANTS if inv.kind == "action"]

B1, B2, B3 = bit(1), bit(2), bit(3)
ALL3 = B1 | B2 | B3


@cache
def model(cfg: Config) -> Model:
    return Model(cfg)


@cache
def suite(cfg: Config, name: str | None = None) -> InvariantSuite:
    """One invariant's suite, or (name None) the suite of every invariant, those checked only
    when named (catalog.ON_DEMAND) included."""
    return InvariantSuite(cfg, STATE_INVARIANTS + ACTION_INVARIANTS if name is None else [name])


def failing(cfg: Config, state: State) -> set[str]:
    """Every state invariant the compiled evaluators find false on `state`."""
    return {c.inv.name for c in suite(cfg).state_invs if not c.fn(state)}


def run(cfg: Config, *actions, state: State | None = None) -> State:
    """Replay actions through the model; where a step has several outcomes (an unclean
    election's choices), take the first one (the lowest broker id)."""
    s = initial_state(cfg.rf) if state is None else state
    for a in actions:
        outs = model(cfg).step(s, a)
        assert outs, f"{a} is not enabled in {s}"
        s = outs[0]
    return s


def follower(leader: int, epoch: int, log=(), hw: int = 0, cache=(), stalled: bool = False) -> Broker:
    return Broker(leader=leader, epoch=epoch, log=tuple(log), cache=tuple(cache), hw=hw, stalled=stalled)


def dead(
    log=(), hw: int = 0, cache=(), bepoch: int = 1, clean: bool = True, checkpoint_hw: int | None = None
) -> Broker:
    """A crashed broker. Its HW checkpoint is the HW it will restart with (checkpoint_hw None: the
    HW), as BrokerCrash keeps it while a hard crash is left in the budget; 0 once none is."""
    return Broker(
        alive=False,
        bepoch=bepoch,
        log=tuple(log),
        cache=tuple(cache),
        hw=hw,
        clean=clean,
        checkpoint_hw=hw if checkpoint_hw is None else checkpoint_hw,
    )


def new_leader(b: int, epoch: int, pepoch: int, isr: int, rf: int = 3, **kw) -> Broker:
    """A leader no follower has fetched from yet: follower positions and broker epochs unknown
    (`ineligible`: the brokers its metadata shows fenced or shutting down)."""
    return Broker(leader=b, epoch=epoch, pepoch=pepoch, isr=isr, views=(UNKNOWN,) * rf, vbepochs=(0,) * rf, **kw)


# Drop followers 2 and 3 from the ISR, one at a time: each must have stalled first.
SHRINK_TO_LEADER = (
    ReplicaStall(2),
    AlterPartition(1, (1, 3)),
    HandleAlterPartitionResponse(1),
    ReplicaStall(3),
    AlterPartition(1, (1,)),
    HandleAlterPartitionResponse(1),
)


def assert_violation(
    cfg: Config,
    state: State,
    name: str,
    part: str,
    values: dict,
    parts: set[str] | None = None,
    also: set[str] = frozenset(),
):
    """`state` violates invariant `name`; `part` is among the failing parts, with `values`.

    parts: the exact set of failing part names (defaults to {part}).
    also: the other state invariants the same state (legitimately) breaks.
    """
    s = suite(cfg, name)
    # (a) the fast path, isolated on this invariant
    assert s.check_state(state) == name
    # (b) Z3 itself
    assert s.evaluate_z3(name, state) is False
    # (c) the explanation
    exp = s.explain(name, state)
    assert exp.invariant == name
    got = {p.name: p.values for p in exp.parts}
    assert set(got) == (parts if parts is not None else {part})
    for var, value in values.items():
        assert got[part][var] == value, (var, got[part])
    # and nothing else breaks that the story does not explain
    assert failing(cfg, state) == {name} | set(also)
    return exp


def assert_holds(cfg: Config, state: State):
    s = suite(cfg)
    assert s.check_state(state) is None
    for name in STATE_INVARIANTS:
        assert s.evaluate_z3(name, state) is True, name


def healthy_state() -> State:
    """Leader 1 wrote records 1 and 2 in epoch 1; both followers fetched them and the HW
    reached 2 on every replica; both writes were acknowledged and consumers saw HW 2."""
    log = ((1, 1), (1, 2))
    cache = ((1, 0),)
    s0 = initial_state(3)
    return replace(
        s0,
        brokers=(
            replace(s0.broker(1), log=log, hw=2, views=(UNKNOWN, 2, 2), vbepochs=(0, 1, 1)),
            follower(1, 1, log, hw=2, cache=cache),
            follower(1, 1, log, hw=2, cache=cache),
        ),
        ghost=Ghost(acked=0b11, committed=(1, 2), hw_seen=2),
        budget=Budget.make(records=2),
    )


# A fetch answer carries the leader's HW from before that fetch moved it: each follower
# learns HW 2 on the fetch after the one that let the leader reach it.
HEALTHY_TRACE = (
    Produce(1, 1),
    Fetch(2, 1),
    Fetch(3, 1),
    Produce(1, 2),
    Fetch(2, 1),
    Fetch(3, 1),
    Fetch(2, 1),
    Fetch(3, 1),
    Fetch(2, 1),
    Fetch(3, 1),
)

# min.insync.replicas=1 with unclean election and one clean shutdown.
UNCLEAN = Config(rf=3, minisr=1, unclean=True, max_records=2, max_clean_shutdowns=1)
