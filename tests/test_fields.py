"""The fields each group of state invariant parts reads (invariants/fields.py), which the native
core keys the groups' remembered verdicts on (checker/core/views.py, native/src/verdicts.rs)."""

from __future__ import annotations

from collections import defaultdict, deque

import z3
from kafkamc.checker.core.views import NONE, Views
from kafkamc.invariants.compile import compile_function
from kafkamc.invariants.fields import Reads, function_fields
from kafkamc.invariants.reads import SPEC_FUNCTIONS
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config
from kafkamc.spec.hw import exposed_hw, isr_in_use
from kafkamc.spec.model import Model
from kafkamc.spec.state import replace

BROKER_PAIR = ("alive", "epoch", "leader")  # two leaders in one epoch: split brain
DURABLE = ("alive", "bepoch", "hw", "log")


def test_the_default_groups_read_few_fields_of_each_component():
    """Bits: 0 the controller, 1-3 the brokers, 4 the ghost. A pair of brokers is read for who
    leads in which epoch; a broker with the ghost for what it serves; with the controller's
    broker epochs for what a registered incarnation holds."""
    s = InvariantSuite(Config(rf=3, minisr=2))
    got = dict(zip(s.state_groups, s.state_group_fields))
    assert len(got) == 19
    assert got[0b00001] == (("elr", "isr", "lastelr", "leader", "recovering", "registered", "replicas"),)
    assert got[0b00010] == got[0b01000] == (("hw", "log"),)
    assert got[0b00110] == got[0b01100] == (BROKER_PAIR, BROKER_PAIR)
    assert got[0b00111] == (("bepochs",), DURABLE, DURABLE)
    leader = ("alive", "epoch", "isr", "leader", "log", "pending")  # isr_in_use reads isr and pending
    assert got[0b00011] == (("elr", "epoch", "isr", "leader"), leader)
    assert got[0b10010] == (("alive", "hw", "leader", "log", "start"), ("committed",))  # exposed_hw: hw, start
    assert all(None not in fields for fields in got.values())


def test_a_spec_function_reads_the_fields_its_body_reads_of_each_parameter():
    assert function_fields(isr_in_use) == (None, ("isr", "pending"))  # the rule is compared whole
    assert function_fields(exposed_hw) == (None, ("hw", "start"))


def test_a_source_that_reads_a_component_or_the_state_whole_reads_it_whole():
    s = InvariantSuite(Config(rf=3, minisr=2))
    reads = Reads(s.V.prelude, "s", 3, SPEC_FUNCTIONS)
    assert reads.of("s_b2.hw + s_b2_leo") == {2: {"hw", "log"}}
    assert reads.of("bool(s_b2_hwisr & 1) and s_c.bepochs[1]") == {2: {"isr", "pending"}, 0: {"bepochs"}}
    assert reads.of("[x for x in s_b1.views if x > 0]") == {1: {"views"}}
    assert reads.of("len(s_b3)") == {3: None}
    assert reads.of("len(s.brokers)") == dict.fromkeys(range(5))
    assert reads.of("unknown_name + 1") == dict.fromkeys(range(5))


def test_components_with_equal_fields_have_one_id_and_a_group_read_whole_keeps_serials():
    views = Views((0, 1, 1, 2, 3))
    assert views.rows((0b110, 0b1), ((("alive", "leader"), None), (None,))) == [[0, -1], [-1]]
    # A quiet test's positions span two states; a registered view is found again.
    assert views.rows((0b10000010,), ((("alive", "leader"), ("hw",)),), 2) == [[0, 1]]
    s = Model(Config(rf=3, minisr=2)).initial_states()[0]
    b1, b2 = s.brokers[0], s.brokers[1]
    assert b1 != b2 and views.of(b1, 1) == views.of(b2, 1) == [0, 1]  # both up, know leader 1, HW 0
    assert views.of(replace(b2, alive=False), 1) == [2, 1]
    assert views.of(s.controller, 0) == [NONE, NONE]


def reached(cfg: Config, cap: int) -> list:
    """The first `cap` states of a breadth-first search of the whole of Next, past any violation."""
    model = Model(cfg, prune=False)
    seen = set(model.initial_states())
    queue, out = deque(seen), []
    while queue and len(out) < cap:
        state = queue.popleft()
        out.append(state)
        for action in model.candidates(state):
            for nxt in model.step(state, action):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
    return out


def test_states_with_equal_fields_have_equal_verdicts_in_every_group():
    """The analysis's soundness on an unsafe configuration (acks=1: an acknowledged write can
    be lost): for each group, the states that agree on the fields it reads agree on its
    verdict. The states reach both verdicts, and states that differ elsewhere."""
    cfg = Config(rf=3, minisr=2, acks="1", max_records=2)
    s = InvariantSuite(cfg)
    parts = [part for c in s.state_invs for _, part in c.parts]
    states = reached(cfg, 8000)
    both = shared = 0
    for g, (mask, fields) in enumerate(zip(s.state_groups, s.state_group_fields)):
        formula = z3.And([p for p, m in zip(parts, s._part_reads) if m == mask])
        test = compile_function(f"group{g}", ["s"], s.V.prelude, formula, s._sources)
        positions = [i for i in range(32) if mask >> i & 1]
        verdicts, seen = defaultdict(set), defaultdict(set)
        for state in states:
            comps = (state.controller, *state.brokers, state.ghost)
            key = tuple(tuple(getattr(comps[i], f) for f in fs) for i, fs in zip(positions, fields))
            verdicts[key].add(bool(test(state)))
            seen[key].add(tuple(comps[i] for i in positions))
        assert all(len(v) == 1 for v in verdicts.values()), (format(mask, "b"), fields)
        both += len({v for vs in verdicts.values() for v in vs}) == 2
        shared += any(len(c) > 1 for c in seen.values())
    assert both >= 3 and shared >= 15


def test_steps_with_equal_fields_have_equal_quiet_verdicts():
    """The quiet test's groups span a step's two states (the state before at positions 0 to
    rf + 2, the state after past it). Steps that agree on the fields every group of their set
    reads (one set for a step that keeps the controller, one for the others) agree on the
    quiet test; an unsafe configuration (acks=1) gives both verdicts."""
    cfg = Config(rf=3, minisr=2, acks="1", max_records=2)
    s, model = InvariantSuite(cfg), Model(cfg, prune=False)
    quiet = s.quiet_step([name for name, _ in s.reach_functions()])
    verdicts = defaultdict(set)
    for state in reached(cfg, 3000):
        for action in model.candidates(state):
            for nxt in model.step(state, action):
                kept = int(state.controller is nxt.controller)
                pair = (state.controller, *state.brokers, state.ghost, state.budget)
                pair += (nxt.controller, *nxt.brokers, nxt.ghost, nxt.budget)
                key = [kept]
                for mask, fields in zip(quiet.groups[kept], quiet.group_fields[kept]):
                    positions = [i for i in range(32) if mask >> i & 1]
                    key += [
                        pair[i] if f is None else tuple(getattr(pair[i], x) for x in f)
                        for i, f in zip(positions, fields)
                    ]
                verdicts[tuple(key)].add(bool(quiet(state, nxt)))
    assert all(len(v) == 1 for v in verdicts.values())
    assert {v for vs in verdicts.values() for v in vs} == {True, False}
