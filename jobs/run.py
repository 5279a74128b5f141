"""One `kafkamc check`: explore, confirm any violation with Z3, save the trace, summarise."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kafkamc.checker.cache.budget import DEFAULT_MIB, share_of
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.checker.engines.progress import Progress
from kafkamc.checker.engines.search import Limits, Result
from kafkamc.checker.liveness.check import LivenessReport, ReferenceGraph, check_liveness, symmetry_for_liveness
from kafkamc.checker.liveness.graph import Recording
from kafkamc.checker.simulation.run import run_simulation
from kafkamc.checker.simulation.simulate import NO_VIOLATION, SimResult, Simulation
from kafkamc.invariants.lasso import lasso_problem
from kafkamc.invariants.liveness import FAIRNESS, LivenessSuite, is_liveness
from kafkamc.invariants.liveness import by_name as liveness_by_name
from kafkamc.invariants.properties import PropertyFile
from kafkamc.invariants.suite import Disagreement, InvariantSuite
from kafkamc.spec.config import MAX_BROKERS, Config, ConfigError
from kafkamc.spec.model import Model
from kafkamc.spec.next import BOUNDS, NEXT
from kafkamc.traces.trace import Trace, format_action


@dataclass
class CheckRun:
    config: Config
    limits: Limits
    invariants: list
    action_names: list
    result: Result
    trace: Trace | None = None
    trace_file: str | None = None
    reach_names: tuple = ()
    reach_expected: tuple = ()
    reach_targets: tuple = ()
    spark: SparkSettings | None = None
    workers: int = 1
    engine: str = "local"
    properties: PropertyFile | None = None
    trace_error: str | None = None  # why the trace could not be saved to the path asked for
    liveness: LivenessReport | None = None  # with --liveness: the graph and each property's verdict
    # False when no search looked for the reachability properties: --simulate, or only
    # liveness properties named (no safety pass). "reached: none" would then be a false report.
    reach_searched: bool = True

    def verdict(self) -> str:
        """The run's verdict: the search's, except that a `--reach` search that ended exhaustive
        without every target seen is `unreachable` (the search itself says `holds`)."""
        v = self.result.verdict
        return "unreachable" if v == "holds" and self.reach_targets else v

    def unreached(self) -> list:
        """The `--reach` targets the search did not see."""
        return [n for n in self.reach_targets if n not in self.result.reached]

    def bounds(self) -> dict:
        b = dict(self.config.bounds())
        for k in ("max_states", "time_limit", "max_depth"):
            v = getattr(self.limits, k)
            if v is not None:
                b[k] = v
        return b

    def coverage(self) -> dict:
        return {name: self.result.coverage.get(name, 0) for name in self.action_names}

    def never_fired(self) -> list:
        """Actions that could have fired and never did: their protocol rule and Kafka setting are in
        force (Next declares the ones an action belongs to) and their bounds allow them. Rare ones
        (enabled only in corners most bounds never reach) are not listed."""
        # Only a search that went as far as its bounds (a depth bound is one; for --simulate,
        # every walk asked for) knows what never fires: one that stopped at a violation, a --reach
        # hit, the clock, a state count or an interrupt did not look everywhere.
        r = self.result
        done = r.verdict in ("holds", NO_VIOLATION)
        if not (done or (r.verdict == "incomplete" and (r.stop_reason or "").startswith("max depth"))):
            return []
        fired = self.coverage()
        return [a.name for a in NEXT if not a.rare and fired.get(a.name, 0) == 0 and a.may_fire(self.config)]

    def left_off(self) -> dict:
        """Actions the bounds leave off: in force, but every bound they need is 0 here. Action ->
        those bounds' settings."""
        fired, cfg = self.coverage(), self.config
        off = {a.name: a.bounded_off(cfg) for a in NEXT if fired.get(a.name, 0) == 0 and a.in_force(cfg)}
        return {name: bounds for name, bounds in off.items() if bounds}

    def reached(self) -> dict:
        """Reachability property -> length of its shortest witness found, or None."""
        return {
            name: (len(self.result.reached[name]) - 1 if name in self.result.reached else None)
            for name in self.reach_names
        }

    def vacuity_warnings(self) -> list:
        """Expected events that an exhaustive pass never reached: the pass may be vacuous."""
        if self.result.verdict != "holds" or not self.reach_searched:
            return []
        return [n for n in self.reach_expected if n not in self.result.reached]

    def protocol(self) -> dict:
        p = self.config.protocol
        return {"era": p.era(), "rules": p.to_dict()}

    def stop_words(self) -> str:
        """Why an incomplete search stopped, in words: `interrupted`, or the limit it met and,
        for --max-states, why more states than the limit were found."""
        r = self.result
        reason = r.stop_reason or "a limit"
        if reason == "interrupted":
            return "interrupted"
        if reason.startswith("max states") and r.distinct_states > (self.limits.max_states or 0):
            when = (
                "each breadth-first level, which is finished first"
                if self.workers > 1 or self.spark is not None
                else "all of a state's successors are added"
            )
            return f"stopped at {reason} with {r.distinct_states:,} found: the limit is checked after {when}"
        return f"stopped at {reason}"

    def explored_depth(self) -> int | None:
        """For an incomplete breadth-first search: every path of up to this many steps was
        explored (its states found and checked, its steps checked). The deepest state found
        is at depth D, so level D - 1 was being expanded and every level before it was whole."""
        r = self.result
        if r.verdict != "incomplete" or r.strategy != "bfs":
            return None
        return max(r.depth - 1, 0)

    def _spark_summary(self) -> dict:
        assert self.spark is not None
        return {
            "partitions": self.spark.partitions,
            "spark_master": self.spark.master,
            "spill_dir": self.spark.spill_dir,
            "spark_worker_peak_mib": self.result.worker_peak_mib,
        }

    def summary(self) -> dict:
        r = self.result
        return {
            "verdict": self.verdict(),
            "distinct_states": r.distinct_states,
            "states_generated": r.states_generated,
            "depth": r.depth,
            "elapsed_s": round(r.elapsed_s, 3),
            "states_per_s": round(r.states_per_second, 1),
            "strategy": r.strategy,
            "engine": self.engine,
            "core": self.result.core,  # one process: "native" or "python"; null otherwise
            "workers": self.workers,
            **({} if self.spark is None else self._spark_summary()),
            "config": self.config.to_dict(),
            "protocol": self.protocol(),
            "bounds": self.bounds(),
            "invariants": self.invariants,
            "properties": None if self.properties is None else self.properties.to_json(),
            "stop_reason": r.stop_reason,
            "explored_depth": self.explored_depth(),
            "reach_searched": self.reach_searched,
            "collision_probability": r.collision_probability,
            "symmetry": self.config.symmetry,
            "visited_bytes_per_state": round(r.bytes_per_state, 1),
            # peak resident memory summed over the search's processes (None: not measured)
            "peak_rss_mib": round(r.peak_rss / 2**20, 1) if r.peak_rss else None,
            "peak_bytes_per_state": round(r.peak_bytes_per_state, 1) if r.peak_rss else None,
            "coverage": self.coverage(),
            "never_fired": self.never_fired(),
            "left_off": self.left_off(),
            "reached": self.reached(),
            "vacuity_warnings": self.vacuity_warnings(),
            "liveness": None if self.liveness is None else self.liveness.to_dict(),
            **({"simulation": r.simulation} if isinstance(r, SimResult) else {}),
            "violation": None
            if r.violation is None
            else {
                "invariant": r.violation.invariant,
                "kind": r.violation.kind,
                "length": r.violation.length,
                "loop": r.violation.loop,
                "trace_file": self.trace_file,
                "trace_error": self.trace_error,
                "actions": [format_action(a) for a, _ in r.violation.trace[1:]],
                "explanation": self.trace.explanation if self.trace else None,
            },
        }


def _check_liveness(
    cfg: Config, names, limits: Limits, progress: bool, reference: bool, model, recording: Recording | None
) -> LivenessReport:
    """The liveness graph of cfg (symmetry off with a broker pool), each property checked on it:
    the graph the safety search over `model` recorded, or else one built by a search of its own."""
    live_cfg = symmetry_for_liveness(cfg)
    if recording is None:
        model = ReferenceGraph(live_cfg) if reference else FastModel(live_cfg)
        suite = LivenessSuite(live_cfg, names)
    else:
        suite = recording.suite
    with Progress(enabled=progress and recording is None, strategy="bfs") as reporter:
        report = check_liveness(model, suite, limits, reporter if progress else None, recording)
    report.config = live_cfg
    return report


def _recording(cfg: Config, names, wanted: bool) -> Recording | None:
    """A Recording when the safety search can record the liveness graph itself
    (checker/liveness/graph.py): the fast path, local, in the configuration the graph is built under."""
    if not wanted or symmetry_for_liveness(cfg) != cfg:
        return None
    return Recording(LivenessSuite(cfg, names))


@dataclass(frozen=True)
class SparkSettings:
    """Where and how `--engine spark` runs."""

    master: str | None = "local[*]"  # None: whatever spark-submit set
    partitions: int = 4
    checkpoint_dir: str | None = None
    checkpoint_every: int = 4
    conf: tuple = ()  # (key, value) pairs passed to SparkConf
    spill_dir: str | None = None  # visited sets on local disk (checker/store/spill.py)


def run_check(
    cfg: Config,
    strategy: str = "bfs",
    limits: Limits = Limits(),
    invariants=None,
    progress: bool = False,
    trace_out: str | None = None,
    reach: tuple = (),
    spark: SparkSettings | None = None,
    workers: int = 1,
    reference: bool = False,
    properties: PropertyFile | None = None,
    liveness: bool = False,
    simulate: Simulation | None = None,
    verify: float = 0.0,
    cache_mib: float | None = None,
    python_engine: bool = False,
) -> CheckRun:
    """Explore; `reach` names reachability properties to search for (stop once all are seen).

    With `spark` set, the search is the level-synchronous BFS on Spark (checker/spark/search.py);
    everything after it (Z3 confirmation, explanation, trace) is the same code. With
    `liveness`, or a liveness property among `invariants`, the liveness properties are checked
    after a safety pass that holds (checker/liveness/check.py); with only liveness properties named,
    there is no safety pass. `verify`: the share of expanded states checked against the spec
    (checker/cache/verify.py). `cache_mib`: the step caches' budget, shared by the `workers`
    processes (checker/cache/budget.py); without it, DEFAULT_MIB that grows with the states.
    `python_engine`: one process runs without the native core (checker/core/native_search.py)."""
    cfg = cfg.bounded(BOUNDS)  # a Python caller's Config (the tables, tests); a command's has them already
    live = None if invariants is None else [n for n in invariants if is_liveness(n)]
    if live:
        invariants = [n for n in invariants if not is_liveness(n)]
    only_liveness = bool(live) and not invariants
    entries = share_of(cache_mib or DEFAULT_MIB, workers if spark is None else 1)  # a Spark executor has its own
    model = Model(cfg) if reference else FastModel(cfg, verify=verify, cache_entries=entries, grows=cache_mib is None)
    suite = InvariantSuite(cfg, invariants, properties)
    known = [name for name, _ in suite.reach_functions()]
    for name in reach:
        if name not in known:
            raise ConfigError(_unknown_reach(cfg, name, known))
    wanted = bool(liveness or live) and not (only_liveness or reference or simulate or spark)
    recording = _recording(cfg, live or None, wanted and strategy == "bfs")
    with Progress(enabled=progress, strategy=None if simulate else strategy) as reporter:
        if only_liveness:
            result = Result("holds", "bfs", 0, 0, 0, 0.0)
        elif simulate is not None:  # random walks (checker/simulation/simulate.py); their verdict is never "holds"
            result = run_simulation(
                model, suite, simulate, limits, reporter if progress else None, workers, spark, invariants, properties
            )
        elif reference:
            from kafkamc.jobs.reference import run_reference  # exact states, Z3 trees: kafkamc/oracle

            result = run_reference(
                cfg, invariants, properties, limits, reporter if progress else None, frozenset(reach)
            )
        elif spark is None and workers > 1:
            from kafkamc.checker.engines.workers import explore_workers

            assert isinstance(model, FastModel)  # workers ship fingerprints: the fast model only
            result = explore_workers(
                model,
                suite,
                workers,
                limits,
                progress=reporter if progress else None,
                stop_when_reached=frozenset(reach),
                recording=recording,
                engine="python" if python_engine else "auto",
            )
        elif spark is None:
            result = explore(
                model,
                suite,
                strategy,
                limits,
                progress=reporter if progress else None,
                stop_when_reached=frozenset(reach),
                recording=recording,
                engine="python" if python_engine else "auto",
            )
        else:
            from kafkamc.checker.spark.search import explore_spark

            result = explore_spark(
                cfg,
                invariants,
                limits,
                spark.partitions,
                spark.master,
                dict(spark.conf),
                spark.checkpoint_dir,
                spark.checkpoint_every,
                progress=reporter if progress else None,
                stop_when_reached=frozenset(reach),
                properties=properties,
                spill_dir=spark.spill_dir,
            )
    report = None
    if (liveness or live) and result.verdict == "holds":
        report = _check_liveness(cfg, live or None, limits, progress, reference, model, recording)
        result = report.merged(result, replace_counts=only_liveness)
    for name, trace in result.reached.items():
        if not suite.confirm_reached(name, trace[-1][1], trace[-2][1]):
            raise Disagreement(f"{name}: the fast evaluator reported a witness that Z3 does not confirm")
    run = CheckRun(
        cfg,
        limits,
        suite.names,
        model.action_names(),
        result,
        reach_names=tuple(known),
        reach_expected=tuple(suite.reach_expected()),
        reach_targets=tuple(reach),
        spark=spark,
        workers=workers if spark is None else 1,
        engine="reference" if reference else "local" if spark is None else "spark",
        properties=properties,
        liveness=report,
        reach_searched=not (only_liveness or simulate is not None),
    )
    needs = {} if properties is None else {"properties": properties.to_json()}
    if result.violation is not None and result.violation.kind == "liveness":
        v = result.violation
        live_cfg = report.config if report is not None and report.config is not None else cfg
        problem = lasso_problem(live_cfg, v.invariant, v.trace, v.loop or 0)
        if problem is not None:
            raise Disagreement(f"{v.invariant}: the lasso found is not confirmed: {problem}")
        prop = liveness_by_name(v.invariant)
        explanation = {"invariant": prop.name, "meaning": prop.meaning, "fairness": FAIRNESS, "failed_parts": []}
        run.trace = Trace(live_cfg, v.trace, v.invariant, v.kind, explanation, dict(needs), loop=v.loop)
    elif result.violation is not None:
        v = result.violation
        last = v.trace[-1][1]
        before = v.trace[-2][1] if len(v.trace) > 1 else None
        explanation = suite.explain(v.invariant, last, before if v.kind == "action" else None).to_dict()
        explanation["also_violated"] = [n for n in suite.all_violated(last, before) if n != v.invariant]
        run.trace = Trace(cfg, v.trace, v.invariant, v.kind, explanation, extra=dict(needs))
    elif result.verdict == "reached":
        # The witness of the last target reached, saved like a counterexample so it can be shown and replayed.
        name = reach[-1]
        run.trace = Trace(cfg, result.reached[name], extra={"reached": name, **needs})
    if run.trace is not None and trace_out:
        try:
            run.trace_file = str(run.trace.save(Path(trace_out)))
        except OSError as e:  # checked before the search; the disk can still fill or vanish
            run.trace_error = f"{trace_out}: {e.strerror or e}"
    return run


def _unknown_reach(cfg: Config, name: str, known: list) -> str:
    """Why `--reach NAME` cannot be searched: a property that exists only with spare brokers (a
    reassignment needs somewhere to move to) says so, rather than being called unknown."""
    from kafkamc.invariants.reach import catalog

    if cfg.rf < MAX_BROKERS and name in {r.name for r in catalog(replace(cfg, broker_count=cfg.rf + 1))}:
        return f"{name} needs a broker outside the replica set: add --brokers {cfg.rf + 1} (or more)"
    return f"unknown reachability property {name!r}; properties: {', '.join(known)}"
