"""Golden-file tests of the terminal rendering of a saved counterexample: at 120 columns, and
at 70, where the brokers' table no longer fits and each broker gets a wrapped line.

If a deliberate change to the rendering moves this output, rerun with
KAFKAMC_UPDATE_GOLDEN=1 to rewrite the files, and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("columns,name", [(120, "acks1-trace-show.txt"), (70, "acks1-trace-show-70.txt")])
def test_trace_show_matches_golden(tmp_path, kafkamc_cli, columns, name):
    trace = tmp_path / "t.json"
    p = kafkamc_cli("check", "--acks", "1", "--max-records", "1", "--quiet", "--trace-out", trace)
    assert p.returncode == 1, p.stderr
    shown = kafkamc_cli("trace", "show", trace, columns=columns)
    assert shown.returncode == 0, shown.stderr
    golden = GOLDEN / name
    if os.environ.get("KAFKAMC_UPDATE_GOLDEN") == "1":
        golden.write_text(shown.stdout)
    assert shown.stdout == golden.read_text()
    out = shown.stdout
    # The story comes first; the violation is shown at the step where it broke, in Kafka's words.
    assert out.index("story: AckedWriteDurability") < out.index("step 0: Init")
    assert "VIOLATED AckedWriteDurability" in out and "acknowledged to the producer: yes" in out
    # What producers and consumers were told is on its own line, not the controller's.
    assert "observed (not protocol state): committed -  acknowledged r1" in out
    assert all(len(line) == columns for line in out.splitlines())
