"""Conformance with ReplicaTest (core/src/test/scala/unit/kafka/cluster/ReplicaTest.scala): what a
leader keeps of a follower's state when it leads a new epoch (Replica.resetReplicaState, called
from Partition.makeLeader with isNewLeader = !isLeader).

A broker re-elected while it still led (its metadata never named another leader in between)
keeps each follower's log end offset and broker epoch; a broker that was not leading starts
with them unknown. In the model a re-election that the broker did not see interrupted is one
MetadataUpdate from its old epoch to the new one (a broker applies the latest metadata only).
"""

from __future__ import annotations

from kafkamc.spec.broker_lifecycle import BrokerHeartbeat, ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import NO_LEADER, members
from scenario import UNKNOWN, crash, run

CFG = Config(rf=3, minisr=1, max_fences=3, max_clean_shutdowns=1)


def replicated():
    """Leader 1 of epoch 1 wrote record 1; both followers fetched it and the leader saw them at 1."""
    return run(CFG, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1))


def test_reset_replica_state_when_leader_is_reelected_and_replica_is_in_sync():
    """Kafka: ReplicaTest.testResetReplicaStateWhenLeaderIsReelectedAndReplicaIsInSync: a leader
    re-elected into a new epoch keeps its followers' log end offsets and broker epochs.
    Here the controller fences the followers, then the leader, and unfences the leader, which
    is elected again (epoch 3) before broker 1 applied any of it."""
    s = replicated()
    known = s.broker(1).views, s.broker(1).vbepochs
    assert known == ((UNKNOWN, 1, 1), (0, 1, 1))
    s = run(CFG, ControllerFenceBroker(2), ControllerFenceBroker(3), ControllerFenceBroker(1), state=s)
    assert s.controller.leader == NO_LEADER and s.broker(1).epoch == 1
    s = run(CFG, BrokerHeartbeat(1), MetadataUpdate(1), state=s)
    leader = s.broker(1)
    assert (leader.leader, leader.epoch, members(leader.isr)) == (1, 3, (1,))
    assert (leader.views, leader.vbepochs) == known


def test_reset_replica_state_when_new_leader_is_elected_and_replica_is_in_sync():
    """Kafka: ReplicaTest.testResetReplicaStateWhenNewLeaderIsElectedAndReplicaIsInSync: a newly
    elected leader knows nothing yet of its followers: log end offsets unknown, no broker epoch."""
    s = run(CFG, MetadataUpdate(2), state=crash(CFG, replicated(), 1))
    leader = s.broker(2)
    assert (leader.leader, leader.epoch) == (2, 2)
    assert leader.views == (UNKNOWN,) * 3 and leader.vbepochs == (0,) * 3
