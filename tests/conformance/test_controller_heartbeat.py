"""Conformance with BrokerHeartbeatManagerTest (metadata/src/test/java/org/apache/kafka/controller/):
the controller learns of a dead broker from its missing heartbeats only.

Kafka's controller keeps a broker's session while lastContactNs + broker.session.timeout.ms
is not past (BrokerHeartbeatManager.hasValidSession); findOneStaleBroker names it once the
session ended, and ReplicationControlManager.maybeFenceOneStaleBroker fences it. The model has
no clocks: the crash and the end of the session are two steps, with anything in between.
"""

from __future__ import annotations

from kafkamc.spec.broker_lifecycle import BrokerCrash
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import members
from scenario import NO_LEADER, fenced_after_crash, mask, model, step


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
