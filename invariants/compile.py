"""Turn a quantifier-free Z3 formula into Python source that evaluates it on State objects.

A Z3 solver call per explored state costs milliseconds; the generated function costs about
a microsecond and computes the same truth value (a test checks this on sampled states).
"""

from __future__ import annotations

import z3
from kafkamc.invariants.source import ConjunctionText, define, needed
from z3 import z3consts as K

_NARY = {K.Z3_OP_AND: " and ", K.Z3_OP_OR: " or ", K.Z3_OP_ADD: " + ", K.Z3_OP_MUL: " * "}
_BINARY = {
    K.Z3_OP_EQ: "==",
    K.Z3_OP_LE: "<=",
    K.Z3_OP_LT: "<",
    K.Z3_OP_GE: ">=",
    K.Z3_OP_GT: ">",
    K.Z3_OP_SUB: "-",
    K.Z3_OP_IFF: "==",
}


class CompileError(Exception):
    pass


def to_python(expr: z3.ExprRef, sources: dict[str, str], shared: dict | None = None) -> str:
    """Python source for `expr`; each Z3 constant named n is read through sources[n].

    With `shared` ({}), every compound subformula that occurs more than once is computed
    once into a local: shared is filled with local -> source, in an order that can be run."""
    return parts_to_python([expr], sources, shared)[0]


def parts_to_python(parts: list, sources: dict[str, str], shared: dict | None = None) -> list[str]:
    """to_python of each part, in one walk: with `shared`, a subformula that two parts use
    (or one part, twice) becomes one local."""
    cache: dict[int, str] = {}
    repeated = _repeated(z3.And(parts)) if shared is not None and parts else set()

    def go(e: z3.ExprRef) -> str:
        key = e.get_id()
        if key in cache:
            return cache[key]
        out = _one(e, go, sources)
        if key in repeated and shared is not None:  # repeated is empty without shared
            local = f"_e{len(shared)}"
            shared[local] = out
            out = local
        cache[key] = out
        return out

    return [go(part) for part in parts]


def _repeated(expr: z3.ExprRef) -> set:
    """Ids of the subformulas that two or more places of expr refer to and that are worth a
    local: those built of other compound formulas (a lone comparison costs no more to
    repeat than to store and load)."""
    parents: dict[int, int] = {}
    seen, stack = set(), [expr]
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        for child in e.children():
            if any(grandchild.children() for grandchild in child.children()):
                parents[child.get_id()] = parents.get(child.get_id(), 0) + 1
                stack.append(child)
    return {key for key, n in parents.items() if n > 1}


def _one(e, go, sources) -> str:
    if z3.is_int_value(e):
        return str(e.as_long())
    if z3.is_true(e):
        return "True"
    if z3.is_false(e):
        return "False"
    kind = e.decl().kind()
    args = e.children()
    if kind == K.Z3_OP_UNINTERPRETED and not args:
        name = e.decl().name()
        if name not in sources:
            raise CompileError(f"variable {name} has no reader")
        return sources[name]
    if kind in _NARY:
        if not args:  # an empty conjunction is true, an empty disjunction false
            return {K.Z3_OP_AND: "True", K.Z3_OP_OR: "False", K.Z3_OP_ADD: "0", K.Z3_OP_MUL: "1"}[kind]
        return "(" + _NARY[kind].join(go(a) for a in args) + ")"
    if kind in _BINARY and len(args) == 2:
        return f"({go(args[0])} {_BINARY[kind]} {go(args[1])})"
    if kind == K.Z3_OP_NOT:
        return f"(not {go(args[0])})"
    if kind == K.Z3_OP_IMPLIES:
        return f"((not {go(args[0])}) or {go(args[1])})"
    if kind == K.Z3_OP_ITE:
        return f"({go(args[1])} if {go(args[0])} else {go(args[2])})"
    if kind == K.Z3_OP_DISTINCT:
        xs = [go(a) for a in args]
        if len(xs) == 2:
            return f"({xs[0]} != {xs[1]})"
        return "(len({" + ", ".join(xs) + "}) == " + str(len(xs)) + ")"
    if kind == K.Z3_OP_UMINUS:
        return f"(-{go(args[0])})"
    raise CompileError(f"unsupported Z3 operator {e.decl().name()} in {e}")


def compile_function(
    name: str, params: list[str], prelude: list[str], expr: z3.ExprRef, sources: dict[str, str], hoist: bool = False
):
    """Build `def name(params): prelude; return <expr>` and return the function.

    With hoist, each variable the formula reads, and each subformula it uses in more than
    one place, is computed once into a local first (see Conjunction)."""
    if hoist:
        return Conjunction(params, prelude, [expr], sources).function(name, [0])
    code = to_python(expr, sources)
    body = "\n    ".join(needed(prelude, code)) or "pass"
    return define(name, f"def {name}({', '.join(params)}):\n    {body}\n    return {code}\n")


def Conjunction(params: list[str], prelude: list[str], parts: list, sources: dict[str, str]) -> ConjunctionText:  # noqa: N802 - used as the type it makes
    """Parts of a conjunction turned into Python once (ConjunctionText): walking the Z3
    formulas costs tens of milliseconds, joining and compiling the text about one.

    Each variable the parts read, and each subformula used in more than one place, is
    computed once into a local first: worth it for a large conjunction that must be
    evaluated whole (every state passes it) and reads the same variables in many places; a
    small formula is better left lazy. Nothing here can raise, so computing a subformula
    that short-circuiting would have skipped changes no result."""
    locals_: dict[str, str] = {}
    shared: dict = {}
    codes = parts_to_python(parts, _Hoisted(sources, locals_), shared)
    lines = (
        list(prelude)
        + [f"{local} = {sources[var]}" for var, local in locals_.items()]
        + [f"{local} = {source}" for local, source in shared.items()]
    )
    return ConjunctionText(tuple(params), tuple(codes), tuple(lines))


def compile_guarded(
    name: str,
    params: list[str],
    prelude: list[str],
    guard: str,
    when: z3.ExprRef,
    otherwise: z3.ExprRef,
    sources: dict[str, str],
):
    """`def name(params): if guard: return <when>; return <otherwise>`, each branch reading
    only the locals it needs (lazy formulas, as compile_function without hoist)."""
    when_code, otherwise_code = to_python(when, sources), to_python(otherwise, sources)
    lines = [f"    if {guard}:"]
    lines += [f"        {line}" for line in needed(prelude, when_code)] + [f"        return {when_code}"]
    lines += [f"    {line}" for line in needed(prelude, otherwise_code)] + [f"    return {otherwise_code}"]
    return define(name, f"def {name}({', '.join(params)}):\n" + "\n".join(lines) + "\n")


class _Hoisted(dict):
    """sources, answering with a local's name and recording which variables were read."""

    def __init__(self, sources: dict, locals_: dict):
        super().__init__(sources)
        self.locals_ = locals_

    def __getitem__(self, var: str) -> str:
        if var not in self.locals_:
            self.locals_[var] = f"_v{len(self.locals_)}"
        return self.locals_[var]
