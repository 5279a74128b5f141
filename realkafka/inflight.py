"""Where a run's leader had an ISR shrink in flight, from its log: so that the validator lets a
prepared shrink wait for the controller only there.

Under incarnations=kraft_steps (the validator's model) a shrink is two steps, as Kafka takes it:
`Partition.maybeShrinkIsr` logs "Shrinking ISR from 1,2,3 to 3" at INFO and calls
`prepareIsrShrink` (the partition is PendingShrinkIsr: in flight, its maximal ISR the current
one), and `submitAlterPartition` hands the request to the AlterPartitionManager; the
controller's write comes later, and `handleAlterPartitionUpdate` commits it when the answer
arrives (spec/alter_partition.py, prepare_isr_shrink). Between the two, every step of the
followers and the producer may come: a shrink the leader may prepare at any step and deliver
at any later one multiplies the validator's states (seed 900: at most 1,344 -> 2,016 states per
observation, 36 -> 158 s, when every prepared shrink could wait).

The leader's log says when each shrink was prepared, and the controller's record when it was
written; the order of the observations says which of them fell in between. So a shrink may stay
in flight across the validator's closure only at the observations from its "Shrinking ISR" line
(SLACK before it: the log's stamp is cut to the millisecond) up to the controller record that
next changes the partition epoch (the shrink written, or a change that makes the controller
refuse it, INVALID_UPDATE_VERSION). Anywhere else the validator takes the prepare and the
delivery back to back, which is the model before the shrink was in flight: no observation lies
between them, and a run without its brokers' logs (an old recorded run) is validated as before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kafkamc.realkafka.observe import log_clock

SLACK = 0.01  # seconds before a "Shrinking ISR" line's stamp that the shrink may already be in flight
LINE = re.compile(
    r"^\[(\d\d:\d\d:\d\d,\d{3})\] INFO \[Partition (\S+) broker=(\d+)\] Shrinking ISR from ([\d,]*) to ([\d,]*)\."
)


def read(cluster: Path, topic: str, start: float) -> list[dict[str, Any]]:
    """Every "Shrinking ISR" line of the brokers' logs on partition `topic`-0, as {"t", "broker",
    "isr"} (the ISR proposed), in time order; `start`: a time of the run (the first observation),
    whose day the [HH:MM:SS,mmm] stamps (the machine's local time) are read in."""
    clock = log_clock(start)
    out = []
    for path in sorted((cluster / "logs").glob("broker-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            m = LINE.match(line)
            if m is None or m.group(2) != f"{topic}-0":
                continue
            isr = sorted(int(x) for x in m.group(5).split(",") if x)
            out.append({"t": clock(m.group(1)), "broker": int(m.group(3)), "isr": isr})
    return sorted(out, key=lambda x: x["t"])


def windows(events: list[dict[str, Any]], shrinks: list[dict[str, Any]]) -> list[frozenset]:
    """For each observation's index: the shrinks, as (leader, ISR proposed as a bitmask), that
    may be in flight in the closure taken at that observation."""
    out: list[set] = [set() for _ in events]
    for s in shrinks:
        key = (s["broker"], sum(1 << (m - 1) for m in s["isr"]))
        first = next((i for i, e in enumerate(events) if e["t"] >= s["t"] - SLACK), len(events))
        # the partition epoch in force when the shrink was prepared
        epoch = next((e["view"].pepoch for e in reversed(events[:first]) if e["kind"] == "controller"), None)
        for i in range(first, len(events)):
            out[i].add(key)
            if events[i]["kind"] == "controller" and events[i]["view"].pepoch != epoch:
                break
    return [frozenset(x) for x in out]


__all__ = ["SLACK", "read", "windows"]
