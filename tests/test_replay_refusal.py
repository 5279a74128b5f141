"""Which Kafka release a saved trace may be replayed on (realkafka/replay.py refusal): the rules of
that release (spec/protocol.py as_of), ELR aside, and a rule only some steps exercise aside when the
trace has none of them. Needs no Kafka: the refusal comes before any process starts."""

from __future__ import annotations

from helpers import run_kafkamc
from kafkamc.realkafka.replay import refusal
from kafkamc.realkafka.scenario import zombie_leader
from kafkamc.traces.trace import load


def test_a_trace_without_a_reassignment_replays_on_4_1_1_and_4_4_0():
    t = zombie_leader()  # the newest preset's rules: 4.3.0's, whose one difference from 4.1.0's is a reassignment's
    assert t.config.protocol.era() == "4.3.0"
    assert refusal(t, "4.4.0") is None and refusal(t, "4.1.1") is None


def test_a_completed_reassignment_replays_only_on_the_release_whose_rule_it_has(tmp_path):
    out = tmp_path / "moved.json"
    p = run_kafkamc(
        *("check", "--rf", "2", "--minisr", "1", "--brokers", "3", "--max-reassignments", "1"),
        *("--max-records", "0", "--max-hard-crashes", "0", "--reach", "ReassignmentCompleted", "--quiet"),
        *("--trace-out", str(out)),
    )
    assert p.returncode == 0, p.stderr
    t = load(out)
    assert refusal(t, "4.4.0") is None
    assert refusal(t, "4.1.1") == (
        "the trace's protocol is 4.3.0, not Kafka 4.1.1's (4.1.0): rules ['reassignment_completion']"
    )
