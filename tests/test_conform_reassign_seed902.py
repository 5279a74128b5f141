"""A reassignment Kafka 4.4.0 completes and 4.1.1 does not (issue 41, seed 902 re-run).

tests/data/conform/rf3-brokers4-reassign-seed902.json is the first 150 observations of what
`kafkamc conform --kafka-version 4.4.0 --brokers 4 --rf 3 --minisr 2 --faults 30 --seed 902`
observed on its re-run (4 brokers, RF 3, min ISR 2, unclean off, ELR on), with the producer's
requests ("attempts") and the leaders' "Shrinking ISR" lines ("shrinks"). A reassignment moves
the partition from [2, 4, 3] to [1, 2, 4] (adding 1, removing 3). The admin election (142) made
broker 3 leader with ISR [3], RECOVERING (147, the controller's "using an unclean election": the
ISR and the ELR of live brokers were empty). Broker 1 caught up from leader 3, whose
AlterPartition proposed ISR [3, 1], and the controller wrote (148, its log: "AlterPartition request
from node 3 for conform-0 completed the ongoing partition reassignment and triggered a leadership
change isr: [3] -> [1], replicaSet: [1, 2, 4, 3] -> [1, 2, 4]") replicas [1, 2, 4], ISR [1],
leader 1 in a new epoch and ELR [3] (3 left an ISR below min ISR: maybePopulateTargetElr takes the
old ISR, replica or not), while 2 and 4 were out of the ISR.

Kafka 4.4.0 (kafka-metadata-4.4.0.jar, PartitionReassignmentReplicas.maybeCompleteReassignment,
read with javap; KAFKA-19975, apache/kafka#21114, in 4.3.0) completes a move once the new ISR (the
proposed one without the removing replicas) holds every adding replica, and asks for every target
replica only when fewer replicas are added than removed. Kafka 4.1.1 (KAFKA-15665, 3.8.0 to 4.2)
asks for every target replica, which was the model's rule in every era: the model had no step to
observation 148. It is now the rule `reassignment_completion` (spec/protocol.py), and a run is
validated with the rules of its own release (validate.model_config).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_recorded
from kafkamc.realkafka import validate
from kafkamc.spec import controller as ctl
from kafkamc.spec.state import Broker, Controller, State, bit, members, replace

RUN = Path(__file__).parent / "data" / "conform" / "rf3-brokers4-reassign-seed902.json"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return load_recorded(tmp_path_factory.mktemp("run"), RUN)


def moving() -> tuple[State, Controller]:
    """Observation 147 (leader 3, ISR [3], replicas [1, 2, 4, 3], adding 1, removing 3, broker 4
    fenced) and leader 3's proposal, ISR [1, 3], now recovered."""
    before = Controller(
        leader=3,
        epoch=7,
        pepoch=17,
        isr=bit(3),
        registered=bit(1) | bit(2) | bit(3),
        bepochs=(1, 1, 1, 1),
        recovering=True,
        replicas=(1, 2, 4, 3),
        adding=bit(1),
        removing=bit(3),
    )
    return State(before, tuple(Broker() for _ in range(4))), replace(before, isr=bit(1) | bit(3), recovering=False)


def test_the_recorded_file_is_a_prefix_of_the_run(recorded):
    setup, events, _data = recorded
    assert (setup.version, setup.brokers, setup.rf, setup.minisr, setup.unclean, setup.elr) == (
        "4.4.0",
        4,
        3,
        2,
        False,
        True,
    )
    assert json.loads(RUN.read_text())["seed"] == 902 and len(events) == 150
    moving_view, done = events[147]["view"], events[148]["view"]
    assert (moving_view.leader, moving_view.replicas, moving_view.isr) == (3, (1, 2, 4, 3), (3,))
    assert (done.leader, done.replicas, done.isr, done.elr) == (1, (1, 2, 4), (1,), (3,))


def test_kafka_4_4_completes_the_move_4_1_1_keeps_open():
    state, proposed = moving()
    kept = ctl.partition_change(validate.model_config(3, 4, 2, False, version="4.1.1"), state, proposed).controller
    assert kept.replicas == (1, 2, 4, 3) and kept.leader == 3  # 2 and 4 are out of the ISR
    done = ctl.partition_change(validate.model_config(3, 4, 2, False, version="4.4.0"), state, proposed).controller
    assert (done.replicas, members(done.isr), done.leader, members(done.elr)) == ((1, 2, 4), (1,), 1, (3,))
    assert (done.adding, done.removing, done.epoch, done.pepoch) == (0, 0, 8, 18)


@pytest.mark.slow  # validates 150 observations: about 30 s
def test_the_run_validates(recorded):
    setup, events, data = recorded
    v = validate.validate(setup.config(), (1, 2, 3), events, sent=data["attempts"], shrinks=data["shrinks"])
    assert v.discrepancy is None and v.too_large is None
    assert v.events == 150
