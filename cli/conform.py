"""`kafkamc conform`: real runs under random faults, validated against the model (realkafka/conform.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from kafkamc.cli.common import EXIT_HOLDS, EXIT_INCOMPLETE, EXIT_VIOLATED, UsageProblem

VERSIONS = ("4.1.1", "4.4.0")


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
    @click.option("--kafka-version", type=click.Choice(VERSIONS), default="4.1.1", show_default=True)
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
        "--validate",
        "saved",
        type=click.Path(file_okay=False, exists=True),
        default=None,
        help="validate a saved run's folder again, without Kafka",
    )
    def conform(kafka_version, rf, brokers, minisr, unclean, elr, faults, seed, runs, out, saved):
        """Run random fault schedules on a real KRaft cluster and check that everything it did
        is something the model can do (trace validation), and that no acknowledged write was lost.

        Exit 0: every run consistent with the model and every promise kept; 1: a discrepancy or a
        lost write (the run's folder keeps everything); 2: bad input, or the cluster did not
        start; 3: interrupted (what was validated so far is reported)."""
        from kafkamc.realkafka import conform as cf
        from kafkamc.realkafka import jars
        from kafkamc.realkafka.cluster import ClusterFailed

        if saved is not None:
            if not (Path(saved) / "observations.json").is_file():
                raise UsageProblem(f"{saved} holds no observations.json")
            return _verdict([cf.check(Path(saved), cf.Outcome(Path(saved)), click.echo)])
        brokers = brokers or rf
        if not 1 <= rf <= 5 or not rf <= brokers <= 5:
            raise UsageProblem(f"--rf must be 1 to 5 and --brokers between --rf and 5 (got {rf}, {brokers})")
        if not 1 <= minisr <= rf:
            raise UsageProblem(f"--minisr must be between 1 and --rf (got {minisr})")
        if faults < 1 or runs < 1:
            raise UsageProblem("--faults and --runs must be at least 1")
        setup = cf.Setup(rf, brokers, minisr, unclean, elr, kafka_version)
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


def _summary(outcomes: list) -> None:
    consistent = sum(o.validation is not None and o.validation.discrepancy is None for o in outcomes)
    click.echo(
        f"{len(outcomes)} runs: {consistent} consistent with the model, "
        f"{sum(o.events for o in outcomes)} observations, {sum(o.cuts for o in outcomes)} cuts, "
        f"{sum(o.seconds for o in outcomes) / len(outcomes):.0f} s per run"
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
