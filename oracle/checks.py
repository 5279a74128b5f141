"""The properties a check tests, read from their Z3 declarations and interpreted.

Which invariants are tested is decided as the command line decides it (cli/main.py hands
the names to the suite, invariants/suite.py picks them): with no names, every invariant of
the catalog whose tier is not "named" (those are checked only when asked for, catalog.py
says why) plus the user's; with names, exactly those, looked up without regard to case in
the catalog and the user's file. Every reachability property of the configuration is
watched. This is written again here from the declarations' own data (tier, kind, name)
rather than taken from the suite, which compiles them.

Each invariant's parts are joined into one formula and turned into a tree once
(oracle/z3tree.py); each state's variable values come from the declared view
(invariants/view.py, View.values_fn: the table that says how each variable is read).
"""

from __future__ import annotations

from dataclasses import dataclass

import z3
from kafkamc.invariants.catalog import INVARIANTS, Invariant
from kafkamc.invariants.reach import catalog as reach_catalog
from kafkamc.invariants.view import View
from kafkamc.oracle.z3tree import Evaluator, Tree, interpreter, tree
from kafkamc.spec.config import Config

ON_DEMAND_TIER = "named"  # catalog.py: a promise tested only when named


def select(cfg: Config, names: list[str] | None = None, properties=None) -> tuple[list[Invariant], list]:
    """(invariants, reachability properties) a check of cfg tests, in the order they are tried."""
    user_invs, user_reach = properties.declared() if properties is not None else ((), ())
    pool = tuple(INVARIANTS) + tuple(user_invs)
    if names is None:
        chosen = [inv for inv in INVARIANTS if inv.tier != ON_DEMAND_TIER] + list(user_invs)
    else:
        chosen = [_by_name(n, pool) for n in names]
    return chosen, list(reach_catalog(cfg)) + list(user_reach)


def _by_name(name: str, pool: tuple[Invariant, ...]) -> Invariant:
    for inv in pool:
        if inv.name.lower() == name.lower():
            return inv
    raise KeyError(name)


@dataclass(frozen=True)
class Check:
    name: str
    kind: str  # "state", "action" or "reach"
    tree: Tree
    holds: Evaluator  # the tree's interpreter: env -> value


def _check(name: str, kind: str, formula: z3.BoolRef) -> Check:
    t = tree(formula)
    return Check(name, kind, t, interpreter(t))


def _formula(parts) -> z3.BoolRef:
    return z3.And([p for _, p in parts]) if parts else z3.BoolVal(True)


class Checks:
    """The selected properties as trees, and their verdicts on states and steps.

    Values are read through the views: V for a state, P (its names prefixed "prev.") for the
    state before a step. Callers pass values already read, so each state is read once.
    """

    def __init__(self, cfg: Config, names: list[str] | None = None, properties=None):
        self.cfg = cfg
        self.V = View(cfg, "", "s")
        self.P = View(cfg, "prev.", "p")
        invs, reach = select(cfg, names, properties)
        self.state: list[Check] = []
        self.action: list[Check] = []
        for inv in invs:
            if inv.kind == "state":
                self.state.append(_check(inv.name, "state", _formula(inv.build(cfg, self.V))))
            else:
                self.action.append(_check(inv.name, "action", _formula(inv.build(cfg, self.P, self.V))))
        self.reach = [_check(r.name, "reach", r.build(cfg, self.P, self.V)) for r in reach]
        self.values = self.V.values_fn()
        self.prev_values = self.P.values_fn()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.state + self.action]

    def failed_state(self, values: dict) -> str | None:
        """The first state invariant false on a state's values, or None."""
        return next((c.name for c in self.state if not c.holds(values)), None)

    def failed_step(self, env: dict) -> str | None:
        """The first action property false on a step (env: the values before and after)."""
        return next((c.name for c in self.action if not c.holds(env)), None)

    def reached(self, env: dict, names) -> list[str]:
        """Those of `names` whose reachability property this step makes true."""
        return [c.name for c in self.reach if c.name in names and c.holds(env)]

    # One state or step at a time, for tests and explanations.
    def state_verdicts(self, state) -> dict[str, bool]:
        values = self.values(state)
        return {c.name: bool(c.holds(values)) for c in self.state}

    def step_verdicts(self, prev, state) -> dict[str, bool]:
        env = {**self.prev_values(prev), **self.values(state)}
        return {c.name: bool(c.holds(env)) for c in self.action + self.reach}
