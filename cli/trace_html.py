"""`kafkamc trace html`: a saved trace as one self-contained HTML page to step through in a browser."""

from __future__ import annotations

import json
from pathlib import Path

import click
from kafkamc.cli.common import EXIT_HOLDS, UsageProblem
from kafkamc.traces import html
from kafkamc.traces.trace import load

_TRACE_KEYS = ("schema", "config", "violation", "steps")


def register(trace_group) -> None:
    """Add this module's commands to the click groups."""

    @trace_group.command("html")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="where to write the HTML page")
    def trace_html(file, output):
        """Write a saved trace as an HTML page: swim lanes, message arrows, step with the arrow keys."""
        t = load(file)
        # load() keeps what the model replays; a witness names its target in the file's other keys.
        raw = json.loads(Path(file).read_text())
        t.extra = {k: v for k, v in raw.items() if k not in _TRACE_KEYS}
        try:
            path = html.write(t, output)
        except OSError as e:
            raise UsageProblem(f"cannot write {output}: {e.strerror or e}") from None
        click.echo(str(path))
        return EXIT_HOLDS
