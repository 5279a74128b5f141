"""Shared test fixtures: the installed `kafkamc` entry point, run as a user would run it;
and tests/ on sys.path for the shared helpers (tests/helpers.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

# tests/helpers.py (the shared BFS) is imported as `helpers`: with --import-mode=importlib
# pytest puts nothing on sys.path, and tests/ is not a package.
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

EXE = shutil.which("kafkamc", path=os.path.dirname(sys.executable)) or shutil.which("kafkamc")


def run_kafkamc(*args, cwd=None, timeout=600, columns=200):
    assert EXE, "the kafkamc entry point is not installed"
    env = dict(os.environ, COLUMNS=str(columns))
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture
def kafkamc_cli():
    return run_kafkamc
