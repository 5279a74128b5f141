"""Symmetry over broker ids: a state and its relabellings are the same partition.

Brokers differ only in their ids and in their place in the replica assignment, which is
part of the state (Controller.replicas). Relabelling every broker id by one permutation,
everywhere it occurs, gives a state that behaves the same, step for step, with the same
invariant verdicts: no step or invariant compares ids other than for equality, and the
elections follow the assignment, which is relabelled with everything else.

The canonical representative numbers brokers by their place in the assignment, so the
assignment becomes 1..rf. Two states are relabellings of each other exactly when their
canonical forms are equal: the reduction is exact, with no approximation.
"""

from __future__ import annotations

from kafkamc.spec.state import Broker, Controller, State, members, replace


def relabelling(replicas: tuple) -> tuple:
    """new id per old id (index b - 1): each broker takes its place in the assignment."""
    perm = [0] * len(replicas)
    for place, b in enumerate(replicas, start=1):
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
        alter=alter,
    )


def relabel(state: State, perm: tuple) -> State:
    brokers = _per_broker(tuple(relabel_broker(br, perm) for br in state.brokers), perm)
    return replace(state, controller=relabel_controller(state.controller, perm), brokers=brokers)


def canonical(state: State) -> State:
    perm = relabelling(state.controller.replicas)
    return state if is_identity(perm) else relabel(state, perm)
