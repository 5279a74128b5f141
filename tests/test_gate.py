"""`kafkamc gate`: expectations met or not, JUnit XML, saved counterexamples, bad gate files."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SMALL = """
[defaults]
max_records = 1

[[check]]
name = "rf2-minisr2"
rf = 2
minisr = 2
expect = "holds"

[[check]]
name = "unsafe-acks1"
rf = 3
minisr = 2
acks = "1"
violates = "AckedWriteDurability"
"""

# The same file with one expectation that is wrong on purpose: minisr 1 with unclean
# election is not safe, so "holds" must fail and leave its counterexample behind.
WRONG = (
    SMALL
    + """
[[check]]
name = "wrongly-trusted-minisr1-unclean"
rf = 2
minisr = 1
unclean = true
expect = "holds"
"""
)


def test_gate_passes_and_writes_junit(tmp_path, kafkamc_cli):
    gate = tmp_path / "g.toml"
    gate.write_text(SMALL)
    p = kafkamc_cli("gate", gate, "--junit", tmp_path / "report" / "junit.xml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2/2 expectations met" in p.stdout
    suite = ET.parse(tmp_path / "report" / "junit.xml").getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "2" and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == ["rf2-minisr2", "unsafe-acks1"]


def test_wrong_expectation_fails_with_junit_and_saved_counterexample(tmp_path, kafkamc_cli):
    gate = tmp_path / "g.toml"
    gate.write_text(WRONG)
    junit = tmp_path / "report" / "junit.xml"
    p = kafkamc_cli("gate", gate, "--junit", junit)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "2/3 expectations met" in p.stdout
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1"
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["wrongly-trusted-minisr1-unclean"]
    failure = failed[0].find("failure")
    assert failure.get("message") == (
        "wrongly-trusted-minisr1-unclean: expected holds, got violates NoCommittedDataLoss (6 steps)"
    )
    assert "configuration: rf=2 minisr=1 unclean=on max_records=1" in failure.text
    trace = tmp_path / "report" / "wrongly-trusted-minisr1-unclean.trace.json"
    assert trace.exists() and f"saved: {trace}" in failure.text
    page = tmp_path / "report" / "wrongly-trusted-minisr1-unclean.html"
    assert page.exists() and f"saved: {page}" in failure.text and "<html" in page.read_text()
    assert kafkamc_cli("trace", "replay", trace).returncode == 0


@pytest.mark.slow
def test_shipped_gate_passes(kafkamc_cli, tmp_path):
    shipped = Path(__file__).parent / "gate" / "kafka.toml"
    p = kafkamc_cli("gate", shipped, "--junit", tmp_path / "junit.xml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "16/16 expectations met" in p.stdout
    for name in ("recommended-rf3-minisr2-two-records", "rf3-minisr2-shutdown-and-hard-crash-no-shrink"):
        assert f"ok      {name}  " in p.stdout  # piped: one whole line per check


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "no such gate file"),
        ("[[check]\nrf = 3", "is not valid TOML"),
        ('[[check]]\nrf = 3\nviolates = "NoSuchInvariant"', "unknown invariant 'NoSuchInvariant'"),
        ('[[check]]\nrf = 3\ncolour = "blue"\nexpect = "holds"', "unknown key(s) colour"),
        ('[[check]]\nrf = 3\nexpect = "maybe"', 'expect must be "holds"'),
        ("[[check]]\nrf = 3", "give exactly one of expect"),
        ('[[check]]\nrf = 0\nexpect = "holds"', "--rf must be at least 1"),
        ('[[check]]\nprotocol = "9.9"\nexpect = "holds"', "unknown protocol preset '9.9'"),
        ("[checks]\nrf = 3", "unknown top-level key(s) checks"),
        ('[[check]]\nrf = 3\nexpect = "holds"\ntime_limit = -5', "time_limit must be a positive number"),
        ('[[check]]\nrf = 3\nexpect = "holds"\ntime_limit = nan', "time_limit must be a positive number"),
    ],
)
def test_bad_gate_files_exit_2(tmp_path, kafkamc_cli, content, message):
    gate = tmp_path / "g.toml"
    if content is not None:
        gate.write_text(content)
    p = kafkamc_cli("gate", gate)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkamc: error: ") and message in lines[0], p.stderr


def test_gate_output_paths_are_checked_first(tmp_path, kafkamc_cli):
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = kafkamc_cli("gate", "tests/gate/kafka.toml", "--junit", blocker / "j.xml")
    assert p.returncode == 2 and "is a file, not a folder" in p.stderr and "gate:" not in p.stderr
    p = kafkamc_cli("gate", "tests/gate/kafka.toml", "--out-dir", blocker / "sub")
    assert p.returncode == 2 and "is a file, not a folder" in p.stderr


SHIPPED = Path(__file__).parent / "gate" / "kafka.toml"


def _rows_of_shipped():
    from kafkamc.cli.gate import Row
    from kafkamc.jobs.gate import config_summary, load_gate

    entries = load_gate(SHIPPED)
    return [Row(e.name, config_summary(e.config), "holds", "holds", "1,234", "0.5s", True) for e in entries]


@pytest.mark.parametrize("terminal", [True, False])
@pytest.mark.parametrize("width", [60, 300])
def test_gate_results_never_cut_a_name(terminal, width):
    """A narrow terminal gets a block per check, wrapped between words; a wide one a table;
    anything else a plain line per check: each check's name and settings stay whole."""
    import io

    from kafkamc.cli.gate import show_rows
    from rich.console import Console

    rows = _rows_of_shipped()
    out = io.StringIO()
    show_rows(Console(file=out, width=width, force_terminal=terminal, color_system=None), "gate", rows)
    text = out.getvalue()
    assert "…" not in text
    words = text.split()
    for r in rows:
        assert r.check in words
        assert all(setting in words for setting in r.configuration.split())
        if not terminal:  # a plain line: the whole configuration, on the check's line
            assert any(r.check in line and line.endswith(r.configuration) for line in text.splitlines())
    assert ("┃ check" in text) == (terminal and width == 300)


def test_gate_piped_prints_whole_names(tmp_path, kafkamc_cli):
    """Piped with a narrow COLUMNS, as CI runs it: the shipped gate's names, on cheap checks."""
    names = [r.check for r in _rows_of_shipped()]
    gate = tmp_path / "g.toml"
    gate.write_text(
        "[defaults]\nrf = 1\nminisr = 1\nmax_records = 1\nmax_hard_crashes = 0\n"
        "rules = { isr_join_broker_epoch = 'unchecked' }\n"
        + "".join(f'[[check]]\nname = "{n}"\nexpect = "holds"\n' for n in names)
    )
    p = kafkamc_cli("gate", gate, "--out-dir", tmp_path / "out", columns=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    for n in names:
        assert any(line.split()[:2] == ["ok", n] for line in lines), n
    assert (
        sum(
            line.endswith("rf=1 minisr=1 isr_join_broker_epoch=unchecked max_hard_crashes=0 max_records=1")
            for line in lines
        )
        == 16
    )


def test_a_junit_report_that_cannot_be_written_at_the_end_is_said_and_exit_2(tmp_path, kafkamc_cli):
    """/dev/full passes the check before the first entry and fails the write: the table and
    the saved files are still printed, the report's loss is said, and CI does not pass."""
    gate = tmp_path / "g.toml"
    gate.write_text('[[check]]\nname = "tiny"\nrf = 1\nminisr = 1\nexpect = "holds"\n')
    p = kafkamc_cli("gate", gate, "--junit", "/dev/full", "--out-dir", tmp_path / "out")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "JUnit XML could not be written to /dev/full: No space left on device" in p.stdout
    assert p.stdout.splitlines()[-1] == "0/1 expectations met"  # rf 1 loses data: a saved trace too
