"""The state of one replicated partition, grouped by owner. All of it is immutable.

The State and the messages are NamedTuples (built, hashed and compared in C). The
components (controller, broker, ghost, budget) are frozen, slotted dataclasses: the
invariants read their fields millions of times, and a slot reads in half the time of a
NamedTuple field. As NamedTuples they cost 3% fewer instructions but no less time.

Sets of brokers (ISR, registered brokers) are bitmasks: bit (b - 1) is broker b.
That keeps states small, hashable and ordered the same way in every process.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import NamedTuple

NO_LEADER = 0  # Kafka's leader id -1; broker ids start at 1
UNKNOWN = -1  # a follower LEO the leader has not learned yet


def bit(b: int) -> int:
    return 1 << (b - 1)


def members(mask: int) -> tuple[int, ...]:
    """Broker ids in a bitmask, ascending."""
    out = []
    b = 1
    while mask:
        if mask & 1:
            out.append(b)
        mask >>= 1
        b += 1
    return tuple(out)


def size(mask: int) -> int:
    return bin(mask).count("1")


class FetchRequest(NamedTuple):
    """What a follower's fetch tells the leader (Kafka's FetchRequest for one partition)."""

    fetch_offset: int  # the follower's LEO
    last_epoch: int  # the epoch of its last record (lastFetchedEpoch), -1 for none
    epoch: int  # the leader epoch it believes current (currentLeaderEpoch, KIP-320)
    bepoch: int  # its broker epoch (KIP-903)


class FetchResponse(NamedTuple):
    """The leader's answer to a fetch request."""

    leader: int
    epoch: int  # the leader epoch the leader answered in
    fetch_offset: int  # the offset the follower asked from
    records: tuple = ()  # ((epoch, record id), ...) from fetch_offset on
    hw: int = 0  # the leader's HW when it answered
    diverging: tuple | None = None  # (epoch, end offset) when the follower's log diverged


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    """The controller's answer to an AlterPartition request, on its way to the leader."""

    epoch: int  # leader epoch: the partition's after the change when ok, else the request's
    ok: bool
    isr: int  # the ISR the controller committed (when ok)
    pepoch: int  # the partition epoch after the change (when ok)
    error: str = ""  # Kafka error name when rejected


@dataclass(frozen=True, slots=True)
class Controller:
    """The KRaft controller's metadata for the partition and the broker registrations."""

    leader: int
    epoch: int  # leader epoch
    pepoch: int  # partition epoch: bumped by every change to leader or ISR
    isr: int  # bitmask
    registered: int  # bitmask of unfenced brokers
    bepochs: tuple  # broker epoch per broker (index b - 1)
    elr: int = 0  # eligible leader replicas (KIP-966), bitmask
    lastelr: int = 0  # last known leader (lastKnownElr as shipped): the leader when the ISR emptied
    recovering: bool = False  # LeaderRecoveryState RECOVERING after an unclean election (KIP-704)
    replicas: tuple = ()  # the assignment order (PartitionRegistration.replicas); elections follow it
    # Brokers in controlled shutdown (BrokerRegistration.inControlledShutdown), per broker (index
    # b - 1): the leader epoch the partition had once it entered, which every active broker must
    # have applied before it may exit; 0 for a broker not shutting down, () when none is.
    shutdown: tuple = ()
    # A reassignment in flight (KIP-455): replicas being added and removed (bitmasks); while one
    # is, `replicas` is the target followed by the removing replicas.
    adding: int = 0
    removing: int = 0

    @property
    def shutting(self) -> int:
        """Bitmask of the brokers in controlled shutdown."""
        mask = 0
        for i, e in enumerate(self.shutdown):
            if e:
                mask |= 1 << i
        return mask

    @property
    def active(self) -> int:
        """Bitmask of the brokers that may lead or join the ISR: registered, unfenced and not in
        controlled shutdown (BrokerRegistration.fenced / inControlledShutdown; KIP-841)."""
        return self.registered & ~self.shutting if self.shutdown else self.registered

    def in_order(self, mask: int) -> list:
        """The brokers of a bitmask in assignment order: the order every election tries them in."""
        return [b for b in self.replicas if mask & (1 << (b - 1))]

    def meta(self) -> tuple:
        """What a leader learns from the metadata log about its partition."""
        return (self.leader, self.epoch, self.pepoch, self.isr)


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker: its process, its cached metadata and its replica of the partition."""

    alive: bool = True
    bepoch: int = 1
    # Metadata as this broker last applied it; a broker acts on this, stale or not.
    leader: int = NO_LEADER
    epoch: int = 0
    pepoch: int = 0  # partition epoch as this leader knows it (0 on followers)
    isr: int = 0  # committed ISR as this leader knows it (0 on followers)
    # The replica.
    log: tuple = ()  # ((leader epoch, record id), ...); the LEO is len(log)
    cache: tuple = ()  # leader-epoch cache: ((epoch, start offset), ...)
    hw: int = 0
    # Leader-only state (reset when the broker is not leader).
    start: int = 0  # start offset of this leader's epoch
    views: tuple = ()  # follower LEO as learned from fetch requests, UNKNOWN until then
    vbepochs: tuple = ()  # follower broker epoch sent with its last fetch (KIP-903)
    pending: int = 0  # ISR proposed in an AlterPartition still in flight (0 = none)
    purgatory: tuple = ()  # acks=all requests waiting: ((offset, record id, brokers down at append), ...)
    # The AlterPartition response in flight to this leader (Kafka keeps one outstanding).
    alter: AlterPartitionResponse | None = None
    # An ISR change prepared (Partition.prepareIsrExpand on a fetch; prepareIsrShrink under
    # incarnations=kraft_steps) whose request has not reached the controller yet: the broker
    # epochs it names (addBrokerEpochToIsr, index b - 1; () before KIP-903), its ISR being
    # `pending`; None when no request waits.
    request: tuple | None = None
    # Brokers this leader's metadata shows fenced or in controlled shutdown (bitmask), as of the
    # metadata it last applied: what Partition.isReplicaIsrEligible reads (KIP-841).
    ineligible: int = 0
    # Follower-only state.
    truncating: bool = False  # must ask OffsetsForLeaderEpoch before fetching (KIP-101 rules)
    stalled: bool = False  # stuck or slow: has not fetched for replica.lag.time.max.ms
    # Process state kept across a crash.
    clean: bool = True  # the last shutdown was clean (Kafka checks this at re-registration)
    # The HW last written to the checkpoint file (replication-offset-checkpoint); a hard crash
    # restarts from it, not from the HW in memory (spec/broker_lifecycle.py).
    checkpoint_hw: int = 0
    # How much of the log is known to be on disk: what this process recovered at its start
    # (a clean shutdown flushes the whole log; a hard crash kept what it keeps). Appends are
    # not flushed (log.flush.interval.* are off by default), so a hard crash may lose them
    # but never this prefix.
    flushed: int = 0

    @property
    def leo(self) -> int:
        return len(self.log)

    def last_epoch(self) -> int:
        return self.cache[-1][0] if self.cache else -1

    @property
    def applied(self) -> int:
        """The leader epoch whose metadata it applied, plus one, or 0 while it is down (leader
        epochs start at 0): one number, so that the fast path keys a step reading only this of
        a broker (State.applied_epoch) on it, not on the whole broker."""
        return self.epoch + 1 if self.alive else 0


@dataclass(frozen=True, slots=True)
class Ghost:
    """Variables that only invariants read: what producers and consumers were told."""

    acked: int = 0  # bitmask over record ids acknowledged to a producer
    committed: tuple = ()  # the longest log prefix a true leader ever declared committed
    hw_seen: int = 0  # the highest HW a consumer observed from the true leader
    acked_down: int = 0  # most brokers down all the way from an acks=all append to its ack


@dataclass(frozen=True, slots=True)
class Budget:
    """Bound counters: how much of each budget the path to this state spent, as sorted
    (bound name, count) pairs with the zeros left out. The bounds are declared by the
    actions that spend them (spec/next.py), so the budget names none of them."""

    spent: tuple = ()

    def of(self, bound: str) -> int:
        for name, n in self.spent:
            if name == bound:
                return n
        return 0

    def spend(self, bound: str) -> Budget:
        counts = dict(self.spent)
        counts[bound] = counts.get(bound, 0) + 1
        return Budget(tuple(sorted(counts.items())))

    @staticmethod
    def make(**counts: int) -> Budget:
        """A budget with the given counts spent, e.g. Budget.make(records=1)."""
        return Budget(tuple(sorted((k, v) for k, v in counts.items() if v)))


class State(NamedTuple):
    controller: Controller
    brokers: tuple  # Broker per broker id, index b - 1
    ghost: Ghost = Ghost()
    budget: Budget = Budget()

    def key(self) -> tuple:
        """The state as nested tuples of ints, bools and strings (records become the tuples of
        their fields, in declaration order): what identity and the byte encoding derive from."""
        return as_tuple(self)

    def broker(self, b: int) -> Broker:
        return self.brokers[b - 1]

    def is_stalled(self, b: int) -> bool:
        """Whether broker b has not fetched for replica.lag.time.max.ms (all a leader's ISR
        shrink needs to know of the follower)."""
        return self.brokers[b - 1].stalled

    def applied_epoch(self, b: int) -> int:
        """Broker b's Broker.applied (all a controlled shutdown's end needs to know of it)."""
        return self.brokers[b - 1].applied

    def with_broker(self, b: int, broker: Broker) -> State:
        bs = list(self.brokers)
        bs[b - 1] = broker
        return State(self.controller, tuple(bs), self.ghost, self.budget)

    def map_brokers(self, fn) -> State:
        """Every broker replaced by fn(broker). fn must read nothing but the broker it is
        given: the fast path then applies it to each broker on its own, and caches it per
        broker (checker/cache/footprint.py), so a step that does the same to every broker is not
        keyed on all of them."""
        return State(self.controller, tuple(map(fn, self.brokers)), self.ghost, self.budget)

    def leads(self, b: int) -> bool:
        """Broker b is alive and acts as leader on the metadata it has (maybe a zombie)."""
        br = self.broker(b)
        return br.alive and br.leader == b

    def true_leader(self) -> int:
        """The broker that leads in the controller's current epoch and knows it, or NO_LEADER."""
        c = self.controller
        if c.leader == NO_LEADER:
            return NO_LEADER
        br = self.broker(c.leader)
        if br.alive and br.leader == c.leader and br.epoch == c.epoch:
            return c.leader
        return NO_LEADER


def as_tuple(obj) -> tuple:
    """A record as plain nested tuples of its fields in declaration order (a record inside it,
    such as a broker's AlterPartition response or a state's brokers, becomes a tuple too)."""
    records = _RECORD_TYPES
    return tuple(
        as_tuple(v)
        if type(v) in records
        else tuple(map(as_tuple, v))
        if type(v) is tuple and v and type(v[0]) in records
        else v
        for v in FIELD_VALUES[type(obj)](obj)
    )


def record_fields(cls) -> tuple:
    """The field names of a state record, in declaration order."""
    return cls._fields if hasattr(cls, "_fields") else tuple(f.name for f in fields(cls))


def initial_state(rf: int, replicas: tuple | None = None, n: int | None = None) -> State:
    """The preferred replica (first in the assignment) leads epoch 1 with every replica in the
    ISR and empty logs; all metadata known. The assignment is 1..rf unless given; the cluster
    has n brokers (rf unless given), every one registered, those outside the assignment
    hosting nothing."""
    replicas = tuple(range(1, rf + 1)) if replicas is None else tuple(replicas)
    n = rf if n is None else n
    first = replicas[0]
    isr = 0
    for b in replicas:
        isr |= bit(b)
    c = Controller(
        leader=first, epoch=1, pepoch=1, isr=isr, registered=(1 << n) - 1, bepochs=(1,) * n, replicas=replicas
    )
    brokers = []
    for b in range(1, n + 1):
        br = Broker(leader=first, epoch=1) if b in replicas else Broker()
        if b == first:
            br = Broker(
                leader=first,
                epoch=1,
                pepoch=1,
                isr=isr,
                cache=((1, 0),),
                views=(UNKNOWN,) * n,
                vbepochs=(0,) * n,
            )
        brokers.append(br)
    return State(c, tuple(brokers))


# ---------------------------------------------------------------- fast copy-with-changes

_UNSET = object()


def _compile_evolve(cls):
    """A per-class replace: the changed fields by keyword, the rest copied. Without the
    per-call introspection of dataclasses.replace, which was a quarter of the search time.
    A frozen dataclass's __init__ sets each field through object.__setattr__; a slotted
    one is filled here through its slots' own setters instead, in half the time (it has
    no __post_init__ to skip)."""
    ns = {"_UNSET": _UNSET, "_cls": cls}
    if hasattr(cls, "_fields"):  # a NamedTuple: built with tuple.__new__, no dict on the way
        names = cls._fields
        args = ", ".join(f"self[{i}] if {n} is _UNSET else {n}" for i, n in enumerate(names))
        ns["_new"] = tuple.__new__
        body = f"return _new(_cls, ({args},))"
    elif "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        names = [f.name for f in fields(cls)]
        body = "return _cls(" + ", ".join(f"self.{n} if {n} is _UNSET else {n}" for n in names) + ")"
    else:
        names = [f.name for f in fields(cls)]
        ns["_new"] = object.__new__
        ns.update({f"_set_{n}": getattr(cls, n).__set__ for n in names})
        body = (
            "obj = _new(_cls)\n    "
            + "\n    ".join(f"_set_{n}(obj, self.{n} if {n} is _UNSET else {n})" for n in names)
            + "\n    return obj"
        )
    params = ", ".join(f"{n}=_UNSET" for n in names)
    exec(f"def evolve(self, *, {params}):\n    {body}\n", ns)
    return ns["evolve"]


RECORDS = (FetchRequest, FetchResponse, AlterPartitionResponse, Controller, Broker, Ghost, Budget, State)
for _cls in RECORDS:
    _cls.__replace__ = _compile_evolve(_cls)  # type: ignore[union-attr]  # copy.replace protocol (3.13)
_RECORD_TYPES = frozenset(RECORDS)
# Each record's field values in declaration order, as a tuple (as_tuple's getter, built once;
# also a key that hashes and compares in C, where a dataclass's __hash__ runs in Python).
FIELD_VALUES = {
    cls: (lambda obj, g=attrgetter(*names): (g(obj),)) if len(names) == 1 else attrgetter(*names)
    for cls in RECORDS
    for names in [record_fields(cls)]
}


def replace(obj, **changes):
    """A copy of a state record with some fields changed, fast; an unknown field is a TypeError."""
    return type(obj).__replace__(obj, **changes)
