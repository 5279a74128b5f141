"""What `kafkamc check` prints after a search: the trace, the configuration, the numbers, the verdict."""

from __future__ import annotations

from kafkamc.cli.common import make_console
from kafkamc.invariants.liveness import FAIRNESS
from kafkamc.jobs.run import CheckRun
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.protocol import NEWEST, PRESETS
from kafkamc.traces import render as render_mod

# The search limits that CheckRun.bounds() lists after the model's bounds.
LIMITS = {
    "max_states": "distinct states the whole search may find",
    "time_limit": "seconds the whole search may take",
    "max_depth": "steps from an initial state a path may take",
}


def bound_lines(bounds: dict) -> list[str]:
    """One line per bound: its setting, its value and what it counts (the flag's help)."""
    meaning = {b.setting: b.meaning for b in BOUNDS} | LIMITS
    width = max(len(f"{k}={v}") for k, v in bounds.items())
    return [f"  {f'{k}={v}':{width}}  {meaning.get(k, '')}".rstrip() for k, v in bounds.items()]


def print_run(run: CheckRun) -> None:
    console = make_console()
    r, cfg = run.result, run.config
    if run.trace is not None:
        render_mod.render(run.trace, console)
    console.print("configuration: " + cfg.kafka_settings(), highlight=False)
    proto = run.protocol()
    changed = cfg.protocol.differences(PRESETS[NEWEST])
    console.print(
        f"protocol: {proto['era']}"
        + (" (rules as of Kafka " + proto["era"] + ")" if proto["era"] != "custom" else "")
        + ("; differs from the newest in " + ", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "")
    )
    console.print("bounds:", highlight=False)
    for line in bound_lines(run.bounds()):
        console.print(line, highlight=False, markup=False)
    console.print(
        f"{r.distinct_states:,} distinct states, {r.states_generated:,} generated, depth {r.depth}, "
        f"{r.elapsed_s:.2f}s ({r.states_per_second:,.0f} distinct states/s)"
    )
    console.print(
        f"symmetry reduction: {'on (states equal up to broker ids count once)' if cfg.symmetry else 'off'}"
        + (f"; {run.workers} worker processes" if run.workers > 1 else "")
    )
    if r.core_note:
        console.print(r.core_note, highlight=False, markup=False)
    console.print(
        f"fingerprint collision probability (optimistic): {r.collision_probability:.1e}"
        + (f"; visited set {r.bytes_per_state:.1f} bytes/state" if r.visited_bytes else "")
        + (f"; largest Spark Python worker: {r.worker_peak_mib:,.0f} MiB peak" if r.worker_peak_mib else "")
    )
    console.print("actions fired: " + ", ".join(f"{k} {v:,}" for k, v in sorted(run.coverage().items())))
    left_off = left_off_line(run.left_off())
    if left_off:
        console.print(left_off, highlight=False)
    for name in run.never_fired():
        console.print(f"[yellow]warning: action {name} never fired, though these bounds allow it[/yellow]")
    reached = run.reached()
    seen = [f"{k} ({v} steps)" for k, v in reached.items() if v is not None]
    if not run.reach_searched:
        why = "random walks do not look for them" if r.strategy == "simulate" else "no safety pass ran"
        console.print(f"reached: not searched ({why})", highlight=False)
    else:
        console.print("reached: " + (", ".join(seen) if seen else "none"))
    for name in run.vacuity_warnings():
        console.print(
            f"[yellow]warning: {name} was expected within these bounds but never happened; "
            "the pass may be vacuous[/yellow]"
        )
    if run.liveness is not None:
        _print_liveness(console, run)
    v = r.violation
    if r.strategy == "simulate":  # --simulate: the walks' numbers, and a verdict that is never "holds"
        from kafkamc.cli.simulate import print_simulation

        print_simulation(console, run, _saved(run))
    elif r.verdict == "reached":
        console.print(
            f"[bold green]reached[/bold green]: {', '.join(run.reach_targets)}; shortest witness {_saved(run)}"
        )
    elif run.verdict() == "unreachable":
        console.print(f"[bold red]unreachable[/bold red]: {', '.join(run.unreached())} never happens within the bounds")
    elif r.verdict == "holds":
        live = run.liveness.properties if run.liveness is not None else []
        console.print(
            "[bold green]holds[/bold green]: "
            + (
                f"every invariant ({', '.join(run.invariants)}) holds in every reachable state within the bounds"
                if run.invariants
                else "no invariant was checked"
            )
            + (f"; every liveness property ({', '.join(live)}) holds under its fairness assumptions" if live else "")
        )
    elif r.verdict == "violated" and v is not None and v.loop is not None:
        cycle = v.length - v.loop
        console.print(
            f"[bold red]violated[/bold red]: {v.invariant} never happens: a lasso of {v.loop} steps to a "
            + (
                f"cycle of {cycle} steps, from step {v.loop}, that repeats forever"
                if cycle
                else "state that stays forever"
            )
            + f" (shortest stem); trace {_saved(run)}"
        )
    elif r.verdict == "violated" and v is not None:
        console.print(
            f"[bold red]violated[/bold red]: {v.invariant} after {v.length} steps "
            f"(shortest: {'yes' if r.strategy == 'bfs' else 'not guaranteed with dfs'}); "
            f"trace {_saved(run)}"
        )
    else:
        covered = run.explored_depth()
        console.print(
            f"[bold yellow]incomplete[/bold yellow]: {run.stop_words()}; "
            + (f"every path of up to {covered} steps explored; " if covered is not None else "")
            + "no violation among the states explored"
        )


def left_off_line(left_off: dict) -> str:
    """One plain line for the moves the bounds leave off, grouped by the bounds that would allow
    them: `left off by bounds: ControllerFenceBroker, BrokerHeartbeat (max_fences=0); ...`."""
    groups: dict[tuple, list] = {}
    for name, bounds in left_off.items():
        groups.setdefault(tuple(bounds), []).append(name)
    parts = [f"{', '.join(names)} ({', '.join(f'{b}=0' for b in bounds)})" for bounds, names in groups.items()]
    return "left off by bounds: " + "; ".join(parts) if parts else ""


def _print_liveness(console, run: CheckRun) -> None:
    """The liveness graph's size and each property's verdict."""
    lv = run.liveness
    assert lv is not None
    lr = lv.result
    if lv.recorded:  # the safety search recorded it (checker/liveness/graph.py): its time is the search's
        how = f"recorded by the search, assembled and analysed in {lr.elapsed_s:.2f}s"
    else:
        how = f"built and analysed in {lr.elapsed_s:.2f}s (analysis {lv.analysis_s:.2f}s)"
    console.print(
        f"liveness graph: {lr.distinct_states:,} states, {lv.edges:,} transitions, "
        f"{lv.graph_bytes / 2**20:.1f} MiB, {how}; symmetry "
        + ("on (exact: the replica set never moves)" if lv.symmetry else "off")
    )
    verdicts = [f"{name} {lv.verdicts.get(name, 'not checked')}" for name in lv.properties]
    console.print("liveness: " + ", ".join(verdicts), highlight=False)
    console.print("fairness: " + FAIRNESS, highlight=False)


def _saved(run: CheckRun) -> str:
    """Where the trace went; when writing failed at the end, the trace printed above is all there is."""
    if run.trace_error is not None:
        return f"[bold red]could not be saved[/bold red] ({run.trace_error}); it is printed above"
    return f"saved to {run.trace_file}"
