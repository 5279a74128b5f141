"""The model/engine contract: initial states, ordered successors, canonical form, fingerprint."""
from __future__ import annotations

import hashlib
import marshal
from typing import Iterator

from kafkamc.spec import actions as A
from kafkamc.spec import isr, lifecycle, replication
from kafkamc.spec.config import Config
from kafkamc.spec.state import NO_LEADER, Broker, State, initial_state, members, replace


def consumer_hw(cfg: Config, br: Broker) -> int:
    """The HW a consumer can read from this leader, or -1 when it exposes none.

    Under KIP-207 a new leader answers OFFSET_NOT_AVAILABLE until its HW has reached the
    start offset of its own epoch; before it, whatever HW the leader had was exposed.
    """
    if cfg.rule("consumer_hw") == "kip207" and br.hw < br.start:
        return -1
    return br.hw


def observe(cfg: Config, state: State) -> State:
    """Update the ghost variables from what the partition's true leader now exposes.

    committed: the true leader's log below its HW, the longest ever seen (only ever extended).
    hw_seen: the highest HW a consumer could read from the true leader (consumer_hw).
    """
    t = state.true_leader()
    if t == NO_LEADER:
        return state
    br = state.broker(t)
    g = state.ghost
    committed, hw_seen = g.committed, g.hw_seen
    if br.hw > len(committed):
        exposed = tuple(rec for _epoch, rec in br.log[:br.hw])
        # Only an extension of what was committed is new commitment; a different history
        # is a loss that the invariants report, and must not overwrite the record of it.
        if exposed[:len(committed)] == committed:
            committed = exposed
    exposed = consumer_hw(cfg, br)
    if exposed > hw_seen:
        hw_seen = exposed
    if committed is g.committed and hw_seen == g.hw_seen:
        return state
    return replace(state, ghost=replace(g, committed=committed, hw_seen=hw_seen))


def candidate_actions(cfg: Config, state: State) -> Iterator:
    """Every action that might be enabled, in a fixed order; the step function checks the guard.

    Actions whose budget is spent, or that cannot apply, are left out here only because
    generating them costs time: the step functions check every guard themselves.
    """
    nxt_record = state.budget.records + 1
    u = state.budget
    shrinks_left = u.shrinks < cfg.max_isr_shrinks
    registered = state.controller.registered
    for b in cfg.brokers:
        br = state.broker(b)
        if not br.alive:
            yield A.BrokerRestart(b)
            continue
        if br.leader == b:
            if nxt_record <= cfg.max_records:
                yield A.Produce(b, nxt_record)
            if not br.pending and br.alter is None:
                isr = members(br.isr)
                for f in cfg.brokers:
                    if f == b:
                        continue
                    if f in isr:
                        if shrinks_left:
                            yield A.AlterPartition(b, tuple(m for m in isr if m != f))
                    else:
                        yield A.AlterPartition(b, tuple(sorted(isr + (f,))))
            if br.alter is not None:
                yield A.HandleAlterPartitionResponse(b)
        elif br.leader != NO_LEADER:
            if br.truncating:
                yield A.OffsetsForLeaderEpoch(b, br.leader)
            else:
                yield A.Fetch(b, br.leader)
            if shrinks_left and not br.stalled:
                yield A.ReplicaStall(b)
        if lifecycle.metadata_stale(state, b):
            yield A.MetadataUpdate(b)
        if u.crashes < cfg.max_crashes:
            yield A.BrokerCrash(b)
        if u.unclean < cfg.max_unclean_crashes:
            for keep in range(br.leo + 1):
                yield A.BrokerCrash(b, keep)
        if registered & (1 << (b - 1)):
            if u.fences < cfg.max_fences:
                yield A.ControllerFenceBroker(b)
        else:
            yield A.BrokerHeartbeat(b)


STEPS = {
    A.Produce: replication.produce,
    A.Fetch: replication.fetch,
    A.OffsetsForLeaderEpoch: replication.offsets_for_leader_epoch,
    A.ReplicaStall: replication.replica_stall,
    A.AlterPartition: isr.alter_partition,
    A.HandleAlterPartitionResponse: isr.handle_alter_partition_response,
    A.MetadataUpdate: lifecycle.metadata_update,
    A.BrokerCrash: lifecycle.broker_crash,
    A.BrokerRestart: lifecycle.broker_restart,
    A.ControllerFenceBroker: lifecycle.controller_fence_broker,
    A.BrokerHeartbeat: lifecycle.broker_heartbeat,
}


def step(cfg: Config, state: State, action) -> list[State]:
    """All states `action` can lead to from `state` (empty when its guard is false)."""
    out = STEPS[type(action)](cfg, state, action)
    if out is None:
        return []
    if isinstance(out, State):
        out = [out]
    return [observe(cfg, s) for s in out]


def encode(state: State) -> bytes:
    """Canonical bytes. marshal version 2 writes no back-references, so equal values
    give equal bytes in every process and Python version that reads version 2."""
    return marshal.dumps(state.key(), 2)


def fingerprint(state: State) -> int:
    """64 stable bits; Python's hash() is seeded per process and must not be used."""
    return int.from_bytes(hashlib.blake2b(encode(state), digest_size=8).digest(), "little")


class Model:
    """Kafka partition replication as a transition system."""

    def __init__(self, config: Config):
        self.config = config.validated()

    def initial_states(self) -> list[State]:
        return [initial_state(self.config.rf)]

    def successors(self, state: State) -> Iterator[tuple[object, State]]:
        cfg = self.config
        for action in candidate_actions(cfg, state):
            for nxt in step(cfg, state, action):
                yield action, nxt

    def canonical(self, state: State) -> State:
        return state     # symmetry reduction is not applied yet

    def fingerprint(self, state: State) -> int:
        return fingerprint(self.canonical(state))

    def action_names(self) -> list[str]:
        return [t.__name__ for t in A.ACTION_TYPES]
