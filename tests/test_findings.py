"""Findings in current Kafka (docs/FINDINGS.md), pinned by their exact shortest paths, and the
proposed fix of each as a protocol rule value that holds where the finding breaks.

The re-election finding: a leader elected again across a leader epoch it never applied keeps
its followers' fetch state from before (Partition.makeLeader, Replica.resetReplicaState with
isNewLeader = !isLeader), advances the HW over a record a follower truncated in the missed
epoch, and acknowledges the waiting acks=all produce (DelayedProduce).
"""

from __future__ import annotations

import pytest
from helpers import play
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.broker_lifecycle import ControllerFenceBroker
from kafkamc.spec.config import Config
from kafkamc.spec.elect_leaders import ElectLeaders
from kafkamc.spec.fetch import Fetch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import NEWEST, preset
from kafkamc.spec.state import UNKNOWN, initial_state, replace
from kafkamc.traces.trace import format_action

FIX = preset(NEWEST).with_rules(leader_reelection="reset_on_epoch_gap")

# The bounds: two fences and one preferred election, nothing else.
FINDING = dict(
    rf=3,
    minisr=2,
    max_records=1,
    max_clean_shutdowns=0,
    max_hard_crashes=0,
    max_fences=2,
    max_isr_shrinks=0,
    max_leader_elections=1,
)
# One hard crash more: the re-elected leader is lost after it acknowledged the record.
ACKED = dict(FINDING, max_hard_crashes=1)

# From the start to the re-election: broker 2 leads epoch 2, takes r1 and replicates it to 3;
# the controller's automatic rebalance makes broker 1 leader of epoch 3, which broker 2 does
# not apply; 3 follows 1; broker 1 is fenced and broker 2, still leading epoch 2 in its own
# metadata, is elected for epoch 4 and applies 3 and 4 at once.
REELECTION = [
    "AutoLeaderRebalance(preferred=1)",
    "MetadataUpdate(broker=1)",
    "Fetch(follower=3, leader=2)",
    "Fetch(follower=3, leader=2)",
    "MetadataUpdate(broker=3)",
    "ControllerFenceBroker(broker=1)",
    "MetadataUpdate(broker=2)",
]

COMMITTED_PATH = [
    "ControllerFenceBroker(broker=1)",
    "MetadataUpdate(broker=1)",
    "BrokerHeartbeat(broker=1)",
    "MetadataUpdate(broker=2)",
    "Fetch(follower=1, leader=2)",
    "Produce(leader=2, record=1)",
    "AlterPartition(leader=2, isr=(1, 2, 3))",
    "MetadataUpdate(broker=3)",
    *REELECTION,
    # Follower 3, still on epoch 3, truncates r1 on a diverging-epoch answer from broker 1.
    "Fetch(follower=3, leader=1)",
]

ACKED_PATH = [
    "BrokerCrash(broker=1, keep=0)",
    "BrokerSessionTimeout(broker=1)",
    "BrokerRestart(broker=1)",
    "MetadataUpdate(broker=2)",
    "Fetch(follower=1, leader=2)",
    "Produce(leader=2, record=1)",
    "AlterPartition(leader=2, isr=(1, 2, 3))",
    "MetadataUpdate(broker=3)",
    *REELECTION,
    # Leader 2 acknowledged r1 at the re-election; now it is fenced too, broker 3 is elected
    # from the ISR {3}, truncates r1 on broker 1's answer, and then applies its election.
    "ControllerFenceBroker(broker=2)",
    "Fetch(follower=3, leader=1)",
    "MetadataUpdate(broker=3)",
]


def _search(kw: dict, invariants=None, protocol=None):
    cfg = Config(**kw) if protocol is None else Config(protocol=protocol, **kw)
    return explore(FastModel(cfg), InvariantSuite(cfg, invariants), "bfs")


def _acked(state) -> bool:
    return bool(state.ghost.acked & 1)


def test_reelection_loses_committed_record_on_newest():
    r = _search(FINDING)
    v = r.violation
    assert (r.verdict, v.invariant, v.length) == ("violated", "NoCommittedDataLoss", 16)
    assert [format_action(a) for a, _ in v.trace[1:]] == COMMITTED_PATH
    # At the re-election (MetadataUpdate of broker 2) leader 2 keeps follower 3's LEO 1 and
    # commits r1, and the acks=all produce waiting in its purgatory is acknowledged.
    states = [s for _, s in v.trace]
    assert [i for i in range(1, len(states)) if _acked(states[i]) and not _acked(states[i - 1])] == [15]
    leader = states[15].broker(2)
    assert (leader.epoch, leader.hw, leader.views[3 - 1]) == (4, 1, 1)
    assert states[14].broker(2).epoch == 2  # it never applied epoch 3


def test_fix_holds_at_the_finding_bounds():
    r = _search(FINDING, protocol=FIX)
    assert r.verdict == "holds"


@pytest.mark.slow
def test_reelection_loses_acknowledged_write_on_newest():
    """AckedWriteDurability: the acknowledged r1 is not in the log of broker 3, the new leader."""
    r = _search(ACKED, ["AckedWriteDurability"])
    v = r.violation
    assert (r.verdict, v.invariant, v.length) == ("violated", "AckedWriteDurability", 18)
    assert [format_action(a) for a, _ in v.trace[1:]] == ACKED_PATH
    states = [s for _, s in v.trace]
    acked_at = [i for i in range(1, len(states)) if _acked(states[i]) and not _acked(states[i - 1])]
    assert acked_at == [15] and format_action(v.trace[15][0]) == "MetadataUpdate(broker=2)"
    last = states[-1]
    assert (last.controller.leader, last.broker(3).leader, last.broker(3).log) == (3, 3, ())


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw",
    [
        dict(FINDING, max_records=2),
        ACKED,
    ],
    ids=["records-2", "with-a-hard-crash"],
)
def test_fix_holds_at_larger_bounds(kw):
    assert _search(kw, protocol=FIX).verdict == "holds"


def test_reelection_across_a_missed_epoch_resets_followers_under_the_fix():
    """The proposed fix (leader_reelection=reset_on_epoch_gap): broker 1 goes from leading
    epoch 1 to leading epoch 3, so it missed epoch 2 and forgets what it knew of its followers;
    under Kafka's rule (keep) the same re-election keeps follower 3's LEO and broker epoch."""
    kafka = Config(rf=3, minisr=1, max_fences=3, max_leader_elections=1)
    fix = Config(rf=3, minisr=1, max_fences=3, max_leader_elections=1, protocol=FIX)
    s = initial_state(kafka.rf)
    s = replace(s, controller=replace(s.controller, replicas=(2, 1, 3)))  # 2 preferred, 1 leads
    s = play(kafka, Produce(1, 1), Fetch(2, 1), Fetch(3, 1), Fetch(2, 1), Fetch(3, 1), state=s)
    moves = (ElectLeaders(2), ControllerFenceBroker(2), MetadataUpdate(1))
    gap = play(fix, *moves, state=s).broker(1)
    assert (gap.epoch, gap.views, gap.vbepochs) == (3, (UNKNOWN,) * 3, (0,) * 3)
    kept = play(kafka, *moves, state=s).broker(1)
    assert (kept.epoch, kept.views, kept.vbepochs) == (3, (UNKNOWN, UNKNOWN, 1), (0, 1, 1))
