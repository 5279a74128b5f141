"""What a leader knows of its followers (issue 15, Fidelity II).

1. A broker re-elected into a new leader epoch while it still led keeps the last fetched
   LEO of each follower in the new ISR, and every follower's broker epoch; a follower
   outside the ISR counts as not fetched since (Kafka keeps its LEO but zeroes its fetch
   times, so it neither holds the HW back nor rejoins before its next fetch). A broker that
   becomes leader anew knows no follower (Partition.makeLeader calls
   Replica.resetReplicaState with isNewLeader = !isLeader;
   ReplicaTest.testResetReplicaStateWhenLeaderIsReelected*).
2. The hw_joining_replica rule: the HW also waits for a caught-up follower outside the ISR
   (Partition.maybeIncrementLeaderHW, shouldWaitForReplicaToJoinIsr): never before
   KAFKA-4485 (0.10.2.0), always until KAFKA-15021 (3.6.0), and since then only for one
   allowed to join the ISR (PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower).
"""

from __future__ import annotations

import pytest
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import BrokerHeartbeat, ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import ERAS, RULES, Protocol, preset
from kafkamc.spec.state import UNKNOWN, Broker, Controller, State, bit, initial_state, replace

B1, B2, B3 = bit(1), bit(2), bit(3)
ALL3 = B1 | B2 | B3


def walk(cfg: Config, *actions, state: State | None = None) -> State:
    """Step `actions` through the model from `state` (the first initial state unless given);
    every step must be enabled and have one outcome."""
    model = Model(cfg)
    s = model.initial_states()[0] if state is None else state
    for a in actions:
        outs = model.step(s, a)
        assert len(outs) == 1, (a, outs)
        s = outs[0]
    return s


def with_rule(value: str, **settings) -> Config:
    return Config(protocol=Protocol().with_rules(hw_joining_replica=value), **settings)


# ---------------------------------------------------------------- 1. re-elected leaders

# Record 1 reaches both followers; the leader saw both fetch at offset 1.
BOTH_FETCHED = (Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1))
LOG, CACHE = ((1, 1), (1, 2)), ((1, 0),)


def zombie_re_elected(isr: int, views: tuple, vbepochs: tuple = (0, 1, 1), leader_isr: int = B1, hw: int = 0) -> State:
    """Broker 1 still leads epoch 1 as far as it knows (with ISR `leader_isr` and these
    follower positions); the controller, through epochs it never applied, has made it the
    leader of epoch 3 with ISR `isr`. Broker 2 holds both records, broker 3 none."""
    c = Controller(leader=1, epoch=3, pepoch=5, isr=isr, registered=ALL3, bepochs=(1, 1, 1), replicas=(1, 2, 3))
    lead = Broker(
        leader=1, epoch=1, pepoch=2, isr=leader_isr, log=LOG, cache=CACHE, hw=hw, views=views, vbepochs=vbepochs
    )
    return State(c, (lead, Broker(leader=1, epoch=1, log=LOG, cache=CACHE), Broker(leader=1, epoch=1)))


def test_a_leader_re_elected_into_a_new_epoch_keeps_its_isr_followers_positions():
    cfg = Config(rf=3, minisr=2, max_records=2)
    # In epoch 1 the ISR was all three and follower 3 held the HW at 1.
    s = zombie_re_elected(B1 | B2, views=(UNKNOWN, 2, 1), leader_isr=ALL3, hw=1)
    after = walk(cfg, MetadataUpdate(1), state=s).broker(1)
    assert (after.leader, after.epoch, after.isr, after.start) == (1, 3, B1 | B2, 2)
    # isNewLeader = false: follower 2, in the new ISR, keeps the LEO of its last fetch (the
    # old model forgot it); follower 3, outside it, counts as not fetched since.
    assert after.views == (UNKNOWN, 2, UNKNOWN)
    assert after.vbepochs == (0, 1, 1)  # both broker epochs kept, as resetReplicaState does
    assert after.hw == 2  # the kept LEO counts at once (makeLeader ends with maybeIncrementLeaderHW)


def test_the_kept_positions_count_for_the_hw_at_re_election():
    """Broker 1 led epoch 1 with ISR {1} (so the HW could not pass 0 below min ISR 2) and saw
    follower 2 fetch at 2; the controller re-elects it in epoch 3 with ISR {1, 2}. With
    follower 2's LEO kept, the HW moves to 2 at once; a leader that forgot it (the old model)
    would wait for the next fetch."""
    cfg = Config(rf=3, minisr=2, max_records=2)
    views = (UNKNOWN, 2, UNKNOWN)  # follower 3 has not fetched from it
    after = walk(cfg, MetadataUpdate(1), state=zombie_re_elected(B1 | B2, views, (0, 1, 0))).broker(1)
    assert (after.epoch, after.isr, after.views, after.hw) == (3, B1 | B2, views, 2)


# Follower 2 stalls and leaves the ISR, fetches from broker 1 once more while broker 1 is a
# fenced zombie, then follows broker 3 (which never got record 1) and truncates it. Broker 3
# is fenced in turn: the ELR's registered member, broker 1, leads epoch 3 with ISR {1}, and
# applies that metadata without ever having applied epoch 2.
ZOMBIES = Config(rf=3, minisr=2, max_records=2, max_fences=2)
STALE_FOLLOWER = (
    Produce(1, 1),
    Fetch(2, 1),
    ReplicaStall(2),
    AlterPartition(1, (1, 3)),
    ControllerFenceBroker(1),  # ISR {3} < min ISR: 1 into the ELR; 3 leads epoch 2
    BrokerHeartbeat(1),
    Fetch(2, 1),  # broker 1, a zombie, sees follower 2 at offset 1
    MetadataUpdate(2),
    MetadataUpdate(3),
    Fetch(2, 3),  # diverging: follower 2 truncates record 1
    ControllerFenceBroker(3),  # ISR empty: broker 1 leads epoch 3 from the ELR
)


def test_a_re_elected_leader_does_not_take_back_a_follower_on_a_position_from_before():
    s = walk(ZOMBIES, *STALE_FOLLOWER)
    assert (s.controller.leader, s.controller.epoch, s.controller.isr) == (1, 3, B1)
    assert s.broker(1).views == (UNKNOWN, 1, UNKNOWN) and s.broker(2).log == ()
    s = walk(ZOMBIES, MetadataUpdate(1), state=s)
    lead = s.broker(1)
    assert (lead.leader, lead.epoch, lead.isr) == (1, 3, B1)
    assert lead.views == (UNKNOWN,) * 3 and lead.vbepochs == (0, 1, 0)
    # Kafka adds follower 2 to the ISR only on its next fetch, from the offset it has now (0);
    # on offset 1 from epoch 1 the ISR {1, 2} would commit record 1, which broker 2 lacks.
    assert Model(ZOMBIES).step(s, AlterPartition(1, (1, 2))) == []
    assert AlterPartition(1, (1, 2)) not in Model(ZOMBIES).candidates(s)


def test_a_broker_that_followed_in_between_becomes_leader_knowing_no_follower():
    """The same elections, but broker 1 applies epoch 2 and follows broker 3 first: when
    it leads again it is a new leader (isNewLeader = true) and knows no follower at all."""
    s = walk(ZOMBIES, *STALE_FOLLOWER[:5], MetadataUpdate(1))
    assert (s.broker(1).leader, s.broker(1).views) == (3, ())
    s = walk(ZOMBIES, *STALE_FOLLOWER[5:6], *STALE_FOLLOWER[7:], MetadataUpdate(1), state=s)
    after = s.broker(1)
    assert (after.leader, after.epoch, after.isr) == (1, 3, B1)
    assert after.views == (UNKNOWN,) * 3 and after.vbepochs == (0,) * 3


# ---------------------------------------------------------------- 2. hw_joining_replica


def test_the_rule_and_its_presets():
    rule = next(r for r in RULES if r.name == "hw_joining_replica")
    assert rule.values == ("ignore", "wait", "wait_eligible")
    assert rule.changes == (("wait", "0.10.2", "KAFKA-4485"), ("wait_eligible", "3.6.0", "KAFKA-15021"))
    assert {"0.10.2", "3.6.0"} <= set(ERAS)
    assert [preset(e).hw_joining_replica for e in ("0.9.0", "0.10.2", "3.5.0", "3.6.0", "newest")] == [
        "ignore",
        "wait",
        "wait",
        "wait_eligible",
        "wait_eligible",
    ]
    assert Protocol().hw_joining_replica == "wait_eligible"


# Follower 3 leaves the ISR (stalled), fetches again from offset 1 (the HW) and so is
# caught up but not yet back in the ISR; follower 2, in the ISR, reaches the LEO, 2.
CAUGHT_UP_OUTSIDE_ISR = (
    *BOTH_FETCHED,  # HW 1
    Produce(1, 2),
    ReplicaStall(3),
    AlterPartition(1, (1, 2)),
    HandleAlterPartitionResponse(1),
    Fetch(3, 1),  # from offset 1: the leader sees 3 at its HW; the stall is over
    Fetch(2, 1),  # from offset 1
    Fetch(2, 1),  # from offset 2: the ISR {1, 2} has all of the log
)


@pytest.mark.parametrize(
    ("value", "hw"),
    [("ignore", 2), ("wait", 1), ("wait_eligible", 1)],
)
def test_the_hw_waits_for_a_caught_up_follower_outside_the_isr(value: str, hw: int):
    cfg = with_rule(value, rf=3, minisr=2, max_records=2)
    s = walk(cfg, *CAUGHT_UP_OUTSIDE_ISR)
    lead = s.broker(1)
    assert (lead.isr, lead.pending, lead.views, lead.leo) == (B1 | B2, 0, (UNKNOWN, 2, 1), 2)
    assert lead.hw == hw
    # Its next fetch takes follower 3 to the LEO; the HW follows, and 3 may join the ISR.
    s = walk(cfg, Fetch(3, 1), state=s)
    assert s.broker(1).hw == 2
    assert AlterPartition(1, (1, 2, 3)) in Model(cfg).candidates(s)


@pytest.mark.parametrize("value", ["wait", "wait_eligible"])
def test_a_stalled_follower_outside_the_isr_holds_no_hw(value: str):
    """Kafka stops waiting once the follower's last caught-up fetch is replica.lag.time.max.ms
    old (isCaughtUp); in the model, once it has stalled."""
    cfg = with_rule(value, rf=3, minisr=2, max_records=2)
    s = walk(cfg, *CAUGHT_UP_OUTSIDE_ISR[:-3], *CAUGHT_UP_OUTSIDE_ISR[-2:])
    assert s.broker(3).stalled and s.broker(1).views[2] == 1
    assert s.broker(1).hw == 2


def test_a_follower_behind_the_hw_outside_the_isr_holds_no_hw():
    """The leader last saw follower 3 below its HW: not caught up, not waited for."""
    cfg = with_rule("wait_eligible", rf=3, minisr=2, max_records=2)
    base = walk(cfg, *CAUGHT_UP_OUTSIDE_ISR[:-1])
    lead = base.broker(1)
    s = base.with_broker(1, replace(lead, views=(UNKNOWN, 1, 0)))
    assert walk(cfg, Fetch(2, 1), state=s).broker(1).hw == 2


# KAFKA-15021's own case (PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower):
# the controller takes a caught-up follower out of the ISR, with no new leader epoch, because
# it is fenced; the ISR that is left reaches the LEO.
FENCED_WHILE_CAUGHT_UP = (
    *BOTH_FETCHED,  # HW 1, both followers seen at 1
    ControllerFenceBroker(2),
    Produce(1, 2),
    MetadataUpdate(1),  # same leader epoch, ISR {1, 3}
    Fetch(3, 1),
    Fetch(3, 1),  # follower 3 reaches the LEO, 2
)


@pytest.mark.parametrize(
    ("value", "hw"),
    [("ignore", 2), ("wait", 1), ("wait_eligible", 2)],
)
def test_a_fenced_follower_is_waited_for_only_before_kafka_15021(value: str, hw: int):
    cfg = with_rule(value, rf=3, minisr=2, max_records=2, max_fences=1)
    s = walk(cfg, *FENCED_WHILE_CAUGHT_UP)
    lead = s.broker(1)
    assert (lead.epoch, lead.isr, lead.views) == (1, B1 | B3, (UNKNOWN, 1, 2))
    assert not s.controller.registered & B2 and not s.broker(2).stalled
    assert lead.hw == hw


def test_a_stale_broker_epoch_is_not_waited_for_since_kafka_15021():
    """isReplicaIsrEligible also asks that the broker epoch of the follower's last fetch be its
    current registration's (KIP-903): a follower the leader saw in a previous life is not
    about to join. Before KAFKA-15021 it was waited for all the same."""
    for value, hw in (("wait", 1), ("wait_eligible", 2)):
        cfg = with_rule(value, rf=3, minisr=2, max_records=2)
        base = walk(cfg, *CAUGHT_UP_OUTSIDE_ISR[:-1])
        c = base.controller
        s = replace(base, controller=replace(c, bepochs=(1, 1, 2)))  # broker 3 registered again since
        assert s.broker(1).vbepochs[2] == 1
        assert walk(cfg, Fetch(2, 1), state=s).broker(1).hw == hw, value


def test_an_isr_member_is_waited_for_under_every_value():
    """The rule is about followers outside the ISR: for ISR members nothing changes."""
    for value in ("ignore", "wait", "wait_eligible"):
        cfg = with_rule(value, rf=3, minisr=2, max_records=2)
        s = walk(cfg, Produce(1, 1), Fetch(2, 1), Fetch(2, 1))
        assert s.broker(1).views == (UNKNOWN, 1, UNKNOWN)
        assert s.broker(1).hw == 0, value


def test_the_initial_state_is_unchanged():
    assert Model(Config()).initial_states()[0] == initial_state(3)
