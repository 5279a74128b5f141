"""The symbolic view of a state: named Z3 variables, each with the Python expression that reads it.

A formula over these variables is the declaration of an invariant. The same table tells
the compiler how to read each variable straight from a State object (no intermediate
vector), and tells the explainer which value each variable had.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3
from kafkamc.invariants.reads import SPEC_FUNCTIONS
from kafkamc.spec.config import Config
from kafkamc.spec.produce import RECORDS


@dataclass(frozen=True)
class Var:
    name: str
    const: z3.ExprRef
    source: str  # Python expression over the prelude's locals


class View:
    """Variables of one state. `prefix` tells apart the two states of an action property."""

    def __init__(self, cfg: Config, prefix: str = "", state_name: str = "s"):
        self.cfg = cfg
        self.prefix = prefix
        self.state_name = state_name
        self.vars: dict[str, Var] = {}
        n, R = state_name, cfg.bound(RECORDS)
        # Locals the sources read; a compiled function keeps only the ones it needs. A log
        # and its length are read once here rather than in every offset's variable.
        self.prelude = [
            f"{n}_c = {n}.controller",
            f"{n}_g = {n}.ghost",
            f"{n}_gc = {n}_g.committed",
            f"{n}_gclen = len({n}_gc)",
        ]
        self.c_leader = self._int("c_leader", f"{n}_c.leader")
        self.c_epoch = self._int("c_epoch", f"{n}_c.epoch")
        self.c_recovering = self._bool("c_recovering", f"{n}_c.recovering")
        self.c_reassigning = self._bool("c_reassigning", f"bool({n}_c.adding or {n}_c.removing)")
        self.c_pepoch = self._int("c_pepoch", f"{n}_c.pepoch")
        self.replica: dict[int, z3.BoolRef] = {}
        self.adding: dict[int, z3.BoolRef] = {}
        self.removing: dict[int, z3.BoolRef] = {}
        self.alive, self.leads, self.epoch, self.hw, self.leo = {}, {}, {}, {}, {}
        self.start, self.in_isr, self.log, self.logep = {}, {}, {}, {}
        self.in_elr, self.registered, self.exposed, self.stalled = {}, {}, {}, {}
        self.shutting: dict[int, z3.BoolRef] = {}
        self.waiting: dict[int, z3.ArithRef] = {}
        self.in_hw_isr: dict[int, dict[int, z3.BoolRef]] = {}
        # What a broker's metadata says (spec.metadata.stale compares it with the controller's),
        # the AlterPartition it has in flight, and the controller's reassignment and last
        # known leader.
        self.knows_leader: dict[int, z3.ArithRef] = {}
        self.pepoch: dict[int, z3.ArithRef] = {}
        self.knows_isr: dict[int, dict[int, z3.BoolRef]] = {}
        self.pending: dict[int, z3.BoolRef] = {}
        self.last_known: dict[int, z3.BoolRef] = {}
        # Spec's functions (spec.hw.exposed_hw, isr_in_use), given the rules' values as text:
        # the view computes nothing spec computes (invariants/reads.py SPEC_FUNCTIONS).
        consumer_rule, isr_rule = cfg.rule("consumer_hw"), cfg.rule("hw_pending_isr")
        for b in cfg.brokers:
            br = f"{n}_b{b}"
            self.prelude += [
                f"{br} = {n}.brokers[{b - 1}]",
                f"{br}_log = {br}.log",
                f"{br}_leo = len({br}_log)",
                f"{br}_hwisr = isr_in_use({isr_rule!r}, {br})",
            ]
            # Running as the incarnation the controller registered: a new process that has not
            # registered yet (incarnations=kraft_steps) is not, as the ISR or ELR naming b names
            # its dead predecessor until the registration cleans it up. Under fenced_first every
            # running process is registered, so this is `alive`.
            self.alive[b] = self._bool(f"alive[{b}]", f"({br}.alive and {br}.bepoch == {n}_c.bepochs[{b - 1}])")
            self.leads[b] = self._bool(f"leads[{b}]", f"({br}.alive and {br}.leader == {b})")
            self.epoch[b] = self._int(f"epoch[{b}]", f"{br}.epoch")
            self.hw[b] = self._int(f"hw[{b}]", f"{br}.hw")
            self.leo[b] = self._int(f"leo[{b}]", f"{br}_leo")
            self.start[b] = self._int(f"start[{b}]", f"{br}.start")
            self.in_isr[b] = self._bool(f"in_isr[{b}]", f"bool({n}_c.isr & {1 << (b - 1)})")
            self.in_elr[b] = self._bool(f"in_elr[{b}]", f"bool({n}_c.elr & {1 << (b - 1)})")
            self.stalled[b] = self._bool(f"stalled[{b}]", f"{br}.stalled")
            self.waiting[b] = self._int(f"waiting[{b}]", f"len({br}.purgatory)")  # acks=all requests held
            self.registered[b] = self._bool(f"registered[{b}]", f"bool({n}_c.registered & {1 << (b - 1)})")
            self.replica[b] = self._bool(f"replica[{b}]", f"({b} in {n}_c.replicas)")  # in the assignment
            self.adding[b] = self._bool(f"adding[{b}]", f"bool({n}_c.adding & {1 << (b - 1)})")  # moving in
            self.removing[b] = self._bool(f"removing[{b}]", f"bool({n}_c.removing & {1 << (b - 1)})")  # moving out
            self.shutting[b] = self._bool(
                f"shutting[{b}]", f"bool({n}_c.shutdown and {n}_c.shutdown[{b - 1}])"
            )  # in controlled shutdown
            # The HW consumers can read from b (spec.hw.consumer_hw), -1 for none.
            self.exposed[b] = self._int(f"exposed_hw[{b}]", f"exposed_hw({consumer_rule!r}, {br})")
            # Whether b, as leader, counts f in the ISR its HW is computed over (spec.hw.hw_isr).
            self.in_hw_isr[b] = {
                f: self._bool(f"in_hw_isr[{b}][{f}]", f"bool({br}_hwisr & {1 << (f - 1)})") for f in cfg.brokers
            }
            self.knows_leader[b] = self._int(f"knows_leader[{b}]", f"{br}.leader")
            self.pepoch[b] = self._int(f"pepoch[{b}]", f"{br}.pepoch")
            self.knows_isr[b] = {
                f: self._bool(f"knows_isr[{b}][{f}]", f"bool({br}.isr & {1 << (f - 1)})") for f in cfg.brokers
            }
            self.pending[b] = self._bool(f"pending[{b}]", f"bool({br}.pending)")
            self.last_known[b] = self._bool(f"last_known[{b}]", f"bool({n}_c.lastelr & {1 << (b - 1)})")
            self.log[b] = [
                self._int(f"log[{b}][{i}]", f"({br}_log[{i}][1] if {br}_leo > {i} else 0)") for i in range(R)
            ]
            self.logep[b] = [
                self._int(f"logep[{b}][{i}]", f"({br}_log[{i}][0] if {br}_leo > {i} else 0)") for i in range(R)
            ]
        self.committed_len = self._int("committed_len", f"{n}_gclen")
        self.committed = [self._int(f"committed[{i}]", f"({n}_gc[{i}] if {n}_gclen > {i} else 0)") for i in range(R)]
        self.acked = {r: self._bool(f"acked[{r}]", f"bool({n}_g.acked & {1 << (r - 1)})") for r in range(1, R + 1)}
        self.hw_seen = self._int("hw_seen", f"{n}_g.hw_seen")
        self.acked_down = self._int("acked_down", f"{n}_g.acked_down")

    def _int(self, name: str, source: str) -> z3.ArithRef:
        return self._add(name, z3.Int(self.prefix + name), source)

    def _bool(self, name: str, source: str) -> z3.BoolRef:
        return self._add(name, z3.Bool(self.prefix + name), source)

    def _add(self, name, const, source):
        self.vars[self.prefix + name] = Var(self.prefix + name, const, source)
        return const

    # Derived predicates, used by several declarations.
    def true_leader_is(self, b: int) -> z3.BoolRef:
        """b leads in the controller's current epoch and knows it."""
        return z3.And(self.c_leader == b, self.leads[b], self.epoch[b] == self.c_epoch)

    def zombie(self, b: int) -> z3.BoolRef:
        """b acts as leader on metadata older than the controller's."""
        return z3.And(self.leads[b], self.epoch[b] < self.c_epoch)

    def has_record(self, b: int, r: int) -> z3.BoolRef:
        return z3.Or([x == r for x in self.log[b]])

    def values_fn(self):
        """A function of a State returning {name: value} for every variable of this view."""
        ns: dict = dict(SPEC_FUNCTIONS)
        exec(compile(self.values_source(), "<view values>", "exec"), ns)
        return ns["values"]

    def values_source(self) -> str:
        """Source of a function returning {name: value} for every variable of this view."""
        body = "\n    ".join(self.prelude)
        items = ", ".join(f"{v.name!r}: {v.source}" for v in self.vars.values())
        return f"def values({self.state_name}):\n    {body}\n    return {{{items}}}\n"


def z3_value(v) -> z3.ExprRef:
    """A variable's Python value as the Z3 constant substituted for it."""
    return z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)
