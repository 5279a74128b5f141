"""One import namespace: the folders are kafkamc.spec, kafkamc.checker, ...; never top-level modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

FOLDERS = ["spec", "checker", "invariants", "traces", "jobs", "cli", "realkafka"]


@pytest.mark.parametrize("name", FOLDERS)
def test_not_importable_top_level(name, tmp_path):
    # From another directory: the repository root is then not on sys.path.
    p = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode != 0 and "ModuleNotFoundError" in p.stderr


@pytest.mark.parametrize("name", FOLDERS)
def test_importable_under_kafkamc(name, tmp_path):
    p = subprocess.run([sys.executable, "-c", f"import kafkamc.{name}"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


ROOT = Path(__file__).resolve().parent.parent


def test_the_layer_contracts_hold():
    """The layers (spec/ at the bottom, knowing nothing of the engines; checker/ knowing nothing of
    traces/; ...) are import-linter contracts in pyproject.toml, which .ci/run also checks."""
    lint_imports = Path(sys.executable).parent / "lint-imports"  # beside this Python, activated or not
    p = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and "0 broken" in p.stdout, p.stdout + p.stderr


def test_no_import_cycle_even_through_lazy_or_type_checking_imports():
    """Issue 43: cycles hid behind imports inside functions (simulate and its dispatch, the
    real-Kafka client and cluster) and behind TYPE_CHECKING (spec/config.py imported Next, whose
    action modules import Config for their annotations). grimp, import-linter's own graph,
    counts every import; no two modules of kafkamc may reach each other."""
    grimp = pytest.importorskip("grimp")
    nx = pytest.importorskip("networkx")
    graph = grimp.build_graph("kafkamc", cache_dir=None)
    edges = nx.DiGraph((m, n) for m in graph.modules for n in graph.find_modules_directly_imported_by(m))
    assert [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1] == []


@pytest.mark.parametrize("folder", FOLDERS + ["tests"])
def test_no_module_over_500_lines(folder):
    # rglob: checker/'s modules sit in packages by concern (issue 40), tests/ has conformance/.
    long = {str(p): n for p in (ROOT / folder).rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


@pytest.mark.parametrize(("args", "says"), [(["--version"], "kafkamc, version"), ([], "Usage: kafkamc")])
def test_python_dash_m_kafkamc_is_the_command_line(args, says, tmp_path):
    p = subprocess.run([sys.executable, "-m", "kafkamc", *args], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(says)


def test_kafkamc_stays_a_namespace_package(tmp_path):
    """kafkamc/ holds only __main__.py: an __init__.py would hide the zip Spark executors import."""
    assert sorted(p.name for p in (ROOT / "kafkamc").iterdir() if p.name != "__pycache__") == ["__main__.py"]
    code = "import kafkamc; print(getattr(kafkamc, '__file__', None))"
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert p.stdout.strip() == "None", p.stderr


def test_the_native_core_is_the_optional_extension_checker_native_loads():
    """setup.py declares one Rust extension, optional (an install without cargo still succeeds)
    and optimised, at the name checker/core/native.py imports; the install puts it beside the
    packages, never in the source tree's kafkamc/ (the test above)."""
    from kafkamc.checker.core import native

    calls = [
        n
        for n in ast.walk(ast.parse((ROOT / "setup.py").read_text()))
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "RustExtension"
    ]
    assert len(calls) == 1
    (target, manifest), options = [ast.literal_eval(a) for a in calls[0].args], calls[0].keywords
    assert target == native.MODULE and (ROOT / manifest).is_file()
    assert {k.arg: ast.literal_eval(k.value) for k in options if k.arg in ("optional", "debug")} == {
        "optional": True,
        "debug": False,
    }
