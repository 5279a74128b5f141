"""The memory a search holds, read from /proc and getrusage: the standard library only, so
the engines (Spark executors too, where rich is not installed) can report it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MIB = 1024 * 1024


def rss(pid: int | str = "self") -> int | None:
    """Resident memory of a process in bytes, from /proc (Linux); None where there is none."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def peak_rss() -> int:
    """This process's peak resident memory in bytes (0 where the platform has no getrusage)."""
    try:
        import resource  # not on Windows
    except ImportError:
        return 0
    # ru_maxrss is in KiB on Linux, in bytes on macOS.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)


def children() -> list[int]:
    """This process's child processes (the --workers processes, Spark's JVM), from /proc."""
    pids: list[int] = []
    try:
        for task in Path("/proc/self/task").iterdir():
            pids += [int(p) for p in (task / "children").read_text().split()]
    except (OSError, ValueError):
        return []
    return pids


def memory() -> str:
    """'RSS 85 MiB (+ 240 MiB in 4 child processes)'. Without /proc: the peak RSS so far.
    A forked worker's RSS counts the pages it still shares with its parent, so the sum is
    an upper bound."""
    own = rss()
    if own is None:
        peak = peak_rss()
        return f"peak RSS {peak / _MIB:,.0f} MiB" if peak else ""
    sizes = [s for s in (rss(p) for p in children()) if s is not None]
    text = f"RSS {own / _MIB:,.0f} MiB"
    if sizes:
        text += f" (+ {sum(sizes) / _MIB:,.0f} MiB in {len(sizes)} child process{'es' if len(sizes) > 1 else ''})"
    return text


# glibc's malloc serves a block below its mmap threshold from its heap, and raises the threshold
# to the size of each mapped block freed (up to 32 MiB). The tables that grow by doubling (the
# visited set, a worker's level, the core's maps) then leave their old copies as holes in the
# heap, resident and unused. A fixed threshold maps every block from 128 KiB up and unmaps it
# when freed: 13% less resident per worker at 12 million states of --max-fences 1 with two
# workers, in the same time (docs/PERFORMANCE.md, round eight).
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MAPPED_FROM = 128 * 1024


def map_large_blocks() -> bool:
    """Fix glibc's mmap threshold for this process and the workers it forks (above); False
    where the C library has no mallopt or refuses it."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MAPPED_FROM))
    except (OSError, AttributeError):
        return False
