"""Log retention: the oldest record is deleted once every replica has it below its HW.

With `--log-retention` the model keeps a window of at most --max-records records instead of
a history of them: retention (LogManager's retention check, UnifiedLog.deleteOldSegments,
which advances the log start offset; followers follow it through the logStartOffset of
fetch responses) deletes record 1 once it is committed on every replica, and the state is
renumbered from the new log start: every offset one lower, every record id one lower, one
record less spent. A producer can then write again, so a behaviour may produce forever and
still be a cycle of the finite state graph: what a liveness property about a producer that
never stops needs (KAFKA-1546: a follower slower than the producer).

Simplifications, and what they cost: every replica deletes at once, in one step (in Kafka
followers lag the leader's log start; a follower's fetch below it would get
OFFSET_OUT_OF_RANGE, which the model never exercises); retention waits until every replica is
up and holds the record below its HW (Kafka deletes by time or size, whatever the followers
hold), so it never shortens a log a replica still needs; and it waits for no AlterPartition
in flight, to renumber the partition epoch (below).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.produce import RECORDS
from kafkamc.spec.state import UNKNOWN, Broker, Budget, Controller, State, replace
from kafkamc.spec.wording import Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config


@dataclass(frozen=True)
class LogRetention:
    """Retention deletes the partition's oldest record on every replica."""

    leader: int


def may_retain(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> bool:
    """The guard's part its candidates can see: b leads at the controller and in its own view,
    with a record below its HW. The step checks the other replicas and the ghost too."""
    leads = c.leader == b and br.alive and br.leader == b
    return cfg.log_retention and leads and br.hw >= 1 and bool(u.of(RECORDS.name))


def retention_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (LogRetention(b),) if may_retain(cfg, c, br, u, b) else ()


def _down(x: int) -> int:
    return max(x - 1, 0)


def _shifted_cache(cache: tuple) -> tuple:
    """Epoch start offsets one lower; of the epochs that now start at 0 only the newest stays
    (LeaderEpochFileCache.truncateFromStart)."""
    out = [(e, _down(s)) for e, s in cache]
    while len(out) > 1 and out[1][1] == 0:
        out.pop(0)
    return tuple(out)


def _shifted(br: Broker) -> Broker:
    if not br.log:
        return br
    return replace(
        br,
        log=tuple((e, r - 1) for e, r in br.log[1:]),
        cache=_shifted_cache(br.cache),
        hw=_down(br.hw),
        checkpoint_hw=_down(br.checkpoint_hw),
        flushed=_down(br.flushed),
        start=_down(br.start),
        views=tuple(v if v == UNKNOWN else _down(v) for v in br.views),
        purgatory=tuple((o - 1, r - 1, d) for o, r, d in br.purgatory),
    )


def log_retention(cfg: Config, state: State, a: LogRetention) -> State | None:
    c = state.controller
    if not may_retain(cfg, c, state.broker(a.leader), state.budget, a.leader):
        return None
    g = state.ghost
    if not g.committed or g.committed[0] != 1:
        return None
    for b in c.replicas:
        br = state.broker(b)
        if not br.alive or not br.log or br.log[0][1] != 1 or br.hw < 1:
            return None
    # The partition epoch grows with every ISR change, so no behaviour that changes the ISR
    # forever could close a cycle. Retention waits until no change is in flight and the leader
    # knows the controller's partition epoch, then renumbers it to 1: every comparison the
    # protocol makes among the epochs present (equal, or a follower's 0) stays as it was.
    if any(br.pending or br.alter is not None for br in state.brokers):
        return None
    if state.broker(a.leader).pepoch != c.pepoch or any(
        br.pepoch for b, br in enumerate(state.brokers, 1) if b != a.leader
    ):
        return None
    budget = dict(state.budget.spent)
    budget[RECORDS.name] -= 1
    brokers = tuple(_shifted(br) for br in state.brokers)
    brokers = tuple(replace(br, pepoch=1) if b == a.leader else br for b, br in enumerate(brokers, 1))
    ghost = replace(g, committed=tuple(r - 1 for r in g.committed[1:]), hw_seen=_down(g.hw_seen), acked=g.acked >> 1)
    spent = tuple(sorted((k, v) for k, v in budget.items() if v))
    return State(replace(c, pepoch=1), brokers, ghost, Budget(spent))


RETENTION_WORDS = Wording()  # a trace shows the renumbered logs; no message of its own
