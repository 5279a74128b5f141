"""(placeholder, filled in by the work on issue 5)"""
from __future__ import annotations


def register(cli_group, trace_group) -> None:
    """Add this module's commands to the click groups."""
