"""The suite itself: how many scenarios it holds, and that each one names the Kafka test it restates.

A scenario is a test function in this folder whose docstring begins `Kafka: <Class>.<method>`;
the files group them by Kafka test class (test_controller_*, test_partition_*, test_fetcher_*).
Read from the sources, so the count does not depend on which tests pytest selected.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

HERE = Path(__file__).parent
NAMED = re.compile(r"^Kafka: ([A-Z][A-Za-z]*Test)\.((?:test|should)[A-Za-z0-9_]*)\b")
FILE_GROUPS = {
    "test_controller_": {
        "PartitionChangeBuilderTest",
        "ReplicationControlManagerTest",
        "BrokerHeartbeatManagerTest",
        "PartitionReassignmentReplicasTest",
        "PartitionReassignmentRevertTest",
    },
    "test_partition_": {"PartitionTest", "ReplicaTest", "ReplicaManagerTest"},
    "test_fetcher_": {"AbstractFetcherThreadTest", "ReplicaFetcherThreadTest"},
}
REQUIRED = {
    "PartitionChangeBuilderTest",
    "ReplicationControlManagerTest",
    "PartitionTest",
    "ReplicaFetcherThreadTest",
    "AbstractFetcherThreadTest",
}


def scenario_files() -> list[Path]:
    return sorted(p for p in HERE.glob("test_*.py") if p.name != Path(__file__).name)


def scenarios() -> list[tuple[Path, ast.FunctionDef]]:
    out = []
    for path in scenario_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        out += [
            (path, node) for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
        ]
    return out


def kafka_test(fn: ast.FunctionDef) -> tuple[str, str] | None:
    doc = ast.get_docstring(fn) or ""
    m = NAMED.match(doc)
    return (m.group(1), m.group(2)) if m else None


def test_every_scenario_names_one_kafka_test():
    unnamed = [f"{p.name}::{fn.name}" for p, fn in scenarios() if kafka_test(fn) is None]
    assert not unnamed, f"scenarios whose docstring does not begin 'Kafka: <Class>.<method>': {unnamed}"


def test_at_least_ninety_scenarios_each_a_different_kafka_test():
    named = [kafka_test(fn) for _p, fn in scenarios()]
    assert len(named) >= 90, len(named)
    twice = [t for t, n in Counter(named).items() if n > 1]
    assert not twice, f"Kafka tests restated twice: {twice}"
    assert REQUIRED <= {cls for cls, _m in named}


def test_files_group_scenarios_by_kafka_test_class():
    for path, fn in scenarios():
        groups = [classes for prefix, classes in FILE_GROUPS.items() if path.name.startswith(prefix)]
        assert groups, f"{path.name} is not a test_controller_*, test_partition_* or test_fetcher_* file"
        cls, _method = kafka_test(fn)
        assert cls in groups[0], f"{path.name}::{fn.name} restates {cls}"


def test_every_expected_failure_is_strict_and_says_why():
    """A known gap is written as Kafka behaves and marked xfail(strict=True, reason="issue 15...");
    strict, so the mark fails loudly once the model conforms and must then be removed."""
    for path in scenario_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "xfail":
                kw = {k.arg: k.value for k in node.keywords}
                assert isinstance(kw.get("strict"), ast.Constant) and kw["strict"].value is True, path.name
                reason = ast.literal_eval(kw["reason"]) if "reason" in kw else ""
                assert reason.startswith("issue 15"), (path.name, reason)


def test_files_stay_short():
    for path in [*scenario_files(), HERE / "scenario.py", HERE / "conftest.py", Path(__file__)]:
        assert len(path.read_text().splitlines()) <= 500, path.name


def count_by_class() -> Counter:
    """Scenarios per Kafka test class (the README's table)."""
    return Counter(kafka_test(fn)[0] for _p, fn in scenarios() if kafka_test(fn))
