"""The invariants of one configuration: fast evaluators for the search, Z3 to confirm and explain."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import z3
from kafkamc.invariants.catalog import DEFAULT, INVARIANTS, Invariant, by_name
from kafkamc.invariants.compile import Conjunction, compile_function, compile_guarded
from kafkamc.invariants.fields import Reads, group_fields, merged
from kafkamc.invariants.properties import PropertyFile
from kafkamc.invariants.reach import catalog as reach_catalog
from kafkamc.invariants.reads import SPEC_FUNCTIONS
from kafkamc.invariants.source import ShippedChecks, groups_of
from kafkamc.invariants.view import View, z3_value
from kafkamc.spec.config import Config
from kafkamc.spec.next import BOUNDS


@dataclass
class FailedPart:
    name: str
    values: dict  # variable name -> value, for the variables the part reads

    def to_dict(self) -> dict:
        return {"part": self.name, "values": self.values}


@dataclass
class Explanation:
    invariant: str
    meaning: str
    parts: list = field(default_factory=list)  # FailedPart, in declaration order

    def to_dict(self) -> dict:
        return {"invariant": self.invariant, "meaning": self.meaning, "failed_parts": [p.to_dict() for p in self.parts]}


class Disagreement(AssertionError):
    """The generated evaluator and Z3 disagree: a bug in the compiler, never in the model."""


class _Compiled:
    def __init__(self, inv: Invariant, parts, fn):
        self.inv, self.parts, self.fn = inv, parts, fn
        self.formula = z3.And([p for _, p in parts]) if parts else z3.BoolVal(True)


class InvariantSuite:
    def __init__(self, cfg: Config, names: list[str] | None = None, properties: PropertyFile | None = None):
        # Next's bounds fixed (a no-op for a command's configuration): properties read cfg.max_records.
        self.cfg = cfg = cfg.bounded(BOUNDS)
        self.V = View(cfg, "", "s")
        self.P = View(cfg, "prev.", "p")
        user_invs, user_reach = properties.declared() if properties is not None else ((), ())
        pool = INVARIANTS + user_invs
        # Unnamed, every invariant but those checked only when named (catalog.ON_DEMAND).
        chosen = DEFAULT + user_invs if names is None else tuple(by_name(n, pool) for n in names)
        self.state_invs: list[_Compiled] = []
        self.action_invs: list[_Compiled] = []
        sources = {v.name: v.source for v in list(self.V.vars.values()) + list(self.P.vars.values())}
        for inv in chosen:
            if inv.kind == "state":
                parts = inv.build(cfg, self.V)
                fn = compile_function(inv.name, ["s"], self.V.prelude, z3.And([p for _, p in parts]), sources)
                self.state_invs.append(_Compiled(inv, parts, fn))
            else:
                parts = inv.build(cfg, self.P, self.V)
                fn = compile_function(
                    inv.name, ["p", "s"], self.P.prelude + self.V.prelude, z3.And([p for _, p in parts]), sources
                )
                self.action_invs.append(_Compiled(inv, parts, fn))
        # Reachability properties, compiled the same way; see reach.py.
        self.reach = []
        for r in reach_catalog(cfg) + user_reach:
            fn = compile_function(
                r.name, ["p", "s"], self.P.prelude + self.V.prelude, r.build(cfg, self.P, self.V), sources
            )
            self.reach.append((r, fn))
        # Every state (and every step) invariant as one function: most states pass them all,
        # and one call with one prelude costs less than one per invariant.
        self._sources = sources
        parts = [part for c in self.state_invs for _, part in c.parts]
        self._state_parts = Conjunction(["s"], self.V.prelude, parts, sources)
        self._part_reads = [self._reads(part) for part in parts]
        self._state_tests: dict = {}  # changed components -> compiled test, see state_test
        self._field_analysis: dict | None = None  # state name -> fields.Reads, see _field_reads
        self._all_states = self.state_test(-1)
        self._all_steps = compile_function(
            "AllStepInvariants",
            ["p", "s"],
            self.P.prelude + self.V.prelude,
            z3.And([c.formula for c in self.action_invs]),
            sources,
            hoist=True,
        )
        self._values = self.V.values_fn()
        self._prev_values = self.P.values_fn()

    @property
    def names(self) -> list[str]:
        return [c.inv.name for c in self.state_invs + self.action_invs]

    # The hot path: one call per explored state (and per transition for action properties).
    def check_state(self, state) -> str | None:
        if self._all_states(state):
            return None
        return next(c.inv.name for c in self.state_invs if not c.fn(state))

    @property
    def state_groups(self) -> tuple:
        """The groups of state invariant parts, by the components they read (groups_of)."""
        return groups_of(self._part_reads)

    @property
    def state_group_fields(self) -> tuple:
        """Per state group, per component it reads, the fields its parts read of it, or None
        for the whole component (invariants/fields.py)."""
        parts = [part for c in self.state_invs for _, part in c.parts]
        return group_fields(self.state_groups, self._part_reads, [self._field_reads(p, 0) for p in parts])

    def _field_reads(self, formula: z3.BoolRef, after: int) -> dict:
        """position -> the fields a formula reads of that component (invariants/fields.py), the
        state before's at positions 0 to rf + 2 and the state after's from `after` on (as
        _step_reads lays them out; a state formula: after=0)."""
        reads = self._field_analysis
        if reads is None:
            n = len(self.cfg.brokers)
            reads = self._field_analysis = {
                self.V.state_name: Reads(self.V.prelude, self.V.state_name, n, SPEC_FUNCTIONS),
                self.P.state_name: Reads(self.P.prelude, self.P.state_name, n, SPEC_FUNCTIONS),
            }
        out: list[dict] = []
        for name in _var_names(formula):
            before = bool(self.P.prefix) and name.startswith(self.P.prefix)
            read = reads[self.P.state_name if before else self.V.state_name].of(self._sources[name])
            out.append(merged([read], 0 if before else after))
        return merged(out)

    def state_test(self, changed: int):
        """fn(state), true when every state invariant holds, for a state whose parent passed
        them all and that differs from it only in the `changed` components (a bitmask: bit 0
        the controller, bit b broker b, bit rf+1 the ghost; -1 all). A part that reads none
        of them has the parent's value, true, so only the others are compiled in: a step
        that changes one follower leaves most of the parts alone."""
        fn = self._state_tests.get(changed)
        if fn is None:
            fn = self._state_tests[changed] = self._state_parts.changed_test(self._part_reads, changed)
        return fn

    def _reads(self, formula: z3.BoolRef) -> int:
        """The components a formula of the state view reads, as state_test's bitmask: the state
        after's bits of _step_reads, where one home lays the components out."""
        return self._step_reads(formula) >> (len(self.cfg.brokers) + 3)

    def _quiet_sets(self, conjuncts: list) -> tuple:
        """The quiet test's groups of conjuncts (groups_of, by _step_reads): for any step, and
        for a step that keeps the controller, where Z3 folds some conjuncts to true and others
        to fewer components; each set with the fields its groups read of each component of
        the step's two states (invariants/fields.py)."""
        conjuncts = [part for c in conjuncts for part in _split(c)]
        unchanged = self._controller_unchanged()
        same = [z3.simplify(z3.substitute(c, *unchanged)) for c in conjuncts]
        w = len(self.cfg.brokers) + 3
        out = []
        for kept in ([c for c in conjuncts if not z3.is_true(c)], [c for c in same if not z3.is_true(c)]):
            reads = [self._step_reads(c) for c in kept]
            groups = groups_of(reads)
            out.append((groups, group_fields(groups, reads, [self._field_reads(c, w) for c in kept])))
        return tuple(out)

    def _step_reads(self, formula: z3.BoolRef) -> int:
        """The components a formula of a step reads, as the native core lays out a step's two
        states: the state before at bits 0 to rf + 2 (as _reads's bits, the budget last), the
        state after shifted past it. A source that reads a state whole reads all of it."""
        w = len(self.cfg.brokers) + 3
        bits = {}
        for view, shift in ((self.P, 0), (self.V, w)):
            name = view.state_name
            bits[name] = ((1 << w) - 1) << shift
            bits[f"{name}_c"], bits[f"{name}_g"] = 1 << shift, 1 << (shift + w - 2)
            bits.update({f"{name}_b{b}": 1 << (shift + b) for b in self.cfg.brokers})
        out = 0
        for name in _var_names(formula):
            for component in self._components(self._sources[name]):
                out |= bits[component]
        return out

    def check_step(self, prev, state) -> str | None:
        if self._all_steps(prev, state):
            return None
        return next(c.inv.name for c in self.action_invs if not c.fn(prev, state))

    def reach_functions(self) -> list:
        """(name, fn(prev, state)) for every reachability property."""
        return [(r.name, fn) for r, fn in self.reach]

    def quiet_step(self, reach_names: list):
        """fn(prev, state), true when the step has nothing to report: every step invariant
        holds and none of the named reachability properties does. One call per transition;
        only when it is false does the search ask which."""
        chosen = [r.build(self.cfg, self.P, self.V) for r, _ in self.reach if r.name in reach_names]
        formula = z3.And(
            [c.formula for c in self.action_invs] + [z3.Not(z3.Or(chosen))]
            if chosen
            else [c.formula for c in self.action_invs]
        )
        # Most steps leave the controller as it was; Z3 simplifies the test for them (the
        # properties about a controller change fold to false) and the search picks it by
        # identity, which for the same object means the same values.
        # The guard costs what it saves when nothing folds (every property reached).
        same = z3.simplify(z3.substitute(formula, *self._controller_unchanged()))
        steps = [part for c in self.action_invs for _, part in c.parts]
        sets = self._quiet_sets(steps + [z3.Not(r) for r in chosen])
        groups, fields = tuple(g for g, _ in sets), tuple(f for _, f in sets)
        if z3.eq(same, z3.simplify(formula)):
            fn = compile_function("QuietStep", ["p", "s"], self.P.prelude + self.V.prelude, formula, self._sources)
            fn.leader_only, fn.groups, fn.group_fields = self._leader_only(same), groups, fields
            return fn
        fn = compile_guarded(
            "QuietStep",
            ["p", "s"],
            self.P.prelude + self.V.prelude,
            "p.controller is s.controller",
            same,
            formula,
            self._sources,
        )
        fn.leader_only, fn.groups, fn.group_fields = self._leader_only(same), groups, fields
        return fn

    def _leader_only(self, same: z3.BoolRef) -> bool:
        """Whether the quiet test of a step that keeps the controller reads, whichever broker
        the controller names leader, only the controller, that broker and the ghosts before
        and after. Z3 folds the formula for each leader in turn; then the test's value is
        fixed by what the ghost's observation is keyed on, and the search caches it there."""
        s, p = self.V.state_name, self.P.state_name
        for leader in range(len(self.cfg.brokers) + 1):
            folded = z3.simplify(z3.substitute(same, (self.V.c_leader, z3.IntVal(leader))))
            allowed = {f"{s}_c", f"{s}_g", f"{p}_c", f"{p}_g", f"{s}_b{leader}"}
            if not all(self._components(self._sources[name]) <= allowed for name in _var_names(folded)):
                return False
        return True

    def _controller_unchanged(self) -> list:
        """(variable before, variable after) for every variable read from the controller alone."""
        pairs, before = [], self.P.state_name
        for name, var in self.P.vars.items():
            if self._components(var.source) == {f"{before}_c"}:
                pairs.append((var.const, self.V.vars[name[len(self.P.prefix) :]].const))
        return pairs

    def _components(self, source: str) -> set:
        """The state components a variable's source reads, by the views' locals for them:
        s_c (controller), s_g (ghost), s_b2 (broker 2); p_c ... for the state before."""
        names = f"{self.V.state_name}|{self.P.state_name}"
        found = set(re.findall(rf"\b((?:{names})_(?:c|g|b\d+))", source))
        # A source that reads a state other than through those locals reads all of it.
        return found | set(re.findall(rf"\b((?:{names}))\b(?!_)", source))

    def shipped(self, reach_sets: list) -> ShippedChecks:
        """This suite's hot path as text, for processes without Z3 (Spark executors), with the
        quiet test compiled for each tuple of reachability names in reach_sets."""
        quiet = {}
        for names in reach_sets:
            fn = self.quiet_step(list(names))
            quiet[tuple(names)] = (fn.source, fn.leader_only, fn.groups)
        return ShippedChecks(
            self._state_parts,
            tuple(self._part_reads),
            tuple((c.inv.name, c.fn.source) for c in self.state_invs),
            self._all_steps.source,
            tuple((c.inv.name, c.fn.source) for c in self.action_invs),
            tuple((r.name, fn.source) for r, fn in self.reach),
            quiet,
        )

    def reach_expected(self) -> list[str]:
        return [r.name for r, _ in self.reach if r.expected(self.cfg)]

    def confirm_reached(self, name: str, state, prev) -> bool:
        """Z3's own verdict on a reachability witness step."""
        r = next(r for r, _ in self.reach if r.name == name)
        formula = r.build(self.cfg, self.P, self.V)
        return z3.is_true(z3.simplify(z3.substitute(formula, *self._substitution(state, prev))))

    def all_violated(self, state, prev=None) -> list[str]:
        """Every invariant false at `state` (and on the step from `prev`, when given)."""
        out = [c.inv.name for c in self.state_invs if not c.fn(state)]
        if prev is not None:
            out += [c.inv.name for c in self.action_invs if not c.fn(prev, state)]
        return out

    def values(self, state, prev=None) -> dict:
        out = dict(self._values(state))
        if prev is not None:
            out.update(self._prev_values(prev))
        return out

    def evaluate_z3(self, name: str, state, prev=None) -> bool:
        """The declared formula's truth value on this state, computed by Z3 itself."""
        c = self._compiled(name, prev)
        return z3.is_true(z3.simplify(z3.substitute(c.formula, *self._substitution(state, prev))))

    def explain(self, name: str, state, prev=None) -> Explanation:
        """Confirm a violation with Z3 and name the parts that fail, with the values they read."""
        c = self._compiled(name, prev)
        subst = self._substitution(state, prev)
        values = self.values(state, prev)
        failed = []
        for part_name, part in c.parts:
            if z3.is_false(z3.simplify(z3.substitute(part, *subst))):
                failed.append(FailedPart(part_name, {n: values[n] for n in _var_names(part)}))
        if not failed:
            raise Disagreement(f"{name}: the fast evaluator reported a violation that Z3 does not confirm")
        return Explanation(c.inv.name, c.inv.meaning, failed)

    def _compiled(self, name: str, prev=None) -> _Compiled:
        for c in self.state_invs + self.action_invs:
            if c.inv.name == name:
                if c.inv.kind == "action" and prev is None:
                    raise ValueError(f"{name} is a property of a step: pass the state before it as prev")
                return c
        raise KeyError(name)

    def _substitution(self, state, prev):
        values = self.values(state, prev)
        pairs = []
        for view in (self.V, self.P):
            for name, var in view.vars.items():
                if name not in values:
                    continue
                v = values[name]
                pairs.append((var.const, z3_value(v)))
        return pairs


def _var_names(expr: z3.ExprRef) -> list[str]:
    seen, out, stack = set(), [], [expr]
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(e.decl().name())
        stack.extend(e.children())
    return sorted(out)


def _split(formula: z3.BoolRef) -> list:
    """A formula as conjuncts read apart: an And's children, and a negated Or's negated
    disjuncts (not being reached by any broker is not being reached by each)."""
    if z3.is_and(formula):
        return [part for child in formula.children() for part in _split(child)]
    if z3.is_not(formula):
        inner = formula.arg(0)
        if z3.is_or(inner):
            return [part for child in inner.children() for part in _split(z3.Not(child))]
        if z3.is_not(inner):
            return _split(inner.arg(0))
    return [formula]
