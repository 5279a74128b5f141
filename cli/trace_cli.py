"""`kafkamc trace`: inspect, replay and export saved counterexample traces."""

from __future__ import annotations

import click
from kafkamc.cli import trace_export, trace_html, trace_kafka
from kafkamc.cli.common import EXIT_HOLDS, EXIT_VIOLATED, UsageProblem, help_when_bare, make_console
from kafkamc.cli.trace_export import load_claimed, properties_option
from kafkamc.invariants.properties import PropertyFile
from kafkamc.traces import render as render_mod
from kafkamc.traces.trace import check_claim, load


def register(cli_group) -> None:
    """Add the trace group and its commands to the top-level group."""

    @cli_group.group(invoke_without_command=True)
    @click.pass_context
    def trace(ctx):
        """Inspect saved counterexample traces."""
        help_when_bare(ctx)

    @trace.command("show")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--step", "only_step", type=int, default=None, help="show only step N")
    @click.option("--diff-only", is_flag=True, help="show only what changed at each step")
    @properties_option
    def trace_show(file, only_step, diff_only, properties_file):
        """Replay a saved trace and render it step by step."""
        t = load_claimed(file, properties_file)
        if t is None:
            return EXIT_VIOLATED
        if only_step is not None and not 0 <= only_step <= t.length:
            raise UsageProblem(f"--step {only_step} is outside the trace (steps 0..{t.length})")
        render_mod.render(t, make_console(), only_step=only_step, diff_only=diff_only)
        return EXIT_HOLDS

    @trace.command("replay")
    @click.argument("file", type=click.Path(dir_okay=False))
    @properties_option
    def trace_replay(file, properties_file):
        """Re-execute a saved trace against the model and re-check what it claims; exit 0 when both hold."""
        t = load(file, PropertyFile.read(properties_file) if properties_file else None)
        why = check_claim(t)
        said = f"replayed {t.length} steps: a real path of the model"
        if why is not None:
            click.echo(f"{said}; {why}")
            return EXIT_VIOLATED
        if t.loop is not None:
            cycle = t.length - t.loop
            said += (
                f"; the cycle from step {t.loop} closes ({cycle} steps) and is fair"
                if cycle
                else f"; the state of step {t.loop} may stay forever (no fair step is enabled)"
            ) + f"; {t.invariant} never happens on it"
        elif t.invariant is not None:
            said += f"; {t.invariant} is violated at its last step"
        elif t.reached is not None:
            said += f"; {t.reached} is reached at its last step"
        click.echo(said)
        return EXIT_HOLDS

    trace_html.register(trace)
    trace_kafka.register(trace)
    trace_export.register(cli_group, trace)
