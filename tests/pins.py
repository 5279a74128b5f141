"""The figures the README quotes, pinned once.

Two kinds of test read this table: the tests that check the model gives each figure
(tests/test_pinned.py imports its figures from here; for a figure another test file asserts,
`Owned` names that test, and tests/test_readme.py checks the test still asserts the same
value), and tests/test_readme.py, which checks that every figure the README quotes equals
its pin. A change that moves a count therefore fails twice: in the test that runs the model,
until the pin moves (say why beside it), and in the README test, until the README follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Owned:
    """A figure asserted by another test: `test` is "tests/FILE.py::function", and the
    function must contain `value` as a literal (tests/test_readme.py checks it does)."""

    value: int
    test: str


# `kafkamc check --rf 3 --minisr 2`, the main job (the README's sample output). States and depth
# are checked by tests/test_pinned.py (slow); the rest by tests/test_readme.py's slow run of the
# command, compared line by line with the README.
DEFAULT_CHECK: dict[str, Any] = dict(
    argv=("check", "--rf", "3", "--minisr", "2", "--quiet"),
    states=541729,  # 485,539 before trace validation (history: tests/test_pinned.py)
    generated=2254145,
    depth=30,
    visited_bytes_per_state=14.7,
    coverage={
        "AlterPartition": 102115,
        "AlterPartitionReassignments": 0,
        "AutoLeaderRebalance": 0,
        "BrokerCrash": 289882,
        "BrokerHeartbeat": 0,
        "BrokerRegistration": 0,  # new in issue 41: only under --rule incarnations=kraft_steps
        "BrokerRestart": 120623,
        "BrokerSessionTimeout": 41199,
        "CancelPartitionReassignment": 0,
        "CheckpointHighWatermarks": 43475,
        "ControlledShutdown": 0,
        "ControlledShutdownComplete": 0,
        "ControllerFenceBroker": 0,
        "ElectLeaders": 0,
        "ElectLeadersUnclean": 0,
        "Fetch": 840858,
        "HandleAlterPartitionResponse": 313085,
        "LogRetention": 0,
        "MetadataUpdate": 329536,
        "OffsetsForLeaderEpoch": 0,
        "Produce": 76130,
        "ProduceRetry": 1112,
        "ReplicaStall": 96124,
    },
    # shortest witness of each reachability property the search saw, in steps
    reached={"HighWatermarkAdvances": 5, "ElrElection": 5},
)

# The README's sample counterexample (`kafkamc check --rf 2 --minisr 1 --unclean`, its saved
# JSON and `trace replay`): tests/test_pinned.py checks the length, tests/test_readme.py runs it.
UNCLEAN_SAMPLE: dict[str, Any] = dict(kw=dict(rf=2, minisr=1, unclean=True), invariant="NoCommittedDataLoss", length=6)

# examples/properties.py: `--invariant NoAckBelowMinIsr` at rf 3, min ISR 2 (run by tests/test_readme.py).
NO_ACK_BELOW_MIN_ISR_LENGTH = 8

# The re-election finding (docs/FINDINGS.md): shortest traces.
FINDING_COMMITTED = Owned(16, "tests/test_findings.py::test_reelection_loses_committed_record_on_newest")
FINDING_ACKED = Owned(18, "tests/test_findings.py::test_reelection_loses_acknowledged_write_on_newest")

# KAFKA-10706 as a lasso: the step its cycle starts at (the stem's length).
KAFKA_10706_STEM = Owned(12, "tests/test_liveness.py::test_kafka_10706_follower_never_rejoins_under_the_old_rule")

# Swarm simulation, the README's example: the violating walk, its shrunk and raw lengths.
SIMULATION_WALK = Owned(591, "tests/test_simulate.py::test_the_pinned_seed_finds_the_kip_903_loss_at_rf_5")
SIMULATION_LENGTH = Owned(16, "tests/test_simulate.py::test_the_pinned_seed_finds_the_kip_903_loss_at_rf_5")
SIMULATION_RAW_LENGTH = Owned(26, "tests/test_simulate.py::test_the_pinned_seed_finds_the_kip_903_loss_at_rf_5")

# `kafkamc tradeoff --max-rf 3` (20 minutes): (offline forever with a replica up, loses committed
# data) per row of the README's table. The RF 2 rows are also asserted by
# tests/test_liveness.py::test_the_tradeoff_table_shows_what_elr_buys_and_costs (slow); the RF 3
# rows only by running the command.
TRADEOFF = {
    # (rf, min ISR): ELR off unclean off, ELR off unclean on, ELR on unclean off, ELR on unclean on
    (2, 1): ("offline, loses", "available, loses", "offline, loses", "available, loses"),
    (2, 2): ("offline, loses", "available, loses", "offline, durable", "available, loses"),
    (3, 1): ("offline, loses", "available, loses", "offline, loses", "available, loses"),
    (3, 2): ("offline, loses", "available, loses", "offline, durable", "available, loses"),
    (3, 3): ("offline, loses", "available, loses", "available, durable", "available, durable"),
}
