"""`kafkamc conform` on real KRaft clusters (marked kafka): short runs under random faults,
validated against the model; the same run fails validation under a broken model; an
interrupted run reports what it validated, keeps everything and leaves no JVM."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from helpers import skip_without_namespaces
from kafkamc.realkafka.conform import Outcome, check
from test_conform import follower_ignores_hw, mutant
from test_realkafka_replay import _jvms_of, _text

pytestmark = pytest.mark.kafka


def _why(r, out) -> str:
    """A failed run's report, its discrepancy and the observations around it first (a tail of
    stdout cut them off in CI), with the first dozen lines of its log excerpt, then stderr's end."""
    reports = sorted(out.glob("*/report.txt")) if out.exists() else []
    if not reports:
        return r.stdout[-3000:] + r.stderr[-2000:]
    kept, logs = [], None
    for line in reports[0].read_text().splitlines():
        if line.startswith("  the brokers' and the controller's log lines"):
            logs = 0
        elif logs is not None and line.startswith("    "):
            logs += 1
            if logs > 12:
                continue
        else:
            logs = None
        kept.append(line[:300])
    return "\n".join(kept) + "\n" + r.stderr[-2000:]


@pytest.mark.parametrize(
    "args,config",
    [
        (
            ("--kafka-version", "4.1.1", "--seed", "11"),
            "Kafka 4.1.1, 3 brokers, RF 3, min.insync.replicas=2, unclean.leader.election.enable=false, ELR on",
        ),
        (
            ("--kafka-version", "4.4.0", "--seed", "12", "--minisr", "1", "--unclean"),
            "Kafka 4.4.0, 3 brokers, RF 3, min.insync.replicas=1, unclean.leader.election.enable=true, ELR on",
        ),
    ],
    ids=["4.1.1-recommended", "4.4.0-unclean"],
)
def test_a_short_run_is_consistent_and_a_broken_model_is_not(kafkamc_cli, tmp_path, args, config):
    out = tmp_path / "runs"
    r = kafkamc_cli("conform", "--faults", "8", *args, "--out", out, timeout=900)
    assert r.returncode == 0, _why(r, out)
    run = next(out.iterdir())
    report = (run / "report.txt").read_text().splitlines()
    assert report[0].startswith(config + ": ")
    assert report[2] == "consistent: every observation is one the model can make"
    # Killed brokers restart at once (issue 41): each new incarnation registered before or after
    # the controller fenced the old one, and the report counts both.
    assert report[3].startswith("restarts: ") and report[3].endswith(" after it")
    assert {"observations.json", "metadata.txt", "report.txt", "cluster"} <= {p.name for p in run.iterdir()}
    broken = check(run, Outcome(run), lambda _line: None, actions=mutant("Fetch", step=follower_ignores_hw))
    assert broken.validation is not None and broken.validation.discrepancy is not None
    assert _jvms_of(run) == []


def test_sigterm_validates_what_was_observed_and_leaves_no_jvm(tmp_path):
    from helpers import EXE

    out = tmp_path / "runs"
    p = subprocess.Popen(
        [EXE, "conform", "--faults", "30", "--seed", "3", "--out", str(out)], stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not list(out.glob("*/cluster/logs/broker-1.log")):
        time.sleep(0.5)
    time.sleep(25)  # a few steps into the schedule
    p.send_signal(signal.SIGTERM)
    stdout, _ = p.communicate(timeout=180)
    assert p.returncode == 3, stdout[-3000:]
    run = next(out.iterdir())
    report = _text(run / "report.txt")
    assert "consistent: every observation is one the model can make" in report
    assert report.rstrip().splitlines()[-1].startswith("interrupted after ")
    assert _jvms_of(run) == []


def test_partitions_and_power_losses_are_consistent_and_leave_nothing(kafkamc_cli, tmp_path):
    """Seed 203's six faults cut each of the three links once (a zombie leader, a follower
    dropped on the lag clock, a follower fenced while it fetches) and lose broker 1's power; the
    report names each fault's counterpart in the model, and no JVM or node process is left."""
    from test_realkafka_partitions import _ours

    skip_without_namespaces()
    out = tmp_path / "runs"
    args = ("--faults", "6", "--seed", "203", "--kafka-version", "4.4.0", "--partitions", "--power-loss")
    r = kafkamc_cli("conform", *args, "--out", out, timeout=900)
    assert r.returncode == 0, _why(r, out)
    run = next(out.iterdir())
    report = (run / "report.txt").read_text().splitlines()
    assert ", cuts leader-controller leader-follower follower-controller, power losses: " in report[0]
    assert report[2] == "consistent: every observation is one the model can make"
    # Its one restart, at once (issue 41): before or after the old incarnation's fence is Kafka's timing.
    assert report[3].startswith("restarts: ") and report[3].endswith(" after it")
    assert report[4] == "the faults, each with its counterpart in the model:"
    assert any(line.startswith("  power loss of broker 1: ") and "BrokerCrash(1, keep=" in line for line in report)
    assert any(line.startswith("  cut leader-controller (broker ") for line in report)
    assert _jvms_of(run) == [] and _ours() == []
