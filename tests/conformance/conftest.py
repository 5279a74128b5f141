"""The conformance suite's folder on sys.path, so that its scenarios import the shared
builders as `scenario` (with --import-mode=importlib pytest puts nothing on sys.path)."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
