"""Symmetry over broker ids: a state and its relabellings are the same partition.

Brokers differ only in their ids and in their place in the replica assignment, which is
part of the state (Controller.replicas). Relabelling every broker id by one permutation,
everywhere it occurs, gives a state that behaves the same, step for step, with the same
invariant verdicts: no step or invariant compares ids other than for equality, and the
elections follow the assignment, which is relabelled with everything else.

The canonical representative numbers brokers by their place in the assignment, so the
assignment becomes 1..rf (during a reassignment: the target, then the removing replicas).
Brokers outside the assignment take the ids after it (canonical()). Two states are
relabellings of each other exactly when their canonical forms are equal: the reduction is
exact, with no approximation.
"""

from __future__ import annotations

import marshal
from dataclasses import fields
from dataclasses import replace as dataclass_replace
from itertools import permutations

from kafkamc.spec.state import Broker, Controller, State, members, replace


def relabelling(replicas: tuple, outsiders: tuple = ()) -> tuple:
    """new id per old id (index b - 1): each broker takes its place in the assignment, and the
    brokers outside it take the ids after it in the order given."""
    perm = [0] * (len(replicas) + len(outsiders))
    for place, b in enumerate(replicas + outsiders, start=1):
        perm[b - 1] = place
    return tuple(perm)


def is_identity(perm: tuple) -> bool:
    return all(new == old for old, new in enumerate(perm, start=1))


def _id(b: int, perm: tuple) -> int:
    return perm[b - 1] if b > 0 else b  # NO_LEADER stays 0


def _mask(mask: int, perm: tuple) -> int:
    out = 0
    for b in members(mask):
        out |= 1 << (perm[b - 1] - 1)
    return out


def _per_broker(values: tuple, perm: tuple) -> tuple:
    """A tuple indexed by broker id (b - 1), reindexed."""
    if not values:
        return values
    out = [None] * len(values)
    for i, v in enumerate(values):
        out[perm[i] - 1] = v
    return tuple(out)


def relabel_controller(c: Controller, perm: tuple) -> Controller:
    return replace(
        c,
        leader=_id(c.leader, perm),
        isr=_mask(c.isr, perm),
        registered=_mask(c.registered, perm),
        bepochs=_per_broker(c.bepochs, perm),
        elr=_mask(c.elr, perm),
        lastelr=_mask(c.lastelr, perm),
        replicas=tuple(_id(b, perm) for b in c.replicas),
        shutdown=_per_broker(c.shutdown, perm),
        adding=_mask(c.adding, perm),
        removing=_mask(c.removing, perm),
    )


def relabel_broker(br: Broker, perm: tuple) -> Broker:
    alter = br.alter
    if alter is not None:
        alter = replace(alter, isr=_mask(alter.isr, perm))
    return replace(
        br,
        leader=_id(br.leader, perm),
        isr=_mask(br.isr, perm),
        pending=_mask(br.pending, perm),
        views=_per_broker(br.views, perm),
        vbepochs=_per_broker(br.vbepochs, perm),
        request=None if br.request is None else _per_broker(br.request, perm),
        alter=alter,
        ineligible=_mask(br.ineligible, perm),
    )


# An action's fields that hold broker ids, by name (a single id, or a tuple of them); every
# other field (a record's value, how much of a log survives) is left as it is.
BROKER_FIELDS = frozenset({"broker", "leader", "follower", "preferred", "isr", "target", "removing"})


def relabel_action(action, perm: tuple):
    """The same action for the relabelled brokers: Fetch(follower=2, leader=1) under 1<->2 is
    Fetch(follower=1, leader=2)."""
    changes = {}
    for f in fields(action):
        v = getattr(action, f.name)
        if f.name in BROKER_FIELDS and v is not None:
            changes[f.name] = tuple(_id(b, perm) for b in v) if isinstance(v, tuple) else _id(v, perm)
    return dataclass_replace(action, **changes) if changes else action


def relabel(state: State, perm: tuple) -> State:
    brokers = _per_broker(tuple(relabel_broker(br, perm) for br in state.brokers), perm)
    return replace(state, controller=relabel_controller(state.controller, perm), brokers=brokers)


def canonical(state: State) -> State:
    """The assignment's brokers numbered by their place in it. The brokers outside it (a
    cluster larger than the replication factor) are interchangeable only among themselves:
    of their orders, the one whose relabelled state has the smallest key is taken, so two
    states get one representative exactly when one relabelling maps one onto the other."""
    replicas = state.controller.replicas
    outsiders = tuple(b for b in range(1, len(state.brokers) + 1) if b not in replicas)
    if len(outsiders) <= 1:
        perm = relabelling(replicas, outsiders)
        return state if is_identity(perm) else relabel(state, perm)
    relabelled = [relabel(state, relabelling(replicas, order)) for order in permutations(outsiders)]
    return min(relabelled, key=lambda s: marshal.dumps(s.key(), 2))  # bytes: None and tuples compare
