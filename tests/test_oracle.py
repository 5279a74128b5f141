"""The oracle (kafkamc/oracle, `--engine reference`) against the fast engines.

It shares nothing with them but spec/ and the invariants' Z3 declarations, so where both
agree the caches, fingerprints, symmetry reduction and compiled checks are right, and where
they disagree one of them is wrong. It keeps exact states and counts symmetry classes
afterwards: its class count is what the fast engines' state count must equal.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace as dc_replace
from pathlib import Path

import pytest
import z3
from helpers import sample_states
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.cache.verify import SymmetryError
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.catalog import INVARIANTS
from kafkamc.invariants.properties import PropertyFile
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.jobs.run import run_check
from kafkamc.oracle.checks import Checks, select
from kafkamc.oracle.classes import canonical, group
from kafkamc.oracle.search import OracleLimits, explore_oracle
from kafkamc.oracle.z3tree import UnknownOperator, evaluate, tree
from kafkamc.spec import fetch as fe
from kafkamc.spec import next as spec_next
from kafkamc.spec.broker_lifecycle import BrokerHeartbeat, broker_heartbeat
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.produce import Produce
from kafkamc.spec.protocol import ERAS, preset
from kafkamc.spec.rpc import RoundTrip
from kafkamc.spec.state import replace
from kafkamc.traces.trace import format_action
from test_protocols import PATHS, ZOO, _with  # the bug zoo (tests/ is on sys.path)

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
EXAMPLE_PROPERTIES = Path(__file__).resolve().parent.parent / "examples" / "properties.py"


# ---------------------------------------------------------------- what it imports

ALLOWED = {"kafkamc", "kafkamc.oracle", "kafkamc.spec", "kafkamc.invariants"} | {
    f"kafkamc.invariants.{m}" for m in ("catalog", "view", "reach", "properties", "reads")
}


def test_the_oracle_imports_only_spec_and_the_declarations():
    """The search, its checks and its classes load nothing of checker/, traces/ or the
    compiled invariants (suite, compile, source); what turns its result into the CLI's Result
    is jobs/reference.py, outside it."""
    modules = [p.stem for p in ORACLE.glob("*.py") if p.stem != "__init__"]
    code = "import sys\n" + "".join(f"import kafkamc.oracle.{m}\n" for m in modules)
    code += "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('kafkamc'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = set(out.stdout.split())
    assert {f"kafkamc.oracle.{m}" for m in modules} <= loaded
    outside = {m for m in loaded if m not in ALLOWED and not m.startswith(("kafkamc.oracle.", "kafkamc.spec."))}
    assert outside == set()


def test_the_oracle_relabels_with_the_spec_but_never_canonicalises_with_it():
    """spec/symmetry.py's relabel says what a relabelling is; its canonical() is what is checked."""
    for path in ORACLE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "kafkamc.spec.symmetry":
                assert {a.name for a in node.names} <= {"relabel", "relabel_broker", "relabel_controller"}, path
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("fingerprint", "canonical_fingerprint"), path
            if isinstance(node, ast.Import):
                assert all(a.name != "kafkamc.spec.symmetry" for a in node.names), path


# ---------------------------------------------------------------- the Z3 trees


@pytest.mark.parametrize(
    "kw",
    [
        dict(rf=3, minisr=2, max_records=2, max_fences=1, unclean=True),
        dict(rf=2, minisr=1, max_records=2, broker_count=3, max_reassignments=1, max_controlled_shutdowns=1),
        dict(rf=2, minisr=2, max_records=1, track_down=True, protocol=preset("3.6.0")),
    ],
)
def test_the_tree_interpreter_agrees_with_the_compiled_checks(kw):
    """Every invariant, the named ones included, and every reachability property, on sampled
    reachable states and on each of their steps."""
    cfg = Config(**kw)
    names = [inv.name for inv in INVARIANTS]
    ours, suite = Checks(cfg, names), InvariantSuite(cfg, names)
    compiled_state = {c.inv.name: c.fn for c in suite.state_invs}
    compiled_step = {c.inv.name: c.fn for c in suite.action_invs} | dict(suite.reach_functions())
    model, seen = Model(cfg), {True: 0, False: 0}
    for s in sample_states(cfg, 150):
        for name, verdict in ours.state_verdicts(s).items():
            assert verdict == bool(compiled_state[name](s)), (name, s)
            seen[verdict] += 1
        for _, t in model.successors(s):
            for name, verdict in ours.step_verdicts(s, t).items():
                assert verdict == bool(compiled_step[name](s, t)), (name, s, t)
                seen[verdict] += 1
    assert seen[True] > 1000 and seen[False] > 0  # both verdicts were exercised


def test_the_tree_evaluates_what_z3_would():
    x, y, p = z3.Int("x"), z3.Int("y"), z3.Bool("p")
    f = z3.And(z3.If(p, x - y * 2, -x) >= 1, z3.Distinct(x, y), z3.Implies(x > 3, z3.Not(p)), z3.Xor(p, x == 0))
    for env in ({"x": 3, "y": 1, "p": True}, {"x": -2, "y": 0, "p": False}, {"x": 4, "y": 1, "p": True}):
        subst = [(x, z3.IntVal(env["x"])), (y, z3.IntVal(env["y"])), (p, z3.BoolVal(env["p"]))]
        expected = z3.is_true(z3.simplify(z3.substitute(f, *subst)))
        assert evaluate(tree(f), env) == expected
    with pytest.raises(UnknownOperator):
        tree(x / y == 1)  # integer division: no declaration uses it, so it has no meaning here


def test_selection_is_the_command_lines():
    """The default set (every tier but "named"), names in any case, and a user's file."""
    cfg = Config(rf=2, minisr=2)
    props = PropertyFile.read(EXAMPLE_PROPERTIES)
    for names in (None, ["ackedwritesurvives", "HighWatermarkMonotonic"]):
        for p in (None, props):
            invs, reach = select(cfg, names, p)
            suite = InvariantSuite(cfg, names, p)
            assert sorted(i.name for i in invs) == sorted(suite.names)
            assert [r.name for r in reach] == [n for n, _ in suite.reach_functions()]
    assert "AckedWriteSurvives" not in [i.name for i in select(cfg)[0]]


# ---------------------------------------------------------------- agreement on the pinned counts

# (configuration, the fast engines' pinned state count, its BFS depth, the oracle's exact count).
# The pinned counts come from tests/test_pinned.py (HOLDS), test_elect_leaders.py,
# test_controlled_shutdown.py and test_reassignment.py; the exact counts are the oracle's own.
SLOW = pytest.mark.slow
PINNED = [
    pytest.param(dict(rf=1, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1), 15, 5, 15, id="rf1"),
    pytest.param(dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1), 4774, 22, 9548, id="rf2-minisr1"),
    pytest.param(dict(rf=2, minisr=2), 9291, 22, 18582, id="rf2-minisr2", marks=SLOW),
    pytest.param(
        dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=2, max_hard_crashes=0, max_isr_shrinks=1),
        6457,
        22,
        12914,
        id="rf2-two-shutdowns",
    ),
    pytest.param(
        dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_fences=1),
        33854,
        26,
        67708,
        id="rf2-fence",
        marks=SLOW,
    ),
    # rf 3: six relabellings per class, about 100 s here. The default check (541,729 classes,
    # some 3.25 million exact states) is left out.
    pytest.param(dict(rf=3, minisr=2, max_records=1), 79914, 24, 479484, id="rf3-one-record", marks=SLOW),
]


@pytest.mark.parametrize("kw,pinned,depth,exact", PINNED)
def test_class_count_is_the_pinned_count(kw, pinned, depth, exact):
    r = explore_oracle(Config(**kw))
    assert (r.verdict, r.classes, r.depth, r.states, r.open_orbits) == ("holds", pinned, depth, exact, 0)


def test_without_symmetry_the_exact_count_is_the_fast_engines():
    """Symmetry off: both count real states, and every transition alike."""
    cfg = Config(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1, symmetry=False)
    fast, ours = explore(FastModel(cfg), InvariantSuite(cfg)), explore_oracle(cfg)
    assert (ours.counted, ours.generated, ours.depth) == (fast.distinct_states, fast.states_generated, fast.depth)
    assert ours.coverage == fast.coverage and ours.classes == 4774


# ---------------------------------------------------------------- verdicts: the bug zoo


def outcome(fast, ours) -> tuple:
    """What both engines must find: verdict, violated invariant, its shortest length and path,
    the depth, and each reachability witness's length; the state count when the search is whole."""
    v = fast.violation
    mine = (ours.verdict, ours.violation, len(ours.trace) - 1 if ours.trace else None, ours.depth)
    theirs = (fast.verdict, v and v.invariant, v and v.length, fast.depth)
    paths = ([format_action(a) for a, _ in ours.trace[1:]], [format_action(a) for a, _ in v.trace[1:]] if v else [])
    reached = ({n: len(t) - 1 for n, t in ours.reached.items()}, {n: len(t) - 1 for n, t in fast.reached.items()})
    return mine, theirs, paths, reached


# The oracle's own budget: rows that take it over 5 s here are slow. The zoo's slow rows (rf 3,
# two records, two shutdowns, depth 14) are left out: each took the oracle 4 to 5 minutes here.
ZOO_SLOW_FOR_THE_ORACLE = {"elr=off", "isr_join_broker_epoch=unchecked", "consumer_hw=leader_hw"}
ORACLE_ZOO = [
    pytest.param(*row, marks=SLOW) if row[0] in ZOO_SLOW_FOR_THE_ORACLE else row
    for row in ZOO
    if not hasattr(row, "values")
]


@pytest.mark.parametrize("rule,bounds,invariant,length", ORACLE_ZOO)
def test_the_bug_zoo_is_found_at_the_same_depth(rule, bounds, invariant, length):
    """No broker pool: the oracle's search from assignment 1..rf is the fast engine's, each
    level's other relabellings after it, so it finds the same shortest path."""
    cfg = Config(protocol=_with(rule), **bounds)
    ours = explore_oracle(cfg)
    assert (ours.verdict, ours.violation, len(ours.trace) - 1) == ("violated", invariant, length)
    assert tuple(format_action(a) for a, _ in ours.trace[1:]) == PATHS[rule]


VIOLATED = [  # tests/test_pinned.py's VIOLATED, and the gate's cheap unsafe rows (tests/gate/kafka.toml)
    dict(rf=2, minisr=1, unclean=True),
    dict(rf=3, minisr=2, acks="1", max_records=1),
    dict(rf=1, minisr=1),
    dict(rf=2, minisr=2, max_hard_crashes=2),
    dict(rf=3, minisr=1, unclean=True, max_records=1),
    # Not here: rf 3 with two hard crashes (the gate's unsafe-correlated-page-cache-loss) takes
    # the oracle two minutes before its depth-10 violation.
]


@pytest.mark.parametrize("kw", VIOLATED)
def test_violations_agree_with_the_fast_engine(kw):
    cfg = Config(**kw)
    mine, theirs, paths, _ = outcome(explore(FastModel(cfg), InvariantSuite(cfg)), explore_oracle(cfg))
    assert mine[:3] == theirs[:3] and mine[0] == "violated"
    assert paths[0] == paths[1]


@pytest.mark.parametrize("era", ERAS)
def test_every_era_agrees(era):
    kw = dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_isr_shrinks=1)
    cfg = Config(protocol=preset(era), **kw)
    fast, ours = explore(FastModel(cfg), InvariantSuite(cfg)), explore_oracle(cfg)
    mine, theirs, paths, reached = outcome(fast, ours)
    assert (mine, paths[0], reached[0]) == (theirs, paths[1], reached[1])
    if fast.verdict == "holds":
        assert ours.classes == fast.distinct_states and ours.open_orbits == 0


def test_the_command_line_runs_it():
    """`--engine reference` prints the class count as its state count, and the same verdict."""
    cfg = Config(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1)
    run = run_check(cfg, reference=True, reach=("ElrElection",))
    fast = run_check(cfg, reach=("ElrElection",))
    assert (run.result.verdict, run.reached()) == (fast.result.verdict, fast.reached()) == ("reached", run.reached())
    whole = run_check(cfg, reference=True).result
    assert (whole.verdict, whole.distinct_states, whole.exact_states) == ("holds", 4774, 9548)
    cut = run_check(cfg, reference=True, limits=dc_replace(run.limits, max_states=100)).result
    assert (cut.verdict, cut.stop_reason) == ("incomplete", "max states 100")


def test_limits_stop_it():
    cfg = Config(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1)
    assert explore_oracle(cfg, limits=OracleLimits(max_depth=3)).stop_reason == "max depth 3"
    assert explore_oracle(cfg, limits=OracleLimits(max_depth=3)).depth == 3
    assert explore_oracle(cfg, limits=OracleLimits(time_limit=0.0)).verdict == "incomplete"


# ---------------------------------------------------------------- the symmetry-breaking edit


def heartbeat_unfences_only_broker_1() -> tuple:
    """BrokerHeartbeat gated on the broker's id: brokers 1 and 2 no longer behave alike."""

    def only_one(cfg, state, a):
        return broker_heartbeat(cfg, state, a) if a.broker == 1 else None

    return tuple(dc_replace(a, step=only_one) if a.type is BrokerHeartbeat else a for a in spec_next.NEXT)


def test_the_oracle_catches_an_edit_that_breaks_symmetry():
    """The fast engines reduce by a symmetry the edited model no longer has: from assignment
    (1, 2) alone they never see broker 2's fence undone, which assignment (2, 1) reaches with
    broker 1 as the follower. They counted 1,790 states (now the fast path's spot check stops
    them: tests/test_mutations.py); the real classes are 2,270 (one fence: which broker it hits
    is a relabelling, so as many as the unedited model has), over 3,073 exact states, 1,467 of
    them with a relabelling never reached."""
    cfg = Config(rf=2, minisr=2, max_records=1, max_hard_crashes=0, max_fences=1)
    edited = heartbeat_unfences_only_broker_1()
    with pytest.raises(SymmetryError):
        explore(FastModel(cfg, actions=edited), InvariantSuite(cfg))
    ours = explore_oracle(cfg, actions=edited)
    assert (ours.verdict, ours.classes, ours.states, ours.open_orbits) == ("holds", 2270, 3073, 1467)
    exact = dc_replace(cfg, symmetry=False)
    assert explore(FastModel(exact, actions=edited), InvariantSuite(exact)).distinct_states == 3073
    plain = explore_oracle(cfg)
    assert (plain.classes, plain.states, plain.open_orbits) == (2270, 2270 * 2, 0)
    assert explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states == 2270


def test_the_brute_force_canonical_form_counts_the_orbits():
    """With a broker pool (3 brokers, 2 replicas) the group is all 6 relabellings, the outsider
    included, not the 2 orders of the replicas: the least key over them gives as many classes
    as the orbits the search counts, and as the fast engines count."""
    pool = dict(broker_count=3, max_records=1, max_hard_crashes=0, max_reassignments=1, max_isr_shrinks=0)
    cfg = Config(rf=2, minisr=1, **pool)
    r = explore_oracle(cfg)
    reachable = sample_states(cfg, 10**6)
    assert len(reachable) == r.states
    by_key = {canonical(s, group(3)) for s in reachable}
    replicas_only = {canonical(s, [p for p in group(3) if p[2] == 3]) for s in reachable}
    assert len(by_key) == r.classes == explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states == 672
    assert len(replicas_only) > r.classes and r.open_orbits == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw,pinned",
    [
        # tests/test_reassignment.py's PINNED: 4 brokers, 3 replicas, 24 relabellings.
        (
            dict(
                rf=3,
                minisr=2,
                broker_count=4,
                max_records=1,
                max_hard_crashes=0,
                max_reassignments=1,
                max_isr_shrinks=0,
            ),
            5499,
        ),
    ],
)
def test_pooled_class_count_is_the_pinned_count(kw, pinned):
    r = explore_oracle(Config(**kw))
    assert (r.verdict, r.classes, r.open_orbits, r.states) == ("holds", pinned, 0, 24 * pinned)


# ---------------------------------------------------------------- mutations (formerly tests/test_reference.py)

SMALL = dict(rf=2, minisr=2, max_records=1, max_hard_crashes=0, max_clean_shutdowns=0, max_fences=1, max_isr_shrinks=1)


def mutated(action_type, step) -> tuple:
    return tuple(dc_replace(a, step=step) if a.type is action_type else a for a in spec_next.NEXT)


def both(cfg: Config, actions=None) -> tuple:
    """(the fast engine's outcome, the oracle's): verdict, count, depth, violation, path, witnesses."""
    fast, ours = explore(FastModel(cfg, actions=actions), InvariantSuite(cfg)), explore_oracle(cfg, actions=actions)
    mine, theirs, paths, reached = outcome(fast, ours)
    return (theirs, fast.distinct_states, paths[1], reached[1]), (mine, ours.counted, paths[0], reached[0])


def test_an_action_that_never_fires_changes_every_engine_alike():
    cfg = Config(**SMALL)
    plain, _ = both(cfg)
    fast, ours = both(cfg, mutated(BrokerHeartbeat, lambda cfg, state, a: None))
    assert fast == ours and fast[1] != plain[1]


def test_a_guard_that_reads_more_is_followed_without_verify_mode():
    """The heartbeat's guard now also reads the ghost, which it never read before: a cache
    keyed on a hand-kept footprint would replay stale outcomes."""
    cfg = Config(**SMALL)

    def guarded(cfg, state, a):
        return broker_heartbeat(cfg, state, a) if state.ghost.hw_seen == 0 else None

    plain, _ = both(cfg)
    fast, ours = both(cfg, mutated(BrokerHeartbeat, guarded))
    assert fast == ours and fast[1] != plain[1]


def test_a_changed_half_of_fetch_is_followed():
    """Fetch is cached in halves; a changed response handler (the follower keeps its stall)
    must reach the search through the same composition."""
    cfg = Config(**SMALL)

    def receive(cfg, state, a, resp):
        out = fe.handle_fetch_response(cfg, state, a, resp)
        was = state.broker(a.follower).stalled
        return out.with_broker(a.follower, replace(out.broker(a.follower), stalled=was))

    plain, _ = both(cfg)
    fast, ours = both(cfg, mutated(fe.Fetch, RoundTrip(fe.send_fetch, fe.handle_fetch, receive)))
    assert fast == ours and fast[1] != plain[1]


def test_next_is_read_when_a_model_is_built(monkeypatch):
    """Changing spec.next.NEXT itself (no argument passed) reaches both."""
    cfg = Config(**SMALL)
    plain = explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states
    monkeypatch.setattr(spec_next, "NEXT", mutated(BrokerHeartbeat, lambda cfg, state, a: None))
    fast = explore(FastModel(cfg), InvariantSuite(cfg)).distinct_states
    assert fast == explore_oracle(cfg).classes != plain


def test_an_interrupt_stops_it_with_what_it_found():
    """Ctrl-C ends the search as every engine ends it: incomplete, stop reason "interrupted"."""
    original = next(a.step for a in spec_next.NEXT if a.type is Produce)
    calls = []

    def impatient(cfg, state, a):
        calls.append(a)
        if len(calls) > 20:
            raise KeyboardInterrupt
        return original(cfg, state, a)

    r = explore_oracle(Config(**SMALL), actions=mutated(Produce, impatient))
    assert (r.verdict, r.stop_reason) == ("incomplete", "interrupted") and r.states > 20
