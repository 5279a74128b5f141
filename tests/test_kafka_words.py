"""Issue 18, "speak Kafka": the crash bounds renamed (clean shutdowns, hard crashes) with their
former names still accepted, the summary under Kafka's config names, and memory and BFS
level in the progress line."""

from __future__ import annotations

import io
import json
import re
import subprocess

import pytest
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.checker.engines.progress import Progress
from kafkamc.checker.engines.search import progress_stats
from kafkamc.checker.store.memory import memory
from kafkamc.cli.summary import bound_lines
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.jobs.gate import load_gate
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec.config import Config, ConfigError
from kafkamc.spec.model import Model
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.protocol import preset

WARNING = "kafkamc: warning: --max-crashes is deprecated; use --max-clean-shutdowns"


# ---------------------------------------------------------------- names


def test_crash_bounds_have_kafka_names_and_keep_their_counters():
    assert (lc.CRASHES.setting, lc.CRASHES.flag) == ("max_clean_shutdowns", "--max-clean-shutdowns")
    assert (lc.UNCLEAN_CRASHES.setting, lc.UNCLEAN_CRASHES.flag) == ("max_hard_crashes", "--max-hard-crashes")
    assert lc.CRASHES.alias_flags == ("--max-crashes",) and lc.UNCLEAN_CRASHES.alias_settings == (
        "max_unclean_crashes",
    )
    # The budget counters in states (and so in saved traces) are unchanged.
    assert (lc.CRASHES.name, lc.UNCLEAN_CRASHES.name) == ("crashes", "unclean_crashes")
    # No bound's name, current or former, is another's.
    names = [s for b in BOUNDS for s in (b.setting, *b.alias_settings)]
    assert len(names) == len(set(names))


def test_config_takes_both_names_and_writes_the_new_ones():
    old, new = Config(max_crashes=1, max_unclean_crashes=0), Config(max_clean_shutdowns=1, max_hard_crashes=0)
    # Either name is the bound's once the bounds are fixed (Model(cfg), a command's input).
    assert old.bounded(BOUNDS) == new and hash(old) == hash(new)
    assert Model(old).config == Model(new).config == new
    old, new = old.bounded(BOUNDS), new.bounded(BOUNDS)
    assert old == new and old.limits == new.limits
    assert (new.max_crashes, new.max_clean_shutdowns, new.max_unclean_crashes, new.max_hard_crashes) == (1, 1, 0, 0)
    d = new.to_dict()
    assert d["max_clean_shutdowns"] == 1 and d["max_hard_crashes"] == 0
    assert "max_crashes" not in d and "max_unclean_crashes" not in d
    assert list(new.bounds())[:2] == ["max_clean_shutdowns", "max_hard_crashes"]
    with pytest.raises(TypeError, match="max_clean_shutdowns is given twice"):
        Config(max_crashes=1, max_clean_shutdowns=1).bounded(BOUNDS)
    with pytest.raises(ConfigError, match="--max-hard-crashes must not be negative"):
        Config(max_unclean_crashes=-1).bounded(BOUNDS).validated()
    with pytest.raises(TypeError, match="Config has no setting max_bogus"):
        Model(Config(max_bogus=1))


def test_config_from_a_previous_release_trace():
    previous = {**Config().bounded(BOUNDS).to_dict(), "max_crashes": 2, "max_unclean_crashes": 0}
    del previous["max_clean_shutdowns"], previous["max_hard_crashes"]
    assert Config.from_dict(previous, BOUNDS) == Config(max_clean_shutdowns=2, max_hard_crashes=0)
    with pytest.raises(ConfigError, match="given twice"):
        Config.from_dict({"max_crashes": 1, "max_clean_shutdowns": 1}, BOUNDS)


def test_pinned_counts_under_either_name():
    """The rename touches no step: the pinned count of tests/test_pinned.py, by both names."""
    for cfg in (
        Config(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1),
        Config(rf=2, minisr=1, max_unclean_crashes=0, max_crashes=1),
    ):
        r = explore(FastModel(cfg), InvariantSuite(cfg), "bfs")
        # 4,243 -> 4,774: a crashed follower may be dropped from the ISR by the leader's lag check
        # before its fence (trace validation, Kafka 4.1.1).
        assert (r.verdict, r.distinct_states, r.depth) == ("holds", 4774, 22)


SMALL = ("check", "--rf", "1", "--minisr", "1", "--max-hard-crashes", "0", "--json", "--quiet")


def test_former_flag_works_with_one_warning(kafkamc_cli, tmp_path):
    old = ("--max-unclean-crashes", "0", "--max-crashes", "1")
    p = kafkamc_cli("check", "--rf", "1", "--minisr", "1", *old, "--json", "--quiet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [
        WARNING,
        "kafkamc: warning: --max-unclean-crashes is deprecated; use --max-hard-crashes",
    ]
    out = json.loads(p.stdout)
    assert out["distinct_states"] == 15 and out["bounds"]["max_clean_shutdowns"] == 1
    new = kafkamc_cli(*SMALL, "--max-clean-shutdowns", "1", cwd=tmp_path)
    assert new.returncode == 0 and new.stderr == "" and json.loads(new.stdout)["distinct_states"] == 15


def test_former_and_new_flag_must_agree(kafkamc_cli, tmp_path):
    p = kafkamc_cli(*SMALL, "--max-crashes", "1", "--max-clean-shutdowns", "1", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr.splitlines() == [WARNING]
    p = kafkamc_cli(*SMALL, "--max-crashes", "1", "--max-clean-shutdowns", "2", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.splitlines()[-1] == (
        "kafkamc: error: --max-crashes and --max-clean-shutdowns disagree; give --max-clean-shutdowns alone"
    )


def test_help_shows_the_kafka_names(kafkamc_cli):
    text = kafkamc_cli("check", "--help").stdout
    for flag in ("--max-clean-shutdowns", "--max-hard-crashes", "--unclean-leader-election"):
        assert flag in text, flag
    # The former names are hidden options.
    assert "--max-crashes" not in text and "--max-unclean-crashes" not in text


def test_unclean_leader_election_is_unclean(kafkamc_cli, tmp_path):
    for flag in ("--unclean-leader-election", "--unclean"):
        p = kafkamc_cli("check", "--rf", "2", "--minisr", "1", flag, "--json", "--quiet", cwd=tmp_path)
        assert p.returncode == 1, p.stderr
        out = json.loads(p.stdout)
        assert out["config"]["unclean"] is True and out["violation"]["invariant"] == "NoCommittedDataLoss"


def test_previous_release_trace_replays(kafkamc_cli, tmp_path):
    """A trace saved by the previous release: its config names the bounds by their former
    names; its states (a hard crash spent budget) are the same."""
    trace = tmp_path / "t.json"
    p = kafkamc_cli("check", "--acks", "1", "--max-records", "1", "--quiet", "--trace-out", trace)
    assert p.returncode == 1, p.stderr
    data = json.loads(trace.read_text())
    cfg = data["config"]
    cfg["max_crashes"], cfg["max_unclean_crashes"] = cfg.pop("max_clean_shutdowns"), cfg.pop("max_hard_crashes")
    assert any(s["action"] and s["action"]["type"] == "BrokerCrash" for s in data["steps"])
    trace.write_text(json.dumps(data))
    replayed = kafkamc_cli("trace", "replay", trace)
    assert replayed.returncode == 0, replayed.stderr


def test_gate_file_with_former_keys(tmp_path):
    gate = tmp_path / "g.toml"
    gate.write_text(
        "[defaults]\nmax_crashes = 1\nmax_records = 1\n"
        '[[check]]\nname = "a"\nrf = 2\nmax_clean_shutdowns = 2\nexpect = "holds"\n'
        '[[check]]\nname = "b"\nrf = 2\nmax_unclean_crashes = 0\nexpect = "holds"\n'
    )
    warnings: list[str] = []
    a, b = load_gate(gate, warn=warnings.append)
    assert a.config.max_clean_shutdowns == 2  # the check's own value wins over [defaults]
    assert b.config == Config(rf=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0)
    assert warnings == [
        f"{gate}: max_crashes is deprecated; use max_clean_shutdowns",
        f"{gate}: max_unclean_crashes is deprecated; use max_hard_crashes",
    ]


# ---------------------------------------------------------------- the summary


def test_summary_uses_kafka_config_names():
    cfg = Config(rf=3, minisr=2, acks="all", unclean=False)
    assert cfg.kafka_settings() == (
        "replication.factor=3 min.insync.replicas=2 acks=all unclean.leader.election.enable=false "
        "auto.leader.rebalance.enable=true eligible.leader.replicas.version=1"
    )
    before_elr = Config(rf=2, minisr=3, acks="1", unclean=True, protocol=preset("3.7.0"))
    assert before_elr.kafka_settings() == (
        "replication.factor=2 min.insync.replicas=3 acks=1 unclean.leader.election.enable=true "
        "auto.leader.rebalance.enable=true eligible.leader.replicas.version=0 "
        "(min.insync.replicas capped at replication.factor: 2)"
    )
    lines = bound_lines({**Config().bounded(BOUNDS).bounds(), "max_states": 200})
    assert lines[0].split() == ["max_clean_shutdowns=0", *lc.CRASHES.meaning.split()]
    assert lines[1].startswith("  max_hard_crashes=1          hard crashes")
    assert lines[-1].split()[0] == "max_states=200" and "distinct states" in lines[-1]


def test_check_prints_kafka_names_and_keeps_json_keys(kafkamc_cli, tmp_path):
    p = kafkamc_cli("check", "--rf", "1", "--minisr", "1", "--no-elr", "--quiet", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert (
        "configuration: replication.factor=1 min.insync.replicas=1 acks=all "
        "unclean.leader.election.enable=false auto.leader.rebalance.enable=true eligible.leader.replicas.version=0"
    ) in p.stdout
    assert p.stdout.split("bounds:\n")[1].split()[:3] == ["max_clean_shutdowns=0", "clean", "shutdowns"]
    j = kafkamc_cli("check", "--rf", "1", "--minisr", "1", "--no-elr", "--quiet", "--json", cwd=tmp_path)
    out = json.loads(j.stdout)
    assert {"verdict", "config", "bounds", "protocol", "coverage", "violation"} <= set(out)
    assert out["config"]["rf"] == 1 and out["config"]["unclean"] is False and out["protocol"]["rules"]["elr"] == "off"


# ---------------------------------------------------------------- progress


def _stats(**kw):
    return {**progress_stats(1234, 5678, 90, 7, 2.0), **kw}


def test_progress_shows_memory_and_bfs_level():
    out = io.StringIO()
    with Progress(stream=out, strategy="bfs") as p:
        p(_stats())
        p(_stats(level=4, depth=4))  # Spark names the level it finished
        p(_stats(final=True))  # the summary says the rest
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("progress: 1,234 distinct states, 5,678 generated, queue 90, BFS level 6 (depth 7), ")
    assert "BFS level 4 (depth 4)" in lines[1]
    assert " MiB" in lines[0] and "RSS" in lines[0]


def test_progress_without_bfs_says_depth_only():
    out = io.StringIO()
    Progress(stream=out, strategy="dfs")(_stats())
    Progress(stream=out)(_stats())
    for line in out.getvalue().splitlines():
        assert "depth 7," in line and "level" not in line


def test_memory_counts_child_processes():
    child = subprocess.Popen(["sleep", "30"])
    try:
        text = memory()
        assert text.startswith("RSS ") and "child process" in text
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"rf": True}, "--rf must be a whole number (got True)"),
        ({"minisr": "2"}, "--minisr must be a whole number (got '2')"),
        ({"unclean": "yes"}, "--unclean-leader-election must be true or false (got 'yes')"),
        ({"symmetry": 1}, "--symmetry must be true or false (got 1)"),
    ],
)
def test_settings_of_the_wrong_type_are_refused(settings, says):
    """A trace file or a Python caller can hand over any JSON value; Config takes none of the wrong type."""
    with pytest.raises(ConfigError, match=re.escape(says)):
        Config.from_dict({**Config().bounded(BOUNDS).to_dict(), **settings}, BOUNDS).validated()
