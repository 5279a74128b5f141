"""Shared test fixtures: the installed `kafkamc` entry point, run as a user would run it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

EXE = shutil.which("kafkamc", path=os.path.dirname(sys.executable)) or shutil.which("kafkamc")


def run_kafkamc(*args, cwd=None, timeout=600, columns=200):
    assert EXE, "the kafkamc entry point is not installed"
    env = dict(os.environ, COLUMNS=str(columns))
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture
def kafkamc_cli():
    return run_kafkamc
