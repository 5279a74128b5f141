"""A crashed broker stays registered until its session times out (broker.session.timeout.ms),
and restarts after a hard crash with the HW of its checkpoint file.

BrokerCrash changes the broker alone; BrokerSessionTimeout is the controller's fence
(ReplicationControlManager.maybeFenceOneStaleBroker); BrokerRestart waits for it
(ClusterControlManager.registerBroker: DuplicateBrokerRegistrationException while the old
session is valid). CheckpointHighWatermarks writes the HW file (ReplicaManager.
checkpointHighWatermarks); a hard crash reads it back. The paths are built by hand through
Model.step (tests/invariant_helpers.py).
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

from helpers import bfs_until
from invariant_helpers import ALL3, B1, B2, B3, CFG, model, run
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.catalog import INVARIANTS
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.oracle.search import explore_oracle
from kafkamc.spec.broker_lifecycle import (
    BrokerCrash,
    BrokerRestart,
    BrokerSessionTimeout,
    CheckpointHighWatermarks,
    ControllerFenceBroker,
    broker_restart,
    broker_session_timeout,
)
from kafkamc.spec.config import Config
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.next import NEXT
from kafkamc.spec.produce import Produce
from kafkamc.spec.state import NO_LEADER, initial_state
from kafkamc.traces.trace import format_action

SAFETY = [inv.name for inv in INVARIANTS if inv.tier == "safety"]


def actions_of(cfg: Config, state, b: int) -> list:
    c = state.controller
    return model(cfg).broker_candidates(c, state.broker(b), state.budget, b)


def test_a_crashed_leader_still_leads_at_the_controller_until_its_session_times_out():
    before = initial_state(3)
    s = run(CFG, BrokerCrash(1))
    c = s.controller
    assert not s.broker(1).alive
    assert c == before.controller  # nothing changed at the controller: registered, in the ISR, leader
    assert (c.leader, c.isr, c.registered & B1) == (1, ALL3, B1)
    assert s.true_leader() == NO_LEADER  # offline in practice: the leader it names is dead
    # Nobody is told anything: the followers' metadata is not stale.
    assert not any(isinstance(a, MetadataUpdate) for b in (2, 3) for a in actions_of(CFG, s, b))
    # The fence is the controller's own step, and the only thing broker 1 can take part in.
    assert actions_of(CFG, s, 1) == [BrokerSessionTimeout(1)]


def test_the_restart_waits_for_the_fence():
    s = run(CFG, BrokerCrash(1))
    assert broker_restart(CFG, s, BrokerRestart(1)) is None  # DuplicateBrokerRegistrationException
    assert model(CFG).step(s, BrokerRestart(1)) == []
    fenced = run(CFG, BrokerSessionTimeout(1), state=s)
    assert actions_of(CFG, fenced, 1) == [BrokerRestart(1)]
    back = run(CFG, BrokerRestart(1), state=fenced)
    assert back.broker(1).alive and back.broker(1).bepoch == 2
    assert back.controller.registered & B1 and back.controller.bepochs == (2, 1, 1)


def test_the_session_timeout_fences_and_elects():
    s = run(CFG, BrokerCrash(1))
    n = run(CFG, BrokerSessionTimeout(1), state=s).controller
    assert n.registered == B2 | B3
    assert (n.leader, n.epoch, n.isr) == (2, 2, B2 | B3)  # the first registered ISR member, in order
    assert n.pepoch == s.controller.pepoch + 1
    # Once per crash: not for a live broker, not twice.
    fenced = run(CFG, BrokerSessionTimeout(1), state=s)
    assert broker_session_timeout(CFG, fenced, BrokerSessionTimeout(1)) is None
    assert broker_session_timeout(CFG, initial_state(3), BrokerSessionTimeout(1)) is None
    assert BrokerSessionTimeout(1) not in actions_of(CFG, fenced, 1)


def test_a_dead_follower_in_the_isr_holds_the_hw_back_until_it_is_fenced():
    """Follower 3 crashes before it fetched record 1: the leader's ISR still names it, so the
    HW stays at 0 and the acks=all write waits, until the session timeout takes 3 out of the
    ISR ({1, 2} is still min ISR) and the leader learns the new ISR."""
    s = run(CFG, BrokerCrash(3), Produce(1, 1), Fetch(2, 1), Fetch(2, 1))
    assert s.broker(1).hw == 0 and s.ghost.acked == 0
    assert s.controller.isr == ALL3 and s.broker(1).isr == ALL3
    s = run(CFG, BrokerSessionTimeout(3), state=s)
    assert (s.controller.isr, s.controller.leader) == (B1 | B2, 1)
    s = run(CFG, MetadataUpdate(1), state=s)
    assert s.broker(1).hw == 1 and s.ghost.acked == 0b1


def test_the_controller_elects_a_dead_broker_it_believes_alive():
    """Broker 2 crashed and is still registered; the controller fences live broker 1 (missed
    heartbeats) and elects broker 2, the first registered ISR member. Only when 2's session
    times out does broker 3 lead."""
    cfg = dc_replace(CFG, max_fences=1)
    s = run(cfg, BrokerCrash(2), ControllerFenceBroker(1))
    assert (s.controller.leader, s.controller.epoch) == (2, 2)
    assert not s.broker(2).alive and s.true_leader() == NO_LEADER
    s = run(cfg, BrokerSessionTimeout(2), state=s)
    assert (s.controller.leader, s.controller.epoch, s.controller.isr) == (3, 3, B3)


def test_the_window_is_reachable():
    found = bfs_until(
        CFG,
        lambda s, a, n: isinstance(a, BrokerCrash) and n.controller.isr & n.controller.registered & ~_alive(n),
    )
    assert found is not None
    _before, action, after = found
    assert after.controller.registered & (1 << (action.broker - 1))


def _alive(state) -> int:
    return sum(1 << (b - 1) for b, br in enumerate(state.brokers, 1) if br.alive)


def test_next_lists_it_without_a_budget():
    (entry,) = [a for a in NEXT if a.type is BrokerSessionTimeout]
    assert entry.bounds == ()
    assert {b.name for b in entry.enabled_by} == {"crashes", "unclean_crashes"}
    assert format_action(BrokerSessionTimeout(2)) == "BrokerSessionTimeout(broker=2)"


def test_engines_agree_with_the_session_timeout():
    for cfg in (
        # No ISR shrink: the oracle keeps exact states (rf! per class), so these stay small.
        Config(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_isr_shrinks=0),
        Config(rf=3, minisr=2, max_records=1, max_isr_shrinks=0),
    ):
        fast = explore(FastModel(cfg), InvariantSuite(cfg, SAFETY))
        ref = explore_oracle(cfg, SAFETY)  # exact states: classes for the reduced search, the rest for the plain one
        assert (fast.verdict, fast.distinct_states, fast.depth) == (ref.verdict, ref.classes, ref.depth)
        exact = dc_replace(cfg, symmetry=False)
        plain = explore(FastModel(exact), InvariantSuite(exact, SAFETY))
        assert (plain.distinct_states, plain.states_generated) == (ref.states, ref.generated)
        for name in ("BrokerSessionTimeout", "CheckpointHighWatermarks"):
            assert plain.coverage[name] == ref.coverage[name] > 0


# ---------------------------------------------------------------- the HW checkpoint

# Record 1 written and fetched by both followers twice: leader 1's HW is 1 in memory.
COMMITTED = (Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1))


def test_the_checkpoint_lags_the_hw_in_memory():
    s = run(CFG, *COMMITTED)
    assert (s.broker(1).hw, s.broker(1).checkpoint_hw) == (1, 0)
    assert CheckpointHighWatermarks(1) in actions_of(CFG, s, 1)
    written = run(CFG, CheckpointHighWatermarks(1), state=s)
    assert written.broker(1).checkpoint_hw == 1
    assert CheckpointHighWatermarks(1) not in actions_of(CFG, written, 1)  # nothing new to write


def test_a_hard_crash_restarts_from_the_checkpoint_not_from_memory():
    """Broker 1 loses no record (keep=1) but its checkpoint still says 0: it restarts at HW 0."""
    s = run(CFG, *COMMITTED, BrokerCrash(1, keep=1))
    assert s.broker(1).log == ((1, 1),) and s.broker(1).hw == 0
    s = run(CFG, BrokerSessionTimeout(1), BrokerRestart(1), state=s)
    assert s.broker(1).alive and s.broker(1).hw == 0


def test_a_written_checkpoint_survives_a_hard_crash_up_to_the_log_end():
    written = run(CFG, *COMMITTED, CheckpointHighWatermarks(1))
    assert run(CFG, BrokerCrash(1, keep=1), state=written).broker(1).hw == 1
    assert run(CFG, BrokerCrash(1, keep=0), state=written).broker(1).hw == 0  # capped at the log end


def test_a_clean_shutdown_writes_the_checkpoint():
    s = run(CFG, *COMMITTED, BrokerCrash(1))
    assert (s.broker(1).hw, s.broker(1).checkpoint_hw) == (1, 1)
    s = run(CFG, BrokerSessionTimeout(1), BrokerRestart(1), state=s)
    assert (s.broker(1).hw, s.broker(1).checkpoint_hw) == (1, 1)


def test_checkpoints_are_forgotten_once_no_hard_crash_is_left():
    """The last hard crash sets every checkpoint to 0 and the step is offered no more: no
    checkpoint will be read again."""
    s = run(CFG, *COMMITTED, CheckpointHighWatermarks(1), BrokerCrash(3, keep=1))
    assert [br.checkpoint_hw for br in s.brokers] == [0, 0, 0]
    assert s.broker(1).hw == 1  # memory is untouched
    assert not any(isinstance(a, CheckpointHighWatermarks) for b in (1, 2, 3) for a in actions_of(CFG, s, b))
