"""Shrinking a violating random walk (checker/simulation/simulate.py) before it is reported.

A walk is kept as moves: each step's action (a record of spec/, compared by its data) and
its rank among the successors with an equal action (a step may have several outcomes). A
candidate is the moves with some left out, replayed from the same initial state: a move
whose action is no longer enabled there (or has fewer outcomes) makes the candidate
invalid; a valid one that breaks the same invariant is cut right after the first step that
breaks any invariant, and replaces the walk. Chunks are left out as delta debugging does
(Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", TSE 2002),
halving down to single steps, until no single step can go: a 1-minimal path.
"""

from __future__ import annotations

from collections.abc import Iterable


def moves_of(model, init: int, path: Iterable[int]) -> tuple[list, list]:
    """([(action, rank), ...], [state before each move, then the last state]) along a path of successor indices."""
    state = model.initial_states()[init]
    moves, states = [], [state]
    for i in path:
        succ = list(model.successors(state))
        action, state = succ[i]
        rank = sum(1 for a, _ in succ[:i] if a == action)
        moves.append((action, rank))
        states.append(state)
    return moves, states


def first_break(suite, prev, state) -> list[str]:
    """Every invariant this step breaks, or [] when it breaks none (the search's quick checks first)."""
    if not suite.check_step(prev, state) and not suite.check_state(state):
        return []
    return suite.all_violated(state, prev)


def replay(model, suite, state, moves: list, target: str) -> list[int] | None:
    """Successor indices of the moves from `state`, up to the first step that breaks an
    invariant, when `target` is among those it breaks; None otherwise (a move not enabled,
    no break, or another invariant first)."""
    path = []
    for action, rank in moves:
        same = [(j, nxt) for j, (a, nxt) in enumerate(model.successors(state)) if a == action]
        if rank >= len(same):
            return None
        j, nxt = same[rank]
        path.append(j)
        broken = first_break(suite, state, nxt)
        if broken:
            return path if target in broken else None
        state = nxt
    return None


def shrink(model, suite, init: int, path: list[int], target: str) -> list[int]:
    """A sub-path of `path` (successor indices from initial state `init`) that still breaks
    `target` and from which no single step can be removed. The states before the part left
    out are those of the current path: only the rest is replayed."""
    path = list(path)
    moves, states = moves_of(model, init, path)
    n = 2
    while len(moves) > 1:
        size = -(-len(moves) // n)
        for start in range(0, len(moves), size):
            rest = replay(model, suite, states[start], moves[start + size :], target)
            if rest is not None:
                path = path[:start] + rest
                moves, states = moves_of(model, init, path)
                n = max(n - 1, 2)
                break
        else:
            if size == 1:
                break
            n = min(2 * n, len(moves))
    return list(path)
