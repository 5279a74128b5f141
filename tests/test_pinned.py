"""Pinned distinct-state counts, depths and verdicts; BFS and DFS must agree on them.

If a change to the spec moves one of these numbers, the change must say why.
"""

from __future__ import annotations

import pytest
from helpers import bfs_until
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.traces.trace import format_action
from pins import DEFAULT_CHECK, UNCLEAN_SAMPLE

# `kafkamc check --rf 3 --minisr 2`, and the README's sample counterexample: the README quotes them,
# so they are pinned in tests/pins.py, which tests/test_readme.py compares with the README.
DEFAULT_STATES, DEFAULT_DEPTH = DEFAULT_CHECK["states"], DEFAULT_CHECK["depth"]

# (configuration, distinct states, BFS depth) for configurations where every invariant holds.
# Default bounds: two records, one hard crash (page cache lost), two ISR shrinks; protocol: newest.
# Issue 15 moved every count: a crashed broker stays registered until BrokerSessionTimeout (the
# others act meanwhile; a restart takes one step more), a fetch answer carries the HW from before
# the fetch (the follower learns it one fetch later), CheckpointHighWatermarks while a hard crash
# is left, and a re-elected leader keeps its ISR followers' positions. Consumers reading from a
# zombie (ghost committed and hw_seen take every broker serving reads) merge states that differed
# only in those ghosts once a fenced leader's HW is ahead of the new leader's: 28,795 -> 27,088.
# Issue 17's ProduceRetry (a timed-out acks=all request retried recomputes the HW) reaches
# states where a fenced or shutting-down joiner no longer holds the HW: 27,088 -> 27,475,
# 4,748 -> 4,802, 355,389 -> 355,437.
# Issue 29: a leader re-elected while it still led (a fenced zombie elected again) keeps its
# purgatory and acknowledges the waiting produce when the HW passes it: 27,475 -> 27,576.
# Issue 29's deviations moved them again. (1) A shrink drops any non-empty set of the stalled
# followers in one request, spending one shrink: both followers can leave together into the
# ELR, and a second stall and shrink follow (rf 3 only): 51,706 -> 95,871 (depth 24 -> 30), the
# default check 355,437 -> 712,508 (depth 29 -> 33). (4) INVALID_UPDATE_VERSION and
# FENCED_LEADER_EPOCH leave the leader pending until the metadata arrives, its maximal ISR
# holding the HW: 8,688 -> 8,982, 27,475 -> 26,368, 95,871 -> 98,392, 712,508 -> 730,302.
# (6) The leader's own view of fenced and shutting-down brokers, applied by MetadataUpdate (also
# when only registrations moved), read by its ISR proposals and its HW: a restarted follower
# neither rejoins nor holds the HW until the leader applies its unfencing: 3,666 -> 4,243,
# 8,982 -> 8,549, 4,802 -> 5,862, 26,368 -> 31,451, 98,392 -> 111,174, 730,302 -> 823,109.
# (2), (3) and (5) move none of these: with them alone (1, 4 and 6 switched off) every count
# here is as before.
# Those figures counted one shrink per request; the budget now counts the stalled followers
# dropped (a request dropping two spends two), which gives 51,706 -> 69,996 (depth 24) and the
# default check 355,437 -> 485,539 (depth 29 -> 30); RF 2 counts are the same either way. With
# the re-elected leader's purgatory (above): 31,451 -> 31,585.
# Trace validation against Kafka 4.1.1 (`kafkamc conform`): a crashed follower still in the
# controller's ISR may stall, so the leader's lag check (Partition.getOutOfSyncReplicas,
# Replica.isCaughtUp) may drop it from the ISR before the controller fences it: 4,243 -> 4,774,
# 8,549 -> 9,291, 5,862 -> 6,457, 69,996 -> 79,914, 31,585 -> 33,854, the default check
# 485,539 -> 541,729 (depths as before). None of these has a controlled shutdown, so the other
# fix (a follower's controlled shutdown may take the leader's path) moves none of them.
HOLDS = [
    (dict(rf=1, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1), 15, 5),
    (dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1), 4774, 22),
    (dict(rf=2, minisr=2), 9291, 22),
    (dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1), 6457, 22),
    pytest.param(dict(rf=3, minisr=2, max_records=1), 79914, 24, marks=pytest.mark.slow),
    pytest.param(
        dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_fences=1),
        33854,
        26,
        marks=pytest.mark.slow,
    ),
    pytest.param(dict(rf=3, minisr=2), DEFAULT_STATES, DEFAULT_DEPTH, marks=pytest.mark.slow),  # the default check
]

# (configuration, invariant, length of the shortest counterexample). Each crash in a path is
# followed by BrokerSessionTimeout, the controller's fence: one step per crash.
VIOLATED = [
    (UNCLEAN_SAMPLE["kw"], UNCLEAN_SAMPLE["invariant"], UNCLEAN_SAMPLE["length"]),
    (dict(rf=3, minisr=2, acks="1", max_records=1), "AckedWriteDurability", 4),
    # One copy, lost with the page cache: the last known leader comes back RECOVERING (KIP-966).
    (dict(rf=1, minisr=1), "HighWatermarkMonotonic", 4),
    # Both replicas lose their page cache: a correlated failure that min ISR 2 cannot cover.
    (dict(rf=2, minisr=2, max_hard_crashes=2), "HighWatermarkMonotonic", 9),
]

# The shortest counterexamples themselves (BFS picks the first in successor order), step by
# step as a trace prints them, for the configurations of VIOLATED in its order.
PATHS = [
    (
        VIOLATED[0][0],
        "NoCommittedDataLoss",
        "state",
        [
            # min ISR 1: the leader shrinks the ISR to itself, which commits record 1, then crashes
            # with it unflushed; once its session times out, the unclean election puts broker 2,
            # which never had it, in the ISR.
            "Produce(leader=1, record=1)",
            "ReplicaStall(follower=2)",
            "AlterPartition(leader=1, isr=(1,))",
            "HandleAlterPartitionResponse(leader=1)",
            "BrokerCrash(broker=1, keep=0)",
            "BrokerSessionTimeout(broker=1)",
        ],
    ),
    (
        VIOLATED[1][0],
        "AckedWriteDurability",
        "state",
        [
            # acks=1: acknowledged once in the leader's own log, lost with it; the session
            # timeout elects broker 2, which learns it from the metadata.
            "Produce(leader=1, record=1)",
            "BrokerCrash(broker=1, keep=0)",
            "BrokerSessionTimeout(broker=1)",
            "MetadataUpdate(broker=2)",
        ],
    ),
    (
        VIOLATED[2][0],
        "HighWatermarkMonotonic",
        "action",
        [
            # One copy: the HW consumers read goes back when the leader restarts without the record
            # (the restart waits for the session timeout's fence).
            "Produce(leader=1, record=1)",
            "BrokerCrash(broker=1, keep=0)",
            "BrokerSessionTimeout(broker=1)",
            "BrokerRestart(broker=1)",
        ],
    ),
    (
        VIOLATED[3][0],
        "HighWatermarkMonotonic",
        "action",
        [
            # The first fetch copies record 1, the second commits it at the leader (broker 2 would
            # learn the HW a fetch later); then each broker in turn crashes, is fenced when its
            # session times out, and restarts without the record: broker 2 last, RECOVERING.
            "Produce(leader=1, record=1)",
            "Fetch(follower=2, leader=1)",
            "Fetch(follower=2, leader=1)",
            "BrokerCrash(broker=1, keep=0)",
            "BrokerSessionTimeout(broker=1)",
            "BrokerRestart(broker=1)",
            "BrokerCrash(broker=2, keep=0)",
            "BrokerSessionTimeout(broker=2)",
            "BrokerRestart(broker=2)",
        ],
    ),
]


def _run(kw, strategy):
    cfg = Config(**kw)
    return explore(FastModel(cfg), InvariantSuite(cfg), strategy)


@pytest.mark.parametrize("kw,states,depth", HOLDS)
def test_holds_with_pinned_counts(kw, states, depth):
    bfs = _run(kw, "bfs")
    assert (bfs.verdict, bfs.distinct_states, bfs.depth) == ("holds", states, depth)
    dfs = _run(kw, "dfs")
    assert (dfs.verdict, dfs.distinct_states) == ("holds", states)
    assert dfs.depth >= depth


@pytest.mark.parametrize("kw,invariant,length", VIOLATED)
def test_violations_with_shortest_trace_length(kw, invariant, length):
    r = _run(kw, "bfs")
    assert r.verdict == "violated"
    assert (r.violation.invariant, r.violation.length) == (invariant, length)
    d = _run(kw, "dfs")
    assert d.verdict == "violated" and d.violation.length >= length


def test_paths_pin_the_configurations_they_name():
    assert [(kw, inv) for kw, inv, _ in VIOLATED] == [(kw, inv) for kw, inv, _kind, _ in PATHS]
    assert [length for _, _, length in VIOLATED] == [len(path) for *_, path in PATHS]


@pytest.mark.parametrize("kw,invariant,kind,path", PATHS)
def test_shortest_counterexample_paths(kw, invariant, kind, path):
    r = _run(kw, "bfs")
    v = r.violation
    assert (r.verdict, v.invariant, v.kind) == ("violated", invariant, kind)
    assert v.trace[0][0] is None
    assert [format_action(a) for a, _ in v.trace[1:]] == path


def test_default_bounds_make_the_interesting_things_happen():
    """The default run must elect, change the ISR, crash, restart and truncate."""
    cfg = Config(rf=3, minisr=2, max_records=1)
    r = explore(FastModel(cfg), InvariantSuite(cfg), "bfs")
    for action in (
        "Produce",
        "Fetch",
        "AlterPartition",
        "HandleAlterPartitionResponse",
        "MetadataUpdate",
        "BrokerCrash",
        "BrokerRestart",
    ):
        assert r.coverage[action] > 0, action


def test_truncation_after_election_reachable():
    """Reachability guard against a vacuous model: a follower truncates its log through Fetch."""

    def truncates(s, a, n):
        return type(a).__name__ == "Fetch" and n.broker(a.follower).leo < s.broker(a.follower).leo

    assert bfs_until(Config(rf=2, minisr=1), truncates) is not None


def test_zombie_leader_appends_with_fencing():
    """With a live broker fenced, the old leader keeps acting on stale metadata and takes a write."""

    def zombie_write(s, a, n):
        return type(a).__name__ == "Produce" and n is not s and n.broker(a.leader).epoch < n.controller.epoch

    assert bfs_until(Config(rf=2, minisr=1, max_records=1, max_fences=1), zombie_write) is not None


def test_stale_alter_partition_rejected():
    """A leader's AlterPartition sent on a stale partition or leader epoch is rejected by the controller."""

    def rejected(s, a, n):
        return (
            type(a).__name__ == "AlterPartition"
            and n.broker(a.leader).alter is not None
            and not n.broker(a.leader).alter.ok
        )

    assert bfs_until(Config(rf=2, minisr=1, max_records=1, max_fences=1), rejected) is not None
