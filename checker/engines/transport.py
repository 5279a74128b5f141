"""How the distributed engines move states between processes: the engines' side of the fast
model, not the model's (the model gives states, successors and properties; checker/engines/contract.py).

A state travels as the fingerprints of its components, each component itself only the first
time a peer is sent it (--workers) or once per blob (Spark). States are owned by the
fingerprint of their canonical controller: states that share a controller share most cache
entries (every step that reads it), so each worker keeps meeting its own; a random split
made every worker recompute most of them.
"""

from __future__ import annotations

from kafkamc.spec import symmetry
from kafkamc.spec.state import State


def owner_key(model, state: State) -> int:
    """What the distributed engines partition states by (model: a checker.fast.FastModel)."""
    c = state.controller
    if model.config.symmetry and (model.pooled or c.replicas != model.in_order):
        c = symmetry.canonical(state).controller
    return model.fast.controller_fingerprint(c)


def shipped(model, state: State) -> list[tuple]:
    """(fingerprint, kind, component) of each component of a state, in position order."""
    fast = model.fast
    comps = fast._interned(state)[0]
    fp, tags = fast.components.fp, fast.tags
    return [(fp[id(x)], tags[i], x) for i, x in enumerate(comps)]


def learn(model, kind: int, component) -> None:
    """Take a component a peer shipped, so that assemble() can name it by fingerprint."""
    model.fast.components.intern(component, kind)


def assemble(model, fingerprints: tuple) -> State:
    """The state whose components have these fingerprints (each learned or met before)."""
    by_fp = model.fast.components.by_fp
    return model.fast.join([by_fp[f] for f in fingerprints])
