"""The faults of `kafkamc conform` beyond signals (realkafka/faults.py, realkafka/schedule.py) and
the reordering of crashes for `kafkamc trace kafka` (realkafka/interleave.py), without Kafka."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from kafkamc.realkafka import faults, interleave, validate
from kafkamc.realkafka.observe import controller_view
from kafkamc.realkafka.schedule import schedule
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.traces.trace import format_action

LINKS = tuple(faults.LINKS)
TWO_CRASHES = Path(__file__).parent / "data" / "two-crashes.json"


def test_a_schedule_with_partitions_and_power_losses_is_its_seed():
    steps = schedule(603, 30, 3, 3, LINKS, True)
    assert steps == schedule(603, 30, 3, 3, LINKS, True)
    kinds = Counter(s["do"] for s in steps)
    assert kinds["cut"] == 11 and kinds["powerloss"] == 2
    assert {s["link"] for s in steps if s["do"] == "cut"} == set(LINKS)
    assert all(0 <= s["pick"] < 1 for s in steps if s["do"] in ("cut", "powerloss"))
    down: set[int] = set()
    for s in steps:  # a power loss is a broker down like a kill: at most rf - 1, all back at the end
        assert s["do"] != "cut" or len(down) < 2  # a cut leaves a live follower to cut
        if s["do"] in ("kill", "shutdown", "powerloss"):
            down.add(s["broker"])
        elif s["do"] == "restart":
            down.remove(s["broker"])
        assert len(down) <= 2
    assert not down
    # Without the new kinds a seed draws exactly the schedule it drew before they existed.
    assert schedule(2, 30, 3, 3) == schedule(2, 30, 3, 3, (), False)


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--partitions", "--links", "follower-follower"],
            "--links follower-follower: the model has no link between two followers (a follower talks only to "
            "its leader and the controller); the links the model has are leader-controller, leader-follower, "
            "follower-controller",
        ),
        (["--partitions", "--links", "leader-client"], "--links leader-client: the model's producers always reach"),
        (["--links", "leader-controller"], "--links names the links --partitions cuts; give --partitions too"),
        (
            ["--partitions", "--rf", "1", "--minisr", "1", "--links", "leader-follower"],
            "--links leader-follower and follower-controller need a follower: --rf 1 has none",
        ),
    ],
)
def test_a_link_the_model_lacks_is_refused_in_one_line_before_any_process(args, message, capsys, tmp_path):
    from kafkamc.cli.main import main

    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as e:
        main(["conform", *args, "--out", str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kafkamc: error: {message}") and err.count("\n") == 1
    assert not out.exists()  # refused before the run's folder, let alone a process


def test_a_power_loss_is_validated_as_the_models_hard_crash():
    """A kill that names what the log held and what the cut kept is BrokerCrash(b, keep): the
    states whose log was not that long drop out, and a keep below what the process recovered at
    its start (Broker.flushed) is no model step."""
    cfg = validate.model_config(3, 3, 2, False)
    v = validate.Validator(cfg, (1, 2, 3))
    v.foresee([])
    s0 = v.frontier[0].state
    events = [{"kind": "send", "value": "r1", "t": 1.0}, {"kind": "ack", "value": "r1", "offset": 0, "t": 2.0}]
    for e in events:
        assert v.observe(e) is None
    assert v.observe({"kind": "kill", "broker": 2, "keep": 0, "end": 1, "flushed": 0, "t": 3.0}) is None
    assert v.frontier and all(i.state.broker(2).log == () and not i.state.broker(2).alive for i in v.frontier)
    # No state had broker 3 holding two records: nothing is consistent with that power loss.
    w = validate.Validator(cfg, (1, 2, 3))
    assert w.observe({"kind": "kill", "broker": 3, "keep": 0, "end": 2, "flushed": 0, "t": 1.0}) is not None
    assert controller_view(s0, cfg.brokers).leader == 1


def test_a_dead_broker_after_a_power_loss_is_read_as_its_restart_will_read_it():
    f = faults.Faults()
    logs = {1: [[0, "r1"]], 2: [], 3: [[0, "r1"]]}
    f.lost.add(2)
    ckpts, epochs = {1: 1, 2: 1, 3: 1}, {1: [[0, 0]], 2: [[0, 0]], 3: [[0, 0]]}
    f.seen(logs, ckpts, epochs, up=[1, 3])
    assert (ckpts[2], epochs[2]) == (0, [])  # capped at the log end, the cache truncated to it
    assert (ckpts[1], epochs[1]) == (1, [[0, 0]])
    f.seen({1: [[0, "r1"]], 2: [], 3: [[0, "r1"]]}, {}, {}, up=[1, 2, 3])  # restarted: it recovered 0
    assert f.floor[2] == 0 and 2 not in f.lost


def test_the_counterpart_of_each_fault_is_named():
    events = [
        {"kind": "kill", "broker": 2, "keep": 1, "end": 3, "flushed": 0, "t": 1.0},
        {"kind": "partition", "a": 1, "b": 0, "link": "leader-controller", "t": 2.0},
        {"kind": "heal", "a": 1, "b": 0, "link": "leader-controller", "t": 8.0},
        {"kind": "partition", "a": 3, "b": 1, "link": "leader-follower", "t": 9.0},
        {"kind": "heal", "a": 3, "b": 1, "link": "leader-follower", "t": 12.5},
    ]
    assert faults.counterparts(events) == [
        "power loss of broker 2: 3 record(s) written, 1 kept (recovery point 0): BrokerCrash(2, keep=1)",
        f"cut leader-controller (broker 1 and the controller, 6.0 s): {faults.LINKS['leader-controller'][1]}",
        f"cut leader-follower (broker 3 and broker 1, 3.5 s): {faults.LINKS['leader-follower'][1]}",
    ]


def _two_crashes():
    """The default shortest trace of `kafkamc check --rf 3 --minisr 2 --max-records 1
    --max-hard-crashes 2` (HighWatermarkMonotonic, 12 steps), saved by its --trace-out."""
    from kafkamc.traces.trace import load

    return load(str(TWO_CRASHES))


def test_two_crashes_are_replayed_in_an_order_one_session_timeout_fences_them_in():
    t = _two_crashes()
    assert [format_action(a) for a, _s in t.steps[1:]][3:11] == [
        "BrokerCrash(broker=2, keep=0)",
        "ReplicaStall(follower=3)",
        "AlterPartition(leader=1, isr=(1, 2))",
        "HandleAlterPartitionResponse(leader=1)",
        "BrokerCrash(broker=1, keep=0)",
        "BrokerSessionTimeout(broker=1)",
        "BrokerRestart(broker=1)",
        "BrokerSessionTimeout(broker=2)",
    ]
    assert interleave.out_of_order(t.steps) == (9, 1, 4, 2)
    moved = interleave.in_crash_order(t)
    assert not isinstance(moved, str)
    # Broker 2's crash moves after broker 1's: the same path from there on, the same end.
    assert [format_action(a) for a, _s in moved.steps[1:]][3:8] == [
        "ReplicaStall(follower=3)",
        "AlterPartition(leader=1, isr=(1, 2))",
        "HandleAlterPartitionResponse(leader=1)",
        "BrokerCrash(broker=1, keep=0)",
        "BrokerCrash(broker=2, keep=0)",
    ]
    assert [st for _a, st in moved.steps[8:]] == [st for _a, st in t.steps[8:]] and moved.steps[9:] == t.steps[9:]
    assert interleave.out_of_order(moved.steps) is None
    # Broker 1 restarts before broker 2 is fenced: broker 2's crash waits for broker 1's fence.
    assert interleave.crash_waits(moved.steps) == {8: 1}


def test_crashes_that_do_not_commute_are_refused_in_one_line():
    t = _two_crashes()
    steps = list(t.steps)
    # Not a path the moved crash can meet: broker 1's crash at step 8 kept its record.
    a, s = steps[8]
    steps[8] = (lc.BrokerCrash(1, None), s)
    why = interleave.in_crash_order(dataclasses.replace(t, steps=steps))
    assert isinstance(why, str) and "\n" not in why
    assert why.startswith("step 9: BrokerSessionTimeout(broker=1) fences broker 1 before broker 2, which crashed")
    assert why.endswith("the crash at step 4 does not commute with the steps up to step 8")


RECORDED = Path(__file__).parent / "data" / "conform" / "rf3-minisr2-partitions-power-loss-seed601.json"


def crash_keeps_everything(cfg, state, a):
    """A model whose hard crash loses nothing: a power loss keeps the whole log."""
    return lc.broker_crash(cfg, state, lc.BrokerCrash(a.broker, state.broker(a.broker).leo))


def test_a_recorded_run_with_partitions_and_power_losses_is_consistent(tmp_path):
    """`kafkamc conform --partitions --power-loss --faults 30 --seed 601` on Kafka 4.1.1 (one run,
    its observations.json): two power losses that lost records, a leader and a follower cut from
    the controller. The model validates it; a model whose hard crash loses nothing does not, at
    the first cut after a power loss that lost records."""
    from kafkamc.realkafka.conform import load
    from test_conform import mutant

    (tmp_path / "observations.json").write_text(RECORDED.read_text())
    setup, events, _data = load(tmp_path)
    assert (setup.version, setup.links, setup.power_loss) == ("4.1.1", ",".join(LINKS), True)
    losses = [e for e in events if e["kind"] == "kill" and "keep" in e and e["keep"] < e["end"]]
    assert len(losses) == 2
    cfg, replicas = setup.config(), (1, 2, 3)
    v = validate.validate(cfg, replicas, events)
    assert v.discrepancy is None and v.too_large is None and v.events == len(events)
    broken = validate.validate(cfg, replicas, events, actions=mutant("BrokerCrash", step=crash_keeps_everything))
    assert broken.discrepancy is not None and broken.discrepancy.event["kind"] == "cut"
    first_loss = events.index(losses[0])
    assert first_loss < broken.discrepancy.index
    assert [e["kind"] for e in events[first_loss : broken.discrepancy.index]].count("cut") == 0
