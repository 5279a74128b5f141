"""Counterexample traces as data: JSON with a schema version, loading, and replay against the model."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

from kafkamc.spec.config import Config, ConfigError
from kafkamc.spec.model import Model
from kafkamc.spec.next import NEXT

SCHEMA = "kafkamc.trace/3"  # 3: the budget is a list of (bound, spent) pairs
_ACTIONS = {a.name: a.type for a in NEXT}
_DESCRIBE = {a.type: a.describe for a in NEXT}


class TraceError(Exception):
    """A trace file that is missing, malformed, from another schema, or not a real path."""


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


def action_from_json(data: dict | None):
    if data is None:
        return None
    data = dict(data)
    name = data.pop("type", None)
    if name not in _ACTIONS:
        raise TraceError(f"unknown action type {name!r}")
    try:
        args = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return _ACTIONS[name](**args)
    except TypeError as e:
        raise TraceError(f"bad arguments for {name}: {e}") from None


@dataclass
class Trace:
    config: Config
    steps: list  # [(action or None, state), ...]
    invariant: str | None = None
    kind: str | None = None
    explanation: dict | None = None
    extra: dict = field(default_factory=dict)

    @property
    def length(self) -> int:
        return len(self.steps) - 1

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
            },
            "steps": [{"action": action_to_json(a), "state": to_jsonable(s)} for a, s in self.steps],
            **self.extra,
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        return path


def load(path: str | Path) -> Trace:
    """Read a trace file and replay it; any problem is a TraceError with one clear message."""
    path = Path(path)
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
    try:
        cfg = Config.from_dict(data["config"])
        recorded = [(action_from_json(s["action"]), s["state"]) for s in data["steps"]]
        violation = data.get("violation") or {}
    except ConfigError as e:
        raise TraceError(f"{path}: bad configuration: {e}") from None
    except (KeyError, TypeError, AttributeError) as e:
        raise TraceError(f"{path} is malformed: missing or wrong field {e}") from None
    steps = replay(cfg, recorded)
    return Trace(cfg, steps, violation.get("invariant"), violation.get("kind"), violation.get("explanation"))


def replay(cfg: Config, recorded: list) -> list:
    """Re-execute recorded actions from the initial state; each recorded state must be reached."""
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
        matches = [s for s in model.step(steps[-1][1], action) if to_jsonable(s) == want]
        if not matches:
            raise TraceError(
                f"step {i}: {format_action(action)} does not lead to the recorded state: "
                "the trace is not a path of this model"
            )
        steps.append((action, matches[0]))
    return steps


def format_action(action) -> str:
    """How the action's entry in Next describes it (spec/next.py); "Init" for none."""
    if action is None:
        return "Init"
    return _DESCRIBE[type(action)](action)
