"""The README's reference tables, derived from the code so that they stay whole (issue 43): every
flag of `kafkamc check`, every protocol rule, and every field of `check --json` (the violation's
included) is in its table. A new flag, rule or field fails here until the README names it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from helpers import run_kafkamc
from kafkamc.cli.common import SPARK_ONLY
from kafkamc.cli.main import cli
from kafkamc.cli.simulate import SIMULATE_ONLY
from kafkamc.spec.protocol import RULES

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def section(title: str) -> str:
    """The README's text from the heading `title` to the next heading of any level."""
    start = README.index(f"\n{title}\n")
    end = README.find("\n#", start + len(title) + 2)
    return README[start:end]


def table_after(text: str, header: str) -> list[str]:
    """The rows of the Markdown table that starts with `header` in `text`."""
    lines = text[text.index(header) :].splitlines()
    return [line for line in lines[2:] if line.startswith("|")] if lines else []


def _quoted(text: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", text))


def test_every_flag_of_check_is_in_its_table():
    """A flag heads a row of its own, except those that only apply with another flag (Spark's,
    the walks'), which that flag's row names."""
    command = cli.commands["check"]
    assert isinstance(command, click.Command)
    rows = table_after(section("## Flags of `kafkamc check`"), "| flag | default | meaning |")
    heads = " ".join(row.split("|")[1] for row in rows)
    whole = "\n".join(rows)
    missing = []
    for p in command.params:
        if not isinstance(p, click.Option) or p.hidden:
            continue
        flag = next(o for o in p.opts if o.startswith("--"))
        where = whole if p.name in SPARK_ONLY + SIMULATE_ONLY else heads
        if not re.search(re.escape(flag) + r"(?![\w-])", where):
            missing.append(flag)
    assert missing == []


def test_every_protocol_rule_is_in_the_rules_table():
    rows = table_after(section("## Protocol rules and Kafka eras"), "| rule | values |")
    named = {row.split("|")[1].strip().strip("`") for row in rows}
    assert [r.name for r in RULES if r.name not in named] == []
    assert len(rows) == len(RULES)  # and no rule the code no longer has


@pytest.fixture(scope="module")
def summaries() -> list[dict]:
    """`check --json` of a violation, of a walk and of a liveness check: between them every field."""
    small = ("check", "--rf", "2", "--minisr", "1", "--max-records", "1", "--quiet", "--workers", "1", "--json")
    out = []
    for extra in ((), ("--simulate", "--walks", "5"), ("--invariant", "EventuallyLeader")):
        p = run_kafkamc(*small, *extra, "--trace-out", "/dev/null")
        assert p.returncode in (0, 1, 3), p.stderr
        out.append(json.loads(p.stdout))
    return out


def test_every_json_field_is_in_its_table(summaries):
    text = section("## Flags of `kafkamc check`")
    rows = table_after(text, "| field | content |")
    documented = set().union(*(_quoted(row) for row in rows))
    fields = {k for s in summaries for k in s}
    assert sorted(fields - documented) == []
    violation = next(row for row in rows if row.startswith("| `violation` |"))
    keys = {k for s in summaries if s["violation"] for k in s["violation"]}
    assert keys and sorted(k for k in keys if not re.search(rf"\b{k}\b", violation)) == []
    assert summaries[0]["schema"] == "kafkamc.check/1"
