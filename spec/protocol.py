"""Protocol rules that changed in Kafka's history, as named settings, and era presets.

Each rule has an ordered list of behaviours, oldest first; the step functions read the
rule by name, so an old behaviour is a value of the configuration, never commented code.
A preset fixes every rule as of one Kafka release.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace


class ProtocolError(ValueError):
    """An unknown preset, rule or rule value; the CLI turns it into exit 2."""


@dataclass(frozen=True)
class Rule:
    name: str
    values: tuple  # behaviours, oldest first
    meaning: str
    changes: tuple  # (value, first release with it, KIP or JIRA), one per newer value
    # (value, where it is described): behaviours no Kafka release has, such as the fix of a
    # finding. They are listed last in `values`, and no preset takes them: only --rule does.
    proposed: tuple = ()


RULES: tuple[Rule, ...] = (
    Rule(
        "isr_lag",
        ("messages", "time"),
        "when a leader may drop a follower from the ISR: more than replica.lag.max.messages "
        "behind (1 in the model), or only after it was stuck or slow for replica.lag.time.max.ms",
        (("time", "0.9.0", "KAFKA-1546"),),
    ),
    Rule(
        "truncation",
        ("hw", "leader_epoch", "leader_epoch_kip279", "diverging_epoch"),
        "how a follower finds where its log diverges from the leader's: truncate to its own HW "
        "on becoming follower; ask OffsetsForLeaderEpoch once; ask until the epochs agree; "
        "or learn the diverging epoch from every fetch response",
        (
            ("leader_epoch", "0.11.0", "KIP-101"),
            ("leader_epoch_kip279", "2.0.0", "KIP-279"),
            ("diverging_epoch", "2.8.0", "KAFKA-10554"),
        ),
    ),
    Rule(
        "epoch_cache_truncation",
        ("log_only", "at_log_end"),
        "what a follower's truncation to an offset at or past its log end does: nothing, so a "
        "follower that led an epoch without appending keeps that epoch's cache entry and sends "
        "it with every fetch; or drop the cache entries from the log end on (UnifiedLog.truncateTo)",
        (("at_log_end", "2.8.0", "KAFKA-10706"),),
    ),
    Rule(
        "leader_epoch_cache",
        ("on_append", "on_election"),
        "when a new leader records its epoch in its leader-epoch cache: at its first append "
        "in the epoch, or as soon as it is elected",
        (("on_election", "2.0.1", "KAFKA-7415"),),
    ),
    Rule(
        "truncate_on",
        ("leader_change", "epoch_change"),
        "when a follower goes through truncation again: only when the leader changes, or on "
        "every new leader epoch (the same leader re-elected included)",
        (("epoch_change", "2.0.1", "KAFKA-7164"),),
    ),
    Rule(
        "fetch_fencing",
        ("none", "current_leader_epoch"),
        "whether Fetch and OffsetsForLeaderEpoch carry the follower's current leader epoch, "
        "so that a leader rejects requests from another epoch",
        (("current_leader_epoch", "2.1.0", "KIP-320"),),
    ),
    Rule(
        "isr_join",
        ("hw", "hw_and_epoch_start"),
        "what a follower must reach to rejoin the ISR: the leader's HW, or also the start "
        "offset of the leader's current epoch",
        (("hw_and_epoch_start", "2.0.1", "KAFKA-7128"),),
    ),
    Rule(
        "isr_update",
        ("zookeeper", "alter_partition"),
        "how a leader changes the ISR: writes it itself in one step (ZooKeeper), or sends "
        "AlterPartition to the controller and waits for the answer",
        (("alter_partition", "2.7.0", "KIP-497"),),
    ),
    Rule(
        "hw_pending_isr",
        ("committed", "maximal"),
        "which ISR the HW is computed over while an AlterPartition is in flight: the last "
        "committed one, or the maximal one (committed plus proposed additions)",
        (("maximal", "2.7.0", "KIP-497"),),
    ),
    Rule(
        "hw_min_isr",
        ("any", "min_isr"),
        "whether the leader advances the HW with an ISR below min.insync.replicas",
        (("min_isr", "3.7.0", "KAFKA-15583"),),
    ),
    Rule(
        "hw_joining_replica",
        ("ignore", "wait", "wait_eligible"),
        "whether the HW also waits for a follower outside the ISR that is caught up (about to "
        "join it): never; always; or only if it may join the ISR (not fenced, broker epoch current)",
        (("wait", "0.10.2", "KAFKA-4485"), ("wait_eligible", "3.6.0", "KAFKA-15021")),
    ),
    Rule(
        "isr_join_broker_epoch",
        ("unchecked", "checked", "checked_no_unknown_join"),
        "whether an ISR addition whose broker epoch (learned from the follower's fetch) is not the "
        "broker's current registration is refused, by the leader (Partition.isBrokerEpochIsrEligible) "
        "and the controller (ReplicationControlManager.ineligibleReplicasForIsr): never; or refused, "
        "except that an epoch of -1 (a fetch from a process not registered yet, or an older "
        "broker) passes both checks; or refused, -1 included for the member being added",
        (("checked", "3.5.0", "KIP-903"),),
        (("checked_no_unknown_join", "finding 2, docs/FINDINGS.md"),),
    ),
    Rule(
        "consumer_hw",
        ("leader_hw", "kip207"),
        "the HW a consumer can read from a leader: any, or none until the leader's HW has "
        "reached the start offset of its epoch",
        (("kip207", "2.2.0", "KIP-207"),),
    ),
    Rule(
        "elr",
        ("off", "on"),
        "eligible leader replicas: members that leave an ISR below min.insync.replicas stay "
        "electable, ahead of unclean election (opt-in in 4.0 with eligible.leader.replicas.version=1, "
        "on by default for new clusters since 4.1)",
        (("on", "4.0.0", "KIP-966"),),
    ),
    Rule(
        "controlled_shutdown",
        ("zookeeper", "kraft"),
        "when a broker in controlled shutdown may stop: as soon as it leads nothing (ZooKeeper's "
        "ControlledShutdown request), or also once every active broker has applied the metadata "
        "of its shutdown (KRaft's BrokerHeartbeatManager)",
        (("kraft", "2.8.0", "KIP-631"),),
    ),
    Rule(
        "last_known_leader",
        ("any", "unfenced"),
        "which last known leader the controller elects once the ISR and the ELR are empty: "
        "any, a fenced one included (4.0 only logged the check), or only an unfenced one",
        (("unfenced", "4.1.0", "KAFKA-19522"),),
    ),
    Rule(
        "reassignment_completion",
        ("all_target", "adding", "adding_unless_shrinking"),
        "which partition change completes a reassignment: one that puts every target replica in "
        "the ISR (ZooKeeper's KafkaController.isReassignmentComplete); one whose ISR, without the "
        "removing replicas, holds every adding replica (PartitionChangeBuilder."
        "completeReassignmentIfNeeded); every target replica again; or every adding replica, and "
        "every target replica only when the move removes more replicas than it adds "
        "(PartitionReassignmentReplicas.maybeCompleteReassignment)",
        (
            ("adding", "3.1.0", "KAFKA-12803"),
            ("all_target", "3.8.0", "KAFKA-15665"),
            ("adding_unless_shrinking", "4.3.0", "KAFKA-19975"),
        ),
    ),
    Rule(
        "incarnations",
        ("fenced_first", "kraft_steps"),
        "how a restart and the ISR expansions around it are modelled: the restart waits for the "
        "fence of the previous incarnation and registers, unfenced, in one step, and a leader "
        "proposes an addition from its view of a follower at any step; or Kafka's own steps "
        "(BrokerServer.startup): the process starts and fetches with broker epoch -1, registers "
        "(before or after the fence) fenced, and is unfenced by a heartbeat; an expansion is "
        "prepared on a fetch (Partition.maybeExpandIsr) and a shrink by the lag check "
        "(Partition.maybeShrinkIsr, PendingShrinkIsr), each reaching the controller later; the "
        "leader applies KIP-903 too, -1 passing; a hard crash keeps what the process recovered",
        (),
        (
            (
                "kraft_steps",
                "issue 41: what every KRaft release does; no preset's default, since it makes the "
                "default check 5.3 times larger (docs/MODEL.md says what the coarser default hides)",
            ),
        ),
    ),
    Rule(
        "leader_reelection",
        ("reset", "keep", "reset_on_epoch_gap"),
        "what a leader keeps of its followers' fetch state (log end offset, broker epoch) when "
        "it is elected again while its metadata still shows it leading, as when one metadata "
        "delta brings several leader epochs (Partition.makeLeader, Replica.resetReplicaState with "
        "isNewLeader = !isLeader): nothing, every makeLeader forgets it; all of it, whatever epochs "
        "it missed; or nothing when the new leader epoch is not the next one (it missed an epoch, "
        "in which a follower may have truncated)",
        (("keep", "0.9.0", "KAFKA-2721"),),
        (("reset_on_epoch_gap", "the re-election finding, docs/FINDINGS.md"),),
    ),
)

RULE_NAMES = tuple(r.name for r in RULES)


@dataclass(frozen=True)
class Protocol:
    """One value per rule; the default is the newest behaviour of each that a release has
    (a proposed one is never a default)."""

    isr_lag: str = "time"
    truncation: str = "diverging_epoch"
    epoch_cache_truncation: str = "at_log_end"
    leader_epoch_cache: str = "on_election"
    truncate_on: str = "epoch_change"
    fetch_fencing: str = "current_leader_epoch"
    isr_join: str = "hw_and_epoch_start"
    isr_update: str = "alter_partition"
    hw_pending_isr: str = "maximal"
    hw_min_isr: str = "min_isr"
    hw_joining_replica: str = "wait_eligible"
    isr_join_broker_epoch: str = "checked"
    consumer_hw: str = "kip207"
    elr: str = "on"
    controlled_shutdown: str = "kraft"
    last_known_leader: str = "unfenced"
    reassignment_completion: str = "adding_unless_shrinking"
    incarnations: str = "fenced_first"
    leader_reelection: str = "keep"

    def validated(self) -> Protocol:
        for r in RULES:
            v = getattr(self, r.name)
            if v not in r.values:
                raise ProtocolError(f"rule {r.name} has no behaviour {v!r}; choose one of {', '.join(r.values)}")
        return self

    def with_rules(self, **overrides: str) -> Protocol:
        for name in overrides:
            if name not in RULE_NAMES:
                raise ProtocolError(f"unknown protocol rule {name!r}; rules: {', '.join(RULE_NAMES)}")
        return replace(self, **overrides).validated()

    def to_dict(self) -> dict:
        return asdict(self)

    def era(self) -> str:
        """The preset this protocol equals, or 'custom'."""
        for name, p in PRESETS.items():
            if p == self:
                return name
        return "custom"

    def differences(self, other: Protocol) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)}


def _release_key(release: str) -> tuple:
    return tuple(int(x) for x in release.split("."))


def as_of(release: str) -> Protocol:
    """Every rule as it behaved in the given Kafka release."""
    values = {}
    for r in RULES:
        value = r.values[0]
        for newer, since, _ref in r.changes:
            if _release_key(since) <= _release_key(release):
                value = newer
        values[r.name] = value
    return Protocol(**values)


# The first release the model covers (min.insync.replicas arrived in 0.8.2, KAFKA-1555), then
# every release where at least one rule changed.
ERAS = tuple(sorted({"0.8.2"} | {since for r in RULES for _v, since, _ref in r.changes}, key=_release_key))
PRESETS: dict[str, Protocol] = {era: as_of(era) for era in ERAS}
NEWEST = ERAS[-1]
OLDEST = ERAS[0]
ALIASES = {"newest": NEWEST, "oldest": OLDEST}
# Releases after an era that changed none of its rules: their names give that era's rules (4.2's
# and 4.4's rules were read in their jars). Add a release here once its changes are read (and give
# it an era if a rule changed).
SAME_AS = {"4.2": "4.1.0", "4.4": "4.3.0"}


def preset(name: str) -> Protocol:
    key = ALIASES.get(name, name)
    # Accept "2.7" for "2.7.0", and a later release with the newest rules ("4.4", "4.4.0").
    if key not in PRESETS and key + ".0" in PRESETS:
        key += ".0"
    for release, era in SAME_AS.items():
        if key not in PRESETS and (key == release or key.startswith(release + ".")):
            key = era
    if key not in PRESETS:
        same = "; ".join(f"{r} names {e}'s rules" for r, e in SAME_AS.items())
        raise ProtocolError(f"unknown protocol preset {name!r}; presets: {', '.join(ERAS)} (or newest, oldest; {same})")
    return PRESETS[key]


def parse_rule(text: str) -> tuple[str, str]:
    """'name=value' from the command line."""
    name, sep, value = text.partition("=")
    name, value = name.strip().replace("-", "_"), value.strip()
    if not sep or not name or not value:
        raise ProtocolError(f"--rule expects NAME=VALUE (got {text!r})")
    if name not in RULE_NAMES:
        raise ProtocolError(f"unknown protocol rule {name!r}; rules: {', '.join(RULE_NAMES)}")
    return name, value
