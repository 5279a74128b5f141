"""The replication protocol of one Kafka partition as a pure-Python transition system.

Modelling simplifications (each one keeps the state space finite or small, and none
removes a behaviour that the invariants are about, unless noted):
- One partition, replicated on rf of the cluster's brokers (1..rf unless --brokers makes the
  cluster larger; spec/reassignment.py moves it). The assignment order (the replica
  list elections follow) is part of the state, and every order is an initial state, in
  which the preferred replica leads epoch 1; symmetry reduction folds the orders into one.
- Offsets are exclusive: the LEO is the log length and the HW is the first offset not
  yet committed. Records are unique ids 1..max_records with the leader epoch they were
  written in; there are no batches, segments or log start offset.
- There are no clocks. "Stuck or slow for replica.lag.time.max.ms" is the event
  ReplicaStall, which its next fetch ends; a leader may drop a stalled follower that is
  behind its LEO (and, under the old message rule, any follower more than one record
  behind: replica.lag.max.messages is 1 in the model). Session expiry is the bounded
  event ControllerFenceBroker.
- Fetch is one step: the leader handles the request (learning the follower's LEO from
  its fetch offset, never from the response) and the follower handles the answer. The
  answer only changes the follower's log and HW, which no other step reads before it
  lands (a metadata change or crash would drop it), so delivering it at once loses no
  behaviour the invariants can see. An answer carries at most one record (fetch.max.bytes
  as one producer batch), so a follower can be behind the offset it was seen at.
  OffsetsForLeaderEpoch (older truncation rules) is one step in the same way.
- Under incarnations=fenced_first (the default): an AlterPartition request and the
  controller's decision are one step, an addition proposed from the leader's view of the
  follower at any step. Under incarnations=kraft_steps: an ISR expansion is prepared on the
  fetch that shows the follower caught up
  (Partition.maybeExpandIsr), naming each member's broker epoch as the leader stored it, and
  reaches the controller at any later step (AlterPartition), across a restart and
  registration of that follower if so; so does a shrink, prepared by the leader's lag check
  (Partition.maybeShrinkIsr -> prepareIsrShrink: PendingShrinkIsr, its maximal ISR the
  current one until the answer). The response travels separately, and the leader keeps the
  proposed ISR as pending until then (maximal ISR for the HW). A leader has at most one
  AlterPartition in flight. A request still on its way when its leader crashes or applies a
  newer partition epoch is dropped: the controller would refuse the second
  (INVALID_UPDATE_VERSION); the first could only land before the crash's consequences, which
  the order "AlterPartition, then the crash" covers.
- The controller is a single, always-available process: its metadata log is the
  controller state. A broker applies the latest metadata in one step (MetadataUpdate),
  possibly much later than it was written, so it may act on stale metadata (zombie).
  Intermediate versions it skipped are not applied one by one.
- A broker stops in one of two ways: a clean shutdown (the log flushed whole) or a hard
  crash (kill -9, power loss) that keeps only a prefix of the log, possibly all of it (no
  flush happens between appends, as Kafka does not fsync each write); the HW checkpoint
  is cut to that prefix, and the next registration tells the controller the shutdown was
  unclean. The controller notices either in the same step: it fences the broker, drops it
  from the ISR (without ELR, never the last member) and re-elects.
- Protocol rules that changed in Kafka's history are values of Config.protocol (see
  protocol.py), never alternative code paths left commented out. The RECOVERING state
  (KIP-704, Kafka 3.2) and the rule that fenced brokers cannot join the ISR (KIP-841,
  Kafka 3.3) apply in every era: the first only marks an unclean election, the second
  is what any controller in the model checks.
- A restart waits for the fence of the previous incarnation and registers, unfenced, at
  once (incarnations=fenced_first, the default); under incarnations=kraft_steps it is three
  steps (spec/broker_lifecycle.py): the process start (log recovery, the
  latest metadata applied, fetches with broker epoch -1), the registration (at any later
  step: refused while the old session is valid, and the model has no clocks) and the
  unfence. Kafka unfences only once the broker applied the metadata up to its registration
  record; the model lets it unfence at any step after registering.
- Producers are not modelled as processes: a produce request reaches the broker that
  believes it leads; a request rejected with NOT_ENOUGH_REPLICAS changes nothing.
"""
