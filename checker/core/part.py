"""A `--workers` part on the native core (checker/engines/workers.py; native/src/part.rs).

The core keeps the worker's level (each state under its smallest path key), routes every
new state to the worker that owns it and fills the parcels for its peers. A successor whose
state-invariant verdicts the core already knows never crosses into Python. Python still tests
the others and checks each step the quiet test does not pass (then routes it with `route`),
ships the components a peer lacks, and keeps the table of broken invariants, which the core
names by id (0: none).

The semantics are those of the Python part (checker/engines/workers.py with Kept): the frontier
is expanded in key order, a state is kept under its smallest key, a state visited at an earlier
level is dropped, and what breaks an invariant travels with its state.
"""

from __future__ import annotations

import time

import kafkamc.checker.engines.transport as transport
from kafkamc.checker.engines.level import note_step, smaller
from kafkamc.checker.engines.search import Ticker
from kafkamc.checker.store.keys import index_bytes


class CorePart:
    """Worker w's part of n on an Attached core (checker/core/native_search.py)."""

    def __init__(self, attached, model, w: int, n: int):
        self.attached, self.model, self.w, self.n = attached, model, w, n
        self.core = attached.core
        self.core.part(w, n)
        attached.misses.owner_of = lambda state: transport.owner_key(model, state) % n
        self.bads: list = [None]  # id -> the state invariant a state breaks
        self.components = model.fast.components
        self.held = 0  # the states this worker owns, which its caches' budget follows

    def start(self, entries: list, numbers) -> int:
        """The initial states this worker owns: (fp, key, state), already deduplicated."""
        for fp, key, state in entries:
            self.core.part_add(fp, key, numbers(state))
        self.held += len(entries)
        return len(entries)

    def expand(self, checks, unreached, found, quiet, deadline=None) -> None:
        """Expand the level kept, in key order: each new state is routed (kept here or put in
        its owner's parcel), after its test where the core does not know its verdicts; each
        step the quiet test does not pass is checked (level.note_step)."""
        attached = self.attached
        core, misses = attached.core, attached.misses
        if misses.quiet_fn is not quiet:
            attached.use_quiet(quiet)
        attached.follow(self.held)
        reach = [(name, fn) for name, fn in checks.reach_functions() if name in unreached]
        check_step, check_state, state_test = checks.check_step, checks.check_state, checks.state_test
        tests: dict = {}
        before = attached.fired()
        run, visit, route, every = core.run, core.visit, core.route, Ticker.EVERY
        core.start_level()
        ok = True  # the last state tested passed: the core remembers its groups' verdicts
        try:
            while (event := run(None, every, ok)) is not None:
                if event.__class__ is int:  # every Ticker.EVERY states: the clock
                    if deadline is not None and time.monotonic() >= deadline:
                        found.cut = True
                        break
                    continue
                new, index, fp, changed, child, _, _, _, at = event
                nxt = misses.state(child)
                if not new:
                    key, serials = at
                    note_step(found, check_step, reach, misses.parent_of(serials), nxt, key + index_bytes(index))
                    if not visit(fp):
                        continue
                    changed = -1
                test = tests.get(changed)
                if test is None:
                    test = tests[changed] = state_test(changed)
                ok = test(nxt)
                bad = 0 if ok else self._bad(check_state(nxt))
                route(fp, index, child, bad)
        finally:
            after = attached.fired()
            found.generated += sum(after.values()) - sum(before.values())
            found.coverage.update({t.__name__: after[t] - before[t] for t in after if after[t] > before[t]})

    def _bad(self, invariant) -> int:
        if not invariant:
            return 0
        self.bads.append(invariant)
        return len(self.bads) - 1

    def parcel(self, peer: int) -> tuple:
        """What peer is sent: (components it lacks as (kind, component), the states as their
        fingerprints then their components' (8 bytes each, little-endian), the path keys end
        to end, their length, {index: broken invariant})."""
        ship, fps, keys, broken = self.core.parcel(peer)
        c = self.components
        components = [(c.tag_of(s), c.by_serial[s]) for s in ship]
        states = len(fps) // (8 * (len(c.tags) + 1))
        length = len(keys) // states if states else 0
        return components, fps, keys, length, {i: self.bads[b] for i, b in broken}

    def unpack(self, items: tuple) -> None:
        """Keep what a peer sent (parcel's tuple)."""
        components, fps, keys, length, broken = items
        for kind, comp in components:
            transport.learn(self.model, kind, comp)
        bad = [(i, self._bad(broken[i])) for i in sorted(broken)]
        self.core.unpack(fps, keys, length, bad)

    def keep(self) -> tuple:
        """(states kept, (key, invariant) of the smallest-keyed state that breaks one, or None)."""
        new, broken = self.core.keep_level()
        self.held += new
        state_bad = None
        for key, b in broken:
            state_bad = smaller(state_bad, (key, self.bads[b]))
        return new, state_bad
