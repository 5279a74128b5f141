"""`kafkamc conform`: real runs under random faults, validated against the model (realkafka/conform.py)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import click
from kafkamc.cli.common import (
    DEFAULT_KAFKA,
    EXIT_HOLDS,
    EXIT_INCOMPLETE,
    EXIT_VIOLATED,
    KAFKA_VERSIONS,
    UsageProblem,
    given_options,
)

# The options that describe a new run; a saved run (--validate) carries its own.
RUN_OPTIONS = (
    "kafka_version",
    "rf",
    "brokers",
    "minisr",
    "unclean",
    "elr",
    "faults",
    "seed",
    "runs",
    "out",
    "partitions",
    "links",
    "power_loss",
)


def _folder(out: str | None) -> Path:
    """The folder for the runs, checked before any process starts: new or empty, and writable."""
    if out is None:
        return Path(tempfile.mkdtemp(prefix="kafkamc-conform-"))
    folder = Path(out)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageProblem(f"--out {out} must be a new or empty folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".write-test").touch()
        (folder / ".write-test").unlink()
    except OSError as e:
        raise UsageProblem(f"--out {out} is not writable: {e.strerror}") from None
    return folder


def register(cli) -> None:
    @cli.command()
    @click.option("--kafka-version", type=click.Choice(KAFKA_VERSIONS), default=DEFAULT_KAFKA, show_default=True)
    @click.option("--rf", type=int, default=3, show_default=True, help="replication factor")
    @click.option("--brokers", type=int, default=None, help="brokers in the cluster (default: --rf)")
    @click.option("--minisr", type=int, default=2, show_default=True, help="min.insync.replicas")
    @click.option("--unclean/--no-unclean", default=False, help="unclean.leader.election.enable")
    @click.option("--elr/--no-elr", default=True, help="eligible leader replicas (KIP-966) at format time")
    @click.option("--faults", type=int, default=20, show_default=True, help="faults per run, besides the sends")
    @click.option("--seed", type=int, default=0, show_default=True, help="the first run's schedule seed")
    @click.option("--runs", type=int, default=1, show_default=True, help="runs, with seeds seed, seed+1, ...")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="a new folder for the runs (kept)")
    @click.option(
        "--partitions",
        is_flag=True,
        help="network partitions too: nft cuts in a network namespace of the run's own (see --links)",
    )
    @click.option(
        "--links",
        default=None,
        metavar="LINK,...",
        help="the links --partitions cuts (default: leader-controller,leader-follower,follower-controller)",
    )
    @click.option("--power-loss", is_flag=True, help="power-loss crashes too: SIGKILL, then the unflushed tail cut")
    @click.option(
        "--validate",
        "saved",
        type=click.Path(exists=True),
        default=None,
        metavar="RUN",
        help="validate a saved run again, without Kafka: its folder, or its observations.json",
    )
    def conform(
        kafka_version, rf, brokers, minisr, unclean, elr, faults, seed, runs, out, partitions, links, power_loss, saved
    ):
        """Run random fault schedules on a real KRaft cluster and check that everything it did
        is something the model can do (trace validation), and that no acknowledged write was lost.

        Exit 0: every run consistent with the model and every promise kept; 1: a discrepancy or a
        lost write (the run's folder keeps everything); 2: bad input, or the cluster did not
        start; 3: interrupted (what was validated so far is reported); 4: a bug in kafkamc."""
        from kafkamc.realkafka import conform as cf
        from kafkamc.realkafka import jars
        from kafkamc.realkafka.cluster import ClusterFailed

        if saved is not None:
            extra = given_options(click.get_current_context(), RUN_OPTIONS)
            if extra:
                raise UsageProblem(f"{', '.join(extra)}: a saved run keeps its own setup; give --validate alone")
            folder = _saved_run(Path(saved))
            try:
                return _verdict([cf.check(folder, cf.Outcome(folder), click.echo)])
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
                # A hand-edited field the checks above do not reach: bad input, never a discrepancy.
                raise UsageProblem(f"cannot validate {saved}: {type(e).__name__}: {e} (a damaged saved run?)") from None
        brokers = brokers or rf
        _check_setup(rf, brokers, minisr)
        if faults < 1 or runs < 1:
            raise UsageProblem("--faults and --runs must be at least 1")
        chosen = _links(partitions, links, rf)
        setup = cf.Setup(rf, brokers, minisr, unclean, elr, kafka_version, ",".join(chosen), power_loss)
        folder = _folder(out)
        outcomes = []
        try:
            for n in range(runs):
                where = folder / f"seed-{seed + n}"
                click.echo(f"run {n + 1}/{runs}: seed {seed + n}, {faults} faults, {setup.words()}; in {where}")
                outcomes.append(cf.run(setup, seed + n, faults, where, click.echo))
                if outcomes[-1].interrupted:
                    break
            if len(outcomes) > 1:
                _summary(outcomes)
        except (ClusterFailed, jars.JarsMissing) as e:
            raise UsageProblem(f"the cluster did not start: {str(e).splitlines()[0]} (logs in {folder})") from None
        except KeyboardInterrupt:
            click.echo(f"interrupted; everything so far is in {folder}")
            return EXIT_INCOMPLETE
        return _verdict(outcomes)


def _links(partitions: bool, links: str | None, rf: int) -> tuple[str, ...]:
    """The links a run cuts, checked before any process starts: each one the model has
    (faults.LINKS), and a network namespace this process can make."""
    from kafkamc.realkafka import faults
    from kafkamc.realkafka.netns import Network, NoNetwork

    if links is not None and not partitions:
        raise UsageProblem("--links names the links --partitions cuts; give --partitions too")
    if not partitions:
        return ()
    chosen = tuple(x.strip() for x in (links or ",".join(faults.LINKS)).split(",") if x.strip())
    why = faults.link_refusal(chosen, rf) if chosen else "--links names no link"
    if why is not None:
        raise UsageProblem(why)
    try:
        Network({}).__enter__().__exit__(None, None, None)
    except NoNetwork as e:
        raise UsageProblem(f"no network partitions here: {e}") from None
    return chosen


def _check_setup(rf: int, brokers: int, minisr: int, where: str = "", dashes: str = "--") -> None:
    """The cluster sizes a run may have, given as flags or found in a saved run's setup."""
    r, b, m = (f"{dashes}{n}" for n in ("rf", "brokers", "minisr"))
    if not 1 <= rf <= 5 or not rf <= brokers <= 5:
        raise UsageProblem(f"{where}{r} must be 1 to 5 and {b} between {r} and 5 (got {rf}, {brokers})")
    if not 1 <= minisr <= rf:
        raise UsageProblem(f"{where}{m} must be between 1 and {r} (got {minisr})")


def _saved_run(path: Path) -> Path:
    """The folder of a saved run, its observations.json checked before validation starts:
    a damaged or hand-edited file is bad input (exit 2), never a discrepancy (exit 1). A bare
    observations.json is validated in a new temporary folder, where its report.txt goes."""
    from kafkamc.realkafka import conform as cf

    if path.is_dir():
        if not (path / "observations.json").is_file():
            raise UsageProblem(f"{path} holds no observations.json")
        folder, file = path, path / "observations.json"
    else:
        folder, file = Path(tempfile.mkdtemp(prefix="kafkamc-validate-")), path
        shutil.copyfile(path, folder / "observations.json")
    bad = f"{file} is not a saved run"
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UsageProblem(f"cannot read {file}: {e}") from None
    except json.JSONDecodeError as e:
        raise UsageProblem(f"{bad}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict) or not all(k in data for k in ("setup", "events", "reads")):
        raise UsageProblem(f"{bad}: a JSON object with setup, events and reads expected")
    setup = data["setup"]
    fields = set(cf.Setup.__dataclass_fields__)
    if not isinstance(setup, dict) or not set(setup) <= fields:
        raise UsageProblem(f"{bad}: its setup must be an object with only {', '.join(sorted(fields))}")
    s = cf.Setup(**setup)
    if not all(isinstance(getattr(s, k), int) for k in ("rf", "brokers", "minisr")):
        raise UsageProblem(f"{bad}: its setup's rf, brokers and minisr must be numbers")
    _check_setup(s.rf, s.brokers, s.minisr, where=f"{file}'s setup: ", dashes="")
    if s.version not in KAFKA_VERSIONS:
        raise UsageProblem(f"{file}'s setup: Kafka {s.version!r} is not one of {', '.join(KAFKA_VERSIONS)}")
    events, reads = data["events"], data["reads"]
    if not isinstance(events, list) or not all(
        isinstance(e, dict) and isinstance(e.get("kind"), str) and isinstance(e.get("t"), int | float) for e in events
    ):
        raise UsageProblem(f"{bad}: its events must be a list of objects, each with a kind and a time t")
    if not isinstance(reads, list) or not all(
        isinstance(r, list) and len(r) == 2 and isinstance(r[1], list) and all(isinstance(x, list) for x in r[1])
        for r in reads
    ):
        raise UsageProblem(f"{bad}: its reads must be a list of [time, [record, ...]] pairs")
    try:
        cf.load(folder)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageProblem(f"{bad}: {type(e).__name__}: {e}") from None
    return folder


def _summary(outcomes: list) -> None:
    consistent = sum(o.validation is not None and o.validation.discrepancy is None for o in outcomes)
    click.echo(
        f"{len(outcomes)} runs: {consistent} consistent with the model, "
        f"{sum(o.events for o in outcomes)} observations, {sum(o.cuts for o in outcomes)} cuts, "
        f"{sum(o.seconds for o in outcomes) / len(outcomes):.0f} s per run; restarts registered before the "
        f"previous incarnation's fence: {sum(o.early or 0 for o in outcomes)}, after it: "
        f"{sum(o.late or 0 for o in outcomes)}"
    )


def _verdict(outcomes: list) -> int:
    bad = [o for o in outcomes if (o.validation and o.validation.discrepancy) or (o.broken and not _allowed(o))]
    if bad:
        return EXIT_VIOLATED
    if any(o.interrupted or (o.validation and o.validation.too_large is not None) for o in outcomes):
        return EXIT_INCOMPLETE
    return EXIT_HOLDS


def _allowed(o) -> bool:
    """Losses that unclean.leader.election.enable=true gives up the promise of."""
    from kafkamc.realkafka.conform import load

    return load(o.folder)[0].unclean
