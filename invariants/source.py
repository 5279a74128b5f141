"""Compiled invariants as Python text, with no Z3: what a Spark executor needs to check states.

invariants/compile.py walks the Z3 formulas once, on the driver, and leaves text: a
Conjunction's parts, each test's `def`. Everything here works on that text alone, so an
executor runs the very functions the driver compiled (ShippedChecks) without importing Z3
or building a single formula.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from kafkamc.invariants.reads import SPEC_FUNCTIONS

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def define(name: str, src: str):
    """The function `name` that the text `src` defines (src.source is kept on it)."""
    namespace: dict = dict(SPEC_FUNCTIONS)
    exec(compile(src, f"<invariant {name}>", "exec"), namespace)
    fn = namespace[name]
    fn.source = src
    return fn


def groups_of(part_reads) -> tuple:
    """Groups of invariant parts: one bitmask per distinct set of components read (the state
    invariants' by state_test's bits; the quiet test's conjuncts by InvariantSuite._step_reads).
    A group's truth value depends on those components alone, which is what lets the native
    core remember it per group (native/src/verdicts.rs)."""
    return tuple(sorted(set(part_reads)))


def needed(prelude: list[str], code: str) -> list[str]:
    """The prelude lines that code reads, and the ones those read: the hot path pays for
    every line."""
    used = set(_NAME.findall(code))
    lines = []
    for line in reversed(prelude):
        target, source = line.split(" = ", 1)
        if target in used:
            lines.append(line)
            used.update(_NAME.findall(source))
    return lines[::-1]


@dataclass(frozen=True)
class ConjunctionText:
    """A conjunction's parts as Python expressions over shared local lines, from which a
    function testing any subset of them is assembled as text: joining and compiling the text
    costs about a millisecond (compile.Conjunction makes one from Z3 formulas)."""

    params: tuple
    codes: tuple  # one Python expression per part
    lines: tuple  # the prelude and the hoisted locals, in an order that can run

    def function(self, name: str, chosen: list[int]):
        """`def name(params)` returning the conjunction of the chosen parts (by index)."""
        code = "(" + " and ".join(self.codes[i] for i in chosen) + ")" if chosen else "True"
        return self._define(name, code)

    def changed_test(self, part_reads, changed: int):
        """The test of the parts that read a component in `changed` (a bitmask; part i reads
        part_reads[i]; -1: every part): InvariantSuite.state_test's function."""
        chosen = [i for i, reads in enumerate(part_reads) if reads & changed]
        name = "AllStateInvariants" if changed == -1 else f"StateInvariantsChanged{changed:x}"
        return self.function(name, chosen)

    def bits(self, name: str):
        """`def name(params)` returning every part's truth value at once, part i as bit i: what
        the liveness graph stores per state (invariants/liveness.py)."""
        return self._define(name, " | ".join(f"(({c}) << {i})" for i, c in enumerate(self.codes)) or "0")

    def _define(self, name: str, code: str):
        body = "\n    ".join(needed(list(self.lines), code)) or "pass"
        return define(name, f"def {name}({', '.join(self.params)}):\n    {body}\n    return {code}\n")


@dataclass
class ShippedChecks:
    """An InvariantSuite's hot path as text (InvariantSuite.shipped): check_state, state_test,
    check_step, reach_functions and the quiet test, defined where they run. Small and
    picklable; the functions are defined on first use in each process, never pickled."""

    state_parts: ConjunctionText  # every part of every state invariant
    part_reads: tuple  # per part, the components it reads (InvariantSuite.state_test's bitmask)
    state_invs: tuple  # (name, source) per state invariant
    all_steps: str  # the source of AllStepInvariants
    step_invs: tuple  # (name, source) per step invariant
    reach: tuple  # (name, source) per reachability property
    quiet: dict  # reachability names still sought (a tuple) -> (source, leader_only, groups)
    _fns: dict = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fns": {}}

    @property
    def digest(self) -> str:
        """Equal for equal checks: what a process caches its functions by."""
        text = repr((self.state_parts, self.part_reads, self.state_invs, self.all_steps, self.step_invs, self.reach))
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def _fn(self, src: str):
        fn = self._fns.get(src)
        if fn is None:
            fn = self._fns[src] = define(_NAME.findall(src)[1], src)  # "def NAME(...)"
        return fn

    def check_state(self, state) -> str | None:
        if self.state_test(-1)(state):
            return None
        return next(name for name, src in self.state_invs if not self._fn(src)(state))

    @property
    def state_groups(self) -> tuple:
        return groups_of(self.part_reads)

    def state_test(self, changed: int):
        """As InvariantSuite.state_test: only the parts reading a changed component."""
        key = ("state", changed)
        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = self.state_parts.changed_test(self.part_reads, changed)
        return fn

    def check_step(self, prev, state) -> str | None:
        if self._fn(self.all_steps)(prev, state):
            return None
        return next(name for name, src in self.step_invs if not self._fn(src)(prev, state))

    def reach_functions(self) -> list:
        return [(name, self._fn(src)) for name, src in self.reach]

    def quiet_step(self, reach_names: list):
        """The quiet test compiled on the driver for exactly these names (see shipped)."""
        src, leader_only, groups = self.quiet[tuple(reach_names)]
        fn = self._fn(src)
        fn.leader_only, fn.groups = leader_only, groups
        return fn
