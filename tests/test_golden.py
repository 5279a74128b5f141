"""Golden-file test of the terminal rendering of a saved counterexample.

If a deliberate change to the rendering moves this output, rerun with
KAFKAMC_UPDATE_GOLDEN=1 to rewrite the file, and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden" / "acks1-trace-show.txt"


def test_trace_show_matches_golden(tmp_path, kafkamc_cli):
    trace = tmp_path / "t.json"
    p = kafkamc_cli("check", "--acks", "1", "--max-records", "1", "--quiet", "--trace-out", trace)
    assert p.returncode == 1, p.stderr
    shown = kafkamc_cli("trace", "show", trace, columns=120)
    assert shown.returncode == 0, shown.stderr
    if os.environ.get("KAFKAMC_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(shown.stdout)
    assert shown.stdout == GOLDEN.read_text()
    # The violation is shown at the step where it broke, with the values that broke it.
    assert "VIOLATED AckedWriteDurability" in shown.stdout and "acked[1]=True" in shown.stdout
