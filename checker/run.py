"""One `kafkamc check`: explore, confirm any violation with Z3, save the trace, summarise."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kafkamc.checker.explorer import Limits, Result, explore
from kafkamc.checker.progress import Progress
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.traces.trace import Trace, format_action


@dataclass
class CheckRun:
    config: Config
    limits: Limits
    invariants: list
    action_names: list
    result: Result
    trace: Optional[Trace] = None
    trace_file: Optional[str] = None

    def bounds(self) -> dict:
        b = dict(self.config.bounds())
        for k in ("max_states", "time_limit", "max_depth"):
            v = getattr(self.limits, k)
            if v is not None:
                b[k] = v
        return b

    def coverage(self) -> dict:
        return {name: self.result.coverage.get(name, 0) for name in self.action_names}

    # The bound that, at 0, keeps an action from ever firing.
    ENABLED_BY = {"ControllerFenceBroker": "max_fences", "BrokerHeartbeat": "max_fences",
                  "BrokerCrash": "max_crashes", "BrokerRestart": "max_crashes", "Produce": "max_records"}

    def never_fired(self) -> list:
        return [name for name, n in self.coverage().items() if n == 0]

    def summary(self) -> dict:
        r = self.result
        return {
            "verdict": r.verdict,
            "distinct_states": r.distinct_states,
            "states_generated": r.states_generated,
            "depth": r.depth,
            "elapsed_s": round(r.elapsed_s, 3),
            "states_per_s": round(r.states_per_second, 1),
            "strategy": r.strategy,
            "engine": "local",
            "config": self.config.to_dict(),
            "bounds": self.bounds(),
            "invariants": self.invariants,
            "stop_reason": r.stop_reason,
            "collision_probability": r.collision_probability,
            "coverage": self.coverage(),
            "violation": None if r.violation is None else {
                "invariant": r.violation.invariant,
                "kind": r.violation.kind,
                "length": r.violation.length,
                "trace_file": self.trace_file,
                "actions": [format_action(a) for a, _ in r.violation.trace[1:]],
                "explanation": self.trace.explanation if self.trace else None,
            },
        }


def run_check(cfg: Config, strategy: str = "bfs", limits: Limits = Limits(), invariants=None,
              progress: bool = False, trace_out: Optional[str] = None) -> CheckRun:
    model = Model(cfg)
    suite = InvariantSuite(cfg, invariants)
    with Progress(enabled=progress) as reporter:
        result = explore(model, suite, strategy, limits, progress=reporter if progress else None)
    run = CheckRun(cfg, limits, suite.names, model.action_names(), result)
    if result.violation is not None:
        v = result.violation
        last = v.trace[-1][1]
        before = v.trace[-2][1] if len(v.trace) > 1 else None
        explanation = suite.explain(v.invariant, last, before if v.kind == "action" else None).to_dict()
        explanation["also_violated"] = [n for n in suite.all_violated(last, before) if n != v.invariant]
        run.trace = Trace(cfg, v.trace, v.invariant, v.kind, explanation)
        if trace_out:
            run.trace_file = str(run.trace.save(Path(trace_out)))
    return run
