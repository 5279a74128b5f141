"""Each safety invariant against hand-built states that break it the way a Kafka engineer knows it.

The stories: an ISR member that lost a committed record, an unclean election of a lagging
replica, an ELR member that lost a committed record, an acks=1 write lost with its leader, a
consumer's HW going back, and zombie leaders. A crashed broker stays registered until its
session times out: the stories that need the controller to react to a crash say
BrokerSessionTimeout after it. Each violating state is checked three ways (tests/invariant_helpers.py: the compiled
fast path, Z3's evaluation of the declared formula, the explanation); where the model can
reach it, the story is replayed through the step function onto exactly the hand-built state.
WellFormed and the suite's own mechanics are in tests/test_invariants.py.
"""

from __future__ import annotations

from invariant_helpers import (
    ALL3,
    B1,
    B2,
    B3,
    CFG,
    HEALTHY_TRACE,
    SHRINK_TO_LEADER,
    UNCLEAN,
    assert_holds,
    assert_violation,
    dead,
    failing,
    follower,
    model,
    new_leader,
    run,
    suite,
)
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import (
    BrokerCrash,
    BrokerHeartbeat,
    BrokerRestart,
    BrokerSessionTimeout,
    ControllerFenceBroker,
)
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import NO_LEADER, UNKNOWN, Broker, Budget, Controller, Ghost, State, replace

# ---------------------------------------------------------------- NoCommittedDataLoss


def unclean_controller() -> Controller:
    """After an unclean election: broker 2 leads epoch 2 alone in its ISR, RECOVERING."""
    return Controller(
        leader=2, epoch=2, pepoch=4, isr=B2, registered=B2 | B3, bepochs=(1, 1, 1), recovering=True, replicas=(1, 2, 3)
    )


def test_no_committed_data_loss_isr_member_lost_committed_record():
    """Record 1 was committed on all three replicas (HW 1). Broker 2 then shut down uncleanly
    (power loss: the page cache never reached disk), restarted with an empty log, and the
    controller never took it out of the ISR (the pre-KIP-966 hazard). The ISR now lists a
    replica that does not hold a committed record: electing it would lose the write."""
    base = run(CFG, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1))
    assert base.broker(2).log == ((1, 1),) and base.ghost.committed == (1,)
    s = base.with_broker(2, Broker(bepoch=2, leader=1, epoch=1, log=(), cache=(), hw=0))
    s = replace(s, controller=replace(s.controller, bepochs=(1, 2, 1)))
    assert s.controller.isr == ALL3
    assert_violation(
        CFG,
        s,
        "NoCommittedDataLoss",
        "broker 2 in the ISR holds committed offset 0",
        {"alive[2]": True, "in_isr[2]": True, "committed_len": 1, "log[2][0]": 0, "committed[0]": 1},
    )


# ---------------------------------------------------------------- LeaderCompleteness

UNCLEAN2 = Config(rf=3, minisr=1, unclean=True, max_records=2, max_clean_shutdowns=2)
LAGGING3 = (
    Produce(1, 1),
    Fetch(2, 1),
    ReplicaStall(3),
    AlterPartition(1, (1, 2)),
    HandleAlterPartitionResponse(1),
    Fetch(2, 1),
    Fetch(2, 1),  # a follower learns the HW its previous fetch let the leader reach
    BrokerCrash(1),
    BrokerSessionTimeout(1),
    BrokerCrash(2),
    BrokerSessionTimeout(2),
)


def test_leader_completeness_unclean_election_of_lagging_replica():
    """Broker 3 stalled and was dropped from the ISR before it fetched record 1. Record 1
    was committed by the ISR {1, 2} (min.insync.replicas=1). Both ISR members shut down and
    their sessions time out (the ISR empties, broker 2 goes to the ELR but is not registered); with
    unclean.leader.election.enable the controller elects the out-of-sync broker 3 in epoch 3
    (RECOVERING), and it leads with an empty log: the committed (and acknowledged) record is gone."""
    r1 = ((1, 1),)
    s = State(
        Controller(
            leader=3, epoch=3, pepoch=4, isr=B3, registered=B3, bepochs=(1, 1, 1), recovering=True, replicas=(1, 2, 3)
        ),
        (
            dead(r1, hw=1, cache=((1, 0),)),
            dead(r1, hw=1, cache=((1, 0),)),
            new_leader(3, 3, 4, B3, cache=((3, 0),), ineligible=B1 | B2),
        ),
        Ghost(acked=0b1, committed=(1,), hw_seen=1),
        Budget.make(records=1, crashes=2, isr_shrinks=1),
    )
    assert run(UNCLEAN2, *LAGGING3, MetadataUpdate(3)) == s
    assert_violation(
        UNCLEAN2,
        s,
        "LeaderCompleteness",
        "leader 3 holds committed offset 0",
        {
            "c_leader": 3,
            "c_epoch": 3,
            "leads[3]": True,
            "epoch[3]": 3,
            "committed_len": 1,
            "log[3][0]": 0,
            "committed[0]": 1,
        },
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


# ---------------------------------------------------------------- EligibleReplicasComplete


def test_eligible_replicas_complete_elr_member_lost_committed_record():
    """KIP-966: record 1 was committed on all three replicas; record 2 was written and has not
    reached the followers when both stall and leader 1 shrinks the ISR to itself, below
    min.insync.replicas=2: broker 3 leaves the ISR last and enters the ELR, holding record 1.
    Then broker 3 crashes hard (power loss) and loses its unflushed log, record 1 with it.
    While it is dead, registered (its session running) or fenced, the ELR may name it: it
    serves nothing. It restarts with an empty log and registers with an unclean shutdown, and
    the controller drops it from the ELR (KAFKA-15586). A controller that kept it there would
    hold a live, unfenced ELR member without the committed record: the next election from
    the ELR would lose it."""
    committed = run(CFG, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1), Produce(1, 2))
    shrunk = run(CFG, *SHRINK_TO_LEADER, state=committed)
    c = shrunk.controller
    assert (c.isr, c.elr, shrunk.broker(3).log, shrunk.ghost.committed) == (B1, B3, ((1, 1),), (1,))
    crashed = run(CFG, BrokerCrash(3, keep=0), state=shrunk)
    fenced = run(CFG, BrokerSessionTimeout(3), state=crashed)
    restarted = run(CFG, BrokerRestart(3), state=fenced)
    assert crashed.controller.registered == ALL3 and fenced.controller.registered == B1 | B2
    assert crashed.controller.elr == fenced.controller.elr == B3 and restarted.controller.elr == 0
    for s in (crashed, fenced, restarted):
        assert failing(CFG, s) == set()
    assert restarted.broker(3).alive and restarted.broker(3).log == ()
    s = replace(restarted, controller=replace(restarted.controller, elr=B3))
    assert_violation(
        CFG,
        s,
        "EligibleReplicasComplete",
        "live unfenced ELR member 3 holds committed offset 0",
        {
            "in_elr[3]": True,
            "alive[3]": True,
            "registered[3]": True,
            "committed_len": 1,
            "log[3][0]": 0,
            "committed[0]": 1,
        },
    )
    # The loss it warns of: leader 1 dies, and once its session times out the controller
    # elects broker 3 from the ELR; the ISR then names a replica without record 1.
    elected = run(CFG, BrokerCrash(1), BrokerSessionTimeout(1), state=s)
    assert (elected.controller.leader, elected.controller.isr) == (3, B3)
    assert failing(CFG, elected) == {"NoCommittedDataLoss"}


# ---------------------------------------------------------------- AckedWriteDurability

ACKS1 = Config(rf=3, minisr=2, acks="1", max_records=2, max_clean_shutdowns=1)


def test_acked_write_durability_acks_1_leader_crash_before_replication():
    """acks=1: leader 1 acknowledges record 1 as soon as it is in its own log, then crashes
    before any follower fetched it. Its session times out, and the controller fences it and
    elects broker 2 (in the ISR) for epoch 2;
    the acknowledged write is not in the new leader's log. Nothing was ever committed, so
    no other invariant is broken: this is exactly the loss acks=1 allows."""
    s = State(
        Controller(leader=2, epoch=2, pepoch=2, isr=B2 | B3, registered=B2 | B3, bepochs=(1, 1, 1), replicas=(1, 2, 3)),
        (
            dead(((1, 1),), hw=0, cache=((1, 0),)),
            new_leader(2, 2, 2, B2 | B3, cache=((2, 0),), ineligible=B1),
            follower(1, 1),  # has not applied the new metadata yet
        ),
        Ghost(acked=0b1, committed=(), hw_seen=0),
        Budget.make(records=1, crashes=1),
    )
    assert run(ACKS1, Produce(1, 1), BrokerCrash(1), BrokerSessionTimeout(1), MetadataUpdate(2)) == s
    assert_violation(
        ACKS1,
        s,
        "AckedWriteDurability",
        "acknowledged record 1 is in leader 2's log",
        {
            "acked[1]": True,
            "c_leader": 2,
            "c_epoch": 2,
            "leads[2]": True,
            "epoch[2]": 2,
            "log[2][0]": 0,
            "log[2][1]": 0,
        },
    )


def test_acked_write_durability_same_story_with_acks_all_is_safe():
    """With acks=all the same crash leaves the record unacknowledged: nothing is violated."""
    s = run(CFG, Produce(1, 1), BrokerCrash(1), BrokerSessionTimeout(1), MetadataUpdate(2))
    assert s.ghost.acked == 0 and s.true_leader() == 2
    assert_holds(CFG, s)


# ---------------------------------------------------------------- HighWatermarkMonotonic


def _shrunk_leader_committed_alone():
    """Leader 1 shrank the ISR to itself, then committed record 1 alone (minisr=1):
    consumers read HW 1. Then it shut down; once its session timed out the ISR emptied and
    the controller elected broker 2 uncleanly: the partition is RECOVERING."""
    return SHRINK_TO_LEADER + (Produce(1, 1), BrokerCrash(1), BrokerSessionTimeout(1))


def test_hw_monotonic_unclean_leader_exposes_lower_hw():
    """Consumers saw HW 1 from leader 1. After an unclean election broker 2 leads epoch 2
    with an empty log; its HW 0 is at its epoch's start offset, so it is exposed, and a
    consumer now sees the HW go back from 1 to 0."""
    prev = State(
        unclean_controller(),
        (dead(((1, 1),), hw=1, cache=((1, 0),)), follower(1, 1, stalled=True), follower(1, 1, stalled=True)),
        Ghost(acked=0b1, committed=(1,), hw_seen=1),
        Budget.make(records=1, crashes=1, isr_shrinks=2),
    )
    nxt = prev.with_broker(2, new_leader(2, 2, 4, B2, cache=((2, 0),), ineligible=B1))
    assert run(UNCLEAN, *_shrunk_leader_committed_alone()) == prev
    assert model(UNCLEAN).step(prev, MetadataUpdate(2)) == [nxt]

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
    # The healthy story but for its last round of fetches: the leader reached HW 2 on follower
    # 3's fetch of offset 2; the fetches that would tell the followers are not made.
    prev = run(CFG, *HEALTHY_TRACE[:-2], BrokerCrash(1), BrokerSessionTimeout(1))
    assert prev.ghost.hw_seen == 2 and prev.broker(2).hw == 1
    nxt = run(CFG, MetadataUpdate(2), state=prev)
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
    base = run(CFG, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1))
    s = replace(base, controller=replace(base.controller, leader=2, pepoch=2))
    b2 = s.broker(2)
    s = s.with_broker(2, replace(b2, leader=2, epoch=1, pepoch=2, isr=ALL3, start=1, views=(UNKNOWN,) * 3))
    assert s.leads(1) and s.leads(2)
    assert_violation(
        CFG,
        s,
        "NoSplitBrain",
        "brokers 1 and 2 do not both lead the same epoch",
        {"leads[1]": True, "leads[2]": True, "epoch[1]": 1, "epoch[2]": 1},
    )


ZOMBIE_TRACE = SHRINK_TO_LEADER + (
    ControllerFenceBroker(1),  # missed heartbeats; the ISR empties, unclean election picks broker 2
    MetadataUpdate(2),
    Produce(1, 1),  # the zombie still takes writes, alone in its ISR
)


def zombie_state() -> State:
    return State(
        unclean_controller(),
        (
            new_leader(1, 1, 3, B1, log=((1, 1),), cache=((1, 0),), hw=1),
            new_leader(2, 2, 4, B2, cache=((2, 0),), ineligible=B1),
            follower(1, 1, stalled=True),
        ),
        # Consumers read from the zombie too: what it exposes below its HW is committed.
        Ghost(acked=0b1, committed=(1,), hw_seen=1),
        Budget.make(records=1, fences=1, isr_shrinks=2),
    )


def test_a_zombie_commits_what_the_leader_lacks():
    """min.insync.replicas=1: leader 1 shrank the ISR to itself, then missed heartbeats; the
    controller fenced it and uncleanly elected broker 2 for epoch 2. Broker 1 has not seen
    the new metadata: as a zombie leader of epoch 1 it accepts record 1 and, being its own
    whole ISR, commits it (HW 1) and acknowledges it. A consumer with metadata as old as the
    zombie's reads it there (Partition.fetchRecords serves it; the leader-epoch check passes),
    so it counts as committed: the true leader 2, alone in the ISR, does not have it."""
    s = zombie_state()
    assert run(FENCE, *ZOMBIE_TRACE) == s
    assert_violation(
        FENCE,
        s,
        "NoCommittedDataLoss",
        "broker 2 in the ISR holds committed offset 0",
        {"alive[2]": True, "in_isr[2]": True, "committed_len": 1, "committed[0]": 1, "log[2][0]": 0},
        also={"LeaderCompleteness", "AckedWriteDurability"},  # leader 2 lacks it; it was acknowledged
    )


def test_log_matching_divergence_below_both_hws():
    """Continuing the zombie story: leader 2 commits its own record 2 at offset 0 (HW 1);
    broker 1 heartbeats again and applies the metadata, becoming a follower of epoch 2. Until
    its first fetch truncates it (KIP-101), it keeps record 1 at offset 0 under HW 1, while
    the leader has record 2 there under HW 1: the logs diverge below both HWs. Leader 2 now
    serves record 2 at offset 0, where consumers already read record 1 from the zombie."""
    s = run(FENCE, Produce(2, 2), BrokerHeartbeat(1), MetadataUpdate(1), state=zombie_state())
    built = State(
        Controller(
            leader=2, epoch=2, pepoch=4, isr=B2, registered=ALL3, bepochs=(1, 1, 1), recovering=True, replicas=(1, 2, 3)
        ),
        (
            follower(2, 2, ((1, 1),), hw=1, cache=((1, 0),)),
            new_leader(
                2, 2, 4, B2, log=((2, 2),), cache=((2, 0),), hw=1, ineligible=B1
            ),  # 1's unfencing not applied yet
            follower(1, 1, stalled=True),
        ),
        Ghost(acked=0b11, committed=(1,), hw_seen=1),
        Budget.make(records=2, fences=1, isr_shrinks=2),
    )
    assert s == built
    assert_violation(
        FENCE,
        s,
        "LogMatching",
        "brokers 1 and 2 agree at offset 0 below both HWs",
        {"alive[1]": True, "alive[2]": True, "hw[1]": 1, "hw[2]": 1, "log[1][0]": 1, "log[2][0]": 2},
        also={"NoCommittedDataLoss", "LeaderCompleteness", "AckedWriteDurability", "ConsistentReads"},
    )
    assert_violation(
        FENCE,
        s,
        "ConsistentReads",
        "broker 2 serves offset 0 as committed",
        {"leads[2]": True, "exposed_hw[2]": 1, "log[2][0]": 2, "committed[0]": 1},
        also={"NoCommittedDataLoss", "LeaderCompleteness", "AckedWriteDurability", "LogMatching"},
    )
    # The follower's next fetch finds the divergence and truncates: the logs match again
    # (the committed record the zombie served stays lost, and leader 2 still serves another).
    healed = run(FENCE, Fetch(1, 2), state=s)
    assert healed.broker(1).log == () and healed.broker(1).hw == 0
    assert failing(FENCE, healed) == {
        "NoCommittedDataLoss",
        "LeaderCompleteness",
        "AckedWriteDurability",
        "ConsistentReads",
        "AckedWriteSurvives",  # broker 1 held the last copy of acknowledged record 1
    }


def test_no_split_brain_zombie_without_commit_is_harmless():
    """A zombie that took a write but could not commit it (HW 0) breaks nothing yet."""
    s = zombie_state()
    s = s.with_broker(1, replace(s.broker(1), hw=0, purgatory=((0, 1, 0),)))
    s = replace(s, ghost=Ghost())
    assert failing(FENCE, s) == set()
