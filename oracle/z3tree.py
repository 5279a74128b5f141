"""Z3 formulas as small Python trees, and an interpreter for them.

The invariants are declared as Z3 formulas (invariants/catalog.py). The fast engines turn
them into generated Python text (invariants/compile.py); the oracle must not share that, so
it walks each formula once into a tree of tuples and evaluates the tree itself on a
{variable name: value} environment. Only the quantifier-free integer and Boolean operators
the declarations use are known; anything else is refused when the tree is built, so an
unknown operator can never be given a wrong meaning silently.

A tree is ("var", name), ("lit", value) or (op, child, ...). Shared subformulas become the
same Python object, once per formula.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import z3

Tree = tuple

# Z3's operator kinds, by the name the interpreter dispatches on.
_OPS = {
    z3.Z3_OP_AND: "and",
    z3.Z3_OP_OR: "or",
    z3.Z3_OP_NOT: "not",
    z3.Z3_OP_IMPLIES: "implies",
    z3.Z3_OP_XOR: "xor",
    z3.Z3_OP_IFF: "eq",
    z3.Z3_OP_EQ: "eq",
    z3.Z3_OP_DISTINCT: "distinct",
    z3.Z3_OP_ITE: "ite",
    z3.Z3_OP_LE: "le",
    z3.Z3_OP_LT: "lt",
    z3.Z3_OP_GE: "ge",
    z3.Z3_OP_GT: "gt",
    z3.Z3_OP_ADD: "add",
    z3.Z3_OP_SUB: "sub",
    z3.Z3_OP_MUL: "mul",
    z3.Z3_OP_UMINUS: "neg",
}


class UnknownOperator(ValueError):
    """A formula uses an operator this interpreter does not know."""


def tree(formula: z3.ExprRef) -> Tree:
    """The formula as a tree; built once per formula, iteratively (deep Sums and Ands)."""
    memo: dict[int, Tree] = {}
    stack: list[tuple[z3.ExprRef, bool]] = [(formula, False)]
    while stack:
        e, ready = stack.pop()
        key = e.get_id()
        if key in memo:
            continue
        if not ready:
            stack.append((e, True))
            stack.extend((c, False) for c in e.children())
            continue
        memo[key] = _node(e, [memo[c.get_id()] for c in e.children()])
    return memo[formula.get_id()]


def _node(e: z3.ExprRef, children: list[Tree]) -> Tree:
    kind = e.decl().kind()
    if kind == z3.Z3_OP_TRUE:
        return ("lit", True)
    if kind == z3.Z3_OP_FALSE:
        return ("lit", False)
    if kind == z3.Z3_OP_ANUM:
        return ("lit", e.as_long())
    if kind == z3.Z3_OP_UNINTERPRETED and not children:
        return ("var", e.decl().name())
    if kind not in _OPS:
        raise UnknownOperator(f"{e.decl().name()} in {e}")
    return (_OPS[kind], *children)


def evaluate(t: Tree, env: dict) -> bool | int:
    """The tree's value with each variable read from env (once; see interpreter())."""
    return interpreter(t)(env)


Evaluator = Callable[[dict], Any]


def interpreter(t: Tree, memo: dict | None = None) -> Evaluator:
    """A function of env giving the tree's value, made once per tree: each node becomes a small
    closure over its children's, so the tree is walked once here and not again per state. And,
    Or, Implies and If evaluate only what decides them, as a reader would."""
    memo = {} if memo is None else memo
    if id(t) not in memo:
        memo[id(t)] = _closure(t, memo)
    return memo[id(t)]


def _closure(t: Tree, memo: dict) -> Evaluator:
    op = t[0]
    if op == "var":
        return itemgetter(t[1])
    if op == "lit":
        value = t[1]
        return lambda env: value
    fs = [interpreter(c, memo) for c in t[1:]]
    if op in _LAZY:
        return _LAZY[op](*fs) if op in ("implies", "ite", "not") else _LAZY[op](fs)
    if op in _BINARY:
        a, b = fs
        compare = _BINARY[op]
        return lambda env: compare(a(env), b(env))
    strict = _STRICT[op]
    return lambda env: strict([f(env) for f in fs])


def _and(fs: list[Evaluator]) -> Evaluator:
    def f(env: dict) -> bool:
        for g in fs:
            if not g(env):
                return False
        return True

    return f


def _or(fs: list[Evaluator]) -> Evaluator:
    def f(env: dict) -> bool:
        for g in fs:
            if g(env):
                return True
        return False

    return f


def _implies(a: Evaluator, b: Evaluator) -> Evaluator:
    return lambda env: not a(env) or bool(b(env))


def _not(a: Evaluator) -> Evaluator:
    return lambda env: not a(env)


def _ite(c: Evaluator, a: Evaluator, b: Evaluator) -> Evaluator:
    return lambda env: a(env) if c(env) else b(env)


_LAZY: dict[str, Callable] = {"and": _and, "or": _or, "implies": _implies, "not": _not, "ite": _ite}

# Two arguments, both always read.
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "le": operator.le,
    "lt": operator.lt,
    "ge": operator.ge,
    "gt": operator.gt,
    "xor": lambda a, b: bool(a) != bool(b),
}


def _sub(args: list) -> int:
    out = args[0]
    for a in args[1:]:
        out -= a
    return out


def _mul(args: list) -> int:
    out = 1
    for a in args:
        out *= a
    return out


# Any number of arguments, all read.
_STRICT: dict[str, Callable[[list], Any]] = {
    "distinct": lambda a: len(set(a)) == len(a),
    "add": sum,
    "sub": _sub,
    "mul": _mul,
    "neg": lambda a: -a[0],
}
