"""`SimCluster`: replicas S1..Sn, their storage and the network, stepped one model action at a time
(what it does is told in `bridge/simcluster/__init__.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from hwm.bridge.simcluster.drivers import elect, rejoin, replicate
from hwm.bridge.simcluster.network import FrameChannels, over_the_wire
from hwm.impl.core import (
    NotCommitted,
    NotLeader,
    Ready,
    Replica,
    ReplicaError,
    down_snapshot,
    persist,
)
from hwm.impl.messages import AppendReply, AppendRequest, PeerMessage, VoteReply
from hwm.impl.storage import Durable, MemoryStorage
from hwm.model.actions import from_step
from hwm.model.state import Config
from hwm.properties.protocol import Protocol, model_only
from hwm.properties.snapshot import LEADER, Snapshot, server_name
from hwm.properties.trace import Step


# Builds a replica: (server id, peers, protocol, recovered storage, rng seed). A test may pass a
# deliberately broken subclass of Replica to check that the conformance machine notices.
ReplicaFactory = Callable[..., Replica]


@dataclass(frozen=True)
class Read:
    """One real client read: what `server` returned for `index`."""

    server: str
    index: int
    generation: int
    value: bytes


class _Wired:
    """A replica as the rpc drivers of impl.core see it: every message it steps crosses the wire."""

    def __init__(self, replica: Replica, cluster: "SimCluster"):
        self._replica = replica
        self._cluster = cluster

    def step(self, message: PeerMessage) -> None:
        self._cluster.rpc_messages += 1
        received = over_the_wire(message)
        if isinstance(received, VoteReply):
            self._cluster._votes_heard.append(received)
        self._replica.step(received)

    def __getattr__(self, name):
        return getattr(self._replica, name)


class SimCluster:
    """Replicas S1..Sn with in-memory storage over a simulated `rpc` or `async` network: the raft
    system's. Each other system's cluster is a subclass (`zab.py`, `kafka.py`, `bookkeeper.py`), and
    `registry.build_cluster(protocol, config)` builds the one of a protocol's system."""

    system = "raft"  # the system whose replicas this cluster runs

    def __init__(self, protocol: Protocol, config: Config, *, replica_factory: ReplicaFactory = Replica,
                 storages: Mapping[str, MemoryStorage] | None = None, record: str | None = None,
                 **replica_options):
        """`storages` may give a server a storage that already holds a log (closed: not loaded);
        `record` a file where the run is recorded as hwm-events/1 (impl/recorder.py) for `hwm
        validate`; `replica_options` go to every Replica (election_ticks, heartbeat_ticks ...)."""
        self._check_protocol(protocol)
        self.protocol = protocol
        self.config = config
        self.names = [server_name(k) for k in range(config.servers)]
        self.replica_factory = replica_factory
        if config.network == "async":
            # The model's async leader sends everything after the match index; its channels are
            # compared message for message, so the replicas must too.
            replica_options = {"catch_up": "match", **replica_options}
        self.replica_options = replica_options
        self.storages: dict[str, MemoryStorage] = {name: MemoryStorage() for name in self.names}
        self.storages.update(storages or {})
        self.replicas: dict[str, Replica | None] = {}
        self._down: dict[str, Durable] = {}  # what a crashed server's storage will recover
        self.network = FrameChannels(self.names, config.channel_capacity) if config.network == "async" else None
        self.history: list[Read] = []
        self.rpc_messages = 0  # messages stepped by the rpc drivers (elections, round trips, rejoins)
        self._votes_heard: list[VoteReply] = []
        self._writes = 0
        for name in self.names:
            self.start(name)
        for name in self.names:  # a first start is a restart
            self._rejoin(name)
        self.recorder = None
        if record is not None:
            from hwm.bridge.simcluster.record import start_recording

            self.recorder = start_recording(self, record)

    def _check_protocol(self, protocol: Protocol) -> None:
        """One line on why this cluster cannot run `protocol`: not a protocol, another system's (whose
        replicas are another class's), or one the implementation does not run."""
        if not isinstance(protocol, Protocol):
            raise TypeError(f"protocol: expected a properties.protocol.Protocol, got {type(protocol).__name__}")
        if protocol.system != self.system:
            raise ValueError(f"{type(self).__name__} runs the {self.system} system's replicas, not the "
                             f"{protocol.system} system's: build_cluster(protocol, config) "
                             f"(bridge.simcluster.registry) builds a protocol's cluster")
        if model_only(protocol):
            raise ValueError(model_only(protocol))

    # ------------------------------------------------------------------ views
    def __getitem__(self, name: str) -> Replica:
        replica = self.replicas[name]
        if replica is None:
            raise KeyError(f"{name} is down")
        return replica

    def alive(self) -> dict[str, Replica]:
        return {name: r for name, r in self.replicas.items() if r is not None}

    def down_durable(self, name: str) -> Durable:
        """What the storage of a crashed server holds (and a restart will recover)."""
        return self._down[name]

    @property
    def reads(self) -> frozenset[tuple[int, int]]:
        """The entries clients have been given, as (index, generation)."""
        return frozenset((r.index, r.generation) for r in self.history)

    def snapshot(self) -> Snapshot:
        """What the properties see: live replicas as they are, crashed ones as their storage is."""
        servers = []
        for name in self.names:
            replica = self.replicas[name]
            servers.append(replica.snapshot() if replica is not None
                           else down_snapshot(self._down[name], self.protocol))
        return Snapshot(tuple(servers), self.reads)

    def model_channels(self) -> tuple:
        """The async channels as the model's `State.channels` ((), for the rpc network)."""
        return self.network.model_channels() if self.network is not None else ()

    def value_disagreement(self) -> str | None:
        """ReadsAgree on values: two real reads of one index must return the same value."""
        first: dict[int, Read] = {}
        for read in self.history:
            seen = first.setdefault(read.index, read)
            if (seen.generation, seen.value) != (read.generation, read.value):
                return (f"clients read two values at index {read.index}: {seen.value!r}@g{seen.generation} "
                        f"from {seen.server} and {read.value!r}@g{read.generation} from {read.server}")
        return None

    # ------------------------------------------------------------------ the model's actions
    def apply_step(self, step: Step) -> str | None:
        """Run one trace step; None when the implementation takes it, else why it refuses."""
        return self.apply(from_step(step), step.args.get("value"))

    def apply(self, action: tuple, value: str | int | bytes | None = None) -> str | None:
        """Run one model action (servers as positions); None, or the reason the implementation refuses.

        A refusal may still have changed the cluster (a lost election moves the voters' generation).
        """
        kind, *args = action
        names = [self.names[a] for a in args if isinstance(a, int)]
        heard = len(self.history)
        try:
            if kind == "elect":
                return self.elect(names[0], [self.names[v] for v in args[1]])
            if kind == "write":
                return self.write(names[0], value)
            if kind in ("replicate", "send", "deliver", "drop"):
                return getattr(self, kind)(names[0], names[1])
            if kind in ("read", "crash", "restart"):
                return getattr(self, kind)(names[0])
            # Another system's step (sync, add, fence ...): the replicas have no such step.
            return f"{kind} is not an action of the implementation, which follows the raft family's rules"
        finally:
            self._settle()
            if self.recorder is not None:
                self.recorder.step(kind, names, self.history[heard:])

    def elect(self, candidate: str, voters: list[str]) -> str | None:
        """The real vote exchange (impl.core.elect) between `candidate` and `voters` only."""
        if self.replicas[candidate] is None:
            return f"{candidate} is down"
        if candidate not in voters:
            return f"{candidate} must vote for itself (a candidate always does)"
        for voter in voters:
            if self.replicas[voter] is None:
                return f"{voter} is down and cannot vote"
        replica = self[candidate]
        if replica.role == LEADER:
            return f"{candidate} already leads generation {replica.generation}"
        before = {v: (self[v].last_generation, self[v].last_index, self[v].generation, self[v].vote)
                  for v in voters}
        self._votes_heard = []
        won = elect(self._wired(candidate), {v: self._wired(v) for v in voters}, self._persist)
        if won:
            return None
        return self._why_lost(candidate, voters, before, self._votes_heard)

    def _why_lost(self, candidate: str, voters: list[str], before: dict, replies: list[VoteReply]) -> str:
        replica = self[candidate]  # its rules: the protocol's (properties.rules), a variant's included
        for voter in voters:
            if voter not in replica.counting:
                return f"{voter} does not count toward a quorum and cannot vote"
        needed = replica.election_quorum
        if len(voters) < needed:
            return f"{len(voters)} voters are not a quorum of {len(self.names)} (need {needed})"
        refused = []
        for reply in replies:
            if not reply.granted and reply.voter not in refused:
                refused.append(reply.voter)
        refused.sort(key=self.names.index)
        c_last, c_length = before[candidate][:2]
        for voter in refused:
            v_last, v_length, _, _ = before[voter]
            if self.protocol.election == "longest-log" and (v_last, v_length) > (c_last, c_length):
                # Raft 5.4.1: "the voter denies its vote if its own log is more up-to-date than that
                # of the candidate". Worded as the model's guard words it.
                return (f"{voter} refuses the vote: its log is more up to date (last generation {v_last}, "
                        f"length {v_length}) than {candidate}'s (last generation {c_last}, length {c_length})")
        for voter in refused:
            _, _, generation, vote = before[voter]
            if vote not in (None, candidate):
                return f"{voter} refuses the vote: it voted for {vote} in generation {generation}"
        if refused:
            return f"{', '.join(refused)} refused the vote"
        granted = {r.voter for r in replies if r.granted} | {candidate}
        return f"{candidate} gathered {len(granted)} of the {needed} votes it needs"

    def write(self, leader: str, value: str | int | bytes | None = None) -> str | None:
        """A client proposes `value` to `leader` (NotLeader's message if it does not lead).

        A trace step's value is a string or an integer; without one each write gets its own."""
        if self.replicas[leader] is None:
            return f"{leader} is down"
        self._writes += 1
        if value is None:
            value = f"w{self._writes}"
        payload = value if isinstance(value, bytes) else str(value).encode()
        try:
            self[leader].propose(payload)
        except NotLeader as refused:
            return str(refused)
        return None

    def replicate(self, leader: str, follower: str) -> str | None:
        """One whole append round trip (impl.core.replicate), back-off included."""
        if leader == follower:
            return "a leader does not replicate to itself"
        for name in (leader, follower):
            if self.replicas[name] is None:
                return f"{name} is down"
        try:
            replicate(self._wired(leader), self._wired(follower), self._persist)
        except ReplicaError as refused:  # "S1 is not a leader and sends no appends"
            return str(refused)
        return None

    def read(self, server: str) -> str | None:
        """Real client reads: `Replica.read(i)` for i = 1 .. the server's HWM (or what its read rule serves,
        `Replica.readable`, when that is more), each kept in `history`."""
        if self.replicas[server] is None:
            return f"{server} is down"
        replica = self[server]
        served = []
        for index in range(1, max(replica.hwm, replica.readable(), 1) + 1):
            try:
                generation, value = replica.read(index)
            except NotCommitted as refused:
                if not served:
                    return str(refused)
                break  # an HWM past the end of the log: serve what exists
            served.append(Read(server, index, generation, value))
        self.history += served
        return None

    def crash(self, server: str) -> str | None:
        """The process dies: unsynced writes are lost, its channels empty."""
        if self.replicas[server] is None:
            return f"{server} is already down"
        storage = self.storages[server]
        storage.crash()
        # Peek at what a restart will recover (load, then close the storage again without a write).
        self._down[server] = storage.load()
        storage.crash()
        self.replicas[server] = None
        if self.network is not None:
            self.network.crash(server)
        return None

    def restart(self, server: str) -> str | None:
        """A new replica from what storage recovers; it rejoins (the `restart` flag applies)."""
        if self.replicas[server] is not None:
            return f"{server} is not down"
        self.start(server)
        self._rejoin(server)
        return None

    def send(self, a: str, b: str) -> str | None:
        """The leader queues an append for `b` on the channel a->b (lost when it is full)."""
        if a == b:
            return "a server does not send to itself"
        if self.replicas[a] is None:
            return f"{a} is down"
        replica = self[a]
        try:
            replica.send_append(b)
        except ReplicaError as refused:
            return str(refused)
        for to, message in self._flush(a):
            if to == b and isinstance(message, AppendRequest):
                self.network.push(a, b, message)
        return None

    def deliver(self, a: str, b: str) -> str | None:
        """`b` steps the oldest message on a->b; its answer to an append goes on b->a."""
        if a == b:
            return "there is no channel from a server to itself"
        if not self.network.channels[a, b]:
            return f"channel {a}->{b} is empty"
        if self.replicas[b] is None:
            return f"{b} is down"
        message = self.network.pop(a, b)
        self[b].step(message)
        answers = self._flush(b)
        if isinstance(message, AppendRequest):
            # The model answers an append with one reply; a leader's own retries after a reply are
            # messages the model does not send (its `send` action does).
            for to, answer in answers:
                if to == a and isinstance(answer, AppendReply):
                    self.network.push(b, a, answer)
        return None

    def drop(self, a: str, b: str) -> str | None:
        """The network loses the oldest message on a->b."""
        if a == b or not self.network.channels[a, b]:
            return f"channel {a}->{b} is empty"
        self.network.channels[a, b].pop(0)
        return None

    # ------------------------------------------------------------------ plumbing
    def start(self, name: str) -> Replica:
        """A new replica from what `name`'s storage recovers, not yet rejoined (`restart` rejoins)."""
        self._down.pop(name, None)
        peers = [p for p in self.names if p != name]
        replica = self.replica_factory(name, peers, self.protocol, self.storages[name].load(),
                                       rng_seed=self.names.index(name), **self.replica_options)
        self.replicas[name] = replica
        return replica

    def _rejoin(self, name: str) -> None:
        peers = {p: self._wired(p) for p, r in self.alive().items() if p != name}
        rejoin(self._wired(name), peers, self._persist)

    def _wired(self, name: str) -> _Wired:
        return _Wired(self[name], self)

    def _persist(self, replica, ready: Ready) -> None:
        persist(ready, self.storages[replica.server_id])

    def _flush(self, name: str) -> tuple:
        """Persist what `name` produced, then hand out its messages (persist before send)."""
        replica = self[name]
        ready = replica.ready()
        self._persist(replica, ready)
        return ready.messages

    def _settle(self) -> None:
        """End of an action: persist every replica's outputs and drop the messages the model does not send."""
        for name, replica in self.alive().items():
            if replica.has_ready():
                self._flush(name)

    def describe(self) -> Iterator[str]:
        for name in self.names:
            replica = self.replicas[name]
            yield repr(replica) if replica is not None else f"{name} down {self._down[name]}"
