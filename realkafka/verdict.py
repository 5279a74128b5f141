"""The end of a replay (realkafka/replay.py): what the real cluster showed of the trace's promise.

- a data-loss promise (LOSS), or any trace whose final model state has lost an acknowledged
  record (the default shortest trace of two hard crashes violates HighWatermarkMonotonic first and
  loses its record in the same step): the acknowledged records missing from the real leader's log
  and from what a consumer reads;
- a liveness lasso whose last state may last forever: the real cluster stays in it for STAY_S;
- anything else: the real cluster reached the model's final state.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol

from kafkamc.realkafka import client
from kafkamc.realkafka.observe import View, value_of


class Replay(Protocol):
    """What the verdict reads of a replay (realkafka/replay.py Replay), named here so that the
    replay, which asks for it, is not imported back."""

    @property
    def c(self) -> Any: ...
    @property
    def look(self) -> Any: ...
    @property
    def paused(self) -> Any: ...
    @property
    def r(self) -> Any: ...
    @property
    def running(self) -> Any: ...
    @property
    def t(self) -> Any: ...
    @property
    def views(self) -> Any: ...


TOPIC = "replay"
# Data-loss promises: their violation is seen for real as an acknowledged record missing.
LOSS = ("AckedWriteDurability", "NoCommittedDataLoss")
# How long a liveness counterexample's last state must last on the real cluster: longer than the
# session timeout and many runs of the controller's periodic tasks.
STAY_S = 15.0


def same(model: View, real: View) -> bool:
    """The comparison: every field of the View, the leader's HW read as 0 before its checkpoint
    file names the partition (a new leader's HW starts at its log start, 0 here)."""
    return model == (real if real.leader < 0 else replace(real, leader_hw=real.leader_hw or 0))


def model_lost(replay: Replay) -> list[str]:
    """The acknowledged records the model's final state has lost: in no log of its leader."""
    end = replay.t.steps[-1][1]
    leader = end.controller.leader
    kept = {r for _e, r in end.broker(leader).log} if leader else set()
    acked = end.ghost.acked
    return [value_of(r) for r in range(1, acked.bit_length() + 1) if acked >> (r - 1) & 1 and r not in kept]


def verdict(replay: Replay) -> None:
    """After the last step (the real cluster is in the model's final state)."""
    for b in sorted(replay.paused):
        replay.c.resume(b)
    replay.paused.clear()
    inv = replay.t.invariant
    if replay.t.loop is not None:
        stays(replay)
        return
    lost_by_model = model_lost(replay)
    if inv not in LOSS and not lost_by_model:
        what = f"{inv} is violated in it" if inv else "every promise holds in it"
        replay.r.notes.append(f"the real cluster reached the model's final state; {what}")
        replay.r.verdict = "reproduced"
        return
    last = replay.look()
    log = dict(last.logs).get(last.leader, ())
    try:
        replay.r.read = client.read_all(replay.c.bootstrap_of(replay.running()), TOPIC, timeout=10)
    except Exception as e:  # KIP-207: a leader below min ISR may not answer yet
        replay.r.notes.append(f"a consumer could not read: {e}")
    # By value: the producer never retries, so each value is written once (and with acks=0
    # the client learns no offset: librdkafka reports -1).
    lost = [
        a
        for a in replay.r.acks
        if a.offset is not None
        and a.value not in {v for _e, v in log}
        and a.value not in {v for _o, v in replay.r.read}
    ]
    acked = ", ".join(f"{a.value} at offset {a.offset}" for a in replay.r.acks if a.offset is not None) or "none"
    replay.r.notes.append(
        f"acknowledged: {acked}; leader {last.leader}'s log {list(log)}; a consumer reads {replay.r.read}"
    )
    promise = inv if inv in LOSS else "the acknowledged write"
    if lost and (inv in LOSS or sorted(a.value for a in lost) == sorted(lost_by_model)):
        replay.r.verdict = "reproduced"
        replay.r.notes.append(
            f"{promise} {'violated' if inv in LOSS else 'lost'} for real: "
            + ", ".join(f"{a.value}, acknowledged at offset {a.offset}" for a in lost)
            + f", is not in leader {last.leader}'s log nor in what a consumer reads"
            + ("" if inv in LOSS else f" (the model loses {', '.join(lost_by_model)}; {inv} is violated first)")
        )
    else:
        replay.r.verdict = "diverged"
        seen = ", ".join(a.value for a in lost) or "none"
        replay.r.notes.append(
            f"the final states match, but the acknowledged records lost for real ({seen}) are not the model's "
            f"({', '.join(lost_by_model) or 'none'})"
        )


def stays(replay: Replay) -> None:
    """A liveness counterexample whose last state may stay forever (its loop is its last step):
    the real cluster must stay in it for STAY_S by its own clocks (session timeouts, the
    controller's periodic elections); a cycle longer than that is run once."""
    t = replay.t
    want = replay.views[-1]
    if t.loop != t.length:
        replay.r.notes.append(f"the cycle from step {t.loop} was run once; {t.invariant} never happens on it")
        replay.r.verdict = "reproduced"
        return
    deadline = time.monotonic() + STAY_S
    while time.monotonic() < deadline:
        real = replay.look()
        if not same(want, real):
            replay.r.notes.append(f"the real cluster left the model's last state: {'; '.join(want.differences(real))}")
            replay.r.verdict = "diverged"
            return
        time.sleep(0.5)
    replay.r.notes.append(
        f"the real cluster stayed in the model's last state for {STAY_S:.0f} s: {t.invariant} does not happen"
    )
    replay.r.verdict = "reproduced"
