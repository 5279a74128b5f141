"""Starting Spark for kafkamc: the SparkContext, the package shipped to the executors as a zip,
and failures turned into one-line messages.

checker/spark/search.py runs the search on the context this module starts; its public names
(SparkUnavailable, SparkJobFailed, spark_context, build_package_zip, ship_package) are also
importable from kafkamc.checker.spark.search.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import shutil
import socket
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

PACKAGES = ("spec", "checker", "invariants", "traces", "jobs", "cli")  # the kafkamc.* sub-packages


class SparkUnavailable(Exception):
    """Spark could not start (no Java, a bad or unreachable master, ...). One-line message."""


class SparkJobFailed(RuntimeError):
    """A job of the search failed after Spark's retries. One-line message; .details has the rest."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


# ---------------------------------------------------------------- the package, shipped as a zip


def _package_dirs() -> dict[str, Path]:
    """The source folder of each kafkamc.* sub-package, wherever this copy was imported from."""
    out = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(f"kafkamc.{name}")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"cannot locate the package kafkamc.{name}")
        out[name] = Path(list(spec.submodule_search_locations)[0])
    return out


def build_package_zip(dest: Path) -> Path:
    """dest/kafkamc.zip holding kafkamc/spec/..., kafkamc/checker/... with directory entries:
    `kafkamc` is a namespace package (no __init__.py), and zipimport finds one only through
    its directory entry. Fixed timestamps, so the same sources give the same bytes."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "kafkamc.zip"
    stamp = (1980, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("kafkamc/", stamp), b"")
        for name, folder in _package_dirs().items():
            for sub in sorted([folder, *(p for p in folder.rglob("*") if p.is_dir())]):
                if "__pycache__" in sub.parts:
                    continue
                rel = sub.relative_to(folder).as_posix()
                arc = f"kafkamc/{name}/" + ("" if rel == "." else rel + "/")
                zf.writestr(zipfile.ZipInfo(arc, stamp), b"")
                for f in sorted(sub.iterdir()):
                    if f.is_file() and f.suffix != ".pyc":
                        zf.writestr(zipfile.ZipInfo(arc + f.name, stamp), f.read_bytes())
    return path


def ship_package(sc, directory: Path | None = None) -> Path:
    """Make `kafkamc` importable on the executors, once per SparkContext.

    Local workers could import it from the driver's environment anyway; the zip is what makes
    a real cluster work, where executors have only their Python and its packages. The zip must
    outlive the context (executors fetch it when they first need it): it goes in `directory`,
    or in a temporary folder removed when the interpreter exits."""
    shipped = getattr(sc, "_kafkamc_zip", None)
    if shipped is not None:
        return shipped
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="kafkamc-zip-"))
        atexit.register(shutil.rmtree, directory, True)
    path = build_package_zip(directory)
    before = list(sys.path)
    sc.addPyFile(str(path))
    # PySpark also puts the zip on the driver's own sys.path. The driver has kafkamc already,
    # and Spark deletes its copy of the zip when the context stops: left there, it would serve
    # the driver's later imports of kafkamc modules, and then fail them.
    sys.path[:] = [p for p in sys.path if p in before]
    importlib.invalidate_caches()
    sc._kafkamc_zip = path
    return path


# ---------------------------------------------------------------- starting Spark

_LOG4J2 = """\
# Every JVM log line goes to a file: nothing from Spark's JVM reaches the terminal.
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n
"""

# What spark-submit accepts: "Master must either be yarn or start with spark, k8s, or local".
_MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?$|local-cluster\[\d+,\d+,\d+\]$|yarn$|(spark|k8s)://.")


def _check_master_url(master: str) -> None:
    """Reject at once what spark-submit would reject after the seconds a JVM takes to start."""
    if not _MASTER.match(master):
        raise SparkUnavailable(
            f"not a Spark master URL: {master!r} "
            "(use local, local[N], local[N,maxFailures], spark://HOST:PORT, yarn or k8s://...)"
        )


def _check_master_reachable(master: str, timeout: float = 3.0) -> None:
    """A standalone master that does not answer makes Spark retry for a minute: try a TCP
    connection first, to each master of an HA list."""
    if not master.startswith("spark://"):
        return
    errors = []
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as e:
            errors.append(f"{hostport}: {e}")
    raise SparkUnavailable(f"cannot reach the Spark master {master} ({'; '.join(errors)})")


def _require_java() -> None:
    """spark-submit runs $JAVA_HOME/bin/java when JAVA_HOME is set, else java on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return
    if not home and shutil.which("java"):
        return
    where = f"JAVA_HOME={home} has no bin/java" if home else "no java on the PATH and JAVA_HOME is not set"
    raise SparkUnavailable(f"Spark needs Java 17 or newer: {where}")


def _under_spark_submit() -> bool:
    """Started by spark-submit: the driver JVM is already there, with its --master and --conf."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _settings(master: str | None, conf: Mapping, workdir: Path) -> dict:
    """Our defaults, then the caller's conf; Java options are joined, not replaced."""
    log4j = workdir / "log4j2.properties"
    log4j.write_text(_LOG4J2.format(log=workdir / "spark.log"))
    settings = {
        "spark.app.name": "kafkamc",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",  # only read when the driver JVM starts
        "spark.executorEnv.PYTHONHASHSEED": "0",
    }
    if master is not None:
        settings["spark.master"] = master
    settings.update({k: str(v) for k, v in conf.items()})
    settings["spark.driver.extraJavaOptions"] = (
        f"-Dlog4j2.configurationFile=file:{log4j} {JVM_OPTIONS} " + str(conf.get("spark.driver.extraJavaOptions", ""))
    ).strip()
    settings["spark.executor.extraJavaOptions"] = (
        f"{JVM_OPTIONS} " + str(conf.get("spark.executor.extraJavaOptions", ""))
    ).strip()
    return settings


# The JVMs only move bytes for the search (Python does the work): the optimising JIT
# compiler cost them more CPU than it saved, on a machine whose cores the Python workers
# need. Measured on the default check with local[2]: the JVM's CPU time went from 12.1 s
# to 5.6 s and the search from 22.7 s to 20.1 s. A user's own options come after these,
# so they win.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _start(master: str | None, conf: Mapping, workdir: Path):
    """A bare SparkContext (it starts seconds faster than a SparkSession); SparkUnavailable
    with one line when it cannot start."""
    if master is None and not _under_spark_submit():
        master = "local[*]"
    if master is not None:
        _check_master_url(master)
        _check_master_reachable(master)
    if not _under_spark_submit():
        _require_java()
    # Before the JVM starts, so that it and the Python workers it forks inherit them.
    os.environ.setdefault("PYTHONHASHSEED", "0")
    # The executors' Python: the driver hands them $PYSPARK_PYTHON (else `python3` on their
    # PATH). spark.pyspark.python is read by spark-submit only; here it sets the same thing.
    if conf.get("spark.pyspark.python"):
        os.environ["PYSPARK_PYTHON"] = str(conf["spark.pyspark.python"])
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Locally, the Python workers run this interpreter (the same version as the driver).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False).setAll(list(_settings(master, conf, workdir).items()))
    console = workdir / "jvm-console.log"
    try:
        gateway = None
        if SparkContext._gateway is None and not _under_spark_submit():
            # The JVM's own output (spark-submit's errors, a JVM that cannot start) goes to a
            # file too: log4j2 only covers what Spark logs once it runs.
            with open(console, "ab") as out:
                gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": out, "stderr": out})
        return SparkContext(conf=spark_conf, gateway=gateway)
    except Exception as e:  # noqa: BLE001 - whatever stops Spark from starting becomes one line
        raise SparkUnavailable(f"Spark could not start with master {master!r}: {_one_line(e, console)}") from None


def _one_line(e: BaseException, console: Path | None = None) -> str:
    """What went wrong, in one line, without a Java stack trace."""
    java = getattr(e, "java_exception", None)
    line = _java_messages(java) if java is not None else ""
    if not line:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        line = lines[0] if lines else type(e).__name__
    if console is not None and console.exists() and "JAVA_GATEWAY_EXITED" in line:
        said = _jvm_complaint(console.read_text(errors="replace"))
        if said:
            line = f"the JVM exited: {said}"
    return line


def _java_messages(java) -> str:
    """A Java exception's message, with its root cause's when that says something else."""
    messages: list = []
    try:
        while java is not None and len(messages) < 20:
            messages.append(str(java.getMessage() or java.getClass().getName()).strip().splitlines()[0])
            java = java.getCause()
    except Exception:  # noqa: BLE001 - the gateway itself may be gone
        pass
    if not messages:
        return ""
    return messages[0] if messages[-1] in messages[0] else f"{messages[0]} ({messages[-1]})"


def _jvm_complaint(text: str) -> str:
    """The first line that says why a JVM (spark-submit) exited, without the exception class."""
    for ln in text.splitlines():
        ln = ln.strip()
        if not ln or ln.startswith(("at ", "WARNING:", "...")):
            continue
        ln = re.sub(r'^Exception in thread "[^"]*" ', "", ln)
        return re.sub(r"^[\w.$]+(Exception|Error): ", "", ln)
    return ""


@contextmanager
def spark_context(master: str | None = "local[*]", conf: Mapping | None = None) -> Iterator:
    """A SparkContext set up for kafkamc, stopped and cleaned up on exit. Raises SparkUnavailable.

    master=None: spark-submit's --master when run under spark-submit, else local[*]. Only the
    first context of a Python process starts the driver JVM, so JVM settings (driver memory,
    Java options) given to later contexts of the same process do not apply.
    """
    workdir = Path(tempfile.mkdtemp(prefix="kafkamc-spark-"))
    try:
        sc = _start(master, conf or {}, workdir)
        try:
            ship_package(sc, workdir)
            yield sc
        finally:
            sc.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------- failures and leftovers


def _remove_dir(sc, path: str) -> None:
    """Delete a folder through Hadoop's FileSystem, so that HDFS or S3 checkpoints go too."""
    try:
        jpath = sc._jvm.org.apache.hadoop.fs.Path(path)
        jpath.getFileSystem(sc._jsc.hadoopConfiguration()).delete(jpath, True)
    except Exception:  # noqa: BLE001 - best effort: a leftover folder must not hide the result
        pass


def _python_error(e: BaseException) -> str:
    """The Python exception line inside a failed job's Java error, else its first line."""
    found = re.findall(r"^(\w+(?:\.\w+)*(?:Error|Exception|Interrupt)\b.*)$", str(e), re.M)
    python = [ln.strip() for ln in found if not ln.startswith(("org.", "java.", "py4j.", "scala."))]
    return python[-1] if python else _one_line(e)
