"""Trace export (ITF, DOT, GraphML) and the whole-state-graph report, through the installed CLI.

The ITF files are read back with itf-py, a reader written independently of kafkamc.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import networkx as nx
import pytest
from itf_py import trace_from_json, value_from_json
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.state import members
from kafkamc.traces.itf import num
from kafkamc.traces.trace import format_action, load, to_jsonable

EXE = shutil.which("kafkamc", path=os.path.dirname(sys.executable)) or shutil.which("kafkamc")

TRACES = {
    # a 3-step AckedWriteDurability violation and a 10-step HighWatermarkMonotonic one
    "acks1": ("--acks", "1"),
    "unclean2": ("--rf", "3", "--minisr", "2", "--max-records", "1", "--max-hard-crashes", "2"),
}
SMALL_MODELS = {
    "rf1": ("--rf", "1", "--minisr", "1", "--max-hard-crashes", "0", "--max-clean-shutdowns", "1"),
    "rf2": (
        "--rf",
        "2",
        "--minisr",
        "2",
        "--max-records",
        "1",
        "--max-hard-crashes",
        "0",
        "--max-clean-shutdowns",
        "1",
    ),
}


def kafkamc(*args, cwd=None):
    assert EXE, "the kafkamc entry point is not installed"
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """name -> path of a real counterexample saved by `kafkamc check`."""
    d = tmp_path_factory.mktemp("traces")
    out = {}
    for name, flags in TRACES.items():
        path = d / f"{name}.json"
        p = kafkamc("check", *flags, "--quiet", "--trace-out", path)
        assert p.returncode == 1 and path.exists(), p.stderr
        out[name] = path
    return out


# ---------------------------------------------------------------- ITF


def _set(mask):
    return frozenset(members(mask))


def _check_state(got, action, state):
    """One ITF state, as itf-py decoded it, against the replayed model state."""
    c, gc = state.controller, got["controller"]
    assert (gc.leader, gc.epoch, gc.pepoch, gc.recovering) == (c.leader, c.epoch, c.pepoch, c.recovering)
    assert gc.isr == _set(c.isr) and gc.elr == _set(c.elr) and gc.lastelr == _set(c.lastelr)
    assert gc.registered == _set(c.registered)
    assert dict(gc.bepochs) == dict(enumerate(c.bepochs, 1))
    assert set(got["brokers"]) == set(range(1, len(state.brokers) + 1))
    for b, br in enumerate(state.brokers, 1):
        gb = got["brokers"][b]
        assert (gb.alive, gb.bepoch, gb.leader, gb.epoch, gb.pepoch) == (
            br.alive,
            br.bepoch,
            br.leader,
            br.epoch,
            br.pepoch,
        ), b
        assert gb.isr == _set(br.isr) and gb.pending == _set(br.pending)
        assert [(e.epoch, e.record) for e in gb.log] == list(br.log)
        assert (gb.hw, gb.leo, gb.start) == (br.hw, br.leo, br.start)
        assert [(e.epoch, e.start) for e in gb.cache] == list(br.cache)
        assert dict(gb.views) == dict(enumerate(br.views, 1))
        assert dict(gb.vbepochs) == dict(enumerate(br.vbepochs, 1))
        assert [(p.offset, p.record, p.down) for p in gb.purgatory] == list(br.purgatory)
        assert [(a.epoch, a.ok, a.isr, a.pepoch, a.error) for a in gb.alter] == (
            []
            if br.alter is None
            else [(br.alter.epoch, br.alter.ok, _set(br.alter.isr), br.alter.pepoch, br.alter.error)]
        )
        assert (gb.truncating, gb.stalled, gb.clean) == (br.truncating, br.stalled, br.clean)
    g, gg = state.ghost, got["ghost"]
    assert gg.acked == _set(g.acked) and list(gg.committed) == list(g.committed)
    assert (gg.hw_seen, gg.acked_down) == (g.hw_seen, g.acked_down)
    # ITF gives the budget as one count per bound Next declares, zeros included.
    assert got["budget"]._asdict() == {b.name: state.budget.of(b.name) for b in BOUNDS}
    ga = got["action"]._asdict()
    if action is None:
        assert ga == {"type": "Init"}
    else:
        want = {k: v for k, v in to_jsonable(action).items() if v is not None}
        if "isr" in want:
            want["isr"] = frozenset(want["isr"])
        assert ga == {"type": type(action).__name__, **want}


@pytest.mark.parametrize("name", TRACES)
def test_itf_round_trip_through_itf_py(traces, tmp_path, name):
    out = tmp_path / "t.itf.json"
    p = kafkamc("trace", "itf", traces[name], "-o", out)
    assert p.returncode == 0, p.stderr
    trace = load(traces[name])
    itf = trace_from_json(json.loads(out.read_text()))
    assert itf.meta["format"] == "ITF"
    assert itf.meta["invariant"] == trace.invariant and itf.meta["length"] == trace.length
    assert Config.from_dict(itf.meta["config"], BOUNDS) == trace.config
    assert itf.vars == ["controller", "brokers", "ghost", "budget", "action"]
    assert len(itf.states) == len(trace.steps)
    for i, (got, (action, state)) in enumerate(zip(itf.states, trace.steps)):
        assert got.meta == {"index": i}
        assert set(got.values) == set(itf.vars)
        _check_state(got.values, action, state)


def test_itf_to_stdout_matches_file(traces, tmp_path):
    out = tmp_path / "t.itf.json"
    assert kafkamc("trace", "itf", traces["acks1"], "-o", out).returncode == 0
    p = kafkamc("trace", "itf", traces["acks1"])
    assert p.returncode == 0 and json.loads(p.stdout) == json.loads(out.read_text())


def test_itf_integers_beyond_the_safe_range_are_bigints():
    assert num(7) == 7 and num(-(2**53 - 1)) == -(2**53 - 1)
    assert num(2**53) == {"#bigint": str(2**53)}
    assert value_from_json(num(-(2**64))) == -(2**64)
    with pytest.raises(TypeError):
        num(True)


# ---------------------------------------------------------------- DOT and GraphML

NODE = re.compile(r'^\s*"([^"]+)" \[label="(.*?)"[,\]]')
EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)" \[label="(.*)"\];$')


def parse_dot(text):
    lines = text.splitlines()
    assert lines[0].startswith("digraph") and lines[-1] == "}"
    nodes = [m.groups() for m in map(NODE.match, lines) if m]
    edges = [m.groups() for m in map(EDGE.match, lines) if m]
    return nodes, edges


@pytest.mark.parametrize("name", TRACES)
def test_trace_dot_and_graphml(traces, tmp_path, name):
    trace = load(traces[name])
    dot, graphml = tmp_path / "t.dot", tmp_path / "t.graphml"
    p = kafkamc("trace", "dot", traces[name], "-o", dot, "--graphml", graphml)
    assert p.returncode == 0, p.stderr
    nodes, edges = parse_dot(dot.read_text())
    assert [n for n, _ in nodes] == [str(i) for i in range(len(trace.steps))]
    assert all(label.startswith(f"step {i}\\nleader ") for i, (_, label) in enumerate(nodes))
    assert edges == [(str(i - 1), str(i), format_action(a)) for i, (a, _) in enumerate(trace.steps) if i > 0]
    assert kafkamc("trace", "dot", traces[name]).stdout == dot.read_text()

    g = nx.read_graphml(graphml)
    assert g.number_of_nodes() == len(trace.steps) and g.number_of_edges() == trace.length
    assert g.nodes[str(trace.length)]["violated"] == trace.invariant
    assert [g.edges[str(i - 1), str(i)]["label"] for i in range(1, len(trace.steps))] == [
        format_action(a) for a, _ in trace.steps[1:]
    ]


# ---------------------------------------------------------------- the whole state graph


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_graph_counts_agree_with_the_explorer(tmp_path, name):
    dot, graphml = tmp_path / "g.dot", tmp_path / "g.graphml"
    p = kafkamc("graph", *SMALL_MODELS[name], "--json", "-o", dot, "--graphml", graphml)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    cfg = Config.from_dict(r["config"], BOUNDS)
    result = explore(FastModel(cfg))
    assert result.verdict == "holds"
    assert r["states"] == result.distinct_states
    # every successor generated is an action; every initial state (one per assignment order) is generated too
    assert r["transitions"] == result.states_generated - len(Model(cfg).initial_states())
    assert r["initial"] == 1 and r["depth"] == result.depth
    if name == "rf1":
        assert r["states"] == 15  # tests/test_pinned.py's count

    scc = r["scc"]
    assert 1 <= scc["largest"] <= r["states"] and scc["nontrivial"] <= scc["count"]
    # trivial components hold one state each, so the sizes add up to the states
    assert scc["in_nontrivial"] + (scc["count"] - scc["nontrivial"]) == r["states"]
    ends = r["deadlocks"]
    assert len(ends["examples"]) == min(3, ends["count"])
    for e in ends["examples"]:
        assert len(e["path"]) == e["depth"] and e["summary"].startswith("leader ")

    # the files say the same, read back with networkx
    g = nx.read_graphml(graphml)
    assert (g.number_of_nodes(), g.number_of_edges()) == (r["states"], r["edges"])
    assert sum(nx.get_edge_attributes(g, "count").values()) == r["transitions"]
    assert nx.number_strongly_connected_components(g) == scc["count"]
    assert sum(1 for n in g if g.out_degree(n) == 0) == ends["count"]
    nodes, edges = parse_dot(dot.read_text())
    assert (len(nodes), len(edges)) == (r["states"], r["edges"])


def test_graph_human_report():
    p = kafkamc("graph", *SMALL_MODELS["rf1"])
    assert p.returncode == 0, p.stderr
    # Still a tree; the crashed broker waits for BrokerSessionTimeout before it restarts: one
    # state more per point the crash can happen (0, 1 or 2 records) and a level deeper.
    assert "15 states, 14 edges (14 transitions), 1 initial, depth 5" in p.stdout
    assert "strongly connected components: 15" in p.stdout
    assert "states with no successor: 3, for example:" in p.stdout


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "args, message",
    [
        (("trace", "itf", "missing.json", "-o", "x.itf.json"), "no such trace file: missing.json"),
        (("trace", "dot", "missing.json"), "no such trace file: missing.json"),
        (("graph", "--max-states", "100"), "the state graph has more than 100 states"),
        (("graph", "--max-states", "0"), "--max-states must be positive"),
        (("graph", "--protocol", "9.9"), "unknown protocol preset '9.9'"),
        (("graph", "--rf", "0"), "--rf must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    p = kafkamc(*args, cwd=tmp_path)
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("kafkamc: error: ") and message in p.stderr
    assert not (tmp_path / "x.itf.json").exists()
