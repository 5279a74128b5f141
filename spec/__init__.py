"""The replication protocol of one Kafka partition as a pure-Python transition system.

Modelling simplifications (each one keeps the state space finite or small, and none
removes a behaviour that the invariants are about, unless noted):
- One partition, replicated on every broker 1..rf, with assignment order 1..rf.
- Offsets are exclusive: the LEO is the log length and the HW is the first offset not
  yet committed. Records are unique ids 1..max_records with the leader epoch they were
  written in; there are no batches, segments or log start offset.
- There are no clocks. A follower's lag is a nondeterministic choice: a leader may ask
  to drop any follower whose LEO (as the leader knows it) is behind the leader's LEO.
  Session expiry is the bounded event ControllerFenceBroker.
- Fetch is one step: the leader handles the request (learning the follower's LEO from
  its fetch offset, never from the response) and the follower handles the answer. The
  answer only changes the follower's log and HW, which no other step reads before it
  lands (a metadata change or crash would drop it), so delivering it at once loses no
  behaviour the invariants can see. An answer carries every record the leader has.
- An AlterPartition request and the controller's decision are one step; the response
  travels separately, and the leader keeps the proposed ISR as pending until then
  (maximal ISR for the HW). A leader has at most one AlterPartition in flight.
- The controller is a single, always-available process: its metadata log is the
  controller state. A broker applies the latest metadata in one step (MetadataUpdate),
  possibly much later than it was written, so it may act on stale metadata (zombie).
  Intermediate versions it skipped are not applied one by one.
- A crash is a broker process dying; the controller notices in the same step (it fences
  the broker, drops it from the ISR unless it is the last member, and re-elects). A crash
  that loses the page cache keeps only a prefix of the log (no flush happens between
  appends, as Kafka does not fsync each write); the HW checkpoint is cut to that prefix.
- A restarted broker has replayed the metadata log before it serves: it acts on the
  controller's latest metadata at once.
- Producers are not modelled as processes: a produce request reaches the broker that
  believes it leads; a request rejected with NOT_ENOUGH_REPLICAS changes nothing.
"""
