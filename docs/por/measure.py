"""Can partial-order reduction pay on this model? Visibility and independence, measured per field.

    python docs/por/measure.py                      # `kafkamc check --rf 3 --minisr 2`, a BFS prefix
    python docs/por/measure.py --walks 300          # plus states from seeded random walks (deeper)
    python docs/por/measure.py --config '{"rf": 2, "minisr": 2}' --bfs 0   # exhaustive (0: no limit)

For every transition of the plain spec (spec.model.Model: the step, then the ghost's
observation) from each state searched, it records the fields the step reads (its candidate
function's reads and its step function's, per field: docs/por/fields.py) and the fields it
changes. A transition is *invisible* when it changes no field that an invariant (state or
step invariant, before or after) or spec.hw.observe reads, and leaves the ghost alone. The
invariants' fields are recorded by running each view variable's own source (the Python the
compiled checks run, invariants/view.py) on recording states; observe's by running it so.

A state has an *ample candidate* when for some broker b the actions enumerated from b's
candidates that are enabled form a proper, non-empty subset of the enabled transitions, all
invisible, and each independent of every other enabled transition: neither writes what the
other reads, and they write different fields. That is the state-local test of the brief; the
real conditions are stronger (transitions that other brokers' steps could enable, the cycle
proviso), so its share of states bounds what an ample-set reduction could remove from above.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict, deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fields import PROXY, BudgetProxy, changed, plain, recording  # noqa: E402
from kafkamc.invariants.reads import SPEC_FUNCTIONS  # noqa: E402
from kafkamc.invariants.source import needed  # noqa: E402
from kafkamc.invariants.suite import InvariantSuite, _var_names  # noqa: E402
from kafkamc.spec.config import Config  # noqa: E402
from kafkamc.spec.model import Model  # noqa: E402
from kafkamc.spec.state import Broker, Controller, State  # noqa: E402


def var_reader(view, name: str):
    """fn(state): the value of one view variable, with only the prelude lines it needs (the
    view's prelude reads every broker's log up front, which would note reads it does not make)."""
    var = view.vars[name]
    lines = needed(view.prelude, var.source)
    body = "\n    ".join([*lines, f"return {var.source}"])
    ns: dict = dict(SPEC_FUNCTIONS)
    exec(f"def f({view.state_name}):\n    {body}\n", ns)
    return ns["f"]


def variable_fields(suite: InvariantSuite, samples: list[State]) -> dict[str, set]:
    """Each view variable's fields, recorded on the sample states (their union)."""
    out: dict[str, set] = {}
    for view in (suite.V, suite.P):
        for name in view.vars:
            fn = var_reader(view, name)
            rec: set = set()
            for s in samples:
                fn(recording(s, rec))
            out[name] = rec
    return out


def formula_fields(formulas, var_fields: dict) -> set:
    out: set = set()
    for f in formulas:
        for name in _var_names(f):
            out |= var_fields[name]
    return out


def visible_fields(cfg: Config, model: Model, samples: list[State], names=None) -> dict[str, set]:
    """What the invariants (all the default ones, or those named) and observe read. observe
    counts only when a chosen invariant reads the ghost it writes."""
    suite = InvariantSuite(cfg, names)
    vf = variable_fields(suite, samples)
    state_parts = [p for c in suite.state_invs for _, p in c.parts]
    step_parts = [p for c in suite.action_invs for _, p in c.parts]
    reach = [r.build(cfg, suite.P, suite.V) for r, _ in suite.reach]
    obs: set = set()
    for s in samples:
        rec: set = set()
        model.observation(cfg, recording(s, rec))
        obs |= rec
    ghost = {("g", n) for n in ("acked", "committed", "hw_seen", "acked_down")}
    inv = formula_fields(state_parts, vf) | formula_fields(step_parts, vf)
    if not any(f[0] == "g" for f in inv):
        obs, ghost = set(), set()
    return {
        "state invariants": formula_fields(state_parts, vf),
        "step invariants": formula_fields(step_parts, vf),
        "reachability": formula_fields(reach, vf),
        "observe": obs,
        "visible": inv | obs | ghost,
        "visible, invariants only": inv | ghost,
    }


def _expand(fields: set, bounds: list[str]) -> set:
    """("u", "*") (the whole budget read) as every bound's count."""
    if ("u", "*") in fields:
        return (fields - {("u", "*")}) | {("u", b) for b in bounds}
    return fields


class Transition:
    __slots__ = ("broker", "action", "reads", "writes", "outs", "invisible", "invisible_inv")

    def __init__(self, broker, action, reads, writes, outs):
        self.broker, self.action, self.reads, self.writes, self.outs = broker, action, reads, writes, outs
        self.invisible = self.invisible_inv = False  # set once the visible fields are known


def transitions(model: Model, s: State, check: bool) -> list[Transition]:
    """Every enabled transition from s with its field reads and writes."""
    cfg = model.config
    bounds = [b for b, _ in cfg.limits]
    out = []
    for b in cfg.brokers:
        for candidates in model.candidate_fns:
            crec: set = set()
            acts = candidates(
                cfg,
                PROXY[Controller](s.controller, crec, ("c",)),
                PROXY[Broker](s.broker(b), crec, ("b", b)),
                BudgetProxy(s.budget, crec, ("u",)),
                b,
            )
            for a in acts:
                rec: set = set()
                raw = model.unobserved_step(recording(s, rec), a)
                if not raw:
                    continue
                full = [model.observe(plain(o)) for o in raw]
                if check:
                    expect = model.step(s, a)
                    assert expect == full, (a, s)
                writes: set = set()
                for o in full:
                    writes |= changed(s, o)
                out.append(Transition(b, a, _expand(rec | crec, bounds), writes, full))
    return out


ELEMENTWISE = {"views", "vbepochs"}  # per-follower tuples: one fetch writes one element


def commute(model: Model, t: Transition, u: Transition) -> bool:
    """Whether t and u commute here by outcome: each stays enabled after the other, and both
    orders reach the same states (the ghost's observation included)."""
    one = {x for o in t.outs for x in model.step(o, u.action)}
    other = {x for o in u.outs for x in model.step(o, t.action)}
    return (
        bool(one)
        and one == other
        and all(model.step(o, u.action) for o in t.outs)
        and all(model.step(o, t.action) for o in u.outs)
    )


def independent(t: Transition, u: Transition, elementwise) -> bool:
    if callable(elementwise):  # the outcome test, given as a function of the pair
        return elementwise(t, u)
    clash = (t.writes & u.reads) | (u.writes & t.reads) | (t.writes & u.writes)
    if elementwise:
        clash = {f for f in clash if f[-1] not in ELEMENTWISE}
    return not clash


# The variants of the ample test: (name, visibility required, views and vbepochs elementwise).
VARIANTS = (
    ("field", True, False),
    ("field, views elementwise", True, True),
    ("independence only", False, False),
    ("commuting, field visibility", True, "commute"),
    ("commuting only", False, "commute"),
)


def ample(ts: list, visibility: bool, elementwise, blockers: Counter | None = None, model: Model | None = None):
    """The smallest broker's enabled steps that pass the state-local ample test, or None.
    elementwise "commute": independence is commuting by outcome (`commute`), not by fields."""
    if elementwise == "commute":
        assert model is not None
        elementwise = lambda t, u: commute(model, t, u)  # noqa: E731
    by_broker = defaultdict(list)
    for t in ts:
        by_broker[t.broker].append(t)
    best = None
    for b, group in by_broker.items():
        if len(group) == len(ts) or (visibility and not all(t.invisible for t in group)):
            continue
        others = [u for u in ts if u.broker != b]
        bad = next(((t, u) for t in group for u in others if not independent(t, u, elementwise)), None)
        if bad is None:
            if best is None or len(group) < len(best):
                best = group
        elif blockers is not None:
            t, u = bad
            why = sorted((t.writes & u.reads) | (u.writes & t.reads) | (t.writes & u.writes))
            f = why[0]
            blockers[(type(t.action).__name__, type(u.action).__name__, f"{f[0]}.{f[-1]}")] += 1
    return best


def reduced_bfs(model: Model, visible: set, variant: tuple, proviso: str, limit: int = 0) -> tuple:
    """(states, transitions taken, fully expanded states) of a BFS that expands an ample
    candidate where one passes the state-local test. proviso "all-new": the candidate is
    taken only when every state it leads to is new (then every cycle of the reduced graph
    closes through a fully expanded state: the cycle proviso for BFS); "one-new": when at least
    one is (the brief's wording; optimistic); "none": always (unsound: the ceiling)."""
    _, visibility, elementwise = variant
    init = [model.canonical(s) for s in model.initial_states()]
    seen = set(init)
    queue = deque(dict.fromkeys(init))
    taken = full = 0
    while queue and not (limit and len(seen) >= limit):
        s = queue.popleft()
        ts = transitions(model, s, False)
        for t in ts:
            t.invisible = not (t.writes & visible)
        group = ample(ts, visibility, elementwise, None, model)
        chosen = ts
        if group is not None:
            succ = [model.canonical(o) for t in group for o in t.outs]
            new = [c not in seen for c in succ]
            if proviso == "none" or (all(new) if proviso == "all-new" else any(new)):
                chosen = group
        if chosen is ts:
            full += 1
        for t in chosen:
            taken += 1
            for o in t.outs:
                c = model.canonical(o)
                if c not in seen:
                    seen.add(c)
                    queue.append(c)
    return len(seen), taken, full, not queue


def reduced_dfs(model: Model, visible: set, variant: tuple, limit: int = 0) -> tuple:
    """The same with a DFS and SPIN's stack proviso: the candidate is taken only when none of
    the states it leads to is on the search stack."""
    _, visibility, elementwise = variant
    seen: set = set()
    on_stack: set = set()
    taken = full = 0

    def succ(s):
        nonlocal taken, full
        ts = transitions(model, s, False)
        for t in ts:
            t.invisible = not (t.writes & visible)
        group = ample(ts, visibility, elementwise, None, model)
        chosen = ts
        if group is not None and not any(model.canonical(o) in on_stack for t in group for o in t.outs):
            chosen = group
        full += chosen is ts
        taken += len(chosen)
        return iter([model.canonical(o) for t in chosen for o in t.outs])

    for s0 in dict.fromkeys(model.canonical(s) for s in model.initial_states()):
        if s0 in seen:
            continue
        seen.add(s0)
        on_stack.add(s0)
        stack = [(s0, succ(s0))]
        while stack and not (limit and len(seen) >= limit):
            s, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on_stack.discard(s)
            elif nxt not in seen:
                seen.add(nxt)
                on_stack.add(nxt)
                stack.append((nxt, succ(nxt)))
    return len(seen), taken, full, not (limit and len(seen) >= limit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default='{"rf": 3, "minisr": 2}', help="Config settings as JSON")
    ap.add_argument("--bfs", type=int, default=15000, help="states of the BFS prefix to analyse (0: all)")
    ap.add_argument("--walks", type=int, default=0, help="seeded random walks to analyse as well")
    ap.add_argument("--walk-depth", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", type=int, default=500, help="states whose steps are compared with Model.step")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--invariant", action="append", help="visibility for this invariant alone (repeatable)")
    ap.add_argument("--reduce", action="store_true", help="then search exhaustively with each ample test")
    ap.add_argument(
        "--searches",
        default="",
        help="TEST/PROVISO pairs separated by ; to run (default all), e.g. 'field/dfs-stack;independence only/none'",
    )
    ap.add_argument("--reduce-limit", type=int, default=0, help="stop a reduced search at this many states")
    args = ap.parse_args()
    cfg = Config(**json.loads(args.config)).validated()
    model = Model(cfg)
    t0 = time.process_time()

    # The states: a BFS prefix over canonical states, then the walks' states.
    init = [model.canonical(s) for s in model.initial_states()]
    seen: set = set()
    order: list[State] = []
    queue = deque(dict.fromkeys(init))
    cache: dict = {}
    while queue and (args.bfs == 0 or len(order) < args.bfs):
        s = queue.popleft()
        if s in seen:
            continue
        seen.add(s)
        order.append(s)
        ts = cache[s] = transitions(model, s, len(order) <= args.check)
        for t in ts:
            for o in t.outs:
                c = model.canonical(o)
                if c not in seen:
                    queue.append(c)
    bfs_exhausted = not queue
    depth_note = f"BFS {'exhausted' if bfs_exhausted else 'prefix'}: {len(order)} states"
    rng = random.Random(args.seed)
    walk_states: list[State] = []
    for _ in range(args.walks):
        s = rng.choice(init)
        for _ in range(args.walk_depth):
            c = model.canonical(s)
            if c not in cache:
                cache[c] = transitions(model, c, False)
                walk_states.append(c)
            ts = cache[c]
            if not ts:
                break
            s = rng.choice(rng.choice(ts).outs)
    states = order + walk_states
    samples = states[:: max(1, len(states) // 2000)]
    vis = visible_fields(cfg, model, samples, args.invariant)
    visible, visible_inv = vis["visible"], vis["visible, invariants only"]

    per_type: dict = defaultdict(Counter)
    written_visible: dict = defaultdict(Counter)
    ample_states: Counter = Counter()
    ample_pruned: Counter = Counter()
    invisible_broker_states = enabled_total = 0
    blockers: Counter = Counter()
    field_pairs = field_not_commuting = 0
    for i, s in enumerate(states):
        ts = cache[s]
        if i < args.check:  # the recorded footprints, checked: steps independent by fields commute
            for t in ts:
                for u in ts:
                    if t.broker < u.broker and independent(t, u, False):
                        field_pairs += 1
                        field_not_commuting += not commute(model, t, u)
        for t in ts:
            name = type(t.action).__name__
            t.invisible = not (t.writes & visible)
            t.invisible_inv = not (t.writes & visible_inv)
            per_type[name]["transitions"] += 1
            per_type[name]["invisible"] += t.invisible
            per_type[name]["invisible_inv"] += t.invisible_inv
            per_type[name]["ghost"] += any(w[0] == "g" for w in t.writes)
            for w in t.writes & visible:
                written_visible[name][w if w[0] != "b" else ("b", w[2])] += 1
        enabled_total += len(ts)
        invisible_broker_states += any(
            len(g) < len(ts) and all(t.invisible for t in g)
            for g in [[t for t in ts if t.broker == x] for x in {t.broker for t in ts}]
        )
        for name, visibility, elementwise in VARIANTS:
            group = ample(ts, visibility, elementwise, blockers if name == "field" else None, model)
            if group is not None:
                ample_states[name] += 1
                ample_pruned[name] += len(ts) - len(group)

    def pct(a, b):
        return f"{100 * a / b:5.1f}%" if b else "    -"

    print(
        f"config {args.config}; {depth_note}; random-walk states {len(walk_states)}; "
        f"CPU {time.process_time() - t0:.0f} s"
    )
    print()
    print("Visible fields (read by an invariant or by the ghost's observation):")
    for k, v in vis.items():
        shown = sorted({(f[0], f[-1]) if f[0] == "b" else f for f in v})
        print(f"  {k}: {len(v)} fields: " + ", ".join(".".join(map(str, f)) for f in shown))
    print()
    print(
        f"{'action type':32} {'transitions':>11} {'invisible':>9} {'inv-only':>9} {'ghost':>7}  "
        "most written visible fields"
    )
    tot: Counter = Counter()
    for name, c in sorted(per_type.items(), key=lambda kv: -kv[1]["transitions"]):
        tot.update(c)
        top = ", ".join(
            f"{'.'.join(map(str, w))} {pct(n, c['transitions']).strip()}"
            for w, n in written_visible[name].most_common(3)
        )
        print(
            f"{name:32} {c['transitions']:>11} {pct(c['invisible'], c['transitions']):>9} "
            f"{pct(c['invisible_inv'], c['transitions']):>9} {pct(c['ghost'], c['transitions']):>7}  {top}"
        )
    print(
        f"{'all':32} {tot['transitions']:>11} {pct(tot['invisible'], tot['transitions']):>9} "
        f"{pct(tot['invisible_inv'], tot['transitions']):>9} {pct(tot['ghost'], tot['transitions']):>7}"
    )
    print()
    n = len(states)
    print(f"states analysed: {n}; enabled transitions per state: {enabled_total / max(n, 1):.2f}")
    print(
        "states where some broker's enabled steps are all invisible (proper subset): "
        f"{invisible_broker_states} ({pct(invisible_broker_states, n).strip()})"
    )
    print(
        f"pairs of steps of different brokers independent by fields, checked to commute: {field_pairs} "
        f"({field_not_commuting} did not)"
    )
    print(f"{'ample test':28} {'states with a candidate':>24} {'transitions left out':>22}")
    for name, _, _ in VARIANTS:
        print(
            f"{name:28} {ample_states[name]:>14} {pct(ample_states[name], n):>9} "
            f"{ample_pruned[name]:>12} {pct(ample_pruned[name], enabled_total):>9}"
        )
    print("what most often made an invisible broker's steps dependent (its step, the other step):")
    for (first, second, field), count in blockers.most_common(10):
        print(f"  {first} / {second} on {field}: {count}")
    reduced = {}
    if args.reduce:
        print()
        print(f"{'reduced BFS: ample test':28} {'proviso':9} {'states':>9} {'transitions':>12} {'fully expanded':>15}")
        for variant in VARIANTS:
            for proviso in ("all-new", "one-new", "none", "dfs-stack"):
                if args.searches and f"{variant[0]}/{proviso}" not in args.searches.split(";"):
                    continue
                if proviso == "dfs-stack":
                    n_states, taken, full, done = reduced_dfs(model, visible, variant, args.reduce_limit)
                else:
                    n_states, taken, full, done = reduced_bfs(model, visible, variant, proviso, args.reduce_limit)
                reduced[f"{variant[0]} / {proviso}"] = (n_states, taken, full, done)
                print(
                    f"{variant[0]:28} {proviso:9} {n_states:>9} {taken:>12} {full:>15}"
                    + ("" if done else "  (stopped at the limit)")
                )
        print(f"CPU {time.process_time() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "config": json.loads(args.config),
                    "bfs_states": len(order),
                    "bfs_exhausted": bfs_exhausted,
                    "walk_states": len(walk_states),
                    "per_type": {k: dict(v) for k, v in per_type.items()},
                    "ample_states": dict(ample_states),
                    "invisible_broker_states": invisible_broker_states,
                    "transitions": enabled_total,
                    "pruned": dict(ample_pruned),
                    "reduced": reduced,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
