"""The transition system: initial states, and the successors Next gives, in a fixed order.

This is the protocol and nothing else: no cache, fingerprint or engine lives here. The
engines in checker/ take a Model (checker/engines/contract.py says what they need of it); the
fast path there derives its caches from these same functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import permutations

from kafkamc.spec import next as spec_next
from kafkamc.spec import symmetry
from kafkamc.spec.config import Config
from kafkamc.spec.hw import observe
from kafkamc.spec.next import Action
from kafkamc.spec.state import Broker, Budget, Controller, State, initial_state


class Model:
    """Kafka partition replication as a transition system.

    `actions` is the ordered list of actions (spec.next.NEXT unless given: tests pass a
    changed list to check that every engine follows the step functions it is given), and
    `observation` the ghost's observation (spec.hw.observe unless given), likewise.
    With config.symmetry, canonical() maps a state to its relabelling with the assignment
    in order 1..rf (spec/symmetry.py); states and traces stay the real ones.
    """

    def __init__(
        self,
        config: Config,
        actions: tuple[Action, ...] | None = None,
        prune: bool = True,
        observation: Callable[[Config, State], State] = observe,
    ):
        self.actions: tuple[Action, ...] = spec_next.NEXT if actions is None else tuple(actions)
        # The limits are derived here, from Next and the actions the model is built with (a test's
        # changed list may drop one, or add one with a bound of its own); the values were checked
        # once where they entered (the flags, a gate or trace file: Config.validated).
        self.config = config.bounded((*spec_next.BOUNDS, *spec_next.bounds_of(self.actions)))
        self.steps = {a.type: a.step for a in self.actions}
        # With prune, only the actions that may fire under the bounds, rule and settings
        # (Action.may_fire) are enumerated; the others are idle, and the fast path checks now
        # and then that they offer nothing (checker/cache/verify.py check_idle). The reference
        # engine (oracle/search.py) trusts no declaration, and trace validation
        # (realkafka/validate.py) follows a real run, which no bound limits: both pass prune=False.
        firing = [a for a in self.actions if not prune or a.may_fire(self.config)]
        self.candidate_fns = tuple(a.candidates for a in firing)
        self.idle_fns = tuple(a.candidates for a in self.actions if a not in firing)
        self.observation = observation  # how the ghost observes a state (spec.hw.observe unless given)

    def initial_states(self) -> list[State]:
        """One per replica assignment order: which broker is preferred, which is tried next."""
        cfg = self.config
        n = len(cfg.brokers)
        return [initial_state(cfg.rf, order, n) for order in permutations(cfg.brokers, cfg.rf)]

    def broker_candidates(self, c: Controller, br: Broker, u: Budget, b: int) -> list:
        """The candidate actions of broker b, in Next's order; they read only its broker, the
        controller and the budget (that is their signature)."""
        cfg = self.config
        return [a for candidates in self.candidate_fns for a in candidates(cfg, c, br, u, b)]

    def candidates(self, state: State) -> Iterator:
        """Every action that might be enabled, in a fixed order; the step function checks the guard."""
        for b in self.config.brokers:
            yield from self.broker_candidates(state.controller, state.broker(b), state.budget, b)

    def unobserved_step(self, state: State, action) -> list[State]:
        """The states `action` leads to before the ghost observes them (empty when its guard fails)."""
        out = self.steps[type(action)](self.config, state, action)
        if out is None:
            return []
        return [out] if isinstance(out, State) else list(out)

    def observe(self, state: State) -> State:
        return self.observation(self.config, state)

    def step(self, state: State, action) -> list[State]:
        """All states `action` can lead to from `state` (empty when its guard fails)."""
        return [self.observation(self.config, s) for s in self.unobserved_step(state, action)]

    def successors(self, state: State) -> Iterator[tuple[object, State]]:
        for action in self.candidates(state):
            for nxt in self.step(state, action):
                yield action, nxt

    def canonical(self, state: State) -> State:
        return symmetry.canonical(state) if self.config.symmetry else state

    def action_types(self) -> tuple:
        return tuple(a.type for a in self.actions)

    def action_names(self) -> list[str]:
        return [a.name for a in self.actions]
