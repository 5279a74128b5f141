"""Whether the spec treats broker ids as names only, checked as the search goes.

The symmetry reduction (spec/symmetry.py) counts one state per class of relabellings. It is
exact only if every step is equivariant: relabelling the brokers of a state and of an
action gives the relabelled successors. A spec edit that singles out a broker by its id
breaks that, and the reduced search would then miss states without a sign. So each time
the fast path runs a step function or a broker's candidates on a cache miss, it may also
run them on the state relabelled by a transposition of the action's broker with the next
one, and stop with a SymmetryError if they are not the relabelled ones.

Which misses are checked: the first ones of each action (and of each broker's candidates), then one in
EVERY. A change that singles out a broker shows on many states, so it is found within the
first misses; checking every miss would double what misses cost (the search spends about
half its time in them). `kafkamc check --verify` checks every state it samples in full.
"""

from __future__ import annotations

from dataclasses import fields

from kafkamc.spec import symmetry
from kafkamc.spec.state import State

FIRST, EVERY = 4, 256  # the misses checked: the first FIRST of each action, then one in EVERY


class FastPathError(Exception):
    """The fast path cannot follow this spec: what differed, at which step and state."""


class SymmetryError(FastPathError):
    pass


def transposition(b: int, n: int) -> tuple:
    """The permutation (as spec.symmetry takes it) that swaps broker b with the next one."""
    other = b % n + 1
    perm = list(range(1, n + 1))
    perm[b - 1], perm[other - 1] = other, b
    return tuple(perm)


def first_broker(action) -> int | None:
    for f in fields(action):
        v = getattr(action, f.name)
        if f.name in symmetry.BROKER_FIELDS and isinstance(v, int) and v > 0:
            return v
    return None


def check_step(model, state: State, action, successors) -> None:
    """Stop unless the step of `action` from the relabelled state gives the relabelled
    successors (as sets, before the ghost observes them). `successors`: what the spec's step
    gave from `state` (Model.unobserved_step)."""
    n = len(model.config.brokers)
    b = first_broker(action)
    if n < 2 or b is None:
        return
    perm = transposition(b, n)
    expected = {symmetry.relabel(x, perm) for x in successors}
    moved, relabelled = symmetry.relabel(state, perm), symmetry.relabel_action(action, perm)
    got = set(model.unobserved_step(moved, relabelled))
    if got != expected:
        swap = f"{b}<->{b % n + 1}"
        raise SymmetryError(
            f"{type(action).__name__} is not symmetric in the broker ids: swapping brokers {swap} in "
            f"the state and in {action} gives {len(got)} successor(s) ({len(got - expected)} not the swapped "
            f"ones), where the swapped successors are {len(expected)}; the symmetry reduction would miss "
            f"states. The state: {state}"
        )


def check_candidates(model, c, br, u, b: int, actions) -> None:
    """Stop if an action left out as unable to fire offers one here (check_idle), or, with
    symmetry, unless broker b's candidate actions, by kind, are those of the relabelled broker
    in the relabelled controller (candidates read only those: their signature)."""
    check_idle(model, c, br, u, b)
    n = len(model.config.brokers)
    if n < 2 or not model.config.symmetry:
        return
    perm = transposition(b, n)
    other = perm[b - 1]
    theirs = model.broker_candidates(symmetry.relabel_controller(c, perm), symmetry.relabel_broker(br, perm), u, other)
    mine = sorted(type(a).__name__ for a in actions)
    if sorted(type(a).__name__ for a in theirs) != mine:
        raise SymmetryError(
            f"the candidate actions of broker {b} are not symmetric in the broker ids: broker {b} gets "
            f"{mine}, broker {other} in the state with {b}<->{other} swapped gets "
            f"{sorted(type(a).__name__ for a in theirs)}; the symmetry reduction would miss states. "
            f"The controller: {c}"
        )


def check_idle(model, c, br, u, b: int) -> None:
    """Stop if an action the model leaves out of its search as unable to fire under its bounds,
    rule and settings (spec/next.py Action.may_fire) has a candidate for broker b here: its
    declaration is wrong, and the search would miss its states."""
    for fn in model.idle_fns:
        offered = fn(model.config, c, br, u, b)
        if offered:
            raise FastPathError(
                f"{type(offered[0]).__name__} is declared unable to fire under this configuration (spec/next.py: "
                f"its bounds, rule or setting), yet broker {b} has the candidate {offered[0]}; the search would "
                "miss its states"
            )


def check_symmetry(model, state: State) -> None:
    """Verify mode's full check at one state: for each swap of two neighbouring broker ids
    (together they generate every relabelling), the spec's successors of the swapped state
    are the swapped successors; else name a step whose successor is missing or extra."""
    n = len(model.config.brokers)
    if not model.config.symmetry or n < 2:
        return
    mine = list(model.successors(state))
    for b in range(1, n):
        perm = transposition(b, n)
        expected = {symmetry.relabel(x, perm): a for a, x in mine}
        theirs = {x: a for a, x in model.successors(symmetry.relabel(state, perm))}
        for x, a in expected.items():
            if x not in theirs:
                _asymmetric(a, b, "leads to a state whose swap the swapped state does not reach", state)
        for x, a in theirs.items():
            if x not in expected:
                _asymmetric(a, b, "(in the swapped state) leads to a state that is no swapped successor", state)


def _asymmetric(action, b: int, what: str, state: State) -> None:
    raise SymmetryError(
        f"{type(action).__name__} is not symmetric in the broker ids: with brokers {b}<->{b + 1} swapped, "
        f"{action} {what}; the symmetry reduction would miss states. The state: {state}"
    )


def check_observed(fast, state: State, action, nxt: State, fp: int) -> None:
    """Verify mode: a successor the fast path built is one the spec's step gives, and its
    fingerprint is the state's own."""
    if nxt not in fast.model.step(state, action):
        raise FastPathError(
            f"the successor cached for {action} is not one the step function gives at {state}: cached {nxt}"
        )
    if fp != fast.fingerprint(nxt):
        raise FastPathError(f"the fingerprint cached for {action} at {state} is not the successor's own")


def describe_outcomes(outcomes: tuple) -> str:
    """Cached outcomes as the components each successor changes: [{position: component}]."""
    return str([{i: x for i, x, _ in changes} for changes, _, _ in outcomes])
