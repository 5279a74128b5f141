"""Broker incarnations under --rule incarnations=kraft_steps (issue 41), restating what Kafka's
source and tests say: BrokerHeartbeatManagerTest.testHasValidSession,
ReplicationControlManagerTest.testAlterPartitionShouldRejectBrokersWithStaleEpoch (with the
request in flight across the restart), ClusterControlManager.registerBroker's cleanup, and
calculateNextBrokerState's FENCED case.
"""

from __future__ import annotations

from helpers import play
from kafkamc.spec.alter_partition import AlterPartition, HandleAlterPartitionResponse
from kafkamc.spec.broker_lifecycle import (
    BrokerCrash,
    BrokerHeartbeat,
    BrokerRegistration,
    BrokerRestart,
    BrokerSessionTimeout,
    ControllerFenceBroker,
)
from kafkamc.spec.config import Config
from kafkamc.spec.controlled_shutdown import ControlledShutdown
from kafkamc.spec.fetch import Fetch, ReplicaStall
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import NEWEST, preset

KRAFT = preset(NEWEST).with_rules(incarnations="kraft_steps")


def mask(*brokers: int) -> int:
    return sum(1 << (b - 1) for b in brokers)


def step(cfg: Config, state, action):
    (nxt,) = Model(cfg).step(state, action)
    return nxt


def enabled(cfg: Config, state, action) -> bool:
    return bool(Model(cfg).step(state, action))


def run(cfg: Config, *actions, state=None):
    return play(cfg, *actions, state=state)


def test_a_new_process_fetches_before_it_registers_and_registers_fenced():
    """The old session stays valid after a crash; the new process starts, fetches with broker
    epoch -1 (the model's 0), and registers at any later step (refused while the old session is
    valid, accepted once it expired, fenced or not): fenced, with a new epoch; a heartbeat
    unfences it."""
    cfg = Config(rf=3, minisr=2, protocol=KRAFT)
    crashed = step(cfg, Model(cfg).initial_states()[0], BrokerCrash(2, 0))
    started = step(cfg, crashed, BrokerRestart(2))
    assert started.broker(2).bepoch == 0 and started.controller.active & mask(2)
    fetched = step(cfg, started, Fetch(2, 1))
    assert fetched.broker(1).vbepochs[1] == 0 and fetched.broker(1).views[1] == 0
    assert not enabled(cfg, started, BrokerHeartbeat(2))  # no session of its own yet
    registered = step(cfg, started, BrokerRegistration(2))
    c = registered.controller
    assert (c.bepochs[1], registered.broker(2).bepoch, c.registered & mask(2), c.isr & mask(2)) == (2, 2, 0, 0)
    assert step(cfg, registered, BrokerHeartbeat(2)).controller.registered & mask(2)
    fenced = step(cfg, started, BrokerSessionTimeout(2))  # the other order
    assert step(cfg, fenced, BrokerRegistration(2)).controller.bepochs[1] == 2


def test_an_expansion_in_flight_across_a_restart_names_the_old_epoch_and_is_refused():
    """The expansion is prepared on the old incarnation's fetch (epoch 1) and lands after the
    new one registered (epoch 2) and was unfenced: INELIGIBLE_REPLICA (KIP-903)."""
    cfg = Config(rf=3, minisr=1, protocol=KRAFT)
    # The shrink is prepared, then delivered (prepareIsrShrink: in flight under kraft_steps).
    s = run(cfg, Produce(1, 1), ReplicaStall(3), AlterPartition(1, (1, 2)), AlterPartition(1, (1, 2)))
    s = run(cfg, HandleAlterPartitionResponse(1), state=s)
    s = run(cfg, Fetch(2, 1), Fetch(2, 1), Fetch(3, 1), Fetch(3, 1), state=s)
    assert s.broker(1).request == (1, 1, 1) and s.broker(1).pending == mask(1, 2, 3)
    s = run(cfg, BrokerCrash(3, 1), BrokerRestart(3), BrokerRegistration(3), BrokerHeartbeat(3), state=s)
    s = step(cfg, s, AlterPartition(1, (1, 2, 3)))
    assert (s.broker(1).alter.ok, s.broker(1).alter.error) == (False, "INELIGIBLE_REPLICA")


def test_a_clean_stop_of_an_unregistered_process_counts_as_unclean():
    """BrokerServer.shutdown writes lifecycleManager.brokerEpoch (-1) in the clean-shutdown file;
    the next registration's previousBrokerEpoch is then not the stored one: unclean, so with ELR
    on the broker leaves the ELR as well as the ISR."""
    cfg = Config(rf=3, minisr=3, max_clean_shutdowns=1, max_hard_crashes=1, protocol=KRAFT)
    s = run(cfg, BrokerCrash(3, 0), BrokerSessionTimeout(3))
    assert s.controller.elr & mask(3)
    s = run(cfg, BrokerRestart(3), BrokerCrash(3), state=s)
    assert not s.broker(3).clean
    s = run(cfg, BrokerRestart(3), BrokerRegistration(3), state=s)
    assert not s.controller.elr & mask(3)


def test_a_fenced_live_broker_asked_to_stop_stops_at_once():
    """calculateNextBrokerState, FENCED case: wantShutDown is granted SHUTDOWN_NOW. A zombie
    never takes the controlled path; its clean stop is a BrokerCrash keeping the whole log."""
    cfg = Config(rf=3, minisr=2, max_fences=1, max_controlled_shutdowns=1, max_clean_shutdowns=1, protocol=KRAFT)
    s = run(cfg, ControllerFenceBroker(2))
    assert not enabled(cfg, s, ControlledShutdown(2))
    stopped = step(cfg, s, BrokerCrash(2))
    assert not stopped.broker(2).alive and stopped.broker(2).clean


def test_a_restart_unfences_by_heartbeat_with_no_fence_spent():
    """Under kraft_steps a new incarnation registers fenced and its heartbeat unfences it, so
    BrokerHeartbeat may fire at --max-fences 0 once a broker may stop (spec/next.py
    enabled_under); under fenced_first only a fence makes it fire, and the search leaves it out."""
    from kafkamc.spec import broker_lifecycle as lc
    from kafkamc.spec.next import entry

    heartbeat = entry(lc.BrokerHeartbeat(1))
    kraft = Config(protocol=KRAFT, max_fences=0, max_hard_crashes=1)
    assert heartbeat.may_fire(kraft)
    assert not heartbeat.may_fire(Config(protocol=KRAFT, max_fences=0, max_hard_crashes=0))
    assert not heartbeat.may_fire(Config(max_fences=0, max_hard_crashes=1))
    assert heartbeat.bounded_off(Config(max_fences=0, max_hard_crashes=1)) == ["max_fences"]
    assert lc.heartbeat_candidates in Model(kraft).candidate_fns
