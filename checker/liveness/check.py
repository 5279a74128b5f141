"""Liveness checking: the reachable state graph (checker/liveness/graph.py), then a lasso per
obligation where one exists (checker/liveness/fairness.py), replayed into a counterexample.

The graph is built here, breadth-first, by a second search (build_graph), unless the
safety search recorded it on the way (checker/liveness/graph.py, Recording): the reference engine,
Spark, and a graph under another configuration than the safety search's are built here.

Symmetry: with the replica set fixed (no broker outside it), every state the reduced
search expands is numbered in assignment order, so its successors are canonical already
and the quotient graph is the concrete graph from that initial state, labels and all:
the check is exact. With a broker pool, relabelling can change along a cycle, so the
check turns symmetry off (`symmetry_for_liveness`).
"""

from __future__ import annotations

import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace

from kafkamc.checker.engines.search import Limits, Result, Violation, progress_stats, replay_path
from kafkamc.checker.liveness.fairness import find_lasso
from kafkamc.checker.liveness.graph import Graph, fairness_classes
from kafkamc.invariants.liveness import FAIRNESS, LivenessSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model


def symmetry_for_liveness(cfg: Config) -> Config:
    """The configuration the liveness graph is built under: symmetry off with a broker pool."""
    if cfg.symmetry and len(cfg.brokers) > cfg.rf:
        return dc_replace(cfg, symmetry=False)
    return cfg


def build_graph(model, suite: LivenessSuite, limits: Limits = Limits(), progress=None) -> tuple[Graph, str | None]:
    """Every reachable state and every transition; the reason the build stopped early, if it did."""
    start = time.monotonic()
    fp_of = model.fingerprint
    expand = model.expand
    bits = suite.bits
    classes_of = fairness_classes(model)
    ids: dict = {}
    pending: list = []  # node -> state, until it is expanded
    initial = []
    for i, s in enumerate(model.initial_states()):
        fp = fp_of(s)
        if fp not in ids:
            ids[fp] = len(pending)
            initial.append((len(pending), i))
            pending.append(s)
    g = Graph(array("Q", [0]), array("I"), array("I"), [], initial, [], bytearray())
    offsets, targets, labels, preds = g.offsets, g.targets, g.labels, g.preds
    label_of: dict = {}
    depth = array("H", [0] * len(pending))
    stop = None
    v = 0
    try:
        while v < len(pending):
            state = pending[v]
            pending[v] = None
            preds.append(bits(state))
            d = depth[v] + 1
            for action, nxt, fp in expand(state):
                t = ids.get(fp)
                if t is None:
                    t = ids[fp] = len(pending)
                    pending.append(nxt)
                    depth.append(d)
                targets.append(t)
                lab = label_of.get(action)
                if lab is None:
                    lab = label_of[action] = len(g.actions)
                    g.actions.append(action)
                    g.classes.append(classes_of[type(action)])
                labels.append(lab)
            offsets.append(len(targets))
            v += 1
            if v & 0x3FF == 0:
                now = time.monotonic() - start
                if progress is not None:
                    progress(progress_stats(len(pending), len(targets), len(pending) - v, depth[v - 1], now))
                if limits.time_limit is not None and now >= limits.time_limit:
                    stop = f"time limit {limits.time_limit:g}s"
                    break
            if limits.max_states is not None and len(pending) >= limits.max_states and v < len(pending):
                stop = f"max states {limits.max_states}"
                break
    except KeyboardInterrupt:
        stop = "interrupted"
    g.depth = max(depth) if depth else 0
    return g, stop


def coverage(g: Graph) -> Counter:
    """Transitions per action type name, as the safety search reports them."""
    out: Counter = Counter()
    for label, n in Counter(g.labels).items():
        out[type(g.actions[label]).__name__] += n
    return out


@dataclass
class LivenessReport:
    result: Result  # the graph's size and time; violation: the lasso, kind "liveness"
    properties: list  # names checked
    verdicts: dict = field(default_factory=dict)  # property -> "holds" | "violated"
    edges: int = 0
    graph_bytes: int = 0
    symmetry: bool = True
    analysis_s: float = 0.0
    recorded: bool = False  # the safety search recorded the graph (checker/liveness/graph.py)
    config: Config | None = None  # the configuration the graph was built under

    def merged(self, safety: Result, replace_counts: bool = False) -> Result:
        """The safety pass's result with this check's verdict, violation and stop reason (or,
        with no safety pass, this check's own result)."""
        if replace_counts:
            return self.result
        safety.verdict = self.result.verdict
        safety.violation = self.result.violation
        if self.result.stop_reason is not None:
            safety.stop_reason = "liveness graph: " + self.result.stop_reason
        return safety

    def to_dict(self) -> dict:
        r = self.result
        return {
            "properties": self.properties,
            "verdicts": self.verdicts,
            "verdict": r.verdict,
            "states": r.distinct_states,
            "edges": self.edges,
            "elapsed_s": round(r.elapsed_s, 3),
            "analysis_s": round(self.analysis_s, 3),
            "graph_bytes": self.graph_bytes,
            "symmetry": self.symmetry,
            "graph": "recorded by the search" if self.recorded else "built after the search",
            "stop_reason": r.stop_reason,
            "fairness": FAIRNESS,
        }


class ReferenceGraph:
    """The spec's Model as build_graph needs it, with the canonical state itself as its key (no
    fingerprint, no cache): the oracle the fast graph is tested against."""

    def __init__(self, config: Config):
        self.spec = Model(config)
        self.config = self.spec.config

    def initial_states(self) -> list:
        return self.spec.initial_states()

    def fingerprint(self, state):
        return self.spec.canonical(state)

    def expand(self, state):
        for action, nxt in self.spec.successors(state):
            yield action, nxt, self.spec.canonical(nxt)

    def successors(self, state):
        return self.spec.successors(state)


def check_liveness(
    model, suite: LivenessSuite, limits: Limits = Limits(), progress=None, recording=None
) -> LivenessReport:
    """Build the graph (unless the safety search over `model` recorded it: a checker/liveness/graph.py
    Recording), then look for a lasso per obligation, properties in declaration order; stops at
    the first property violated."""
    start = time.monotonic()
    graph = None if recording is None else recording.graph(model)
    g, stop = (graph, None) if graph is not None else build_graph(model, suite, limits, progress)
    built = time.monotonic()
    report = LivenessReport(
        Result("holds", "bfs", g.nodes, g.edges, g.depth, 0.0, stop),
        suite.names,
        edges=g.edges,
        graph_bytes=g.nbytes,
        symmetry=model.config.symmetry,
        recorded=graph is not None,
    )
    report.result.coverage = coverage(g)
    if stop is not None:
        report.result.verdict = "incomplete"
    else:
        try:
            _analyse(model, g, suite, report)
        except KeyboardInterrupt:  # what was decided so far is kept; the verdict is incomplete
            report.result.verdict, report.result.stop_reason = "incomplete", "interrupted"
    report.analysis_s = time.monotonic() - built
    report.result.elapsed_s = time.monotonic() - start
    report.result.visited_bytes = g.nbytes
    return report


def _analyse(model, g: Graph, suite: LivenessSuite, report: LivenessReport) -> None:
    """A lasso per obligation, properties in declaration order, up to the first violated."""
    for k, (prop, _) in enumerate(suite.obligations):
        if report.verdicts.get(prop.name) == "violated":
            continue
        lasso = find_lasso(g, k, prop.form)
        if lasso is None:
            report.verdicts.setdefault(prop.name, "holds")
            continue
        report.verdicts[prop.name] = "violated"
        trace = replay_path(model, lasso.init_index, lasso.stem + lasso.cycle)
        report.result.violation = Violation(prop.name, "liveness", trace, loop=len(lasso.stem))
        report.result.verdict = "violated"
        break
