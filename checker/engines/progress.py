"""Progress as TLC users expect it: distinct, generated, queue, depth, states per second,
and the memory the search holds.

A live rich line on a terminal; plain lines on stderr otherwise (CI logs).
"""

from __future__ import annotations

import sys

from kafkamc.checker.store.memory import memory
from rich.console import Console
from rich.live import Live
from rich.text import Text


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
