"""Trace validation (realkafka/validate.py) on a recorded real run, and its parts.

tests/data/conform/rf3-minisr2-seed2.json is what `kafkamc conform --rf 3 --minisr 2 --seed 2
--faults 30` observed on Kafka 4.1.1 (one run; the file is its observations.json, the
controller's records read from its metadata.txt): 212 observations, 46 cuts. The model
validates it; three mutants of the model do not, each at the observation where the real
cluster did what the mutant cannot. Two of the mutants are the model
as it was before trace validation found its deviations (a crashed follower could not be dropped
from the ISR by the leader's lag check; a follower's controlled shutdown always went straight
to SHUTDOWN_NOW), the third breaks a step on purpose (a follower's fetch ignores the leader's HW).
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import load_recorded
from kafkamc.cli.main import cli
from kafkamc.realkafka import validate
from kafkamc.realkafka.conform import Setup, promises
from kafkamc.realkafka.metadata_log import batches
from kafkamc.realkafka.observe import batch_view, controller_view
from kafkamc.realkafka.schedule import schedule
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec import controlled_shutdown as cs
from kafkamc.spec import elect_leaders as el
from kafkamc.spec import fetch as fe
from kafkamc.spec import produce as pr
from kafkamc.spec.next import NEXT
from kafkamc.spec.state import initial_state

RUN = Path(__file__).parent / "data" / "conform" / "rf3-minisr2-seed2.json"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    setup, events, _data = load_recorded(folder, RUN)
    return folder, setup, events


def mutant(name: str, **changes) -> tuple:
    return tuple(dataclasses.replace(a, **changes) if a.name == name else a for a in NEXT)


def alive_only_stall(cfg, c, br, u, b):
    return fe.stall_candidates(cfg, c, br, u, b) if br.alive else ()


def follower_ignores_hw(cfg, state, a):
    out = fe.fetch(cfg, state, a)
    if out is None:
        return None
    f, before = out.broker(a.follower), state.broker(a.follower)
    return out.with_broker(a.follower, dataclasses.replace(f, hw=min(before.hw, f.leo)))


def shutdown_now_only(cfg, state, a):
    out = cs.controlled_shutdown(cfg, state, a)
    return out[0] if isinstance(out, list) else out


def test_the_model_validates_the_recorded_run(recorded):
    _folder, setup, events = recorded
    v = validate.validate(setup.config(), (1, 2, 3), events)
    assert v.discrepancy is None and v.too_large is None
    # 9 controller records are on the way to the next (a fence's partition change before the fence)
    assert (v.events, v.cuts, v.batches, v.two_step, v.on_the_way) == (212, 46, 67, 0, 9)
    assert v.peak == 2984  # the most model states consistent with the observations at once
    last_cut = [e for e in events if e["kind"] == "cut"][-1]
    assert last_cut["logs"]["1"][-1] == [7, "r27"]  # the last record appended, in leader epoch 7
    assert {i.values[-1] for i in v.frontier} == {"r27"}


@pytest.mark.parametrize(
    "name,actions,index,reason",
    [
        pytest.param(
            "a crashed follower never stalls",
            mutant("ReplicaStall", candidates=alive_only_stall),
            134,
            "no model step leads to the controller's leader 1 epoch 6 partition epoch 22 replicas [1, 2, 3] "
            "ISR [1, 3] ELR [] unfenced [1, 2, 3]",
            marks=pytest.mark.slow,  # 134 observations in: about 10 s
        ),
        (
            "a follower's fetch ignores the HW",
            mutant("Fetch", step=follower_ignores_hw),
            8,
            "no consistent state has the logs 1:[r1@e0]; 2:[r1@e0]; 3:[r1@e0], HW checkpoints {'1': 1, '2': 1, '3': 1}",
        ),
        pytest.param(
            "a follower's controlled shutdown is always SHUTDOWN_NOW",
            mutant("ControlledShutdown", step=shutdown_now_only),
            184,
            "no model step leads to the controller's leader 1 epoch 6 partition epoch 34 replicas [1, 2, 3] "
            "ISR [1, 3] ELR [] unfenced [1, 2, 3] shutting [2]",
            marks=pytest.mark.slow,  # 184 observations in: about 10 s
        ),
    ],
)
def test_a_mutant_fails_where_the_cluster_did_what_it_cannot(recorded, name, actions, index, reason):
    _folder, setup, events = recorded
    v = validate.validate(setup.config(), (1, 2, 3), events, actions=actions)
    assert v.discrepancy is not None, name
    assert (v.discrepancy.index, v.discrepancy.reason) == (index, reason)
    assert v.discrepancy.before  # the states consistent just before it are kept for the report


def test_the_report_of_a_saved_run_and_its_exit_status(recorded):
    folder, _setup, _events = recorded
    result = CliRunner().invoke(cli, ["conform", "--validate", str(folder)], standalone_mode=False)
    assert result.exit_code == 0 and result.return_value == 0
    assert result.output.splitlines() == [
        "Kafka 4.1.1, 3 brokers, RF 3, min.insync.replicas=2, unclean.leader.election.enable=false, ELR on: "
        f"212 observations (46 cuts, 67 controller records), validated 212 in {_seconds(folder)} s, "
        "at most 2984 model states at once, 9 taken as records on the way to the next",
        "schedule of seed 2: the same seed gives the same commands, not Kafka's timing",
        "consistent: every observation is one the model can make",
    ]


def _seconds(folder: Path) -> str:
    return (folder / "report.txt").read_text().split(" validated 212 in ")[1].split(" s,")[0]


def test_a_discrepancy_is_reported_with_the_states_before_it(recorded, tmp_path):
    data = json.loads(RUN.read_text())
    # Change what the controller wrote at its second batch: a leader epoch no step can reach.
    index = [i for i, e in enumerate(data["events"]) if e["kind"] == "controller"][1]
    data["events"][index]["view"]["epoch"] = 9
    (tmp_path / "observations.json").write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["conform", "--validate", str(tmp_path)], standalone_mode=False)
    assert result.return_value == 1
    lines = result.output.splitlines()
    assert lines[2].startswith(f"DISCREPANCY at observation {index}: controller: leader")
    assert " epoch 9 partition epoch " in lines[2]
    assert lines[4] == "  consistent model states just before it (up to 5):"
    assert (tmp_path / "report.txt").read_text() == result.output


def test_cut_filters_logs_checkpoints_and_processes():
    cfg = validate.model_config(3, 3, 2, False)
    v = validate.Validator(cfg, (1, 2, 3))
    empty = {str(b): [] for b in (1, 2, 3)}
    cut = {"kind": "cut", "logs": empty, "checkpoints": {"1": 0, "2": 0, "3": 0}, "up": [1, 2, 3]}
    assert v.observe(cut) is None
    assert v.observe({**cut, "up": [1, 2]}) == "no consistent state has " + validate.describe_event(
        {**cut, "up": [1, 2]}
    )
    v = validate.Validator(cfg, (1, 2, 3))
    assert v.observe({"kind": "send", "value": "r1"}) is None
    assert v.observe({"kind": "ack", "value": "r1", "offset": 0}) is None
    assert all(i.values == ("r1",) and i.state.ghost.acked == 1 for i in v.frontier)
    assert v.observe({"kind": "ack", "value": "r1", "offset": 1}) is not None


def test_metadata_log_gives_a_view_per_record():
    def line(offset, ms, payload):
        return f"| offset: {offset} CreateTime: {ms} keySize: -1 payload: {json.dumps(payload)}"

    def header(offset, ms):
        return f"baseOffset: {offset} lastOffset: {offset} count: 1 CreateTime: {ms} size: 1"

    reg = {"type": "REGISTER_BROKER_RECORD", "data": {"brokerId": 1, "brokerEpoch": 5, "fenced": False}}
    topic = {"type": "TOPIC_RECORD", "data": {"name": "t", "topicId": "X"}}
    part = {
        "type": "PARTITION_RECORD",
        "data": {
            "partitionId": 0,
            "topicId": "X",
            "replicas": [1],
            "isr": [1],
            "leader": 1,
            "leaderEpoch": 0,
            "partitionEpoch": 0,
        },
    }
    change = {"type": "PARTITION_CHANGE_RECORD", "data": {"partitionId": 0, "topicId": "X", "isr": [], "leader": -1}}
    fence = {"type": "BROKER_REGISTRATION_CHANGE_RECORD", "data": {"brokerId": 1, "brokerEpoch": 5, "fenced": 1}}
    dump = "\n".join(
        [header(0, 100), line(0, 100, reg), header(1, 200), line(1, 200, topic), line(2, 200, part)]
        + [header(3, 300), line(3, 300, change), header(4, 300), line(4, 300, fence)]  # one event, two records
    )
    got = [
        (b.t, b.partition and (b.partition["leader"], b.partition["leaderEpoch"]), b.brokers)
        for b in batches(dump, "t")
    ]
    assert got == [  # one per record that changes what is observed; the topic record changes nothing
        (0.1, None, {1: {"fenced": False, "shutdown": False}}),
        (0.2, (1, 0), {1: {"fenced": False, "shutdown": False}}),
        (0.3, (-1, 1), {1: {"fenced": False, "shutdown": False}}),
        (0.3, (-1, 1), {1: {"fenced": True, "shutdown": False}}),
    ]
    last = batches(dump, "t")[-1]
    view = batch_view(last.partition, last.brokers, (1,))
    assert (view.leader, view.epoch, view.pepoch, view.isr, view.unfenced) == (-1, 1, 1, (), ())


def test_the_abstraction_maps_the_initial_state_onto_a_new_topic():
    view = controller_view(initial_state(3, (1, 2, 3), 3), (1, 2, 3))
    assert (
        view.words() == "leader 1 epoch 0 partition epoch 0 replicas [1, 2, 3] ISR [1, 2, 3] ELR [] unfenced [1, 2, 3]"
    )


def test_a_schedule_is_its_seed():
    assert schedule(2, 30, 3, 3) == schedule(2, 30, 3, 3)
    assert schedule(2, 30, 3, 3) != schedule(3, 30, 3, 3)
    steps = schedule(2, 30, 3, 3)
    assert sum(s["do"] != "produce" for s in steps) >= 30 and steps[-1] == {"do": "produce"}
    assert [s["do"] for s in steps[:6]] == ["elect", "elect", "produce", "produce", "zombie", "zombie"]
    down = set()
    for s in schedule(random.Random(0).randrange(100), 60, 4, 3):  # at most rf - 1 down, all back at the end
        if s["do"] in ("kill", "shutdown"):
            down.add(s["broker"])
        elif s["do"] == "restart":
            down.remove(s["broker"])
        assert len(down) <= 2
    assert not down


def test_promises_report_a_lost_acknowledged_write_and_a_vanished_read():
    acks = [{"value": "r1", "offset": 0}, {"value": "r2", "offset": 1}]
    reads = [(1.0, [(0, "r1"), (1, "r2")]), (2.0, [(0, "r1")])]
    assert promises(Setup(), acks, reads) == [
        "r2 acknowledged at offset 1 is not read there at the end",
        "read at 1.000 saw r2@1; the read at 2.000 does not",
    ]


def test_an_acknowledgement_after_the_last_read_is_not_checked_against_it():
    # seed 3 interrupted in CI: r3's answer came in the producer's flush, after the last read
    acks = [{"value": "r1", "offset": 0, "t": 0.5}, {"value": "r3", "offset": 2, "t": 2.5}]
    reads = [(2.0, [(0, "r1")])]
    assert promises(Setup(), acks, reads) == []
    assert promises(Setup(), [{**acks[1], "t": 1.5}], reads) == [
        "r3 acknowledged at offset 2 is not read there at the end"
    ]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--minisr", "4"], "--minisr must be between 1 and --rf (got 4)"),
        (["--rf", "3", "--brokers", "2"], "--rf must be 1 to 5 and --brokers between --rf and 5 (got 3, 2)"),
        (["--faults", "0"], "--faults and --runs must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    from kafkamc.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["conform", *args])
    assert e.value.code == 2
    assert message


def test_the_output_folder_is_checked_before_any_process_starts(tmp_path, capsys):
    from kafkamc.cli.main import main

    (tmp_path / "x").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["conform", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert capsys.readouterr().err == f"kafkamc: error: --out {tmp_path} must be a new or empty folder\n"
    with pytest.raises(SystemExit):
        main(["conform", "--validate", str(tmp_path)])
    assert capsys.readouterr().err == f"kafkamc: error: {tmp_path} holds no observations.json\n"


def model_run(seed: int, steps: int = 30) -> list[dict]:
    """The observations a run would make if Kafka were the model: a random walk of the model,
    written as commands, controller batches, answers and cuts."""
    rng = random.Random(seed)
    cfg = validate.model_config(3, 3, 2, False)
    model = validate.Validator(cfg, (1, 2, 3)).model
    state = validate.normal(initial_state(3, (1, 2, 3), 3))
    events: list[dict] = [{"kind": "controller", "view": controller_view(state, cfg.brokers)}]
    clock = iter(range(1, 10**6))  # a second between observations: none is on the way to another
    commanded = (el.ElectLeaders, cs.ControlledShutdown, lc.BrokerRestart)
    for _ in range(steps):
        options = [a for a in model.candidates(state) if isinstance(a, validate.SILENT + commanded)]
        options += [lc.BrokerCrash(b, state.broker(b).leo) for b in cfg.brokers if state.broker(b).alive]
        k = state.budget.of("records") + 1
        options += [pr.Produce(b, k) for b in cfg.brokers if state.leads(b)] * 3
        action = rng.choice(options)
        after = model.unobserved_step(state, action)
        if not after:
            continue
        nxt = validate.normal(rng.choice(after))
        if isinstance(action, pr.Produce):
            events.append({"kind": "send", "value": f"r{k}"})
            if nxt == state:
                events.append({"kind": "refused", "value": f"r{k}"})
        elif isinstance(action, commanded):
            kind = {el.ElectLeaders: "elect", cs.ControlledShutdown: "shutdown", lc.BrokerRestart: "restart"}
            events.append(
                {"kind": kind[type(action)], "args": [] if kind[type(action)] == "elect" else [action.broker]}
            )
        if isinstance(action, lc.BrokerCrash):
            events.append({"kind": "kill", "broker": action.broker})
        view = controller_view(nxt, cfg.brokers)
        if view != controller_view(state, cfg.brokers):
            events.append({"kind": "controller", "view": view})
        for r in range(1, nxt.budget.of("records") + 1):
            if nxt.ghost.acked >> (r - 1) & 1 and not state.ghost.acked >> (r - 1) & 1:
                offset = next(i for br in nxt.brokers for i, (_e, x) in enumerate(br.log) if x == r)
                events.append({"kind": "ack", "value": f"r{r}", "offset": offset})
        state = nxt
        if rng.random() < 0.8:  # a real run cuts after every command
            events.append(
                {
                    "kind": "cut",
                    "logs": {str(b): [[e - 1, f"r{x}"] for e, x in state.broker(b).log] for b in cfg.brokers},
                    "checkpoints": {str(b): state.broker(b).checkpoint_hw for b in cfg.brokers},
                    "epochs": {str(b): [[e - 1, o] for e, o in state.broker(b).cache] for b in cfg.brokers},
                    "up": [b for b in cfg.brokers if state.broker(b).alive],
                }
            )
    return [e | {"t": float(next(clock))} for e in events]


def test_every_run_of_the_model_itself_is_consistent():
    """The validator's own soundness: a walk of the model observed as a run is never a
    discrepancy. A walk that fences two live brokers at once keeps too many states between two
    cuts for a fast test (seed 3 of these): it stops at the limit, which is no discrepancy."""
    cfg = validate.model_config(3, 3, 2, False)
    done = []
    for seed in range(8):
        events = model_run(seed)
        v = validate.validate(cfg, (1, 2, 3), events, limit=20_000)
        assert v.discrepancy is None, (seed, v.discrepancy.index, v.discrepancy.reason)
        done.append(v.too_large is None and v.events == len(events))
    assert done == [True, True, True, False, True, True, True, True]


def torn_cut(events: list[dict], ahead: int = 0) -> list[dict] | None:
    """The events with one more cut after the first cut where a broker lacks another broker's
    next record of a newer epoch: in it that broker's epoch file already has that epoch, at its
    log end plus `ahead`, as when Kafka is paused inside UnifiedLog.append."""
    for k, e in enumerate(events):
        if e["kind"] != "cut":
            continue
        for b, log in e["logs"].items():
            for other in e["logs"].values():
                newest = max((x for x, _o in e["epochs"][b]), default=-1)
                if other[: len(log)] == log and len(other) > len(log) and other[len(log)][0] > newest:
                    epochs = e["epochs"] | {b: e["epochs"][b] + [[other[len(log)][0], len(log) + ahead]]}
                    return events[: k + 1] + [e | {"epochs": epochs, "t": e["t"] + 0.5}] + events[k + 1 :]
    return None


def test_a_cut_inside_a_followers_append_is_consistent_and_only_at_its_log_end():
    """Kafka writes a batch's epoch into the leader-epoch file before the batch into the segment
    (observe.cache_agrees): a cut between the two is no discrepancy. An entry one offset past the
    log end is one, at the torn cut itself."""
    cfg = validate.model_config(3, 3, 2, False)
    torn, wrong = torn_cut(model_run(0)), torn_cut(model_run(0), ahead=1)
    assert torn is not None and wrong is not None
    v = validate.validate(cfg, (1, 2, 3), torn, limit=20_000)
    assert v.discrepancy is None and v.events == len(torn)
    w = validate.validate(cfg, (1, 2, 3), wrong, limit=20_000)
    index = next(k for k, e in enumerate(wrong) if e["t"] % 1)
    assert w.discrepancy is not None and w.discrepancy.index == index
