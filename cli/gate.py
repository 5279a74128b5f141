"""`kafkamc gate FILE.toml`: run a matrix of configurations as a CI gate."""

from __future__ import annotations

from pathlib import Path

import click
from kafkamc.cli.common import EXIT_HOLDS, EXIT_INCOMPLETE, EXIT_VIOLATED, UsageProblem, make_console, writable
from rich.table import Table


def register(cli_group) -> None:
    cli_group.add_command(gate)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--junit",
    "junit",
    type=click.Path(dir_okay=False),
    default=None,
    help="write JUnit XML here; counterexamples are saved beside it",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="where unexpected counterexamples are saved (default: beside --junit, else ./kafkamc-gate)",
)
def gate(file, junit, out_dir):
    """Run every configuration of a gate file and compare with its expectation.

    Exit 0 when every expectation is met, 1 otherwise, 2 for a bad gate file.
    """
    from kafkamc.checker.gate import GateError, config_summary, junit_xml, load_gate, run_entry

    try:
        entries = load_gate(file)
    except GateError as e:
        raise UsageProblem(str(e)) from None
    if out_dir is None:
        out_dir = Path(junit).parent if junit else Path("kafkamc-gate")
    if junit:
        writable("--junit", junit)
    writable("--out-dir", out_dir, directory=True)
    console = make_console()
    err = make_console(stderr=True)
    outcomes = []
    for entry in entries:
        err.print(f"gate: {entry.name} ...", highlight=False)
        outcomes.append(run_entry(entry, Path(out_dir)))
        if outcomes[-1].run.result.stop_reason == "interrupted":
            err.print("gate: interrupted; the rest of the matrix is not run", highlight=False)
            break
    table = Table(title=f"kafkamc gate {file}")
    for col in ("check", "configuration", "expected", "got", "states", "time", "result"):
        table.add_column(col)
    for o in outcomes:
        want = "holds" if o.entry.expect == "holds" else f"violates {o.entry.invariant}"
        table.add_row(
            o.entry.name,
            config_summary(o.entry.config),
            want,
            o.got,
            f"{o.run.result.distinct_states:,}",
            f"{o.seconds:.1f}s",
            "[green]ok[/green]" if o.ok else "[bold red]FAIL[/bold red]",
        )
    console.print(table)
    for o in outcomes:
        for f in o.files:
            console.print(f"saved {f}")
    if junit:
        Path(junit).parent.mkdir(parents=True, exist_ok=True)
        Path(junit).write_text(junit_xml(outcomes, Path(file).stem) + "\n")
        console.print(f"JUnit XML written to {junit}")
    failed = [o for o in outcomes if not o.ok]
    console.print(f"{len(outcomes) - len(failed)}/{len(entries)} expectations met")
    if outcomes and outcomes[-1].run.result.stop_reason == "interrupted":
        return EXIT_INCOMPLETE
    return EXIT_VIOLATED if failed else EXIT_HOLDS
