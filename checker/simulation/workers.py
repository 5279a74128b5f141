"""`kafkamc check --simulate --workers N`: the walks across N forked processes.

The walks are cut into small ranges; worker w takes ranges w, w + N, w + 2N, ... in order
and sends each Batch back; the parent adds them in range order (checker/simulation/simulate.py,
Tally), so the numbers are those of one process. A worker stops after a range that met a
violation or the deadline: no later range of its own can count. Workers are forked, so
they start with the parent's model and compiled invariants; they ignore Ctrl-C, which the
parent turns into a clean stop, and die with it (checker/engines/workers.py, _die_with_parent).
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Generator
from queue import Empty

from kafkamc.checker.engines.workers import WorkerFailed, _die_with_parent
from kafkamc.checker.simulation.simulate import Batch, Simulation, ranges, run_range

POLL_S = 1.0  # how often the parent looks for a worker that died without a word


def chunk_size(walks: int, workers: int) -> int:
    """Ranges small enough to share the walks out evenly and stop soon after a violation."""
    return max(1, min(64, -(-walks // (workers * 8))))


def _serve(w: int, n: int, model, suite, sim: Simulation, chunks: list, deadline: float | None, out) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the CLI's handler, inherited by fork
    _die_with_parent()
    for k in range(w, len(chunks), n):
        start, stop = chunks[k]
        try:
            b = run_range(model, suite, sim.seed, start, stop, sim.depth, deadline)
        except BaseException as e:  # report anything, then end this process
            out.put((k, "error", (f"worker {w}: {type(e).__name__}: {e}", traceback.format_exc())))
            return
        out.put((k, "ok", b))
        if b.found is not None or b.cut:
            return


def walk_in_workers(model, suite, sim: Simulation, n: int, deadline: float | None) -> Generator[Batch, None, None]:
    """The Batches of every range, in range order, from n forked workers; closing the
    generator ends the workers."""
    chunks = ranges(0, sim.walks, chunk_size(sim.walks, n))
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    m = min(n, len(chunks))
    procs = [
        ctx.Process(target=_serve, args=(w, m, model, suite, sim, chunks, deadline, out), daemon=True) for w in range(m)
    ]
    for p in procs:
        p.start()
    arrived: dict = {}
    try:
        for k in range(len(chunks)):
            while k not in arrived:
                _receive(out, arrived, procs)
            b = arrived.pop(k)
            yield b
            if b.found is not None or b.cut:
                return
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join(timeout=2)
        out.cancel_join_thread()
        out.close()


def _receive(out, arrived: dict, procs: list) -> None:
    """One Batch from any worker into `arrived`; WorkerFailed when one raised or died."""
    try:
        k, kind, value = out.get(timeout=POLL_S)
    except Empty:
        for w, p in enumerate(procs):
            if p.exitcode not in (None, 0):
                raise WorkerFailed(f"worker {w} died (exit code {p.exitcode})") from None
        return
    if kind == "error":
        raise WorkerFailed(*value)
    arrived[k] = value
