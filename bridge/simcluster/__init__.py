"""A simulated cluster: real replicas, real storage, the real codec, a simulated network.

The conformance machine (tests/conformance), `hwm replay --on impl` and the differential tests of
tests/impl drive the implementation through this package, one model action at a time:

- `build_cluster(protocol, config)` builds the cluster of the protocol's system (`registry.py`'s table):
  `SimCluster` for raft, for a Kafka protocol `bridge.simcluster.kafka.KafkaSimCluster` of `impl.kafka`
  replicas and their controller, ZAB's and BookKeeper's likewise;
- every server is an `impl.core.Replica` persisting to an `impl.storage.MemoryStorage`; a crash is
  `storage.crash()` (what was not synced is lost) and a restart a new `Replica` built from
  `storage.load()`, which then rejoins (`impl.core.rejoin`: under `truncate-to-leader-hwm` it asks
  its live peers for the leader's HWM);
- every message crosses the wire: it is encoded into a frame by `impl.codec`, and the receiver steps
  what the frame decodes to;
- the `rpc` network runs the drivers of `impl.core` (`elect`: the real vote exchange; `replicate`: one
  whole append round trip); the `async` network has one FIFO channel of bounded capacity per ordered
  pair of servers, holding frames: `send` queues the leader's append (lost when the channel is full),
  `deliver` hands the oldest frame to its receiver and queues the answer, `drop` loses it, a crash
  empties the crashed server's channels;
- `read` is a real client read: `Replica.read(i)` for every index up to the server's HWM, each result
  (index, generation, value) kept in `history`.

Messages the model does not send (a new leader's heartbeats, the broadcast that follows a write, a
leader's retry after a reply) are dropped at the end of each action, after their Ready was persisted:
between two actions nothing is in flight except the async channels, exactly as in the model.

`apply(action)` returns None when the implementation took the step, or the reason it refuses it,
derived from the replicas (a lost election names the voter that refused and why; a write on a
follower is `NotLeader`'s message; a read with nothing committed is `NotCommitted`'s). The model's
bounds (max_generation, max_log, max_crashes, a full channel) are exploration limits, not behaviour
of the implementation: they are not enforced here.

The parts: `registry.py` (`build_cluster`), `cluster.py` (`SimCluster`, `Read`), `network.py` (the wire and the async network's
`FrameChannels`), `drivers.py` (the rpc drivers: elections, round trips, rejoins), `record.py` (a run
recorded as hwm-events/1), and the clusters of the other systems (`zab.py`, `kafka.py`,
`bookkeeper.py`).
"""

from hwm.bridge.simcluster.cluster import Read, ReplicaFactory, SimCluster
from hwm.bridge.simcluster.network import FrameChannels
from hwm.bridge.simcluster.registry import CLUSTERS, build_cluster

__all__ = ["Read", "SimCluster", "FrameChannels", "ReplicaFactory", "CLUSTERS", "build_cluster"]
