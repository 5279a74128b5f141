"""What the next observations will read of a state, so that the validator keeps no more of it.

A broker's HW checkpoint (the model's `checkpoint_hw`, replication-offset-checkpoint) is written
by CheckpointHighWatermarks with whatever HW the broker had at that moment, so between two cuts
it may hold any of the HW values the broker went through: a broker catching up twelve records
one fetch at a time has thirteen, and every other broker's states are multiplied by them. Yet
nothing in the model reads it but a hard crash (BrokerCrash: the HW read back is
min(checkpoint_hw, keep); a kill or a power loss, each an observation of its own) and the
cut that reads the file. A clean shutdown writes the HW afresh; a restart reads the HW the crash
left, not the field; CheckpointHighWatermarks only asks whether it differs from the HW.

So until the next observation that reads broker B's checkpoint, two states that differ only in
B's checkpoint, neither being the value that observation will read, have the same futures as far
as the observations can tell: each needs a later checkpoint of that value to pass the cut, and
nothing else depends on the field. The validator keeps that value when a state has it, and one
mark (-1, a value no file holds) for every other: the same verdict, with fewer states. When the
next reader is a crash, the value is kept as it is.
"""

from __future__ import annotations

from typing import Any

from kafkamc.spec.state import State, replace

OTHER = -1  # a checkpoint that is not the value the next observation reads


def readers(events: list[dict[str, Any]], brokers: tuple[int, ...]) -> list[dict[int, int]]:
    """For each observation's index: the broker checkpoints that may be marked OTHER from there
    until the next observation that reads them, with the value it reads (a broker whose next
    reader is a crash, kept whole, is absent; one with no reader left is marked whatever it
    holds: `None`-free, OTHER matches nothing)."""
    out: list[dict[int, int]] = [{} for _ in events]
    ahead: dict[int, int | None] = {b: OTHER for b in brokers}  # None: a crash reads it
    for index in range(len(events) - 1, -1, -1):
        e = events[index]
        if e["kind"] == "cut":
            for b, hw in e["checkpoints"].items():
                ahead[int(b)] = int(hw)
        elif e["kind"] == "kill":
            ahead[int(e["broker"])] = None
        out[index] = {b: x for b, x in ahead.items() if x is not None}
    return out


def shape(state: State, canon: dict[int, int]) -> State:
    """The state with each checkpoint of `canon` that is not the value read next marked OTHER."""
    for b, x in canon.items():
        br = state.broker(b)
        if br.checkpoint_hw != x and br.checkpoint_hw != OTHER:
            state = state.with_broker(b, replace(br, checkpoint_hw=OTHER))
    return state
