"""`--engine reference`: the oracle's result as the summary of `kafkamc check` expects it
(checker/engines/search.py's Result). It lives here, with what runs a check (jobs/run.py calls
`run_reference`), so that the oracle itself imports nothing of the engines it checks
(tests/test_oracle.py, and the import contracts in pyproject.toml).
"""

from __future__ import annotations

from kafkamc.checker.engines.search import Limits, Result, Violation
from kafkamc.oracle.search import OracleLimits, OracleResult, explore_oracle
from kafkamc.spec.config import Config


def to_result(r: OracleResult) -> Result:
    """The state count is the class count with symmetry (what the fast engines count), else
    the exact count; the exact count is kept beside it (Result.exact_states)."""
    violation = None if r.violation is None else Violation(r.violation, r.kind or "state", r.trace)
    out = Result(
        r.verdict,
        "bfs",
        r.counted,
        r.generated,
        r.depth,
        r.elapsed_s,
        r.stop_reason,
        violation,
        r.coverage,
        r.reached,
    )
    out.exact_states = r.states  # type: ignore[attr-defined]
    return out


def run_reference(
    cfg: Config,
    invariants: list[str] | None,
    properties,
    limits: Limits,
    progress=None,
    stop_when_reached: frozenset = frozenset(),
) -> Result:
    """`--engine reference`: the oracle's search, reported as every engine reports."""
    lim = OracleLimits(limits.max_states, limits.time_limit, limits.max_depth)
    return to_result(explore_oracle(cfg, invariants, properties, lim, progress, stop_when_reached))
