"""The kafkamc command line. Exit status: 0 holds (or nothing found), 1 violated, 2 bad input, 3 stopped at a limit."""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path

import click
from kafkamc.checker.cache.verify import FastPathError
from kafkamc.checker.engines.explorer import STRATEGIES, Limits
from kafkamc.cli.common import (
    DEFAULTS,
    EXIT_HOLDS,
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_USAGE,
    EXIT_VIOLATED,
    SPARK_ONLY,
    UsageProblem,
    build_config,
    completing,
    config_options,
    help_when_bare,
    only_with,
    positive,
    properties_option,
    schema,
    spark_settings,
    workers_setting,
    writable,
)
from kafkamc.cli.simulate import simulate_options, simulation_settings
from kafkamc.cli.summary import print_run
from kafkamc.invariants.catalog import INVARIANTS
from kafkamc.invariants.liveness import CATALOG as LIVENESS
from kafkamc.invariants.liveness import is_liveness
from kafkamc.invariants.properties import PropertiesError, PropertyFile
from kafkamc.invariants.reach import catalog as reach_catalog
from kafkamc.jobs.run import run_check
from kafkamc.spec.config import Config, ConfigError
from kafkamc.spec.next import BOUNDS
from kafkamc.traces.trace import TraceError


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(package_name="kafkamc", prog_name="kafkamc")
@click.pass_context
def cli(ctx):
    """kafkamc: a model checker for Apache Kafka's partition replication protocol."""
    help_when_bare(ctx)


@cli.command()
@config_options
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="bfs",
    show_default=True,
    help="bfs finds a shortest counterexample; dfs uses less memory",
)
@click.option("--max-states", type=int, default=None, help="stop after this many distinct states")
@click.option("--max-depth", type=int, default=None, help="do not explore beyond this depth")
@click.option("--time-limit", type=float, default=None, help="stop after this many seconds")
@click.option(
    "--invariant",
    "invariants",
    multiple=True,
    metavar="NAME",
    shell_complete=completing(lambda: [p.name for p in INVARIANTS + LIVENESS]),
    help="check only these invariants (repeatable; default: all); a liveness property's name checks it",
)
@click.option(
    "--liveness",
    is_flag=True,
    help="also check the liveness properties (`kafkamc invariants` lists them) under their fairness assumptions",
)
@click.option(
    "--trace-out",
    type=click.Path(dir_okay=False),
    default="kafkamc-trace.json",
    show_default=True,
    help="where a counterexample trace is saved",
)
@click.option(
    "--workers",
    default="auto",
    show_default=True,
    metavar="N|auto",
    help="local BFS (or --simulate walks) across N processes; auto: one per CPU (at most 8), one for dfs",
)
@click.option(
    "--engine",
    type=click.Choice(("local", "python", "reference", "spark")),
    default="local",
    show_default=True,
    help="local: the fast path, in one process (on the native core where it is built) or --workers; "
    "python: the same without the native core; reference: a plain BFS over the step "
    "functions with no cache (the oracle, slow); spark: BFS partitioned across Spark executors",
)
@click.option(
    "--cache-mib",
    type=float,
    default=None,
    metavar="MIB",
    help="the memory the step caches may hold, shared by the --workers processes (at about 700 "
    "bytes an entry; with the native core, a tenth of it, and the core's own tables the rest); past "
    "it the caches that hit least are emptied first. Smaller saves memory and costs step runs, never states "
    "[default: 512, then 20 bytes a state once the states pass 27 million; given, it is a cap]",
)
@click.option(
    "--verify",
    type=float,
    default=None,
    metavar="RATE",
    help="re-run the spec on this share of the states the fast path expands (0 < RATE <= 1) and check "
    "its caches and its symmetry there; a difference stops the check (exit 2) naming the step and state",
)
@click.option(
    "--spark-master",
    default=None,
    metavar="URL",
    help="Spark master for --engine spark (spark://host:7077, yarn, local[N]); "
    "default: spark-submit's --master, else local[*]",
)
@click.option(
    "--partitions",
    type=int,
    default=max(os.cpu_count() or 2, 2),
    show_default=True,
    help="Spark partitions: fingerprint owners, fixed for the run",
)
@click.option(
    "--checkpoint-dir",
    default=None,
    metavar="DIR",
    help="reliable checkpoints for --engine spark (shared storage on a cluster)",
)
@click.option(
    "--spill-dir",
    default=None,
    metavar="DIR",
    help="keep the visited set on disk in DIR as sorted runs (--engine spark); executors' memory then bounds one level",
)
@click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="Spark configuration passed through (repeatable), e.g. spark.driver.memory=8g",
)
@click.option(
    "--reach",
    "reach",
    multiple=True,
    metavar="NAME",
    shell_complete=completing(lambda: [r.name for r in reach_catalog(Config(broker_count=DEFAULTS.rf + 1))]),
    help="search for a shortest path to this reachability property and save it (repeatable)",
)
@properties_option("a Python file of your own invariants and reachability properties (see examples/properties.py)")
@simulate_options
@click.option("--json", "as_json", is_flag=True, help="print one JSON summary on stdout")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
def check(
    strategy,
    max_states,
    max_depth,
    time_limit,
    invariants,
    liveness,
    workers,
    engine,
    cache_mib,
    verify,
    spark_master,
    partitions,
    checkpoint_dir,
    spark_conf,
    spill_dir,
    reach,
    trace_out,
    properties_file,
    as_json,
    quiet,
    **config_flags,
):
    """Explore every reachable state within the bounds and check the invariants.

    Exit 0: every invariant holds within the bounds (with --reach: every target reached; with
    --simulate: no violation found); 1: a violation (with --reach: a target never reached);
    2: bad input, one `kafkamc: error:` line; 3: stopped at a limit or interrupted before the
    search was exhaustive; 4: a bug in kafkamc, one `kafkamc: internal error:` line."""
    cfg = build_config(config_flags)
    simulate = simulation_settings(config_flags)  # cli/simulate.py: random walks in place of the search
    workers = workers_setting(workers, strategy, engine)
    for name, value in (
        ("--max-states", max_states),
        ("--max-depth", max_depth),
        ("--time-limit", time_limit),
        ("--cache-mib", cache_mib),
    ):
        positive(name, value)
    writable("--trace-out", trace_out)
    only_with(click.get_current_context(), "--engine spark", engine == "spark", SPARK_ONLY)
    properties = PropertyFile.read(properties_file) if properties_file else None
    known = {inv.name.lower(): inv.name for inv in INVARIANTS + (properties.declared()[0] if properties else ())}
    known.update({p.name.lower(): p.name for p in LIVENESS})
    for name in invariants:
        if name.lower() not in known:
            raise UsageProblem(f"unknown invariant {name!r}; `kafkamc invariants` lists them")
    names = [known[n.lower()] for n in invariants] or None
    if strategy != "bfs" and (liveness or any(is_liveness(n) for n in names or ())):
        # The liveness graph is built breadth-first whatever the flag says (shortest lasso stems).
        raise UsageProblem("liveness is checked breadth-first only; drop --strategy dfs")
    if verify is not None and not 0 < verify <= 1:
        raise UsageProblem(f"--verify takes a share of the states, above 0 and at most 1 (got {verify:g})")
    if verify is not None and engine not in ("local", "python"):
        raise UsageProblem("--verify checks the fast path: it runs with --engine local (one process or --workers)")
    limits = Limits(max_states=max_states, time_limit=time_limit, max_depth=max_depth)
    spark = spark_settings(engine, strategy, spark_master, partitions, checkpoint_dir, spark_conf, spill_dir)
    run = _run_spark_safely(
        cfg,
        strategy,
        limits,
        names,
        not quiet,
        trace_out,
        tuple(reach),
        spark,
        workers,
        reference=engine == "reference",
        properties=properties,
        liveness=liveness,
        simulate=simulate,
        verify=verify or 0.0,
        cache_mib=cache_mib,
        python_engine=engine == "python",
    )
    if as_json:
        click.echo(json.dumps(schema("check") | run.summary(), indent=1))
    else:
        print_run(run)
    verdicts = {"holds": EXIT_HOLDS, "reached": EXIT_HOLDS, "violated": EXIT_VIOLATED, "incomplete": EXIT_INCOMPLETE}
    return {**verdicts, "unreachable": EXIT_VIOLATED, "no violation found": EXIT_HOLDS}[run.verdict()]


def _run_spark_safely(
    cfg,
    strategy,
    limits,
    names,
    progress,
    trace_out,
    reach,
    spark,
    workers=1,
    reference=False,
    properties=None,
    liveness=False,
    simulate=None,
    verify=0.0,
    cache_mib=None,
    python_engine=False,
):
    """A worker, a Spark or the native core that fails is bad input for this machine: one line,
    exit 2. (A panic in the core reaches Python as pyo3's PanicException, a BaseException.)"""
    from kafkamc.checker.engines.workers import WorkerFailed

    def run(**engine):
        try:
            return run_check(
                cfg,
                strategy,
                limits,
                names,
                progress=progress,
                trace_out=trace_out,
                reach=reach,
                properties=properties,
                liveness=liveness,
                simulate=simulate,
                verify=verify,
                cache_mib=cache_mib,
                python_engine=python_engine,
                **engine,
            )
        except BaseException as e:
            if type(e).__name__ != "PanicException":
                raise
            raise UsageProblem(f"the native core failed ({e}); --engine python runs without it") from None

    if spark is None:
        try:
            return run(workers=workers, reference=reference)
        except WorkerFailed as e:
            raise UsageProblem(f"a worker process failed: {e}") from None
    from kafkamc.checker.spark.search import SparkJobFailed, SparkUnavailable

    try:
        return run(spark=spark)
    except SparkUnavailable as e:
        raise UsageProblem(f"Spark could not start: {e}") from None
    except SparkJobFailed as e:
        # Spark already retried the failed tasks; the Java detail is in the Spark log file.
        raise UsageProblem(f"a Spark job failed after its retries: {e}") from None


@cli.command("invariants")
@properties_option("also list the properties this file declares")
@click.option("--json", "as_json", is_flag=True, help="print the list as JSON: name, tier, kind and meaning of each")
def list_invariants(properties_file, as_json):
    """List the invariants with what each one means (kind: state, action, reach or liveness)."""
    invs, reach = (), ()
    if properties_file:
        found = PropertyFile.read(properties_file)
        found.built(Config().bounded(BOUNDS))  # a body that fails is reported here, not at the first check
        invs, reach = found.declared()
    rows = [(inv.name, inv.tier, inv.kind, inv.meaning) for inv in INVARIANTS + invs]
    rows += [(r.name, "user", "reach", r.meaning) for r in reach]
    rows += [(p.name, p.tier, "liveness", p.meaning) for p in LIVENESS]
    if as_json:
        listed = [dict(zip(("name", "tier", "kind", "meaning"), row)) for row in rows]
        click.echo(json.dumps(schema("invariants") | {"properties": listed}, indent=1))
        return EXIT_HOLDS
    for name, tier, kind, meaning in rows:
        click.echo(f"{name:24} {tier:7} {kind:7} {meaning}")
    return EXIT_HOLDS


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="print the JSON table only")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="the whole table: also Spark local mode, the large configuration with and without symmetry, and "
    "the thorough checks exhausted (hours in all; TLC's row where KAFKAMC_TLA2TOOLS and KAFKAMC_TLC_SPEC "
    "are set: jobs/tlc.py)",
)
@click.option("--run", "names", multiple=True, metavar="NAME", help="only this run of the table (repeatable)")
def bench(as_json, everything, names):
    """Time the engines on a fixed table of configurations; each run in a fresh process.

    Without options: the default check with and without symmetry reduction."""
    from kafkamc.jobs.bench import QUICK, RUNS, run_table, runs_here, unavailable

    for name in names:
        if name not in RUNS:
            raise UsageProblem(f"unknown benchmark run {name!r}; runs: {', '.join(RUNS)}")
    chosen = names or (runs_here(os.environ) if everything else QUICK)
    for name in chosen:
        if why := unavailable(name, os.environ):  # TLC's row: the jar and the specification
            raise UsageProblem(why)
    table = run_table(chosen)
    if as_json:
        click.echo(json.dumps(schema("bench") | table, indent=1))
        return EXIT_HOLDS
    m = table["machine"]
    click.echo(f"machine: {m['processor']}, {m['cpus']} cpus, {m['memory_gib']} GiB, Python {m['python']}")
    for r in table["runs"]:
        per_state = (
            "" if r["visited_bytes_per_state"] is None else f", visited set {r['visited_bytes_per_state']} B/state"
        )
        click.echo(
            f"{r['run']} [{r['engine']}] {r['config']}: {r['distinct_states']:,} distinct states "
            f"({r['states_generated']:,} generated, depth {r['depth']}, {r['verdict']}) in {r['elapsed_s']:.2f}s "
            f"= {r['distinct_states_per_s']:,} states/s; peak memory {r['peak_memory_mib']:,} MiB"
            + (f" (each worker at most {r['peak_worker_memory_mib']:,} MiB)" if r["peak_worker_memory_mib"] else "")
            + per_state
            + (f"; {r['walks_per_s']:,} walks/s, {r['steps_per_s']:,} steps/s" if "walks_per_s" in r else "")
            + (f"; shuffled {r['shuffled_bytes_per_state']:,} B/state" if "shuffled_bytes_per_state" in r else "")
        )
    return EXIT_HOLDS


# Commands that live in their own modules (traces, the CI gate, conformance, the tables).
from kafkamc.cli import conform as _conform  # noqa: E402
from kafkamc.cli import gate as _gate  # noqa: E402
from kafkamc.cli import tables as _tables  # noqa: E402
from kafkamc.cli import trace_cli as _trace_cli  # noqa: E402

_trace_cli.register(cli)
_gate.register(cli)
_conform.register(cli)
_tables.register(cli)


def main(argv=None) -> None:
    """Entry point: bad input becomes one line on stderr and exit 2, never a traceback.
    SIGTERM (what CI runners send) stops a search as Ctrl-C does: the partial summary, exit 3."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = cli.main(args=argv, prog_name="kafkamc", standalone_mode=False)
    except click.exceptions.UsageError as e:
        _fail(e.format_message())
    except click.exceptions.Abort:
        sys.exit(130)
    except (ConfigError, TraceError, UsageProblem, PropertiesError) as e:
        _fail(str(e))
    except FastPathError as e:  # the spec does something the fast path cannot follow (checker/cache/verify.py)
        _fail(f"the fast path cannot follow this spec: {e}")
    except BrokenPipeError:
        sys.exit(EXIT_USAGE)
    except Exception as e:
        _last_resort(e)
    sys.exit(code if isinstance(code, int) else 0)


def _last_resort(e: Exception) -> None:
    """What no command caught: an interrupt a C library wrapped in another error (exit 3), or a bug
    in kafkamc (exit 4, one line naming where; KAFKAMC_TRACEBACK=1 shows the whole traceback).
    Never Python's own traceback and exit 1, the code for a violation."""
    from kafkamc.realkafka.client import interrupted

    if interrupted(e):
        print("kafkamc: interrupted", file=sys.stderr)
        sys.exit(EXIT_INCOMPLETE)
    if os.environ.get("KAFKAMC_TRACEBACK"):
        traceback.print_exception(e)
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
    first = str(e).splitlines()[0] if str(e) else ""
    line = f"kafkamc: internal error: {type(e).__name__}: {first}{at} (a bug in kafkamc, not a verdict)"
    print(line, file=sys.stderr)
    sys.exit(EXIT_INTERNAL)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _fail(message: str) -> None:
    print(f"kafkamc: error: {message.splitlines()[0] if message else 'bad input'}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()
