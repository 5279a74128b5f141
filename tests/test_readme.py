"""The README's figures and sample outputs, checked against the pins and cheap runs.

Every figure the README quotes is either a pin (tests/pins.py, whose values the model is
checked to give) or a measurement of this machine listed in MEASURED. `test_every_figure_is_checked`
sweeps the README for numbers with a unit (states, steps, seconds, ...) and fails on any that
neither accounts for. The sample outputs of cheap commands are run and compared with the README;
the main job's (half a minute) is compared through its pins and a run stopped after one state,
which prints every line that does not depend on the search, and in full in the slow suite.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

import pins
import pytest
from helpers import run_kafkamc
from kafkamc.checker.cache.budget import GROWTH_BYTES

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

# A number followed by a unit: what the README must not quote unchecked.
FIGURE = re.compile(
    r"\d[\d,.]*(?: |-)?(?:distinct|states?|steps?|s\b|minutes?|entries|transitions|MiB|GiB|MB|bytes|times|generated)"
)

# Measurements of this machine and design figures that no model change moves; each must still be
# in the README (a stale entry here fails too).
MEASURED = [
    r"pyspark, about 490 MB",
    r"fast suite \(about \d+ minutes here, one process per core\)",
    r"the benchmark: about \d+ minutes\)",
    r"local engine \(about \d+ minutes\)",
    r"`kafkamc conform` \(about \d+ minutes",
    r"runs it after the tests \(about \d+ s here\)",
    r"The default check takes about \d+ s",  # the one figure, equal to the sample's (checked below)
    r"one process about \d+\.\d s",  # docs/PERFORMANCE.md, issue 40 round thirteen
    r"about \d+ minutes with two workers",  # the all-faults model, round fourteen
    r"about 12 bytes per transition",
    r"`--max-rf 3`: \d+ minutes",
    r"The whole table takes about \d+ minutes",
    r"held in \d+\s+minutes, each Python worker capped at 2 GiB",
    r"at most 20,000 states by default",  # `kafkamc graph --max-states`' default
    r"finds nothing in \d+ s \(every path of up to \d+ steps\)",
]


def _rx(pattern: str) -> str:
    """A README pattern whose spaces match any whitespace: the README wraps its lines."""
    return pattern.replace(" ", r"\s+")


def _block_after(first_line: str) -> list[str]:
    """The lines of the fenced block that starts with `first_line`, without it."""
    lines = README.splitlines()
    start = lines.index(first_line) + 1
    end = lines.index("```", start)
    return lines[start:end]


MAIN_BLOCK = _block_after("$ kafkamc check --rf 3 --minisr 2 --quiet")

# A logical line of the main job's output starts with "word(s): ", a bound, or the counts; the
# README wraps longer ones at 120 columns.
_START = re.compile(r"^([a-z][\w .()-]*:( |$)|  max_\w+=|\d[\d,]* distinct states)")


def _logical(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if out and not _START.match(line):
            out[-1] += " " + line
        else:
            out.append(line)
    return out


def _depends_on_search(line: str) -> bool:
    """Lines a search stopped after one state prints differently: its counts, coverage and verdict,
    and warnings about actions the full search fires."""
    fired = [a for a, n in pins.DEFAULT_CHECK["coverage"].items() if n > 0]
    return bool(
        re.match(r"\d[\d,]* distinct states|fingerprint collision|actions fired:|reached:|holds:|incomplete:", line)
        or line.startswith("  max_states=")
        or any(re.search(rf"\b{a}\b", line) for a in fired)
    )


def _quotes() -> list[tuple[str, tuple]]:
    """(pattern in the README, the pinned values of its groups): each pattern matches once."""
    d = pins.DEFAULT_CHECK
    gate = tomllib.loads((ROOT / "tests/gate/kafka.toml").read_text())
    return [
        (r"consumers first saw the HW move after (\d+) steps", (d["reached"]["HighWatermarkAdvances"],)),
        (r"an ELR member was first elected after (\d+)", (d["reached"]["ElrElection"],)),
        (r'"length": (\d+),', (pins.UNCLEAN_SAMPLE["length"],)),
        (r"`replayed (\d+) steps:", (pins.UNCLEAN_SAMPLE["length"],)),
        (r'\("no write is acknowledged[^)]*\)\s+is violated after (\d+) steps', (pins.NO_ACK_BELOW_MIN_ISR_LENGTH,)),
        (r"NoCommittedDataLoss in (\d+) steps", (pins.FINDING_COMMITTED.value,)),
        (r"AckedWriteDurability in (\d+) \(a hard crash more\)", (pins.FINDING_ACKED.value,)),
        (r"\(a (\d+)-step stem", (pins.KAFKA_10706_STEM.value,)),
        (
            r"on walk (\d+) \((\d+) steps, shrunk from (\d+)\)",
            (pins.SIMULATION_WALK.value, pins.SIMULATION_LENGTH.value, pins.SIMULATION_RAW_LENGTH.value),
        ),
        (r"`tests/gate/kafka.toml` \((\d+) entries\)", (len(gate["check"]),)),
        (r"the budget grows by (\d+) bytes for each state found", (GROWTH_BYTES,)),
    ]


@pytest.mark.parametrize("pattern,values", _quotes(), ids=lambda x: x if isinstance(x, str) else "")
def test_quoted_figures_equal_their_pins(pattern, values):
    found = list(re.finditer(_rx(pattern), README))
    assert len(found) == 1, f"{pattern!r} matches {len(found)} times in the README"
    assert tuple(int(g.replace(",", "")) for g in found[0].groups()) == values


def test_every_figure_is_checked():
    """A figure with a unit is in the main job's sample, a pinned quote, or MEASURED."""
    block = "\n".join(MAIN_BLOCK)
    covered = [range(README.index(block), README.index(block) + len(block))]
    for pattern in [p for p, _ in _quotes()] + MEASURED:
        found = [range(m.start(), m.end()) for m in re.finditer(_rx(pattern), README)]
        assert found, f"{pattern!r} is no longer in the README: drop it from the list"
        covered += found
    loose = [
        (README.count("\n", 0, m.start()) + 1, m.group())
        for m in FIGURE.finditer(README)
        if not any(m.start() in r for r in covered)
    ]
    assert not loose, f"README figures no test checks (line, figure): {loose}; pin them (tests/pins.py) or rephrase"


def test_owned_pins_are_still_asserted_by_their_tests():
    """A pin another test asserts holds the same literal: when that test's count moves, this fails
    until the pin (and then the README) follows."""
    for name in dir(pins):
        pin = getattr(pins, name)
        if not isinstance(pin, pins.Owned):
            continue
        path, func = pin.test.split("::")
        tree = ast.parse((ROOT / path).read_text())
        (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func]
        literals = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, int)}
        assert pin.value in literals, f"pins.{name} = {pin.value}, which {pin.test} no longer asserts"


def test_main_job_figures_equal_the_pins():
    d = pins.DEFAULT_CHECK
    lines = _logical(MAIN_BLOCK)
    (counts,) = [x for x in lines if re.match(r"\d[\d,]* distinct states", x)]
    m = re.fullmatch(
        r"([\d,]+) distinct states, ([\d,]+) generated, depth (\d+), ([\d.]+)s \(([\d,]+) distinct states/s\)", counts
    )  # noqa: E501
    assert m, counts
    states, generated, depth = (int(g.replace(",", "")) for g in m.groups()[:3])
    assert (states, generated, depth) == (d["states"], d["generated"], d["depth"])
    seconds, rate = float(m[4]), int(m[5].replace(",", ""))
    assert abs(rate - states / seconds) < 0.001 * rate
    # the time is stated once: the Performance section quotes the same run
    (quoted,) = re.findall(_rx(r"The default check takes about (\d+) s"), README)
    assert int(quoted) == round(seconds)
    (collision,) = [x for x in lines if x.startswith("fingerprint collision")]
    p = states * (generated - states) / 2**64
    visited = d["visited_bytes_per_state"]
    assert collision == f"fingerprint collision probability (optimistic): {p:.1e}; visited set {visited} bytes/state"
    (fired,) = [x for x in lines if x.startswith("actions fired: ")]
    pairs = [p.rsplit(" ", 1) for p in fired.removeprefix("actions fired: ").split(", ")]
    assert {a: int(n.replace(",", "")) for a, n in pairs} == d["coverage"]
    (reached,) = [x for x in lines if x.startswith("reached: ")]
    assert reached == "reached: " + ", ".join(f"{k} ({v} steps)" for k, v in d["reached"].items())


def test_main_job_lines_that_do_not_depend_on_the_search():
    """Configuration, bounds, engine and the warnings about moves its bounds leave off, from a
    run stopped after one state; and the order of the actions, which lists every action of Next."""
    p = run_kafkamc(*pins.DEFAULT_CHECK["argv"], "--workers", "2", "--max-states", "1", columns=120)
    assert p.returncode == 3, p.stderr
    ran = _logical([x.rstrip() for x in p.stdout.splitlines()])
    readme = _logical(MAIN_BLOCK)
    assert [x for x in readme if not _depends_on_search(x)] == [x for x in ran if not _depends_on_search(x)]
    (fired,) = [x for x in ran if x.startswith("actions fired: ")]
    assert [a.rsplit(" ", 1)[0] for a in fired.removeprefix("actions fired: ").split(", ")] == list(
        pins.DEFAULT_CHECK["coverage"]
    )


@pytest.mark.slow
def test_main_job_output_is_the_readme_sample():
    """The whole command, as the README shows it (its time and rate excepted)."""
    p = run_kafkamc(*pins.DEFAULT_CHECK["argv"], "--workers", "2", columns=120)
    assert p.returncode == 0, p.stderr

    def timeless(lines):
        return [re.sub(r", [\d.]+s \([\d,]+ distinct states/s\)$", "", x.rstrip()) for x in lines]

    assert timeless(p.stdout.splitlines()) == timeless(MAIN_BLOCK)


@pytest.fixture(scope="module")
def unclean_sample(tmp_path_factory):
    """`kafkamc check --rf 2 --minisr 1 --unclean`, run once: its output and the saved trace."""
    tmp = tmp_path_factory.mktemp("sample")
    out = tmp / "readme-trace.json"
    p = run_kafkamc("check", "--rf", "2", "--minisr", "1", "--unclean", "--quiet", "--trace-out", out, cwd=tmp)
    assert p.returncode == 1, p.stderr
    return p.stdout, out


def test_sample_trace_json_and_its_replay(unclean_sample):
    """The README's sample trace file and the line `trace replay` prints for it."""
    s = pins.UNCLEAN_SAMPLE
    _, out = unclean_sample
    trace = json.loads(out.read_text())
    block = "\n".join(_block_after('{"schema": "' + trace["schema"] + '", "config": {"rf": 2, "minisr": 1, '
                                   '"acks": "all", "unclean": true, "protocol": {...}, ...},'))  # fmt: skip
    assert list(trace)[:4] == ["schema", "config", "violation", "steps"]
    v = trace["violation"]
    assert f'"violation": {{"invariant": "{v["invariant"]}", "kind": "{v["kind"]}", "length": {v["length"]},' in block
    assert (v["invariant"], v["length"]) == (s["invariant"], s["length"])
    assert trace["steps"][0]["action"] is None
    first = trace["steps"][1]["action"]
    assert f'{{"action": {json.dumps(first)}, "state": {{"controller":' in " ".join(block.split())
    assert list(trace["steps"][1]["state"]) == ["controller", "brokers", "ghost", "budget"]
    r = run_kafkamc("trace", "replay", out)
    assert r.returncode == 0, r.stderr
    said = " ".join(README.split())
    assert f"(`{r.stdout.strip()}`)" in said


def test_sample_counterexample_page(unclean_sample):
    """docs/SAMPLE_COUNTEREXAMPLE.md, which the README links: `trace show --diff-only` at 120 columns
    (its story, then the steps from 3 on), and the check's last line."""
    stdout, out = unclean_sample
    doc = (ROOT / "docs/SAMPLE_COUNTEREXAMPLE.md").read_text()
    start = doc.index("```text\n") + len("```text\n")
    block = [x.rstrip() for x in doc[start : doc.index("```", start)].splitlines()]
    r = run_kafkamc("trace", "show", out, "--diff-only", columns=120)
    assert r.returncode == 0, r.stderr
    shown = [x.rstrip() for x in r.stdout.splitlines()]
    story_end = next(i for i, x in enumerate(shown) if x.startswith("╰")) + 1
    step_3 = next(i for i, x in enumerate(shown) if x.startswith("╭─ step 3:"))
    assert block == shown[:story_end] + shown[step_3:]
    last = stdout.strip().splitlines()[-1].replace(str(out), "/tmp/readme-trace.json")
    assert f"The check itself ends with `{last}`." in " ".join(doc.split())


def test_example_property_counterexample(tmp_path):
    p = run_kafkamc(
        "check", "--rf", "3", "--minisr", "2", "--properties", ROOT / "examples/properties.py",
        "--invariant", "NoAckBelowMinIsr", "--quiet", "--json", "--trace-out", tmp_path / "t.json", cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["violation"]["length"] == pins.NO_ACK_BELOW_MIN_ISR_LENGTH


def test_protocol_line_after_a_rule():
    """The README's example of the `protocol:` line after changed rules, run."""
    said = " ".join(README.split())
    ((flags, line),) = re.findall(r"`(--[^`]+)` prints `(protocol: [^`]+)`", said)
    p = run_kafkamc(*pins.DEFAULT_CHECK["argv"], *flags.split(), "--max-states", "1", columns=1000)
    assert line in p.stdout.splitlines()


def test_the_actions_are_listed_in_next_order():
    from kafkamc.spec.next import NEXT

    said = " ".join(README[README.index("## What is modelled") :].split())
    m = re.search(r"listed in order in `spec/next.py`: (.*?)\. ", said)
    assert m
    assert re.split(r", | and ", m[1]) == [a.type.__name__ for a in NEXT]


def _table_after(heading: str) -> list[list[str]]:
    """The rows (cells stripped of bold) of the first table after `heading`."""
    rest = README[README.index(heading) :].splitlines()
    start = next(i for i, x in enumerate(rest) if x.startswith("|"))
    rows = []
    for x in rest[start + 2 :]:
        if not x.startswith("|"):
            break
        rows.append([c.strip().replace("**", "") for c in x.strip("|").split("|")])
    return rows


def test_tradeoff_table_is_the_pinned_one():
    rows = _table_after("**The ELR trade-off**")
    assert {(int(r[0]), int(r[1])): tuple(r[2:]) for r in rows} == pins.TRADEOFF


def test_tradeoff_pins_agree_with_the_slow_test():
    """The RF 2 rows of the pin are the cells tests/test_liveness.py asserts `kafkamc tradeoff` gives."""
    tree = ast.parse((ROOT / "tests/test_liveness.py").read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_the_tradeoff")]
    (cells,) = [ast.literal_eval(n) for n in ast.walk(fn) if isinstance(n, ast.Dict)]
    words = {
        (rf, m): tuple(f"{'offline' if off else 'available'}, {'loses' if lose else 'durable'}" for off, lose in row)
        for (rf, m) in {k[:2] for k in cells}
        for row in [[cells[(rf, m, elr, unclean)] for elr in (False, True) for unclean in (False, True)]]
    }
    assert words == {k: v for k, v in pins.TRADEOFF.items() if k[0] == 2}


def test_durability_table_is_the_law_the_readme_states():
    """Writes continue through max(RF - M, 0) losses, nothing acknowledged is lost through
    min(M, RF) - 1 (the README's own statement, which `kafkamc durability` is tested against)."""
    rows = _table_after("## Durability table")
    cells = {(int(r[0]), int(r[1])): (int(r[2]), int(r[3])) for r in rows}
    assert cells == {(rf, m): (max(rf - m, 0), min(m, rf) - 1) for rf in (1, 2, 3) for m in (1, 2, 3)}
