"""The fast path: successors and fingerprints through caches derived from the spec.

Every component of a state is interned (checker/cache/components.py); a step's outcome is
cached under the serial numbers of the parts of the state its runs were recorded reading
(checker/cache/outcomes.py, checker/cache/footprint.py); candidates are cached per broker on what
their signature gives them (the broker, the controller, the budget); observations on
the controller, the ghost and the brokers that serve reads, checked on every run. Every
cache miss runs the spec's own functions, so a change in spec/ reaches the search with
no table to update; `FastModel(cfg, verify=rate)` re-runs them on that share of the
states it expands, and checks their symmetry (checker/cache/verify.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import itemgetter

from kafkamc.checker.cache.budget import DEFAULT_MIB, CacheBudget, entries_for, store
from kafkamc.checker.cache.components import UNKNOWN, Components, Fresh
from kafkamc.checker.cache.footprint import flag_parts
from kafkamc.checker.cache.outcomes import Mapped, Outcomes, StepCache
from kafkamc.checker.cache.verify import EVERY, FIRST, FastPathError, check_candidates, check_observed, check_symmetry
from kafkamc.spec import symmetry
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.next import Action
from kafkamc.spec.state import State

new_tuple = tuple.__new__


class FastSuccessors:
    """Model.successors and Model.fingerprint through the caches; same results, same order."""

    def __init__(self, model: Model, verify: float = 0.0, cache_entries: int = entries_for(DEFAULT_MIB), grows=False):
        cfg = model.config
        self.model = model
        self.cfg = cfg
        self.n = len(cfg.brokers)  # brokers in the cluster: a state has one record each
        self.candidates_of = model.broker_candidates  # (controller, broker, budget, b) -> actions
        # Verify mode (checker/cache/verify.py): one expanded state in verify_every is checked in full.
        self.verify = verify > 0
        self.verify_every = max(1, round(1 / verify)) if verify > 0 else 0
        self.expanded = 0
        self.caches: dict = {}  # action -> its StepCache
        self.budget = CacheBudget(cache_entries, grows)  # the StepCaches' entries (checker/cache/budget.py)
        self.outcomes = Outcomes(self)
        self.tags = (0,) + (1,) * self.n + (2, 3)
        self.components = Components(self.tags)
        # Candidates of broker b, keyed on the serial numbers of (broker b, controller, budget).
        self.cand_key: list = [None] + [itemgetter(b, 0, self.n + 2) for b in cfg.brokers]
        self.cand_caches: list = [None] + [{} for _ in cfg.brokers]
        self.observe_cache: dict = {}
        self.states = 0  # expanded through transitions(): the candidate caches' lookups, n each
        self.observe_lookups = self.observe_misses = 0
        self.candidate_runs = [0] * (self.n + 1)  # candidate-cache misses per broker (checker/cache/verify.py)
        self.core_counts: dict[str, tuple[int, int]] = {}  # a core's own caches' (lookups, misses)
        self.observe_wide: frozenset | None = None  # parts observe read beyond the usual key
        # With symmetry over a pool (checker FastModel.pooled), the kinds of action whose
        # successors need relabelling (spec/next.py moves_replicas), and how to fingerprint them.
        self.relabelled: frozenset = frozenset()
        self.canonical_fp: Callable[[State], int] = self.fingerprint

    # ---------------------------------------------------------------- components

    def split(self, state: State) -> list:
        """The interned components of a state, in index order."""
        intern, tags = self.components.intern, self.tags
        comps = [state.controller, *state.brokers, state.ghost, state.budget]
        return [intern(x, tags[i]) for i, x in enumerate(comps)]

    def join(self, comps: list) -> State:
        n = self.n
        return State(comps[0], tuple(comps[1 : n + 1]), comps[n + 1], comps[n + 2])

    def _interned(self, state: State) -> tuple:
        """(components, their serial numbers, the state made of them). The states the search
        expands are made of interned components already; any other state is interned first."""
        comps = [state.controller, *state.brokers, state.ghost, state.budget]
        number = self.components.serial.__getitem__
        try:
            return comps, list(map(number, map(id, comps))), state
        except KeyError:
            comps = self.split(state)
            return comps, list(map(number, map(id, comps))), self.join(comps)

    def fingerprint(self, state: State) -> int:
        """The XOR of the components' position-mixed fingerprints (see the module docstring)."""
        return self.components.xor(self._interned(state)[1])

    def controller_fingerprint(self, controller) -> int:
        fp = self.components.fp.get(id(controller))
        return fp if fp is not None else self.components.fp[id(self.components.intern(controller, 0))]

    # ---------------------------------------------------------------- successors

    def cache_of(self, action) -> StepCache:
        sc = self.caches.get(action)
        if sc is None:
            sc = self.caches[action] = StepCache(budget=self.budget)
        return sc

    def _candidates_miss(self, state: State, comps: list, parts: list, b: int, key: tuple) -> tuple:
        """Broker b's candidates, each as (action, its type, its outcomes or None, its
        StepCache), computed on a miss of broker b's candidate cache, whose key transitions()
        builds (broker b, the controller, the budget). When the run of a step read nothing
        else, its outcomes are fixed by that key too and are kept here, which spares the
        search one cache lookup per transition."""
        n = self.n
        local = {0, b, n + 2, n + 2 + b}
        out = []
        actions = self.candidates_of(comps[0], comps[b], comps[n + 2], b)
        runs = self.candidate_runs
        runs[b] += 1
        if runs[b] <= FIRST or runs[b] % EVERY == 0:
            check_candidates(self.model, comps[0], comps[b], comps[n + 2], b, actions)
        caches = self.caches
        for a in actions:
            sc = caches.get(a) or self.cache_of(a)
            fixed = None
            if sc.reads is None or sc.reads <= local:
                sc.lookups += 1
                entry = sc.store.get(sc.key(parts))
                if entry is None:
                    outcomes, reads = self.outcomes.run(sc, state, comps, parts, a)
                    sc.put(parts, outcomes, reads)
                    if reads <= local and outcomes.__class__ is not Mapped:
                        fixed = outcomes
                elif entry.__class__ is not StepCache and entry.__class__ is not Mapped:
                    fixed = entry  # stored on the first level: its run read only the key
            out.append((a, type(a), fixed, sc))
        result = tuple(out)
        store(self.cand_caches[b], key, result, self.budget.dict_limit)
        return result

    def with_delta(self, comps: list, changes: list) -> tuple:
        """(((index, component, its serial number), ...), XOR they make to the fingerprint of
        a state made of comps, bitmask of the component indices they change)."""
        at, serial = self.components.at, self.components.serial  # Components.delta, inlined: once per change
        delta = mask = 0
        out = []
        for i, x in changes:
            n = serial[id(x)]
            delta ^= at[i][serial[id(comps[i])]] ^ at[i][n]
            mask |= 1 << i
            out.append((i, x, n))
        return tuple(out), delta, mask

    def observe_key(self, comps: list) -> tuple:
        """The observe cache's key: the controller, the ghost, and each broker that serves
        reads or that the controller names leader (0 for any other). That is what spec.hw.observe
        was recorded reading (Outcomes.observed checks every run): whether each broker serves
        reads, and only a serving broker's fields; the quiet test reads the controller and the
        broker it names leader. A part a run read beyond that joins the key for good (wide)."""
        leader = comps[0].leader
        if self.observe_wide is None:
            return (
                id(comps[0]),
                id(comps[self.n + 1]),
                *[
                    id(x) if b == leader or (x.leader == b and x.alive) else 0
                    for b, x in enumerate(comps[1 : self.n + 1], 1)
                ],
            )
        wide = self.observe_wide
        return (
            id(comps[0]),
            id(comps[self.n + 1]),
            *[
                id(x) if b == leader or b in wide or (x.leader == b and x.alive) else 0
                for b, x in enumerate(comps[1 : self.n + 1], 1)
            ],
            *[id(comps[p]) for p in sorted(wide) if p > self.n],
        )

    def widen_observation(self, parts: set) -> None:
        """Key observations on these parts too (brokers read while not serving reads, the
        budget): a spec whose observe reads more is followed exactly, with fewer cache hits."""
        self.observe_wide = frozenset(parts) | (self.observe_wide or frozenset())
        self.observe_cache.clear()

    def _observe_miss(self, comps: list, key: tuple) -> list:
        """[ghost, fingerprint XOR, quiet, the quiet test it is of, the ghost's serial number]
        after the ghost observes the brokers serving reads in these components; computed on a
        miss of the observe cache (its key: observe_key). The quiet value and test are filled
        by transitions()."""
        G = self.n + 1
        self.observe_misses += 1
        g, widened = self.outcomes.observed(comps)
        if widened:
            key = self.observe_key(comps)
        out = [g, self.components.delta(G, comps[G], g), None, None, self.components.serial[id(g)]]
        store(self.observe_cache, key, out, self.budget.dict_limit)
        return out

    def transitions(self, state: State, is_new=None, quiet=None, fired=None, known=None, edge=None):
        """(index, action, successor, its fingerprint before symmetry, fresh), in candidate order.

        Alone, it yields every transition (fresh None). Given the search's is_new(fp),
        quiet(state, nxt) and `fired`, a dict holding every action type (it counts the
        transitions per type), it yields only those the search must look at: a new state
        (is_new already called; fresh is a Fresh), or a step quiet() does not pass (fresh
        False; is_new not called, so the search can stop on it first). The search's
        per-transition work happens in this one loop, where the cache hits are inlined: it
        runs once per transition. `known` is the Fresh.known this loop yielded with `state`:
        its keys' parts followed by its fingerprint, in one list (a state waiting in the
        search's queue holds it), which are then not computed again. `edge`, if given, is a
        pair of callables, given each transition's fingerprint and action, screened or not, in
        index order: the safety search records the liveness graph so (checker/liveness/graph.py).

        Screening, the loop also skips work the search would repeat. The states it expands
        are observed already, so a step that changes only the budget is observed as the
        state itself is: it takes the state's own observe entry, looked up once. And when the
        quiet test
        depends only on what the observation is keyed on (quiet.leader_only, which Z3 shows),
        a step that keeps the controller and the ghost gets its value from the observe cache
        entry, and builds its successor only when that is new."""
        G = self.n + 1
        self.states += 1
        verify = False
        if self.verify:
            self.expanded += 1
            verify = self.expanded % self.verify_every == 0
            if verify:
                check_symmetry(self.model, state)
        if known is None or verify:
            comps, numbers, state = self._interned(state)
            base = self.components.xor(numbers)
            parts = [*numbers, *flag_parts(state.brokers), base]  # the keys' parts, then base
            if known is not None and known != parts:
                raise FastPathError(f"the fingerprint or keys carried to this state from its parent are wrong: {state}")
        else:
            comps = [state.controller, *state.brokers, state.ghost, state.budget]
            parts = known
            base = parts[-1]
        observe_get = self.observe_cache.get
        if edge is not None:
            edge_fp, edge_action = edge
        screen = is_new is not None
        ghost = 1 << G
        kept = 1 | ghost  # a step that changes neither keeps the quiet test's cache entry
        cached = screen and getattr(quiet, "leader_only", False)
        okey_of = self.observe_key
        relabelled = self.relabelled
        # A step that touches nothing observed is observed as the state itself is: its entry.
        okey = okey_of(comps)
        same = observe_get(okey) or self._observe_miss(comps, okey)
        # Changes that may change the observation: to the controller, the ghost, or a broker in
        # the key; and, checked below, a broker that starts to serve reads.
        touch = kept
        for b in range(1, G):
            if okey[b + 1]:
                touch |= 1 << b
        if self.observe_wide is not None and G + 1 in self.observe_wide:
            touch |= 1 << (G + 1)  # observe reads the budget
        index = -1
        cand_caches, cand_key = self.cand_caches, self.cand_key
        for b in range(1, G):
            ckey = cand_key[b](parts)
            candidates = cand_caches[b].get(ckey)
            if candidates is None:
                candidates = self._candidates_miss(state, comps, parts, b, ckey)
            for action, kind, outcomes, sc in candidates:
                if verify:
                    outcomes = self.outcomes.verified(sc, state, comps, parts, action, outcomes)
                elif outcomes is None:
                    sc.lookups += 1
                    outcomes = sc.store.get(sc.key(parts))
                    if outcomes.__class__ is StepCache:
                        outcomes = outcomes.store.get(outcomes.key(parts))
                    if outcomes is None:
                        outcomes = self.outcomes.cached(sc, state, comps, parts, action)
                    elif outcomes.__class__ is Mapped:
                        outcomes = self.outcomes.apply(outcomes, comps)
                for changes, delta, mask in outcomes:
                    index += 1
                    observed = mask & touch or not screen
                    if not observed:
                        for i, x, _ in changes:
                            if i < G and x.leader == i and x.alive:
                                observed = True
                                break
                    if observed:
                        new = comps.copy()
                        for i, x, _ in changes:
                            new[i] = x
                        okey = okey_of(new)
                        self.observe_lookups += 1
                        seen = observe_get(okey)
                        if seen is None:
                            seen = self._observe_miss(new, okey)
                    else:
                        new = None  # built only if the successor is looked at: most are not
                        seen = same
                    fp = base ^ delta ^ seen[1]
                    if relabelled and kind in relabelled:  # out of assignment order: its class's fingerprint
                        new = comps.copy()
                        for i, x, _ in changes:
                            new[i] = x
                        fp = self.canonical_fp(new_tuple(State, (new[0], tuple(new[1:G]), seen[0], new[G + 1])))
                    if edge is not None:
                        edge_fp(fp)
                        edge_action(action)
                    keeps = settled = False
                    if screen:
                        fired[kind] += 1
                        keeps = cached and not (mask & kept)  # seen may hold this step's quiet test
                        settled = keeps and seen[3] is quiet and not verify
                        if settled and seen[2]:
                            if fp == base or not is_new(fp):  # fp == base: the state itself
                                continue
                    if new is None:
                        new = comps.copy()
                        for i, x, _ in changes:
                            new[i] = x
                    nxt = new_tuple(
                        State, (new[0], tuple(new[1:G]), seen[0], new[G + 1])
                    )  # State(...) without its __new__
                    if verify:
                        check_observed(self, state, action, nxt, fp)
                    if not screen:
                        yield index, action, nxt, fp, None
                        continue
                    if not (settled and seen[2]):
                        q = quiet(state, nxt)
                        if keeps:
                            if verify and seen[3] is quiet and seen[2] != q:
                                raise FastPathError(
                                    f"the quiet test cached for {action} differs at {state}: it reads more than "
                                    "leader_only says"
                                )
                            seen[2], seen[3] = q, quiet
                        if not q:
                            yield index, action, nxt, fp, False
                            continue
                        if not is_new(fp):
                            continue
                    child = parts.copy()  # the successor's keys' parts and fingerprint
                    for i, x, n in changes:
                        child[i] = n
                        if i < G and i:
                            # parts hold broker b's stalled flag at G + 1 + b, its applied epoch at 2G + b
                            child[G + 1 + i], child[2 * G + i] = x.stalled, x.applied
                    child[G] = seen[4]
                    child[-1] = fp
                    yield (
                        index,
                        action,
                        nxt,
                        fp,
                        new_tuple(Fresh, (mask | ghost if seen[0] is not comps[G] else mask, child)),
                    )

    def expand(self, state: State):
        """(action, successor, its fingerprint before symmetry), in candidate order."""
        for _, action, nxt, fp, _ in self.transitions(state):
            yield action, nxt, fp

    def successors(self, state: State):
        for _, action, nxt, _, _ in self.transitions(state):
            yield action, nxt


def screened(expanded, state: State, is_new=None, quiet=None, fired=None, edge=None):
    """What transitions() yields, made from any (action, successor, fingerprint) sequence
    (fired: a dict, action type -> transitions):
    (index, action, successor, fingerprint, fresh), all of them (fresh None) without is_new,
    else only a new state (fresh UNKNOWN: nothing known about it) or a step quiet() does not
    pass (fresh False). `edge`: as transitions() takes it."""
    for index, (action, nxt, fp) in enumerate(expanded):
        if edge is not None:
            edge[0](fp)
            edge[1](action)
        if is_new is None:
            yield index, action, nxt, fp, None
            continue
        fired[type(action)] = fired.get(type(action), 0) + 1
        if not quiet(state, nxt):
            yield index, action, nxt, fp, False
        elif is_new(fp):
            yield index, action, nxt, fp, UNKNOWN


class FastModel:
    """The spec's Model with the fast path: what the local and multi-process engines search.

    Successors come from FastSuccessors; with config.symmetry, fingerprints are those of
    canonical states (spec/symmetry.py); the states themselves, and so every trace, stay
    the real ones. `actions` replaces spec.next.NEXT and `observation` spec.hw.observe (tests
    change a step this way).
    """

    def __init__(
        self,
        config: Config,
        verify: float = 0.0,
        actions: tuple[Action, ...] | None = None,
        observation=None,
        cache_entries: int = entries_for(DEFAULT_MIB),
        grows: bool = False,
    ):
        self.spec = Model(config, actions) if observation is None else Model(config, actions, observation=observation)
        self.config = self.spec.config
        self.fast = FastSuccessors(self.spec, verify, cache_entries, grows)
        self.in_order = tuple(range(1, self.config.rf + 1))
        # A cluster larger than the replication factor: the assignment moves (reassignment) and
        # the brokers outside it are relabelled too, so every successor is canonicalised.
        self.pooled = len(self.config.brokers) > self.config.rf
        if self.pooled and self.config.symmetry and not verify:
            self.fast.relabelled = frozenset(a.type for a in self.spec.actions if a.moves_replicas)
            self.fast.canonical_fp = self.canonical_fingerprint
        self.relabels: dict = {}  # (id of an interned component, relabelling) -> the relabelled one
        self.ordered = [tuple(range(1, k + 1)) for k in range(len(self.config.brokers) + 1)]  # by length

    def initial_states(self) -> list[State]:
        return self.spec.initial_states()

    def successors(self, state: State) -> Iterator[tuple[object, State]]:
        return self.fast.successors(state)

    def expand(self, state: State) -> Iterator[tuple[object, State, int]]:
        """(action, successor, fingerprint): successors with the fingerprint the engine needs."""
        if self._canonical_successors(state):
            return self.fast.expand(state)
        return self._expand_reduced(state)

    def transitions(self, state: State, is_new=None, quiet=None, fired=None, known=None, edge=None):
        """expand() as the search consumes it; see FastSuccessors.transitions."""
        if self._canonical_successors(state):
            return self.fast.transitions(state, is_new, quiet, fired, known, edge)
        return screened(self._expand_reduced(state), state, is_new, quiet, fired, edge)

    def _canonical_successors(self, state: State) -> bool:
        """Whether the successors' own fingerprints are canonical. No step changes the
        assignment, so the successors of a state in assignment order 1..rf are their own
        canonical forms: the reduced search (which starts from that order) needs no
        canonicalisation at all. Verify mode checks the premise."""
        if not self.config.symmetry:
            return True
        c = state.controller
        if not self.pooled:
            return c.replicas == self.in_order and not self.fast.verify
        # One broker outside the set: a state numbered in assignment order is canonical, and so
        # is every successor but those of an action that reorders the set (a reassignment's
        # start), which the fused loop fingerprints by their class (FastSuccessors.relabelled).
        cfg = self.config
        return not self.fast.verify and len(cfg.brokers) - cfg.rf <= 1 and c.replicas == self.ordered[len(c.replicas)]

    def _expand_reduced(self, state: State):
        in_order, fingerprint = self.in_order, self.fast.fingerprint
        pooled = self.pooled
        for action, nxt, fp in self.fast.expand(state):
            if not pooled and nxt.controller.replicas != state.controller.replicas:
                raise AssertionError(f"{action} changed the replica assignment, which only a reassignment may")
            if pooled:
                fp = self.canonical_fingerprint(nxt)
            elif nxt.controller.replicas != in_order:
                fp = fingerprint(symmetry.canonical(nxt))
            yield action, nxt, fp

    def canonical_fingerprint(self, state: State) -> int:
        """fingerprint(symmetry.canonical(state)), with each component's relabelling cached: a
        relabelled broker or controller is the same object every time its original meets the
        same relabelling. With two or more brokers outside the set, canonical() itself (it
        compares their orders)."""
        cfg = self.config
        c = state.controller
        if len(cfg.brokers) - len(c.replicas) > 1:
            return self.fast.fingerprint(symmetry.canonical(state))
        outsiders = tuple(b for b in cfg.brokers if b not in c.replicas)
        perm = symmetry.relabelling(c.replicas, outsiders)
        comps = self.fast._interned(state)[0]
        if symmetry.is_identity(perm):
            return self.fast.components.xor([self.fast.components.serial[id(x)] for x in comps])
        out = list(comps)
        out[0] = self._relabelled(comps[0], perm, symmetry.relabel_controller, 0)
        for b in cfg.brokers:
            out[perm[b - 1]] = self._relabelled(comps[b], perm, symmetry.relabel_broker, 1)
        serial = self.fast.components.serial
        return self.fast.components.xor([serial[id(x)] for x in out])

    def _relabelled(self, x, perm: tuple, relabel, tag: int):
        key = (id(x), perm)
        got = self.relabels.get(key)
        if got is None:
            got = self.relabels[key] = self.fast.components.intern(relabel(x, perm), tag)
        return got

    def canonical(self, state: State) -> State:
        return self.spec.canonical(state)

    def fingerprint(self, state: State) -> int:
        return self.fast.fingerprint(self.canonical(state))

    def action_types(self) -> tuple:
        return self.spec.action_types()

    def action_names(self) -> list[str]:
        return self.spec.action_names()
