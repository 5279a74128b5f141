"""Export commands: `trace itf`, `trace dot` and `graph` (the whole state graph of a small model)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import networkx as nx
from kafkamc.checker.cache.fast import FastModel as Model
from kafkamc.cli.common import (
    EXIT_HOLDS,
    EXIT_VIOLATED,
    UsageProblem,
    build_config,
    config_options,
    schema,
    writable,
)
from kafkamc.cli.common import properties_option as common_properties_option
from kafkamc.invariants.properties import PropertyFile
from kafkamc.spec.config import Config
from kafkamc.traces import graph as graph_mod
from kafkamc.traces.itf import to_itf
from kafkamc.traces.trace import Trace, check_claim, load

# Every trace command reads a trace with load() and check_claim() (traces/trace.py): a bad
# file is a TraceError (one line, exit 2); a real path whose claim is false is refused, exit 1.
properties_option = common_properties_option(
    "the properties file that declares the trace's invariant or reached property"
)


def load_claimed(file: str, properties_file: str | None) -> Trace | None:
    """The checked trace, or None after one line on stderr when its claim is false at its end."""
    t = load(file, PropertyFile.read(properties_file) if properties_file else None)
    why = check_claim(t)
    if why is None:
        return t
    click.echo(f"kafkamc: {file} is a real path of the model, but {why}", err=True)
    return None


def _write(path: str, write) -> None:
    """Call write(Path) on a path writable() passed; the disk can still fill up: one line."""
    try:
        write(Path(path))
    except OSError as e:
        raise UsageProblem(f"cannot write {path}: {e.strerror or e}") from None


def _write_text(path: str, text: str) -> None:
    _write(path, lambda p: p.write_text(text))


def _write_graphml(g: nx.DiGraph, path: str) -> None:
    _write(path, lambda p: nx.write_graphml(g, p))


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _print_report(r: dict, cfg: Config) -> None:
    scc, ends = r["scc"], r["deadlocks"]
    click.echo(f"configuration: {cfg.kafka_settings()} protocol={cfg.protocol.era()}")
    click.echo("bounds: " + ", ".join(f"{k}={v}" for k, v in cfg.bounds().items()))
    click.echo(
        f"{_n(r['states'], 'state')}, {_n(r['edges'], 'edge')} ({_n(r['transitions'], 'transition')}), "
        f"{r['initial']} initial, depth {r['depth']}"
    )
    click.echo(
        f"strongly connected components: {scc['count']:,}; largest {_n(scc['largest'], 'state')}; "
        f"{scc['nontrivial']:,} non-trivial (with a cycle) holding {_n(scc['in_nontrivial'], 'state')}"
    )
    click.echo(f"states with no successor: {ends['count']:,}" + (", for example:" if ends["examples"] else ""))
    for e in ends["examples"]:
        click.echo(f"  {e['state']} at depth {e['depth']}: {e['summary'].replace(chr(10), '; ')}")
        click.echo(f"    after {', '.join(e['path']) or 'no action'}")


def register(cli_group, trace_group) -> None:
    """Add this module's commands to the click groups."""

    @trace_group.command("itf")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False),
        default=None,
        help="write the ITF JSON here (conventionally *.itf.json; default: stdout)",
    )
    @properties_option
    def trace_itf(file, output, properties_file):
        """Export a saved trace in the Informal Trace Format (Apalache, Quint)."""
        if output is not None:
            writable("--output", output)
        t = load_claimed(file, properties_file)
        if t is None:
            return EXIT_VIOLATED
        text = json.dumps(to_itf(t), indent=1) + "\n"
        if output is None:
            click.echo(text, nl=False)
        else:
            _write_text(output, text)
            lasso = "" if t.loop is None else f", a lasso looping from state {t.loop}"
            click.echo(f"wrote {len(t.steps)} states ({t.length} steps{lasso}) to {output}", err=True)
        return EXIT_HOLDS

    @trace_group.command("dot")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False),
        default=None,
        help="write Graphviz DOT here (default: stdout)",
    )
    @click.option("--graphml", type=click.Path(dir_okay=False), default=None, help="also write GraphML here")
    @properties_option
    def trace_dot(file, output, graphml, properties_file):
        """Export a saved trace as a graph: one node per step, one edge per action."""
        for flag, path in (("--output", output), ("--graphml", graphml)):
            if path is not None:
                writable(flag, path)
        t = load_claimed(file, properties_file)
        if t is None:
            return EXIT_VIOLATED
        g = graph_mod.trace_graph(t)
        if graphml:
            _write_graphml(g, graphml)
        if output is None:
            click.echo(graph_mod.to_dot(g), nl=False)
        else:
            _write_text(output, graph_mod.to_dot(g))
        return EXIT_HOLDS

    @cli_group.command("graph")
    @config_options
    @click.option(
        "--max-states",
        type=int,
        default=20000,
        show_default=True,
        help="refuse models with more reachable states than this",
    )
    @click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="write Graphviz DOT here")
    @click.option("--graphml", type=click.Path(dir_okay=False), default=None, help="write GraphML here")
    @click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
    def graph(max_states, output, graphml, as_json, **config_flags):
        """Build the whole reachable state graph of a small model and report its shape."""
        if max_states <= 0:
            raise UsageProblem(f"--max-states must be positive (got {max_states})")
        cfg = build_config(config_flags)
        for flag, path in (("--output", output), ("--graphml", graphml)):
            if path is not None:
                writable(flag, path)
        try:
            g = graph_mod.state_graph(Model(cfg), max_states)
        except graph_mod.TooManyStates as e:
            raise UsageProblem(
                f"{e}; the whole graph is only for small models: lower the bounds "
                "(--rf, --max-records, ...) or raise --max-states"
            ) from None
        r = graph_mod.report(g)
        if output:
            _write_text(output, graph_mod.to_dot(g))
        if graphml:
            _write_graphml(g, graphml)
        if as_json:
            click.echo(json.dumps(schema("graph") | {"config": cfg.to_dict(), **r}, indent=1))
        else:
            _print_report(r, cfg)
        return EXIT_HOLDS
