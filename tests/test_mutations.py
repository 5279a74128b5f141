"""Spec edits the fast path must follow exactly, or refuse with a clear error.

A new engineer edits spec/ and runs `kafkamc check`. The fast path caches what the spec
computes (checker/cache/fast.py, outcomes.py, footprint.py) and reduces by symmetry
(spec/symmetry.py); each edit here once slipped past it with no warning (issue 32):
- spec.hw.observe made to read brokers that serve no reads (the observation's cache key
  was written by hand);
- a guard that reads the state through a tuple index (only the accessors were recorded);
- BrokerHeartbeat made to unfence only broker 1 (breaks the symmetry the reduction assumes).
The first two must now be followed exactly (the same count as a plain search of the spec);
the third stops the check with a SymmetryError that names the step. Issue 43: a guard that
reads past every recorded accessor (tuple.__getitem__(state, 2).acked) once passed by default
with a wrong count (1,859 against the oracle's 1,652 in its report); it now stops the check
without --verify, and state.key() in a guard is followed.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import run_kafkamc
from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.cache.footprint import RawReadError
from kafkamc.checker.cache.verify import FastPathError, SymmetryError
from kafkamc.checker.engines.explorer import explore
from kafkamc.cli.main import main
from kafkamc.oracle.search import explore_oracle
from kafkamc.spec import broker_lifecycle as lc
from kafkamc.spec import produce as pr
from kafkamc.spec.config import Config
from kafkamc.spec.hw import observe
from kafkamc.spec.model import Model
from kafkamc.spec.next import NEXT
from kafkamc.spec.state import replace


def observe_follower_leo(cfg, state):
    """spec.hw.observe, edited: a consumer's HW also takes the log end of every live broker
    that does not lead (a plausible-looking slip: it reads the followers)."""
    nxt = observe(cfg, state)
    top = max(
        (len(state.broker(b).log) for b in cfg.brokers if not state.leads(b) and state.broker(b).alive), default=0
    )
    if top <= nxt.ghost.hw_seen:
        return nxt
    return replace(nxt, ghost=replace(nxt.ghost, hw_seen=top))


def produce_unless_read(cfg, state, a):
    """Produce, edited: its guard reads the ghost through the state's tuple index."""
    if state[2].hw_seen > 0:
        return None
    return pr.produce(cfg, state, a)


def heartbeat_broker_one(cfg, state, a):
    """BrokerHeartbeat, edited: only broker 1 is ever unfenced."""
    return lc.broker_heartbeat(cfg, state, a) if a.broker == 1 else None


def heartbeat_candidates_one(cfg, c, br, u, b):
    return lc.heartbeat_candidates(cfg, c, br, u, b) if b == 1 else ()


def with_step(action_type, step=None, candidates=None) -> tuple:
    out = []
    for a in NEXT:
        if a.type is action_type:
            a = dataclasses.replace(a, step=step or a.step, candidates=candidates or a.candidates)
        out.append(a)
    return tuple(out)


def counts(cfg, **edit) -> tuple[int, int]:
    """(distinct states of the fast engine, of the oracle), no invariants."""
    fast = explore(FastModel(cfg, **edit)).distinct_states
    return fast, explore_oracle(cfg, [], **edit).counted


OBSERVE_CFG = dict(rf=2, minisr=1, max_hard_crashes=0, max_clean_shutdowns=1)


def test_an_observe_that_reads_followers_is_followed_exactly():
    cfg = Config(**OBSERVE_CFG, symmetry=False)
    # Before observe's reads were recorded: 10,691 against 9,548 (keyed on serving brokers only).
    assert counts(cfg, observation=observe_follower_leo) == (9548, 9548)


def test_a_guard_reading_a_tuple_index_is_followed_exactly():
    cfg = Config(**OBSERVE_CFG, symmetry=False)
    # Before indexing was recorded: 5,556 against 6,604 (an outcome reused across ghosts).
    assert counts(cfg, actions=with_step(pr.Produce, step=produce_unless_read)) == (6604, 6604)


FENCE_CFG = dict(rf=2, minisr=2, max_records=1, max_clean_shutdowns=1, max_hard_crashes=0, max_fences=1)


@pytest.mark.parametrize(
    "edit",
    [dict(step=heartbeat_broker_one), dict(candidates=heartbeat_candidates_one)],
    ids=["in the step", "in the candidates"],
)
def test_a_step_that_singles_out_a_broker_stops_the_check(edit):
    cfg = Config(**FENCE_CFG)
    # Before: 26,591 states from every engine, the reference's included, with no warning.
    with pytest.raises(SymmetryError, match="not symmetric in the broker ids") as err:
        explore(FastModel(cfg, actions=with_step(lc.BrokerHeartbeat, **edit)))
    assert "BrokerHeartbeat" in str(err.value)


def produce_bypassing_the_record(cfg, state, a):
    """Produce with a guard that reads the ghost past every recorded accessor (tuple's own
    item getter): the one read the fast path cannot see, which verify mode must."""
    if tuple.__getitem__(state, 2).hw_seen > 0:
        return None
    return pr.produce(cfg, state, a)


def observe_bypassing_the_record(cfg, state):
    """observe_follower_leo, reading the followers past every recorded accessor."""
    nxt = observe(cfg, state)
    brokers = tuple.__getitem__(state, 1)
    top = max((len(br.log) for b, br in enumerate(brokers, 1) if br.alive and br.leader != b), default=0)
    if top <= nxt.ghost.hw_seen:
        return nxt
    return replace(nxt, ghost=replace(nxt.ghost, hw_seen=top))


def restart_unless_acked(cfg, state, a):
    """BrokerRestart with issue 43's guard: no restart once a write was acknowledged, the ghost
    read past every recorded accessor."""
    if tuple.__getitem__(state, 2).acked:
        return None
    return lc.broker_restart(cfg, state, a)


def restart_unless_acked_by_key(cfg, state, a):
    """The same guard, read from state.key() (the ghost is its third item)."""
    if state.key()[2][0]:
        return None
    return lc.broker_restart(cfg, state, a)


RAW_READ = "a step read the state's raw tuple items"


@pytest.mark.parametrize(
    "edit",
    [
        dict(actions=with_step(pr.Produce, step=produce_bypassing_the_record)),
        dict(observation=observe_bypassing_the_record),
        dict(actions=with_step(lc.BrokerRestart, step=restart_unless_acked)),
    ],
    ids=["a step", "observe", "issue 43's restart guard"],
)
@pytest.mark.parametrize("verify", [0.0, 1.0], ids=["default", "verify"])
def test_a_read_the_record_cannot_see_stops_the_check(edit, verify):
    cfg = Config(**OBSERVE_CFG, symmetry=False)
    with pytest.raises(RawReadError, match=RAW_READ):
        explore(FastModel(cfg, verify=verify, **edit))


def test_a_raw_read_on_the_command_line_is_one_line(monkeypatch, capsys):
    """The same refusal through main(): exit 2 and one line, never a count or a traceback."""
    import kafkamc.jobs.run as run

    edited = with_step(lc.BrokerRestart, step=restart_unless_acked)
    monkeypatch.setattr(run, "FastModel", lambda cfg, **kw: FastModel(cfg, actions=edited, **kw))
    with pytest.raises(SystemExit) as e:
        main(["check", "--rf", "2", "--minisr", "1", "--max-records", "1", "--workers", "1", "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kafkamc: error: the fast path cannot follow this spec: {RAW_READ}") and err.count("\n") == 1


def test_the_oracle_follows_the_raw_read():
    """What the refused edit means (the oracle runs the step on plain States): a real count."""
    cfg = Config(**OBSERVE_CFG, symmetry=False)
    assert explore_oracle(cfg, [], actions=with_step(lc.BrokerRestart, step=restart_unless_acked)).counted == 7694


def test_a_guard_reading_state_key_is_followed_exactly():
    cfg = Config(**OBSERVE_CFG, symmetry=False)
    assert counts(cfg, actions=with_step(lc.BrokerRestart, step=restart_unless_acked_by_key)) == (7694, 7694)


def test_verify_mode_finds_the_symmetry_edit_without_the_spot_checks(monkeypatch):
    import kafkamc.checker.cache.fast as fast
    import kafkamc.checker.cache.outcomes as outcomes

    for module in (fast, outcomes):
        monkeypatch.setattr(module, "FIRST", 0)
        monkeypatch.setattr(module, "EVERY", 10**9)
    actions = with_step(lc.BrokerHeartbeat, step=heartbeat_broker_one)
    assert explore(FastModel(Config(**FENCE_CFG), actions=actions)).distinct_states == 26591  # unchecked: wrong
    with pytest.raises(SymmetryError, match="BrokerHeartbeat"):
        explore(FastModel(Config(**FENCE_CFG), verify=0.05, actions=actions))


def test_verify_on_the_command_line():
    small = ("check", "--rf", "2", "--minisr", "2", "--max-records", "1", "--json")
    plain, verified = run_kafkamc(*small), run_kafkamc(*small, "--verify", "0.25", "--workers", "1")
    assert plain.returncode == verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["distinct_states"] == json.loads(plain.stdout)["distinct_states"]
    for flags, message in [
        (("--verify", "0"), "--verify takes a share of the states, above 0 and at most 1 (got 0)"),
        (("--verify", "0.5", "--engine", "reference"), "--verify checks the fast path: it runs with --engine local"),
    ]:
        p = run_kafkamc(*small, *flags)
        assert p.returncode == 2 and p.stderr.startswith(f"kafkamc: error: {message}"), p.stderr


def test_the_search_leaves_out_only_the_actions_that_cannot_fire():
    """A search enumerates the actions its bounds, rule and settings let fire (Action.may_fire);
    the reference engine and trace validation enumerate all of Next."""
    cfg = Config(rf=3, minisr=2)
    names = [fn.__name__ for fn in FastModel(cfg).spec.idle_fns]
    assert names == [
        "registration_candidates",
        "offsets_candidates",
        "fence_candidates",
        "heartbeat_candidates",
        "auto_rebalance_candidates",
        "elect_leaders_candidates",
        "candidates",
        "controlled_shutdown_candidates",
        "complete_candidates",
        "reassignment_candidates",
        "cancel_candidates",
    ]
    assert len(Model(cfg).candidate_fns) == 12 and len(Model(cfg, prune=False).candidate_fns) == len(NEXT) == 23


def test_an_action_declared_unable_to_fire_that_offers_a_step_stops_the_check():
    # BrokerCrash declared to spend fences, not crashes: at --max-fences 0 the search would
    # leave it out, and every state after a crash with it. The first candidate miss says so.
    actions = tuple(dataclasses.replace(a, bounds=(lc.FENCES,)) if a.type is lc.BrokerCrash else a for a in NEXT)
    cfg = Config(rf=2, minisr=1, max_records=1, max_fences=0)
    with pytest.raises(FastPathError, match="BrokerCrash is declared unable to fire under this configuration"):
        explore(FastModel(cfg, actions=actions))
    assert explore(FastModel(cfg)).distinct_states == explore_oracle(cfg, [], actions=actions).counted
