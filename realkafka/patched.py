"""A Kafka release with the re-election finding's proposed fix, built from the release's own
sources: the small diff realkafka/patch/makeleader-epoch-gap.diff applied to
kafka/cluster/Partition.scala of the release's sources jar, compiled with the Scala 2.13 compiler
against the release's own jars. The classes go ahead of the jars on the broker's classpath
(Settings(patched=True)); nothing of Kafka's source is kept in this repository.

    python -m kafkamc.realkafka.patched 4.1.1      # build (what .ci/run does), print the folder

Everything comes from Maven Central by Maven: org.apache.kafka:kafka_2.13:V:jar:sources and
org.scala-lang:scala-compiler at the scala-library version the release ships. The result is
cached next to the jars ($KAFKAMC_KAFKA_CACHE/V-patched), stamped with the diff's hash, so a
changed diff is built again. Maven Central has no sources jar of 4.4.0 (kafka_2.13 4.4.0 is
published without one): build("4.4.0") raises JarsMissing and says so.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from kafkamc.realkafka import jars
from kafkamc.realkafka.jars import JarsMissing

PATCH = Path(__file__).resolve().parent / "patch" / "makeleader-epoch-gap.diff"
SOURCE = "kafka/cluster/Partition.scala"
# The patched broker logs this when it resets its followers after a skipped epoch (the diff's
# own line), so a run can tell that the patched class was the one loaded.
SIGNATURE = "the followers' state is reset as for a new leader"


def patched_dir(version: str) -> Path:
    return jars.cache_root() / f"{version}-patched"


def _stamp() -> str:
    return hashlib.sha256(PATCH.read_bytes()).hexdigest()[:16]


def _scala_version(version: str) -> str:
    found = sorted(jars.resolve(version).glob("scala-library-2.13.*.jar"))
    if not found:
        raise JarsMissing(f"no scala-library 2.13 among Kafka {version}'s jars")
    return found[-1].name.removeprefix("scala-library-").removesuffix(".jar")


def _mvn_copy(artifact: str, into: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsMissing("Maven (mvn) is not on PATH: it fetches the sources jar and the Scala compiler")
    args = [mvn, "-q", "-B", "-f", str(jars.POM), "dependency:copy", f"-Dartifact={artifact}"]
    p = subprocess.run([*args, f"-DoutputDirectory={into}"], capture_output=True, text=True)
    if p.returncode != 0:
        why = "not found" if "not found" in p.stdout + p.stderr else (p.stdout + p.stderr)[-1500:]
        raise JarsMissing(f"Maven Central: {artifact}: {why}")


def build(version: str) -> Path:
    """The folder of the patched classes of version (built on first use, about 10 to 30 s)."""
    out = patched_dir(version)
    stamp = out / ".complete"
    if stamp.is_file() and stamp.read_text().strip() == _stamp():
        return out / "classes"
    release = jars.resolve(version)
    scala = _scala_version(version)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "src").mkdir(parents=True)
    try:
        _compile(version, release, scala, partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    (partial / ".complete").write_text(_stamp() + "\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out / "classes"


def _compile(version: str, release: Path, scala: str, partial: Path) -> None:
    """Fetch, patch and compile into partial/classes; the compile time in partial/compile-seconds."""
    _mvn_copy(f"org.apache.kafka:kafka_2.13:{version}:jar:sources", partial)
    _mvn_copy(f"org.scala-lang:scala-compiler:{scala}", partial)
    with zipfile.ZipFile(partial / f"kafka_2.13-{version}-sources.jar") as z:
        z.extract(SOURCE, partial / "src")
    if shutil.which("patch") is None:
        raise JarsMissing("`patch` is not on PATH: it applies the diff (Debian: patch)")
    p = subprocess.run(
        ["patch", "-p1", "--no-backup-if-mismatch", "-d", str(partial / "src"), "-i", str(PATCH)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise JarsMissing(f"{PATCH.name} does not apply to Kafka {version}'s {SOURCE}: {p.stdout}{p.stderr}")
    (partial / "classes").mkdir()
    compiler = [str(partial / f"scala-compiler-{scala}.jar")] + [
        str(release / f"scala-{lib}-{scala}.jar") for lib in ("library", "reflect")
    ]
    against = ":".join(str(j) for j in sorted(release.glob("*.jar")))
    t0 = time.monotonic()
    p = subprocess.run(
        [jars.java(), "-Xmx768m", "-Xss4m", "-cp", ":".join(compiler), "scala.tools.nsc.Main"]
        + ["-nowarn", "-d", str(partial / "classes"), "-classpath", against, str(partial / "src" / SOURCE)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0 or not (partial / "classes" / "kafka" / "cluster" / "Partition.class").is_file():
        raise JarsMissing(f"scalac {scala} failed on the patched {SOURCE}: {(p.stdout + p.stderr)[-2000:]}")
    # The compiler's jar and the sources are not needed to run: only the classes are kept.
    for jar in partial.glob("*.jar"):
        jar.unlink()
    (partial / "compile-seconds").write_text(f"{time.monotonic() - t0:.1f}\n")


def main(argv: list[str]) -> int:
    for version in argv or ["4.1.1"]:
        try:
            classes = build(version)
        except JarsMissing as e:
            print(f"Kafka {version}: {e}", file=sys.stderr)
            return 1
        n = sum(1 for _ in classes.rglob("*.class"))
        took = (classes.parent / "compile-seconds").read_text().strip()
        print(f"Kafka {version} with {PATCH.name}: {classes} ({n} classes, compiled in {took} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
