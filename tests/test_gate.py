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
        "wrongly-trusted-minisr1-unclean: expected holds, got violates NoCommittedDataLoss (5 steps)"
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
    assert "10/10 expectations met" in p.stdout


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
