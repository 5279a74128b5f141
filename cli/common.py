"""What every command module shares: exit statuses, the bad-input exception, the Kafka
flags, and the checks every command makes of its input before any work starts."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import click
from kafkamc.spec.bounds import Bound
from kafkamc.spec.config import ACKS, Config
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.protocol import ALIASES, ERAS, NEWEST, RULES, SAME_AS, ProtocolError, parse_rule, preset
from rich.console import Console

EXIT_HOLDS, EXIT_VIOLATED, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3
EXIT_INTERNAL = 4  # kafkamc itself failed: never 1, which a CI gate reads as a finding


class UsageProblem(Exception):
    """Bad input found after click parsed the command line; main() prints it as one line, exit 2."""


# The real Kafka releases the harness runs (realkafka/jars.py resolves them). One default for
# `conform` and `trace kafka`: the newest release, whose rules the newest preset models (4.3.0's
# rules are 4.4's), so that by default the model is compared with the Kafka a user deploys today.
# A run or replay takes the rules of its own release (spec/protocol.py as_of).
KAFKA_VERSIONS = ("4.1.1", "4.4.0")
DEFAULT_KAFKA = "4.4.0"

DEFAULTS = Config()
# The bounds' flags come from the actions that declare them (spec/next.py).
CONFIG_OPTION_NAMES = (
    "rf",
    "broker_count",
    "minisr",
    "acks",
    "unclean",
    "auto_rebalance",
    "era",
    "rules",
    "elr",
    *(b.setting for b in BOUNDS),
    *(a for b in BOUNDS for a in b.alias_settings),
    "symmetry",
    "log_retention",
)


def _bound(b: Bound) -> list:
    """The bound's flag, then each former name as a hidden flag that build_config warns about
    (click would list every name of one option in --help)."""
    options = [click.option(b.flag, b.setting, type=int, default=b.default, show_default=True, help=b.meaning)]
    options += [
        click.option(flag, setting, type=int, default=None, hidden=True)
        for flag, setting in zip(b.alias_flags, b.alias_settings, strict=True)
    ]
    return options


def completing(names):
    """A shell_complete callback (Click's completion: README, Shell completion) offering the
    names `names()` gives that start with what was typed."""
    return lambda ctx, param, incomplete: [n for n in names() if n.startswith(incomplete)]


PROTOCOL_NAMES = completing(lambda: [*ERAS, *ALIASES, *SAME_AS])
RULE_NAMES = completing(lambda: [f"{r.name}={v}" for r in RULES for v in r.values])


_CONFIG_OPTIONS = (
    click.option("--rf", type=int, default=DEFAULTS.rf, show_default=True, help="replication factor (brokers)"),
    click.option(
        "--brokers",
        "broker_count",
        type=int,
        default=None,
        help="brokers in the cluster, of which --rf host the partition (default: --rf); more give a reassignment "
        "somewhere to move to",
    ),
    click.option("--minisr", type=int, default=DEFAULTS.minisr, show_default=True, help="min.insync.replicas"),
    click.option("--acks", type=click.Choice(ACKS), default=DEFAULTS.acks, show_default=True, help="producer acks"),
    click.option(
        "--unclean-leader-election/--no-unclean-leader-election",
        "--unclean/--no-unclean",
        "unclean",
        default=DEFAULTS.unclean,
        show_default=True,
        help="unclean.leader.election.enable: an out-of-sync replica may become leader",
    ),
    click.option(
        "--auto-leader-rebalance/--no-auto-leader-rebalance",
        "auto_rebalance",
        default=DEFAULTS.auto_rebalance,
        show_default=True,
        help="auto.leader.rebalance.enable: the controller itself moves leadership back to the preferred "
        "replica (AutoLeaderRebalance, within --max-leader-elections); off, only an operator's ElectLeaders does",
    ),
    click.option(
        "--protocol",
        "era",
        default=NEWEST,
        show_default=True,
        metavar="ERA",
        shell_complete=PROTOCOL_NAMES,
        help="Kafka release whose replication rules apply (`kafkamc protocols` lists them)",
    ),
    click.option(
        "--rule",
        "rules",
        multiple=True,
        metavar="NAME=VALUE",
        shell_complete=RULE_NAMES,
        help="override one protocol rule (repeatable)",
    ),
    click.option("--elr/--no-elr", default=None, help="eligible leader replicas, KIP-966 (default: as the protocol)"),
    *(option for b in BOUNDS for option in _bound(b)),
    click.option(
        "--log-retention",
        is_flag=True,
        default=False,
        help="retention deletes the oldest record once every replica has committed it, so producers "
        "may write forever within --max-records (for liveness: KAFKA-1546)",
    ),
    click.option(
        "--symmetry/--no-symmetry",
        default=DEFAULTS.symmetry,
        show_default=True,
        help="count states that differ only by broker ids once (every replica assignment order is checked)",
    ),
)


def config_options(command):
    """The Kafka settings, protocol and bounds, as the same flags on every command that builds a model."""
    for option in reversed(_CONFIG_OPTIONS):
        command = option(command)
    return command


def build_protocol(era: str, rules=(), elr=None):
    """The preset, then each --rule, then --elr/--no-elr; any unknown name is a usage error."""
    try:
        protocol = preset(era)
        overrides = dict(parse_rule(r) for r in rules)
        if elr is not None:
            flag = "on" if elr else "off"
            if overrides.get("elr", flag) != flag:
                raise UsageProblem(f"--{'' if elr else 'no-'}elr and --rule elr={overrides['elr']} disagree; give one")
            overrides["elr"] = flag
        return protocol.with_rules(**overrides)
    except ProtocolError as e:
        raise UsageProblem(str(e)) from None


def build_config(options: dict) -> Config:
    """The Config named by the config_options flags (taken out of `options`)."""
    o = {name: options.pop(name) for name in CONFIG_OPTION_NAMES}
    _former_flags(o)
    protocol = build_protocol(o.pop("era"), o.pop("rules"), o.pop("elr"))
    if o["broker_count"] is None:
        o["broker_count"] = 0  # as many as --rf
    return Config(protocol=protocol, **o).bounded(BOUNDS).validated()


def _former_flags(o: dict) -> None:
    """A bound given by a former flag: one warning line on stderr, and its value counts."""
    ctx = click.get_current_context(silent=True)
    for b in BOUNDS:
        for flag, setting in zip(b.alias_flags, b.alias_settings, strict=True):
            value = o.pop(setting)
            if value is None:
                continue
            click.echo(f"kafkamc: warning: {flag} is deprecated; use {b.flag}", err=True)
            given = ctx is not None and ctx.get_parameter_source(b.setting) is not click.core.ParameterSource.DEFAULT
            if given and o[b.setting] != value:
                raise UsageProblem(f"{flag} and {b.flag} disagree; give {b.flag} alone")
            o[b.setting] = value


# Every --json output names its format and version first: a field's meaning changes only with a
# new version, so that a CI job can tell a format it does not know from a result.
SCHEMA_VERSION = 1


def schema(kind: str) -> dict:
    """The first field of a --json output: `{"schema": "kafkamc.KIND/1"}`."""
    return {"schema": f"kafkamc.{kind}/{SCHEMA_VERSION}"}


def positive(name: str, value) -> None:
    """A count or a time limit: a finite number above 0 (nan and inf are not limits)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageProblem(f"{name} must be a positive number (got {value:g})")


def writable(option: str, path, directory: bool = False, shown=None) -> None:
    """An output path checked before the work starts: a result must not be lost at the end of
    the work. One rule for every command: a file goes into a folder that exists (a mistyped
    folder is bad input, not a tree to create); an output folder is created now. A file where a
    folder goes, a folder where a file goes, or a place this process cannot write is bad input.
    Writability is tried, not inferred from permission bits: root passes os.access() on /proc.
    `shown`: the path as the user gave it, when `path` is derived from it (--junit's folder)."""
    p = Path(path).absolute()
    path = path if shown is None else shown
    if p.exists() and p.is_dir() != directory:
        raise UsageProblem(f"{option} {path}: {'not a folder' if directory else 'is a folder'}")
    up = p if directory else p.parent
    if not directory and not up.exists():
        raise UsageProblem(f"{option} {path}: folder {up} does not exist")
    base = up
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise UsageProblem(f"{option} {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageProblem(f"{option} {path}: cannot write in {base}")
    try:
        if directory:
            up.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=up):
                pass
        elif p.exists():
            with open(p, "a"):  # appends nothing: the file is untouched
                pass
        else:
            with open(p, "x"):
                pass
            p.unlink()
    except OSError as e:
        raise UsageProblem(f"{option} {path}: cannot write in {up}: {e.strerror or e}") from None


def given_options(ctx: click.Context, names: tuple[str, ...]) -> list[str]:
    """The flags, of the options named, that the command line gave (not left at their default)."""
    flag = {p.name: p.opts[0] for p in ctx.command.params}
    return [flag[n] for n in names if ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT]


def only_with(ctx: click.Context, needs: str, given: bool, names: tuple[str, ...]) -> None:
    """Options that mean something only with another one are an error without it, not ignored."""
    set_ = given_options(ctx, names)
    if set_ and not given:
        raise UsageProblem(f"{', '.join(set_)} only appl{'ies' if len(set_) == 1 else 'y'} with {needs}")


def help_when_bare(ctx: click.Context) -> None:
    """A group called without a command prints its help (exit 0), as `git` does."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


# Options of `check` that mean something only with --engine spark.
SPARK_ONLY = ("spark_master", "partitions", "checkpoint_dir", "spark_conf", "spill_dir")


def spark_settings(engine, strategy, master, partitions, checkpoint_dir, conf, spill_dir=None):
    if engine == "reference" and strategy != "bfs":
        raise UsageProblem("--engine reference runs breadth-first only; drop --strategy dfs")
    if engine != "spark":
        return None
    from kafkamc.jobs.run import SparkSettings

    if strategy != "bfs":
        raise UsageProblem("--engine spark runs breadth-first only; drop --strategy dfs")
    if partitions < 1:
        raise UsageProblem(f"--partitions must be at least 1 (got {partitions})")
    pairs = []
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageProblem(f"--conf expects KEY=VALUE (got {item!r})")
        pairs.append((key.strip(), value.strip()))
    if spill_dir is not None:
        writable("--spill-dir", spill_dir, directory=True)
    return SparkSettings(
        master=master, partitions=partitions, checkpoint_dir=checkpoint_dir, conf=tuple(pairs), spill_dir=spill_dir
    )


def workers_setting(value: str, strategy: str, engine: str) -> int:
    """--workers: a positive number, or auto (one per CPU this process may use, at most 8)."""
    if value == "auto":
        if strategy != "bfs" or engine not in ("local", "python"):
            return 1
        return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
    try:
        n = int(value)
    except ValueError:
        raise UsageProblem(f"--workers expects a number or auto (got {value!r})") from None
    if n < 1:
        raise UsageProblem(f"--workers must be at least 1 (got {n})")
    if n > 1 and strategy != "bfs":
        raise UsageProblem("--workers runs breadth-first only; drop --strategy dfs")
    if n > 1 and engine not in ("local", "python"):
        raise UsageProblem(f"--workers is for the local engine, not --engine {engine}")
    return n


def make_console(stderr: bool = False) -> Console:
    """The terminal's width on a terminal. Elsewhere (a pipe, a file, CI logs) lines are not
    wrapped and tables get 200 columns, so that a path or a check's name stays whole;
    COLUMNS still sets the width when given."""
    out = Console(stderr=stderr)
    if out.is_terminal or "COLUMNS" in os.environ:
        return out
    return Console(stderr=stderr, width=200, soft_wrap=True)


def properties_option(help_text: str):
    """--properties FILE (kafkamc.invariants.properties), the same flag wherever a command takes it."""
    return click.option(
        "--properties", "properties_file", type=click.Path(dir_okay=False), default=None, metavar="FILE", help=help_text
    )
