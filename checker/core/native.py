"""The native search core, `kafkamc._core` (native/, issue 40), when the install built it.

The extension is optional: an install without a Rust toolchain, or whose Rust build failed,
still succeeds and runs the pure-Python engine. `load()` gives the module or None and
`why_not()` the one line a summary prints when the fallback is taken. Nothing is kept here but
Python's own import cache, so a test can hide the module with `sys.modules`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

MODULE = "kafkamc._core"


def _import() -> tuple[ModuleType | None, str]:
    try:
        return importlib.import_module(MODULE), ""
    except ModuleNotFoundError:
        return None, "the native core is not built (no Rust toolchain at install time, or its build failed)"
    except ImportError as e:  # built, but not loadable here: another platform, a missing symbol
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return None, f"the native core does not load ({first})"


def load() -> ModuleType | None:
    """kafkamc._core, or None when it is not built or does not load."""
    return _import()[0]


def why_not() -> str:
    """Why the Python engine runs instead of the native core, in one line; "" when the core loads."""
    module, reason = _import()
    return "" if module is not None else f"{reason}; using the Python engine"
