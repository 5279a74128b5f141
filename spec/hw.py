"""The one home of the high-watermark rules: how a leader advances its HW, and what a
consumer sees of it (and so what the ghost records as committed and exposed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkamc.spec.state import Broker, Controller, State, bit, members, replace, size

if TYPE_CHECKING:
    from kafkamc.spec.config import Config


def hw_isr(cfg: Config, br: Broker) -> int:
    """The ISR the leader computes its HW over while an AlterPartition may be in flight
    (the hw_pending_isr rule; KIP-497's maximal ISR: additions count at once, removals
    once committed)."""
    return isr_in_use(cfg.rule("hw_pending_isr"), br)


def isr_in_use(rule: str, br: Broker) -> int:
    """hw_isr under the hw_pending_isr rule's value `rule`: what the invariants' compiled
    checks call (invariants/view.py), which carry the rule's value and no Config."""
    if rule == "maximal":
        return br.isr | br.pending
    return br.isr


def broker_epoch_eligible(cfg: Config, c: Controller, br: Broker, f: int) -> bool:
    """Partition.isBrokerEpochIsrEligible on leader br (KIP-903, 3.5.0, under
    isr_join_broker_epoch=checked): the broker epoch stored from f's last fetch is -1 (the model's
    0: a process not registered yet, RemoteLeaderEndPoint sends BrokerLifecycleManager.brokerEpoch)
    or equals f's epoch in the leader's metadata cache. The -1 bypass came with the check
    (KAFKA-14617) and no release has been without it. The controller's registration stands for
    the leader's cached one: when the leader's cache is behind a registration the model lets it
    propose what Kafka would only after applying the registration (more behaviours, never fewer).
    A stored epoch 0 with no fetch at all (Kafka's empty) never matters: the view is then unknown,
    so f is not caught up."""
    rule = cfg.rule("isr_join_broker_epoch")
    if rule == "unchecked":
        return True
    stored = br.vbepochs[f - 1]
    if cfg.rule("incarnations") != "kraft_steps":
        # The coarser restart: no process fetches unregistered, so no -1 to let through.
        return stored == c.bepochs[f - 1]
    if stored == 0:
        return rule == "checked"  # the proposed fix refuses -1 here too
    return stored == c.bepochs[f - 1]


def waits_for_joining(cfg: Config, state: State, br: Broker, f: int) -> bool:
    """Partition.maybeIncrementLeaderHW's shouldWaitForReplicaToJoinIsr (the
    hw_joining_replica rule): whether the HW waits for follower f, outside the ISR in use,
    as for an ISR member.

    Kafka asks ReplicaState.isCaughtUp: f's fetch reached the leader's LEO no longer than
    replica.lag.time.max.ms ago (KAFKA-4485, 0.10.2.0). The model keeps no clock; it reads
    that as the ISR shrink does (isr_lag=time): the leader saw f fetch at or above its HW,
    and f has not stalled since. Since 3.6.0 f must also be allowed to join the ISR,
    isReplicaIsrEligible (KAFKA-15021): not fenced and not in controlled shutdown as the
    leader's own metadata shows it (`Broker.ineligible`, the same view its ISR proposals
    read) and, under KIP-903, the broker epoch of its last fetch is -1 or its current
    registration's (broker_epoch_eligible).
    Before 0.10.2.0 only ISR members counted."""
    rule = cfg.rule("hw_joining_replica")
    if rule == "ignore" or br.views[f - 1] < br.hw or state.is_stalled(f):
        return False
    if rule == "wait" and not state.broker(f).alive:
        # A follower that is down fetches no more: its last fetch ages past
        # replica.lag.time.max.ms and it stops counting (the model has no clock: at once). Under
        # wait_eligible the controller fences it first (broker.session.timeout.ms is the shorter).
        return False
    if rule == "wait_eligible":
        if br.ineligible & bit(f):  # fenced, or in controlled shutdown (isBrokerShuttingDown)
            return False
        if not broker_epoch_eligible(cfg, state.controller, br, f):
            return False
    return True


def advance_leader_hw(cfg: Config, state: State, b: int) -> State:
    """Partition.maybeIncrementLeaderHW: HW = min LEO over the ISR in use and the followers
    about to join it (waits_for_joining); since 3.7 only at or above min ISR (KAFKA-15583).
    acks=all requests waiting in purgatory are answered once the HW passes them
    (DelayedProduce): acknowledged when the ISR is at min ISR,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND otherwise."""
    br = state.broker(b)
    if size(br.isr) < cfg.effective_minisr and cfg.rule("hw_min_isr") == "min_isr":
        return state
    isr = hw_isr(cfg, br)
    new_hw = br.leo
    for f in members(isr):
        if f != b:
            new_hw = min(new_hw, br.views[f - 1])
    if new_hw > br.hw and cfg.rule("hw_joining_replica") != "ignore":
        for f in cfg.brokers:
            # The condition's cheap part first: only a follower short of the new HW matters.
            if f != b and not isr & bit(f) and br.views[f - 1] < new_hw and waits_for_joining(cfg, state, br, f):
                new_hw = br.views[f - 1]
    if new_hw <= br.hw:
        return state
    answered = [entry for entry in br.purgatory if entry[0] < new_hw]
    nxt = state.with_broker(b, replace(br, hw=new_hw, purgatory=tuple(e for e in br.purgatory if e[0] >= new_hw)))
    if answered and size(isr) >= cfg.effective_minisr:
        # Acknowledged: the ghost learns it (and, for the durability table, how many brokers
        # stayed down from append to ack). Below min ISR the producer is told it failed.
        g = state.ghost
        acked, acked_down, down_now = g.acked, g.acked_down, brokers_down(cfg, state)
        for _offset, rec, down in answered:
            acked |= 1 << (rec - 1)
            acked_down = max(acked_down, min(down, down_now))
        if acked != g.acked:
            nxt = replace(nxt, ghost=replace(g, acked=acked, acked_down=acked_down))
    return nxt


def brokers_down(cfg: Config, state: State) -> int:
    """The ghost count of brokers down, kept only for the durability table (track_down)."""
    return sum(1 for other in state.brokers if not other.alive) if cfg.track_down else 0


def consumer_hw(cfg: Config, br: Broker) -> int:
    """The HW a consumer can read from this leader, or -1 when it exposes none.

    Under KIP-207 a new leader answers OFFSET_NOT_AVAILABLE until its HW has reached the
    start offset of its own epoch; before it, whatever HW the leader had was exposed.
    """
    return exposed_hw(cfg.rule("consumer_hw"), br)


def exposed_hw(rule: str, br: Broker) -> int:
    """consumer_hw under the consumer_hw rule's value `rule` (see isr_in_use for why)."""
    if rule == "kip207" and br.hw < br.start:
        return -1
    return br.hw


def observe(cfg: Config, state: State) -> State:
    """Update the ghost variables from what every broker that serves reads now exposes.

    A consumer fetches from whichever broker believes it leads (State.leads), a zombie
    included: Partition.fetchRecords answers a consumer up to the local HW whenever the
    replica is leader in its own metadata, and a consumer whose metadata is as old as the
    zombie's passes its leader-epoch check (KIP-320). So:

    committed: the longest log prefix below some serving broker's HW that extends what was
      committed before (only ever extended; a conflicting exposure is what ConsistentReads
      reports, and must not overwrite the record of it). Between two conflicting extensions
      the choice goes by content, not by broker, so that it commutes with symmetry.
    hw_seen: the highest HW a consumer could read from any serving broker (consumer_hw).
      HighWatermarkMonotonic holds the true leader to it: a consumer that read from a
      zombie and then follows the new leader must not see the HW go back.

    Whether a broker serves reads is asked through State.leads, and only then is the broker
    read: the fast path keys observations on what this function was recorded reading
    (checker/cache/fast.py observe_key), so a broker read otherwise is keyed on too.
    """
    g = state.ghost
    committed, hw_seen = g.committed, g.hw_seen
    n = len(g.committed)
    for b in cfg.brokers:
        if not state.leads(b):
            continue
        br = state.broker(b)
        if br.hw > len(committed) or (br.hw == len(committed) > n):
            exposed = tuple(rec for _epoch, rec in br.log[: br.hw])
            if exposed[:n] == g.committed and (len(exposed) > len(committed) or exposed < committed):
                committed = exposed
        seen = consumer_hw(cfg, br)
        if seen > hw_seen:
            hw_seen = seen
    if committed is g.committed and hw_seen == g.hw_seen:
        return state
    return replace(state, ghost=replace(g, committed=committed, hw_seen=hw_seen))
