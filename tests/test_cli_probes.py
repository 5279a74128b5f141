"""No user mistake may end in a traceback (issue 43): a CI job reads exit 1 as a finding.

PROBES is a table of bad inputs fed to every command that takes them (the command list comes
from the click group, so a new command is probed too). Each run must end in exit 2 and one
`kafkamc: error:` line. Add to the table when a new kind of mistake is found. The runs are
in-process (main(argv)): an uncaught exception fails the test with its traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from kafkamc.cli.main import cli, main

DATA = Path(__file__).parent / "data" / "conform" / "rf3-minisr2-seed2.json"

# A properties file's body runs only when a command builds its checks.
BAD_PROPERTIES = {
    "bad-attribute": 'def Foo(cfg, V):\n    return [("x", V.nonexistent[0])]\n',
    "returns-42": "def Foo(cfg, V):\n    return 42\n",
    "wrong-signature": "def Foo(cfg):\n    return []\n",
    "part-not-a-pair": 'def Foo(cfg, V):\n    return ["x"]\n',
    "raises": 'def Foo(cfg, V):\n    raise RuntimeError("mine")\n',
    "syntax": "def Foo(cfg, V) return []\n",
    "no-property": "X = 1\n",
}
# Input files that are not what a command reads (a trace, a gate file, a saved run).
BAD_FILES = {
    "missing": None,
    "empty": "",
    "truncated-json": '{"setup": {"rf": 3',
    "json-list": "[1, 2]",
    "json-number": "42",
    "binary": "\x00\x01\x02",
    "wrong-object": '{"format": "kafkamc-trace", "version": "x"}',
}
# Output paths nothing can go to: under a file, places even root cannot write. A file's
# folder must also exist (MISSING); the gate's report folder (--junit's, --out-dir) is created.
BAD_OUTPUTS = ("/proc/version/x", "/proc/x", "/sys/x")
MISSING = "missing/out/x"
FILE_OPTIONS = ("-o", "--trace-out", "--graphml")
FOLDER_OPTIONS = ("--junit", "--out-dir")
# Commands whose probes would start real work on valid input: fed bad files only.
NOT_PROBED = {("bench",), ("trace", "kafka"), ("conform",)}


def _commands(group: click.Group = cli, path: tuple = ()) -> list[tuple[tuple, click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += _commands(command, path + (name,))
        else:
            out.append((path + (name,), command))
    return out


def _properties_file(folder: Path, name: str) -> str:
    body = BAD_PROPERTIES[name]
    p = folder / f"props-{name}.py"
    p.write_text("import z3\nfrom kafkamc.invariants.properties import state_invariant\n" + _decorate(body))
    return str(p)


def _decorate(body: str) -> str:
    return body.replace("def Foo", '@state_invariant("x")\ndef Foo') if "def Foo" in body else body


def _bad_file(folder: Path, name: str) -> str:
    text = BAD_FILES[name]
    p = folder / f"{name}.json"
    if text is not None:
        p.write_text(text)
    return str(p)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    """A real saved trace, for the commands whose output path is probed."""
    path = tmp_path_factory.mktemp("trace") / "t.json"
    with pytest.raises(SystemExit) as e:
        main(["check", "--rf", "2", "--minisr", "1", "--max-records", "1", "--quiet", "--trace-out", str(path)])
    assert e.value.code == 1 and path.exists()
    return str(path)


def _probes(trace: str, folder: Path, gate: str) -> list[list[str]]:
    """Every command, fed every probe it takes."""
    runs = []
    for path, command in _commands():
        params = {o for p in command.params for o in p.opts}
        takes_file = any(isinstance(p, click.Argument) for p in command.params)
        for name in BAD_FILES:
            if takes_file:
                runs.append([*path, _bad_file(folder, name)])
            if "--validate" in params:
                runs.append([*path, "--validate", _bad_file(folder, name)])
        if path in NOT_PROBED:
            continue
        valid = [trace] if path[0] == "trace" else [gate] if path == ("gate",) else []
        if "--properties" in params:
            for name in BAD_PROPERTIES:
                runs.append([*path, *valid, "--properties", _properties_file(folder, name)])
        for option in FILE_OPTIONS + FOLDER_OPTIONS:
            if option in params:
                outs = BAD_OUTPUTS + ((str(folder / MISSING),) if option in FILE_OPTIONS else ())
                runs += [[*path, *valid, option, out] for out in outs]
    return runs


def test_every_command_fed_the_probes_says_one_line_and_exits_2(trace, tmp_path, capsys):
    gate = tmp_path / "g.toml"
    gate.write_text('[[check]]\nname = "tiny"\nrf = 1\nminisr = 1\nmax_records = 1\nexpect = "holds"\n')
    runs = _probes(trace, tmp_path, str(gate))
    assert len(runs) > 100  # every command met the table
    for argv in runs:
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:  # anything else escaping main() is a traceback
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kafkamc: error: "), (argv, err)
    assert not (tmp_path / MISSING).parent.parent.exists()  # no probe created a folder for its output


def test_the_probes_reach_every_command():
    names = {" ".join(path) for path, _ in _commands()}
    assert {"check", "gate", "trace html", "trace itf", "trace dot", "graph", "conform", "invariants"} <= names


def test_a_saved_run_for_the_probes_is_real():
    """The bad files above are bad because of their shape, not because the format moved."""
    data = json.loads(DATA.read_text())
    assert set(data) >= {"setup", "events", "reads"}


def _raising(error: BaseException):
    def command(*_a, **_k):
        raise error

    return command


def test_a_bug_is_one_line_and_exit_4_never_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr(cli.commands["invariants"], "callback", _raising(ValueError("boom\nmore")))
    with pytest.raises(SystemExit) as e:
        main(["invariants"])
    assert e.value.code == 4
    err = capsys.readouterr().err
    assert err.startswith("kafkamc: internal error: ValueError: boom at test_cli_probes.py:")
    assert err.endswith("(a bug in kafkamc, not a verdict)\n") and "Traceback" not in err


def test_an_interrupt_a_c_library_wrapped_is_exit_3():
    # confluent-kafka's C code hands a signal handler's KeyboardInterrupt back as SystemError
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as k:
            raise SystemError("<method 'produce'> returned a result with an exception set") from k
    except SystemError as wrapped:
        error = wrapped
    from kafkamc.cli.main import _last_resort

    with pytest.raises(SystemExit) as e:
        _last_resort(error)
    assert e.value.code == 3
