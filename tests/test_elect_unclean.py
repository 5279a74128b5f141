"""An operator's unclean election (ElectLeaders with ElectionType.UNCLEAN, KIP-460), the proof of
issue 32's one home per rule: spec/elect_unclean.py and one entry of spec/next.py. Its guard,
wording and fairness come with it; the flag, the budget, the engines, the story and the HTML
page follow from Next."""

from __future__ import annotations

from dataclasses import replace as dc_replace

from helpers import bfs_until, run_kafkamc
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.oracle.search import explore_oracle
from kafkamc.spec.config import Config
from kafkamc.spec.elect_unclean import ELECTIONS, ElectLeadersUnclean, elect_leaders_unclean
from kafkamc.spec.next import entry
from kafkamc.spec.state import NO_LEADER
from kafkamc.traces.html import messages
from kafkamc.traces.story import step_events
from kafkamc.traces.trace import format_action

# A fence makes broker 1 a zombie, broker 2 leads, crashes hard and restarts out of the ELR: the
# partition is offline with broker 2 up, which only an unclean election brings back.
CFG = Config(rf=2, minisr=2, max_records=1, max_fences=1, max_unclean_elections=1)


def test_off_by_default_with_an_operators_fairness():
    assert Config().bound(ELECTIONS) == 0
    assert entry(ElectLeadersUnclean(1)).fairness == "none"  # an operator may never ask


def test_the_first_active_replica_leads_an_offline_partition():
    found = bfs_until(CFG, lambda s, a, n: isinstance(a, ElectLeadersUnclean))
    assert found is not None
    before, action, after = found
    c, n = before.controller, after.controller
    assert c.leader == NO_LEADER and n.leader == action.leader == c.in_order(c.active)[0]
    assert n.isr == 1 << (action.leader - 1) and n.recovering and (n.epoch, n.pepoch) == (c.epoch + 1, c.pepoch + 1)
    assert after.budget.of("unclean_elections") == 1 and after.brokers == before.brokers
    # ELECTION_NOT_NEEDED once it leads, and no budget left for another.
    assert elect_leaders_unclean(CFG, after, action) is None
    assert elect_leaders_unclean(dc_replace(CFG, max_unclean_elections=0), before, action) is None


def test_engines_agree_and_it_fires_only_when_enabled():
    fast, ref = explore(FastModel(CFG)), explore_oracle(CFG, [])
    assert (fast.distinct_states, fast.depth) == (ref.counted, ref.depth)
    assert fast.coverage["ElectLeadersUnclean"] > 0 and ref.coverage["ElectLeadersUnclean"] > 0
    without = explore(FastModel(dc_replace(CFG, max_unclean_elections=0)))
    assert "ElectLeadersUnclean" not in without.coverage
    # Pinned when the action was added (issue 32): 44,293 states without it, 61,809 with one.
    assert (fast.verdict, fast.distinct_states, without.distinct_states) == ("holds", 61809, 44293)


def test_it_loses_committed_data_and_the_trace_says_so():
    v = explore(FastModel(CFG), InvariantSuite(CFG)).violation
    assert v is not None and v.invariant == "NoCommittedDataLoss" and len(v.trace) == 9
    steps = v.trace
    i = next(i for i, (a, _) in enumerate(steps) if isinstance(a, ElectLeadersUnclean))
    action, state = steps[i]
    assert format_action(action) == "ElectLeadersUnclean(leader=2)"
    assert step_events(CFG, steps, i) == [
        "an operator asked for an unclean leader election of the offline partition (ElectLeaders UNCLEAN); "
        "the controller elected broker 2 leader of epoch 4 in the unclean election the operator asked for, "
        "though it was not in the ISR; the partition is RECOVERING; broker 2 lacks r1 (committed, acknowledged)"
    ]
    marks = messages(action, state, steps[i - 1][1])[1]
    assert marks[0] == {"lane": "controller", "label": "ElectLeaders: unclean election", "kind": "elect"}


def test_the_flag_exists():
    p = run_kafkamc("check", "--help")
    assert "--max-unclean-elections" in p.stdout
