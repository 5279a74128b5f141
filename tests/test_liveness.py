"""Liveness: the graph, fair components, lassos (exact paths), the reference graph, the CLI.

The unavailable configuration (ELR on, unclean off, the only eligible replica down while
another broker is up), the available one (unclean on), and two bugs from Kafka's history
(KAFKA-10706 and KAFKA-1546's rule) are pinned here with their lassos.
"""

from __future__ import annotations

import json
from array import array

import networkx as nx
import pytest
from helpers import run_kafkamc
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.liveness.check import ReferenceGraph, build_graph, check_liveness, symmetry_for_liveness
from kafkamc.checker.liveness.fairness import components, fair_components
from kafkamc.checker.liveness.graph import FAULT, STRONG, WEAK, Graph
from kafkamc.invariants.lasso import lasso_problem
from kafkamc.invariants.liveness import CATALOG, LivenessSuite
from kafkamc.spec.config import Config
from kafkamc.spec.next import FAIRNESS, NEXT, Action, describe
from kafkamc.spec.protocol import PRESETS

SMALL = dict(rf=2, minisr=1, max_records=1)
PROMISES = [p.name for p in CATALOG if p.tier == "promise"]

# ELR on, unclean off: follower 2 stalls and is shrunk away, leader 1 (the last ISR member)
# crashes for good and is fenced into the ELR; broker 2 is up but not eligible, so the
# partition stays offline: a state where no fair step is enabled, forever.
ELR_OFFLINE = [
    "ReplicaStall(follower=2)",
    "AlterPartition(leader=1, isr=(1,))",
    "BrokerCrash(broker=1, keep=0)",
    "BrokerSessionTimeout(broker=1)",
    "MetadataUpdate(broker=2)",
]

# KAFKA-10706 (before 2.8.0): broker 2 led epoch 2 without appending, so its cache ends with
# epoch 2 at its log end; truncating at the log end kept it, and every fetch names epoch 2,
# diverges and truncates to the same place: the follower never rejoins the ISR.
KAFKA_10706 = [
    "Produce(leader=1, record=1)",
    "ControllerFenceBroker(broker=1)",
    "BrokerHeartbeat(broker=1)",
    "Fetch(follower=2, leader=1)",
    "MetadataUpdate(broker=1)",
    "MetadataUpdate(broker=2)",
    "Fetch(follower=1, leader=2)",
    "AlterPartition(leader=2, isr=(1, 2))",
    "BrokerCrash(broker=2, keep=1)",
    "BrokerSessionTimeout(broker=2)",
    "BrokerRestart(broker=2)",
    "MetadataUpdate(broker=1)",  # issue 29: the new leader learns 2's unfencing with it
    "Fetch(follower=2, leader=1)",
]


def _check(names=None, reference=False, **kw):
    cfg = symmetry_for_liveness(Config(**kw).validated())
    model = ReferenceGraph(cfg) if reference else FastModel(cfg)
    return cfg, check_liveness(model, LivenessSuite(cfg, names))


def _actions(violation) -> list[str]:
    return [describe(a) for a, _ in violation.trace[1:]]


# ------------------------------------------------------------------ fairness on toy graphs


def _toy(edges: dict, classes: dict, n: int) -> Graph:
    """A hand-made graph: edges {node: [(target, label), ...]}, classes {label: class}."""
    offsets, targets, labels = array("Q", [0]), array("I"), array("I")
    for v in range(n):
        for t, lab in edges.get(v, []):
            targets.append(t)
            labels.append(lab)
        offsets.append(len(targets))
    cls = bytearray(classes[i] for i in range(len(classes)))
    return Graph(offsets, targets, labels, [0] * n, [(0, 0)], list(range(len(classes))), cls)


def test_weak_fairness_rejects_a_cycle_that_starves_an_action_enabled_throughout():
    # 0 <-> 1 by label 0; label 1 (weak) is enabled in both and leaves to 2.
    g = _toy({0: [(1, 0), (2, 1)], 1: [(0, 0), (2, 1)]}, {0: WEAK, 1: WEAK}, 3)
    assert fair_components(g, bytearray([1, 1, 0])) == []
    # Enabled in state 0 only: a cycle visiting 1 is fair.
    g = _toy({0: [(1, 0), (2, 1)], 1: [(0, 0)]}, {0: WEAK, 1: WEAK}, 3)
    assert fair_components(g, bytearray([1, 1, 0])) == [{0, 1}]


def test_strong_fairness_removes_the_states_where_a_starved_action_is_enabled():
    # 0 <-> 1 <-> 2 by weak label 0; strong label 1 is enabled in 0 only and leaves. The fair
    # part is {1, 2}: a behaviour that stops visiting 0.
    e = {0: [(1, 0), (3, 1)], 1: [(0, 0), (2, 0)], 2: [(1, 0)]}
    g = _toy(e, {0: WEAK, 1: STRONG}, 4)
    assert fair_components(g, bytearray([1, 1, 1, 0])) == [{1, 2}]


def test_a_state_with_no_fair_step_stutters_and_a_fault_closes_no_cycle():
    g = _toy({0: [(1, 0)], 1: [(0, 1)]}, {0: WEAK, 1: FAULT}, 2)
    # No cycle without the fault: 0 has a weak step enabled (unfair to stay), 1 has none.
    assert fair_components(g, bytearray([1, 1])) == [{1}]


def test_a_state_alone_is_fair_when_its_self_loops_take_every_fair_action_enabled():
    # 0: a weak self-loop, nothing else enabled; 1: a strong self-loop, and a weak step out.
    g = _toy({0: [(0, 0)], 1: [(1, 1), (2, 0)]}, {0: WEAK, 1: STRONG}, 3)
    assert fair_components(g, bytearray([1, 1, 0])) == [{0}]
    # Both self-loops, and the weak step out of 1 gone: both are fair alone.
    g = _toy({0: [(0, 0)], 1: [(1, 1)]}, {0: WEAK, 1: STRONG}, 2)
    assert sorted(map(sorted, fair_components(g, bytearray([1, 1])))) == [[0], [1]]


def test_tarjan_agrees_with_networkx_on_a_real_graph():
    cfg = Config(**SMALL, max_fences=1).validated()
    suite = LivenessSuite(cfg)
    g, stop = build_graph(FastModel(cfg), suite)
    assert stop is None
    inside = bytearray(1 if p & 2 == 0 else 0 for p in g.preds)  # EventuallyLeader's goal false
    d = nx.DiGraph()
    d.add_nodes_from(v for v in range(g.nodes) if inside[v])
    for v in range(g.nodes):
        for e in range(g.offsets[v], g.offsets[v + 1]):
            if inside[v] and inside[g.targets[e]] and g.classes[g.labels[e]] != FAULT:
                d.add_edge(v, g.targets[e])
    ours = sorted(sorted(c) for c in components(g, inside))
    theirs = sorted(sorted(c) for c in nx.strongly_connected_components(d))
    assert ours == theirs and len(ours) > 1


# ------------------------------------------------------------------ engines and pinned results


@pytest.mark.parametrize("kw", [SMALL, dict(SMALL, max_fences=1), dict(SMALL, unclean=True, max_records=2)])
def test_the_fast_graph_equals_the_reference_graph(kw):
    _, fast = _check(PROMISES + ["EventuallyAvailable"], **kw)
    _, ref = _check(PROMISES + ["EventuallyAvailable"], reference=True, **kw)
    assert (fast.result.distinct_states, fast.edges) == (ref.result.distinct_states, ref.edges)
    assert fast.verdicts == ref.verdicts
    if ref.result.violation is not None:
        assert _actions(fast.result.violation) == _actions(ref.result.violation)


def test_every_promise_holds_on_a_small_newest_configuration_with_pinned_graph():
    _, r = _check(None, **SMALL)
    assert r.result.verdict == "holds"
    assert set(r.verdicts.values()) == {"holds"} and list(r.verdicts) == PROMISES
    # Issue 29 (rf 2, no shrink of two: the pending ISR kept on INVALID_UPDATE_VERSION, the
    # leader's own view of fencing): 1,533 -> 1,750 states, 3,962 -> 4,505 edges. Trace
    # validation (Kafka 4.1.1): a crashed follower may be dropped from the ISR by the leader's lag
    # check before its fence: 1,750 -> 1,945 states, 4,505 -> 4,994 edges.
    assert (r.result.distinct_states, r.edges) == (1945, 4994)


def test_symmetry_changes_no_verdict_and_a_broker_pool_turns_it_off():
    kw = dict(SMALL, max_fences=1)
    _, on = _check(PROMISES, **kw)
    _, off = _check(PROMISES, **kw, symmetry=False)
    assert on.verdicts == off.verdicts and off.result.distinct_states > on.result.distinct_states
    pooled = symmetry_for_liveness(Config(rf=2, minisr=1, max_records=1, broker_count=3).validated())
    assert pooled.symmetry is False


def test_elr_without_unclean_election_can_stay_offline_with_a_live_broker():
    cfg, r = _check(["EventuallyAvailable"], **SMALL)
    v = r.result.violation
    assert (r.result.verdict, v.kind, v.loop) == ("violated", "liveness", 5)
    assert _actions(v) == ELR_OFFLINE
    assert lasso_problem(cfg, "EventuallyAvailable", v.trace, v.loop) is None
    # KIP-966's own promise holds there: no ISR or ELR member is up.
    assert _check(["EventuallyLeader"], **SMALL)[1].result.verdict == "holds"


def test_unclean_election_keeps_the_partition_available():
    _, r = _check(["EventuallyAvailable"], **SMALL, unclean=True)
    assert r.result.verdict == "holds"


def test_kafka_10706_follower_never_rejoins_under_the_old_rule():
    old = PRESETS["4.1.0"].with_rules(epoch_cache_truncation="log_only")
    cfg, r = _check(["FollowerEventuallyInSync"], **SMALL, max_fences=1, protocol=old)
    v = r.result.violation
    assert (v.invariant, v.loop) == ("FollowerEventuallyInSync", 12)
    assert _actions(v) == KAFKA_10706
    assert v.trace[-1][1] == v.trace[12][1]
    assert lasso_problem(cfg, v.invariant, v.trace, v.loop) is None
    assert _check(["FollowerEventuallyInSync"], **SMALL, max_fences=1)[1].result.verdict == "holds"


def test_a_lasso_that_is_not_one_is_refused_with_the_reason():
    cfg, r = _check(
        ["FollowerEventuallyInSync"],
        **SMALL,
        max_fences=1,
        protocol=PRESETS["4.1.0"].with_rules(epoch_cache_truncation="log_only"),
    )
    v = r.result.violation
    assert "does not close" in lasso_problem(cfg, v.invariant, v.trace, 11)
    assert "outside" in lasso_problem(cfg, v.invariant, v.trace, 99)
    # A stutter at a state where the follower's fetch is enabled is not fair.
    assert "not fair" in lasso_problem(cfg, v.invariant, v.trace, len(v.trace) - 1)
    assert "does not violate" in lasso_problem(cfg, "EventuallyLeader", v.trace, v.loop)


def test_faults_are_never_fair_and_every_action_declares_its_fairness():
    classes = {a.name: a.fairness for a in NEXT}
    assert {classes[n] for n in ("BrokerCrash", "ControllerFenceBroker", "ReplicaStall")} == {"fault"}
    assert classes["AlterPartition"] == "strong" and classes["Fetch"] == "weak"
    assert set(classes.values()) <= {"weak", "strong", "none", "fault"} == set(FAIRNESS)
    # Issue 32: fairness has no default; an entry must state it, and a valid one.
    fetch = next(a for a in NEXT if a.name == "Fetch")
    with pytest.raises(TypeError):
        Action(fetch.type, fetch.candidates, fetch.step, wording=fetch.wording)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="fairness"):
        Action(fetch.type, fetch.candidates, fetch.step, "eventual", fetch.wording)


# ------------------------------------------------------------------ the command line


def test_check_liveness_json_and_exit_status(tmp_path):
    p = run_kafkamc("check", "--rf", "2", "--minisr", "2", "--max-records", "1", "--liveness", "--json", "--quiet")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["verdict"] == "holds" and s["liveness"]["verdicts"] == dict.fromkeys(PROMISES, "holds")
    # Issue 29: 2,075 -> 2,020 states, 5,422 -> 5,216 edges (rf 2: the pending ISR kept and the
    # leader's own view of fencing). Then 2,020 -> 2,231 states, 5,216 -> 5,753 edges: a crashed
    # follower may be dropped from the ISR by the leader's lag check before its fence (Kafka 4.1.1).
    assert (s["liveness"]["states"], s["liveness"]["edges"], s["liveness"]["symmetry"]) == (2231, 5753, True)
    out = tmp_path / "lasso.json"
    args = ["--rf", "2", "--minisr", "1", "--max-records", "1", "--invariant", "EventuallyAvailable"]
    p = run_kafkamc("check", *args, "--json", "--quiet", "--trace-out", out)
    assert p.returncode == 1, p.stderr
    v = json.loads(p.stdout)["violation"]
    assert (v["invariant"], v["kind"], v["length"], v["loop"], v["actions"]) == (
        "EventuallyAvailable",
        "liveness",
        5,
        5,
        ELR_OFFLINE,
    )
    p = run_kafkamc("trace", "replay", out)
    assert p.returncode == 0 and "may stay forever (no fair step is enabled)" in p.stdout
    data = json.loads(out.read_text())
    data["violation"]["loop"] = 2
    (tmp_path / "bad.json").write_text(json.dumps(data))
    p = run_kafkamc("trace", "replay", tmp_path / "bad.json")
    assert p.returncode == 1 and "the cycle does not close" in p.stdout
    data["violation"]["loop"] = "x"
    (tmp_path / "worse.json").write_text(json.dumps(data))
    p = run_kafkamc("trace", "replay", tmp_path / "worse.json")
    assert p.returncode == 2 and "violation.loop must be a step number" in p.stderr


def test_check_prints_the_lasso_shape_and_the_fairness(tmp_path):
    p = run_kafkamc(
        "check",
        "--rf",
        "2",
        "--minisr",
        "1",
        "--max-records",
        "1",
        "--invariant",
        "EventuallyAvailable",
        "--quiet",
        "--trace-out",
        tmp_path / "t.json",
    )
    assert p.returncode == 1
    assert "violated: EventuallyAvailable never happens: a lasso of 5 steps to a state that stays forever" in p.stdout
    assert "liveness: EventuallyAvailable violated" in p.stdout and "fairness: weak fairness" in p.stdout


@pytest.mark.slow
def test_the_tradeoff_table_shows_what_elr_buys_and_costs():
    p = run_kafkamc("tradeoff", "--json")
    assert p.returncode == 0, p.stderr
    cells = {
        (c["rf"], c["minisr"], c["elr"], c["unclean"]): (c["offline"], c["loses"])
        for c in json.loads(p.stdout)["cells"]
    }
    # (offline forever with a replica up, committed data lost); ELR off, then on; unclean off, then on.
    assert cells == {
        (2, 1, False, False): (True, True),
        (2, 1, False, True): (False, True),
        (2, 1, True, False): (True, True),
        (2, 1, True, True): (False, True),
        (2, 2, False, False): (True, True),
        (2, 2, False, True): (False, True),
        (2, 2, True, False): (True, False),  # KIP-966: durable, at the price of availability
        (2, 2, True, True): (False, True),
    }


# KAFKA-1546 (replica.lag.max.messages, before 0.9.0): with retention a producer may write
# forever; a follower that never stalls is dropped whenever it is two records behind, rejoins
# once it fetched back to the HW, and is dropped again: it never stays in sync.
KAFKA_1546 = dict(
    rf=2, minisr=1, max_records=2, log_retention=True, max_hard_crashes=0, max_clean_shutdowns=0, max_isr_shrinks=0
)


def test_kafka_1546_a_healthy_follower_is_dropped_again_and_again():
    old = PRESETS["4.1.0"].with_rules(isr_lag="messages")
    cfg, r = _check(["FollowerStaysInSync"], **KAFKA_1546, protocol=old)
    v = r.result.violation
    assert (v.invariant, v.loop, v.length) == ("FollowerStaysInSync", 4, 15)
    cycle = _actions(v)[v.loop :]
    assert "ReplicaStall(follower=2)" not in _actions(v)
    assert cycle.count("AlterPartition(leader=1, isr=(1,))") == 1 and "AlterPartition(leader=1, isr=(1, 2))" in cycle
    assert cycle.count("LogRetention(leader=1)") == 2 and cycle.count("Produce(leader=1, record=2)") == 2
    assert lasso_problem(cfg, v.invariant, v.trace, v.loop) is None
    # replica.lag.time.max.ms (0.9.0 on): the same producer, the same follower, stays in sync.
    assert _check(["FollowerStaysInSync"], **KAFKA_1546)[1].result.verdict == "holds"


def test_retention_renumbers_the_window_and_keeps_the_safety_invariants():
    from kafkamc.checker.engines.explorer import explore
    from kafkamc.invariants.suite import InvariantSuite

    cfg = Config(**dict(KAFKA_1546, minisr=2, max_isr_shrinks=1, max_hard_crashes=1)).validated()
    r = explore(FastModel(cfg), InvariantSuite(cfg))
    assert r.verdict == "holds" and r.coverage["LogRetention"] > 0
    without = explore(FastModel(Config(**dict(KAFKA_1546, minisr=2, max_isr_shrinks=1, log_retention=False))))
    assert "LogRetention" not in without.coverage


def test_sigterm_during_the_liveness_graph_gives_the_partial_summary(tmp_path):
    import signal
    import subprocess
    import time

    from helpers import EXE

    args = [EXE, "check", "--rf", "3", "--minisr", "2", "--invariant", "EventuallyLeader", "--quiet", "--json"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    time.sleep(4)  # inside the graph build (about 30 s in all)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    s = json.loads(out)
    assert (s["verdict"], s["stop_reason"], s["liveness"]["verdict"]) == ("incomplete", "interrupted", "incomplete")
    assert 0 < s["liveness"]["states"] < 541729  # the default check's count (tests/test_pinned.py)
