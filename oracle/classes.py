"""Symmetry classes of the reachable states, counted by brute force after the search.

Brokers differ only in their ids. The assignment (Controller.replicas) is part of the state
and is relabelled with everything else, so the model's symmetry group is every permutation
of the N broker ids, the brokers outside the assignment (--brokers above --rf) included:
not only the rf! orders of the replicas. The fast engines reduce by a clever canonical form
(spec/symmetry.py, canonical: replicas numbered by their place in the assignment, then the
outsiders in their least order); the oracle uses none of it. It applies all N! relabellings
(spec/symmetry.py's relabel, which says what a relabelling of each record is) and compares
the results as whole states.

Two numbers come out. `classes`: how many orbits the reachable states fall into, counted by
marking each orbit once it is met (the same count as distinct least keys, canonical() below,
at a fraction of the cost). `open_orbits`: reachable states some relabelling of which was
never reached. For a model that is symmetric, as the reduction assumes, that is 0 on a
finished search; otherwise a step treats brokers differently and the reduced count is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import permutations

from kafkamc.spec.state import State
from kafkamc.spec.symmetry import relabel


def group(n: int) -> list[tuple[int, ...]]:
    """Every permutation of broker ids 1..n, as new id per old id (index b - 1)."""
    return list(permutations(range(1, n + 1)))


def orbit(state: State, perms: list[tuple[int, ...]]) -> set[State]:
    return {relabel(state, p) for p in perms}


def key(state: State) -> str:
    """A total order on states of our own: the records' repr names every field and value."""
    return repr(state)


def canonical(state: State, perms: list[tuple[int, ...]]) -> State:
    """The relabelling with the least key: equal for two states exactly when they share an orbit."""
    return min((relabel(state, p) for p in perms), key=key)


@dataclass(frozen=True)
class Classes:
    classes: int
    open_orbits: int  # reachable states with a relabelling that was not reached


def count(states: Iterable[State], reachable, n_brokers: int) -> Classes:
    """Orbits of `states` under every broker relabelling; `reachable` answers membership."""
    perms = group(n_brokers)
    seen: set[State] = set()
    classes = open_orbits = 0
    for s in states:
        if s in seen:
            continue
        members = orbit(s, perms)
        seen |= members
        classes += 1
        missing = sum(1 for m in members if m not in reachable)
        if missing:
            open_orbits += len(members) - missing
    return Classes(classes, open_orbits)
