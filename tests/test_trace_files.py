"""Trace files wrong in content (issue 18): every trace command checks what replay checks.

A file that is malformed or implausible is refused with one line and exit 2; a real path
of the model whose claimed violation (or reached property) is false at its end is refused
with exit 1; never a traceback. The files are a real counterexample and a real witness,
edited one field at a time. The commands run in this process through main(), the function
the `kafkamc` script calls (a tenth of a second each instead of a second); the last tests
run the installed script itself.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafkamc.cli.main import main
from kafkamc.traces.trace import check_claim, load

EXE = shutil.which("kafkamc", path=os.path.dirname(sys.executable)) or shutil.which("kafkamc")
COMMANDS = ("show", "replay", "html", "itf", "dot")
# A 6-step HighWatermarkMonotonic counterexample (Produce, ReplicaStall, AlterPartition, BrokerCrash,
# BrokerSessionTimeout, BrokerRestart).
COUNTEREXAMPLE = ("--rf", "2", "--minisr", "1", "--protocol", "0.11")
WITNESS = ("--rf", "2", "--minisr", "2", "--max-records", "1", "--reach", "ElrElection")
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "properties.py"


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def kafkamc(*args):
    """The installed script in a process of its own."""
    assert EXE, "the kafkamc entry point is not installed"
    env = dict(os.environ, COLUMNS="200")  # rendered lines unwrapped
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def trace_command(capsys):
    """run(command, path, *options): `kafkamc trace COMMAND path` through main(), an HTML page
    written next to the file. An exception main() lets out fails the test, as a traceback would."""

    def run(command: str, path: Path, *extra) -> Ran:
        args = ["trace", command, str(path), *map(str, extra)]
        args += ["-o", str(path.with_suffix(".html"))] if command == "html" else []
        sigterm, code = signal.getsignal(signal.SIGTERM), None  # main() installs its own handler
        try:
            main(args)
        except SystemExit as e:
            code = e.code
        finally:
            signal.signal(signal.SIGTERM, sigterm)
        out, err = capsys.readouterr()
        assert isinstance(code, int)
        return Ran(code, out, err)

    return run


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The JSON of a real counterexample and of a real reachability witness."""
    d = tmp_path_factory.mktemp("saved")
    out = {}
    for name, flags, code in (("counterexample", COUNTEREXAMPLE, 1), ("witness", WITNESS, 0)):
        p = kafkamc("check", *flags, "--quiet", "--trace-out", d / f"{name}.json")
        assert p.returncode == code, p.stderr
        out[name] = json.loads((d / f"{name}.json").read_text())
    assert out["counterexample"]["violation"]["invariant"] == "HighWatermarkMonotonic"
    assert len(out["counterexample"]["steps"]) == 7 and out["witness"]["reached"] == "ElrElection"
    return out


def edited(saved, tmp_path: Path, which: str, edit=None) -> Path:
    data = copy.deepcopy(saved[which])
    if edit is not None:
        edit(data)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data))
    return path


def assert_refused(p, message: str) -> None:
    """Exit 2 with exactly one line on stderr, `kafkamc: error: ...`, naming the problem."""
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkamc: error: "), p.stderr
    assert message in lines[0]


def assert_claim_refused(p, command: str, message: str) -> None:
    """Exit 1: replay says so on stdout; the others write nothing and say so in one line on stderr."""
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr
    if command == "replay":
        assert p.stderr == "" and message in p.stdout
        assert p.stdout.startswith("replayed ")
    else:
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("kafkamc: ") and message in lines[0], p.stderr
        assert p.stdout == ""


def _set_action(step: int, **fields):
    return lambda d: d["steps"][step]["action"].update(fields)


def _set_violation(**fields):
    return lambda d: d["violation"].update(fields)


def _cut(d):
    """The counterexample without its last step: a real path on which the HW has not gone back yet."""
    d["steps"] = d["steps"][:-1]
    d["violation"]["length"] = len(d["steps"]) - 1


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("which", ["counterexample", "witness"])
def test_a_good_file_works_in_every_command(saved, tmp_path, trace_command, which, command):
    path = edited(saved, tmp_path, which)
    p = trace_command(command, path)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    if command == "replay":
        said = "HighWatermarkMonotonic is violated" if which == "counterexample" else "ElrElection is reached"
        assert f"a real path of the model; {said} at its last step" in p.stdout
    elif command == "html":
        assert path.with_suffix(".html").exists()
    else:
        assert p.stdout


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "edit,message",
    [
        (_set_action(1, leader="x"), 'step 1: Produce.leader must be a whole number, not "x"'),
        (_set_action(3, isr=[1, "2"]), 'step 3: AlterPartition.isr must be a list of whole numbers, not [1, "2"]'),
    ],
    ids=["leader-x", "isr-strings"],
)
def test_an_action_field_of_the_wrong_type_is_exit_2(saved, tmp_path, trace_command, command, edit, message):
    assert_refused(trace_command(command, edited(saved, tmp_path, "counterexample", edit)), message)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_claimed_invariant_that_holds_at_the_end_is_exit_1(saved, tmp_path, trace_command, command):
    path = edited(saved, tmp_path, "counterexample", _cut)
    p = trace_command(command, path)
    assert_claim_refused(p, command, "HighWatermarkMonotonic holds at its end, unlike what the file says")
    assert not path.with_suffix(".html").exists()


@pytest.mark.parametrize("command", ["replay", "show", "dot"])
def test_a_claimed_invariant_false_of_the_whole_path_is_exit_1(saved, tmp_path, trace_command, command):
    edit = _set_violation(invariant="NoSplitBrain", kind="state")
    p = trace_command(command, edited(saved, tmp_path, "counterexample", edit))
    assert_claim_refused(p, command, "NoSplitBrain holds at its end, unlike what the file says")


@pytest.mark.parametrize("command", ["replay", "html", "itf"])
def test_a_reached_property_not_reached_at_the_end_is_exit_1(saved, tmp_path, trace_command, command):
    # The witness's steps make a clean ELR election, not the HW move forward.
    path = edited(saved, tmp_path, "witness", lambda d: d.update(reached="HighWatermarkAdvances"))
    p = trace_command(command, path)
    assert_claim_refused(p, command, "HighWatermarkAdvances is not reached at its last step, unlike what the file says")
    assert not path.with_suffix(".html").exists()


# (which file, edit, command, message): each bad field once, the commands taking turns.
IMPLAUSIBLE = {
    "unknown-invariant": (
        "counterexample",
        _set_violation(invariant="Nope"),
        "replay",
        "unknown invariant 'Nope' (known here: NoCommittedDataLoss,",
    ),
    "unknown-invariant-show": ("counterexample", _set_violation(invariant="Nope"), "show", "unknown invariant 'Nope'"),
    "length": (
        "counterexample",
        _set_violation(length=99),
        "show",
        "violation.length is 99, but the trace has 6 steps",
    ),
    "length-not-a-number": ("counterexample", _set_violation(length="6"), "itf", 'violation.length is "6"'),
    "kind": (
        "counterexample",
        _set_violation(kind="state"),
        "html",
        'violation.kind is "state", but HighWatermarkMonotonic has kind "action"',
    ),
    "kind-neither": ("counterexample", _set_violation(kind="bogus"), "dot", 'violation.kind is "bogus"'),
    "violation-missing-fields": ("counterexample", lambda d: d["violation"].pop("kind"), "replay", "malformed"),
    "unknown-reached": (
        "witness",
        lambda d: d.update(reached="Nope"),
        "show",
        "unknown reachability property 'Nope' (known here: HighWatermarkAdvances,",
    ),
    "reached-not-a-name": ("witness", lambda d: d.update(reached=3), "replay", "reached must be a property's name"),
    "both-claims": (
        "witness",
        lambda d: d.update(violation={"invariant": "NoSplitBrain", "kind": "state", "length": 3}),
        "itf",
        "claims both a violation and a reached property",
    ),
    "bool-for-int": (
        "counterexample",
        _set_action(1, leader=True),
        "replay",
        "step 1: Produce.leader must be a whole number, not true",
    ),
    "broker-out-of-range": (
        "counterexample",
        _set_action(1, leader=9),
        "dot",
        "step 1: Produce(leader=9, record=1) does not lead to the recorded state: it is not an action the model",
    ),
    "unknown-field": ("counterexample", _set_action(2, colour=1), "html", "step 2: ReplicaStall has no field 'colour'"),
    "missing-field": (
        "counterexample",
        lambda d: d["steps"][2]["action"].pop("follower"),
        "show",
        "step 2: ReplicaStall is missing its field 'follower'",
    ),
    "action-not-an-object": (
        "counterexample",
        lambda d: d["steps"][2].update(action=[1]),
        "replay",
        "step 2: an action must be an object or null",
    ),
    "config-type": (
        "counterexample",
        lambda d: d["config"].update(rf=True),
        "itf",
        "bad configuration: rf must be a whole number, not true",
    ),
    "protocol-type": (
        "counterexample",
        lambda d: d["config"].update(protocol="0.11"),
        "show",
        "bad configuration: protocol must be an object",
    ),
    "no-steps": ("counterexample", lambda d: d.update(steps=[]), "dot", "malformed: steps must be a list"),
}


@pytest.mark.parametrize("case", IMPLAUSIBLE)
def test_an_implausible_file_is_exit_2(saved, tmp_path, trace_command, case):
    which, edit, command, message = IMPLAUSIBLE[case]
    path = edited(saved, tmp_path, which, edit)
    assert_refused(trace_command(command, path), message)
    assert not path.with_suffix(".html").exists()


def test_the_explanation_shown_is_the_models_not_the_files(saved, tmp_path, trace_command):
    """A confirmed violation is explained by the model again: a made-up explanation is not shown."""
    want = saved["counterexample"]["violation"]["explanation"]
    path = edited(saved, tmp_path, "counterexample", _set_violation(explanation={"failed_parts": "x"}))
    t = load(path)
    assert check_claim(t) is None
    assert t.explanation == want
    p = trace_command("show", path)
    assert p.returncode == 0, p.stderr
    assert "fails: HW exposed by leader 1 is not below the HW consumers saw before" in p.stdout


def test_a_user_property_is_read_from_the_properties_file_given(tmp_path, trace_command):
    """A trace of an invariant from a properties file needs that file, unchanged, with --properties."""
    path = tmp_path / "user.json"
    flags = ("--rf", 3, "--minisr", 2, "--invariant", "NoAckBelowMinIsr", "--properties", EXAMPLE)
    assert kafkamc("check", *flags, "--quiet", "--trace-out", path).returncode == 1
    assert_refused(
        trace_command("show", path),
        f"unknown invariant 'NoAckBelowMinIsr'; the trace was saved with properties file {EXAMPLE}: pass --properties",
    )
    for command in COMMANDS:
        p = trace_command(command, path, "--properties", EXAMPLE)
        assert p.returncode == 0, p.stderr
    changed = tmp_path / "properties.py"
    changed.write_text(EXAMPLE.read_text() + "# edited since\n")
    assert_refused(trace_command("replay", path, "--properties", changed), "was saved with a properties file of sha256")


@pytest.mark.parametrize(
    "which,edit,command,code",
    [
        ("counterexample", None, "dot", 0),
        ("counterexample", _set_action(1, leader="x"), "show", 2),
        ("counterexample", _cut, "itf", 1),
    ],
    ids=["good", "leader-x", "holds-at-the-end"],
)
def test_the_installed_script_says_the_same(saved, tmp_path, which, edit, command, code):
    """The script in a process of its own: the same exit status, at most one line on stderr."""
    p = kafkamc("trace", command, edited(saved, tmp_path, which, edit))
    assert p.returncode == code, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.splitlines()) == min(code, 1)
    if code == 2:
        assert p.stderr.startswith("kafkamc: error: ") and "Produce.leader must be a whole number" in p.stderr
