"""The CI invariant gate: a matrix of configurations, each with what it must show.

A gate file is TOML. Optional `[defaults]` apply to every entry; each `[[check]]` names a
configuration and its expectation: `expect = "holds"`, or `violates = "<invariant>"` for a
configuration known to be unsafe (a guard against a model that has become vacuous).
`liveness = true` also checks the liveness properties; `violates` may name one.
"""

from __future__ import annotations

import math
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from kafkamc.checker.engines.explorer import Limits
from kafkamc.invariants.catalog import INVARIANTS
from kafkamc.invariants.liveness import CATALOG as LIVENESS
from kafkamc.invariants.liveness import is_liveness
from kafkamc.jobs.run import CheckRun, run_check
from kafkamc.spec.bounds import bound_settings, by_setting
from kafkamc.spec.config import Config, ConfigError
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.protocol import ProtocolError, preset
from kafkamc.traces.html import write as write_html


class GateError(ValueError):
    """A gate file that cannot be run; the CLI turns it into one line and exit 2."""


# Bounds by their setting or a former name of it (max_crashes, ...): gate files written for
# the previous release still run, with a warning.
BY_SETTING = by_setting(BOUNDS)
CONFIG_KEYS = {f.name for f in fields(Config)} - {"protocol", "track_down", "limits", "known_bounds"}
CONFIG_KEYS |= set(BY_SETTING)
# The search limits `kafkamc check` takes as --max-states and --max-depth, besides time_limit.
SEARCH_LIMITS = ("max_states", "max_depth")
ENTRY_KEYS = CONFIG_KEYS | {"name", "protocol", "rules", "elr", "expect", "violates", "time_limit", "liveness"}
ENTRY_KEYS |= set(SEARCH_LIMITS)


@dataclass
class Entry:
    name: str
    config: Config
    expect: str  # "holds" or "violates"
    invariant: str | None = None  # for "violates"
    time_limit: float | None = None
    liveness: bool = False  # also check the liveness properties
    max_states: int | None = None
    max_depth: int | None = None


@dataclass
class Outcome:
    entry: Entry
    run: CheckRun
    seconds: float
    ok: bool
    got: str
    files: list = field(default_factory=list)
    save_error: str | None = None  # the counterexample could not be saved (the disk filled up)

    @property
    def incomplete(self) -> bool:
        """Stopped by a search limit or an interrupt: the expectation was not decided."""
        return self.run.result.verdict == "incomplete"

    @property
    def message(self) -> str:
        e = self.entry
        want = "holds" if e.expect == "holds" else f"violates {e.invariant}"
        return f"{e.name}: expected {want}, got {self.got}"


def _current_names(table: dict, where: str) -> dict:
    """A table's keys with each bound under its current setting name."""
    try:
        bounds = bound_settings(table, BOUNDS)
    except TypeError as e:
        raise GateError(f"{where}: {e}") from None
    return {**{k: v for k, v in table.items() if k not in BY_SETTING}, **bounds}


def _entry(raw: dict, defaults: dict, index: int) -> Entry:
    where = f"check #{index + 1}" + (f" ({raw['name']})" if "name" in raw else "")
    unknown = sorted((set(defaults) | set(raw)) - ENTRY_KEYS)
    if unknown:
        raise GateError(f"{where}: unknown key(s) {', '.join(unknown)}")
    # A check's own setting wins over [defaults] whichever name either one uses.
    data = {**_current_names(defaults, "[defaults]"), **_current_names(raw, where)}
    name = str(data.get("name") or f"check-{index + 1}")
    try:
        protocol = preset(str(data.get("protocol", "newest")))
        rules = dict(data.get("rules", {}))
        if "elr" in data:
            rules["elr"] = "on" if data["elr"] else "off"
        protocol = protocol.with_rules(**{k: str(v) for k, v in rules.items()})
        cfg = Config(protocol=protocol, **{k: v for k, v in data.items() if k in CONFIG_KEYS})
        cfg = cfg.bounded(BOUNDS).validated()
    except (ConfigError, ProtocolError, TypeError) as e:
        raise GateError(f"{where}: {e}") from None
    if ("expect" in data) == ("violates" in data):
        raise GateError(f'{where}: give exactly one of expect = "holds" or violates = "<invariant>"')
    if "expect" in data and data["expect"] != "holds":
        raise GateError(f'{where}: expect must be "holds" (got {data["expect"]!r})')
    invariant = None
    if "violates" in data:
        known = {inv.name.lower(): inv.name for inv in INVARIANTS + LIVENESS}
        invariant = known.get(str(data["violates"]).lower())
        if invariant is None:
            raise GateError(f"{where}: unknown invariant {data['violates']!r}; `kafkamc invariants` lists them")
    liveness = data.get("liveness", False)
    if not isinstance(liveness, bool):
        raise GateError(f"{where}: liveness must be true or false (got {liveness!r})")
    limit = data.get("time_limit")
    if limit is not None and not (isinstance(limit, int | float) and math.isfinite(limit) and limit > 0):
        raise GateError(f"{where}: time_limit must be a positive number of seconds (got {limit!r})")
    for key in SEARCH_LIMITS:
        v = data.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise GateError(f"{where}: {key} must be a whole number of at least 1 (got {v!r})")
    return Entry(
        name,
        cfg,
        "holds" if invariant is None else "violates",
        invariant,
        float(limit) if limit is not None else None,
        liveness or (invariant is not None and is_liveness(invariant)),
        data.get("max_states"),
        data.get("max_depth"),
    )


def former_names(path: Path, doc: dict) -> list[str]:
    """One warning per former setting name the gate file uses."""
    tables = [doc.get("defaults", {}), *doc.get("check", [])]
    used = {k for t in tables if isinstance(t, dict) for k in t if k in BY_SETTING and k != BY_SETTING[k].setting}
    return [f"{path}: {k} is deprecated; use {BY_SETTING[k].setting}" for k in sorted(used)]


def load_gate(path: str | Path, warn: Callable[[str], None] | None = None) -> list[Entry]:
    """The gate file's entries; `warn` is told of each deprecated key it uses."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise GateError(f"no such gate file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GateError(f"cannot read {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise GateError(f"{path} is not valid TOML: {e}") from None
    unknown = sorted(set(doc) - {"defaults", "check"})
    if unknown:
        raise GateError(f"{path}: unknown top-level key(s) {', '.join(unknown)}; expected [defaults] and [[check]]")
    checks = doc.get("check", [])
    if not isinstance(checks, list) or not checks:
        raise GateError(f"{path}: no [[check]] entries")
    entries = [_entry(raw, doc.get("defaults", {}), i) for i, raw in enumerate(checks)]
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise GateError(f"{path}: check names must be unique")
    if warn is not None:
        for message in former_names(path, doc):
            warn(message)
    return entries


def run_entry(entry: Entry, out_dir: Path | None = None) -> Outcome:
    """Run one entry. A known-unsafe entry checks only its invariant, so another invariant
    that happens to break first cannot hide or fake the expected counterexample."""
    limits = Limits(time_limit=entry.time_limit, max_states=entry.max_states, max_depth=entry.max_depth)
    invariants = [entry.invariant] if entry.expect == "violates" else None
    start = time.monotonic()
    run = run_check(entry.config, limits=limits, invariants=invariants, liveness=entry.liveness)
    seconds = time.monotonic() - start
    r = run.result
    if r.violation is not None:
        v = r.violation
        shape = f"lasso of {v.length} steps, cycle from step {v.loop}" if v.loop is not None else f"{v.length} steps"
        got = f"violates {v.invariant} ({shape})"
    else:
        got = r.verdict if r.verdict != "incomplete" else f"incomplete ({r.stop_reason})"
    ok = (
        (r.verdict == "holds")
        if entry.expect == "holds"
        else (r.violation is not None and r.violation.invariant == entry.invariant)
    )
    outcome = Outcome(entry, run, seconds, ok, got)
    if entry.expect == "holds" and r.verdict == "violated" and out_dir is not None:
        try:
            outcome.files = _save_counterexample(run, entry, out_dir)
        except OSError as e:  # the folder was tried before the first check; a disk can still fill up
            outcome.save_error = f"{out_dir}: {e.strerror or e}"
    return outcome


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name).strip("-") or "check"


def _save_counterexample(run: CheckRun, entry: Entry, out_dir: Path) -> list:
    """An unexpected violation leaves its trace and an HTML rendering next to the report."""
    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / _slug(entry.name)
    assert run.trace is not None  # a violation comes with its trace
    return [str(run.trace.save(base.with_suffix(".trace.json"))), str(write_html(run.trace, base.with_suffix(".html")))]


def junit_xml(outcomes: list[Outcome], suite_name: str) -> str:
    failures = sum(not o.ok and not o.incomplete for o in outcomes)
    suite = ET.Element(
        "testsuite",
        name=suite_name,
        tests=str(len(outcomes)),
        failures=str(failures),
        errors="0",
        skipped=str(sum(o.incomplete for o in outcomes)),
        time=f"{sum(o.seconds for o in outcomes):.3f}",
    )
    for o in outcomes:
        case = ET.SubElement(suite, "testcase", classname=suite_name, name=o.entry.name, time=f"{o.seconds:.3f}")
        c = o.entry.config
        props = ET.SubElement(case, "properties")
        for k, v in (
            ("rf", c.rf),
            ("minisr", c.minisr),
            ("acks", c.acks),
            ("unclean", c.unclean),
            ("protocol", c.protocol.era()),
            ("distinct_states", o.run.result.distinct_states),
        ):
            ET.SubElement(props, "property", name=k, value=str(v))
        if o.incomplete:  # undecided, not a failed expectation
            ET.SubElement(case, "skipped", message=f"{o.entry.name}: {o.got}")
        elif not o.ok:
            fail = ET.SubElement(case, "failure", message=o.message, type="GateExpectation")
            detail = [o.message, "configuration: " + config_summary(c)]
            detail += [f"saved: {f}" for f in o.files]
            fail.text = "\n".join(detail)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def config_summary(c: Config) -> str:
    """The configuration in flags' terms, leaving out what equals the defaults."""
    from kafkamc.spec.protocol import NEWEST, PRESETS

    d = Config().bounded(BOUNDS)
    parts = [f"rf={c.rf}", f"minisr={c.minisr}"]
    parts += [f"brokers={c.broker_count}"] if c.broker_count else []
    parts += [f"acks={c.acks}"] if c.acks != d.acks else []
    parts += ["unclean=on"] if c.unclean else []
    era = c.protocol.era()
    if era == "custom":
        parts += [f"{k}={v}" for k, v in c.protocol.differences(PRESETS[NEWEST]).items()]
    elif era != NEWEST:
        parts.append(f"protocol={era}")
    parts += [f"{k}={v}" for k, v in c.bounds().items() if v != getattr(d, k)]
    return " ".join(parts)
