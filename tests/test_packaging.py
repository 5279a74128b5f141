"""One import namespace: the folders are kafkamc.spec, kafkamc.checker, ...; never top-level modules."""

from __future__ import annotations

import subprocess
import sys

import pytest

FOLDERS = ["spec", "checker", "invariants", "traces", "cli"]


@pytest.mark.parametrize("name", FOLDERS)
def test_not_importable_top_level(name, tmp_path):
    # From another directory: the repository root is then not on sys.path.
    p = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode != 0 and "ModuleNotFoundError" in p.stderr


@pytest.mark.parametrize("name", FOLDERS)
def test_importable_under_kafkamc(name, tmp_path):
    p = subprocess.run([sys.executable, "-c", f"import kafkamc.{name}"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
