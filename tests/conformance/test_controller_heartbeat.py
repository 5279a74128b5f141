"""Conformance with BrokerHeartbeatManagerTest (metadata/src/test/java/org/apache/kafka/controller/):
the controller learns of a dead broker from its missing heartbeats only.

Kafka's controller keeps a broker's session while lastContactNs + broker.session.timeout.ms
is not past (BrokerHeartbeatManager.hasValidSession); findOneStaleBroker names it once the
session ended, and ReplicationControlManager.maybeFenceOneStaleBroker fences it. The model has
no clocks: the crash and the end of the session are two steps, with anything in between.
"""

from __future__ import annotations

from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import BrokerCrash, BrokerRestart, BrokerSessionTimeout, ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.controlled_shutdown import ControlledShutdown, ControlledShutdownComplete
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import members
from scenario import NO_LEADER, enabled, fenced_after_crash, mask, model, outcomes, run, step


def test_find_one_stale_broker():
    """Kafka: BrokerHeartbeatManagerTest.testFindOneStaleBroker: a broker that stops heartbeating
    stays registered and unfenced until its session times out, and only then is it fenced: a
    hard-crashed leader is still the leader and in the ISR at the controller meanwhile, and the
    others may go on (its followers fetch from nobody, a producer finds no live leader)."""
    cfg = Config(rf=3, minisr=2)
    s0 = model(cfg).initial_states()[0]
    crashed = step(cfg, s0, BrokerCrash(1, 0))
    c = crashed.controller
    assert not crashed.broker(1).alive
    assert (c.leader, members(c.isr), c.registered & mask(1)) == (1, (1, 2, 3), mask(1))
    assert c == s0.controller
    assert crashed.true_leader() == NO_LEADER
    assert model(cfg).step(crashed, Fetch(2, 1)) == []
    assert model(cfg).step(crashed, Produce(1, 1)) == []
    fenced = fenced_after_crash(cfg, crashed, 1)
    fc = fenced.controller
    assert (fc.leader, members(fc.isr), fc.registered & mask(1)) == (2, (2, 3), 0)


def test_calculate_next_broker_state():
    """Kafka: BrokerHeartbeatManagerTest.testCalculateNextBrokerState: an unfenced broker that asks
    to shut down gets CONTROLLED_SHUTDOWN if it leads a partition and SHUTDOWN_NOW if it leads
    none (of the whole cluster: a follower of this partition gets either); in CONTROLLED_SHUTDOWN
    it gets SHUTDOWN_NOW only once controlledShutdownOffset <= lowestActiveOffset, and fencing
    the active broker that lagged (broker 1 at offset 98 in Kafka's test) lets it go. Model ids:
    leader 1 shuts down; 2 is the broker that lags, 3 the one that applied the shutdown's
    metadata. The offset is read as the leader epoch the shutdown wrote
    (spec/controlled_shutdown.py)."""
    cfg = Config(rf=3, minisr=1, max_hard_crashes=0, max_controlled_shutdowns=1, max_fences=1)
    s0 = model(cfg).initial_states()[0]
    # Leads nothing: SHUTDOWN_NOW, fenced and stopped at once. Leads another partition:
    # CONTROLLED_SHUTDOWN, marked and out of the ISR, alive.
    now, other = outcomes(cfg, s0, ControlledShutdown(3))
    assert not now.broker(3).alive and not now.controller.registered & mask(3) and now.controller.shutdown == ()
    assert other.broker(3).alive and other.controller.shutting == mask(3) and not other.controller.isr & mask(3)
    # Leads: CONTROLLED_SHUTDOWN, its leadership moved (epoch 2), and it waits.
    s = step(cfg, s0, ControlledShutdown(1))
    assert s.broker(1).alive and s.controller.shutting == mask(1) and s.controller.shutdown[0] == 2
    assert (s.controller.leader, s.controller.epoch) == (2, 2)
    assert not enabled(cfg, s, ControlledShutdownComplete(1))  # 2 and 3 still at epoch 1
    s = step(cfg, s, MetadataUpdate(3))
    assert not enabled(cfg, s, ControlledShutdownComplete(1))  # 2 is the lowest active offset
    caught_up = step(cfg, step(cfg, s, MetadataUpdate(2)), ControlledShutdownComplete(1))
    assert not caught_up.broker(1).alive and not caught_up.controller.registered & mask(1)
    # Fencing the laggard takes it out of the active set: the shutdown may complete.
    fenced = step(cfg, s, ControllerFenceBroker(2))
    assert fenced.broker(2).epoch == 1 and not fenced.controller.active & mask(2)
    assert enabled(cfg, fenced, ControlledShutdownComplete(1))


def test_controlled_shutdown_offset_is_only_updated_once():
    """Kafka: BrokerHeartbeatManagerTest.testControlledShutdownOffsetIsOnlyUpdatedOnce: the offset a
    broker in controlled shutdown waits for is the one of its first CONTROLLED_SHUTDOWN batch;
    later records do not move it. Here leader 1 shuts down (epoch 2, leader 2); another request
    to shut down is no new CONTROLLED_SHUTDOWN transition, and leader 2's ISR change moves the
    partition epoch on: the mark stays at epoch 2, and broker 1 may stop once 2 and 3 applied
    it."""
    cfg = Config(rf=3, minisr=1, max_hard_crashes=0, max_controlled_shutdowns=2, max_isr_shrinks=1)
    s = run(cfg, ControlledShutdown(1), MetadataUpdate(2), MetadataUpdate(3))
    assert s.controller.shutdown[0] == 2
    assert not enabled(cfg, s, ControlledShutdown(1))
    s = run(cfg, Produce(2, 1), ReplicaStall(3), AlterPartition(2, (2,)), HandleAlterPartitionResponse(2), state=s)
    assert (s.controller.epoch, s.controller.pepoch, s.controller.shutdown[0]) == (2, 3, 2)
    assert enabled(cfg, s, ControlledShutdownComplete(1))


def test_has_valid_session():
    """Kafka: BrokerHeartbeatManagerTest.testHasValidSession: a broker's session is valid from its
    registration until it is fenced or its session times out. A crashed broker keeps a valid
    session (still registered and unfenced, so still an active broker whose metadata offset
    counts) until BrokerSessionTimeout; its restart is refused meanwhile
    (ClusterControlManager.registerBroker: DuplicateBrokerRegistrationException) and accepted
    after, with a new broker epoch."""
    cfg = Config(rf=3, minisr=2)
    crashed = step(cfg, model(cfg).initial_states()[0], BrokerCrash(2, 0))
    assert crashed.controller.active & mask(2) and not enabled(cfg, crashed, BrokerRestart(2))
    fenced = step(cfg, crashed, BrokerSessionTimeout(2))
    assert not fenced.controller.registered & mask(2)
    restarted = step(cfg, fenced, BrokerRestart(2))
    assert restarted.broker(2).alive and restarted.controller.bepochs[1] == 2 == restarted.broker(2).bepoch
