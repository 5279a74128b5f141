"""States as bytes and 64-bit fingerprints, derived from the records' fields.

The encoding is the state's key (spec.state.as_tuple: every record as the tuple of its
fields in declaration order) written by marshal version 2, which writes no
back-references, so equal values give equal bytes in every process. Decoding builds the
records back from the same field order; nothing here lists a field by hand.
"""

from __future__ import annotations

import hashlib
import marshal

from kafkamc.spec.state import AlterPartitionResponse, Broker, Budget, Controller, Ghost, State, replace


def encode(state: State) -> bytes:
    return marshal.dumps(state.key(), 2)


def fingerprint_bytes(data: bytes) -> int:
    """64 stable bits of an encoding (blake2b; Python's hash() differs between processes)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def fingerprint(state: State) -> int:
    return fingerprint_bytes(encode(state))


def _broker(values: tuple) -> Broker:
    br = Broker(*values)
    alter: tuple | None = br.alter  # type: ignore[assignment]  # still the key's plain tuple here
    return br if alter is None else replace(br, alter=AlterPartitionResponse(*alter))


def state_from_key(key: tuple) -> State:
    """The inverse of State.key()."""
    c, brokers, g, u = key
    return State(Controller(*c), tuple(_broker(b) for b in brokers), Ghost(*g), Budget(*u))


# A component's kind (FastSuccessors.tags: 0 controller, 1 broker, 2 ghost, 3 budget) -> how
# to build it back from as_tuple's plain tuple.
_BUILD = (lambda v: Controller(*v), _broker, lambda v: Ghost(*v), lambda v: Budget(*v))


def component_from_tuple(kind: int, values: tuple):
    """The inverse of as_tuple for one component of a state, of the given kind."""
    return _BUILD[kind](values)


def decode(data: bytes) -> State:
    return state_from_key(marshal.loads(data))
