"""A partition's visited set on local disk: sorted runs of 64-bit fingerprints (--spill-dir).

In memory, a Spark partition's visited set is a FingerprintSet pickled with its Part, so an
executor holds its whole share of the state space. Spilled, it is a list of files, each a
sorted run of fingerprints, and the Part holds only their names: a level's merge reads the
runs a chunk at a time to find which of its candidates are already visited, then writes the
new fingerprints as one more run. An executor's memory then bounds one level's slice (its
candidates and the next frontier), not the visited set. Runs are merged pairwise when the
newest is at least half the size of the one before it (a binary counter: each fingerprint
is rewritten about log2(levels) times, and a lookup reads a logarithmic number of runs).

Files are never changed once written, so a task that Spark runs again reads what the first
attempt read. They stay until the run ends and the driver removes the folder. A run whose
files live on one machine's disk survives the loss of a task, not of that machine: after an
executor is lost, its partitions are recomputed elsewhere and must find the files, so on a
real cluster the folder must be one that every executor sees (a shared mount).
"""

from __future__ import annotations

import bisect
import heapq
import os
import uuid
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

CHUNK = 1 << 16  # fingerprints read or written at a time: 512 KiB


@dataclass(frozen=True)
class SpilledRuns:
    """A visited set as sorted runs in `folder`: ((file name, count), ...), oldest first, and
    `head`, sorted fingerprints not written yet (the initial states, which the driver places:
    its disk need not be the executors')."""

    folder: str
    runs: tuple = ()
    head: tuple = ()

    def __len__(self) -> int:
        return len(self.head) + sum(n for _, n in self.runs)

    @property
    def nbytes(self) -> int:
        return 8 * len(self)

    def __contains__(self, fp: int) -> bool:
        """One lookup reads every run: the search never asks it (spark_tasks asks `present`
        for a whole level at once); tests do."""
        return bool(self.present([fp]))

    def present(self, candidates: Iterable[int]) -> set:
        """The candidates already in the set, found by reading each run once, in chunks."""
        wanted = sorted(candidates)
        found = set(self.head).intersection(wanted)
        if not wanted:
            return found
        for name, _ in self.runs:
            for chunk in _chunks(self._path(name)):
                lo = bisect.bisect_left(wanted, chunk[0])
                hi = bisect.bisect_right(wanted, chunk[-1], lo)
                for fp in wanted[lo:hi]:
                    i = bisect.bisect_left(chunk, fp)
                    if i < len(chunk) and chunk[i] == fp:
                        found.add(fp)
        return found

    def with_run(self, fps: Iterable[int]) -> SpilledRuns:
        """This set plus fps (none of them in it), as a new value: the files of this one are
        left as they are."""
        new = sorted([*fps, *self.head])
        if not new:
            return self
        os.makedirs(self.folder, exist_ok=True)
        runs = [*self.runs, (self._write(iter(new)), len(new))]
        while len(runs) >= 2 and runs[-2][1] <= 2 * runs[-1][1]:
            (a, na), (b, nb) = runs[-2], runs[-1]
            merged = heapq.merge(_values(self._path(a)), _values(self._path(b)))
            runs[-2:] = [(self._write(merged), na + nb)]
        return SpilledRuns(self.folder, tuple(runs))  # the head went into the new run

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def _write(self, fps: Iterator[int]) -> str:
        """A new run file of the sorted fps; its name is new, so no reader sees it change."""
        name = f"run-{uuid.uuid4().hex}.q"
        tmp = self._path(name + ".tmp")
        with open(tmp, "wb") as f:
            buf = array("Q")
            for fp in fps:
                buf.append(fp)
                if len(buf) >= CHUNK:
                    buf.tofile(f)
                    buf = array("Q")
            buf.tofile(f)
        os.replace(tmp, self._path(name))  # a retried task never meets half a file
        return name


def _chunks(path: str) -> Iterator[array]:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise RuntimeError(
            f"a spilled run of the visited set is gone: {path} (after an executor is lost, "
            "its partitions need the spill folder on a disk every executor sees)"
        ) from None
    with f:
        while True:
            chunk = array("Q")
            try:
                chunk.fromfile(f, CHUNK)
            except EOFError:  # the last, shorter chunk: fromfile keeps what it read
                pass
            if not chunk:
                return
            yield chunk


def _values(path: str) -> Iterator[int]:
    for chunk in _chunks(path):
        yield from chunk
