"""Crashes in an order one controller's clock can fence them in, for `kafkamc trace kafka`.

The controller fences a silent broker broker.session.timeout.ms after its last heartbeat, the same
timeout for every broker (ReplicationControlManager.maybeFenceOneStaleBroker, run every eighth of
the session timeout, fences one broker whose last contact has expired:
BrokerHeartbeatTracker.maybeRemoveExpired), and a crashed broker cannot register again while its old session lives
(ClusterControlManager.registerBroker refuses a second registration while
BrokerHeartbeatManager.hasValidSession holds). So on a real cluster two crashed brokers are fenced
in the order they crashed. The model has no clocks: a trace may fence, and even restart, a broker
that crashed last while one that crashed first is still unfenced.

Such a trace often has an interleaving that a real cluster can take: the earlier crash commutes
with the steps between it and the later one (a dead broker takes no step of its own, and none of
the steps between reads whether it is alive), so it can be moved to just after the later crash.
`in_crash_order` moves it and checks with the model that the moved trace is a path of the model
that meets the original at the later crash, state for state, and is the same path from there on:
the same final state, the same violation. Where no step can be moved, the refusal says why.

Timing (`crash_waits`): when the trace restarts the broker fenced first before the other is
fenced, the second crash must come late enough that the restart registers before the second fence,
and early enough that the second broker is dead when the first is fenced (alive, it would be
elected with the records the model says it lost). The replay waits for that moment
(realkafka/replay.py) with a session timeout long enough for a restart to fit (LONG_SESSION_MS).
"""

from __future__ import annotations

from dataclasses import replace

from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec.model import Model
from kafkamc.traces.trace import Trace, format_action

LONG_SESSION_MS = 20000
# How long before the first broker's fence the second crashes: its session must have timed out
# (its last heartbeat is up to broker.heartbeat.interval.ms before the kill) no later than that.
BEFORE_FENCE_S = 2.0


def out_of_order(steps: list) -> tuple[int, int, int, int] | None:
    """The first fence of a crashed broker that comes before the fence of a broker that crashed
    earlier and is still down: (fence step, its broker, the earlier crash's step, that broker)."""
    crashed: dict[int, int] = {}  # broker -> the step of its crash, while it is down and unfenced
    for i, (action, _state) in enumerate(steps[1:], start=1):
        if isinstance(action, lc.BrokerCrash):
            crashed[action.broker] = i
        elif isinstance(action, lc.BrokerSessionTimeout) and action.broker in crashed:
            died = crashed.pop(action.broker)
            earlier = sorted((step, b) for b, step in crashed.items() if step < died)
            if earlier:
                return i, action.broker, earlier[0][0], earlier[0][1]
        elif isinstance(action, lc.BrokerRestart):
            crashed.pop(action.broker, None)
    return None


def _words(steps: list, bad: tuple[int, int, int, int]) -> str:
    i, x, s, y = bad
    return (
        f"step {i}: {format_action(steps[i][0])} fences broker {x} before broker {y}, which crashed earlier "
        f"(step {s}): one broker.session.timeout.ms fences crashed brokers in the order they crashed"
    )


def _move(model: Model, steps: list, s: int, d: int) -> list | None:
    """The steps with the crash at s moved to just after step d (the later crash), if the model
    takes the moved steps and meets the original path at d; else None."""
    actions = [a for a, _st in steps]
    order = actions[1:s] + actions[s + 1 : d + 1] + [actions[s]]
    state = steps[0][1]
    out = [steps[0]]
    for k, action in enumerate(order, start=1):
        nxt = model.step(state, action)
        if k == d:  # the moved crash: it must land where the original path was after step d
            if steps[d][1] not in nxt:
                return None
            state = steps[d][1]
        elif k < s:
            state = steps[k][1]
        elif len(nxt) != 1:
            return None  # a step whose outcome the original path does not fix
        else:
            state = nxt[0]
        out.append((action, state))
    return out + list(steps[d + 1 :])


def in_crash_order(trace: Trace) -> Trace | str:
    """The trace, or an equivalent interleaving of it, whose crashed brokers are fenced in the
    order they crashed; or why there is none (one line)."""
    steps = list(trace.steps)
    model = Model(trace.config)
    for _ in range(len(steps)):
        bad = out_of_order(steps)
        if bad is None:
            return trace if steps == trace.steps else replace(trace, steps=steps)
        _i, x, s, _y = bad
        d = max(k for k, (a, _st) in enumerate(steps[:_i]) if isinstance(a, lc.BrokerCrash) and a.broker == x)
        moved = _move(model, steps, s, d)
        if moved is None:
            return _words(steps, bad) + f"; the crash at step {s} does not commute with the steps up to step {d}"
        steps = moved
    return _words(steps, bad) if (bad := out_of_order(steps)) else replace(trace, steps=steps)


def crash_waits(steps: list) -> dict[int, int]:
    """step of a crash -> the broker crashed before it whose fence and restart must both come
    before this crash's broker is fenced: that crash waits until just before that fence."""
    out = {}
    for i, (action, _state) in enumerate(steps[1:], start=1):
        if not isinstance(action, lc.BrokerCrash):
            continue
        down = {}
        for j, (a, _st) in enumerate(steps[1:i], start=1):
            if isinstance(a, lc.BrokerCrash):
                down[a.broker] = j
            elif isinstance(a, lc.BrokerRestart):
                down.pop(a.broker, None)
        kinds = lc.BrokerSessionTimeout | lc.BrokerRestart
        later = [(type(a), a.broker) for a, _st in steps[i + 1 :] if isinstance(a, kinds)]
        mine = (lc.BrokerSessionTimeout, action.broker)
        for x in down:
            if (lc.BrokerRestart, x) in later and mine in later:
                if later.index((lc.BrokerRestart, x)) < later.index(mine):
                    out[i] = x
    return out
