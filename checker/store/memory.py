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
