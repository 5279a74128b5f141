"""The state verdicts' views (invariants/fields.py) as the native core reads them.

A group of state invariant parts reads a few fields of each component it reads. A view is one
(kind of component, fields) pair; a component's id in a view numbers its values of those
fields, so two components with equal ids are the same to every group reading them through that
view, and the core remembers the group's verdict on the ids (native/src/verdicts.rs).
"""

from __future__ import annotations

from operator import attrgetter

NONE = 0xFFFFFFFF  # not in this view: a component of another kind


class Views:
    """The views of a suite's groups and each component's ids in them."""

    def __init__(self, masks: tuple, fields: tuple | None, tags: tuple):
        """masks: the groups (bit i: position i); fields: per group, per position of its mask in
        order, the fields read or None for the whole component (None: every group by serial);
        tags: the kind of component at each position."""
        index: dict[tuple, int] = {}
        self.of_group: list[list[int]] = []
        for g, mask in enumerate(masks):
            positions = [i for i in range(32) if mask >> i & 1]
            per = fields[g] if fields is not None else (None,) * len(positions)
            row = []
            for i, f in zip(positions, per):
                row.append(-1 if f is None or i >= len(tags) else index.setdefault((tags[i], f), len(index)))
            self.of_group.append(row)
        self.getters = [(tag, attrgetter(*f)) for tag, f in index]
        self.ids: dict[tuple, int] = {}  # (view, field values) -> id; ids never change once given

    def of(self, obj, tag: int) -> list[int]:
        """A new component's id in each view (NONE in a view of another kind)."""
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
