"""The record fields an invariant group reads, per component, from its variables' sources.

A group of state invariant parts (source.groups_of) reads some components; its truth value is
a function of its variables, and each variable's source (invariants/view.py) reads a few fields
of those components. So the group's verdict is a function of those fields alone, and the
native core can remember it per distinct field values (native/src/verdicts.rs) rather than per
whole component: a leader whose follower views changed has the same (alive, epoch, leader).

The analysis is of the sources' syntax: `s_b2.hw` reads field hw of broker 2; a prelude local
(`s_b2_log = s_b2.log`) reads what its own source reads; a spec function called on a component
reads the fields its body reads of that parameter. Any other use of a component (passed on,
iterated, read whole), or of the state itself, counts as reading the whole component, so the
result can only be too wide, never too narrow.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from collections.abc import Callable, Mapping

WHOLE = None  # a component read whole: its verdicts are kept per component, as before


def component_locals(prelude: list[str], state: str, n: int) -> dict[str, int]:
    """The prelude's locals bound to one component: local -> its position (0 the controller,
    b broker b, n + 1 the ghost)."""
    out = {}
    for line in prelude:
        name, source = line.split(" = ", 1)
        if source == f"{state}.controller":
            out[name] = 0
        elif source == f"{state}.ghost":
            out[name] = n + 1
        elif source.startswith(f"{state}.brokers[") and source.endswith("]"):
            out[name] = int(source[len(state) + 9 : -1]) + 1
    return out


def function_fields(fn: Callable) -> tuple[tuple[str, ...] | None, ...]:
    """Per parameter of a spec function, the fields its body reads of it (WHOLE when the
    parameter is used otherwise than as `param.field`)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef)
    params = [a.arg for a in node.args.args]
    fields: dict[str, set | None] = {p: set() for p in params}
    attributes = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id in fields:
            attributes.add(id(sub.value))
            got = fields[sub.value.id]
            if got is not None:
                got.add(sub.attr)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in fields and id(sub) not in attributes:
            fields[sub.id] = WHOLE
    return tuple(_sorted(fields[p]) for p in params)


class Reads:
    """Which fields of which components the sources of a view read (`of`), for one state."""

    def __init__(self, prelude: list[str], state: str, n: int, functions: Mapping[str, Callable]):
        self.locals = component_locals(prelude, state, n)
        self.defs = dict(line.split(" = ", 1) for line in prelude)
        self.state, self.n = state, n
        self.functions = {name: function_fields(fn) for name, fn in functions.items()}
        self.known = set(dir(builtins)) | set(functions)
        self.memo: dict[str, dict] = {}

    def of(self, source: str) -> dict[int, set | None]:
        """position -> the fields read of it (a set), or WHOLE."""
        out: dict[int, set | None] = {}
        self._visit(ast.parse(source, mode="eval").body, out, _bound(source))
        return out

    def _visit(self, node: ast.AST, out: dict, bound: set) -> None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.locals:
            _add(out, self.locals[node.value.id], {node.attr})
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.functions:
            params = self.functions[node.func.id]
            for i, arg in enumerate(node.args):
                if isinstance(arg, ast.Name) and arg.id in self.locals and i < len(params):
                    read = params[i]
                    _add(out, self.locals[arg.id], None if read is None else set(read))
                else:
                    self._visit(arg, out, bound)
            for kw in node.keywords:
                self._visit(kw.value, out, bound)
            return
        if isinstance(node, ast.Name):
            self._name(node.id, out, bound)
            return
        for child in ast.iter_child_nodes(node):
            self._visit(child, out, bound)

    def _name(self, name: str, out: dict, bound: set) -> None:
        if name in self.locals:
            _add(out, self.locals[name], None)
        elif name in self.defs:
            if name not in self.memo:
                self.memo[name] = self.of(self.defs[name])
            for position, fields in self.memo[name].items():
                _add(out, position, fields)
        elif name not in self.known and name not in bound:
            # The state itself, or a name this analysis does not know: everything, whole.
            for position in range(self.n + 2):
                _add(out, position, None)


def _add(out: dict, position: int, fields: set | None) -> None:
    if fields is None or out.get(position, set()) is None:
        out[position] = None
    else:
        out[position] = out.get(position, set()) | fields


def _bound(source: str) -> set:
    """Names a source binds itself (comprehension targets, lambda parameters)."""
    tree = ast.parse(source, mode="eval")
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension):
            names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Lambda):
            names |= {a.arg for a in node.args.args}
    return names


def group_fields(masks: tuple, part_reads: list, part_fields: list[dict]) -> tuple:
    """Per group (masks, in order), per position of its mask in order, the sorted fields the
    group's parts read of that component, or WHOLE. part_reads: per part, its mask;
    part_fields: per part, position -> the fields it reads (Reads.of, merged)."""
    out = []
    for mask in masks:
        fields: dict[int, set | None] = {}
        for m, read in zip(part_reads, part_fields):
            if m == mask:
                for position, got in read.items():
                    _add(fields, position, got)
        positions = [i for i in range(32) if mask >> i & 1]
        out.append(tuple(_sorted(fields.get(i)) for i in positions))
    return tuple(out)


def merged(reads: list[dict], shift: int = 0) -> dict:
    """Several Reads.of results as one, each position moved by `shift`."""
    out: dict[int, set | None] = {}
    for read in reads:
        for position, fields in read.items():
            _add(out, position + shift, fields)
    return out


def _sorted(fields: set | None) -> tuple[str, ...] | None:
    return None if fields is None else tuple(sorted(fields))
