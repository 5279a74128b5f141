"""The story of a counterexample (traces/story.py) on real counterexamples, and the terminal
rendering around it (traces/render.py): the ghost's own line, and no word ever cut."""

from __future__ import annotations

import re

import pytest
from kafkamc.jobs.run import run_check
from kafkamc.spec.alter_partition import AlterPartition
from kafkamc.spec.broker_lifecycle import BrokerCrash, BrokerRestart, BrokerSessionTimeout, CheckpointHighWatermarks
from kafkamc.spec.config import Config
from kafkamc.spec.elect_leaders import ElectLeaders
from kafkamc.spec.fetch import Fetch, OffsetsForLeaderEpoch
from kafkamc.spec.metadata import MetadataUpdate
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import NEWEST, preset
from kafkamc.spec.state import initial_state
from kafkamc.traces import render
from kafkamc.traces.story import _ending, step_events, story
from rich.console import Console

HARD_CRASH_0_11 = Config(rf=2, minisr=1, protocol=preset("0.11"))
LAST_KNOWN_LEADER = Config(rf=3, minisr=2, max_records=1, max_hard_crashes=2)
ACKS_1 = Config(acks="1", max_records=1)


@pytest.fixture(scope="module")
def traces():
    """Shortest counterexamples, found once (one process: the same trace every run)."""
    return {
        name: run_check(cfg).trace
        for name, cfg in [("0.11", HARD_CRASH_0_11), ("lkl", LAST_KNOWN_LEADER), ("acks1", ACKS_1)]
    }


def test_story_of_a_hard_crash_under_0_11(traces):
    assert story(traces["0.11"]) == [
        "What happened (rf=2, min.insync.replicas=1, acks=all, unclean election off, protocol 0.11.0):",
        "step 3: leader 1 shrank the ISR to {1}: follower 2 had stopped fetching at step 2 "
        "(replica.lag.time.max.ms); leader 1's HW reached 1 over its ISR {1}: r1 at offset 0 committed and "
        "acknowledged to the producer (acks=all); only broker 1 has it",
        "step 4: broker 1 hard-crashed (kill -9, power loss) and lost the unflushed tail of its log: r1 at "
        "offset 0 (epoch 1, committed, acknowledged)",
        "step 5: broker 1's session timed out (broker.session.timeout.ms); the controller fenced it and left the "
        "partition offline: no eligible leader (ISR {1})",
        "step 6: broker 1 restarted (broker epoch 2) with an empty log; the controller elected it leader of "
        "epoch 3 from the ISR {1} (a clean election); it lacks r1 (committed, acknowledged)",
        "at step 6: leader 1 (epoch 3) has an empty log and HW 0, lacking r1 (committed, acknowledged); "
        "consumers now read HW 0 from it after seeing HW 1",
        "promise broken: the HW consumers can read from the leader never goes backwards (HighWatermarkMonotonic)",
    ]


def test_story_of_a_last_known_leader_election(traces):
    assert story(traces["lkl"]) == [
        f"What happened (rf=3, min.insync.replicas=2, acks=all, unclean election off, protocol {NEWEST}):",
        "step 4: broker 2 hard-crashed (kill -9, power loss) and lost the unflushed tail of its log: r1 at "
        "offset 0 (epoch 1)",
        "step 6: leader 1 shrank the ISR to {1,2}: follower 3 had stopped fetching at step 5 (replica.lag.time.max.ms)",
        "step 7: leader 1's HW reached 1 over its ISR {1,2}, going by a fetch at offset 1 from broker 2 before it "
        "crashed: r1 at offset 0 committed and acknowledged to the producer (acks=all); only broker 1 has it",
        "step 8: broker 1 hard-crashed (kill -9, power loss) and lost the unflushed tail of its log: r1 at "
        "offset 0 (epoch 1, committed, acknowledged)",
        "step 9: broker 1's session timed out (broker.session.timeout.ms); the controller fenced it and elected "
        "broker 2 leader of epoch 2 from the ISR {2} (a clean election), though broker 2 is down (its session has "
        "not timed out yet); broker 2 lacks r1 (committed, acknowledged)",
        "step 10: broker 1 restarted (broker epoch 2) with an empty log; the controller dropped it from the ELR "
        "after its unclean shutdown (KAFKA-15586)",
        "step 11: broker 2's session timed out (broker.session.timeout.ms); the controller fenced it and left the "
        "partition offline: no eligible leader (ISR {}, ELR {2})",
        "step 12: broker 2 restarted (broker epoch 2) with an empty log; the controller elected it leader of "
        "epoch 4 as the last known leader (KIP-966: ISR and ELR were empty); the partition is RECOVERING; it "
        "lacks r1 (committed, acknowledged)",
        "at step 12: leader 2 (epoch 4) has an empty log and HW 0, lacking r1 (committed, acknowledged); "
        "consumers now read HW 0 from it after seeing HW 1",
        "promise broken: the HW consumers can read from the leader never goes backwards (HighWatermarkMonotonic)",
    ]


def test_story_of_an_acks_1_loss(traces):
    assert story(traces["acks1"]) == [
        f"What happened (rf=3, min.insync.replicas=2, acks=1, unclean election off, protocol {NEWEST}):",
        "step 1: leader 1 acknowledged r1 at offset 0 to the producer as soon as it appended, before any "
        "follower fetched (acks=1); only broker 1 has it",
        "step 2: broker 1 hard-crashed (kill -9, power loss) and lost the unflushed tail of its log: r1 at "
        "offset 0 (epoch 1, acknowledged)",
        "step 3: broker 1's session timed out (broker.session.timeout.ms); the controller fenced it and elected "
        "broker 2 leader of epoch 2 from the ISR {2,3} (a clean election); broker 2 lacks r1 (acknowledged)",
        "at step 4: leader 2 (epoch 2) has an empty log and HW 0, lacking r1 (acknowledged)",
        "promise broken: a write acknowledged to a producer is in the current leader's log (AckedWriteDurability)",
    ]


def test_story_names_an_unclean_election_and_a_truncation_to_the_hw():
    unclean = run_check(Config(rf=2, minisr=1, unclean=True, max_records=1, max_hard_crashes=0, max_clean_shutdowns=1))
    told = "\n".join(story(unclean.trace))
    assert "elected broker 2 leader of epoch 2 in an unclean election (unclean.leader.election.enable)" in told
    assert "ISR member 2 lacks committed r1" in told
    kip101 = Config(
        rf=2,
        minisr=2,
        max_records=1,
        max_clean_shutdowns=2,
        max_hard_crashes=0,
        max_isr_shrinks=1,
        protocol=preset("newest").with_rules(truncation="hw"),
    )
    told = story(run_check(kip101).trace)
    # The restart's truncation says the broker restarted: the controller's part does not repeat it.
    assert (
        "step 6: broker 2 restarted (broker epoch 2), became follower of 1 and truncated its log to its own HW 0 "
        "(the rule before KIP-101), dropping r1 at offset 0 (epoch 1, committed, acknowledged)"
    ) in told
    assert "at step 6: leader 1 (epoch 1) has r1 at offset 0 and HW 1; ELR member 2 lacks committed r1" in told
    assert "protocol newest but truncation=hw" in told[0]


def _walk(cfg: Config, actions: list) -> list:
    """The path the actions take from the initial state (each has one successor here)."""
    model = Model(cfg)
    steps = [(None, model.observe(initial_state(cfg.rf)))]
    for a in actions:
        (state,) = model.step(steps[-1][1], a)
        steps.append((a, state))
    return steps


# Broker 1 appends r1 alone (acks=1) and shuts down; once its session times out broker 2 leads epoch 2
# and appends r2; broker 1 returns.
DIVERGED = [Produce(1, 1), BrokerCrash(1), BrokerSessionTimeout(1), MetadataUpdate(2), Produce(2, 2), BrokerRestart(1)]
SMALL = dict(rf=2, minisr=1, acks="1", max_records=2, max_clean_shutdowns=1, max_hard_crashes=0, max_leader_elections=1)


def test_a_truncation_is_told_with_the_rule_that_made_it():
    cfg = Config(**SMALL)
    # Leader 2 proposes broker 1 once its own metadata shows 1 unfenced again (issue 29).
    again = [Fetch(1, 2), Fetch(1, 2), Fetch(1, 2), MetadataUpdate(2), AlterPartition(2, (1, 2)), ElectLeaders(1)]
    steps = _walk(cfg, [*DIVERGED, *again])
    assert step_events(cfg, steps, 6) == ["broker 1 restarted (broker epoch 2) with r1 at offset 0"]
    assert step_events(cfg, steps, 7) == [
        "broker 1, follower of 2 in epoch 2, truncated its log to offset 0 on a diverging-epoch fetch response "
        "from leader 2, dropping r1 at offset 0 (epoch 1, acknowledged)"
    ]
    assert step_events(cfg, steps, 11) == ["leader 2 expanded the ISR to {1,2} with broker 1"]
    assert step_events(cfg, steps, 12) == [
        "an operator asked for a preferred leader election of broker 1 (ElectLeaders); the controller elected "
        "broker 1 leader of epoch 3 as the preferred replica; broker 1 lacks r1 (acknowledged)"
    ]
    old = Config(**SMALL, protocol=preset("2.7"))
    steps = _walk(old, [*DIVERGED, OffsetsForLeaderEpoch(1, 2)])
    assert step_events(old, steps, 7) == [
        "broker 1, follower of 2 in epoch 2, truncated its log to offset 0 where leader 2 said epoch 1 ends "
        "(OffsetsForLeaderEpoch), dropping r1 at offset 0 (epoch 1, acknowledged)"
    ]


def test_a_crash_is_the_brokers_and_the_session_timeout_the_controllers():
    """The crash changes the broker alone; the fence and the election come with the session timeout."""
    cfg = Config(rf=3, minisr=2, max_records=1, max_clean_shutdowns=1)
    steps = _walk(cfg, [BrokerCrash(1), BrokerSessionTimeout(1), MetadataUpdate(2)])
    assert step_events(cfg, steps, 1) == ["broker 1 shut down cleanly, its log flushed"]
    assert _ending(cfg, steps[1][1], steps[0][1]) == [
        "broker 1, the controller's leader of epoch 1, is down (its session has not timed out yet)"
    ]
    assert step_events(cfg, steps, 2) == [
        "broker 1's session timed out (broker.session.timeout.ms); the controller fenced it and elected broker 2 "
        "leader of epoch 2 from the ISR {2,3} (a clean election); broker 2 has an empty log"
    ]
    assert step_events(cfg, steps, 3) == []


def test_a_hard_crash_tells_the_hw_its_lagging_checkpoint_loses():
    """Broker 1 loses no record, but its HW checkpoint still says 0: that is worth a word; a
    checkpoint step is not, nor a hard crash after a checkpoint that was current."""
    cfg = Config(rf=1, minisr=1, max_records=1)
    steps = _walk(cfg, [Produce(1, 1), BrokerCrash(1, keep=1)])
    assert step_events(cfg, steps, 2) == [
        "broker 1 hard-crashed (kill -9, power loss) with its whole log flushed; its HW checkpoint "
        "(replication-offset-checkpoint) still said 0, behind its HW 1 in memory, so it will restart with HW 0"
    ]
    steps = _walk(cfg, [Produce(1, 1), CheckpointHighWatermarks(1), BrokerCrash(1, keep=1)])
    assert step_events(cfg, steps, 2) == []
    assert step_events(cfg, steps, 3) == ["broker 1 hard-crashed (kill -9, power loss) with its whole log flushed"]
    # The log end, not the checkpoint, caps the HW here: the lost record says it all.
    steps = _walk(cfg, [Produce(1, 1), BrokerCrash(1, keep=0)])
    assert step_events(cfg, steps, 2) == [
        "broker 1 hard-crashed (kill -9, power loss) and lost the unflushed tail of its log: r1 at offset 0 "
        "(epoch 1, committed, acknowledged)"
    ]


def test_a_reachability_witness_gets_one_line():
    run = run_check(LAST_KNOWN_LEADER, reach=("RecoveringElection",))
    assert run.trace.invariant is None
    assert story(run.trace) == [
        "how RecoveringElection was reached (an unclean or last-known-leader election leaves the partition "
        "RECOVERING): at step 8 broker 3 restarted (broker epoch 2) with an empty log; the controller elected it "
        "leader of epoch 4 as the last known leader (KIP-966: ISR and ELR were empty); the partition is RECOVERING"
    ]


# ---------------------------------------------------------------- the rendering


def _shown(trace, width: int, **kw) -> str:
    console = Console(width=width, record=True, color_system=None, **kw)
    render.render(trace, console)
    return console.export_text()


def _tokens(text: str) -> set[str]:
    return set(re.split(r"[\s│╭╮╰╯─]+", text)) - {""}


def test_story_comes_first_and_the_ghost_has_its_own_line(traces):
    out = _shown(traces["lkl"], 200)
    assert out.index("What happened") < out.index("step 0: Init")
    controller = [line for line in out.splitlines() if "controller: " in line]
    assert controller and not any("committed" in line or "HW seen" in line for line in controller)
    assert "observed (not protocol state): committed r1  acknowledged r1  HW seen by consumers 1" in out


def test_diff_only_shows_the_ghost_line_when_it_changes(traces):
    trace = traces["lkl"]
    ghost = []
    for i in (6, 7):
        console = Console(width=200, record=True, color_system=None)
        console.print(render.step_panel(trace.config, i, *trace.steps[i], trace.steps[i - 1][1], diff_only=True))
        ghost.append("observed (not protocol state)" in console.export_text())
    assert ghost == [False, True]  # step 7 commits and acknowledges r1


@pytest.mark.parametrize("width", [50, 70, 90])
def test_a_narrow_console_never_breaks_a_word(traces, monkeypatch, width):
    """Every token shown at `width` is one the same trace shows whole on a console wide enough
    for everything, in either layout of the brokers' rows; a word cut in two would be new."""
    trace = traces["lkl"]
    whole = _tokens(_shown(trace, 1000))
    with monkeypatch.context() as m:
        m.setattr(render, "_fit", lambda *a: None)  # the line-per-broker layout, unwrapped
        whole |= _tokens(_shown(trace, 1000))
    whole |= {"story"} | {str(i) for i in range(len(trace.steps))}  # short titles where a long one would be cut
    narrow = _shown(trace, width)
    assert _tokens(narrow) <= whole, sorted(_tokens(narrow) - whole)
    assert all(len(line) <= width for line in narrow.splitlines())


def test_a_console_that_soft_wraps_still_wraps_the_panels(traces):
    """cli.common.make_console() off a terminal soft-wraps; the panels must wrap, not crop."""
    trace = traces["lkl"]
    out = _shown(trace, 70, soft_wrap=True)
    for line in story(trace):
        assert _tokens(line) <= _tokens(out)
    last = trace.steps[-1][1]
    for fields in (render.controller_fields(last), render.ghost_fields(last)):
        assert _tokens(" ".join(f"{k} {v}" for k, v in fields.items())) <= _tokens(out)


def test_check_prints_the_story_and_show_step_does_not(tmp_path, kafkamc_cli):
    trace = tmp_path / "t.json"
    p = kafkamc_cli("check", "--rf", "2", "--minisr", "1", "--protocol", "0.11", "--quiet", "--trace-out", trace)
    assert p.returncode == 1, p.stderr
    assert p.stdout.index("What happened") < p.stdout.index("step 0: Init")
    assert "promise broken: the HW consumers can read from the leader never goes backwards" in p.stdout
    one = kafkamc_cli("trace", "show", trace, "--step", "4")
    assert one.returncode == 0 and "What happened" not in one.stdout and "step 4:" in one.stdout
    assert "step 5:" not in one.stdout
