"""`kafkamc check --simulate`: its flags, the combinations that make no sense, and what it prints.

The run itself is checker/simulation/simulate.py. A simulation proves nothing: when its walks meet no
violation the verdict is "no violation found" (exit 0, like a pass, so that CI can run it),
never "holds".
"""

from __future__ import annotations

import click
from kafkamc.checker.simulation.simulate import NO_VIOLATION, SimResult, Simulation
from kafkamc.cli.common import UsageProblem, only_with
from kafkamc.invariants.liveness import is_liveness
from kafkamc.jobs.run import CheckRun

SIMULATE_ONLY = ("walks", "walk_depth", "seed")
DEFAULTS = Simulation()

_OPTIONS = (
    click.option(
        "--simulate",
        is_flag=True,
        help="random walks from the initial states (swarm simulation) in place of the exhaustive search: "
        "reaches bounds it cannot, proves nothing",
    ),
    click.option("--walks", type=int, default=DEFAULTS.walks, show_default=True, help="walks to take (--simulate)"),
    click.option(
        "--walk-depth", type=int, default=DEFAULTS.depth, show_default=True, help="steps at most per walk (--simulate)"
    ),
    click.option(
        "--seed",
        type=int,
        default=DEFAULTS.seed,
        show_default=True,
        help="seed of the walks (--simulate): the same seed takes the same walks, however they are spread",
    ),
)

# check's options that mean nothing for random walks, and why.
_EXHAUSTIVE_ONLY = {
    "liveness": "it needs the whole state graph",
    "strategy": "it orders the exhaustive search",
    "max_states": "it limits the exhaustive search; use --walks",
    "max_depth": "it limits the exhaustive search; use --walk-depth",
    "reach": "it searches for a shortest witness",
    "checkpoint_dir": "walks keep no state to checkpoint",
    "spill_dir": "walks keep no visited set to spill",
}


def simulate_options(command):
    """--simulate, --walks, --walk-depth, --seed on `check`."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def simulation_settings(options: dict) -> Simulation | None:
    """The Simulation the flags ask for (taken out of `options`), None without --simulate.
    A flag that applies only with --simulate, or one --simulate cannot honour, is bad input."""
    ctx = click.get_current_context()
    on, walks, depth, seed = (options.pop(k) for k in ("simulate", *SIMULATE_ONLY))
    only_with(ctx, "--simulate", on, SIMULATE_ONLY)
    if not on:
        return None
    flag = {p.name: p.opts[0] for p in ctx.command.params}
    for name, why in _EXHAUSTIVE_ONLY.items():
        if name in flag and ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT:
            raise UsageProblem(f"--simulate does not take {flag[name]}: {why}")
    if ctx.params.get("engine") == "reference":
        raise UsageProblem("--simulate walks the fast model; drop --engine reference")
    live = [n for n in ctx.params.get("invariants", ()) if is_liveness(n)]
    if live:
        raise UsageProblem(f"--simulate checks no liveness property ({live[0]}): it needs the whole state graph")
    for option, value in (("--walks", walks), ("--walk-depth", depth)):
        if value < 1:
            raise UsageProblem(f"{option} must be at least 1 (got {value})")
    return Simulation(walks=walks, depth=depth, seed=seed)


def print_simulation(console, run: CheckRun, saved: str) -> None:
    """The walks' numbers and the verdict, in place of the exhaustive search's verdict line."""
    r = run.result
    assert isinstance(r, SimResult)
    s = r.simulation
    console.print(
        f"simulation: seed {s['seed']}, {s['walks']:,} of {s['walks_asked']:,} walks of up to {s['walk_depth']} "
        f"steps, {s['steps']:,} steps, deepest {s['deepest']}, {s['deadlocks']:,} ended at a deadlock; "
        f"{s['distinct_states_seen']:,} distinct states seen; {s['walks_per_s']:,.1f} walks/s, "
        f"{s['steps_per_s']:,.0f} steps/s",
        highlight=False,
    )
    if r.verdict == "violated" and (v := r.violation) is not None:
        console.print(
            f"[bold red]violated[/bold red]: {v.invariant} after {v.length} steps (walk {s['violating_walk']} of "
            f"seed {s['seed']}, shrunk from {s['raw_length']} steps in {s['shrink_s']:.2f}s; not necessarily "
            f"the shortest); trace {saved}"
        )
    elif r.verdict == NO_VIOLATION:
        checked = ", ".join(run.invariants) if run.invariants else "no invariant"
        console.print(
            f"[bold yellow]{NO_VIOLATION}[/bold yellow]: {s['walks']:,} random walks met no violation of "
            f"{checked}; a simulation is no proof: the exhaustive check decides whether the invariants hold"
        )
    else:
        console.print(
            f"[bold yellow]incomplete[/bold yellow]: {run.stop_words()} after {s['walks']:,} of "
            f"{s['walks_asked']:,} walks; no violation on them"
        )
