"""Issue 43's architecture: the configuration does not import the action table. Each bound is
declared beside its actions; a Model fixes its actions' bounds into its configuration when it is
built, and a command validates the configuration once, where it enters."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner
from kafkamc.cli.main import cli
from kafkamc.spec import model as spec_model
from kafkamc.spec.config import Config, ConfigError
from kafkamc.spec.model import Model
from kafkamc.spec.next import BOUNDS, NEXT, bounds_of
from kafkamc.spec.produce import RECORDS
from kafkamc.spec.reassignment import REASSIGNMENTS


def test_the_configuration_loads_without_next():
    code = "import sys, kafkamc.spec.config; print(sorted(m for m in sys.modules if m.startswith('kafkamc')))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(p.stdout)
    assert "kafkamc.spec.config" in loaded and "kafkamc.spec.next" not in loaded
    assert not any(m.endswith(("reassignment", "produce", "broker_lifecycle")) for m in loaded)


def test_a_model_fixes_the_bounds_of_its_actions():
    cfg = Config(max_records=1, max_crashes=1)  # a former name too
    assert cfg.known_bounds == () and cfg.bound(RECORDS) == 1 and Config().bound(RECORDS) == RECORDS.default
    m = Model(cfg)
    assert m.config.known_bounds == BOUNDS == bounds_of(NEXT)
    assert m.config.max_records == 1 and m.config.max_clean_shutdowns == 1 and m.config == cfg
    assert dict(m.config.limits) == {b.name: m.config.bound(b) for b in BOUNDS}
    # A model of changed actions (a test's) fixes Next's and theirs; one bounded before is kept.
    produce_only = tuple(a for a in NEXT if a.name == "Produce")
    assert Model(cfg, produce_only).config.known_bounds == BOUNDS
    assert Model(m.config, produce_only).config is m.config


def test_a_bound_is_checked_once_fixed():
    assert Config(max_records=99).validated().bound(RECORDS) == 99  # nothing to check it against yet
    with pytest.raises(ConfigError, match="--max-records 99 is too large for this model; use at most 6"):
        Config(max_records=99).bounded(BOUNDS).validated()
    with pytest.raises(ConfigError, match="--max-reassignments needs --brokers above --rf"):
        Config(max_reassignments=1).bounded(BOUNDS).validated()
    assert REASSIGNMENTS.needs_spare_broker
    with pytest.raises(TypeError, match="Config has no setting max_bogus"):
        Config(max_bogus=1).bounded(BOUNDS)


def test_one_check_validates_once_and_builds_one_model(monkeypatch):
    """Issue 43 counted Model.__init__ 5 times and Config.validated twice for one check."""
    counts = {"validated": 0, "Model": 0}
    validated, init = Config.validated, spec_model.Model.__init__

    def count_validated(self):
        counts["validated"] += 1
        return validated(self)

    def count_init(self, *args, **kwargs):
        counts["Model"] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(Config, "validated", count_validated)
    monkeypatch.setattr(spec_model.Model, "__init__", count_init)
    args = ["check", "--rf", "2", "--minisr", "1", "--max-records", "1", "--quiet", "--workers", "1"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert counts == {"validated": 1, "Model": 1}
