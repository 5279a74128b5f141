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
