"""The liveness graph: every reachable state and every transition, in flat arrays.

For node v its out-edges are offsets[v] to offsets[v + 1] in `targets` (the successor's
node) and `labels` (the action taken, interned); an edge's position in that range is the
successor's index in the model's order, so a path replays like any counterexample. Each
node keeps its predicate bits (invariants/liveness.py). No Python object per edge. Node
ids are breadth-first order; labels are numbered in order of first appearance.

Built on its own (liveness.build_graph), the graph costs a second search that builds every
successor: 31 s at the default bounds, where the safety search took 14. That search's fused
loop already computes the fingerprint of every transition, screened or not, and hands each
to `edge` (FastSuccessors.transitions): a GraphPart keeps them, with each expanded state's
fingerprint and predicate bits, and `assemble` numbers nodes and labels as build_graph
does (breadth-first order is path-key order: checker/store/keys.py). The Graph, and so every
lasso found on it, is the same whichever engine recorded it (tests/test_graph.py compares
them array for array).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

WEAK, STRONG, NONE, FAULT = 0, 1, 2, 3
_CLASS = {"weak": WEAK, "strong": STRONG, "none": NONE, "fault": FAULT}


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
    alone: bytearray | None = None  # per node: 2 unknown, else whether it is fair as a component alone

    @property
    def nodes(self) -> int:
        return len(self.offsets) - 1

    @property
    def edges(self) -> int:
        return len(self.targets)

    @property
    def nbytes(self) -> int:
        return sum(a.itemsize * len(a) for a in (self.offsets, self.targets, self.labels)) + 8 * len(self.preds)


class GraphPart:
    """What one process recorded: per expanded state, in expansion order, its fingerprint,
    predicate bits, path key (workers: their parts are merged by key) and where its edges
    start; per edge, the target's fingerprint and the action, numbered in this part."""

    SEAL_EVERY = 1 << 20  # edges whose actions are held as objects before they are numbered

    def __init__(self, bits):
        self.bits = bits  # LivenessSuite.bits; not pickled (a worker sends its part home)
        self.fps = array("Q")
        self.preds: list = []
        self.keys: list = []
        self.starts = array("Q")
        self.targets = array("Q")
        self.labels = array("I")
        self.actions: list = []  # label -> action
        self._label: dict = {}
        self._pending: list = []  # the newest edges' actions, not numbered yet
        # What the search's fused loop calls per transition: two appends, no Python call.
        self.edge = (self.targets.append, self._pending.append)

    def __getstate__(self) -> dict:
        self.seal()
        return {k: v for k, v in self.__dict__.items() if k not in ("bits", "edge")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, bits=None, edge=(state["targets"].append, state["_pending"].append))

    def node(self, fp: int, state, key: bytes | None = None) -> None:
        """A state about to be expanded; its transitions' edges follow."""
        if len(self._pending) >= self.SEAL_EVERY:
            self.seal()
        self.fps.append(fp)
        self.preds.append(self.bits(state))
        self.starts.append(len(self.targets))
        if key is not None:
            self.keys.append(key)

    def seal(self) -> None:
        """Number the pending edges' actions. Equal actions are often one object (the fast
        path caches them): they are told apart by identity first, which hashes no action twice."""
        pending = self._pending
        by_id = {id(a): a for a in pending}
        label_of = self._label
        number = {}
        for i, a in by_id.items():
            label = label_of.get(a)
            if label is None:
                label = label_of[a] = len(self.actions)
                self.actions.append(a)
            number[i] = label
        self.labels.extend(map(number.__getitem__, map(id, pending)))
        pending.clear()

    def span(self, i: int) -> tuple[int, int]:
        """Where node i's edges start and end in targets and labels."""
        end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.targets)
        return self.starts[i], end


class Recording:
    """A request to a search (explore, explore_workers) to record the liveness graph of a
    LivenessSuite's predicates, and what it recorded: the parts, the initial states as
    (fingerprint, index among the model's initial states), distinct, in order, and the depth."""

    def __init__(self, suite):
        self.suite = suite
        self.bits = suite.bits
        self.parts: list[GraphPart] = []
        self.initial: list[tuple[int, int]] = []
        self.depth = 0

    def part(self) -> GraphPart:
        part = GraphPart(self.bits)
        self.parts.append(part)
        return part

    def graph(self, model) -> Graph | None:
        """The Graph, or None when a state some edge leads to was never expanded (the search
        stopped early)."""
        return assemble(self.parts, self.initial, self.depth, fairness_classes(model))


def _order(parts: list[GraphPart]) -> list[tuple[int, int]]:
    """(part, position) of every node, in breadth-first order: one part is in it already;
    workers' parts merge by path key (shorter first: one level's keys share a length)."""
    if len(parts) == 1:
        return [(0, i) for i in range(len(parts[0].fps))]
    keyed = [(len(k), k, w, i) for w, p in enumerate(parts) for i, k in enumerate(p.keys)]
    keyed.sort()
    return [(w, i) for _, _, w, i in keyed]


def assemble(parts: list[GraphPart], initial: list, depth: int, classes_of: dict) -> Graph | None:
    for p in parts:
        p.seal()
    order = _order(parts)
    ids = {parts[w].fps[i]: node for node, (w, i) in enumerate(order)}
    if len(ids) != len(order):
        raise AssertionError("a state was expanded twice while the liveness graph was recorded")
    # Actions equal across parts share one number; then numbers go by first appearance.
    shared: dict = {}
    local = [[shared.setdefault(a, len(shared)) for a in p.actions] for p in parts]
    offsets, targets, labels = array("Q", [0]), array("I"), array("I")
    preds = []
    lookup = ids.__getitem__
    try:
        if len(parts) == 1:
            p = parts[0]
            targets.extend(map(lookup, p.targets))
            labels.extend(map(local[0].__getitem__, p.labels))
            offsets.extend(p.starts[1:])
            offsets.append(len(p.targets))
            preds = p.preds
        else:
            for w, i in order:
                p = parts[w]
                a, b = p.span(i)
                targets.extend(map(lookup, p.targets[a:b]))
                labels.extend(map(local[w].__getitem__, p.labels[a:b]))
                offsets.append(len(targets))
                preds.append(p.preds[i])
    except KeyError:
        return None
    first = {old: new for new, old in enumerate(dict.fromkeys(labels))}
    by_number = {n: a for a, n in shared.items()}
    actions = [by_number[old] for old in first]
    labels = array("I", map(first.__getitem__, labels))
    classes = bytearray(classes_of[type(a)] for a in actions)
    nodes = [(ids[fp], index) for fp, index in initial]
    return Graph(offsets, targets, labels, preds, nodes, actions, classes, depth)
