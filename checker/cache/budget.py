"""One bound on the entries of a process's step caches, spent where the hits are.

The step caches (checker/cache/outcomes.py StepCache, one per action and per RoundTrip half)
grew with the search: at three million states of `--max-fences 1` they held 1.71 million
entries, about 700 bytes each with their share of the dict caches. Each cache counts its
lookups and its misses. Every quarter of the budget stored, a sweep counts the entries and
empties each cache that hit on fewer than one lookup in LOW since the last sweep; such a
cache stores nothing until the next sweep, then is tried again. Past the budget, the sweep
then halves the caches with the fewest hits per entry first, round after round, until the
entries are half the budget; a cache loses its older half (a dict keeps insertion order,
and a level's steps are mostly those of the level before). An entry is an outcome, so
dropping one costs a step run later, never a state.

The plain dict caches (the observe cache, the candidates per broker) are kept in check by
`store` alone: each drops its older half past its own share of the budget.
"""

from __future__ import annotations

from itertools import islice

# What an outcome entry costs, with its key, its tuples and its share of the dict caches (which
# are bounded at a quarter of the entries each): measured at three million states of
# --max-fences 1, one process, as the peak RSS saved per entry between budgets.
ENTRY_BYTES = 700
DEFAULT_MIB = 512  # for the run, the workers share it: the default check's caches fit whole in one process
LOW = 20  # a cache hitting on fewer than 1 lookup in LOW is not worth its entries
# With the native core attached, the core keeps the outcomes, candidates and observations
# itself, in a few dozen bytes each where a Python entry costs ENTRY_BYTES, and the Python
# caches only refill it after it empties its own (and serve the candidates' misses). So Python
# keeps PY_SHARE of the entries and the core the rest of the budget, in bytes it counts itself
# (native/src/search/memory.rs). A tenth, not round seven's quarter: the Python caches hit on
# few of the core's misses (a Fetch's handle on none), and the core, given the difference,
# empties its caches less often: docs/PERFORMANCE.md, rounds seven, eight and ten.
PY_SHARE = 0.1
# Past its floor (--cache-mib when given, else DEFAULT_MIB), a budget that grows follows the
# states its process holds at this many bytes each: a large model's caches meet more distinct
# components than a small one's, and a floor fitted to the default check empties them over and
# over (docs/PERFORMANCE.md, round fourteen). 20 keeps the thorough runs' peaks under 100 bytes
# a state; an explicit --cache-mib is a cap, and does not grow.
GROWTH_BYTES = 20
# The budget moves when the states ask for an eighth more than it holds, not at every state.
GROWTH_STEP = 1.125


def entries_for(mib: float) -> int:
    """The budget in entries for a budget in MiB (at ENTRY_BYTES an entry)."""
    return max(1024, int(mib * 2**20 / ENTRY_BYTES))


def share_of(mib: float, processes: int) -> int:
    """One process's entries when `processes` share a budget of `mib` (--cache-mib is the run's,
    so --workers does not multiply it: docs/PERFORMANCE.md, round eleven)."""
    return entries_for(mib / processes)


class CacheBudget:
    """The step caches of one process (members) and the bound on their entries."""

    def __init__(self, limit: int, grows: bool = False) -> None:
        self._bound(limit)
        self.total = limit  # the whole budget in entries, the core's share with it
        self.grows = grows
        self.entries = 0  # stored since the last sweep counted them: an upper bound
        self.members: list = []
        self.sweeps = 0
        self.emptied = 0  # caches emptied for few hits, over all sweeps
        self.core_limit: int | None = None  # share_with_core
        self.core_known = 0
        self.core_forgets = 0  # times a core emptied its caches, past its share
        self.core_tables: dict = {}  # the last core's tables as it closed: name -> bytes claimed

    def _bound(self, limit: int) -> None:
        self._limit(limit)
        self.next_sweep = max(1024, limit // 4)

    def _limit(self, limit: int) -> None:
        self.limit = limit
        self.dict_limit = max(1024, limit // 4)  # for each plain dict cache (store)

    def _mine(self) -> int:
        """This process's entries of the whole budget: PY_SHARE of it once a core has the rest."""
        return self.total if self.core_limit is None else max(1024, int(self.total * PY_SHARE))

    def share_with_core(self) -> tuple[int, int]:
        """The native core's limits (native/src/search.rs Core `limit` and `known`), set once:
        this budget keeps PY_SHARE of its entries, and every core attached to it shares the
        rest, in bytes; its verdicts keep the whole budget's count of projections, as before
        the split (at eight times it, two workers on --max-controlled-shutdowns 1 peaked at
        5,532 MiB against 5,162, in about the same time)."""
        if self.core_limit is not None:
            return self.core_limit, self.core_known
        self.core_known = self.total
        limit = self._core_share()
        self._bound(self._mine())
        return limit, self.core_known

    def _core_share(self) -> int:
        """The core's share of the whole budget, in bytes: all but PY_SHARE of its entries."""
        self.core_limit = limit = int(self.total * (1 - PY_SHARE) * ENTRY_BYTES)
        return limit

    def follow(self, states: int) -> int | None:
        """Grow the budget with the states this process holds (GROWTH_BYTES each) when it
        grows and they ask for more; the core's new limit in bytes when it moved, else None.
        The verdicts' count of projections stays as it was set."""
        want = states * GROWTH_BYTES // ENTRY_BYTES
        if not self.grows or want < self.total * GROWTH_STEP:
            return None
        self.total = want
        self._limit(self._mine())  # the next sweep holds the caches to it
        return None if self.core_limit is None else self._core_share()

    def join(self, cache) -> None:
        self.members.append(cache)

    def added(self) -> None:
        self.entries += 1
        if self.entries >= self.next_sweep:
            self.sweep()

    def sweep(self) -> None:
        """Count the entries, empty the caches that hardly hit, and past the budget free the
        least useful (module docstring)."""
        self.sweeps += 1
        sizes = []
        total = 0
        for cache in self.members:
            cache.skip = False  # skipped for the period now ending: tried again
            size = cache.size()
            if size and (cache.lookups - cache.period_misses()) * LOW < cache.lookups:
                cache.empty()
                cache.skip = True
                self.emptied += 1
                size = 0
            total += size
            sizes.append((cache, size))
        target = self.limit // 2
        if total > self.limit:
            ranked = [cache for cache, _ in sorted(sizes, key=_hits_per_entry)]
            dropped = 1
            while total > target and dropped:  # halve the least useful first, round after round
                dropped = 0
                for cache in ranked:
                    if total <= target:
                        break
                    freed = cache.drop_older_half()
                    dropped += freed
                    total -= freed
        for cache in self.members:
            cache.new_period()
        self.entries = total
        self.next_sweep = total + max(1024, self.limit // 4)


def _hits_per_entry(pair: tuple) -> float:
    cache, size = pair
    return (cache.lookups - cache.period_misses()) / size if size else 0.0


def store(cache: dict, key, value, limit: int) -> None:
    """A plain dict cache's own bound: past `limit` entries its older half is dropped."""
    if len(cache) >= limit:
        drop_older_half(cache)
    cache[key] = value


def drop_older_half(store: dict) -> list:
    """Delete the first half of a dict's keys (its older entries); return the values dropped."""
    old = list(islice(store, len(store) // 2))
    return [store.pop(key) for key in old]


def cache_stats(fast) -> dict:
    """Each cache's lookups and misses so far in a FastSuccessors: the step caches by action
    type (a RoundTrip's halves apart), the candidates and the observations. A lookup the
    candidates' cache answered with a step's fixed outcome is counted by neither."""
    out: dict = {}

    def count(name: str, lookups: int, misses: int) -> None:
        had = out.get(name, (0, 0))
        out[name] = (had[0] + lookups, had[1] + misses)

    for action, sc in fast.caches.items():
        name = type(action).__name__
        count(name, sc.lookups + sc.looked, sc.runs)
        for half, hc in zip((".handle", ".receive"), sc.halves or ()):
            count(name + half, hc.lookups + hc.looked, hc.runs)
    if fast.core_counts:  # the core's own caches; Python's rows above are the core's misses
        for name, (n, m) in fast.core_counts.items():
            count(f"core.{name}", n, m)
    else:
        count("candidates", fast.states * fast.n, sum(fast.candidate_runs))
        count("observe", fast.states + fast.observe_lookups, fast.observe_misses)
    return {
        name: {"lookups": n, "misses": m, "hit_rate": round(1 - m / n, 4) if n else None}
        for name, (n, m) in sorted(out.items())
    }
