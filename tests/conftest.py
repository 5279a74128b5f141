"""Shared test fixtures: the installed `kafkamc` entry point, run as a user would run it;
and tests/ on sys.path for the shared helpers (tests/helpers.py)."""

from __future__ import annotations

import os
import sys

import pytest

# tests/helpers.py (the shared BFS) is imported as `helpers`: with --import-mode=importlib
# pytest puts nothing on sys.path, and tests/ is not a package.
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from helpers import run_kafkamc  # noqa: E402 (importable once tests/ is on sys.path)


@pytest.fixture
def kafkamc_cli():
    return run_kafkamc
