"""Kafka's replicas in the simulated cluster: every action of model/kafka.py on real replicas.

`KafkaSimCluster` is the `SimCluster` (`build_cluster(protocol, config)` builds one for a kafka
protocol) with `impl.kafka.KafkaReplica` servers and an `impl.kafka.Controller`. Every message,
the controller's included, crosses the wire through the real codec. The model's actions:

- `elect(c, voters)`: the controller elects `c` (from the live ISR, or any live replica under
  `unclean_election`), sends LeaderAndIsr to `voters` and UpdateMetadata to every live broker;
- `write(l)`: a produce with acks=all on `l`;
- `replicate(l, f)`: the follower's fetcher takes its turns against `l`: OffsetsForLeaderEpoch
  while it truncates, a fetch (again after OFFSET_OUT_OF_RANGE), and the next fetch, which tells the
  leader its new log end offset; the answer to that one is the next round trip's, and is dropped;
- `shrink_isr(l, f)`: the leader's AlterIsr, which the controller makes or refuses;
- `read`, `crash`, `restart` as for any replica; the controller learns of a crash (its session
  expires) and tells a restarted broker the current epoch, leader and ISR.

The snapshot also carries `acked`: the produce requests the leaders answered (acks=all), for
AckedWriteNeverLost and AcknowledgedWriteKept.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from hwm.bridge.simcluster.cluster import SimCluster
from hwm.bridge.simcluster.network import over_the_wire
from hwm.impl.core import Replica, ReplicaError
from hwm.impl.kafka import CONTROLLER, Controller, KafkaReplica, down_snapshot
from hwm.impl.storage import MemoryStorage
from hwm.model.state import Config
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import LEADER, ServerSnapshot

__all__ = ["KafkaSimCluster", "KafkaSnapshot"]


class KafkaSnapshot(NamedTuple):
    """A Snapshot with the acknowledged writes (`snapshot_of` drops them when comparing)."""

    servers: tuple[ServerSnapshot, ...]
    reads: frozenset
    acked: frozenset


class KafkaSimCluster(SimCluster):
    """Kafka replicas S1..Sn and their controller, on the rpc network."""

    system = "kafka"

    def __init__(self, protocol: Protocol, config: Config, *, replica_factory=None,
                 storages: Mapping[str, MemoryStorage] | None = None, **replica_options):
        if config.network != "rpc":
            raise ValueError("Kafka's replicas run on the rpc network only (network=rpc)")
        if replica_factory in (None, Replica):
            replica_factory = KafkaReplica
        self.controller: Controller | None = None  # none yet: the first start is not a restart
        self.acked: set[tuple[int, int]] = set()
        super().__init__(protocol, config, replica_factory=replica_factory, storages=storages, **replica_options)
        self.controller = Controller(self.names, protocol)

    # ------------------------------------------------------------------ views
    def snapshot(self) -> KafkaSnapshot:
        servers = tuple(replica.snapshot() if replica is not None else down_snapshot(self._down[name])
                        for name, replica in self.replicas.items())
        return KafkaSnapshot(servers, self.reads, frozenset(self.acked))

    # ------------------------------------------------------------------ the model's actions
    def apply(self, action: tuple, value=None) -> str | None:
        if action[0] == "shrink_isr":
            try:
                return self.shrink_isr(self.names[action[1]], self.names[action[2]])
            finally:
                self._settle()
        if action[0] not in ("elect", "write", "replicate", "read", "crash", "restart"):
            self._settle()
            return f"{action[0]} is not an action of Kafka's replicas"
        return super().apply(action, value)

    def elect(self, candidate: str, voters: list[str]) -> str | None:
        """The controller's election: LeaderAndIsr to `voters`, UpdateMetadata to every live broker."""
        if self.replicas[candidate] is None:
            return f"{candidate} is down"
        if self[candidate].role == LEADER:
            return f"{candidate} already leads epoch {self[candidate].generation}"
        refused = self.controller.elect(candidate, voters)
        self._pump()
        return refused

    def replicate(self, leader: str, follower: str) -> str | None:
        """One fetch round trip of `follower` against `leader` (see the module docstring)."""
        if leader == follower:
            return "a leader does not fetch from itself"
        for name in (leader, follower):
            if self.replicas[name] is None:
                return f"{name} is down"
        fetcher, source = self[follower], self[leader]
        if source.role != LEADER:
            return f"{leader} is not a leader"
        if fetcher.role == LEADER:
            return f"{follower} leads epoch {fetcher.generation} and does not fetch"
        if fetcher.leader_id != leader:
            known = fetcher.leader_id or "no leader"
            return f"{follower} fetches from {known}, not {leader} (it knows epoch {fetcher.generation})"
        turns = fetcher.fetches
        fetcher.start_fetch()
        # Truncation (asked again once per epoch the follower lacks), out of range, the fetch, the next fetch.
        for _ in range(4 + len(fetcher.epochs.entries)):
            for message in self._outputs(follower, to=leader):
                source.step(self._wire(message))
            answers = self._outputs(leader, to=follower)
            if fetcher.fetches > turns:
                return None  # the leader has heard the follower's next fetch; its answer stays in flight
            for message in answers:
                fetcher.step(self._wire(message))
            if fetcher.fetch_error:
                return fetcher.fetch_error
        raise RuntimeError(f"replicate {leader}->{follower} did not converge")

    def shrink_isr(self, leader: str, follower: str) -> str | None:
        """The leader asks the controller to drop `follower` from the ISR."""
        if leader == follower:
            return "a leader does not remove itself from the ISR"
        if self.replicas[leader] is None:
            return f"{leader} is down"
        replica = self[leader]
        try:
            replica.shrink_isr(follower)
        except ReplicaError as refused:
            return str(refused)
        self._outputs(leader, to=CONTROLLER)
        return replica.isr_refusal

    def crash(self, server: str) -> str | None:
        refused = super().crash(server)
        if refused is None:
            self.controller.broker_failed(server)
            self._pump()
        return refused

    def restart(self, server: str) -> str | None:
        """A new replica from what storage recovers; the controller tells it the epoch and leader."""
        if self.replicas[server] is not None:
            return f"{server} is not down"
        self.start(server)
        self._rejoin(server)
        return None

    # ------------------------------------------------------------------ plumbing
    def _rejoin(self, name: str) -> None:
        if self.controller is not None:
            self.controller.broker_started(name)
            self._pump()

    def _wire(self, message):
        self.rpc_messages += 1
        return over_the_wire(message)

    def _drain(self, name: str) -> tuple:
        """Persist what `name` produced and hand the controller what is for it; returns its messages."""
        replica = self[name]
        ready = replica.ready()
        self._persist(replica, ready)
        self._collect_acks(replica)
        for destination, message in ready.messages:
            if destination == CONTROLLER:
                self.controller.step(self._wire(message))
        return ready.messages

    def _outputs(self, name: str, to: str) -> list:
        """`name`'s messages to `to`, once the controller and the brokers have dealt with the rest
        (messages to anyone else are dropped: between actions nothing else is in flight)."""
        messages = self._drain(name)
        self._pump()
        return [message for destination, message in messages if destination == to]

    def _pump(self) -> None:
        """Deliver the controller's requests to the live brokers, and their ISR updates to it, until quiet."""
        for _ in range(8):
            requests = self.controller.ready()
            if not requests:
                return
            for server, message in requests:
                if self.replicas.get(server) is not None:  # a request to a down broker is lost
                    self[server].step(self._wire(message))
            for name, replica in self.alive().items():
                if replica.has_ready():
                    self._drain(name)
        raise RuntimeError("the controller and the brokers did not settle")

    def _collect_acks(self, replica: KafkaReplica) -> None:
        self.acked.update(replica.acknowledged())

    def _settle(self) -> None:
        for replica in self.alive().values():
            self._collect_acks(replica)
        super()._settle()
        for replica in self.alive().values():
            self._collect_acks(replica)
