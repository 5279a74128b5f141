"""Liveness checking over the reachable state graph: fair cycles where a goal never holds.

The graph is built breadth-first (node ids are BFS order) and kept in flat arrays: for
node v its out-edges are offsets[v] to offsets[v + 1] in `targets` (the successor's node)
and `labels` (the action taken, interned); an edge's position in that range is the
successor's index in the model's order, so a path replays like any counterexample. Each
node keeps its predicate bits (invariants/liveness.py). No Python object per edge.

An obligation (trigger, goal, hold) is violated when a fair strongly connected component
of the subgraph where `hold` holds and `goal` does not is reachable from a trigger state
through states where `goal` does not hold. Fairness is weak fairness per action instance
(spec/next.py, Action.fairness): a component is fair when every weakly fair action enabled
in all of its states is taken by one of its own edges; fault steps never close a cycle.
For weak fairness the maximal components decide: a sub-component of an unfair component
is unfair too, so no recursion is needed. A state where no weakly fair action is enabled
may stutter forever: a one-state component with no edge is fair exactly then.

Symmetry: with the replica set fixed (no broker outside it), every state the reduced
search expands is numbered in assignment order, so its successors are canonical already
and the quotient graph is the concrete graph from that initial state, labels and all:
the check is exact. With a broker pool, relabelling can change along a cycle, so the
check turns symmetry off (`symmetry_for_liveness`).
"""

from __future__ import annotations

import time
from array import array
from collections import Counter, deque
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace

from kafkamc.checker.search import Limits, Result, Violation, progress_stats, replay_path
from kafkamc.invariants.liveness import FAIRNESS, LivenessSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model

WEAK, STRONG, NONE, FAULT = 0, 1, 2, 3
_CLASS = {"weak": WEAK, "strong": STRONG, "none": NONE, "fault": FAULT}


def symmetry_for_liveness(cfg: Config) -> Config:
    """The configuration the liveness graph is built under: symmetry off with a broker pool."""
    if cfg.symmetry and len(cfg.brokers) > cfg.rf:
        return dc_replace(cfg, symmetry=False)
    return cfg


def fairness_classes(model) -> dict:
    """Action type -> WEAK, NONE or FAULT, as Next declares it."""
    spec = getattr(model, "spec", model)
    return {a.type: _CLASS[a.fairness] for a in spec.actions}


@dataclass
class Graph:
    offsets: array  # 'Q': node v's edges are offsets[v] .. offsets[v + 1]
    targets: array  # 'I': each edge's target node
    labels: array  # 'I': each edge's action label
    preds: list  # per node: the predicate bits of every obligation
    initial: list  # (node, index among the model's initial states)
    actions: list  # label -> action
    classes: bytearray  # label -> WEAK, NONE or FAULT
    depth: int = 0

    @property
    def nodes(self) -> int:
        return len(self.offsets) - 1

    @property
    def edges(self) -> int:
        return len(self.targets)

    @property
    def nbytes(self) -> int:
        return sum(a.itemsize * len(a) for a in (self.offsets, self.targets, self.labels)) + 8 * len(self.preds)


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


def components(g: Graph, inside: bytearray, roots=None):
    """Strongly connected components of the subgraph of the nodes marked `inside` (all of them,
    or those among `roots`), over edges that are not faults: an iterative Tarjan, yielding each
    as a list of nodes."""
    offsets, targets, labels, classes = g.offsets, g.targets, g.labels, g.classes
    n = g.nodes
    index = array("i", [-1]) * n
    low = array("i", [0]) * n
    on_stack = bytearray(n)
    stack: list = []
    counter = 0
    for root in range(n) if roots is None else roots:
        if not inside[root] or index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        work = [[root, offsets[root]]]
        while work:
            frame = work[-1]
            v, e = frame
            end = offsets[v + 1]
            descended = False
            while e < end:
                w = targets[e]
                e += 1
                if not inside[w] or classes[labels[e - 1]] == FAULT:
                    continue
                if index[w] == -1:
                    frame[1] = e
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    work.append([w, offsets[w]])
                    descended = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            work.pop()
            if work and low[v] < low[work[-1][0]]:
                low[work[-1][0]] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    comp.append(w)
                    if w == v:
                        break
                yield comp


def enabled(g: Graph, v: int, cls: int) -> set:
    """The labels of class `cls` (WEAK or STRONG) enabled at node v."""
    labels, classes = g.labels, g.classes
    return {labels[e] for e in range(g.offsets[v], g.offsets[v + 1]) if classes[labels[e]] == cls}


def _taken(g: Graph, comp, member: set, cls: int) -> set:
    return {
        g.labels[e]
        for v in comp
        for e in range(g.offsets[v], g.offsets[v + 1])
        if g.targets[e] in member and g.classes[g.labels[e]] == cls
    }


def weakly_fair(g: Graph, comp: list, member: set) -> bool:
    """Whether every weakly fair action enabled in all of comp's states is taken inside it."""
    required: set | None = None
    for v in comp:
        en = enabled(g, v, WEAK)
        required = en if required is None else required & en
        if not required:
            return True
    return required is not None and required <= _taken(g, comp, member, WEAK)


def fair_components(g: Graph, inside: bytearray) -> list:
    """The fair components (as node sets) of the subgraph `inside`. A component that is weakly
    fair but leaves a strongly fair action enabled somewhere and never takes it loses the states
    where that action is enabled, and what remains is split again (Emerson-Lei)."""
    out = []
    work: list = [None]  # None: the whole subgraph; else a list of nodes still in play
    while work:
        roots = work.pop()
        for comp in components(g, inside, roots):
            member = set(comp)
            if not weakly_fair(g, comp, member):
                continue
            strong = set().union(*(enabled(g, v, STRONG) for v in comp))
            bad = strong - _taken(g, comp, member, STRONG)
            if not bad:
                out.append(member)
                continue
            keep = [v for v in comp if not enabled(g, v, STRONG) & bad]
            if keep:
                for v in comp:
                    inside[v] = 0
                for v in keep:
                    inside[v] = 1
                work.append(keep)
    return out


@dataclass
class Lasso:
    obligation: int
    init_index: int
    stem: list  # successor indices from the initial state to the cycle's first state
    cycle: list  # successor indices around the cycle (empty: the state stutters forever)


def find_lasso(g: Graph, k: int, form: str = "leads_to") -> Lasso | None:
    """A shortest-stem lasso violating obligation k, or None when it holds. For the "stays"
    form the cycle keeps `hold` and passes a state where the goal fails; the stem ends there."""
    trig, goal, hold = 1 << 3 * k, 1 << 3 * k + 1, 1 << 3 * k + 2
    preds = g.preds
    stays = form == "stays"
    inside = bytearray(1 if p & hold and (stays or not p & goal) else 0 for p in preds)
    fair = bytearray(g.nodes)
    comps: dict = {}  # node -> its fair component's nodes
    for member in fair_components(g, inside):
        if stays and all(preds[v] & goal for v in member):
            continue
        for v in member:
            if not (stays and preds[v] & goal):
                fair[v] = 1
            comps[v] = member
    if not comps:
        return None
    if stays:  # any state may start the obligation: the goal must hold for good
        goal = 0
    # Breadth-first over (node, phase): phase 1 once a trigger state was passed with the goal
    # false, after which only goal-false states may follow; the first fair node in phase 1 ends
    # the shortest stem.
    offsets, targets = g.offsets, g.targets
    parent: dict = {}
    queue: deque = deque()
    for node, i in g.initial:
        p = preds[node]
        key = (node, 1 if p & trig and not p & goal else 0)
        if key not in parent:
            parent[key] = (None, i)
            queue.append(key)
    end = None
    while queue:
        node, phase = key = queue.popleft()
        if phase and fair[node]:
            end = key
            break
        for e in range(offsets[node], offsets[node + 1]):
            w = targets[e]
            p = preds[w]
            if phase and p & goal:
                continue
            nxt = (w, 1 if phase or (p & trig and not p & goal) else 0)
            if nxt not in parent:
                parent[nxt] = (key, e - offsets[node])
                queue.append(nxt)
    if end is None:
        return None
    stem: list = []
    key = end
    while parent[key][0] is not None:
        prev, idx = parent[key]
        stem.append(idx)
        key = prev
    stem.reverse()
    return Lasso(k, parent[key][1], stem, fair_cycle(g, end[0], comps[end[0]]))


def fair_cycle(g: Graph, entry: int, member: set) -> list:
    """Successor indices of a cycle from `entry` back to it inside the component, taking every
    weakly fair action that stays enabled on the states it visits (or visiting a state where it
    is not); empty when the entry state may stutter."""
    offsets, targets, labels, classes = g.offsets, g.targets, g.labels, g.classes
    path: list = []
    cur = entry
    visited = {entry}
    taken: set = set()

    def walk(goal_test) -> None:
        """Shortest path inside the component from cur to an edge or node goal_test accepts."""
        nonlocal cur
        prev: dict = {cur: None}
        queue = deque([cur])
        while queue:
            v = queue.popleft()
            hit = goal_test(v)
            if hit is not None:
                steps = []
                if hit >= 0:  # an edge to take from v
                    steps.append((v, hit))
                u = v
                while prev[u] is not None:
                    steps.append(prev[u])
                    u = prev[u][0]
                for src, e in reversed(steps):
                    path.append(e - offsets[src])
                    if classes[labels[e]] in (WEAK, STRONG):
                        taken.add(labels[e])
                    cur = targets[e]
                    visited.add(cur)
                return
            for e in range(offsets[v], offsets[v + 1]):
                w = targets[e]
                if w in member and w not in prev and classes[labels[e]] != FAULT:
                    prev[w] = (v, e)
                    queue.append(w)
        raise AssertionError("a strongly connected component is not strongly connected")

    while True:
        required: set | None = None
        for v in visited:
            en = enabled(g, v, WEAK)
            required = en if required is None else required & en
        strong = set().union(*(enabled(g, v, STRONG) for v in visited))
        missing = ((required or set()) | strong) - taken
        if not missing:
            break
        a = min(missing)
        internal = any(
            labels[e] == a and targets[e] in member for v in member for e in range(offsets[v], offsets[v + 1])
        )
        if internal:
            walk(
                lambda v, a=a: next(
                    (e for e in range(offsets[v], offsets[v + 1]) if labels[e] == a and targets[e] in member), None
                )
            )
        else:
            walk(lambda v, a=a: -1 if a not in enabled(g, v, WEAK) else None)
    if path and cur != entry:
        walk(lambda v: -1 if v == entry else None)
    return path


@dataclass
class LivenessReport:
    result: Result  # the graph's size and time; violation: the lasso, kind "liveness"
    properties: list  # names checked
    verdicts: dict = field(default_factory=dict)  # property -> "holds" | "violated"
    edges: int = 0
    graph_bytes: int = 0
    symmetry: bool = True
    analysis_s: float = 0.0
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


def check_liveness(model, suite: LivenessSuite, limits: Limits = Limits(), progress=None) -> LivenessReport:
    """Build the graph, then look for a lasso per obligation, properties in declaration order;
    stops at the first property violated."""
    start = time.monotonic()
    g, stop = build_graph(model, suite, limits, progress)
    built = time.monotonic()
    report = LivenessReport(
        Result("holds", "bfs", g.nodes, g.edges, g.depth, 0.0, stop),
        suite.names,
        edges=g.edges,
        graph_bytes=g.nbytes,
        symmetry=model.config.symmetry,
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
