"""The jars of one Kafka release, resolved from Maven Central by realkafka/pom.xml into a cache
folder of their own (one per version), and the small Java probe compiled against them.

    python -m kafkamc.realkafka.jars 4.1.1 4.4.0     # resolve (what .ci/run does), print the folders

Nothing is downloaded any other way: there is no binary tarball, only Maven's own resolution of
org.apache.kafka:kafka_2.13 (the broker, kafka.Kafka; kafka.tools.StorageTool), kafka-tools and
the Log4j 2 binding of SLF4J. The cache is $KAFKAMC_KAFKA_CACHE, else ~/.cache/kafkamc/kafka.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

POM = Path(__file__).resolve().parent / "pom.xml"
PROBE_SOURCE = Path(__file__).resolve().parent / "java" / "Probe.java"
DEFAULT_VERSIONS = ("4.1.1", "4.4.0")


class JarsMissing(RuntimeError):
    """Java, Maven or a Kafka release's jars are not to be had; the message says which."""


def cache_root() -> Path:
    env = os.environ.get("KAFKAMC_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kafkamc" / "kafka"


def jar_dir(version: str) -> Path:
    return cache_root() / version


def _complete(folder: Path, version: str) -> bool:
    return (folder / f"kafka_2.13-{version}.jar").is_file() and (folder / ".complete").is_file()


def resolve(version: str) -> Path:
    """The folder of version's jars, resolved by Maven on first use. The folder is filled under a
    temporary name and renamed when complete, so an interrupted resolve is never taken for one."""
    folder = jar_dir(version)
    if _complete(folder, version):
        return folder
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsMissing("Maven (mvn) is not on PATH: it resolves Kafka's jars from Maven Central")
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    args = [mvn, "-q", "-B", "-f", str(POM), f"-Dkafka.version={version}", "dependency:copy-dependencies"]
    args.append(f"-DoutputDirectory={partial}")
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0 or not (partial / f"kafka_2.13-{version}.jar").is_file():
        raise JarsMissing(f"mvn could not resolve Kafka {version}: {(p.stdout + p.stderr)[-2000:]}")
    (partial / ".complete").write_text(version + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def classpath(version: str) -> str:
    return str(resolve(version) / "*")


def first_class(version: str, *names: str) -> str:
    """The first of names that version's jars hold (a tool that moved between releases, such as
    DumpLogSegments: kafka.tools in 4.1, org.apache.kafka.tools in 4.4)."""
    import zipfile

    paths = {n.replace(".", "/") + ".class": n for n in names}
    found: set[str] = set()
    for jar in resolve(version).glob("kafka*.jar"):
        with zipfile.ZipFile(jar) as z:
            found |= paths.keys() & set(z.namelist())
    for path, name in paths.items():
        if path in found:
            return name
    raise JarsMissing(f"none of {', '.join(names)} in Kafka {version}'s jars")


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise JarsMissing("java is not on PATH: Kafka 4.x brokers need Java 17 or newer")
    return found


def probe_classes(version: str) -> Path:
    """realkafka/java/Probe.java compiled against version's kafka-clients (once per version)."""
    out = resolve(version) / "probe"
    cls = out / "Probe.class"
    if cls.is_file() and cls.stat().st_mtime >= PROBE_SOURCE.stat().st_mtime:
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise JarsMissing("javac is not on PATH: the probe (realkafka/java/Probe.java) is compiled at first use")
    out.mkdir(exist_ok=True)
    p = subprocess.run(
        [javac, "-nowarn", "-d", str(out), "-cp", classpath(version), str(PROBE_SOURCE)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise JarsMissing(f"javac failed on {PROBE_SOURCE}: {p.stderr[-2000:]}")
    return out


def main(argv: list[str]) -> int:
    for version in argv or list(DEFAULT_VERSIONS):
        folder = resolve(version)
        probe_classes(version)
        print(f"Kafka {version}: {folder} ({sum(1 for _ in folder.glob('*.jar'))} jars)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
