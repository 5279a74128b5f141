"""Produce: how records reach the leader (KafkaApis.handleProduceRequest, Partition.appendRecordsToLeader)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkamc.spec.bounds import Bound
from kafkamc.spec.hw import advance_leader_hw, brokers_down
from kafkamc.spec.log import append
from kafkamc.spec.state import Broker, Budget, Controller, State, replace, size
from kafkamc.spec.wording import Wording

if TYPE_CHECKING:
    from kafkamc.spec.config import Config

RECORDS = Bound("records", 2, "records producers may append", limit=6)


@dataclass(frozen=True)
class Produce:
    """A producer sends record `record` to the broker it believes leads."""

    leader: int
    record: int


def may_produce(cfg: Config, br: Broker, u: Budget, b: int) -> bool:
    """The guard (its candidates and its step share it): b acts as leader in its own metadata
    (a zombie too: a producer with old metadata still sends to it) and a record is left."""
    return br.alive and br.leader == b and cfg.allows(u, RECORDS)


def next_record(u: Budget) -> int:
    """The id of the record a producer sends next: records are numbered as they are spent."""
    return u.of(RECORDS.name) + 1


def produce_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (Produce(b, next_record(u)),) if may_produce(cfg, br, u, b) else ()


def produce(cfg: Config, state: State, a: Produce) -> State | None:
    """The leader appends the record; acks=1 answers at once, acks=all once the HW passes it,
    acks=0 never answers (the producer learns nothing). With acks=all and an ISR below
    min.insync.replicas the request is rejected before the append (NOT_ENOUGH_REPLICAS,
    Partition.appendRecordsToLeader), which changes nothing."""
    b = a.leader
    br = state.broker(b)
    if not may_produce(cfg, br, state.budget, b) or a.record != next_record(state.budget):
        return None
    if cfg.acks == "all" and size(br.isr) < cfg.effective_minisr:
        return state
    offset = br.leo
    log, cache = append(br.log, br.cache, ((br.epoch, a.record),))
    br = replace(br, log=log, cache=cache)
    ghost = state.ghost
    if cfg.acks == "1":
        ghost = replace(ghost, acked=ghost.acked | 1 << (a.record - 1))
    elif cfg.acks == "all":
        # The ghost count of brokers down at append time lets the durability table ask
        # whether writes are still acknowledged with k brokers lost.
        br = replace(br, purgatory=br.purgatory + ((offset, a.record, brokers_down(cfg, state)),))
    nxt = replace(state.with_broker(b, br), ghost=ghost, budget=state.budget.spend(RECORDS.name))
    return advance_leader_hw(cfg, nxt, b)


@dataclass(frozen=True)
class ProduceRetry:
    """The producer retries an acks=all request that timed out in purgatory (request.timeout.ms;
    retries until delivery.timeout.ms, KIP-91). The idempotent producer's duplicate is not
    appended again, but Partition.appendRecordsToLeader still runs maybeIncrementLeaderHW. That
    matters when no other event recomputes the HW: a follower about to join held it back and
    was then fenced (Kafka recomputes the HW only on a fetch, an append, an ISR change or
    becoming leader). Only a retry that moves the HW is a step; the rest change nothing."""

    leader: int


def may_retry(br: Broker, b: int) -> bool:
    """The guard: b acts as leader and holds acks=all requests in purgatory."""
    return br.alive and br.leader == b and bool(br.purgatory)


def retry_candidates(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> tuple:
    return (ProduceRetry(b),) if may_retry(br, b) else ()


def produce_retry(cfg: Config, state: State, a: ProduceRetry) -> State | None:
    b = a.leader
    if not may_retry(state.broker(b), b):
        return None
    nxt = advance_leader_hw(cfg, state, b)
    return None if nxt is state else nxt


def produce_html(a: Produce, state: State, prev: State, draw) -> None:
    draw.msg("producer", draw.lane(a.leader), f"Produce r{a.record}")


PRODUCE_WORDS = Wording(html=produce_html)
RETRY_WORDS = Wording()  # the page and the story tell only what it moved (an HW, an acknowledgement)
