"""Random fault schedules for trace validation, reproducible from a seed.

A schedule is data: a list of steps, each a dict with "do" and its arguments. It is drawn from
the seed alone, knowing only what the schedule itself did (which brokers it killed or stopped);
where a step needs the cluster's current state (which replica a reassignment replaces, which
broker leads when a link is cut, how much of a log a power loss keeps), it names a choice that
the runner resolves against the cluster at that moment. Kafka's own timing is not reproducible,
so the same seed gives the same commands, not the same run.

Steps:
    produce                   one acks=all send, answered or not
    kill B                    SIGKILL (a hard crash; the page cache survives)
    powerloss B pick          SIGKILL, then the partition's segments cut back to a prefix between
                              Kafka's recovery point and the log end (`pick` in [0, 1) chooses
                              which: realkafka/faults.py); only with power_loss
    restart B                 start a killed or stopped broker on its folder
    stall B                   SIGSTOP past replica.lag.time.max.ms, with a send meanwhile, then SIGCONT
    zombie B                  SIGSTOP past broker.session.timeout.ms (the controller fences it), then SIGCONT
    shutdown B                SIGTERM: a controlled shutdown; the runner waits for the exit
    elect                     ElectLeaders PREFERRED
    reassign I                AlterPartitionReassignments: the I-th replica (mod RF) moves to a broker outside
    cut LINK pick             a network partition of one of `links` (faults.LINKS: leader-controller,
                              leader-follower, follower-controller; `pick` chooses the follower),
                              with a send meanwhile, healed after the timeout it is meant to pass
"""

from __future__ import annotations

import random
from typing import Any

WEIGHTS = {"produce": 6, "kill": 2, "restart": 3, "stall": 2, "zombie": 1, "shutdown": 1, "elect": 1, "reassign": 1}
# Only when asked for (a schedule without them is drawn exactly as before they existed).
POWER_LOSS_WEIGHT = 2
CUT_WEIGHT = 3
DOWN = ("kill", "shutdown", "powerloss")


def schedule(
    seed: int, faults: int, brokers: int, rf: int, links: tuple[str, ...] = (), power_loss: bool = False
) -> list[dict[str, Any]]:
    """`faults` steps other than produce (and as many sends as fall between them); at most
    rf - 1 brokers down at once, and every broker restarted at the end."""
    rng = random.Random(seed)
    weights = dict(WEIGHTS)
    if power_loss:
        weights["powerloss"] = POWER_LOSS_WEIGHT
    if links:
        weights["cut"] = CUT_WEIGHT
    down: list[int] = []
    steps: list[dict[str, Any]] = []
    done = 0
    while done < faults:
        up = [b for b in range(1, brokers + 1) if b not in down]
        choices = {k: w for k, w in weights.items() if _possible(k, up, down, brokers, rf)}
        kind = rng.choices(list(choices), weights=list(choices.values()))[0]
        step: dict[str, Any] = {"do": kind}
        if kind in ("kill", "stall", "zombie", "shutdown", "powerloss"):
            step["broker"] = rng.choice(up)
        elif kind == "restart":
            step["broker"] = rng.choice(down)
        elif kind == "reassign":
            step["index"] = rng.randrange(rf)
        elif kind == "cut":
            step["link"] = rng.choice(sorted(links))
        if kind in ("powerloss", "cut"):
            step["pick"] = round(rng.random(), 6)
        if kind in DOWN:
            down.append(step["broker"])
        elif kind == "restart":
            down.remove(step["broker"])
        steps.append(step)
        done += kind != "produce"
    steps += [{"do": "restart", "broker": b} for b in down]
    return steps + [{"do": "produce"}]


def _possible(kind: str, up: list[int], down: list[int], brokers: int, rf: int) -> bool:
    if kind in DOWN:
        return len(down) < rf - 1
    if kind == "cut":  # with rf - 1 brokers down a partition may have no live follower to cut
        return len(down) < rf - 1
    if kind == "restart":
        return bool(down)
    if kind == "reassign":
        return brokers > rf
    return True
