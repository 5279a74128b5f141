"""Issue 43's defects, each through the installed entry point: the exit status and the exact
line a user gets. Exit 1 means a finding (a violation, a discrepancy); a user's mistake must
never end in it."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from pathlib import Path

import click
import pytest
from helpers import EXE, run_kafkamc

SAVED_RUN = Path(__file__).parent / "data" / "conform" / "rf3-minisr2-seed2.json"
SMALL = ("check", "--rf", "2", "--minisr", "1", "--max-records", "1", "--quiet", "--workers", "1")


def one_error(p) -> str:
    """The single stderr line of a run that must have failed with exit 2, without its prefix."""
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkamc: error: "), p.stderr
    return lines[0].removeprefix("kafkamc: error: ")


# Defect 1: tracebacks, exit 1, on a user's mistake.


@pytest.mark.parametrize(
    "body,message",
    [
        (
            'return [("x", V.nonexistent[0])]',
            "Foo(cfg, V) failed: AttributeError: 'View' object has no attribute 'nonexistent'",
        ),
        ("return 42", "Foo(cfg, V) returned int 42; an invariant returns a list of (description, z3 formula)"),
    ],
    ids=["bad-attribute", "returns-42"],
)
def test_a_properties_file_whose_body_is_wrong_is_one_line(tmp_path, body, message):
    f = tmp_path / "p.py"
    f.write_text(
        "from kafkamc.invariants.properties import state_invariant\n"
        f'@state_invariant("x")\ndef Foo(cfg, V):\n    {body}\n'
    )
    assert one_error(run_kafkamc(*SMALL, "--properties", f)) == f"properties file {f}: {message}"
    assert one_error(run_kafkamc("invariants", "--properties", f)) == f"properties file {f}: {message}"


def test_a_properties_file_with_a_wrong_signature_is_one_line(tmp_path):
    f = tmp_path / "p.py"
    f.write_text(
        "from kafkamc.invariants.properties import step_invariant\n"
        '@step_invariant("x")\ndef Foo(cfg, V):\n    return []\n'
    )
    assert one_error(run_kafkamc(*SMALL, "--properties", f)) == (
        f"properties file {f}: Foo(cfg, P, V) failed: TypeError: Foo() takes 2 positional arguments but 3 were given"
    )


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"setup": {"rf": 3', "is not a saved run: not JSON (Expecting ',' delimiter at line 1)"),
        ("[1, 2]", "is not a saved run: a JSON object with setup, events and reads expected"),
    ],
    ids=["truncated", "not-an-object"],
)
def test_conform_validate_on_a_damaged_file_is_one_line(tmp_path, text, message):
    (tmp_path / "observations.json").write_text(text)
    assert one_error(run_kafkamc("conform", "--validate", tmp_path)) == f"{tmp_path / 'observations.json'} {message}"


def test_gate_junit_to_an_unwritable_path_is_refused_before_the_matrix(tmp_path):
    gate = tmp_path / "g.toml"
    gate.write_text('[[check]]\nname = "tiny"\nrf = 1\nminisr = 1\nmax_records = 1\nexpect = "holds"\n')
    p = run_kafkamc("gate", gate, "--junit", "/proc/junit.xml")
    # One line, and no "gate: tiny ..." before it: no check ran.
    assert one_error(p) == "--junit /proc/junit.xml: cannot write in /proc: No such file or directory"
    assert p.stdout == ""


# Defect 2: corrupt saved data is bad input, not a Kafka discrepancy.


def test_conform_validate_checks_the_saved_setup(tmp_path):
    data = json.loads(SAVED_RUN.read_text())
    data["setup"]["rf"] = 9
    (tmp_path / "observations.json").write_text(json.dumps(data))
    assert one_error(run_kafkamc("conform", "--validate", tmp_path)) == (
        f"{tmp_path / 'observations.json'}'s setup: rf must be 1 to 5 and brokers between rf and 5 (got 9, 3)"
    )


@pytest.mark.parametrize(
    "flags,named",
    [(("--runs", "3", "--seed", "5"), "--seed, --runs"), (("--rf", "0"), "--rf")],
    ids=["runs-seed", "rf-0"],
)
def test_conform_validate_refuses_the_flags_of_a_new_run(flags, named):
    assert one_error(run_kafkamc("conform", "--validate", SAVED_RUN, *flags)) == (
        f"{named}: a saved run keeps its own setup; give --validate alone"
    )


@pytest.mark.slow  # validates 212 observations: about 20 s
def test_conform_validate_takes_the_bare_sample_file():
    p = run_kafkamc("conform", "--validate", SAVED_RUN)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "consistent: every observation is one the model can make"


# Defect 3: releases that changed no rule name the era before them (4.2 4.1.0's rules, 4.3 is an
# era since KAFKA-19975, 4.4 its rules); one default Kafka release.


@pytest.mark.parametrize("name,era", [("4.2", "4.1.0"), ("4.3", "4.3.0"), ("4.4", "4.3.0"), ("4.4.0", "4.3.0")])
def test_later_releases_name_the_rules_they_have(name, era):
    p = run_kafkamc(*SMALL, "--protocol", name, "--max-states", "10", "--json")
    assert p.returncode == 3, p.stderr
    assert json.loads(p.stdout)["protocol"]["era"] == era


def test_an_unknown_release_says_which_names_the_newest_rules():
    assert one_error(run_kafkamc(*SMALL, "--protocol", "4.5")) == (
        "unknown protocol preset '4.5'; presets: 0.8.2, 0.9.0, 0.10.2, 0.11.0, 2.0.0, 2.0.1, 2.1.0, 2.2.0, "
        "2.7.0, 2.8.0, 3.1.0, 3.5.0, 3.6.0, 3.7.0, 3.8.0, 4.0.0, 4.1.0, 4.3.0 (or newest, oldest; "
        "4.2 names 4.1.0's rules; 4.4 names 4.3.0's rules)"
    )


def test_conform_and_trace_kafka_default_to_the_same_release():
    from kafkamc.cli.main import cli

    trace = cli.commands["trace"]
    assert isinstance(trace, click.Group)

    def default(command: click.Command) -> str:
        return next(p.default for p in command.params if p.name == "kafka_version")

    assert default(cli.commands["conform"]) == default(trace.commands["kafka"]) == "4.4.0"


# Defect 4: one output-path rule; `trace html` writes to stdout without -o, as itf and dot do.


@pytest.fixture(scope="module")
def saved_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "t.json"
    p = run_kafkamc(*SMALL, "--trace-out", path)
    assert p.returncode == 1, p.stderr
    return path


@pytest.mark.parametrize("command", ["html", "itf", "dot"])
def test_trace_exports_refuse_a_missing_folder(saved_trace, tmp_path, command):
    out = tmp_path / "missing" / "x"
    p = run_kafkamc("trace", command, saved_trace, "-o", out)
    assert one_error(p) == f"--output {out}: folder {out.parent} does not exist"
    assert not out.parent.exists()


def test_trace_html_without_o_writes_the_page_to_stdout(saved_trace):
    p = run_kafkamc("trace", "html", saved_trace)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("<!DOCTYPE html>") and p.stdout.rstrip().endswith("</html>")


# Defect 5: status lines that said what was not true.


def test_a_liveness_only_check_does_not_say_reached_none():
    p = run_kafkamc(*SMALL, "--invariant", "EventuallyLeader")
    assert p.returncode == 0, p.stderr
    assert "reached: not searched (no safety pass ran)\n" in p.stdout
    assert "may be vacuous" not in p.stdout


def test_a_simulation_does_not_say_reached_none():
    p = run_kafkamc(*SMALL, "--simulate", "--walks", "20")
    assert "reached: not searched (random walks do not look for them)\n" in p.stdout


def test_a_run_stopped_at_a_violation_warns_of_no_action_never_fired():
    p = run_kafkamc(*SMALL)
    assert p.returncode == 1 and "violated: HighWatermarkMonotonic after 7 steps" in p.stdout
    assert "never fired" not in p.stdout


def test_max_states_says_why_more_states_were_found():
    p = run_kafkamc("check", "--max-states", "5000", "--quiet", "--workers", "1")
    assert p.returncode == 3
    assert p.stdout.splitlines()[-1] == (
        "incomplete: stopped at max states 5000 with 5,002 found: the limit is checked after all of a state's "
        "successors are added; every path of up to 6 steps explored; no violation among the states explored"
    )


def test_a_reach_target_that_needs_spare_brokers_says_so():
    assert one_error(run_kafkamc(*SMALL, "--reach", "ReassignmentCompleted")) == (
        "ReassignmentCompleted needs a broker outside the replica set: add --brokers 3 (or more)"
    )


# Defect 8: the HTML page tells the story the terminal prints above the steps.


def test_the_html_page_tells_the_terminals_story(saved_trace, tmp_path):
    page = tmp_path / "t.html"
    assert run_kafkamc("trace", "html", saved_trace, "-o", page).returncode == 0
    told = html.unescape(
        re.sub(r"<[^>]+>", "\n", page.read_text().split('data-testid="story">')[1].split("</section>")[0])
    )
    shown = run_kafkamc("trace", "show", saved_trace, columns=1000).stdout
    lines = [line.strip() for line in told.splitlines() if line.strip()]
    assert lines[0].startswith("What happened (rf=2, min.insync.replicas=1")
    assert lines[-2:] == [
        "promise broken:",
        "the HW consumers can read from the leader never goes backwards (HighWatermarkMonotonic)",
    ]
    for line in lines:  # the terminal's story, word for word
        assert line in shown, line


# Defect 6: machine interfaces.


def test_every_json_output_names_its_schema():
    for argv, kind in [
        (("invariants", "--json"), "invariants"),
        (("protocols", "--json"), "protocols"),
        (("durability", "--max-rf", "1", "--json"), "durability"),
        ((*SMALL, "--max-states", "10", "--json"), "check"),
    ]:
        p = run_kafkamc(*argv)
        assert p.returncode in (0, 3), p.stderr
        assert next(iter(json.loads(p.stdout).items())) == ("schema", f"kafkamc.{kind}/1")


def test_invariants_json_lists_what_the_text_lists():
    text = run_kafkamc("invariants").stdout.splitlines()
    listed = json.loads(run_kafkamc("invariants", "--json").stdout)["properties"]
    assert [p["name"] for p in listed] == [line.split()[0] for line in text]
    assert listed[0] == {
        "name": "NoCommittedDataLoss",
        "tier": "safety",
        "kind": "state",
        "meaning": text[0].split(None, 3)[3],
    }


def test_check_help_lists_the_exit_statuses():
    said = " ".join(run_kafkamc("check", "--help").stdout.split())  # click wraps help at 80 columns
    assert "Exit 0: every invariant holds within the bounds" in said
    assert "2: bad input, one `kafkamc: error:` line; 3: stopped at a limit or interrupted" in said


@pytest.mark.parametrize(
    "words,offered",
    [
        ("check --protocol 4.", ["4.0.0", "4.1.0", "4.3.0", "4.2", "4.4"]),
        ("check --rule elr", ["elr=off", "elr=on"]),
        ("check --reach Reassignment", ["ReassignmentCompleted", "ReassignmentCancelled"]),
        ("check --invariant NoS", ["NoSplitBrain"]),
    ],
)
def test_shell_completion_offers_names(words, offered):
    env = dict(os.environ, _KAFKAMC_COMPLETE="bash_complete", COMP_WORDS=f"kafkamc {words}")
    env["COMP_CWORD"] = str(len(words.split()))
    p = subprocess.run([EXE], capture_output=True, text=True, env=env, timeout=60)
    assert p.stdout.split() == [f"plain,{n}" for n in offered]


def test_the_gate_takes_max_states(tmp_path):
    gate = tmp_path / "g.toml"
    gate.write_text('[[check]]\nname = "capped"\nrf = 3\nminisr = 2\nmax_states = 100\nexpect = "holds"\n')
    p = run_kafkamc("gate", gate, "--out-dir", tmp_path / "out")
    assert p.returncode == 1  # undecided: an incomplete search is no pass
    assert "capped" in p.stdout and "incomplete (max states 100)" in p.stdout
    gate.write_text('[[check]]\nname = "bad"\nmax_states = 0\nexpect = "holds"\n')
    assert (
        one_error(run_kafkamc("gate", gate))
        == "check #1 (bad): max_states must be a whole number of at least 1 (got 0)"
    )
