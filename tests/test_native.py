"""The native core, kafkamc._core (native/): it loads where the install could build it, its FpSet
is checker/store/visited.py's FingerprintSet call by call, and the fallback says why in one line."""

from __future__ import annotations

import random
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from kafkamc.checker.core import native
from kafkamc.checker.store.visited import FingerprintSet

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def core():
    module = native.load()
    if module is None:
        # With cargo on PATH the install builds the core, so its absence is a failed build
        # (CI has Rust); without cargo the fallback is the expected outcome.
        if shutil.which("cargo"):
            pytest.fail(f"cargo is on PATH but {native.why_not()}: reinstall with pip -v to see the build")
        pytest.skip(native.why_not())
    return module


def test_the_core_loads_and_says_its_version(core):
    cargo = tomllib.loads((ROOT / "native/Cargo.toml").read_text())
    assert core.version() == cargo["package"]["version"]
    assert native.why_not() == ""


def _fingerprints(rng: random.Random, n: int) -> list[int]:
    """0 and 1 (one fingerprint: 0 is stored as 1), repeats, small values that share home slots,
    high-bit values whose fold (fp >> 29) matters, and enough new ones to grow the table twice."""
    out = [0, 1, 0, 2**64 - 1]
    for _ in range(n):
        r = rng.random()
        if r < 0.15 and out:
            out.append(rng.choice(out))
        elif r < 0.25:
            out.append(rng.randrange(64))
        else:
            out.append(rng.getrandbits(64))
    return out


@pytest.mark.parametrize("capacity", [1, 8, 12, 1 << 16])
def test_fpset_adds_as_the_python_set_does(core, capacity):
    fps = _fingerprints(random.Random(capacity), 150_000)
    ours, theirs = core.FpSet(capacity), FingerprintSet(capacity)
    added = [ours.add(fp) for fp in fps]
    assert added == [theirs.add(fp) for fp in fps]  # call by call
    assert len(ours) == len(theirs) > 3 * (1 << 16) // 4  # past the default table's limit
    assert ours.nbytes == theirs.nbytes
    probes = fps[:1000] + [random.Random(7).getrandbits(64) for _ in range(1000)]
    assert [fp in ours for fp in probes] == [fp in theirs for fp in probes]


def test_fpset_defaults_and_refuses_a_capacity_of_no_slot(core):
    assert core.FpSet().nbytes == FingerprintSet().nbytes
    with pytest.raises(ValueError, match="at least one slot"):
        core.FpSet(0)
    with pytest.raises(ValueError, match="at least one slot"):
        FingerprintSet(0)
    with pytest.raises(OverflowError):
        core.FpSet().add(2**64)


def test_a_panic_is_an_exception_not_an_abort(core):
    # panic = "unwind" in native/Cargo.toml: PyO3 raises PanicException (a BaseException).
    with pytest.raises(BaseException, match="on purpose") as e:
        core._panic("on purpose")
    assert type(e.value).__name__ == "PanicException"


def test_without_the_core_the_fallback_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, native.MODULE, None)  # import then raises ModuleNotFoundError
    assert native.load() is None
    assert native.why_not() == (
        "the native core is not built (no Rust toolchain at install time, or its build failed); using the Python engine"
    )


def test_a_core_that_does_not_load_says_so(monkeypatch):
    def broken(name):
        raise ImportError(f"{name}: undefined symbol: PyFoo\nsecond line")

    monkeypatch.setattr(native.importlib, "import_module", broken)
    assert native.why_not() == (
        "the native core does not load (kafkamc._core: undefined symbol: PyFoo); using the Python engine"
    )
