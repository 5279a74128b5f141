"""`kafkamc trace`: inspect, replay and export saved counterexample traces."""

from __future__ import annotations

import click
from kafkamc.cli import trace_export, trace_html
from kafkamc.cli.common import EXIT_HOLDS, EXIT_VIOLATED, UsageProblem, help_when_bare, make_console
from kafkamc.traces import render as render_mod
from kafkamc.traces.trace import load


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
    def trace_show(file, only_step, diff_only):
        """Replay a saved trace and render it step by step."""
        t = load(file)
        if only_step is not None and not 0 <= only_step <= t.length:
            raise UsageProblem(f"--step {only_step} is outside the trace (steps 0..{t.length})")
        render_mod.render(t, make_console(), only_step=only_step, diff_only=diff_only)
        return EXIT_HOLDS

    @trace.command("replay")
    @click.argument("file", type=click.Path(dir_okay=False))
    def trace_replay(file):
        """Re-execute a saved trace against the model; exit 0 when it is a real path."""
        t = load(file)
        if t.invariant is None:
            click.echo(f"replayed {t.length} steps: a real path of the model")
            return EXIT_HOLDS
        from kafkamc.invariants.suite import InvariantSuite

        prev = t.steps[-2][1] if len(t.steps) > 1 else None
        broken = t.invariant in InvariantSuite(t.config, [t.invariant]).all_violated(t.steps[-1][1], prev)
        verdict = "is violated at its last step" if broken else "holds at its end, unlike what the file says"
        click.echo(f"replayed {t.length} steps: a real path of the model; {t.invariant} {verdict}")
        return EXIT_HOLDS if broken else EXIT_VIOLATED

    trace_html.register(trace)
    trace_export.register(cli_group, trace)
