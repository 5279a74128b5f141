"""`kafkamc gate FILE.toml`: run a matrix of configurations as a CI gate."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import click
from kafkamc.cli.common import (
    EXIT_HOLDS,
    EXIT_INCOMPLETE,
    EXIT_USAGE,
    EXIT_VIOLATED,
    UsageProblem,
    make_console,
    writable,
)
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

COLUMNS = ("check", "configuration", "expected", "got", "states", "time", "result")


class Row(NamedTuple):
    check: str
    configuration: str
    expected: str
    got: str
    states: str
    time: str
    ok: bool


def show_rows(console: Console, title: str, rows: list[Row]) -> None:
    """The gate's results, never cutting what identifies a check (its name, its configuration):
    a table on a terminal wide enough for it; on a narrower one a block per check, wrapped;
    elsewhere (a pipe, a CI log) one plain line per check, aligned, whatever its length."""
    if not console.is_terminal:
        _plain(console, title, rows)
        return
    cells = [list(COLUMNS)] + [[*r[:-1], "FAIL"] for r in rows]
    need = [max(cell_len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    # Rich shrinks a table that does not fit by cutting words; so a table only when every
    # cell fits on one line (a space each side of a cell, and the borders).
    if sum(need) + 3 * len(COLUMNS) + 1 <= console.width:
        table = Table(title=title)
        for col in COLUMNS:
            table.add_column(col, no_wrap=True)
        for r in rows:
            table.add_row(*map(escape, r[:-1]), "[green]ok[/green]" if r.ok else "[bold red]FAIL[/bold red]")
        console.print(table)
        return
    console.print(f"[bold]{title}[/bold]", highlight=False)
    for r in rows:
        verdict = "[green]ok[/green]" if r.ok else "[bold red]FAIL[/bold red]"
        console.print(f"{escape(r.check)}  {verdict}", highlight=False)
        console.print(f"  configuration: {r.configuration}", highlight=False, markup=False)
        console.print(
            f"  expected {r.expected}, got {r.got}; {r.states} states, {r.time}", highlight=False, markup=False
        )


def _plain(console: Console, title: str, rows: list[Row]) -> None:
    cells = [list(COLUMNS)] + [[*r[:-1], "ok" if r.ok else "FAIL"] for r in rows]
    # The configuration, the longest cell, goes last so that the other columns stay aligned.
    order = [6, 0, 2, 3, 4, 5, 1]
    widths = [max(len(c[i]) for c in cells) for i in order]
    console.print(title, soft_wrap=True, markup=False, highlight=False)
    for c in cells:
        text = "  ".join(c[i].ljust(w) for i, w in zip(order, widths, strict=True)).rstrip()
        console.print(text, soft_wrap=True, markup=False, highlight=False)


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

    Exit 0 when every expectation is met, 1 otherwise, 2 for a bad gate file, 4 for a bug in
    kafkamc.
    """
    from kafkamc.jobs.gate import GateError, config_summary, junit_xml, load_gate, run_entry

    try:
        entries = load_gate(file, warn=lambda message: click.echo(f"kafkamc: warning: {message}", err=True))
    except GateError as e:
        raise UsageProblem(str(e)) from None
    # The report folder (--out-dir, else --junit's folder, else ./kafkamc-gate) is created
    # before the first check, as a CI job expects of a report path; then --junit goes in it.
    given = out_dir is not None
    if not given:
        out_dir = Path(junit).parent if junit else Path("kafkamc-gate")
    if junit and not given and Path(junit).parent.exists() and not Path(junit).parent.is_dir():
        raise UsageProblem(f"--junit {junit}: {Path(junit).parent} is a file, not a folder")
    writable("--out-dir" if given or not junit else "--junit", out_dir, directory=True, shown=None if given else junit)
    if junit:
        writable("--junit", junit)
    console = make_console()
    err = make_console(stderr=True)
    outcomes = []
    for entry in entries:
        err.print(f"gate: {entry.name} ...", highlight=False)
        outcomes.append(run_entry(entry, Path(out_dir)))
        if outcomes[-1].run.result.stop_reason == "interrupted":
            err.print("gate: interrupted; the rest of the matrix is not run", highlight=False)
            break
    rows = [
        Row(
            o.entry.name,
            config_summary(o.entry.config),
            "holds" if o.entry.expect == "holds" else f"violates {o.entry.invariant}",
            o.got,
            f"{o.run.result.distinct_states:,}",
            f"{o.seconds:.1f}s",
            o.ok,
        )
        for o in outcomes
    ]
    show_rows(console, f"kafkamc gate {file}", rows)
    lost = False
    for o in outcomes:
        for f in o.files:
            console.print(f"saved {f}")
        if o.save_error:
            console.print(f"[bold red]could not save the counterexample of {o.entry.name}[/bold red] in {o.save_error}")
            lost = True
    failed = [o for o in outcomes if not o.ok]
    if junit:
        try:
            Path(junit).write_text(junit_xml(outcomes, Path(file).stem) + "\n")
            console.print(f"JUnit XML written to {junit}")
        except OSError as e:  # checked before the first check; the disk can still fill up
            console.print(f"[bold red]JUnit XML could not be written[/bold red] to {junit}: {e.strerror or e}")
            lost = True
    console.print(f"{len(outcomes) - len(failed)}/{len(entries)} expectations met")
    if outcomes and outcomes[-1].run.result.stop_reason == "interrupted":
        return EXIT_INCOMPLETE
    if lost:  # a CI job must not pass without its report: the output path was bad after all
        return EXIT_USAGE
    return EXIT_VIOLATED if failed else EXIT_HOLDS
