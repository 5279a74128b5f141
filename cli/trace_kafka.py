"""`kafkamc trace kafka FILE`: replay a saved trace on a real KRaft cluster (realkafka/replay.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from kafkamc.cli.common import DEFAULT_KAFKA, EXIT_HOLDS, EXIT_INCOMPLETE, EXIT_VIOLATED, KAFKA_VERSIONS, UsageProblem
from kafkamc.cli.trace_export import properties_option
from kafkamc.invariants.properties import PropertyFile
from kafkamc.traces.trace import load


def register(trace_group) -> None:
    @trace_group.command("kafka")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option(
        "--kafka-version",
        type=click.Choice(KAFKA_VERSIONS),
        default=DEFAULT_KAFKA,
        show_default=True,
        help="the Kafka release the cluster runs",
    )
    @click.option(
        "--keep",
        type=click.Path(file_okay=False),
        default=None,
        help="the folder for the cluster's logs, data and report.txt (default: a new temporary folder, kept)",
    )
    @click.option(
        "--partitions",
        is_flag=True,
        help="fences and stalls as network partitions: nft cuts in a network namespace of the replay's own",
    )
    @properties_option
    def trace_kafka(file, kafka_version, keep, partitions, properties_file):
        """Replay a saved trace on a real Kafka cluster and compare each step with the model.

        Exit 1: the trace's violation was reproduced; 0: a trace without one reached the
        model's final state; 3: the cluster diverged from the model, or the replay was
        interrupted; 2: the trace cannot be replayed, or the cluster did not start; 4: a bug in kafkamc."""
        from kafkamc.realkafka import jars, replay
        from kafkamc.realkafka.cluster import ClusterFailed
        from kafkamc.realkafka.netns import NoNetwork

        t = load(file, PropertyFile.read(properties_file) if properties_file else None)
        why = replay.refusal(t, kafka_version)
        if why is not None:
            raise UsageProblem(f"cannot replay {file} on Kafka: {why}")
        folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="kafkamc-replay-"))
        try:
            result = replay.run(t, kafka_version, folder, echo=click.echo, network=partitions)
        except NoNetwork as e:
            raise UsageProblem(f"no network partitions here: {e}") from None
        except (ClusterFailed, jars.JarsMissing) as e:
            first = str(e).splitlines()[0]
            raise UsageProblem(f"the cluster did not start: {first} (logs in {folder / 'logs'})") from None
        except KeyboardInterrupt:
            click.echo(f"interrupted; logs and report so far in {folder}")
            return EXIT_INCOMPLETE
        if result.verdict == "reproduced":
            return EXIT_VIOLATED if t.invariant else EXIT_HOLDS
        return EXIT_INCOMPLETE
