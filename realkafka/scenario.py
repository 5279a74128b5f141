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
    lc.BrokerHeartbeat,  # a new incarnation's unfence (no zombie is made here: no fence is commanded)
    md.MetadataUpdate,
    cs.ControlledShutdownComplete,
    fe.OffsetsForLeaderEpoch,
    fe.Fetch,
    ap.AlterPartition,
    ap.HandleAlterPartitionResponse,
)


def _shrinks(state: State, a: object) -> bool:
    return isinstance(a, ap.AlterPartition) and set(a.isr) < set(state.controller.in_order(state.controller.isr))


def settled_trace(cfg: Config, commands: list) -> Trace:
    """The path from the model's first initial state (assignment 1..rf) through `commands`, each
    followed by Kafka's own steps until quiet. Raises ValueError for a command the model cannot
    take where it comes."""
    model = Model(cfg)
    state = model.initial_states()[0]
    steps: list = [(None, state)]

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
                (a for a in model.candidates(now) if isinstance(a, SETTLE) and not _shrinks(now, a)),
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


SCENARIOS = {"rolling-restart": rolling_restart}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in SCENARIOS:
        print(f"usage: python -m kafkamc.realkafka.scenario {{{','.join(SCENARIOS)}}} OUT.json", file=sys.stderr)
        return 2
    path = SCENARIOS[argv[0]]().save(Path(argv[1]))
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
