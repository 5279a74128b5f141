"""The commands that print a table of the protocol: the presets and their rules, the
durability table and KIP-966's trade-off (the last two computed by the checker)."""

from __future__ import annotations

import json

import click
from kafkamc.cli.common import EXIT_HOLDS, build_protocol, make_console, schema
from kafkamc.spec.protocol import ERAS, NEWEST, PRESETS, RULES


@click.command("protocols")
@click.option("--json", "as_json", is_flag=True, help="print the presets as JSON")
def list_protocols(as_json):
    """List the era presets and the protocol rules each one sets."""
    if as_json:
        click.echo(
            json.dumps(
                schema("protocols")
                | {
                    "rules": [
                        {
                            "name": r.name,
                            "values": list(r.values),
                            "meaning": r.meaning,
                            "changes": [{"value": v, "release": rel, "ref": ref} for v, rel, ref in r.changes],
                            "proposed": [{"value": v, "ref": ref} for v, ref in r.proposed],
                        }
                        for r in RULES
                    ],
                    "presets": {e: PRESETS[e].to_dict() for e in ERAS},
                    "newest": NEWEST,
                },
                indent=1,
            )
        )
        return EXIT_HOLDS
    console = make_console()
    console.print("[bold]rules[/bold] (--rule NAME=VALUE), oldest behaviour first:")
    for r in RULES:
        history = "; ".join(
            [f"{v} since {rel} ({ref})" for v, rel, ref in r.changes]
            + [f"{v} proposed, in no release ({ref})" for v, ref in r.proposed]
        )
        console.print(f"  [bold]{r.name}[/bold] = {' | '.join(r.values)}: {r.meaning}. {history}.")
    console.print("[bold]presets[/bold] (--protocol ERA), each as the rules that differ from the newest:")
    newest = PRESETS[NEWEST]
    for e in ERAS:
        diff = PRESETS[e].differences(newest)
        text = ", ".join(f"{k}={v}" for k, v in diff.items()) if diff else "every rule at its newest behaviour"
        console.print(f"  [bold]{e}[/bold]{' (newest, the default)' if e == NEWEST else ''}: {text}")
    return EXIT_HOLDS


def _table_options(lowest_rf: int, default_rf: int, rf_help: str):
    """--max-rf (rows from RF lowest_rf up to it) and --json, as both computed tables take them."""

    def add(command):
        command = click.option("--json", "as_json", is_flag=True, help="print the cells as JSON")(command)
        rf = click.IntRange(lowest_rf, 3)
        return click.option("--max-rf", type=rf, default=default_rf, show_default=True, help=rf_help)(command)

    return add


@click.command("durability")
@_table_options(1, 3, "compute rows for RF 1 up to this (RF 3 takes minutes)")
@click.option("--protocol", "era", default=NEWEST, show_default=True, metavar="ERA", help="protocol preset")
def durability(max_rf, era, as_json):
    """Compute the RF x min.insync.replicas durability table with the checker."""
    from kafkamc.jobs.durability import durability_table
    from rich.table import Table

    protocol = build_protocol(era, (), None)
    console = make_console(stderr=True)

    def show(c):
        if not as_json:
            console.print(
                f"rf={c.rf} minisr={c.minisr}: writes through {c.writes}, "
                f"no acked loss through {c.durable} ({c.states:,} states)"
            )

    cells = durability_table(rfs=tuple(range(1, max_rf + 1)), protocol=protocol, on_cell=show)
    if as_json:
        click.echo(json.dumps(schema("durability") | {"cells": [c.to_dict() for c in cells]}, indent=1))
        return EXIT_HOLDS
    table = Table(title=f"durability, computed (protocol {protocol.era()})")
    for col in (
        "RF",
        "min ISR",
        "eventually answers every acks=all write with k brokers down for good (liveness)",
        "loses no acknowledged write through the loss of k brokers",
        "seed table (writes / no loss)",
    ):
        table.add_column(col)
    for c in cells:
        table.add_row(str(c.rf), str(c.minisr), str(c.writes), str(c.durable), f"{c.seed_writes} / {c.seed_durable}")
    make_console().print(table)
    return EXIT_HOLDS


@click.command("tradeoff")
@_table_options(2, 2, "compute rows for RF 2 up to this (RF 3 takes about twenty minutes)")
def tradeoff(max_rf, as_json):
    """Compute KIP-966's trade-off: can the partition stay offline with a replica up, can
    committed data be lost, per RF x min ISR with ELR and unclean election on and off."""
    from kafkamc.jobs.tradeoff import tradeoff_table
    from rich.table import Table

    console = make_console(stderr=True)
    yes_no = {True: "yes", False: "no", None: "undecided"}

    def show(c):
        if not as_json:
            console.print(f"{c.flags()}: offline {yes_no[c.offline]}, loses {yes_no[c.loses]} ({c.states:,} states)")

    cells = tradeoff_table(rfs=tuple(range(2, max_rf + 1)), on_cell=show)
    if as_json:
        click.echo(json.dumps(schema("tradeoff") | {"cells": [c.to_dict() for c in cells]}, indent=1))
        return EXIT_HOLDS
    table = Table(title="KIP-966 trade-off, computed (protocol " + NEWEST + ", ELR rule switched)")
    for col in ("RF", "min ISR", "ELR", "unclean", "offline forever with a replica up", "committed data lost"):
        table.add_column(col)
    for c in cells:
        on = {True: "on", False: "off"}
        table.add_row(str(c.rf), str(c.minisr), on[c.elr], on[c.unclean], yes_no[c.offline], yes_no[c.loses])
    make_console().print(table)
    return EXIT_HOLDS


def register(cli_group) -> None:
    for command in (list_protocols, durability, tradeoff):
        cli_group.add_command(command)
