"""Finding 2 (docs/FINDINGS.md): the -1 variant of KAFKA-14139. A broker's new process fetches
before it registers, naming broker epoch -1; the leader prepares an ISR expansion from that
fetch; the process loses the fetched records in a power loss, a third process registers and is
unfenced, and the delayed AlterPartition, naming -1, passes both KIP-903 checks: a broker with
an empty log joins the ISR (Partition.isBrokerEpochIsrEligible, ReplicationControlManager.
ineligibleReplicasForIsr). The proposed fix (isr_join_broker_epoch=checked_no_unknown_join)
refuses it. Kafka's restart steps are the rule incarnations=kraft_steps.
"""

from __future__ import annotations

from helpers import play
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import (
    BrokerCrash,
    BrokerHeartbeat,
    BrokerRegistration,
    BrokerRestart,
    ControllerFenceBroker,
)
from kafkamc.spec.config import Config
from kafkamc.spec.elect_leaders import AutoLeaderRebalance
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import NEWEST, preset

KRAFT = preset(NEWEST).with_rules(incarnations="kraft_steps")
FIX = KRAFT.with_rules(isr_join_broker_epoch="checked_no_unknown_join")
BOUNDS = dict(rf=3, minisr=2, max_records=1, max_clean_shutdowns=0, max_hard_crashes=2, protocol=KRAFT)

# Broker 3 is out of the ISR and lacks r1, which 1 and 2 committed. Its first crash loses
# nothing (it had nothing); the new process A fetches r1 and then fetches again at offset 1
# with broker epoch -1, which prepares the expansion; A loses r1 in a power loss (the fetch
# appended it to the page cache only); process B starts empty, registers and is unfenced;
# the request lands.
PATH = [
    ReplicaStall(3),
    AlterPartition(1, (1, 2)),  # prepared (prepareIsrShrink): the shrink is in flight under kraft_steps
    AlterPartition(1, (1, 2)),  # and reaches the controller
    HandleAlterPartitionResponse(1),
    Produce(1, 1),
    Fetch(2, 1),
    Fetch(2, 1),
    BrokerCrash(3, 0),
    BrokerRestart(3),
    Fetch(3, 1),
    Fetch(3, 1),
    BrokerCrash(3, 0),
    BrokerRestart(3),
    BrokerRegistration(3),
    BrokerHeartbeat(3),
]
LANDS = AlterPartition(1, (1, 2, 3))


def test_a_fetch_with_epoch_minus_one_prepares_an_expansion_that_lands_after_a_new_registration():
    cfg = Config(**BOUNDS)
    before = play(cfg, *PATH[:11])
    leader = before.broker(1)
    assert before.broker(3).bepoch == 0 and leader.vbepochs[2] == 0 and leader.views[2] == 1
    assert leader.pending == 0b111 and leader.request == (1, 1, 0)  # BrokerState(3, -1)
    s = play(cfg, *PATH, LANDS)
    c = s.controller
    assert (c.isr, c.bepochs[2], s.broker(3).log, s.ghost.committed) == (0b111, 2, (), (1,))
    assert InvariantSuite(cfg).check_state(s) == "NoCommittedDataLoss"
    assert InvariantSuite(cfg).check_state(play(cfg, *PATH)) is None


def test_the_proposed_fix_refuses_the_addition():
    cfg = Config(**dict(BOUNDS, protocol=FIX))
    # The leader does not even prepare it: -1 is not eligible on its side either.
    s = play(cfg, *PATH[:11])
    assert s.broker(1).request is None and s.broker(1).pending == 0


# The loss of an acknowledged write: the preferred replica (1) loses its leadership without a
# restart (a pause past the session timeout: fenced, then unfenced on its next heartbeat), so
# leader 2's metadata shows it unfenced when its next process fetches with -1; that process is
# killed (no controlled shutdown), the next one fetches r1 and prepares the expansion and loses
# r1 in a power loss, the third registers; the request lands, and Kafka's automatic preferred
# leader election (auto.leader.rebalance.enable, on by default) makes broker 1 leader with an
# empty log. Min ISR 2, unclean election off, ELR on.
LOSS_BOUNDS = dict(
    rf=3,
    minisr=2,
    max_records=1,
    max_clean_shutdowns=1,
    max_hard_crashes=1,
    max_fences=1,
    max_leader_elections=1,
    protocol=KRAFT,
)
LOSS = [
    ControllerFenceBroker(1),
    MetadataUpdate(2),
    MetadataUpdate(3),
    BrokerHeartbeat(1),
    MetadataUpdate(2),
    MetadataUpdate(1),
    BrokerCrash(1),
    BrokerRestart(1),
    Produce(2, 1),
    Fetch(3, 2),
    Fetch(3, 2),
    Fetch(1, 2),
    Fetch(1, 2),
    BrokerCrash(1, 0),
    BrokerRestart(1),
    BrokerRegistration(1),
    BrokerHeartbeat(1),
    AlterPartition(2, (1, 2, 3)),
    AutoLeaderRebalance(1),
    MetadataUpdate(1),
]


def test_the_empty_replica_is_elected_and_an_acknowledged_write_is_lost():
    cfg = Config(**LOSS_BOUNDS)
    s = play(cfg, *LOSS)
    assert s.ghost.acked == 0b1 and s.true_leader() == 1 and s.broker(1).log == ()
    suite = InvariantSuite(cfg, ["AckedWriteDurability", "LeaderCompleteness"])
    assert suite.check_state(s) == "AckedWriteDurability"
    fixed = Config(**dict(LOSS_BOUNDS, protocol=FIX))
    assert play(fixed, *LOSS[:13]).broker(2).request is None  # nothing prepared: no path on


def test_without_kraft_steps_the_restart_waits_for_the_fence():
    """The newest preset's default (incarnations=fenced_first) has no unregistered process: the
    path stops at the restart, which waits for the fence."""
    cfg = Config(**dict(BOUNDS, protocol=preset(NEWEST)))
    s = play(cfg, *PATH[:2], *PATH[3:8])  # the shrink in one step: nothing is in flight under fenced_first
    assert not Model(cfg).step(s, BrokerRestart(3))
