"""Fair cycles in the liveness graph (checker/liveness/graph.py): where a goal may never hold.

An obligation (trigger, goal, hold) is violated when a fair strongly connected component
of the subgraph where `hold` holds and `goal` does not is reachable from a trigger state
through states where `goal` does not hold. Fairness is weak fairness per action instance
(spec/next.py, Action.fairness): a component is fair when every weakly fair action enabled
in all of its states is taken by one of its own edges; fault steps never close a cycle.
For weak fairness the maximal components decide: a sub-component of an unfair component
is unfair too, so no recursion is needed. A state where no weakly fair action is enabled
may stutter forever: a one-state component with no edge is fair exactly then.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass

from kafkamc.checker.liveness.graph import FAULT, STRONG, WEAK, Graph


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
    if g.alone is None:
        g.alone = bytearray([2]) * g.nodes
    while work:
        roots = work.pop()
        for comp in components(g, inside, roots):
            if len(comp) == 1:  # most are: whether one is fair depends on its node only
                v = comp[0]
                if g.alone[v] == 2:
                    g.alone[v] = _fair_alone(g, v)
                if g.alone[v]:
                    out.append({v})
                continue
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


def _fair_alone(g: Graph, v: int) -> bool:
    """Whether node v alone is a fair component: every weakly or strongly fair action enabled
    in it is one of its self-loops (with none enabled, it may stutter)."""
    labels, classes, targets = g.labels, g.classes, g.targets
    edges = range(g.offsets[v], g.offsets[v + 1])
    need = {labels[e] for e in edges if classes[labels[e]] in (WEAK, STRONG)}
    return not need or need <= {labels[e] for e in edges if targets[e] == v}


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
