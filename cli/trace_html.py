"""`kafkamc trace html`: a saved trace as one self-contained HTML page to step through in a browser."""

from __future__ import annotations

import click
from kafkamc.cli.common import EXIT_HOLDS, EXIT_VIOLATED, UsageProblem, writable
from kafkamc.cli.trace_export import load_claimed, properties_option
from kafkamc.traces import html


def register(trace_group) -> None:
    """Add this module's commands to the click groups."""

    @trace_group.command("html")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False),
        default=None,
        help="write the HTML page here (default: stdout, as `trace itf` and `trace dot`)",
    )
    @properties_option
    def trace_html(file, output, properties_file):
        """Write a saved trace as an HTML page: swim lanes, message arrows, step with the arrow keys."""
        if output is not None:
            writable("--output", output)
        t = load_claimed(file, properties_file)
        if t is None:
            return EXIT_VIOLATED
        if output is None:
            click.echo(html.render_html(t), nl=False)
            return EXIT_HOLDS
        try:
            path = html.write(t, output)
        except OSError as e:
            raise UsageProblem(f"cannot write {output}: {e.strerror or e}") from None
        click.echo(str(path))
        return EXIT_HOLDS
