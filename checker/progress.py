"""Progress as TLC users expect it: distinct, generated, queue, depth, states per second,
and the memory the search holds.

A live rich line on a terminal; plain lines on stderr otherwise (CI logs).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

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


def level(s: dict) -> int:
    """The BFS level whose successors are being found: the engines report the deepest state
    found (depth D), a successor of level D - 1; reporting between levels, the workers have
    just finished that level. Spark names the level it finished."""
    return s["level"] if s.get("level") is not None else max(s["depth"] - 1, 0)


def line(s: dict, strategy: str | None = None, mem: str | None = None) -> str:
    where = f"BFS level {level(s)} (depth {s['depth']})" if strategy == "bfs" else f"depth {s['depth']}"
    return (
        f"{s['distinct']:,} distinct states, {s['generated']:,} generated, queue {s['queue']:,}, "
        f"{where}, {s['rate']:,.0f} states/s, {s['elapsed']:.1f}s" + (f", {mem}" if mem else "")
    )


class Progress:
    """Call with the explorer's stats dict; use as a context manager around the search.
    strategy "bfs" adds the level being expanded (the stats alone do not say which search ran)."""

    def __init__(self, enabled: bool = True, stream=None, strategy: str | None = None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.strategy = strategy
        self.console = Console(file=self.stream)
        self.live: Live | None = None

    def __enter__(self):
        if self.enabled and self.console.is_terminal:
            self.live = Live(Text(""), console=self.console, transient=True, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)
        return False

    def __call__(self, stats: dict) -> None:
        if not self.enabled:
            return
        if self.live is not None:
            self.live.update(Text("exploring: " + line(stats, self.strategy, memory())))
        elif not stats.get("final"):
            print("progress: " + line(stats, self.strategy, memory()), file=self.stream, flush=True)
