"""Conformance with ReplicaTest (core/src/test/scala/unit/kafka/cluster/ReplicaTest.scala): what a
leader keeps of a follower's state when it leads a new epoch (Replica.resetReplicaState, called
from Partition.makeLeader with isNewLeader = !isLeader and isFollowerInSync = the new ISR
contains the follower).

A broker re-elected while it still led (its metadata never named another leader in between)
keeps each follower's log end offset and broker epoch; a broker that was not leading starts
with them unknown. In the model a re-election that the broker did not see interrupted is one
MetadataUpdate from its old epoch to the new one (a broker applies the latest metadata only).

The model differs for a follower outside the new ISR: Kafka keeps its log end offset and sets
its last fetch and caught-up times to 0; the model, which has no clocks, forgets the log end
offset instead (spec/metadata.py, kept_views), with the same effect on the HW and the ISR.
"""

from __future__ import annotations

from kafkamc.spec.alter_partition import AlterPartition
from kafkamc.spec.broker_lifecycle import BrokerHeartbeat, ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.elect_leaders import ElectLeaders
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import initial_state, members, replace
from scenario import UNKNOWN, crash, enabled, mask, run

CFG = Config(rf=3, minisr=1, max_fences=3, max_clean_shutdowns=1, max_leader_elections=1)


def replicated(state=None):
    """Leader 1 of epoch 1 wrote record 1; both followers fetched it and the leader saw them at 1."""
    return run(CFG, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1), state=state)


def reelected():
    known, leader, _state = reelected_state()
    return known, leader


def reelected_state():
    """Leader 1's followers' positions as it learned them, and broker 1 after it led epoch 1
    and leads epoch 3, re-elected with follower 3 in the ISR and follower 2 out of it.

    The assignment is (2, 1, 3) and broker 1 leads (as after an earlier failover). An operator's
    preferred election moves leadership to broker 2 (epoch 2, ISR unchanged); the controller
    then fences broker 2, which leaves the ISR, and elects broker 1 again (epoch 3). Broker 1
    applies the metadata only then: from leading epoch 1 straight to leading epoch 3."""
    s = initial_state(CFG.rf)
    s = replicated(replace(s, controller=replace(s.controller, replicas=(2, 1, 3))))
    known = s.broker(1).views, s.broker(1).vbepochs
    assert known == ((UNKNOWN, 1, 1), (0, 1, 1))
    s = run(CFG, ElectLeaders(2), ControllerFenceBroker(2), MetadataUpdate(1), state=s)
    leader = s.broker(1)
    assert (leader.leader, leader.epoch, members(leader.isr)) == (1, 3, (1, 3))
    return known, leader, s


def test_reset_replica_state_when_leader_is_reelected_and_replica_is_in_sync():
    """Kafka: ReplicaTest.testResetReplicaStateWhenLeaderIsReelectedAndReplicaIsInSync: a leader
    re-elected into a new epoch keeps an in-sync follower's log end offset (and broker epoch).
    Follower 3 stays in the ISR across broker 1's re-election."""
    (views, vbepochs), leader = reelected()
    assert leader.views[3 - 1] == views[3 - 1] == 1
    assert leader.vbepochs[3 - 1] == vbepochs[3 - 1] == 1


def test_reset_replica_state_when_leader_is_reelected_and_replica_is_not_in_sync():
    """Kafka: ReplicaTest.testResetReplicaStateWhenLeaderIsReelectedAndReplicaIsNotInSync: a leader
    re-elected into a new epoch keeps the log end offset of a follower outside the new ISR too, and
    sets its last fetch and caught-up times to 0, so that the kept offset neither holds the HW back
    nor brings the follower into the ISR before its next fetch (which replaces it).

    The model has no clocks: it forgets that offset instead (spec/metadata.py, kept_views) and
    keeps the broker epoch, as Kafka does. This restates what Kafka's reset is for, and checks the
    model behaves the same: follower 2, which left the ISR when it was fenced, is not proposed for
    the ISR until it fetches, and that fetch gives the leader its real position."""
    (views, vbepochs), leader, s = reelected_state()
    assert not leader.isr & mask(2)
    assert leader.vbepochs[2 - 1] == vbepochs[2 - 1] == 1  # the broker epoch is kept, as in Kafka
    assert views[2 - 1] == 1 and leader.views[2 - 1] == UNKNOWN  # Kafka keeps 1 with its times at 0
    s = run(CFG, BrokerHeartbeat(2), MetadataUpdate(2), MetadataUpdate(1), state=s)  # 1 sees 2 unfenced
    assert s.broker(2).leo == 1 and not enabled(CFG, s, AlterPartition(1, (1, 2, 3)))
    s = run(CFG, Fetch(2, 1), state=s)
    assert s.broker(1).views[2 - 1] == 1 and enabled(CFG, s, AlterPartition(1, (1, 2, 3)))


def test_reset_replica_state_when_new_leader_is_elected_and_replica_is_in_sync():
    """Kafka: ReplicaTest.testResetReplicaStateWhenNewLeaderIsElectedAndReplicaIsInSync: a newly
    elected leader knows nothing yet of its followers: log end offsets unknown, no broker epoch."""
    s = run(CFG, MetadataUpdate(2), state=crash(CFG, replicated(), 1))
    leader = s.broker(2)
    assert (leader.leader, leader.epoch) == (2, 2)
    assert leader.views == (UNKNOWN,) * 3 and leader.vbepochs == (0,) * 3


def test_reelected_leader_keeps_its_purgatory():
    """Kafka: ReplicaManagerTest.testClearPurgatoryOnBecomingFollower: a broker that becomes a
    follower fails the produces waiting in its purgatory (ReplicaManager.
    completeDelayedOperationsWhenNotPartitionLeader); one that stays leader keeps them.
    Partition.makeLeader calls tryCompleteDelayedRequests once the HW moved, and
    DelayedProduce.tryComplete (Partition.checkEnoughReplicasReachOffset) reads the HW and the
    ISR, never the leader epoch: an acks=all produce that waited through a re-election the
    leader did not see is acknowledged by the re-elected leader. Only a broker that becomes a
    follower fails it (ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader)."""
    s = initial_state(CFG.rf)
    s = replace(s, controller=replace(s.controller, replicas=(2, 1, 3)))
    s = run(CFG, Produce(1, 1), Fetch(3, 1), Fetch(3, 1), Fetch(2, 1), state=s)
    assert s.broker(1).views == (UNKNOWN, 0, 1) and s.broker(1).hw == 0  # 2's fetch reached it at 0
    assert [rec for _o, rec, _d in s.broker(1).purgatory] == [1] and not s.ghost.acked
    s = run(CFG, ElectLeaders(2), ControllerFenceBroker(2), MetadataUpdate(1), state=s)
    leader = s.broker(1)
    assert (leader.epoch, leader.hw, leader.purgatory) == (3, 1, ()) and s.ghost.acked == 1
    # A broker that becomes a follower answers its waiting produces with an error instead.
    s = run(CFG, Produce(1, 2), state=s)
    assert [rec for _o, rec, _d in s.broker(1).purgatory] == [2]
    s = run(CFG, ControllerFenceBroker(1), MetadataUpdate(1), state=s)
    assert (s.broker(1).leader, s.broker(1).purgatory, s.ghost.acked) == (3, (), 1)
