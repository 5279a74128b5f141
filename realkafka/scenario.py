"""A trace written as an operator's commands, with Kafka's own steps filled in by the model, for
`kafkamc trace kafka` (realkafka/replay.py) to replay.

    python -m kafkamc.realkafka.scenario rolling-restart OUT.json

After each command the model takes Kafka's own steps (metadata, the end of a controlled shutdown,
epoch checks, fetches, ISR changes other than shrinks) until none changes the state: what a
healthy cluster does by itself between an operator's commands. ReplicaStall and the checkpoint
are never taken (a healthy cluster does not stall), nor an ISR shrink.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from kafkamc.spec import alter_partition as ap
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec import controlled_shutdown as cs
from kafkamc.spec import elect_leaders as el
from kafkamc.spec import fetch as fe
from kafkamc.spec import metadata as md
from kafkamc.spec import produce as pr
from kafkamc.spec.broker_lifecycle import BrokerRestart
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.state import State
from kafkamc.traces.trace import Trace, format_action

# Kafka's own steps, in the order they are tried: metadata first, as a broker applies it at once.
SETTLE = (
    lc.BrokerRegistration,
    lc.BrokerHeartbeat,  # a new incarnation's unfence; a broker cut from the controller sends none (zombie_leader)
    md.MetadataUpdate,
    cs.ControlledShutdownComplete,
    fe.OffsetsForLeaderEpoch,
    fe.Fetch,
    ap.AlterPartition,
    ap.HandleAlterPartitionResponse,
)


def _shrinks(state: State, a: object) -> bool:
    return isinstance(a, ap.AlterPartition) and set(a.isr) < set(state.controller.in_order(state.controller.isr))


def settled_trace(
    cfg: Config, commands: list, cut: Callable[[object], bool] = lambda _a: False, start: Trace | None = None
) -> Trace:
    """The path from the model's first initial state (assignment 1..rf), or from the end of
    `start`, through `commands`, each followed by Kafka's own steps until quiet, leaving out those
    `cut` names (a step a network partition keeps from happening). Raises ValueError for a command
    the model cannot take where it comes."""
    model = Model(cfg)
    steps: list = list(start.steps) if start is not None else [(None, model.initial_states()[0])]

    def take(action: object) -> bool:
        nxt = [s for s in model.step(steps[-1][1], action) if s != steps[-1][1]]
        if nxt:
            steps.append((action, nxt[0]))
        return bool(nxt)

    for command in commands:
        if not take(command):
            raise ValueError(f"step {len(steps)}: the model cannot take {format_action(command)} here")
        for _ in range(200):
            now = steps[-1][1]
            own = sorted(
                (a for a in model.candidates(now) if isinstance(a, SETTLE) and not _shrinks(now, a) and not cut(a)),
                key=lambda a: SETTLE.index(type(a)),
            )
            if not any(take(a) for a in own):
                break
    return Trace(cfg, steps)


def rolling_restart() -> Trace:
    """r1 acknowledged; the leader (broker 1) shuts down under control and restarts; a preferred
    election gives it back its leadership; r2 acknowledged. Every promise holds on the way."""
    cfg = Config(
        rf=3,
        minisr=2,
        max_records=2,
        max_hard_crashes=0,
        max_isr_shrinks=1,
        max_controlled_shutdowns=1,
        max_leader_elections=1,
        auto_rebalance=False,
    )
    return settled_trace(
        cfg, [pr.Produce(1, 1), cs.ControlledShutdown(1), BrokerRestart(1), el.ElectLeaders(1), pr.Produce(1, 2)]
    )


def zombie_leader() -> Trace:
    """r1 acknowledged; leader 1 is cut from the controller (not from its followers or clients),
    which fences it after its session times out and elects broker 2. Broker 1, cut off from the
    metadata, still leads in its own view: it takes r2 (served by a zombie), which no follower
    fetches, so r2's acks=all produce waits. The link heals: broker 1 heartbeats, learns epoch 2,
    follows broker 2 and truncates r2. Replayed with partitions (`kafkamc trace kafka`'s
    network mode): ControllerFenceBroker is the cut, BrokerHeartbeat the heal."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_hard_crashes=0, max_fences=1, auto_rebalance=False)

    def cut(a: object) -> bool:  # broker 1 reaches no controller between the fence and the heal
        return (
            isinstance(a, md.MetadataUpdate | ap.AlterPartition | lc.BrokerHeartbeat)
            and getattr(a, "broker", getattr(a, "leader", 0)) == 1
        )

    fenced = settled_trace(cfg, [pr.Produce(1, 1), lc.ControllerFenceBroker(1), pr.Produce(1, 2)], cut)
    return settled_trace(cfg, [lc.BrokerHeartbeat(1)], start=fenced)


def isolated_follower() -> Trace:
    """r1 acknowledged; follower 3 is cut from its leader (ReplicaStall, replayed as the cut): its
    fetches stop, leader 1 drops it from the ISR after replica.lag.time.max.ms (AlterPartition to
    ISR [1, 2]), and r2 is committed and acknowledged without it."""
    cfg = Config(rf=3, minisr=2, max_records=2, max_hard_crashes=0, max_isr_shrinks=1, auto_rebalance=False)

    def cut(a: object) -> bool:  # broker 3 reaches no leader while stalled
        return isinstance(a, fe.Fetch | fe.OffsetsForLeaderEpoch) and a.follower == 3

    first = settled_trace(cfg, [pr.Produce(1, 1)])
    return settled_trace(cfg, [fe.ReplicaStall(3), pr.Produce(1, 2), ap.AlterPartition(1, (1, 2))], cut, first)


SCENARIOS = {"rolling-restart": rolling_restart, "zombie-leader": zombie_leader, "isolated-follower": isolated_follower}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in SCENARIOS:
        print(f"usage: python -m kafkamc.realkafka.scenario {{{','.join(SCENARIOS)}}} OUT.json", file=sys.stderr)
        return 2
    path = SCENARIOS[argv[0]]().save(Path(argv[1]))
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
