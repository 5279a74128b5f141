"""Counterexample traces as data: JSON with a schema version, loading with every field
checked, replay against the model, and re-checking what the file claims happens at its end."""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path

from kafkamc.invariants.catalog import INVARIANTS
from kafkamc.invariants.lasso import lasso_problem
from kafkamc.invariants.liveness import is_liveness
from kafkamc.invariants.properties import PropertyFile
from kafkamc.invariants.reach import catalog as reach_catalog
from kafkamc.invariants.suite import InvariantSuite
from kafkamc.spec.config import Config, ConfigError
from kafkamc.spec.model import Model
from kafkamc.spec.next import BOUNDS, NEXT, entry

# 3: the budget is a list of (bound, spent) pairs. 4: a broker's state has checkpoint_hw, and a
# crash no longer fences (BrokerSessionTimeout does): a /3 file's step 0 is no initial state of
# this model and its crash steps no path of it, so it is refused by its schema, not mid-replay.
# 5: a broker's state has ineligible (the leader's own view of fenced and shutting-down brokers).
SCHEMA = "kafkamc.trace/5"
_ACTIONS = {a.name: a.type for a in NEXT}
_KEYS = ("schema", "config", "violation", "steps")  # the rest of a file's keys are kept in Trace.extra
_VIOLATION_KEYS = {"invariant", "kind", "length", "explanation", "loop"}


class TraceError(Exception):
    """A trace file that is missing, malformed, from another schema, implausible, or not a real path."""


def to_jsonable(x):
    if is_dataclass(x):
        return {f.name: to_jsonable(getattr(x, f.name)) for f in fields(x)}
    if hasattr(x, "_fields"):  # the state records are NamedTuples
        return {name: to_jsonable(v) for name, v in zip(x._fields, x)}
    if isinstance(x, (tuple, list)):
        return [to_jsonable(v) for v in x]
    return x


def action_to_json(action) -> dict | None:
    if action is None:
        return None
    return {"type": type(action).__name__, **to_jsonable(action)}


def _fits(value, hint) -> bool:
    """Whether a JSON value has the type an action's field declares (bool is not an int here)."""
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is tuple or typing.get_origin(hint) is tuple:
        # Tuple fields hold broker ids (AlterPartition.isr); JSON writes them as lists.
        item = next(iter(typing.get_args(hint)), int)
        return isinstance(value, (list, tuple)) and all(_fits(v, item) for v in value)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    return isinstance(value, hint) if isinstance(hint, type) else True


def _hint_words(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_hint_words(h) for h in typing.get_args(hint))
    if hint is tuple or typing.get_origin(hint) is tuple:
        return "a list of whole numbers"
    return {int: "a whole number", type(None): "null", bool: "true or false", str: "a string"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def action_from_json(data: dict | None):
    """The action a step's JSON names, its fields checked against the action's dataclass."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TraceError(f"an action must be an object or null, not {json.dumps(data)}")
    data = dict(data)
    name = data.pop("type", None)
    if not isinstance(name, str) or name not in _ACTIONS:
        raise TraceError(f"unknown action type {name!r}")
    cls = _ACTIONS[name]
    hints = typing.get_type_hints(cls)
    declared = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(declared))
    if unknown:
        raise TraceError(f"{name} has no field {unknown[0]!r}")
    args = {}
    for f in declared.values():
        if f.name not in data:
            if f.default is MISSING:
                raise TraceError(f"{name} is missing its field {f.name!r}")
            continue
        value = data[f.name]
        if not _fits(value, hints[f.name]):
            raise TraceError(f"{name}.{f.name} must be {_hint_words(hints[f.name])}, not {json.dumps(value)}")
        args[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**args)


@dataclass
class Trace:
    config: Config
    steps: list  # [(action or None, state), ...]
    invariant: str | None = None
    kind: str | None = None
    explanation: dict | None = None
    extra: dict = field(default_factory=dict)  # other top-level keys: "reached", "properties"
    property_file: PropertyFile | None = None  # where the invariant or reached property is declared
    loop: int | None = None  # a liveness lasso: the step its cycle starts at (the last state equals it)

    def __post_init__(self) -> None:
        self.config = self.config.bounded(BOUNDS)  # a file lists every bound (a caller's Config may not)

    @property
    def length(self) -> int:
        return len(self.steps) - 1

    @property
    def reached(self) -> str | None:
        """The reachability property a witness trace reaches at its last step."""
        return self.extra.get("reached")

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "config": self.config.to_dict(),
            "violation": None
            if self.invariant is None
            else {
                "invariant": self.invariant,
                "kind": self.kind,
                "length": self.length,
                "explanation": self.explanation,
                **({} if self.loop is None else {"loop": self.loop}),
            },
            "steps": [{"action": action_to_json(a), "state": to_jsonable(s)} for a, s in self.steps],
            **self.extra,
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        return path


def load(path: str | Path, properties: PropertyFile | None = None) -> Trace:
    """Read a trace file, check every field, and replay it; any problem is a TraceError with
    one clear message. `properties` is the file declaring a user property the trace names.
    Whether the claimed violation or reached property is true at the end is check_claim's question."""
    path = Path(path)
    data = _read(path)
    try:
        cfg = _config(data["config"])
        recorded = _recorded(data["steps"])
        extra = {k: v for k, v in data.items() if k not in _KEYS}
        steps = replay(cfg, recorded)
        violation = _claim(data, extra, cfg, len(steps) - 1, properties)
    except TraceError as e:
        raise TraceError(f"{path}: {e}") from None
    explanation = violation.get("explanation")
    return Trace(
        cfg,
        steps,
        violation.get("invariant"),
        violation.get("kind"),
        explanation if isinstance(explanation, dict) else None,
        extra,
        properties,
        violation.get("loop"),
    )


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError(f"no such trace file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"cannot read {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise TraceError(f"{path} is not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(data, dict) or "schema" not in data:
        raise TraceError(f"{path} is not a kafkamc trace (no schema field)")
    if data["schema"] != SCHEMA:
        raise TraceError(f"{path} has schema {data['schema']!r}; this kafkamc reads {SCHEMA!r}")
    missing = [k for k in _KEYS if k not in data]
    if missing:
        raise TraceError(f"{path} is malformed: no {missing[0]!r} field")
    return data


_DEFAULTS = Config().bounded(BOUNDS).to_dict()


def _config(data) -> Config:
    if not isinstance(data, dict):
        raise TraceError("malformed: config must be an object")
    # Config.from_dict takes Python's word for types: rf=true would pass as 1.
    for key, value in data.items():
        want = _DEFAULTS.get(key)
        if want is not None and type(value) is not type(want):
            raise TraceError(f"bad configuration: {key} must be {_json_type(want)}, not {json.dumps(value)}")
    try:
        return Config.from_dict(data, BOUNDS)
    except (ConfigError, TypeError, ValueError, AttributeError) as e:
        raise TraceError(f"bad configuration: {e}") from None


def _json_type(example) -> str:
    return {bool: "true or false", int: "a whole number", str: "a string", dict: "an object"}[type(example)]


def _recorded(steps) -> list:
    if not isinstance(steps, list) or not steps:
        raise TraceError("malformed: steps must be a list of at least one step")
    out = []
    for i, s in enumerate(steps):
        if not isinstance(s, dict) or set(s) != {"action", "state"}:
            raise TraceError(f"malformed: step {i} must be an object with exactly an action and a state")
        try:
            out.append((action_from_json(s["action"]), s["state"]))
        except TraceError as e:
            raise TraceError(f"step {i}: {e}") from None
    return out


def _claim(data: dict, extra: dict, cfg: Config, length: int, properties: PropertyFile | None) -> dict:
    """Check the header against the steps and the properties there are; return the violation."""
    invariants, reachables = INVARIANTS, reach_catalog(cfg)
    if properties is not None:
        _same_properties(extra.get("properties"), properties)
        user_invariants, user_reachables = properties.declared()
        invariants, reachables = invariants + user_invariants, reachables + user_reachables
    violation, reached = data["violation"], extra.get("reached")
    if violation is not None and reached is not None:
        raise TraceError("claims both a violation and a reached property")
    if reached is not None:
        if not isinstance(reached, str):
            raise TraceError(f"reached must be a property's name, not {json.dumps(reached)}")
        if reached not in {r.name for r in reachables}:
            known = ", ".join(r.name for r in reachables)
            raise TraceError(f"unknown reachability property {reached!r}{_needs(extra, properties, known)}")
        return {}
    if violation is None:
        return {}
    if not isinstance(violation, dict) or not {"invariant", "kind", "length"} <= set(violation) <= _VIOLATION_KEYS:
        raise TraceError("malformed: violation must be null or an object with invariant, kind and length")
    name, kind, claimed = violation["invariant"], violation["kind"], violation["length"]
    if type(claimed) is not int or claimed != length:
        raise TraceError(f"violation.length is {json.dumps(claimed)}, but the trace has {length} steps")
    if is_liveness(name):
        loop = violation.get("loop")
        if kind != "liveness":
            raise TraceError(f'violation.kind is {json.dumps(kind)}, but {name} has kind "liveness"')
        if type(loop) is not int or not 0 <= loop <= length:
            raise TraceError(f"violation.loop must be a step number from 0 to {length}, not {json.dumps(loop)}")
        return violation
    if "loop" in violation:
        raise TraceError(f"violation.loop is only for a liveness property; {name} is not one")
    inv = next((i for i in invariants if i.name == name), None)
    if inv is None:
        raise TraceError(
            f"unknown invariant {name!r}{_needs(extra, properties, ', '.join(i.name for i in invariants))}"
        )
    if kind != inv.kind:
        raise TraceError(f'violation.kind is {json.dumps(kind)}, but {name} has kind "{inv.kind}"')
    return violation


def _needs(extra: dict, properties: PropertyFile | None, known: str) -> str:
    """Where an unknown name may come from: the properties file the trace was saved with, if any."""
    saved = extra.get("properties")
    if properties is None and isinstance(saved, dict) and isinstance(saved.get("file"), str):
        return f"; the trace was saved with properties file {saved['file']}: pass --properties {saved['file']}"
    return f" (known here: {known})"


def _same_properties(saved, properties: PropertyFile) -> None:
    if isinstance(saved, dict) and saved.get("sha256") not in (None, properties.digest):
        raise TraceError(
            f"was saved with a properties file of sha256 {saved['sha256']}; {properties.path} has {properties.digest}"
        )


def replay(cfg: Config, recorded: list) -> list:
    """Re-execute recorded actions from the initial state; each must be one the model can take
    there (its own candidate, so never a value it was not written for) and reach the recorded state."""
    if not recorded or recorded[0][0] is not None:
        raise TraceError("a trace starts with an initial state and no action")
    model = Model(cfg)
    inits = [s for s in model.initial_states() if to_jsonable(s) == recorded[0][1]]
    if not inits:
        raise TraceError("step 0 is not an initial state of the model")
    steps = [(None, inits[0])]
    for i, (action, want) in enumerate(recorded[1:], start=1):
        if action is None:
            raise TraceError(f"step {i} has no action")
        state = steps[-1][1]
        own = next((a for a in model.candidates(state) if a == action), None)
        if own is None:
            raise TraceError(
                f"step {i}: {format_action(action)} does not lead to the recorded state: "
                "it is not an action the model can take in the state before it"
            )
        matches = [s for s in model.step(state, own) if to_jsonable(s) == want]
        if not matches:
            raise TraceError(
                f"step {i}: {format_action(action)} does not lead to the recorded state: "
                "the trace is not a path of this model"
            )
        steps.append((own, matches[0]))
    return steps


def check_claim(trace: Trace) -> str | None:
    """None when what the file claims is true at the trace's last step (the invariant fails
    there, or the reachability property holds on its last step), else why not. A confirmed
    violation gets the model's own explanation in place of the file's."""
    reached = trace.reached
    if trace.invariant is None and reached is None:
        return None
    last = trace.steps[-1][1]
    before = trace.steps[-2][1] if len(trace.steps) > 1 else None
    if trace.loop is not None:
        assert trace.invariant is not None
        problem = lasso_problem(trace.config, trace.invariant, trace.steps, trace.loop)
        return None if problem is None else f"the lasso is no counterexample: {problem}"
    if trace.invariant is None:
        assert reached is not None
        suite = InvariantSuite(trace.config, [], trace.property_file)
        if before is None or not suite.confirm_reached(reached, last, before):
            return f"{reached} is not reached at its last step, unlike what the file says"
        return None
    suite = InvariantSuite(trace.config, None, trace.property_file)
    if trace.invariant not in suite.names:  # one checked only when named (catalog.ON_DEMAND)
        suite = InvariantSuite(trace.config, [*suite.names, trace.invariant], trace.property_file)
    broken = suite.all_violated(last, before)
    if trace.invariant not in broken:
        return f"{trace.invariant} holds at its end, unlike what the file says"
    explanation = suite.explain(trace.invariant, last, before if trace.kind == "action" else None).to_dict()
    explanation["also_violated"] = [n for n in broken if n != trace.invariant]
    trace.explanation = explanation
    return None


def format_action(action) -> str:
    """How the action's entry in Next describes it (spec/next.py); "Init" for none."""
    if action is None:
        return "Init"
    return entry(action).wording.terminal(action)
