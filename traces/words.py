"""Kafka's words for the invariants' variables, for people reading a violation.

An explanation (invariants.suite.Explanation) names the values it read by the variables of
invariants/view.py: `epoch[1]`, `log[2][0]`, `prev.hw_seen`. A reader wants Kafka's terms:

    kafka_words("epoch[1]")          -> "leader epoch of broker 1"
    kafka_words("prev.hw_seen")      -> "highest HW consumers have seen, before this step"
    kafka_value("log[2][0]", 0)      -> "none"

Both functions are pure and total: a name they do not know (a variable added to the view
later) comes back unchanged, so a renderer never fails on one.
"""

from __future__ import annotations

import re

PREV = "prev."  # the prefix of the state before the step (InvariantSuite's P view)

# (base name, number of indices) -> wording; {0} and {1} are the indices in order.
_WORDS: dict[tuple[str, int], str] = {
    ("c_leader", 0): "leader in the controller's metadata",
    ("c_epoch", 0): "controller's leader epoch",
    ("c_recovering", 0): "partition is RECOVERING after an unclean election",
    ("c_reassigning", 0): "a partition reassignment is in flight",
    ("c_pepoch", 0): "controller's partition epoch",
    ("knows_leader", 1): "leader in broker {0}'s metadata",
    ("pepoch", 1): "partition epoch broker {0} knows as leader",
    ("knows_isr", 2): "leader {0} knows broker {1} in the committed ISR",
    ("pending", 1): "broker {0} has an ISR change (AlterPartition) in flight",
    ("last_known", 1): "broker {0} is the last known leader (lastKnownElr)",
    ("replica", 1): "broker {0} is in the partition's replica set",
    ("adding", 1): "broker {0} is a replica the reassignment in flight adds",
    ("removing", 1): "broker {0} is a replica the reassignment in flight removes",
    ("shutting", 1): "broker {0} is in controlled shutdown",
    ("alive", 1): "broker {0} is running",
    ("leads", 1): "broker {0} believes it leads",
    ("epoch", 1): "leader epoch of broker {0}",
    ("hw", 1): "HW of broker {0}",
    ("leo", 1): "log end offset (LEO) of broker {0}",
    ("start", 1): "start offset of broker {0}'s leader epoch",
    ("in_isr", 1): "broker {0} is in the partition's ISR",
    ("in_elr", 1): "broker {0} is in the ELR (eligible leader replicas)",
    ("stalled", 1): "broker {0} has stopped fetching",
    ("waiting", 1): "acks=all requests waiting in broker {0}'s purgatory",
    ("registered", 1): "broker {0} is registered and unfenced",
    ("exposed_hw", 1): "HW broker {0} exposes to consumers",
    ("in_hw_isr", 2): "leader {0} counts broker {1} in the ISR its HW moves over",
    ("log", 2): "record at offset {1} of broker {0}'s log",
    ("logep", 2): "leader epoch of offset {1} in broker {0}'s log",
    ("committed_len", 0): "number of committed records",
    ("committed", 1): "committed record at offset {0}",
    ("acked", 1): "record {0} acknowledged to the producer",
    ("hw_seen", 0): "highest HW consumers have seen",
    ("acked_down", 0): "most brokers down between an acks=all write and its ack",
}

_NAME = re.compile(r"(?P<base>[a-z_]+)(?P<idx>(?:\[\d+\])*)")


def _parse(name: str) -> tuple[bool, str, tuple[str, ...]] | None:
    """(before the step?, base name, indices), or None for a name of another shape."""
    prev = name.startswith(PREV)
    m = _NAME.fullmatch(name[len(PREV) :] if prev else name)
    if m is None:
        return None
    return prev, m["base"], tuple(re.findall(r"\d+", m["idx"]))


def kafka_words(name: str) -> str:
    """Kafka's wording of an invariant variable's name; an unknown name is returned as is."""
    parsed = _parse(name)
    words = parsed and _WORDS.get((parsed[1], len(parsed[2])))
    if not parsed or not words:
        return name
    text = words.format(*parsed[2])
    return text + ", before this step" if parsed[0] else text


def kafka_value(name: str, value: object) -> str:
    """A variable's value as a reader says it: yes/no, r3 for a record, none for the
    view's placeholders (0 for no record or no leader, -1 for no HW exposed)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    parsed = _parse(name)
    base = parsed[1] if parsed else ""
    if base in ("log", "committed") and isinstance(value, int):
        return f"r{value}" if value else "none"
    if (base in ("c_leader", "knows_leader") and value == 0) or (base == "exposed_hw" and value == -1):
        return "none"
    if base == "logep" and value == 0:
        return "none (no record)"
    return str(value)
