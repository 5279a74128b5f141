"""The 4.0.0 era: ELR (KIP-966) with the last-known-leader check that only logged.

Kafka 4.0.0's PartitionChangeBuilder.canElectLastKnownLeader tests isAcceptableLeader on the
last known leader but returns true either way, so a fenced last known leader is elected and
made the ISR alone (KAFKA-19522, fixed in 4.1.0). The rule last_known_leader carries it; the
4.0.0 preset has ELR on (opt-in there with eligible.leader.replicas.version=1, the setting
this preset checks) and last_known_leader=any.

The bug zoo's row: `kafkamc check --protocol 4.0.0 --rf 2 --minisr 2 --max-records 0
--max-hard-crashes 2 --max-clean-shutdowns 1 --max-isr-shrinks 0` violates WellFormed ("fenced
broker 2 is not in the ISR") after 8 steps; 4.1.0 holds. The property below states the fix's
promise alone, the leader included.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

from kafkamc.checker.cache.fast import FastModel
from kafkamc.checker.engines.explorer import explore
from kafkamc.invariants.properties import PropertyFile
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.jobs.reference import to_result
from kafkamc.oracle.search import explore_oracle
from kafkamc.spec.broker_lifecycle import BrokerCrash, BrokerRestart, BrokerSessionTimeout
from kafkamc.spec.config import Config
from kafkamc.spec.model import Model
from kafkamc.spec.protocol import PRESETS, RULES, preset
from kafkamc.spec.state import NO_LEADER, bit, replace

PROPERTY = PropertyFile(
    "no_fenced_leader.py",
    """
import z3
from kafkamc.invariants.properties import state_invariant


@state_invariant("the controller names no fenced broker as leader or ISR member (KAFKA-19522, KIP-841)")
def NoFencedLeader(cfg, V):
    return [
        (f"leader {b} is unfenced", z3.Implies(V.c_leader == b, V.registered[b])) for b in cfg.brokers
    ] + [(f"fenced broker {b} is not in the ISR", z3.Implies(V.in_isr[b], V.registered[b])) for b in cfg.brokers]
""",
)

# Two hard crashes and a clean shutdown, no record needed: both brokers lose their logs.
BOUNDS = dict(rf=2, minisr=2, max_records=0, max_hard_crashes=2, max_clean_shutdowns=1, max_isr_shrinks=0)
CFG_40 = Config(protocol=preset("4.0.0"), **BOUNDS)
CFG_41 = Config(protocol=preset("4.1.0"), **BOUNDS)

# Broker 2 is the last known leader (the last ISR member), restarts and leaves the ELR after
# its unclean shutdown, then shuts down and is fenced; broker 1's unclean restart empties the
# ELR, and 4.0.0 elects the fenced broker 2.
PATH = (
    BrokerCrash(1, keep=0),
    BrokerSessionTimeout(1),
    BrokerCrash(2, keep=0),
    BrokerSessionTimeout(2),
    BrokerRestart(2),
    BrokerCrash(2),
    BrokerSessionTimeout(2),
    BrokerRestart(1),
)


def suite(cfg: Config) -> InvariantSuite:
    return InvariantSuite(cfg, ["NoFencedLeader"], PROPERTY)


def test_the_4_0_0_preset():
    assert preset("4.0.0").differences(preset("4.1.0")) == {"last_known_leader": "any"}
    assert (preset("4.0.0").elr, preset("3.7.0").elr) == ("on", "off")
    (rule,) = [r for r in RULES if r.name == "last_known_leader"]
    assert rule.values == ("any", "unfenced") and rule.changes == (("unfenced", "4.1.0", "KAFKA-19522"),)
    assert "4.0.0" in PRESETS and PRESETS["4.0.0"].era() == "4.0.0"


def test_4_0_0_elects_a_fenced_last_known_leader():
    fast = explore(FastModel(CFG_40), suite(CFG_40))
    ref = to_result(explore_oracle(CFG_40, ["NoFencedLeader"], PROPERTY))  # the oracle: Z3 trees, exact states
    for result in (fast, ref):
        assert result.verdict == "violated"
        v = result.violation
        assert (v.invariant, v.length) == ("NoFencedLeader", 8)
        assert tuple(a for a, _ in v.trace[1:]) == PATH
    last = fast.violation.trace[-1][1]
    c = last.controller
    assert (c.leader, c.isr, c.registered, c.recovering) == (2, bit(2), bit(1), True)
    assert not last.broker(2).alive  # dead and fenced: the partition has a leader that cannot serve
    explained = suite(CFG_40).explain("NoFencedLeader", last)
    assert {p.name for p in explained.parts} == {"leader 2 is unfenced", "fenced broker 2 is not in the ISR"}
    # WellFormed's part says the same of the ISR.
    wf = InvariantSuite(CFG_40, ["WellFormed"]).explain("WellFormed", last)
    assert "fenced broker 2 is not in the ISR" in {p.name for p in wf.parts}


def test_the_default_invariants_find_it_as_wellformed():
    result = explore(FastModel(CFG_40), InvariantSuite(CFG_40))
    assert result.verdict == "violated"
    v = result.violation
    assert (v.invariant, v.length) == ("WellFormed", 8)
    assert tuple(a for a, _ in v.trace[1:]) == PATH
    explained = InvariantSuite(CFG_40, ["WellFormed"]).explain("WellFormed", v.trace[-1][1])
    assert {p.name for p in explained.parts} == {"fenced broker 2 is not in the ISR"}


def test_4_1_0_holds_at_the_same_bounds():
    for checks in (suite(CFG_41), InvariantSuite(CFG_41)):
        assert explore(FastModel(CFG_41), checks).verdict == "holds"
    # There the same path leaves the partition offline until broker 2 is back.
    s = Model(CFG_41).initial_states()[0]
    for a in PATH:
        (s,) = Model(CFG_41).step(s, a)
    assert (s.controller.leader, s.controller.lastelr) == (NO_LEADER, bit(2))


def test_a_fenced_leader_that_registers_after_a_hard_crash_is_elected_again_in_a_new_epoch():
    """The 4.0.0 leader of the path restarts after a hard crash: out of the ISR it is no valid
    leader, and the registration (made while it is fenced) leaves the partition leaderless; the
    unfencing elects it again as the last known leader. Two changes, two new leader epochs."""
    model = Model(dc_replace(CFG_40, max_hard_crashes=3))
    s = Model(CFG_40).initial_states()[0]
    for a in PATH:
        (s,) = Model(CFG_40).step(s, a)
    s = s.with_broker(2, replace(s.broker(2), clean=False))  # as if its last shutdown had been a hard crash
    before = s.controller
    (after,) = model.step(s, BrokerRestart(2))
    c = after.controller
    assert (c.leader, c.isr, c.recovering) == (2, bit(2), True)
    assert c.epoch == before.epoch + 2 and c.elr == 0
    assert c.registered == bit(1) | bit(2)
    assert after.broker(2).leader == 2 and after.broker(2).epoch == c.epoch
