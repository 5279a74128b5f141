"""Breadth-first search across N local processes (`kafkamc check --workers N`).

The design is the Spark engine's, without Spark: worker w owns the states whose
controller's fingerprint is w modulo N (Model.owner_key: states that share a controller
share most step-cache entries, so each worker's caches serve it; with a split on the
whole state's fingerprint every worker recomputed 80% of the cache and two workers were
no faster than one), keeps their visited set and their part of the frontier. One BFS
level is one round:

1. each worker expands its frontier, checks every step, and sorts the successors by owner;
2. it sends the others theirs, each state once per level, as the fingerprints of its
   components (a few integers), shipping a component itself only the first time that peer
   needs it: a whole state costs 13 microseconds to encode and decode, more than
   expanding it;
3. each owner keeps the successors it has not visited, checks them and makes them its
   next frontier.

Every state travels with its path key (checker/keys.py) and the smallest key wins each
choice: the first arrival of a state, the witness of a property, the violation reported.
That is the order the single-process BFS meets them in, so counts, depth, coverage,
witnesses and traces are the same. At a violation the counts cover the whole level the
violation is in, where one process stops at it.

Workers are forked, so they start with the parent's model and compiled invariants;
they ignore Ctrl-C, which the coordinating process turns into a clean stop.
"""

from __future__ import annotations

import gc
import multiprocessing
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable
from queue import Empty

from kafkamc.checker.contract import SearchModel
from kafkamc.checker.keys import decode_key, index_bytes
from kafkamc.checker.search import Limits, Result, Violation, replay_path, verdict_of
from kafkamc.checker.visited import FingerprintSet
from kafkamc.spec.state import State

PEER_TIMEOUT_S = 600.0  # a peer that sends nothing for this long has died


class WorkerFailed(RuntimeError):
    """A worker process raised or died; the message is one line, details has the rest."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


# ---------------------------------------------------------------- the worker side


class _Worker:
    def __init__(self, w: int, n: int, model, suite, inboxes: list):
        self.w, self.n = w, n
        self.model, self.suite = model, suite
        self.inboxes = inboxes
        self.visited = FingerprintSet()
        self.frontier: list = []  # (key, State) of the newest level this worker owns
        self.sent: list[set] = [set() for _ in range(n)]  # component fingerprints each peer already has
        self.fast = model.fast
        self.tags = model.fast.tags

    def start(self, entries: list) -> dict:
        """The initial states this worker owns: (fp, key, state), already deduplicated."""
        for fp, key, state in entries:
            self.visited.add(fp)
            self.frontier.append((key, state))
        return {"frontier": len(self.frontier)}

    def level(self, args: tuple) -> dict:
        """Expand this worker's frontier, exchange successors with the peers, keep the new.
        Past the deadline (a time limit) the expansion stops early: the level is cut short."""
        unreached, deadline = args
        model, suite, w, n = self.model, self.suite, self.w, self.n
        quiet = suite.quiet_step(unreached) if suite is not None else (lambda p, s: True)
        reach = [(name, fn) for name, fn in suite.reach_functions() if name in unreached] if suite else []
        check_step = suite.check_step if suite is not None else (lambda p, s: None)
        mine: dict = {}  # fp -> (key, state) for states this worker owns
        out: list = [{} for _ in range(n)]
        fired: Counter = Counter()
        generated = 0
        action_bad = None  # (key, invariant)
        witnesses: dict = {}
        seen, owner_of = self.visited.__contains__, model.owner_key
        cut = False
        for done, (key, state) in enumerate(self.frontier):
            if deadline is not None and done & 0xFF == 0 and time.monotonic() >= deadline:
                cut = True
                break
            for index, action, nxt, fp, _ in model.transitions(state):
                generated += 1
                fired[type(action)] += 1
                if not quiet(state, nxt):
                    k = key + index_bytes(index)
                    bad = check_step(state, nxt)
                    if bad and (action_bad is None or k < action_bad[0]):
                        action_bad = (k, bad)
                    for name, fn in reach:
                        if fn(state, nxt) and (name not in witnesses or k < witnesses[name]):
                            witnesses[name] = k
                owner = owner_of(nxt) % n
                if owner == w:
                    if seen(fp):
                        continue
                    box = mine
                else:
                    box = out[owner]
                k = key + index_bytes(index)
                known = box.get(fp)
                if known is None or k < known[0]:
                    box[fp] = (k, nxt)
        self.frontier = []
        for peer in range(n):
            if peer != w:
                self.inboxes[peer].put((w, self._pack(peer, out[peer])))
        for _ in range(n - 1):
            try:
                _, items = self.inboxes[w].get(timeout=PEER_TIMEOUT_S)
            except Empty:
                raise WorkerFailed(f"worker {w}: no word from a peer for {PEER_TIMEOUT_S:g}s") from None
            self._unpack(items, mine)
        new, state_bad = 0, None
        check_state = suite.check_state if suite is not None else (lambda s: None)
        for fp, (k, state) in mine.items():
            if not self.visited.add(fp):
                continue
            new += 1
            bad = check_state(state)
            if bad and (state_bad is None or k < state_bad[0]):
                state_bad = (k, bad)
            self.frontier.append((k, state))
        return {
            "generated": generated,
            "new": new,
            "coverage": {t.__name__: c for t, c in fired.items()},
            "action_bad": action_bad,
            "state_bad": state_bad,
            "reach": witnesses,
            "visited_bytes": self.visited.nbytes,
            "cut": cut,
        }

    def _pack(self, peer: int, box: dict) -> tuple:
        """(components the peer lacks, [(fp, key, component fingerprints), ...])."""
        fps_of, sent, tags = self.fast.fingerprints, self.sent[peer], self.tags
        components, states = [], []
        for fp, (k, state) in box.items():
            cfps = fps_of(state)
            for i, comp in enumerate((state.controller, *state.brokers, state.ghost, state.budget)):
                if cfps[i] not in sent:
                    sent.add(cfps[i])
                    components.append((tags[i], comp))
            states.append((fp, k, cfps))
        return components, states

    def _unpack(self, items: tuple, mine: dict) -> None:
        components, states = items
        intern = self.fast.components.intern
        for tag, comp in components:
            intern(comp, tag)
        by_fp, rf, seen = self.fast.components.by_fp, self.model.config.rf, self.visited.__contains__
        for fp, k, cfps in states:
            if seen(fp):
                continue
            known = mine.get(fp)
            if known is None or k < known[0]:
                state = State(
                    by_fp[cfps[0]], tuple(by_fp[f] for f in cfps[1 : rf + 1]), by_fp[cfps[rf + 1]], by_fp[cfps[rf + 2]]
                )
                mine[fp] = (k, state)


def _serve(w: int, n: int, model, suite, inboxes: list, conn) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides what Ctrl-C means
    gc.disable()  # see explorer.cyclic_gc_paused
    worker = _Worker(w, n, model, suite, inboxes)
    try:
        while True:
            command, arg = conn.recv()
            if command == "stop":
                return
            conn.send(("ok", getattr(worker, command)(arg)))
    except BaseException as e:  # report anything, then end this process
        try:
            conn.send(("error", (f"worker {w}: {type(e).__name__}: {e}", traceback.format_exc())))
        except OSError:
            pass


# ---------------------------------------------------------------- the coordinating side


def explore_workers(
    model: SearchModel,
    checks,
    n: int,
    limits: Limits = Limits(),
    progress: Callable[[dict], None] | None = None,
    stop_when_reached: frozenset = frozenset(),
) -> Result:
    """Level-synchronous BFS over n forked worker processes; same contract as explore()."""
    if n < 2:
        raise ValueError("explore_workers needs at least 2 workers")
    start = time.monotonic()
    ctx = multiprocessing.get_context("fork")
    inboxes = [ctx.Queue() for _ in range(n)]
    pipes, procs = [], []
    for w in range(n):
        mine, theirs = ctx.Pipe()
        p = ctx.Process(target=_serve, args=(w, n, model, checks, inboxes, theirs), daemon=True)
        p.start()
        pipes.append(mine)
        procs.append(p)
    run = _Coordinator(model, checks, n, pipes, procs, limits, progress, stop_when_reached, start)
    try:
        return run.run()
    finally:
        for conn in pipes:
            try:
                conn.send(("stop", None))
            except OSError:
                pass
        for p in procs:
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
        for q in inboxes:
            q.cancel_join_thread()
            q.close()


class _Coordinator:
    def __init__(self, model, checks, n, pipes, procs, limits, progress, stop_when_reached, start):
        self.model, self.checks, self.n = model, checks, n
        self.pipes, self.procs = pipes, procs
        self.limits, self.progress = limits, progress
        self.targets = set(stop_when_reached)
        self.stop_when_reached = bool(stop_when_reached)
        self.start = start
        self.distinct = self.generated = self.depth = self.frontier = 0
        self.coverage: Counter = Counter()
        self.unreached = [name for name, _ in checks.reach_functions()] if checks is not None else []
        self.witnesses: dict = {}  # name -> key
        self.violation = None  # (key, invariant, kind)
        self.stop_reason = None
        self.visited_bytes = 0

    def _all(self, command: str, args: list) -> list:
        for conn, arg in zip(self.pipes, args):
            conn.send((command, arg))
        replies = []
        for w, conn in enumerate(self.pipes):
            try:
                kind, value = conn.recv()
            except EOFError:
                raise WorkerFailed(f"worker {w} died (exit code {self.procs[w].exitcode})") from None
            if kind == "error":
                raise WorkerFailed(*value)
            replies.append(value)
        return replies

    def run(self) -> Result:
        try:
            if self._initial():
                while self.frontier and not self._stopping():
                    self._level()
        except KeyboardInterrupt:
            self.stop_reason = "interrupted"
        return self._result()

    def _initial(self) -> bool:
        model, checks = self.model, self.checks
        seen: set = set()
        entries: list[list] = [[] for _ in range(self.n)]
        for i, s in enumerate(model.initial_states()):
            self.generated += 1
            fp = model.fingerprint(s)
            if fp in seen:
                continue
            seen.add(fp)
            self.distinct += 1
            bad = checks.check_state(s) if checks is not None else None
            if bad:
                self.violation = (index_bytes(i), bad, "state")
                return False
            entries[model.owner_key(s) % self.n].append((fp, index_bytes(i), s))
        self.frontier = sum(r["frontier"] for r in self._all("start", entries))
        return True

    def _stopping(self) -> bool:
        limits = self.limits
        if self.stop_when_reached and not self.targets:
            return True
        if limits.max_depth is not None and self.depth >= limits.max_depth:
            self.stop_reason = f"max depth {limits.max_depth}"
            return True
        if limits.max_states is not None and self.distinct >= limits.max_states:
            self.stop_reason = f"max states {limits.max_states}"
            return True
        if limits.time_limit is not None and time.monotonic() - self.start >= limits.time_limit:
            self.stop_reason = f"time limit {limits.time_limit:g}s"
            return True
        return False

    def _level(self) -> None:
        limit = self.limits.time_limit
        deadline = None if limit is None else self.start + limit
        replies = self._all("level", [(list(self.unreached), deadline)] * self.n)
        if any(r["cut"] for r in replies):
            self.stop_reason = f"time limit {limit:g}s"
        new = sum(r["new"] for r in replies)
        self.generated += sum(r["generated"] for r in replies)
        self.distinct += new
        self.visited_bytes = sum(r["visited_bytes"] for r in replies)
        for r in replies:
            self.coverage.update(r["coverage"])
        for name in list(self.unreached):
            keys = [r["reach"][name] for r in replies if name in r["reach"]]
            if keys:
                self.witnesses[name] = min(keys)
                self.unreached.remove(name)
                self.targets.discard(name)
        # At one key, the step is checked before the state it leads to.
        found = [
            (r[kind][0], order, r[kind][1], label)
            for r in replies
            for order, (kind, label) in enumerate((("action_bad", "action"), ("state_bad", "state")))
            if r[kind]
        ]
        if found:
            key, _, name, kind = min(found)
            self.violation = (key, name, kind)
            # The single-process search stops there: what it would meet later does not count.
            for name in [m for m, k in self.witnesses.items() if k > key and len(k) == len(key)]:
                del self.witnesses[name]
        if new:
            self.depth += 1
        self.frontier = new if not found and self.stop_reason is None else 0
        if self.progress is not None:
            self.progress(self._stats())

    def _stats(self, final: bool = False) -> dict:
        el = time.monotonic() - self.start
        return {
            "distinct": self.distinct,
            "generated": self.generated,
            "queue": self.frontier,
            "depth": self.depth,
            "elapsed": el,
            "rate": self.distinct / el if el > 0 else 0.0,
            "final": final,
        }

    def _trace(self, key: bytes) -> list:
        init, steps = decode_key(key)
        return replay_path(self.model, init, steps)

    def _result(self) -> Result:
        reached = {name: self._trace(key) for name, key in self.witnesses.items()}
        violation = None
        if self.violation is not None:
            key, name, kind = self.violation
            violation = Violation(name, kind, self._trace(key))
        verdict = verdict_of(violation, bool(self.stop_when_reached) and not self.targets, self.stop_reason)
        if self.progress is not None:
            self.progress(self._stats(final=True))
        return Result(
            verdict,
            "bfs",
            self.distinct,
            self.generated,
            self.depth,
            time.monotonic() - self.start,
            self.stop_reason,
            violation,
            self.coverage,
            reached,
            visited_bytes=self.visited_bytes,
        )
