"""What several test files share: one plain breadth-first search over a model.

The test modules import it as `helpers` (tests/conftest.py puts tests/ on sys.path, since
pytest runs with --import-mode=importlib and tests/ is not a package).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace

from kafkamc.spec.config import Config
from kafkamc.spec.model import Model


def bfs(model) -> Iterator[tuple]:
    """Every transition of `model`, breadth first in its successor order, as
    (state, action, next, new): the initial states first as (None, None, s, new), then
    every successor of every new state, into a state seen before or not (new says which).

    States are told apart by model.fingerprint when the model has one (the fast model), else
    by model.canonical(state) itself (the plain spec model: no fingerprint involved). The
    consumer stops whenever it likes; the search goes on only as far as it is read.
    """
    key = getattr(model, "fingerprint", None) or model.canonical
    seen: set = set()
    queue: deque = deque()

    def is_new(state) -> bool:
        k = key(state)
        if k in seen:
            return False
        seen.add(k)
        queue.append(state)
        return True

    for s in model.initial_states():
        yield None, None, s, is_new(s)
    while queue:
        s = queue.popleft()
        for action, nxt in model.successors(s):
            yield s, action, nxt, is_new(nxt)


# Issue 16's small pinned configurations (tests/test_controlled_shutdown.py, test_reassignment.py),
# which every engine must agree on.
CONTROLLED_SHUTDOWN_SMALL = dict(
    rf=3,
    minisr=2,
    max_records=1,
    max_hard_crashes=0,
    max_isr_shrinks=0,
    max_controlled_shutdowns=1,
    max_leader_elections=1,
)
REASSIGNMENT_SMALL = dict(
    rf=3, minisr=2, broker_count=4, max_records=1, max_hard_crashes=0, max_isr_shrinks=0, max_reassignments=1
)


def play(cfg: Config, *actions, state=None):
    """The state `actions` lead to from `state` (by default the first initial state); each
    action must be enabled and lead to one state."""
    model = Model(cfg)
    s = model.initial_states()[0] if state is None else state
    for a in actions:
        outs = model.step(s, a)
        assert len(outs) == 1, f"{a} is not enabled (or not deterministic)"
        s = outs[0]
    return s


def bfs_states(model, n: int) -> list:
    """The first n distinct states of `model`, breadth first (all of them when there are fewer)."""
    out: list = []
    if n <= 0:
        return out
    for _prev, _action, s, new in bfs(model):
        if new:
            out.append(s)
            if len(out) >= n:
                break
    return out


def bfs_until(cfg_or_model, found: Callable) -> tuple | None:
    """Breadth first over the plain spec model of a Config (or over the model given) until
    found(state, action, next) is true of a transition; returns (state, action, next), or
    None when no reachable transition satisfies it."""
    model = Model(cfg_or_model) if isinstance(cfg_or_model, Config) else cfg_or_model
    for prev, action, nxt, _new in bfs(model):
        if prev is not None and found(prev, action, nxt):
            return prev, action, nxt
    return None


def sample_states(cfg: Config, n: int, seed: int = 7) -> list:
    """n reachable states of cfg (fewer when it has fewer), breadth first from every
    assignment order over the plain spec model without symmetry, in a shuffled order."""
    states = bfs_states(Model(replace(cfg, symmetry=False)), n)
    random.Random(seed).shuffle(states)
    return states


# The installed `kafkamc` entry point, run as a user would run it. Test modules import these
# from here: `from conftest import` is ambiguous once tests/conformance has a conftest too.
EXE = shutil.which("kafkamc", path=os.path.dirname(sys.executable)) or shutil.which("kafkamc")


def run_kafkamc(*args, cwd=None, timeout=600, columns=200):
    assert EXE, "the kafkamc entry point is not installed"
    env = dict(os.environ, COLUMNS=str(columns))
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def skip_without_namespaces() -> None:
    """Skip the calling test, with the reason in one line, where this machine cannot make the
    network namespace the partition harness runs in (realkafka/netns.py)."""
    import pytest
    from kafkamc.realkafka.netns import Network, NoNetwork

    try:
        Network({}).__enter__().__exit__(None, None, None)
    except NoNetwork as e:
        pytest.skip(str(e))


def load_recorded(folder, run) -> tuple:
    """A recorded conform run (tests/data/conform/) put in `folder` as its observations.json and
    loaded as `kafkamc conform --validate` loads it: (setup, events, data)."""
    from kafkamc.realkafka.conform import load

    (folder / "observations.json").write_text(run.read_text())
    return load(folder)
