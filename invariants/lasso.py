"""Whether a lasso really violates a liveness property: what `trace replay` and the search
itself check before a liveness counterexample is believed.

A lasso is steps[0..n] with the cycle starting at `loop`: steps[loop..n] go round, and the
last state equals steps[loop]'s (with loop == n the state stutters forever). It violates an
obligation when some state up to the loop triggers it with the goal false, the goal stays
false from there on, and the cycle keeps `hold`, takes no fault step and is fair: every
weakly fair action enabled in all of its states, and every strongly fair action enabled in
any of them, is taken by one of its steps (spec/next.py, Action.fairness).
"""

from __future__ import annotations

from kafkamc.invariants.liveness import LivenessSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.next import describe


def lasso_problem(cfg: Config, name: str, steps: list, loop: int) -> str | None:
    """None when the lasso violates property `name`, else why it does not. States are
    evaluated by Z3 on the declarations (LivenessSuite.confirm), not by the compiled code."""
    n = len(steps) - 1
    if not 0 <= loop <= n:
        return f"its loop starts at step {loop}, outside the trace's 0..{n}"
    if loop < n and steps[n][1] != steps[loop][1]:
        return f"the cycle does not close: the last state is not the state of step {loop}"
    model = Model(cfg)
    fairness = {a.type: a.fairness for a in model.actions}
    cycle = [a for a, _ in steps[loop + 1 :]]
    faults = [describe(a) for a in cycle if fairness[type(a)] == "fault"]
    if faults:
        return f"the cycle takes the fault {faults[0]}, which happens only finitely often"
    states = [s for _, s in steps[loop:n]] if loop < n else [steps[n][1]]
    weak: set | None = None
    strong: set = set()
    for s in states:
        enabled = [a for a, _ in model.successors(s)]
        here = {a for a in enabled if fairness[type(a)] == "weak"}
        weak = here if weak is None else weak & here
        strong |= {a for a in enabled if fairness[type(a)] == "strong"}
    starved = sorted(describe(a) for a in ((weak or set()) | strong) - set(cycle))
    if starved:
        return f"the cycle is not fair: it never takes {starved[0]}, which stays enabled"
    suite = LivenessSuite(cfg, [name])
    for i, (prop, _) in enumerate(suite.obligations):
        values = [suite.confirm(i, s) for _, s in steps]
        cycle_values = values[loop:]
        if prop.form == "stays":
            if all(v[2] for v in cycle_values) and not all(v[1] for v in cycle_values):
                return None
            continue
        goal_free_from = n + 1
        while goal_free_from > 0 and not values[goal_free_from - 1][1]:
            goal_free_from -= 1
        triggered = any(values[j][0] for j in range(goal_free_from, n + 1))
        if triggered and all(values[j][2] for j in range(loop, n + 1)):
            return None
    return f"it does not violate {name}: no state triggers it with the goal never holding after"
