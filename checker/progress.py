"""Progress as TLC users expect it: distinct, generated, queue, depth, states per second.

A live rich line on a terminal; plain lines on stderr otherwise (CI logs).
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.live import Live
from rich.text import Text


def _line(s: dict) -> str:
    return (
        f"{s['distinct']:,} distinct states, {s['generated']:,} generated, queue {s['queue']:,}, "
        f"depth {s['depth']}, {s['rate']:,.0f} states/s, {s['elapsed']:.1f}s"
    )


class Progress:
    """Call with the explorer's stats dict; use as a context manager around the search."""

    def __init__(self, enabled: bool = True, stream=None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
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
            self.live.update(Text("exploring: " + _line(stats)))
        elif not stats.get("final"):
            print("progress: " + _line(stats), file=self.stream, flush=True)
