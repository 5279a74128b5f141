"""`kafkamc trace kafka FILE` (realkafka/replay.py): a saved trace replayed on a real KRaft cluster.

The refusals start no process and are not marked. The replays are marked kafka: the gate's
known-unsafe configurations that apply to Kafka 4.x (tests/gate/kafka.toml: unclean election
with min ISR 1, acks=1) each lose, for real, the record the model says they lose, and a witness
where every promise holds ends with the real cluster in the model's final state."""

from __future__ import annotations

import os
import subprocess

import pytest

CHECK = ("check", "--workers", "1", "--max-records", "1")
# A crash that loses nothing (keep=None, the --max-clean-shutdowns bound) in place of the default
# hard crash, so that the loss these tests show is the election's, not a power loss's.
NO_TAIL_LOSS = ("--max-hard-crashes", "0", "--max-clean-shutdowns", "1")


def _trace(kafkamc_cli, tmp_path, name, *args):
    path = tmp_path / f"{name}.json"
    r = kafkamc_cli(*CHECK, *args, "--trace-out", path)
    assert path.exists(), r.stdout[-2000:]
    return path


def _jvms_of(folder) -> list[str]:
    """Java processes whose command line names the folder (the cluster's config files)."""
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if "java" in line and str(folder) in line]


def test_an_old_era_trace_is_refused_before_any_process(kafkamc_cli, tmp_path):
    t = _trace(kafkamc_cli, tmp_path, "oldest", "--protocol", "oldest", "--max-clean-shutdowns", "1")
    r = kafkamc_cli("trace", "kafka", t, "--keep", tmp_path / "run")
    assert r.returncode == 2
    assert r.stdout == "" and r.stderr.count("\n") == 1
    assert "the trace's protocol is 0.8.2, not Kafka 4.4.0's (4.3.0): rules [" in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.kafka
def test_two_power_losses_lose_the_acknowledged_write_for_real(kafkamc_cli, tmp_path):
    """The default shortest trace of two hard crashes (rf 3, min ISR 2) fences broker 1 (crashed at
    step 8) before broker 2 (crashed at step 4), which no controller clock does. Replayed as the
    equivalent interleaving with broker 2's crash after broker 1's (interleave.py), timed so that
    broker 1 restarts between the two fences: r1, acknowledged, is lost for real as in the model."""
    t = _trace(kafkamc_cli, tmp_path, "two-crashes", "--rf", "3", "--minisr", "2", "--max-hard-crashes", "2")
    r = kafkamc_cli("trace", "kafka", t, "--kafka-version", "4.1.1", "--keep", tmp_path / "run", timeout=400)
    assert r.returncode == 1, r.stdout[-4000:]
    assert "as an equivalent interleaving (interleave.py" in r.stdout
    assert "BrokerCrash(broker=1, keep=0), BrokerCrash(broker=2, keep=0), BrokerSessionTimeout(broker=1)" in r.stdout
    assert "DIFFERENT" not in r.stdout
    assert "the acknowledged write lost for real: r1, acknowledged at offset 0, is not in leader 2's log" in r.stdout
    assert _jvms_of(tmp_path / "run") == []


@pytest.mark.kafka
def test_a_power_loss_loses_the_unflushed_record_for_real(kafkamc_cli, tmp_path):
    """acks=1, then the leader's hard crash keeps none of its log (keep=0): SIGKILL, the segment
    cut back to the flushed prefix (nothing: Kafka fsyncs no write by default), broker 2 elected."""
    t = _trace(kafkamc_cli, tmp_path, "acks1", "--acks", "1", "--invariant", "AckedWriteDurability")
    run = tmp_path / "run"
    r = kafkamc_cli("trace", "kafka", t, "--kafka-version", "4.1.1", "--keep", run, timeout=240)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "step 2: BrokerCrash(broker=1, keep=0)  SIGKILL, power loss: cut to 0 record(s)" in r.stdout
    assert "recovery point 0)" in r.stdout
    assert "AckedWriteDurability violated for real: r1, acknowledged at offset 0" in r.stdout
    assert "DIFFERENT" not in r.stdout and r.stdout.rstrip().endswith("reproduced")
    assert _jvms_of(run) == []


VERSION = os.environ.get("KAFKAMC_KAFKA_VERSION", "4.4.0")
LOSS = [
    pytest.param(
        ("--acks", "1", "--invariant", "AckedWriteDurability"),
        "AckedWriteDurability violated for real: r1, acknowledged at offset 0, is not in leader 2's log",
        id="acks1",
    ),
    pytest.param(
        ("--minisr", "1", "--unclean", "--invariant", "NoCommittedDataLoss"),
        "NoCommittedDataLoss violated for real: r1, acknowledged at offset 0, is not in leader 2's log",
        id="minisr1-unclean",
    ),
]


@pytest.mark.kafka
@pytest.mark.parametrize("args,lost", LOSS)
def test_an_unsafe_configuration_loses_the_record_for_real(kafkamc_cli, tmp_path, args, lost):
    t = _trace(kafkamc_cli, tmp_path, "unsafe", *args, *NO_TAIL_LOSS)
    run = tmp_path / "run"
    r = kafkamc_cli("trace", "kafka", t, "--kafka-version", VERSION, "--keep", run, timeout=240)
    assert r.returncode == 1, r.stdout[-3000:]
    assert lost in r.stdout and "a consumer reads []" in r.stdout
    assert r.stdout.rstrip().endswith("reproduced")
    assert "DIFFERENT" not in r.stdout
    assert (run / "report.txt").read_text().rstrip().endswith("reproduced")
    assert (run / "logs" / "broker-1.log").exists()
    assert _jvms_of(run) == []


@pytest.mark.kafka
def test_elr_leaves_the_partition_offline_with_a_live_replica(kafkamc_cli, tmp_path):
    """The gate's elr-offline-with-a-live-replica (rf 2, min ISR 1): broker 2 stalls out of the
    ISR, broker 1 is killed and fenced; ELR [1] and no unclean election leave no leader though
    broker 2 runs, for the 15 s the replay watches."""
    t = _trace(
        kafkamc_cli,
        tmp_path,
        "offline",
        "--rf",
        "2",
        "--minisr",
        "1",
        "--invariant",
        "EventuallyAvailable",
        *NO_TAIL_LOSS,
    )
    run = tmp_path / "run"
    r = kafkamc_cli("trace", "kafka", t, "--kafka-version", VERSION, "--keep", run, timeout=240)
    assert r.returncode == 1, r.stdout[-3000:]
    last = "leader -1 epoch 1 replicas [1, 2] ISR [] ELR [1] up [2] HW None | logs 1:[]; 2:[]"
    assert f"step 5: MetadataUpdate(broker=2)\n    model: {last}\n    real:  same" in r.stdout
    assert "stayed in the model's last state for 15 s: EventuallyAvailable does not happen" in r.stdout
    assert _jvms_of(run) == []


@pytest.mark.kafka
def test_a_witness_ends_in_the_models_final_state(kafkamc_cli, tmp_path):
    t = _trace(kafkamc_cli, tmp_path, "hw", "--reach", "HighWatermarkAdvances")
    run = tmp_path / "run"
    r = kafkamc_cli("trace", "kafka", t, "--kafka-version", "4.1.1", "--keep", run, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:]
    logs = "logs 1:[r1@e0]; 2:[r1@e0]; 3:[r1@e0]"
    final = f"leader 1 epoch 0 replicas [1, 2, 3] ISR [1, 2, 3] ELR [] up [1, 2, 3] HW 1 | {logs}"
    assert f"step 5: Fetch(follower=3, leader=1)\n    model: {final}\n    real:  same" in r.stdout
    assert "the real cluster reached the model's final state; every promise holds in it" in r.stdout
    assert _jvms_of(run) == []


def test_the_rolling_restart_scenario_is_a_path_of_the_model(kafkamc_cli, tmp_path):
    from kafkamc.realkafka.scenario import rolling_restart

    path = rolling_restart().save(tmp_path / "rr.json")
    r = kafkamc_cli("trace", "replay", path)
    assert (r.returncode, r.stdout.strip()) == (0, "replayed 33 steps: a real path of the model")


@pytest.mark.kafka
def test_a_rolling_restart_with_a_preferred_election_follows_the_model(kafkamc_cli, tmp_path):
    """Controlled shutdown (SIGTERM), restart, ElectLeaders through the probe: every segment's
    end state is reached, the leader epochs are the model's minus one."""
    from kafkamc.realkafka.scenario import rolling_restart

    t = rolling_restart().save(tmp_path / "rr.json")
    run = tmp_path / "run"
    r = kafkamc_cli("trace", "kafka", t, "--kafka-version", VERSION, "--keep", run, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "DIFFERENT" not in r.stdout
    assert "step 8: ControlledShutdown(broker=1)  SIGTERM (controlled shutdown)" in r.stdout
    logs = "logs 1:[r1@e0 r2@e2]; 2:[r1@e0 r2@e2]; 3:[r1@e0 r2@e2]"
    final = f"leader 1 epoch 2 replicas [1, 2, 3] ISR [1, 2, 3] ELR [] up [1, 2, 3] HW 2 | {logs}"
    assert f"step 33: Fetch(follower=3, leader=1)\n    model: {final}\n    real:  same" in r.stdout
    assert _jvms_of(run) == []


@pytest.mark.kafka
def test_sigterm_keeps_the_report_and_leaves_no_jvm(kafkamc_cli, tmp_path):
    import signal
    import time

    from helpers import EXE

    t = _trace(kafkamc_cli, tmp_path, "hw", "--reach", "HighWatermarkAdvances")
    run = tmp_path / "run"
    p = subprocess.Popen([EXE, "trace", "kafka", str(t), "--keep", str(run)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "step 0:" not in _text(run / "report.txt"):
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3, out
    assert _text(run / "report.txt").rstrip().endswith(f"interrupted: logs and report so far in {run}")
    assert (run / "logs" / "controller.log").exists()
    assert _jvms_of(run) == []


def _text(path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
