"""docs/ARCHITECTURE.md names every module of every package.

The packages are read from pyproject.toml's package-dir, so a package added there (or a module
moved between packages) is held to the same rule without editing this test.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> list[str]:
    """Every .py module of every package, as `dir/path.py` relative to the repository."""
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    # "kafkamc" itself holds only __main__.py, the `python -m kafkamc` shim.
    found = set()
    for name, where in dirs.items():
        if name == "kafkamc":
            continue
        for path in (ROOT / where).rglob("*.py"):
            if path.name != "__init__.py":
                found.add(path.relative_to(ROOT).as_posix())
    return sorted(found)


def test_the_packages_are_found():
    modules = _modules()
    assert "spec/next.py" in modules and "checker/engines/explorer.py" in modules


def test_every_module_is_named_in_architecture():
    doc = (ROOT / "docs/ARCHITECTURE.md").read_text()
    missing = [m for m in _modules() if f"`{m}`" not in doc]
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"


def _spec_importers(package: str) -> dict[str, set[str]]:
    """Each module of `package` that imports kafkamc.spec (by its path in the package), with the
    spec modules it imports."""
    import ast

    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kafkamc.spec"):
                module = node.module or ""
                names |= {f"{module}.{a.name}" for a in node.names} if module == "kafkamc.spec" else {module}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names if a.name.startswith("kafkamc.spec")}
        if names:
            out[path.relative_to(ROOT / package).as_posix()] = names
    return out


def test_the_checker_modules_that_import_spec_are_the_ones_it_names():
    """Issue 43: the paragraph on the model/engine contract once said checker/ knew the protocol
    only through contract.py. It now names the modules that import spec/, and their count; an
    import added or removed must be written there too. No checker module imports an action module."""
    doc = (ROOT / "docs/ARCHITECTURE.md").read_text()
    para = doc[doc.index("**The model/engine contract.**") : doc.index("The contract:\n")]
    importers = _spec_importers("checker")
    assert f" {len(importers)} modules import spec/ directly" in para
    assert not [m for m in importers if f"`{m}`" not in para]
    explorers = (
        "engines/explorer.py",
        "engines/workers.py",
        "engines/level.py",
        "engines/search.py",
        "simulation/simulate.py",
    )
    assert all(f"`{m}`" in para for m in explorers) and not set(explorers) & set(importers)
    allowed = {"config", "state", "symmetry", "model", "next", "rpc"}
    assert {n.rsplit(".", 1)[1] for names in importers.values() for n in names} <= allowed
