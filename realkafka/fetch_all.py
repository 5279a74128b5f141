"""A follower's fetch as a real run's brokers answer it: with every record the leader has.

The model's answer carries one record (spec/fetch.py, FETCH_MAX_RECORDS): smaller answers are
more behaviours for the checker, and a follower catching up n records takes n fetches. Kafka's
answer carries what the leader holds from the fetch offset on, up to replica.fetch.max.bytes
(1 MiB by default) and the end of the segment it starts in (ReplicaManager.readFromLog ->
UnifiedLog.read -> LogSegment.read, FetchIsolation.LOG_END for a follower). A run's records are
some seventy bytes each and its segments 1 MiB (realkafka/cluster.py), so every answer there
carries every record past the fetch offset: the follower appends them in one
UnifiedLog.appendAsFollower, and the states in which it holds only some of them never occur.

The validator's Fetch answers so (everything else in the step is the model's: the leader learns
the follower's position from the request, prepares an expansion, maybe moves the HW; the answer's
HW is read before that update). A follower catching up twelve records is one step, not twelve,
and the leader's views of the followers no longer pass through every offset in between: seed
902's reassignment (a new replica catching up sixteen records while two others restart) is what
made the validator's state sets outgrow its limit.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kafkamc.spec import fetch as fe
from kafkamc.spec.rpc import RoundTrip
from kafkamc.spec.state import FetchRequest, FetchResponse, State

if TYPE_CHECKING:
    from kafkamc.spec.config import Config


def handle_fetch_all(cfg: Config, state: State, a: fe.Fetch, req: FetchRequest) -> tuple[State, FetchResponse] | None:
    """fetch.handle_fetch, the answer carrying every record from the fetch offset on."""
    handled = fe.handle_fetch(cfg, state, a, req)
    if handled is None:
        return None  # refused
    after, answer = handled
    if answer.diverging is None:
        answer = answer._replace(records=state.broker(a.leader).log[req.fetch_offset :])
    return after, answer


FETCH_ALL = RoundTrip(fe.send_fetch, handle_fetch_all, fe.handle_fetch_response)


def actions(base: tuple[Any, ...]) -> tuple[Any, ...]:
    """The actions `base` with the model's Fetch step answering every record (a Fetch whose step
    is not the model's, a mutant's, is kept as it is)."""
    return tuple(dataclasses.replace(a, step=FETCH_ALL) if a.step is fe.fetch else a for a in base)
