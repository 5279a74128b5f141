"""Turn a quantifier-free Z3 formula into Python source that evaluates it on State objects.

A Z3 solver call per explored state costs milliseconds; the generated function costs about
a microsecond and computes the same truth value (a test checks this on sampled states).
"""
from __future__ import annotations

import re

import z3
from z3 import z3consts as K

_NARY = {K.Z3_OP_AND: " and ", K.Z3_OP_OR: " or ", K.Z3_OP_ADD: " + ", K.Z3_OP_MUL: " * "}
_BINARY = {
    K.Z3_OP_EQ: "==", K.Z3_OP_LE: "<=", K.Z3_OP_LT: "<", K.Z3_OP_GE: ">=", K.Z3_OP_GT: ">",
    K.Z3_OP_SUB: "-", K.Z3_OP_IFF: "==",
}


class CompileError(Exception):
    pass


def to_python(expr: z3.ExprRef, sources: dict[str, str]) -> str:
    """Python source for `expr`; each Z3 constant named n is read through sources[n]."""
    cache: dict[int, str] = {}

    def go(e: z3.ExprRef) -> str:
        key = e.get_id()
        if key in cache:
            return cache[key]
        out = _one(e, go, sources)
        cache[key] = out
        return out

    return go(expr)


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
        if not args:    # an empty conjunction is true, an empty disjunction false
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
        return "(len({" + ", ".join(xs) + "}) == " + str(len(xs)) + ")"
    if kind == K.Z3_OP_UMINUS:
        return f"(-{go(args[0])})"
    raise CompileError(f"unsupported Z3 operator {e.decl().name()} in {e}")


def compile_function(name: str, params: list[str], prelude: list[str], expr: z3.ExprRef,
                     sources: dict[str, str], hoist: bool = False):
    """Build `def name(params): prelude; return <expr>` and return the function.

    With hoist, each variable the formula reads is read once into a local first: worth it
    for a large conjunction that must be evaluated whole (every state passes it) and
    reads the same variables in many places; a small formula is better left lazy."""
    reads = sources
    locals_: dict[str, str] = {}
    if hoist:
        reads = _Hoisted(sources, locals_)
    code = to_python(expr, reads)
    hoisted = [f"{local} = {sources[var]}" for var, local in locals_.items()]
    # Only the locals the expression reads: the hot path pays for every line.
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code + " ".join(hoisted)))
    lines = [line for line in prelude if line.split(" = ")[0] in used] + hoisted
    body = "\n    ".join(lines) or "pass"
    src = f"def {name}({', '.join(params)}):\n    {body}\n    return {code}\n"
    namespace: dict = {}
    exec(compile(src, f"<invariant {name}>", "exec"), namespace)
    fn = namespace[name]
    fn.source = src
    return fn


class _Hoisted(dict):
    """sources, answering with a local's name and recording which variables were read."""

    def __init__(self, sources: dict, locals_: dict):
        super().__init__(sources)
        self.locals_ = locals_

    def __getitem__(self, var: str) -> str:
        if var not in self.locals_:
            self.locals_[var] = f"_v{len(self.locals_)}"
        return self.locals_[var]
