"""Trace validation of a recorded run in which a restarted broker rejoined the ISR before it
registered (issue 41), and a mutant that forbids what it did.

tests/data/conform/rf3-minisr1-unclean-seed12.json is what `kafkamc conform --kafka-version 4.4.0
--seed 12 --minisr 1 --unclean --faults 8` observed, with the restart at once and
broker.session.timeout.ms 10 s (one run; the file is its observations.json). Broker 3 was killed
and restarted at once. Its new process fetched before it registered (its BrokerRegistration was
refused with DUPLICATE_BROKER_REGISTRATION every half second, the old session still valid), so
with broker epoch -1 (BrokerLifecycleManager.brokerEpoch until registered); leader 1 first shrank
the ISR to [1, 2] on its lag clock (observation 4), then, on those fetches, expanded it again to
[1, 2, 3] (observation 11, partition epoch 2: the leader's AlterPartition named broker 3 with -1,
which Partition.isBrokerEpochIsrEligible and ReplicationControlManager.ineligibleReplicasForIsr
both let through), and the cut at observation 13 shows broker 3's log holding r1 and r2. Only
then, after its session expired, the registration went through, before the periodic fence: the
cleanup of the previous incarnation (ISR [1, 2], observation 19; ClusterControlManager.
registerBroker), the RegisterBrokerRecord leaving it fenced (20), the unfence on a heartbeat (21).
The run's metadata log (not kept here) says so: `restarts: 1 registered before the previous
incarnation's fence, 2 after it` in its report.

The model validates it under incarnations=kraft_steps (validate.model_config). The run is not
consistent with a model whose new process fetches only once registered, nor with the model as
it was before issue 41 (incarnations=fenced_first): both fail at observation 11, the expansion
no step of theirs can make.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import load_recorded
from kafkamc.realkafka import validate
from kafkamc.realkafka.metadata_log import reregistrations
from kafkamc.spec import fetch as fe
from kafkamc.spec.config import Config
from kafkamc.spec.next import NEXT

RUN = Path(__file__).parent / "data" / "conform" / "rf3-minisr1-unclean-seed12.json"
EXPANSION = (
    "no model step leads to the controller's leader 1 epoch 0 partition epoch 2 replicas [1, 2, 3] "
    "ISR [1, 2, 3] ELR [] unfenced [1, 2, 3]"
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    setup, events, _data = load_recorded(tmp_path_factory.mktemp("run"), RUN)
    return setup, events


def fetch_once_registered(cfg, c, br, u, b):
    """The mutant: a process that has not registered (broker epoch -1, the model's 0) fetches nothing."""
    return () if br.bepoch == 0 else fe.fetch_candidates(cfg, c, br, u, b)


def truncate_once_registered(cfg, c, br, u, b):
    return () if br.bepoch == 0 else fe.offsets_candidates(cfg, c, br, u, b)


NO_PRE_REGISTRATION_FETCH = tuple(
    dataclasses.replace(a, candidates=fetch_once_registered)
    if a.name == "Fetch"
    else dataclasses.replace(a, candidates=truncate_once_registered)
    if a.name == "OffsetsForLeaderEpoch"
    else a
    for a in NEXT
)


def test_the_model_validates_a_pre_registration_expansion(recorded):
    setup, events = recorded
    assert setup.config().rule("incarnations") == "kraft_steps"
    v = validate.validate(setup.config(), (1, 2, 3), events)
    assert v.discrepancy is None and v.too_large is None
    assert (v.events, v.cuts, v.batches, v.two_step, v.on_the_way) == (65, 17, 19, 0, 3)
    # What makes the run this test's: broker 3 killed (1), restarted (2), the ISR shrunk without it
    # (4), broker 3's process up and its log empty at the cut (9), the ISR [1, 2, 3] again (11)
    # while the controller still holds its old registration (unfenced, never fenced before), its
    # log caught up at the next cut (13), then the cleanup, the registration and the unfence.
    assert [validate.describe_event(events[i]) for i in (1, 2)] == ["kill 3", "restart 3"]
    assert events[4]["view"].isr == (1, 2) and events[11]["view"].isr == (1, 2, 3)
    assert events[9]["up"] == [1, 2, 3] and events[9]["logs"]["3"] == []
    assert events[13]["logs"]["3"] == [[0, "r1"], [0, "r2"]]
    assert all(events[i]["view"].unfenced == (1, 2, 3) for i in (0, 4, 11))
    assert [(events[i]["view"].isr, events[i]["view"].unfenced) for i in (19, 20, 21)] == [
        ((1, 2), (1, 2, 3)),
        ((1, 2), (1, 2)),
        ((1, 2), (1, 2, 3)),
    ]


def test_a_model_without_pre_registration_fetches_fails_at_the_expansion(recorded):
    setup, events = recorded
    v = validate.validate(setup.config(), (1, 2, 3), events, actions=NO_PRE_REGISTRATION_FETCH)
    assert v.discrepancy is not None
    assert (v.discrepancy.index, v.discrepancy.reason) == (11, EXPANSION)
    assert v.discrepancy.before


def test_the_model_before_issue_41_fails_at_the_expansion(recorded):
    setup, events = recorded
    cfg: Config = setup.config()
    fenced_first = dataclasses.replace(cfg, protocol=cfg.protocol.with_rules(incarnations="fenced_first"))
    v = validate.validate(fenced_first, (1, 2, 3), events)
    assert v.discrepancy is not None
    assert (v.discrepancy.index, v.discrepancy.reason) == (11, EXPANSION)


def test_reregistrations_tell_a_registration_before_the_fence_from_one_after():
    def line(offset, ms, payload):
        return f"| offset: {offset} CreateTime: {ms} keySize: -1 payload: {json.dumps(payload)}"

    def reg(b, epoch, fenced):
        return {"type": "REGISTER_BROKER_RECORD", "data": {"brokerId": b, "brokerEpoch": epoch, "fenced": fenced}}

    fence = {"type": "BROKER_REGISTRATION_CHANGE_RECORD", "data": {"brokerId": 3, "brokerEpoch": 7, "fenced": 1}}
    unfence = {"type": "BROKER_REGISTRATION_CHANGE_RECORD", "data": {"brokerId": 3, "brokerEpoch": 5, "fenced": -1}}
    dump = "\n".join(
        line(o, ms, p)
        for o, ms, p in [
            (0, 1000, reg(3, 2, True)),  # the first registration is no re-registration
            (1, 1100, unfence),
            (2, 5000, reg(3, 5, True)),  # the old incarnation still unfenced: before its fence
            (3, 5100, unfence),
            (4, 9000, fence),  # the periodic fence (maybeFenceOneStaleBroker)
            (5, 9500, reg(3, 7, True)),  # after it
        ]
    )
    assert reregistrations(dump) == [(5.0, 3, True), (9.5, 3, False)]
