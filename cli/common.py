"""What every command module shares: exit statuses and the bad-input exception."""

from __future__ import annotations

import click
from kafkamc.spec.bounds import Bound
from kafkamc.spec.config import ACKS, Config
from kafkamc.spec.next import BOUNDS
from kafkamc.spec.protocol import NEWEST, ProtocolError, parse_rule, preset

EXIT_HOLDS, EXIT_VIOLATED, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


class UsageProblem(Exception):
    """Bad input found after click parsed the command line; main() prints it as one line, exit 2."""


DEFAULTS = Config()
# The bounds' flags come from the actions that declare them (spec/next.py).
CONFIG_OPTION_NAMES = (
    "rf",
    "minisr",
    "acks",
    "unclean",
    "era",
    "rules",
    "elr",
    *(b.setting for b in BOUNDS),
    "symmetry",
)


def _bound(b: Bound):
    return click.option(b.flag, b.setting, type=int, default=b.default, show_default=True, help=b.meaning)


_CONFIG_OPTIONS = (
    click.option("--rf", type=int, default=DEFAULTS.rf, show_default=True, help="replication factor (brokers)"),
    click.option("--minisr", type=int, default=DEFAULTS.minisr, show_default=True, help="min.insync.replicas"),
    click.option("--acks", type=click.Choice(ACKS), default=DEFAULTS.acks, show_default=True, help="producer acks"),
    click.option(
        "--unclean/--no-unclean", default=DEFAULTS.unclean, show_default=True, help="unclean.leader.election.enable"
    ),
    click.option(
        "--protocol",
        "era",
        default=NEWEST,
        show_default=True,
        metavar="ERA",
        help="Kafka release whose replication rules apply (`kafkamc protocols` lists them)",
    ),
    click.option(
        "--rule", "rules", multiple=True, metavar="NAME=VALUE", help="override one protocol rule (repeatable)"
    ),
    click.option("--elr/--no-elr", default=None, help="eligible leader replicas, KIP-966 (default: as the protocol)"),
    *(_bound(b) for b in BOUNDS),
    click.option(
        "--symmetry/--no-symmetry",
        default=DEFAULTS.symmetry,
        show_default=True,
        help="count states that differ only by broker ids once (every replica assignment order is checked)",
    ),
)


def config_options(command):
    """The Kafka settings, protocol and bounds, as the same flags on every command that builds a model."""
    for option in reversed(_CONFIG_OPTIONS):
        command = option(command)
    return command


def build_protocol(era: str, rules=(), elr=None):
    """The preset, then each --rule, then --elr/--no-elr; any unknown name is a usage error."""
    try:
        protocol = preset(era)
        overrides = dict(parse_rule(r) for r in rules)
        if elr is not None:
            overrides["elr"] = "on" if elr else "off"
        return protocol.with_rules(**overrides)
    except ProtocolError as e:
        raise UsageProblem(str(e)) from None


def build_config(options: dict) -> Config:
    """The Config named by the config_options flags (taken out of `options`)."""
    o = {name: options.pop(name) for name in CONFIG_OPTION_NAMES}
    protocol = build_protocol(o.pop("era"), o.pop("rules"), o.pop("elr"))
    return Config(protocol=protocol, **o).validated()
