"""Breadth-first search across N local processes (`kafkamc check --workers N`).

The design is the Spark engine's, without Spark: worker w owns the states whose
controller's fingerprint is w modulo N (checker/engines/transport.py owner_key: states that share a controller
share most step-cache entries, so each worker's caches serve it; with a split on the
whole state's fingerprint every worker recomputed 80% of the cache and two workers were
no faster than one), keeps their visited set and their part of the frontier. One BFS
level is one round:

1. each worker expands its frontier through the local explorer's fused loop, in key order,
   checks every step and tests each successor it has not met against the state
   invariants, and sorts the successors by owner;
2. it sends the others theirs, each state once (a worker's visited set takes in the
   peers' states it met, so it never sends one twice), as the fingerprints of its
   components, shipping a component itself only the first time that peer needs it: a
   whole state costs 13 microseconds to encode and decode, more than expanding it;
3. each owner keeps the successors it has not visited, by smallest key, as its next
   frontier (compact records: checker/store/frontier.py).

Every state travels with its path key (checker/store/keys.py) and the smallest key wins each
choice: the first arrival of a state, the witness of a property, the violation reported.
That is the order the single-process BFS meets them in, so counts, depth, coverage,
witnesses and traces are the same. At a violation the counts cover the whole level the
violation is in, where one process stops at it.

On the native core, the core does steps 1 to 3 itself (checker/core/part.py): a new state
whose verdicts it knows is routed, kept or packed without Python, under the same rules.

Workers are forked, so they start with the parent's model and compiled invariants;
they ignore Ctrl-C, which the coordinating process turns into a clean stop.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import time
import traceback
from array import array
from collections.abc import Callable, Iterator
from functools import partial
from multiprocessing.connection import wait
from queue import Empty

import kafkamc.checker.engines.transport as transport
from kafkamc.checker.core.native_search import Attached, CoreVisited, core_for
from kafkamc.checker.core.part import CorePart
from kafkamc.checker.engines.contract import SearchModel
from kafkamc.checker.engines.level import (
    Findings,
    Tally,
    expand_fresh,
    first_violation,
    initial_level,
    limit_reached,
    smaller,
)
from kafkamc.checker.engines.search import Limits, Result
from kafkamc.checker.store.frontier import Codec, Kept
from kafkamc.checker.store.keys import decode_key
from kafkamc.checker.store.memory import map_large_blocks, peak_rss
from kafkamc.checker.store.visited import FingerprintSet

PEER_TIMEOUT_S = 600.0  # a peer that sends nothing for this long has died


class WorkerFailed(RuntimeError):
    """A worker process raised or died; the message is one line, details has the rest."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


# ---------------------------------------------------------------- the worker side


class _Worker:
    def __init__(self, w: int, n: int, model, suite, inboxes: list, recording=None, core=None):
        self.w, self.n = w, n
        self.graph = None if recording is None else recording.part()  # checker/liveness/graph.py
        self.model, self.suite = model, suite
        self.inboxes = inboxes
        # With the native core (its module, or None), the core expands this worker's part, keeps
        # its level and its visited set, and fills its parcels (checker/core/part.py).
        self.attached = None if core is None else Attached(core, model, None, suite, keep=False)
        self.part = None if self.attached is None else CorePart(self.attached, model, w, n)
        self.visited = FingerprintSet() if self.attached is None else CoreVisited(self.attached.core)
        # The newest level this worker owns, compact (checker/store/frontier.py): each state's path
        # key, and where its record (fingerprint, serial numbers) starts in `records`.
        self.codec = Codec(model.fast)
        self.kept = Kept(self.codec.width)
        self.sent: list[set] = [set() for _ in range(n)]  # component fingerprints each peer already has
        self.quiet: dict = {}  # unreached properties -> the suite's quiet test for them (level.expand_fresh)

    def start(self, entries: list) -> dict:
        """The initial states this worker owns: (fp, key, state), already deduplicated."""
        if self.part is not None:
            return {"frontier": self.part.start(entries, self.codec.numbers)}
        for fp, key, state in entries:
            self.visited.add(fp)
            self.kept.add(fp, key, None, self.codec.record(state, None))
        self.kept.index = None
        return {"frontier": len(self.kept)}

    def frontier(self, kept: Kept) -> Iterator[tuple]:
        """(key, state, known) of a level's states, in key order."""
        rebuild = self.codec.state
        for key, record in kept.in_key_order():
            yield (key, *rebuild(record))

    def level(self, args: tuple) -> dict:
        """Expand this worker's frontier, exchange successors with the peers, keep the new.
        Past the deadline (a time limit) the expansion stops early: the level is cut short.

        The expansion is the local explorer's fused loop (level.expand_fresh): a successor
        this worker has visited, or met before in this level with a smaller key, is screened
        out before it is built; each other is yielded with the state invariant it breaks,
        which travels with it to its owner. The frontier is expanded in key order, so the
        first time a fingerprint comes out of the loop is its smallest key in this part."""
        unreached, deadline = args
        if self.part is not None:
            return self._level_on_core(unreached, deadline)
        model, w, n = self.model, self.w, self.n
        clock = time.process_time()
        mine = Kept(self.codec.width)  # the successors this worker owns
        out: list = [self._parcel() for _ in range(n)]  # what each peer is sent
        found = Findings()
        visited = self.visited
        owner_of = partial(transport.owner_key, model)

        # A successor goes into this worker's visited set the first time it comes out of the
        # loop, whoever owns it: a state owned here is new then (it is kept, below), and one a
        # peer owns has been sent to it, which keeps it or had it. Either way, meeting it
        # again, in this level or a later one, is no news: the loop screens it out before
        # building it, and it is not sent twice. (Peers' states cost this set 8 to 16 bytes each.)
        frontier = self.frontier(self.kept)
        record = self.codec.record
        quiet = self._quiet(unreached)
        expansion = expand_fresh(
            model,
            frontier,
            self.suite,
            unreached,
            found,
            visited.__contains__,
            deadline,
            True,
            visited.add,
            quiet,
            self.graph,
        )
        for fp, k, nxt, bad, known in expansion:
            owner = owner_of(nxt) % n
            if owner == w:
                mine.add(fp, k, bad, record(nxt, known))
            else:
                self._send(owner, out[owner], fp, k, nxt, bad)
        expanded = time.process_time()
        for peer in range(n):
            if peer != w:
                components, fps, keys, broken = out[peer]
                length = len(keys) * self.codec.width // len(fps) if fps else 0  # one level: one key length
                self.inboxes[peer].put((w, (components, fps, bytes(keys), length, broken)))
        packed = time.process_time()
        received = self._receive(partial(self._unpack, mine=mine))
        new, state_bad = len(mine), None
        for fp in mine.fps:
            visited.add(fp)  # those from peers; the rest are in already
        for i, bad in mine.broken.items():
            state_bad = smaller(state_bad, (mine.key(i), bad))
        mine.index = None
        self.kept = mine
        return self._report(found, new, state_bad, (clock, expanded, packed), received)

    def _report(self, found, new: int, state_bad, clocks: tuple, received: tuple) -> dict:
        """What a level sends the coordinator; clocks: process time at its start, after the
        expansion and after the packing; received: _receive's (waited, unpacking)."""
        clock, expanded, packed = clocks
        waited, unpacking = received
        now = time.process_time()
        times = {"expand": expanded - clock, "pack": packed - expanded, "unpack": unpacking, "wait": waited}
        times["keep"] = now - packed - unpacking
        return {
            "found": found,
            "new": new,
            "state_bad": state_bad,
            "visited_bytes": self.visited.nbytes,
            "peak_rss": peak_rss(),
            "cpu": now - clock,
            "times": times,
        }

    def _quiet(self, unreached):
        quiet = self.quiet.get(unreached)
        if quiet is None and self.suite is not None:
            quiet = self.quiet[unreached] = self.suite.quiet_step(list(unreached))
        return quiet

    def _level_on_core(self, unreached, deadline) -> dict:
        """level() on the core: it expands, routes and keeps; the parcels go as level() sends its."""
        part, w = self.part, self.w
        assert part is not None
        clock = time.process_time()
        found = Findings()
        part.expand(self.suite, unreached, found, self._quiet(unreached), deadline)
        expanded = time.process_time()
        for peer in range(self.n):
            if peer != w:
                self.inboxes[peer].put((w, part.parcel(peer)))
        packed = time.process_time()
        received = self._receive(part.unpack)
        new, state_bad = part.keep()
        return self._report(found, new, state_bad, (clock, expanded, packed), received)

    def _receive(self, unpack) -> tuple:
        """Each peer's parcel, given to unpack: (seconds waited, CPU seconds unpacking)."""
        w = self.w
        waited = unpacking = 0.0
        for _ in range(self.n - 1):
            t = time.monotonic()
            try:
                _, items = self.inboxes[w].get(timeout=PEER_TIMEOUT_S)
            except Empty:
                raise WorkerFailed(f"worker {w}: no word from a peer for {PEER_TIMEOUT_S:g}s") from None
            waited += time.monotonic() - t
            u = time.process_time()
            unpack(items)
            unpacking += time.process_time() - u
        return waited, unpacking

    def recorded(self, _) -> object:
        """The part of the liveness graph this worker recorded (a GraphPart, pickled)."""
        return self.graph

    def _parcel(self) -> tuple:
        """What is sent to one peer at the end of a level, filled as successors come out:
        (components it lacks as (kind, component), each state's fingerprint then its
        components' fingerprints in one array, their path keys (one length per level) in
        one buffer, {index: broken invariant}). No state object is kept: a
        level's successors held as objects until the exchange cost more than the rest of a
        worker's memory at three million states."""
        return [], array("Q"), bytearray(), {}

    def _send(self, peer: int, parcel: tuple, fp: int, key: bytes, state, bad) -> None:
        components, fps, keys, broken = parcel
        sent = self.sent[peer]
        if bad:
            broken[len(fps) // self.codec.width] = bad
        fps.append(fp)
        for cfp, kind, comp in transport.shipped(self.model, state):
            if cfp not in sent:
                sent.add(cfp)
                components.append((kind, comp))
            fps.append(cfp)
        keys += key

    def _unpack(self, items: tuple, mine: Kept) -> None:
        """Keep what a peer sent this worker: each state it has not visited, unless it
        already holds it under a smaller key (a replaced record is written over)."""
        components, fps, keys, length, broken = items
        record, width = self.codec.record, self.codec.width
        learn, assemble = partial(transport.learn, self.model), partial(transport.assemble, self.model)
        seen = self.visited.__contains__
        for kind, comp in components:
            learn(kind, comp)
        index = mine.index
        assert index is not None
        for i in range(len(fps) // width):
            fp, k, bad = fps[i * width], keys[i * length : (i + 1) * length], broken.get(i)
            at = index.get(fp)
            if at is None:
                if seen(fp):
                    continue  # visited at an earlier level
                mine.add(fp, k, bad, record(assemble(fps[i * width + 1 : (i + 1) * width]), None))
            elif k < mine.key(at):
                mine.replace(at, k, bad, record(assemble(fps[i * width + 1 : (i + 1) * width]), None))


def _die_with_parent() -> None:
    """Linux prctl(PR_SET_PDEATHSIG, SIGKILL): this worker is killed when its parent dies, by
    any signal, SIGKILL included; elsewhere the coordinator's own cleanup is all there is."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _own_session() -> None:
    """A session of its own, so a scheduling group of its own. Linux with autogroup
    (/proc/sys/kernel/sched_autogroup_enabled, on by default on many distributions) shares
    the CPU fairly between sessions, not processes: while anything else runs, workers left in
    the coordinator's session split one session's share between them, and two workers ran
    the default check no faster than one (measured: 1.16 cores for the two, 1.86 in their
    own sessions, back to back). Ctrl-C does not reach a worker in another session, which
    ignores it anyway; _die_with_parent still ends it with the coordinator."""
    try:
        os.setsid()
    except (OSError, AttributeError):  # already a session leader; not on this platform
        pass


def _serve(w: int, n: int, model, suite, inboxes: list, conn, recording, core) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides what Ctrl-C means
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the CLI's handler, inherited by fork
    _die_with_parent()
    _own_session()
    gc.disable()  # see explorer.cyclic_gc_paused
    worker = _Worker(w, n, model, suite, inboxes, recording, core)
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
    recording=None,
    engine: str = "auto",
) -> Result:
    """Level-synchronous BFS over n forked worker processes; same contract as explore().
    With `recording` (checker/liveness/graph.py), each worker records its part of the liveness graph,
    which comes home when the search holds. `engine` as explore() takes it: each worker
    expands its part on the native core where it serves the search."""
    if n < 2:
        raise ValueError("explore_workers needs at least 2 workers")
    core, note = (None, "") if engine == "python" else core_for(model, checks, "bfs", limits, recording)
    start = time.monotonic()
    map_large_blocks()  # before the fork: each worker keeps the setting
    ctx = multiprocessing.get_context("fork")
    inboxes = [ctx.Queue() for _ in range(n)]
    pipes, procs = [], []
    for w in range(n):
        mine, theirs = ctx.Pipe()
        p = ctx.Process(target=_serve, args=(w, n, model, checks, inboxes, theirs, recording, core), daemon=True)
        p.start()
        pipes.append(mine)
        procs.append(p)
    run = _Coordinator(model, checks, n, pipes, procs, limits, progress, stop_when_reached, start)
    try:
        result = run.run()
        result.core, result.core_note = ("native" if core is not None else "python"), note
        if recording is not None and result.verdict == "holds":
            recording.parts = run._all("recorded", [None] * n)
            recording.initial, recording.depth = run.initial, result.depth
        return result
    finally:
        for conn in pipes:
            try:
                conn.send(("stop", None))
            except OSError:
                pass
        for p in procs:
            p.join(timeout=2)
            if p.is_alive():  # waiting for a failed worker's states: it never reads "stop"
                p.terminate()
                p.join(timeout=2)
        for q in inboxes:
            q.cancel_join_thread()
            q.close()


class _Coordinator(Tally):
    def __init__(self, model, checks, n, pipes, procs, limits, progress, stop_when_reached, start):
        super().__init__(model, start)
        self.checks, self.n = checks, n
        self.pipes, self.procs = pipes, procs
        self.limits, self.progress = limits, progress
        self.targets = set(stop_when_reached)
        self.stop_when_reached = bool(stop_when_reached)
        self.frontier = 0
        self.initial: list = []  # (fingerprint, index) of the distinct initial states
        self.unreached = [name for name, _ in checks.reach_functions()] if checks is not None else []

    def _all(self, command: str, args: list) -> list:
        """Each worker's reply, taken as it comes: a worker that failed may have left another
        waiting for its states, so its error is read at once, not after the other's reply.
        A worker that ended without a word is seen by its process's sentinel (a sibling
        forked after its pipe was made holds that pipe open, so no EOF would come)."""
        for conn, arg in zip(self.pipes, args):
            conn.send((command, arg))
        replies: list = [None] * len(self.pipes)
        waiting = set(range(len(self.pipes)))
        of = {c: w for w, c in enumerate(self.pipes)} | {p.sentinel: w for w, p in enumerate(self.procs)}
        while waiting:
            ready = wait([x for w in waiting for x in (self.pipes[w], self.procs[w].sentinel)])
            for w in {of[r] for r in ready} & waiting:
                conn = self.pipes[w]
                try:
                    if not conn.poll():
                        raise EOFError
                    kind, value = conn.recv()
                except EOFError:
                    raise WorkerFailed(f"worker {w} died (exit code {self.procs[w].exitcode})") from None
                if kind == "error":
                    raise WorkerFailed(*value)
                replies[w] = value
                waiting.discard(w)
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
        model, n = self.model, self.n
        entries, self.generated, self.violation = initial_level(model, self.checks)
        self.initial = [(fp, decode_key(key)[0]) for fp, key, _ in entries]
        self.distinct = len(entries) + (self.violation is not None)
        if self.violation is not None:
            return False
        shares: list[list] = [[] for _ in range(n)]
        for fp, key, s in entries:
            shares[transport.owner_key(model, s) % n].append((fp, key, s))
        self.frontier = sum(r["frontier"] for r in self._all("start", shares))
        return True

    def _stopping(self) -> bool:
        if self.stop_when_reached and not self.targets:
            return True
        if self.limits.max_depth is not None and self.depth >= self.limits.max_depth:
            self.stop_reason = f"max depth {self.limits.max_depth}"
            return True
        self.stop_reason = limit_reached(self.limits, self.distinct, self.start)
        return self.stop_reason is not None

    def _level(self) -> None:
        limit = self.limits.time_limit
        deadline = None if limit is None else self.start + limit
        replies = self._all("level", [(tuple(self.unreached), deadline)] * self.n)
        found = Findings.total(r["found"] for r in replies)
        if found.cut:
            self.stop_reason = f"time limit {limit:g}s"
        new = sum(r["new"] for r in replies)
        self.generated += found.generated
        self.distinct += new
        self.visited_bytes = sum(r["visited_bytes"] for r in replies)
        self.peak_rss = max(self.peak_rss, peak_rss() + sum(r["peak_rss"] for r in replies))
        for w, r in enumerate(replies):
            for what, seconds in r["times"].items():
                self.cpu[w, what] = self.cpu.get((w, what), 0.0) + seconds
        self.coverage.update(found.coverage)
        for name in list(self.unreached):
            if name in found.reach:
                self.witnesses[name] = found.reach[name]
                self.unreached.remove(name)
                self.targets.discard(name)
        state_bad = None
        for r in replies:
            state_bad = smaller(state_bad, r["state_bad"])
        self.violation = first_violation(found.action_bad, state_bad)
        if self.violation is not None:
            key = self.violation[0]
            # The single-process search stops there: what it would meet later does not count.
            for name in [m for m, k in self.witnesses.items() if k > key and len(k) == len(key)]:
                del self.witnesses[name]
        if new:
            self.depth += 1
        self.frontier = new if self.violation is None and self.stop_reason is None else 0
        if self.progress is not None:
            self.progress(self.stats(self.frontier))

    def _result(self) -> Result:
        if self.progress is not None:
            self.progress(self.stats(self.frontier, final=True))
        return self.result(self.stop_when_reached and not self.targets)
