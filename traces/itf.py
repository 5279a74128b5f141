"""Export a trace in the Informal Trace Format (ITF) of Apalache and Quint.

Format: https://apalache-mc.org/docs/adr/015adr-trace.html. Only the core constructs of
that ADR are used (numbers, strings, booleans, lists, records, #set, #tup, #map), so any ITF
reader can load the file. ITF has no null: an absent value is an empty list, or a field
left out of an action record.

Variables of every state:
  controller  record: leader (0 = none), epoch, pepoch, isr, registered, elr, lastelr (sets of
              broker ids), bepochs (map broker -> broker epoch), recovering, replicas (the
              assignment: a list of broker ids in the order elections try them; during a
              reassignment the target, then the removing replicas), adding and removing (sets:
              the reassignment in flight, KIP-455), shutdown (map broker -> the leader epoch its
              controlled shutdown waits for other brokers to apply, 0 = not shutting down)
  brokers     map broker id -> record: alive, bepoch, leader, epoch, pepoch, isr (the leader's
              ISR view; empty on followers), log (list of {epoch, record}), leo, hw, cache (list
              of {epoch, start}), start, views (map broker -> follower LEO, -1 = unknown),
              vbepochs, pending (set), purgatory (list of {offset, record, down}), alter (list
              of at most one AlterPartition response record), ineligible (set: the brokers the
              leader's metadata shows fenced or shutting down), truncating, stalled, clean,
              checkpoint_hw (the HW in the checkpoint file, what a hard crash restarts with)
  ghost       record: acked (set of record ids), committed (list of record ids), hw_seen, acked_down
  budget      record: one count per search bound declared in spec/next.py (records, crashes, ...)
  action      the action that led to the state: a record with a "type" field and the action's
              arguments ({"type": "Init"} for the initial state)

A liveness counterexample is a lasso: the top-level "loop" (the ADR's optional field) is the
index of the state its loop starts at; the last state equals that one (but for its action, the
step into it), and the states from it on repeat forever (loop = the last index: the last state
stays forever). Other traces have none.
"""

from __future__ import annotations

from dataclasses import fields

from kafkamc.spec.next import BOUNDS
from kafkamc.spec.state import Broker, Controller, State, members
from kafkamc.traces.trace import Trace

FORMAT_URL = "https://apalache-mc.org/docs/adr/015adr-trace.html"
VARS = ("controller", "brokers", "ghost", "budget", "action")
_SAFE = 2**53 - 1  # beyond this a JSON number loses precision in JavaScript readers


def num(n: int):
    if isinstance(n, bool):
        raise TypeError("a boolean is not an ITF integer")
    return n if -_SAFE <= n <= _SAFE else {"#bigint": str(n)}


def broker_set(mask: int) -> dict:
    return {"#set": [num(b) for b in members(mask)]}


def per_broker(values: tuple) -> dict:
    """A tuple indexed by broker id - 1, as a map broker id -> value."""
    return {"#map": [[num(b), num(v)] for b, v in enumerate(values, 1)]}


def controller(c: Controller) -> dict:
    return {
        "leader": num(c.leader),
        "epoch": num(c.epoch),
        "pepoch": num(c.pepoch),
        "isr": broker_set(c.isr),
        "registered": broker_set(c.registered),
        "bepochs": per_broker(c.bepochs),
        "elr": broker_set(c.elr),
        "lastelr": broker_set(c.lastelr),
        "recovering": c.recovering,
        "replicas": [num(b) for b in c.replicas],
        "adding": broker_set(c.adding),
        "removing": broker_set(c.removing),
        "shutdown": per_broker(c.shutdown or (0,) * len(c.bepochs)),
    }


def broker(br: Broker) -> dict:
    alter = (
        []
        if br.alter is None
        else [
            {
                "epoch": num(br.alter.epoch),
                "ok": br.alter.ok,
                "isr": broker_set(br.alter.isr),
                "pepoch": num(br.alter.pepoch),
                "error": br.alter.error,
            }
        ]
    )
    return {
        "alive": br.alive,
        "bepoch": num(br.bepoch),
        "leader": num(br.leader),
        "epoch": num(br.epoch),
        "pepoch": num(br.pepoch),
        "isr": broker_set(br.isr),
        "log": [{"epoch": num(e), "record": num(r)} for e, r in br.log],
        "leo": num(br.leo),
        "hw": num(br.hw),
        "cache": [{"epoch": num(e), "start": num(s)} for e, s in br.cache],
        "start": num(br.start),
        "views": per_broker(br.views),
        "vbepochs": per_broker(br.vbepochs),
        "pending": broker_set(br.pending),
        "purgatory": [{"offset": num(o), "record": num(r), "down": num(d)} for o, r, d in br.purgatory],
        "alter": alter,
        "ineligible": broker_set(br.ineligible),
        "truncating": br.truncating,
        "stalled": br.stalled,
        "clean": br.clean,
        "checkpoint_hw": num(br.checkpoint_hw),
    }


def action(a) -> dict:
    if a is None:
        return {"type": "Init"}
    out: dict = {"type": type(a).__name__}
    for f in fields(a):
        v = getattr(a, f.name)
        if v is None:
            continue  # e.g. BrokerCrash.keep of a clean crash
        if isinstance(v, tuple):  # an ISR is a set; a reassignment's target list is ordered
            out[f.name] = [num(b) for b in v] if f.name == "target" else {"#set": [num(b) for b in v]}
        else:
            out[f.name] = num(v)
    return out


def state_vars(a, s: State) -> dict:
    g, u = s.ghost, s.budget
    return {
        "controller": controller(s.controller),
        "brokers": {"#map": [[num(b), broker(br)] for b, br in enumerate(s.brokers, 1)]},
        "ghost": {
            "acked": {"#set": [num(r) for r in members(g.acked)]},
            "committed": [num(r) for r in g.committed],
            "hw_seen": num(g.hw_seen),
            "acked_down": num(g.acked_down),
        },
        "budget": {b.name: num(u.of(b.name)) for b in BOUNDS},
        "action": action(a),
    }


def to_itf(trace: Trace) -> dict:
    """The trace as an ITF object (JSON-ready)."""
    meta = {
        "format": "ITF",
        "format-description": FORMAT_URL,
        "source": "kafkamc",
        "description": (f"kafkamc counterexample to {trace.invariant}" if trace.invariant else "kafkamc trace"),
        "config": trace.config.to_dict(),
        "invariant": trace.invariant,
        "kind": trace.kind,
        "length": trace.length,
    }
    if trace.loop is not None:
        meta["description"] = (
            f"kafkamc liveness counterexample to {trace.invariant}: a lasso looping from state {trace.loop}"
        )
    states = [{"#meta": {"index": i}, **state_vars(a, s)} for i, (a, s) in enumerate(trace.steps)]
    lasso = {} if trace.loop is None else {"loop": num(trace.loop)}
    return {"#meta": meta, "vars": list(VARS), "states": states, **lasso}
