"""The verdicts' views (invariants/fields.py) as the native core reads them.

A group of invariant parts (or of the quiet test's conjuncts) reads a few fields of each
component it reads. A view is one (kind of component, fields) pair; a component's id in a view
numbers its values of those fields, so two components with equal ids are the same to every group
reading them through that view, and the core remembers the group's verdict on the ids
(native/src/verdicts.rs). One registry serves the state groups and the quiet test's.
"""

from __future__ import annotations

from operator import attrgetter

NONE = 0xFFFFFFFF  # not in this view: a component of another kind


class Views:
    """The views of a suite's groups and each component's ids in them."""

    def __init__(self, tags: tuple):
        self.tags = tags  # the kind of component at each position of a state
        self.index: dict[tuple, int] = {}  # (kind, fields) -> view
        self.getters: list[tuple] = []  # per view: (kind, its fields' getter)
        self.ids: dict[tuple, int] = {}  # (view, field values) -> id; ids never change once given

    def rows(self, masks: tuple, fields: tuple | None, states: int = 1) -> list[list[int]]:
        """Per group (masks: bit i, position i), per position of its mask in order, its view, or
        -1 where the group reads the component whole (fields None: every group by serial).
        `states`: how many states the positions span (the quiet test's: two, end to end)."""
        tags = self.tags * states
        out = []
        for g, mask in enumerate(masks):
            positions = [i for i in range(32) if mask >> i & 1]
            per = fields[g] if fields is not None else (None,) * len(positions)
            row = []
            for i, f in zip(positions, per):
                if f is None or i >= len(tags):
                    row.append(-1)
                    continue
                view = self.index.get((tags[i], f))
                if view is None:
                    view = self.index[(tags[i], f)] = len(self.getters)
                    self.getters.append((tags[i], attrgetter(*f)))
                row.append(view)
            out.append(row)
        return out

    def of(self, obj, tag: int) -> list[int]:
        """A component's id in each view (NONE in a view of another kind)."""
        out = []
        ids = self.ids
        for v, (t, get) in enumerate(self.getters):
            if t != tag:
                out.append(NONE)
                continue
            key = (v, get(obj))
            got = ids.get(key)
            if got is None:
                got = ids[key] = len(ids)
            out.append(got)
        return out
