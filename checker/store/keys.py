"""Path keys: a state named by the path that first reached it, 2 bytes per step.

A key is the initial state's index, then the index of each transition among its parent's
successors. Compared as bytes, keys order states exactly as a breadth-first queue does
(parents in queue order, then successor index), which is how the distributed engines
(Spark, --workers) pick the same first arrival, witness and violation as the local one,
and a trace is rebuilt by replaying its key through the model.
"""

from __future__ import annotations

_SMALL = [i.to_bytes(2, "big") for i in range(256)]
AFTER_EVERY_STEP = b"\xff\xff"  # after a parent's key: sorts after each of its steps


def index_bytes(i: int) -> bytes:
    if i < 256:
        return _SMALL[i]
    if i >= 0xFFFF:
        raise OverflowError(f"successor index {i}: path keys store indices in 2 bytes")
    return i.to_bytes(2, "big")


def decode_key(key: bytes) -> tuple[int, list[int]]:
    """(initial state index, successor indices) of a key."""
    nums = [int.from_bytes(key[i : i + 2], "big") for i in range(0, len(key), 2)]
    return nums[0], nums[1:]
