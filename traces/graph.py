"""Traces and whole state spaces as networkx graphs: build, summarise, write as DOT.

Node and edge attributes are only strings and ints, so networkx.write_graphml takes the
graphs as they are.
"""

from __future__ import annotations

from collections import deque

import networkx as nx
from kafkamc.spec.state import NO_LEADER, State, members
from kafkamc.traces.trace import Trace, format_action


class TooManyStates(Exception):
    """The reachable state graph is larger than the limit given to state_graph."""


def _ids(mask: int) -> str:
    return "{" + ",".join(str(b) for b in members(mask)) + "}"


def summary(state: State) -> str:
    """Two short lines: the controller's leader, epoch, ISR (and ELR); each broker's HW/LEO."""
    c = state.controller
    head = f"leader {c.leader if c.leader != NO_LEADER else '-'} e{c.epoch} isr {_ids(c.isr)}"
    if c.elr:
        head += f" elr {_ids(c.elr)}"
    cells = [f"{b}:{br.hw}/{br.leo}" if br.alive else f"{b}:down" for b, br in enumerate(state.brokers, 1)]
    return head + "\nhw/leo " + " ".join(cells)


def trace_graph(trace: Trace) -> nx.DiGraph:
    """One node per step (keyed by step number), one edge per action."""
    g = nx.DiGraph(kind="trace", invariant=trace.invariant or "")
    last = len(trace.steps) - 1
    for i, (action, state) in enumerate(trace.steps):
        attrs = {"step": i, "label": f"step {i}\n{summary(state)}", "initial": int(i == 0)}
        if i == last and trace.invariant:
            attrs["violated"] = trace.invariant
        g.add_node(i, **attrs)
        if i > 0:
            g.add_edge(i - 1, i, label=format_action(action), type=type(action).__name__, count=1)
    return g


def state_graph(model, max_states: int) -> nx.DiGraph:
    """Every reachable state (keyed by its fingerprint in hex) and every transition, by BFS.

    Actions from one state to the same successor share one edge: its label lists them and
    `count` says how many there are, so the sum of counts is the number of transitions.
    """
    g = nx.DiGraph(kind="states")
    queue: deque = deque()

    def visit(state: State, depth: int) -> str:
        fp = f"{model.fingerprint(state):016x}"  # the same name in DOT, GraphML and reports
        if fp not in g:
            if g.number_of_nodes() >= max_states:
                raise TooManyStates(f"the state graph has more than {max_states:,} states")
            g.add_node(fp, label=summary(state), depth=depth, initial=int(depth == 0))
            queue.append((state, fp, depth))
        return fp

    for s in model.initial_states():
        visit(s, 0)
    while queue:
        state, fp, depth = queue.popleft()
        for action, nxt in model.successors(state):
            to = visit(nxt, depth + 1)
            text = format_action(action)
            if g.has_edge(fp, to):
                e = g.edges[fp, to]
                e["label"] += "\n" + text
                e["count"] += 1
            else:
                g.add_edge(fp, to, label=text, count=1)
    return g


def _depth(graph: nx.DiGraph, node):
    attrs = graph.nodes[node]
    return attrs.get("depth", attrs.get("step"))


def path_to(graph: nx.DiGraph, node) -> list[str]:
    """The actions of a shortest path from an initial state to `node` (the first of merged ones)."""
    sources = [n for n, i in graph.nodes(data="initial", default=0) if i]
    try:
        _, path = nx.multi_source_dijkstra(graph, sources, target=node)
    except (nx.NetworkXNoPath, ValueError):
        return []
    return [graph.edges[u, v].get("label", "").split("\n")[0] for u, v in zip(path, path[1:])]


def report(graph: nx.DiGraph, examples: int = 3) -> dict:
    """Sizes, strongly connected components and states with no successor."""
    sccs = list(nx.strongly_connected_components(graph))
    # A single state is a cycle of its own only when it has a self-loop.
    nontrivial = [c for c in sccs if len(c) > 1 or graph.has_edge(next(iter(c)), next(iter(c)))]
    ends = [n for n in graph if graph.out_degree(n) == 0]
    ends.sort(key=lambda n: (_depth(graph, n) or 0, str(n)))
    depths = [_depth(graph, n) for n in graph]
    return {
        "states": graph.number_of_nodes(),
        "edges": graph.number_of_edges(),
        "transitions": sum(c for _, _, c in graph.edges(data="count", default=1)),
        "initial": sum(1 for _, i in graph.nodes(data="initial", default=0) if i),
        "depth": max(depths, default=None),
        "scc": {
            "count": len(sccs),
            "largest": max((len(c) for c in sccs), default=0),
            "nontrivial": len(nontrivial),
            "in_nontrivial": sum(len(c) for c in nontrivial),
        },
        "deadlocks": {
            "count": len(ends),
            "examples": [
                {
                    "state": str(n),
                    "depth": _depth(graph, n),
                    "summary": graph.nodes[n].get("label", ""),
                    "path": path_to(graph, n),
                }
                for n in ends[:examples]
            ],
        },
    }


def _quote(text) -> str:
    text = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def to_dot(graph: nx.DiGraph) -> str:
    """Graphviz DOT text, written by hand so that neither pydot nor pygraphviz is needed.

    One line per node and one per edge; initial states get a double border and a violating
    state a red one.
    """
    lines = [
        "digraph kafkamc {",
        '  node [shape=box, fontname="monospace"];',
        '  edge [fontname="monospace", fontsize=10];',
    ]
    for n, attrs in graph.nodes(data=True):
        extra = ""
        if attrs.get("initial"):
            extra += ", peripheries=2"
        if attrs.get("violated"):
            extra += ", color=red, penwidth=2"
        lines.append(f"  {_quote(n)} [label={_quote(attrs.get('label', n))}{extra}];")
    for u, v, attrs in graph.edges(data=True):
        lines.append(f"  {_quote(u)} -> {_quote(v)} [label={_quote(attrs.get('label', ''))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
