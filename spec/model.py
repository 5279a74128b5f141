"""The model/engine contract: initial states, ordered successors, canonical form, fingerprint."""
from __future__ import annotations

import marshal
from itertools import permutations
from typing import Iterator

from kafkamc.spec import actions as A
from kafkamc.spec import isr, lifecycle, replication, symmetry
from kafkamc.spec.config import Config
from kafkamc.spec.memo import UNKNOWN, FastSuccessors
from kafkamc.spec.state import NO_LEADER, Broker, Budget, Controller, State, bit, initial_state, members, replace


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
    for b in cfg.brokers:
        yield from broker_actions(cfg, state.controller, state.broker(b), state.budget, b)


def broker_actions(cfg: Config, c: Controller, br: Broker, u: Budget, b: int) -> Iterator:
    """The candidate actions of broker b; they read only its broker, the controller and the budget."""
    if not br.alive:
        yield A.BrokerRestart(b)
        return
    shrinks_left = u.shrinks < cfg.max_isr_shrinks
    if br.leader == b:
        if u.records < cfg.max_records:
            yield A.Produce(b, u.records + 1)
        if not br.pending and br.alter is None:
            # Proposals the leader's own view already rules out are left out (a follower
            # it sees caught up is never dropped, one behind never added): a third of the
            # candidates otherwise. The step checks every guard again.
            current = members(br.isr)
            for f in cfg.brokers:
                if f == b:
                    continue
                if f in current:
                    if shrinks_left and isr.behind(br, f):
                        yield A.AlterPartition(b, tuple(m for m in current if m != f))
                elif isr.may_join(cfg, br, f):
                    yield A.AlterPartition(b, tuple(sorted(current + (f,))))
        if br.alter is not None:
            yield A.HandleAlterPartitionResponse(b)
    elif br.leader != NO_LEADER:
        if br.truncating:
            yield A.OffsetsForLeaderEpoch(b, br.leader)
        else:
            yield A.Fetch(b, br.leader)
        if shrinks_left and not br.stalled and c.isr & bit(b):
            yield A.ReplicaStall(b)
    if lifecycle.stale(c, br, b):
        yield A.MetadataUpdate(b)
    if u.crashes < cfg.max_crashes:
        yield A.BrokerCrash(b)
    if u.unclean < cfg.max_unclean_crashes:
        for keep in range(br.leo + 1):
            yield A.BrokerCrash(b, keep)
    if c.registered & (1 << (b - 1)):
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


def unobserved_step(cfg: Config, state: State, action) -> list[State]:
    """The states `action` leads to before the ghost observes them (empty when its guard is false)."""
    out = STEPS[type(action)](cfg, state, action)
    if out is None:
        return []
    return [out] if isinstance(out, State) else out


def step(cfg: Config, state: State, action) -> list[State]:
    """All states `action` can lead to from `state` (empty when its guard is false)."""
    return [observe(cfg, s) for s in unobserved_step(cfg, state, action)]


def encode(state: State) -> bytes:
    """The state as bytes, for other processes (Spark). marshal version 2 writes no
    back-references, so equal values give equal bytes in every process."""
    return marshal.dumps(state.key(), 2)


def screened(expanded, state: State, is_new=None, quiet=None, fired=None):
    """What transitions() yields, made from any (action, successor, fingerprint) sequence
    (fired: a dict, action type -> transitions):
    (index, action, successor, fingerprint, fresh), all of them (fresh None) without is_new,
    else only a new state (fresh UNKNOWN: nothing known about it) or a step quiet() does not
    pass (fresh False)."""
    for index, (action, nxt, fp) in enumerate(expanded):
        if is_new is None:
            yield index, action, nxt, fp, None
            continue
        fired[type(action)] = fired.get(type(action), 0) + 1
        if not quiet(state, nxt):
            yield index, action, nxt, fp, False
        elif is_new(fp):
            yield index, action, nxt, fp, UNKNOWN


class Model:
    """Kafka partition replication as a transition system.

    Successors and fingerprints go through spec/memo.py's caches; `verify=True` re-runs the
    step functions on every cache hit and fails on any difference (for tests). With
    config.symmetry, fingerprints are those of canonical states (spec/symmetry.py); the
    states themselves, and so every trace, stay the real ones.
    """

    def __init__(self, config: Config, verify: bool = False):
        self.config = config.validated()
        self.fast = FastSuccessors(self.config, broker_actions, unobserved_step, observe, verify)
        self.in_order = tuple(range(1, self.config.rf + 1))

    def initial_states(self) -> list[State]:
        """One per replica assignment order: which broker is preferred, which is tried next."""
        return [initial_state(self.config.rf, order) for order in permutations(self.in_order)]

    def successors(self, state: State) -> Iterator[tuple[object, State]]:
        return self.fast.successors(state)

    def expand(self, state: State) -> Iterator[tuple[object, State, int]]:
        """(action, successor, fingerprint): successors with the fingerprint the engine needs."""
        if self._canonical_successors(state):
            return self.fast.expand(state)
        return self._expand_reduced(state)

    def transitions(self, state: State, is_new=None, quiet=None, fired=None, known=None):
        """expand() as the search consumes it; see FastSuccessors.transitions."""
        if self._canonical_successors(state):
            return self.fast.transitions(state, is_new, quiet, fired, known)
        return screened(self._expand_reduced(state), state, is_new, quiet, fired)

    def _canonical_successors(self, state: State) -> bool:
        """Whether the successors' own fingerprints are canonical. No step changes the
        assignment, so the successors of a state in assignment order 1..rf are their own
        canonical forms: the reduced search (which starts from that order) needs no
        canonicalisation at all. Verify mode checks the premise."""
        return not self.config.symmetry or (state.controller.replicas == self.in_order and not self.fast.verify)

    def _expand_reduced(self, state: State):
        in_order, fingerprint = self.in_order, self.fast.fingerprint
        for action, nxt, fp in self.fast.expand(state):
            if nxt.controller.replicas != state.controller.replicas:
                raise AssertionError(f"{action} changed the replica assignment, which symmetry assumes fixed")
            if nxt.controller.replicas != in_order:
                fp = fingerprint(symmetry.canonical(nxt))
            yield action, nxt, fp

    def owner_key(self, state: State) -> int:
        """What the multi-process engine partitions states by: the fingerprint of the
        (canonical) controller. States that share a controller share most cache entries
        (every step that reads it), so each worker keeps meeting its own; a random split
        made every worker recompute most of them."""
        c = state.controller
        if self.config.symmetry and c.replicas != self.in_order:
            c = symmetry.canonical(state).controller
        return self.fast.controller_fingerprint(c)

    def canonical(self, state: State) -> State:
        return symmetry.canonical(state) if self.config.symmetry else state

    def fingerprint(self, state: State) -> int:
        return self.fast.fingerprint(self.canonical(state))

    def action_types(self) -> tuple:
        return A.ACTION_TYPES

    def action_names(self) -> list[str]:
        return [t.__name__ for t in self.action_types()]
