"""TLC side by side (issue 40): TLC on the closest peer specification, then kafkamc's match.

Neither TLC nor the peer specification is in this repository (docs/PERFORMANCE.md says where
they came from). Give their paths in the environment:

- KAFKAMC_TLA2TOOLS: tla2tools.jar (TLC 2.18 for the issue's comparison);
- KAFKAMC_TLC_SPEC: the specification's main module (Vanlightly's
  kafka_replication_kip_966.tla), its own .cfg of the same name beside it;
- KAFKAMC_TLC_LIBRARY (optional): a folder of modules it EXTENDS that TLC does not ship (the
  Community Modules' FiniteSetsExt, SequencesExt, Functions, Folds), TLC's -DTLA-Library;
- KAFKAMC_TLC_SECONDS (optional, default 300): TLC stops after this many seconds.

    python -m kafkamc.jobs.tlc [--pairs N] [--json]

runs TLC (one worker, a fresh -metadir, stopped after the seconds) and then, back to back,
`kafkamc check` on the matching bounds in one process, N times, and prints each run's distinct
states, states generated, depth, wall and CPU time, and the ratio of distinct states per second.
Bad input is one `kafkamc: error:` line and exit 2. `kafkamc bench --run tlc-kip966` gives the
TLC row alone (jobs/bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

# kafkamc's match for the peer's cfg (issue 40): 3 brokers, RF 3, min ISR 2, one record, one
# hard crash, one fence, no clean shutdown; the other bounds at their defaults.
KAFKAMC_ARGS = ("--max-records", "1", "--max-hard-crashes", "1", "--max-fences", "1", "--max-clean-shutdowns", "0")
DEFAULT_SECONDS = 300.0
GRACE_S = 120.0  # past the stop: TLC's final report; then the JVM is killed
TLC_EXIT_DEADLOCK, TLC_EXIT_SAFETY = 11, 12  # tlc2.output.EC.ExitStatus


class TlcProblem(Exception):
    """Bad input or a run that could not be measured: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, as every other bad input
        raise TlcProblem(message)


@dataclass(frozen=True)
class TlcInputs:
    jar: Path
    spec: Path
    cfg: Path
    library: Path | None
    seconds: float


def inputs_from(env) -> TlcInputs:
    """The jar, the specification, its cfg, the library and the stop, checked, from `env`."""
    jar, spec = (_path(env, k) for k in ("KAFKAMC_TLA2TOOLS", "KAFKAMC_TLC_SPEC"))
    if not jar.is_file():
        raise TlcProblem(f"KAFKAMC_TLA2TOOLS: no such file: {jar}")
    if not zipfile.is_zipfile(jar) or "tlc2/TLC.class" not in zipfile.ZipFile(jar).namelist():
        raise TlcProblem(f"KAFKAMC_TLA2TOOLS: not a tla2tools.jar (no tlc2/TLC.class): {jar}")
    if spec.suffix != ".tla" or not spec.is_file():
        raise TlcProblem(f"KAFKAMC_TLC_SPEC: not a .tla file: {spec}")
    cfg = spec.with_suffix(".cfg")
    if not cfg.is_file():
        raise TlcProblem(f"KAFKAMC_TLC_SPEC: its configuration is missing: {cfg}")
    library = Path(env["KAFKAMC_TLC_LIBRARY"]) if env.get("KAFKAMC_TLC_LIBRARY") else None
    if library is not None and not library.is_dir():
        raise TlcProblem(f"KAFKAMC_TLC_LIBRARY: not a folder: {library}")
    seconds = env.get("KAFKAMC_TLC_SECONDS") or str(DEFAULT_SECONDS)
    try:
        stop = float(seconds)
    except ValueError:
        stop = -1.0
    if not 0 < stop < 86400:
        raise TlcProblem(f"KAFKAMC_TLC_SECONDS: not a number of seconds between 0 and 86400: {seconds!r}")
    if shutil.which("java") is None:
        raise TlcProblem("no java on PATH: TLC needs a Java 11 or newer")
    return TlcInputs(jar.resolve(), spec.resolve(), cfg.resolve(), library and library.resolve(), stop)


def _path(env, name: str) -> Path:
    if not env.get(name):
        raise TlcProblem(f"{name} is not set (TLC side by side needs KAFKAMC_TLA2TOOLS and KAFKAMC_TLC_SPEC)")
    return Path(env[name])


def configured(env) -> bool:
    """Whether the environment names a jar and a specification (the bench's tlc-kip966 row)."""
    return bool(env.get("KAFKAMC_TLA2TOOLS") and env.get("KAFKAMC_TLC_SPEC"))


def tlc_command(inputs: TlcInputs, metadir: str, workers: int = 1) -> list[str]:
    """TLC as the Toolbox runs it (the parallel collector), one worker, stopped after the seconds."""
    library = [f"-DTLA-Library={inputs.library}"] if inputs.library else []
    return [
        "java",
        "-XX:+UseParallelGC",
        f"-Dtlc2.TLC.stopAfter={round(inputs.seconds)}",
        *library,
        "-cp",
        str(inputs.jar),
        "tlc2.TLC",
        "-workers",
        str(workers),
        "-config",
        inputs.cfg.name,
        "-metadir",
        metadir,
        inputs.spec.name,
    ]


def parse_tlc(text: str) -> dict:
    """TLC's version, final counts and depth, from its output."""
    counts = re.findall(
        r"^([\d,]+) states generated, ([\d,]+) distinct states found, ([\d,]+) states left on queue", text, re.M
    )
    if not counts:
        errors = [ln for ln in text.splitlines() if ln.startswith(("Error", "***", "Exception"))]
        raise TlcProblem(f"TLC reported no counts: {(errors or text.strip().splitlines() or ['no output'])[0]}")
    generated, distinct, queued = (int(n.replace(",", "")) for n in counts[-1])
    depth = re.findall(r"depth of the complete state graph search is (\d+)", text)
    version = re.search(r"^(TLC2 Version .*)$", text, re.M)
    return {
        "tlc_version": version.group(1) if version else None,
        "states_generated": generated,
        "distinct_states": distinct,
        "left_on_queue": queued,
        "depth": int(depth[-1]) if depth else None,
    }


def measured(argv: list[str], cwd: Path, timeout: float) -> tuple[str, int, dict]:
    """Run argv; its output, exit code, and its own wall time, CPU time and peak memory."""
    with tempfile.TemporaryFile("w+") as out:
        start, pid = time.monotonic(), 0
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            while True:  # os.wait4: this child's own rusage, not every child's
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - start > timeout:
                    raise TlcProblem(f"{argv[0]} still running after {timeout:.0f} s; killed")
                time.sleep(0.2)
        finally:
            if not pid:  # stopped by the timeout or an interrupt: no JVM outlives the run
                proc.kill()
                proc.wait()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        text = out.read()
    cost = {
        "elapsed_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_memory_mib": round(usage.ru_maxrss / 1024),
    }
    return text, proc.returncode, cost


def run_tlc(inputs: TlcInputs, workers: int = 1) -> dict:
    """One TLC run on the peer's own cfg, a bench row."""
    with tempfile.TemporaryDirectory(prefix="kafkamc-tlc-") as metadir:
        load = os.getloadavg()
        argv = tlc_command(inputs, metadir, workers)
        text, code, cost = measured(argv, inputs.spec.parent, inputs.seconds + GRACE_S)
    counts = parse_tlc(text)
    verdict = {0: "holds", TLC_EXIT_DEADLOCK: "deadlock", TLC_EXIT_SAFETY: "violated"}.get(code, f"exit {code}")
    if verdict == "holds" and counts["left_on_queue"]:
        verdict = "incomplete"  # stopped after the seconds: TLC still says "No error has been found"
    return {
        "run": "tlc-kip966",
        "config": f"{inputs.cfg.name}: {peer_bounds(inputs.cfg)}",
        "engine": f"tlc -workers {workers}",
        "core": counts.pop("tlc_version"),
        "verdict": verdict,
        **counts,
        **cost,
        "distinct_states_per_s": round(counts["distinct_states"] / cost["elapsed_s"]),
        "load_average": [round(x, 2) for x in load],
        "command": " ".join(argv),
        "peak_worker_memory_mib": None,
        "visited_bytes_per_state": None,
    }


def peer_bounds(cfg: Path) -> str:
    """The cfg's numeric constants and sets (its bounds), as NAME=VALUE."""
    pairs = re.findall(r"^\s*(\w+)\s*=\s*(\d+|\{[^}]*\})\s*$", cfg.read_text(), re.M)
    return " ".join(f"{k}={v.replace(' ', '')}" for k, v in pairs)


def run_kafkamc(workers: int = 1, timeout: float = 3600.0) -> dict:
    """`kafkamc check` on the matching bounds, one process (with --workers 1), a row."""
    argv = [sys.executable, "-m", "kafkamc", "check", *KAFKAMC_ARGS, "--workers", str(workers), "--json", "--quiet"]
    load = os.getloadavg()
    text, code, cost = measured(argv, Path.cwd(), timeout)
    try:
        summary = json.loads(text[text.index("{") :])
    except ValueError:
        raise TlcProblem(f"kafkamc check gave no summary (exit {code}): {text.strip()[-200:]}") from None
    return {
        "run": "peer-kip966",
        "config": " ".join(KAFKAMC_ARGS),
        "engine": f"kafkamc check --workers {workers}",
        "core": summary["core"],
        "verdict": summary["verdict"],
        "distinct_states": summary["distinct_states"],
        "states_generated": summary["states_generated"],
        "depth": summary["depth"],
        **cost,
        "distinct_states_per_s": round(summary["distinct_states"] / cost["elapsed_s"]),
        "load_average": [round(x, 2) for x in load],
        "command": " ".join(["kafkamc", *argv[3:]]),
    }


def ratio(kafkamc: dict, tlc: dict) -> dict:
    """kafkamc's distinct states per wall second, and per CPU second, over TLC's."""
    return {
        "per_wall_s": round(kafkamc["distinct_states_per_s"] / tlc["distinct_states_per_s"], 2),
        "per_cpu_s": round(
            (kafkamc["distinct_states"] / kafkamc["cpu_s"]) / (tlc["distinct_states"] / tlc["cpu_s"]), 2
        ),
    }


def line(row: dict) -> str:
    return (
        f"{row['run']} [{row['core']}]: {row['distinct_states']:,} distinct states "
        f"({row['states_generated']:,} generated, depth {row['depth']}, {row['verdict']}) "
        f"in {row['elapsed_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU = {row['distinct_states_per_s']:,} states/s; "
        f"peak {row['peak_memory_mib']:,} MiB; load {' '.join(map(str, row['load_average']))}"
    )


def main(argv=None, env=None) -> int:
    parser = _Parser(prog="python -m kafkamc.jobs.tlc", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--pairs", type=int, default=1, help="TLC then kafkamc, this many times")
    parser.add_argument("--json", action="store_true", help="print the pairs as JSON")
    try:
        args = parser.parse_args(argv)
        if not 1 <= args.pairs <= 10:
            raise TlcProblem(f"--pairs: between 1 and 10, not {args.pairs}")
        inputs = inputs_from(os.environ if env is None else env)
        pairs = []
        for _ in range(args.pairs):
            tlc = run_tlc(inputs)
            kafkamc = run_kafkamc()
            pairs.append({"tlc": tlc, "kafkamc": kafkamc, "ratio": ratio(kafkamc, tlc)})
            if not args.json:
                print(line(tlc), line(kafkamc), f"ratio: {pairs[-1]['ratio']}", sep="\n", flush=True)
    except TlcProblem as e:
        print(f"kafkamc: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"pairs": pairs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
