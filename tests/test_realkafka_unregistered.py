"""Finding 2 on real brokers (marked kafka): a fetch with broker epoch -1 from a restarted
broker's new process, not registered yet, makes the leader ask for the ISR [1, 2, 3]; the request
is held in a cut link to the controller while that process loses the record and a third process
registers with an empty log; the request lands and an empty broker joins the ISR, is elected, and
the acknowledged write is gone (realkafka/unregistered.py has the schedule and Kafka's methods)."""

from __future__ import annotations

import pytest
from helpers import skip_without_namespaces
from kafkamc.realkafka.unregistered import reproduce
from test_realkafka_partitions import _ours
from test_realkafka_replay import _jvms_of

pytestmark = pytest.mark.kafka


@pytest.fixture(autouse=True)
def _namespaces():
    skip_without_namespaces()


@pytest.mark.parametrize("version", ["4.1.1", "4.4.0"])
def test_an_empty_broker_joins_the_isr_on_a_delayed_expansion_and_the_write_is_lost(tmp_path, version):
    r = reproduce(version, tmp_path, lambda _line: None)
    # r1 acknowledged by leader 1 over ISR [1, 2]; the delayed request put broker 3 in the ISR
    # with an empty log; elected, it leads without r1, and r2 takes r1's offset.
    assert r.acked == {"r1": 0, "r2": 0}, r.lines
    assert (r.expanded, r.log3_then, r.leader_after, r.read) == ([1, 2, 3], [], 3, []), r.lines
    assert r.lost
    # The second process fetched while its registration was refused and never registered; the
    # third was refused too, then registered once the first incarnation's session expired.
    _first, second, third = (tmp_path / "logs" / "broker-3.log").read_text().split("==== start ")[1:]
    assert "DUPLICATE_BROKER_REGISTRATION" in second and "Added fetcher to broker 1" in second
    assert "Successfully registered broker 3" not in second
    assert "DUPLICATE_BROKER_REGISTRATION" in third and "Successfully registered broker 3" in third
    assert _jvms_of(tmp_path) == [] and _ours() == []
