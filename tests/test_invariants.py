"""Each invariant against a hand-built state that breaks it the way a Kafka engineer knows it.

Every violating state is checked three ways: the compiled fast path reports it, Z3 itself
evaluates the declared formula to false, and the explanation names the failing part with
the offending values. Where the state is one the model can really reach (an unsafe
configuration: acks=1, min.insync.replicas=1 with unclean election), the test also replays
the Kafka story through the model's step function and checks that it lands on exactly the
hand-built state, so the hand-built states are not fantasies. States that only a buggy
step could produce (two leaders in one epoch, a HW above the LEO, ...) are built by
corrupting one field of a reachable state.

The model's defaults changed with ELR (KIP-966): clean shutdowns cost max_crashes (default 0),
an ISR shrink needs the follower to have stalled first (isr_lag="time"), and a fenced last ISR
member leaves the ISR. Stories that need the old behaviour say so in their Config.
"""
from __future__ import annotations

import dataclasses

from functools import lru_cache

import pytest

from kafkamc.invariants.catalog import INVARIANTS
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec import actions as A
from kafkamc.spec.config import Config
from kafkamc.spec.model import observe, step
from kafkamc.spec.protocol import Protocol
from kafkamc.spec.state import (
    NO_LEADER, UNKNOWN, Broker, Budget, Controller, Ghost, State, bit, initial_state, replace,
)

# One clean shutdown: the crash stories below lose no log (hard crashes say keep=...).
CFG = Config(rf=3, minisr=2, max_records=2, max_crashes=1)
ELR_OFF = Protocol().with_rules(elr="off")
STATE_INVARIANTS = [inv.name for inv in INVARIANTS if inv.kind == "state"]
ACTION_INVARIANTS = [inv.name for inv in INVARIANTS if inv.kind == "action"]

B1, B2, B3 = bit(1), bit(2), bit(3)
ALL3 = B1 | B2 | B3


# ---------------------------------------------------------------- helpers

@lru_cache(maxsize=None)
def suite(cfg: Config, name: str | None = None) -> InvariantSuite:
    return InvariantSuite(cfg, None if name is None else [name])


def failing(cfg: Config, state: State) -> set[str]:
    """Every state invariant the compiled evaluators find false on `state`."""
    return {c.inv.name for c in suite(cfg).state_invs if not c.fn(state)}


def run(cfg: Config, *actions, state: State | None = None) -> State:
    """Replay actions through the model; where a step has several outcomes (an unclean
    election's choices), take the first one (the lowest broker id)."""
    s = initial_state(cfg.rf) if state is None else state
    for a in actions:
        outs = step(cfg, s, a)
        assert outs, f"{a} is not enabled in {s}"
        s = outs[0]
    return s


def follower(leader: int, epoch: int, log=(), hw: int = 0, cache=(), stalled: bool = False) -> Broker:
    return Broker(leader=leader, epoch=epoch, log=tuple(log), cache=tuple(cache), hw=hw, stalled=stalled)


def dead(log=(), hw: int = 0, cache=(), bepoch: int = 1, clean: bool = True) -> Broker:
    return Broker(alive=False, bepoch=bepoch, log=tuple(log), cache=tuple(cache), hw=hw, clean=clean)


def new_leader(b: int, epoch: int, pepoch: int, isr: int, rf: int = 3, **kw) -> Broker:
    """A leader no follower has fetched from yet: follower positions and broker epochs unknown."""
    return Broker(leader=b, epoch=epoch, pepoch=pepoch, isr=isr, views=(UNKNOWN,) * rf, vbepochs=(0,) * rf, **kw)


# Drop followers 2 and 3 from the ISR, one at a time: each must have stalled first.
SHRINK_TO_LEADER = (A.ReplicaStall(2), A.AlterPartition(1, (1, 3)), A.HandleAlterPartitionResponse(1),
                    A.ReplicaStall(3), A.AlterPartition(1, (1,)), A.HandleAlterPartitionResponse(1))


def assert_violation(cfg: Config, state: State, name: str, part: str, values: dict,
                     parts: set[str] | None = None, also: set[str] = frozenset()):
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


# ---------------------------------------------------------------- healthy states

@pytest.mark.parametrize("rf", [1, 2, 3, 4, 5])
def test_initial_state_passes_every_invariant(rf):
    cfg = Config(rf=rf, minisr=1)
    s0 = initial_state(rf)
    assert_holds(cfg, s0)
    # The action property holds for the stutter from the initial state too.
    assert suite(cfg).check_step(s0, s0) is None
    assert suite(cfg).evaluate_z3("HighWatermarkMonotonic", s0, s0) is True


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
        budget=Budget(records=2),
    )


HEALTHY_TRACE = (A.Produce(1, 1), A.Fetch(2, 1), A.Fetch(3, 1), A.Produce(1, 2),
                 A.Fetch(2, 1), A.Fetch(3, 1), A.Fetch(2, 1), A.Fetch(3, 1), A.Fetch(2, 1))


def test_healthy_replicated_state_passes_every_invariant():
    s = healthy_state()
    assert run(CFG, *HEALTHY_TRACE) == s       # the hand-built state is what the model reaches
    assert_holds(CFG, s)
    assert failing(CFG, s) == set()
    # Every step along the way keeps the HW monotonic.
    prev = initial_state(3)
    for a in HEALTHY_TRACE:
        nxt = run(CFG, a, state=prev)
        assert suite(CFG).check_step(prev, nxt) is None
        assert suite(CFG).evaluate_z3("HighWatermarkMonotonic", nxt, prev) is True
        prev = nxt


def test_explain_refuses_a_state_that_holds():
    from kafkamc.invariants.suite import Disagreement
    with pytest.raises(Disagreement):
        suite(CFG, "NoCommittedDataLoss").explain("NoCommittedDataLoss", healthy_state())


# ---------------------------------------------------------------- NoCommittedDataLoss

def test_no_committed_data_loss_isr_member_lost_committed_record():
    """Record 1 was committed on all three replicas (HW 1). Broker 2 then shut down uncleanly
    (power loss: the page cache never reached disk), restarted with an empty log, and the
    controller never took it out of the ISR (the pre-KIP-966 hazard). The ISR now lists a
    replica that does not hold a committed record: electing it would lose the write."""
    base = run(CFG, A.Produce(1, 1), A.Fetch(2, 1), A.Fetch(3, 1), A.Fetch(2, 1), A.Fetch(3, 1))
    assert base.broker(2).log == ((1, 1),) and base.ghost.committed == (1,)
    s = base.with_broker(2, Broker(bepoch=2, leader=1, epoch=1, log=(), cache=(), hw=0))
    s = replace(s, controller=replace(s.controller, bepochs=(1, 2, 1)))
    assert s.controller.isr == ALL3
    assert_violation(
        CFG, s, "NoCommittedDataLoss", "broker 2 in the ISR holds committed offset 0",
        {"alive[2]": True, "in_isr[2]": True, "committed_len": 1, "log[2][0]": 0, "committed[0]": 1},
    )


# ---------------------------------------------------------------- LeaderCompleteness

UNCLEAN2 = Config(rf=3, minisr=1, unclean=True, max_records=2, max_crashes=2)
LAGGING3 = (A.Produce(1, 1), A.Fetch(2, 1), A.ReplicaStall(3), A.AlterPartition(1, (1, 2)),
            A.HandleAlterPartitionResponse(1), A.Fetch(2, 1), A.BrokerCrash(1), A.BrokerCrash(2))


def test_leader_completeness_unclean_election_of_lagging_replica():
    """Broker 3 stalled and was dropped from the ISR before it fetched record 1. Record 1
    was committed by the ISR {1, 2} (min.insync.replicas=1). Both ISR members shut down (the
    ISR empties, broker 2 goes to the ELR but is not registered); with
    unclean.leader.election.enable the controller elects the out-of-sync broker 3 in epoch 3
    (RECOVERING), and it leads with an empty log: the committed (and acknowledged) record is gone."""
    r1 = ((1, 1),)
    s = State(
        Controller(leader=3, epoch=3, pepoch=4, isr=B3, registered=B3, bepochs=(1, 1, 1), recovering=True, replicas=(1, 2, 3)),
        (
            dead(r1, hw=1, cache=((1, 0),)),
            dead(r1, hw=1, cache=((1, 0),)),
            new_leader(3, 3, 4, B3, cache=((3, 0),)),
        ),
        Ghost(acked=0b1, committed=(1,), hw_seen=1),
        Budget(records=1, crashes=2, shrinks=1),
    )
    assert run(UNCLEAN2, *LAGGING3, A.MetadataUpdate(3)) == s
    assert_violation(
        UNCLEAN2, s, "LeaderCompleteness", "leader 3 holds committed offset 0",
        {"c_leader": 3, "c_epoch": 3, "leads[3]": True, "epoch[3]": 3,
         "committed_len": 1, "log[3][0]": 0, "committed[0]": 1},
        # Broker 3 is also the whole ISR, and record 1 had been acknowledged.
        also={"NoCommittedDataLoss", "AckedWriteDurability"},
    )
    # The same loss, seen through the other two invariants' parts.
    ncdl = suite(UNCLEAN2, "NoCommittedDataLoss").explain("NoCommittedDataLoss", s)
    assert [p.name for p in ncdl.parts] == ["broker 3 in the ISR holds committed offset 0"]
    awd = suite(UNCLEAN2, "AckedWriteDurability").explain("AckedWriteDurability", s)
    assert [p.name for p in awd.parts] == ["acknowledged record 1 is in leader 3's log"]


def test_leader_completeness_ignores_a_leader_that_has_not_applied_its_election():
    """Before broker 3 applies the metadata there is no true leader: the invariant only
    judges the leader that leads the controller's epoch and knows it."""
    s = run(UNCLEAN2, *LAGGING3)
    assert s.controller.leader == 3 and s.true_leader() == NO_LEADER
    lc = suite(UNCLEAN2, "LeaderCompleteness")
    assert lc.check_state(s) is None and lc.evaluate_z3("LeaderCompleteness", s) is True
    # ... while the ISR already names a replica without the committed record.
    assert failing(UNCLEAN2, s) == {"NoCommittedDataLoss"}


# ---------------------------------------------------------------- AckedWriteDurability

ACKS1 = Config(rf=3, minisr=2, acks="1", max_records=2, max_crashes=1)


def test_acked_write_durability_acks_1_leader_crash_before_replication():
    """acks=1: leader 1 acknowledges record 1 as soon as it is in its own log, then crashes
    before any follower fetched it. The controller elects broker 2 (in the ISR) for epoch 2;
    the acknowledged write is not in the new leader's log. Nothing was ever committed, so
    no other invariant is broken: this is exactly the loss acks=1 allows."""
    s = State(
        Controller(leader=2, epoch=2, pepoch=2, isr=B2 | B3, registered=B2 | B3, bepochs=(1, 1, 1), replicas=(1, 2, 3)),
        (
            dead(((1, 1),), hw=0, cache=((1, 0),)),
            new_leader(2, 2, 2, B2 | B3, cache=((2, 0),)),
            follower(1, 1),                    # has not applied the new metadata yet
        ),
        Ghost(acked=0b1, committed=(), hw_seen=0),
        Budget(records=1, crashes=1),
    )
    assert run(ACKS1, A.Produce(1, 1), A.BrokerCrash(1), A.MetadataUpdate(2)) == s
    assert_violation(
        ACKS1, s, "AckedWriteDurability", "acknowledged record 1 is in leader 2's log",
        {"acked[1]": True, "c_leader": 2, "c_epoch": 2, "leads[2]": True, "epoch[2]": 2,
         "log[2][0]": 0, "log[2][1]": 0},
    )


def test_acked_write_durability_same_story_with_acks_all_is_safe():
    """With acks=all the same crash leaves the record unacknowledged: nothing is violated."""
    s = run(CFG, A.Produce(1, 1), A.BrokerCrash(1), A.MetadataUpdate(2))
    assert s.ghost.acked == 0 and s.true_leader() == 2
    assert_holds(CFG, s)


# ---------------------------------------------------------------- HighWatermarkMonotonic

UNCLEAN = Config(rf=3, minisr=1, unclean=True, max_records=2, max_crashes=1)


def _shrunk_leader_committed_alone():
    """Leader 1 shrank the ISR to itself, then committed record 1 alone (minisr=1):
    consumers read HW 1. Then it shut down (the ISR empties) and the controller elected
    broker 2 uncleanly: the partition is RECOVERING."""
    return SHRINK_TO_LEADER + (A.Produce(1, 1), A.BrokerCrash(1))


def test_hw_monotonic_unclean_leader_exposes_lower_hw():
    """Consumers saw HW 1 from leader 1. After an unclean election broker 2 leads epoch 2
    with an empty log; its HW 0 is at its epoch's start offset, so it is exposed, and a
    consumer now sees the HW go back from 1 to 0."""
    prev = State(
        Controller(leader=2, epoch=2, pepoch=4, isr=B2, registered=B2 | B3, bepochs=(1, 1, 1), recovering=True, replicas=(1, 2, 3)),
        (dead(((1, 1),), hw=1, cache=((1, 0),)), follower(1, 1, stalled=True), follower(1, 1, stalled=True)),
        Ghost(acked=0b1, committed=(1,), hw_seen=1),
        Budget(records=1, crashes=1, shrinks=2),
    )
    nxt = prev.with_broker(2, new_leader(2, 2, 4, B2, cache=((2, 0),)))
    assert run(UNCLEAN, *_shrunk_leader_committed_alone()) == prev
    assert step(UNCLEAN, prev, A.MetadataUpdate(2)) == [nxt]

    name = "HighWatermarkMonotonic"
    s = suite(UNCLEAN, name)
    assert s.check_step(prev, nxt) == name
    assert s.evaluate_z3(name, nxt, prev) is False
    exp = s.explain(name, nxt, prev)
    assert [p.name for p in exp.parts] == ["HW exposed by leader 2 is not below the HW consumers saw before"]
    vals = exp.parts[0].values
    assert vals["prev.hw_seen"] == 1
    assert vals["exposed_hw[2]"] == 0
    assert vals["c_leader"] == 2 and vals["leads[2]"] is True and vals["epoch[2]"] == vals["c_epoch"] == 2
    # The previous state was fine on its own (no true leader yet) apart from the ISR naming
    # a replica without the committed record; the step itself is what the property judges.
    assert s.check_step(prev, prev) is None
    assert failing(UNCLEAN, nxt) == {"NoCommittedDataLoss", "LeaderCompleteness", "AckedWriteDurability"}


def test_hw_monotonic_exempts_leader_below_its_epoch_start():
    """KIP-207: leader 1 reached HW 2; follower 2 had both records but had only learned HW 1.
    Leader 1 crashes, broker 2 is cleanly elected and starts epoch 2 at offset 2 with HW 1.
    Its HW is below its epoch's start, so it exposes no HW yet: not a regression."""
    prev = run(CFG, *HEALTHY_TRACE[:-1], A.BrokerCrash(1))
    assert prev.ghost.hw_seen == 2 and prev.broker(2).hw == 1
    nxt = run(CFG, A.MetadataUpdate(2), state=prev)
    assert nxt.true_leader() == 2 and nxt.broker(2).start == 2 and nxt.broker(2).hw == 1
    s = suite(CFG, "HighWatermarkMonotonic")
    assert s.check_step(prev, nxt) is None
    assert s.evaluate_z3("HighWatermarkMonotonic", nxt, prev) is True
    assert_holds(CFG, nxt)
    # Were that HW exposed (start 0), the same step would be a regression.
    exposed = nxt.with_broker(2, replace(nxt.broker(2), start=0))
    assert s.check_step(prev, exposed) == "HighWatermarkMonotonic"
    assert s.evaluate_z3("HighWatermarkMonotonic", exposed, prev) is False


# ---------------------------------------------------------------- NoSplitBrain

FENCE = Config(rf=3, minisr=1, unclean=True, max_records=2, max_fences=1)


def test_no_split_brain_two_leaders_in_one_epoch():
    """The controller moved leadership to broker 2 without bumping the leader epoch (the
    epoch bump is what fences the old leader). Broker 2 applied it; broker 1 has not: both
    accept writes as leader of epoch 1, and followers cannot tell them apart."""
    base = run(CFG, A.Produce(1, 1), A.Fetch(2, 1), A.Fetch(3, 1), A.Fetch(2, 1), A.Fetch(3, 1))
    s = replace(base, controller=replace(base.controller, leader=2, pepoch=2))
    b2 = s.broker(2)
    s = s.with_broker(2, replace(b2, leader=2, epoch=1, pepoch=2, isr=ALL3, start=1,
                                 views=(UNKNOWN,) * 3))
    assert s.leads(1) and s.leads(2)
    assert_violation(
        CFG, s, "NoSplitBrain", "brokers 1 and 2 do not both lead the same epoch",
        {"leads[1]": True, "leads[2]": True, "epoch[1]": 1, "epoch[2]": 1},
    )


ZOMBIE_TRACE = SHRINK_TO_LEADER + (
    A.ControllerFenceBroker(1),          # missed heartbeats; the ISR empties, unclean election picks broker 2
    A.MetadataUpdate(2),
    A.Produce(1, 1),                     # the zombie still takes writes, alone in its ISR
)


def zombie_state() -> State:
    return State(
        Controller(leader=2, epoch=2, pepoch=4, isr=B2, registered=B2 | B3, bepochs=(1, 1, 1), recovering=True, replicas=(1, 2, 3)),
        (
            new_leader(1, 1, 3, B1, log=((1, 1),), cache=((1, 0),), hw=1),
            new_leader(2, 2, 4, B2, cache=((2, 0),)),
            follower(1, 1, stalled=True),
        ),
        Ghost(acked=0b1, committed=(), hw_seen=0),
        Budget(records=1, fences=1, shrinks=2),
    )


def test_no_split_brain_zombie_commits_what_the_leader_lacks():
    """min.insync.replicas=1: leader 1 shrank the ISR to itself, then missed heartbeats; the
    controller fenced it and uncleanly elected broker 2 for epoch 2. Broker 1 has not seen
    the new metadata: as a zombie leader of epoch 1 it accepts record 1 and, being its own
    whole ISR, commits it (HW 1) and acknowledges it. The true leader 2 does not have it."""
    s = zombie_state()
    assert run(FENCE, *ZOMBIE_TRACE) == s
    assert_violation(
        FENCE, s, "NoSplitBrain", "zombie 1 committed offset 0 only as leader 2 holds it",
        {"leads[1]": True, "epoch[1]": 1, "c_epoch": 2, "c_leader": 2, "leads[2]": True,
         "epoch[2]": 2, "hw[1]": 1, "log[1][0]": 1, "log[2][0]": 0},
        also={"AckedWriteDurability"},      # the zombie acknowledged record 1
    )


def test_no_split_brain_divergence_below_both_hws():
    """Continuing the zombie story: leader 2 commits its own record 2 at offset 0 (HW 1);
    broker 1 heartbeats again and applies the metadata, becoming a follower of epoch 2. Until
    its first fetch truncates it (KIP-101), it keeps record 1 at offset 0 under HW 1, while
    the leader has record 2 there under HW 1: the logs diverge below both HWs."""
    s = run(FENCE, A.Produce(2, 2), A.BrokerHeartbeat(1), A.MetadataUpdate(1), state=zombie_state())
    built = State(
        Controller(leader=2, epoch=2, pepoch=4, isr=B2, registered=ALL3, bepochs=(1, 1, 1), recovering=True, replicas=(1, 2, 3)),
        (
            follower(2, 2, ((1, 1),), hw=1, cache=((1, 0),)),
            new_leader(2, 2, 4, B2, log=((2, 2),), cache=((2, 0),), hw=1),
            follower(1, 1, stalled=True),
        ),
        Ghost(acked=0b11, committed=(2,), hw_seen=1),
        Budget(records=2, fences=1, shrinks=2),
    )
    assert s == built
    assert_violation(
        FENCE, s, "NoSplitBrain", "brokers 1 and 2 agree at offset 0 below both HWs",
        {"alive[1]": True, "alive[2]": True, "hw[1]": 1, "hw[2]": 1, "log[1][0]": 1, "log[2][0]": 2},
        also={"AckedWriteDurability"},      # record 1, acknowledged by the zombie, is lost
    )
    # The follower's next fetch finds the divergence and truncates: the split brain heals
    # (the lost acknowledged write stays lost).
    healed = run(FENCE, A.Fetch(1, 2), state=s)
    assert healed.broker(1).log == () and healed.broker(1).hw == 0
    assert failing(FENCE, healed) == {"AckedWriteDurability"}


def test_no_split_brain_zombie_without_commit_is_harmless():
    """A zombie that took a write but could not commit it (HW 0) breaks nothing yet."""
    s = zombie_state()
    s = s.with_broker(1, replace(s.broker(1), hw=0, purgatory=((0, 1, 0),)))
    s = replace(s, ghost=Ghost())
    assert failing(FENCE, s) == set()


# ---------------------------------------------------------------- WellFormed

def _committed_one():
    return run(CFG, A.Produce(1, 1), A.Fetch(2, 1), A.Fetch(3, 1), A.Fetch(2, 1), A.Fetch(3, 1))


def test_well_formed_hw_above_leo():
    """Broker 3 crashed losing its unflushed record (only 0 records survive), but its HW
    checkpoint still says 1: recovery must cut the HW to the surviving log (the model's
    BrokerCrash does min(hw, keep))."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_unclean_crashes=1)
    good = run(cfg, A.Produce(1, 1), A.Fetch(2, 1), A.Fetch(3, 1), A.Fetch(2, 1), A.Fetch(3, 1),
               A.BrokerCrash(3, keep=0))
    assert good.broker(3) == dead(hw=0, clean=False) and failing(cfg, good) == set()
    s = good.with_broker(3, replace(good.broker(3), hw=1))
    assert_violation(cfg, s, "WellFormed", "0 <= hw[3] <= leo[3]", {"hw[3]": 1, "leo[3]": 0})


def test_well_formed_record_twice_in_a_log():
    """Follower 2 appended the same fetch response twice (a fetch whose offset it did not
    check against its LEO): record 1 sits at offsets 0 and 1."""
    base = _committed_one()
    s = base.with_broker(2, replace(base.broker(2), log=((1, 1), (1, 1))))
    assert_violation(CFG, s, "WellFormed", "log[2] holds a record once (offsets 0, 1)",
                     {"log[2][0]": 1, "log[2][1]": 1})


def test_well_formed_isr_empty():
    """Without ELR: leader 1 had shrunk the ISR to itself and shut down; the controller must
    keep the last ISR member (the partition goes offline, leader -1) but here it removed it too."""
    cfg = dataclasses.replace(CFG, protocol=ELR_OFF)
    good = run(cfg, *SHRINK_TO_LEADER, A.BrokerCrash(1))
    assert good.controller.leader == NO_LEADER and good.controller.isr == B1
    assert failing(cfg, good) == set()
    s = replace(good, controller=replace(good.controller, isr=0))
    assert_violation(cfg, s, "WellFormed", "the ISR is not empty",
                     {"in_isr[1]": False, "in_isr[2]": False, "in_isr[3]": False})
    # With ELR the same story empties the ISR, and that is well formed: broker 3, which left
    # the ISR below min.insync.replicas, is in the ELR and is elected from it.
    elr = run(CFG, *SHRINK_TO_LEADER, A.BrokerCrash(1))
    assert elr.controller.leader == 3 and elr.controller.isr == B3 and elr.controller.elr == B1
    assert failing(CFG, elr) == set()
    # ... and with min.insync.replicas=1 nothing is eligible: the ISR stays empty, offline.
    cfg1 = dataclasses.replace(CFG, minisr=1)
    offline = run(cfg1, *SHRINK_TO_LEADER, A.BrokerCrash(1))
    c = offline.controller
    assert (c.leader, c.isr, c.elr, c.lastelr) == (NO_LEADER, 0, B1, B1)
    assert failing(cfg1, offline) == set()


def test_well_formed_leader_outside_isr():
    """Broker 2 was dropped from the ISR as lagging; when leader 1 crashes the controller
    (without unclean election) must pick broker 3, but here it picked broker 2."""
    good = run(CFG, A.ReplicaStall(2), A.AlterPartition(1, (1, 3)), A.HandleAlterPartitionResponse(1),
               A.BrokerCrash(1))
    # Broker 1 left the ISR {1, 3} below min.insync.replicas=2: it is in the ELR now.
    assert good.controller.leader == 3 and good.controller.isr == B3 and good.controller.elr == B1
    s = replace(good, controller=replace(good.controller, leader=2))
    assert_violation(CFG, s, "WellFormed", "the controller's leader is in the ISR",
                     {"c_leader": 2, "in_isr[2]": False, "in_isr[3]": True})


def test_well_formed_isr_and_elr_overlap():
    """KIP-966: leader 1 shrank the ISR {1, 3} to itself, below min.insync.replicas=2, so
    broker 3 moved to the ELR. A controller that put 3 back in the ISR must take it out of
    the ELR; here it stays in both."""
    good = run(CFG, *SHRINK_TO_LEADER)
    assert good.controller.isr == B1 and good.controller.elr == B3
    assert failing(CFG, good) == set()
    s = replace(good, controller=replace(good.controller, isr=B1 | B3))
    assert_violation(CFG, s, "WellFormed", "broker 3 is not in the ISR and the ELR at once",
                     {"in_isr[3]": True, "in_elr[3]": True})
    # Without ELR the controller keeps no ELR at all.
    cfg = dataclasses.replace(CFG, protocol=ELR_OFF)
    off = run(cfg, *SHRINK_TO_LEADER)
    assert off.controller.isr == B1 and off.controller.elr == 0
    s = replace(off, controller=replace(off.controller, elr=B3))
    assert_violation(cfg, s, "WellFormed", "broker 3 is in no ELR with ELR off", {"in_elr[3]": True})


def test_well_formed_fenced_last_isr_member_with_elr():
    """min.insync.replicas=1: leader 1, alone in the ISR, shuts down. Without ELR the
    controller keeps the fenced broker as the last ISR member; with ELR it moves it to the
    ELR and the ISR empties. The pre-KIP-966 state is malformed under ELR rules."""
    off_cfg = dataclasses.replace(CFG, minisr=1, protocol=ELR_OFF)
    on_cfg = dataclasses.replace(CFG, minisr=1)
    kept = run(off_cfg, *SHRINK_TO_LEADER, A.BrokerCrash(1))
    c = kept.controller
    assert (c.leader, c.isr, c.elr, c.registered) == (NO_LEADER, B1, 0, B2 | B3)
    assert failing(off_cfg, kept) == set()
    assert_violation(on_cfg, kept, "WellFormed", "fenced broker 1 is not in the ISR",
                     {"in_isr[1]": True, "registered[1]": False})
    # The ELR model's own state for the story passes; under the old rules it has an empty ISR.
    moved = run(on_cfg, *SHRINK_TO_LEADER, A.BrokerCrash(1))
    assert moved.controller.isr == 0 and moved.controller.elr == B1
    assert failing(on_cfg, moved) == set()
    assert_violation(off_cfg, moved, "WellFormed", "the ISR is not empty",
                     {"in_isr[1]": False, "in_isr[2]": False, "in_isr[3]": False},
                     parts={"the ISR is not empty", "broker 1 is in no ELR with ELR off"})


def test_well_formed_dead_broker_registered():
    """A crashed broker is fenced by the controller in the same step; here it is still registered."""
    good = run(CFG, A.BrokerCrash(3))
    assert not good.controller.registered & B3 and failing(CFG, good) == set()
    s = replace(good, controller=replace(good.controller, registered=ALL3))
    assert_violation(CFG, s, "WellFormed", "dead broker 3 is fenced", {"alive[3]": False, "registered[3]": True})


def test_well_formed_recovering_with_two_isr_members():
    """Leader 1, alone in the ISR (min.insync.replicas=1), shuts down; broker 2 is elected
    uncleanly and the partition is RECOVERING with the ISR {2}. It recovers only through
    its leader's first accepted AlterPartition; a RECOVERING partition with two ISR members
    is one the controller never builds."""
    good = run(UNCLEAN, *SHRINK_TO_LEADER, A.BrokerCrash(1))
    c = good.controller
    assert (c.leader, c.isr, c.recovering) == (2, B2, True)
    assert failing(UNCLEAN, good) == set()
    s = replace(good, controller=replace(c, isr=B2 | B3))
    assert_violation(UNCLEAN, s, "WellFormed", "a RECOVERING partition has at most one ISR member (2, 3)",
                     {"c_recovering": True, "in_isr[2]": True, "in_isr[3]": True})
    # The real way out: broker 3 follows and fetches, leader 2 adds it; the partition recovers.
    prev = run(UNCLEAN, A.MetadataUpdate(2), A.MetadataUpdate(3), A.Fetch(3, 2), state=good)
    nxt = run(UNCLEAN, A.AlterPartition(2, (2, 3)), state=prev)
    c = nxt.controller
    assert (c.isr, c.recovering) == (B2 | B3, False)
    assert failing(UNCLEAN, nxt) == set()
    reach = dict(suite(UNCLEAN).reach_functions())
    assert reach["Recovered"](prev, nxt) is True
    assert suite(UNCLEAN).confirm_reached("Recovered", nxt, prev) is True


def test_well_formed_record_from_a_future_epoch():
    """A follower holds a record stamped with leader epoch 3 while the controller is at
    epoch 1: no leader of epoch 3 ever existed to write it."""
    base = _committed_one()
    s = base.with_broker(3, replace(base.broker(3), log=((1, 1), (3, 2)), cache=((1, 0), (3, 1))))
    assert_violation(CFG, s, "WellFormed", "log[3][1] was written in a leader epoch that exists",
                     {"leo[3]": 2, "logep[3][1]": 3, "c_epoch": 1})


def test_state_test_reads_only_the_changed_components():
    """The search tests a new state only on the parts that read what its step changed
    (its parent passed them all): broker 3's broken HW is seen by the test of a step that
    changed broker 3 (or of unknown changes, -1), not by that of a step that changed only
    broker 1, the controller or the ghost; a rewritten ghost is seen by the ghost's test."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_unclean_crashes=1)
    good = run(cfg, A.Produce(1, 1), A.Fetch(2, 1), A.Fetch(3, 1), A.Fetch(2, 1), A.Fetch(3, 1),
               A.BrokerCrash(3, keep=0))
    bad = good.with_broker(3, replace(good.broker(3), hw=1))
    s = suite(cfg)
    ghost = 1 << (cfg.rf + 1)
    assert all(s.state_test(changed)(good) for changed in (-1, 1, 2, 4, 8, ghost))
    assert [s.state_test(changed)(bad) for changed in (-1, 8, 8 | 2, 2, 1, ghost)] == \
        [False, False, False, True, True, True]
    assert s.check_state(bad) == "WellFormed"
    assert s.state_test(0)(bad) and s.state_test(-1) is s._all_states
    # A ghost that says another record was committed: every part comparing a log with it fails.
    rewritten = replace(good, ghost=replace(good.ghost, committed=(2,)))
    assert not s.state_test(ghost)(rewritten) and s.state_test(1 << (cfg.rf + 2))(rewritten)


def test_consumers_saw_uncommitted_hw():
    """A corrupted ghost: consumers are recorded as having read HW 2 while only one record
    was committed and the leader's HW is 1. WellFormed no longer has a part for this (the
    catalog dropped "consumers never saw an HW above what was committed"); the leader's
    next step is judged a regression of the HW consumers can read."""
    base = _committed_one()
    s = replace(base, ghost=replace(base.ghost, hw_seen=2))
    nxt = run(CFG, A.Fetch(2, 1), state=s)          # a step that leaves the leader's HW at 1
    assert nxt.true_leader() == 1 and nxt.broker(1).hw == 1
    name = "HighWatermarkMonotonic"
    hwm = suite(CFG, name)
    assert hwm.check_step(s, nxt) == name
    assert hwm.evaluate_z3(name, nxt, s) is False
    exp = hwm.explain(name, nxt, s)
    assert [p.name for p in exp.parts] == ["HW exposed by leader 1 is not below the HW consumers saw before"]
    assert exp.parts[0].values["prev.hw_seen"] == 2 and exp.parts[0].values["exposed_hw[1]"] == 1


def test_every_invariant_has_a_violation_test():
    """Guard: a new invariant in the catalog needs a test here."""
    covered = {"NoCommittedDataLoss", "LeaderCompleteness", "AckedWriteDurability",
               "HighWatermarkMonotonic", "NoSplitBrain", "WellFormed"}
    assert {inv.name for inv in INVARIANTS} == covered


def test_committed_record_is_extended_never_rewritten():
    """A true leader exposing a different history must not overwrite the committed ghost."""
    s = healthy_state()
    other = ((2, 3), (2, 4), (2, 5))
    s = replace(s, brokers=(replace(s.broker(1), log=other, hw=3, cache=((2, 0),), epoch=1),) + s.brokers[1:])
    after = observe(CFG, s)
    assert after.ghost.committed == (1, 2)
    assert "NoCommittedDataLoss" in failing(CFG, after)


def test_action_property_needs_the_previous_state():
    s = initial_state(3)
    with pytest.raises(ValueError, match="pass the state before it"):
        suite(CFG).evaluate_z3("HighWatermarkMonotonic", s)
    with pytest.raises(ValueError):
        suite(CFG).explain("HighWatermarkMonotonic", s)
    assert suite(CFG).evaluate_z3("HighWatermarkMonotonic", s, s)
