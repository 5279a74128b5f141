"""Preferred leader elections, the example of adding an action: spec/elect_leaders.py and one
line of spec/next.py; the flag, the budget, the engines and the traces follow from Next.

With auto.leader.rebalance.enable on (Kafka's default) the controller's AutoLeaderRebalance
takes them; off, an operator's ElectLeaders. Both reach the same states."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace as dc_replace

from helpers import bfs_until
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.oracle.search import explore_oracle
from kafkamc.spec.config import Config
from kafkamc.spec.elect_leaders import AutoLeaderRebalance, ElectLeaders, auto_leader_rebalance, elect_leaders
from kafkamc.spec.state import bit, replace
from kafkamc.traces.trace import format_action

# Broker 1 (preferred) shuts down, broker 2 leads, broker 1 comes back and rejoins the ISR.
CFG = Config(
    rf=2,
    minisr=1,
    max_records=1,
    max_clean_shutdowns=1,
    max_hard_crashes=0,
    max_leader_elections=1,
    auto_rebalance=False,
)
AUTO = dc_replace(CFG, auto_rebalance=True)


def moved_back():
    """The first transition, breadth first, in which the preferred replica is elected back."""
    found = bfs_until(CFG, lambda s, a, n: isinstance(a, ElectLeaders))
    assert found is not None, "no preferred election is reachable"
    return found


def test_preferred_replica_is_elected_back_with_a_new_epoch():
    before, action, after = moved_back()
    c, n = before.controller, after.controller
    assert action == ElectLeaders(c.replicas[0])
    assert c.leader != c.replicas[0] and n.leader == c.replicas[0]
    assert (n.epoch, n.pepoch) == (c.epoch + 1, c.pepoch + 1)
    assert n.isr == c.isr  # only the leader moves
    assert after.budget.of("leader_elections") == 1
    # The brokers learn it from the metadata log, later: nothing else changed.
    assert after.brokers == before.brokers


def test_no_election_when_not_needed_or_not_available():
    before, action, _ = moved_back()
    c = before.controller
    leading = replace(before, controller=replace(c, leader=action.preferred))
    assert elect_leaders(CFG, leading, action) is None  # ELECTION_NOT_NEEDED
    out_of_isr = replace(before, controller=replace(c, isr=c.isr & ~bit(action.preferred)))
    assert elect_leaders(CFG, out_of_isr, action) is None  # PREFERRED_LEADER_NOT_AVAILABLE
    fenced = replace(before, controller=replace(c, registered=c.registered & ~bit(action.preferred)))
    assert elect_leaders(CFG, fenced, action) is None
    spent = moved_back()[2]
    assert elect_leaders(CFG, replace(spent, controller=c), action) is None  # the bound is spent
    assert elect_leaders(CFG, before, ElectLeaders(2 if action.preferred == 1 else 1)) is None  # not preferred


def test_engines_agree_and_the_action_changes_the_search():
    fast = explore(FastModel(CFG), InvariantSuite(CFG))
    ref = explore_oracle(CFG)  # exact states: its class count is the reduced search's count
    assert (fast.verdict, fast.distinct_states, fast.depth) == (ref.verdict, ref.classes, ref.depth)
    assert fast.coverage["ElectLeaders"] > 0 and ref.coverage["ElectLeaders"] > 0
    without = explore(FastModel(dc_replace(CFG, max_leader_elections=0)), InvariantSuite(CFG))
    assert "ElectLeaders" not in without.coverage
    assert without.distinct_states < fast.distinct_states
    # Issue 29 (rf 2: no shrink of two): INVALID_UPDATE_VERSION and FENCED_LEADER_EPOCH keep the
    # pending ISR (1,908 -> 1,875); the leader learns of fencing and unfencing only from its own
    # metadata (1,875 -> 2,061; without the election 1,118 -> 1,304). Trace validation (Kafka
    # 4.1.1): a crashed follower may be dropped from the ISR by the leader's lag check before its
    # fence: 2,061 -> 2,245, without the election 1,304 -> 1,488.
    assert (fast.verdict, fast.distinct_states, without.distinct_states) == ("holds", 2245, 1488)


def test_trace_describes_it_and_the_flag_exists():
    assert format_action(ElectLeaders(1)) == "ElectLeaders(preferred=1)"
    p = subprocess.run(
        [sys.executable, "-m", "kafkamc.cli.main", "check", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "--max-leader-elections" in p.stdout


def test_the_controller_rebalances_by_itself_by_default():
    """auto.leader.rebalance.enable=true (Kafka's default): the same elections are the
    controller's own step, and the operator's request is not generated (it adds no state)."""
    assert Config().auto_rebalance is True
    auto = explore(FastModel(AUTO), InvariantSuite(AUTO))
    ref = explore_oracle(AUTO)
    assert (auto.verdict, auto.distinct_states) == (ref.verdict, ref.classes) == ("holds", 2245)  # as above
    assert auto.coverage["AutoLeaderRebalance"] > 0 and auto.coverage.get("ElectLeaders", 0) == 0
    before, action, after = bfs_until(AUTO, lambda s, a, n: isinstance(a, AutoLeaderRebalance))
    assert after.controller.leader == action.preferred == before.controller.replicas[0]
    assert auto_leader_rebalance(CFG, before, action) is None  # off: only an operator elects
    assert "auto.leader.rebalance.enable=true" in AUTO.kafka_settings()
