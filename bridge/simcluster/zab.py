"""ZAB's simulated cluster: `SimCluster` over `impl.zab.ZabReplica`s, with the model's two ZAB actions.

`build_cluster(protocol, ...)` with a zab protocol builds a `ZabSimCluster`. What it adds:

- `sync(leader, follower)`: the synchronisation as one exchange through the real codec: the
  leader's NewLeader (its history, its HWM), the follower's NewLeaderAck (or its refusal, when the
  follower is in a later epoch and the leader steps down);
- `persist(server)`: the server logs what the synchronisation left in memory (ZOOKEEPER-3911's
  follower, later) and ACKs it to its leader, which steps the ACK;
- `replicate` is refused, in the model's words, by a prospective leader or towards a follower
  that has not synchronised with it;
- storage is `impl.zab.EpochStorage` over `MemoryStorage` (the currentEpoch survives a crash);
- a connection closes when a follower stops following its leader (it crashed, restarted, or
  joined a later epoch): the leader hears of it (`ZabReplica.peer_down`) at the end of the action;
- `snapshot()` also carries `acked`, the entries clients were told are committed: every entry
  under an established live leader's HWM, ever (the model's ghost set of the same name);
- `zab_view()` is what the model's ZabState tracks beyond a snapshot, for the conformance machine.
"""

from __future__ import annotations

from typing import NamedTuple

from hwm.bridge.simcluster.cluster import SimCluster
from hwm.bridge.simcluster.drivers import Persist, _drain
from hwm.impl.core import LEADER, Replica, ReplicaError
from hwm.impl.messages import AppendReply, NewLeader, NewLeaderAck, VoteReply
from hwm.impl.storage import MemoryStorage
from hwm.impl.zab import EpochStorage, ZabReplica, persist
from hwm.properties.quorum import majority
from hwm.properties.snapshot import Snapshot, server_name

__all__ = ["AckedSnapshot", "ZabSimCluster", "ZabView", "sync", "model_view"]


class AckedSnapshot(Snapshot):
    """A Snapshot (equal to the model's when servers and reads are) that also carries `acked`."""

    def __new__(cls, servers, reads, acked=frozenset()):
        self = super().__new__(cls, servers, reads)
        self.acked = acked
        return self


class ZabView(NamedTuple):
    """Per server, what ZAB tracks beyond the snapshot, in the model state's forms: entries on disk,
    currentEpoch, whether it is an established leader, and (as a leader) the servers that
    acknowledged its NEWLEADER, a bit set over their positions (the model's `synced` without its
    established bit)."""

    logged: tuple[int, ...]
    epochs: tuple[int, ...]
    established: tuple[bool, ...]
    synced: tuple[int, ...]
    acked: frozenset

    def shown(self, field: str) -> str:
        """A field as a person reads it: acknowledging servers by name."""
        value = getattr(self, field)
        if field == "synced":
            return " ".join("{" + ",".join(server_name(j) for j in range(mask.bit_length()) if mask >> j & 1) + "}"
                            for mask in value)
        return str(sorted(value)) if isinstance(value, frozenset) else str(value)


def model_view(state) -> ZabView:
    """The same of a `model.zab.ZabState`."""
    from hwm.model.zab import _ESTABLISHED

    return ZabView(tuple(state.durable), tuple(state.epochs),
                   tuple(bool(mask & _ESTABLISHED) for mask in state.synced),
                   tuple(mask & ~_ESTABLISHED for mask in state.synced), frozenset(state.acked))


def sync(leader: Replica, follower: Replica, persist_ready: Persist) -> None:
    """The model's `sync(leader, follower)`: NewLeader, then the follower's answer, stepped by the leader."""
    _drain(leader, persist_ready)
    _drain(follower, persist_ready)
    leader.send_new_leader(follower.server_id)
    for to, message in _drain(leader, persist_ready):
        if to == follower.server_id and isinstance(message, NewLeader):
            follower.step(message)
    for to, answer in _drain(follower, persist_ready):
        if to == leader.server_id and isinstance(answer, (NewLeaderAck, AppendReply)):
            leader.step(answer)
    _drain(leader, persist_ready)


class ZabSimCluster(SimCluster):
    """A SimCluster of ZAB servers (see the module docstring)."""

    system = "zab"

    def __init__(self, protocol, config, *, replica_factory=ZabReplica, storages=None, **replica_options):
        if config.network != "rpc":
            raise ValueError("ZAB runs on the rpc network only (each step is one whole exchange), as its model does")
        if replica_factory is Replica:  # the default of the raft family's callers
            replica_factory = ZabReplica
        self.acked: frozenset = frozenset()
        names = [server_name(k) for k in range(config.servers)]
        storages = {name: EpochStorage(MemoryStorage()) for name in names} | dict(storages or {})
        super().__init__(protocol, config, replica_factory=replica_factory, storages=storages, **replica_options)

    # ------------------------------------------------------------------ views
    def snapshot(self) -> AckedSnapshot:
        self._acknowledge()
        base = super().snapshot()
        return AckedSnapshot(base.servers, base.reads, self.acked)

    def zab_view(self) -> ZabView:
        logged, epochs, established, synced = [], [], [], []
        for name in self.names:
            replica = self.replicas[name]
            if replica is None:
                durable = self._down[name]
                logged.append(len(durable.log))
                epochs.append(durable.current_epoch or 0)
                established.append(False)
                synced.append(0)
            else:
                logged.append(replica.logged)
                epochs.append(replica.current_epoch)
                leads = replica.role == LEADER
                established.append(leads and replica.established)
                # The followers' names become the model's positions here, once.
                synced.append(sum(1 << self.names.index(s) for s in set(replica.synced)) if leads else 0)
        return ZabView(tuple(logged), tuple(epochs), tuple(established), tuple(synced), self.acked)

    # ------------------------------------------------------------------ the model's actions
    def apply(self, action: tuple, value=None) -> str | None:
        kind = action[0]
        if kind not in ("sync", "persist"):
            return super().apply(action, value)
        try:
            return getattr(self, kind)(*(self.names[a] for a in action[1:]))
        finally:
            self._settle()

    def sync(self, leader: str, follower: str) -> str | None:
        self._close_connections()
        if leader == follower:
            return "a leader does not synchronise with itself"
        for name in (leader, follower):
            if self.replicas[name] is None:
                return f"{name} is down"
        try:
            sync(self._wired(leader), self._wired(follower), self._persist)
        except ReplicaError as refused:
            return str(refused)
        return None

    def persist(self, server: str) -> str | None:
        if self.replicas[server] is None:
            return f"{server} is down"
        try:
            self[server].flush()
        except ReplicaError as refused:
            return str(refused)
        for to, message in _drain(self[server], self._persist):
            if self.replicas.get(to) is not None and isinstance(message, AppendReply):
                self._wired(to).step(message)
        return None

    def replicate(self, leader: str, follower: str) -> str | None:
        self._close_connections()
        if leader != follower and self.replicas[leader] is not None and self.replicas[follower] is not None:
            refused = self[leader].broadcast_refusal(follower)
            if refused is not None:
                return refused
        return super().replicate(leader, follower)

    def elect(self, candidate: str, voters: list[str]) -> str | None:
        self._freshness = {v: self[v].freshness() for v in voters if self.replicas.get(v) is not None}
        return super().elect(candidate, voters)

    def _why_lost(self, candidate: str, voters: list[str], before: dict, replies: list[VoteReply]) -> str:
        needed = majority(len(self.names))
        refused = sorted({r.voter for r in replies if not r.granted}, key=self.names.index)
        if len(voters) >= needed and self.protocol.election == "longest-log":
            mine = self._freshness[candidate]
            for voter in refused:
                theirs = self._freshness[voter]
                if theirs > mine:  # worded as the model's guard words it
                    return (f"{voter} refuses the vote: its history is more up to date (currentEpoch "
                            f"{theirs[0]}, last zxid {theirs[1]}.{theirs[2]}) than {candidate}'s (currentEpoch "
                            f"{mine[0]}, last zxid {mine[1]}.{mine[2]})")
        return super()._why_lost(candidate, voters, before, replies)

    # ------------------------------------------------------------------ plumbing
    def _persist(self, replica, ready) -> None:
        persist(ready, self.storages[replica.server_id])

    def _settle(self) -> None:
        super()._settle()
        self._close_connections()
        self._acknowledge()

    def _close_connections(self) -> None:
        """A follower that stopped following its leader (down, restarted, in a later epoch, synchronised
        with another leader) has closed its connection: the leader hears of it."""
        alive = self.alive()
        for name, replica in alive.items():
            if replica.role != LEADER:
                continue
            for follower in list(replica.synced):
                other = alive.get(follower)
                if other is None or other.synced_with != name or other.generation != replica.generation:
                    replica.peer_down(follower)

    def _acknowledge(self) -> None:
        """Every entry under an established live leader's HWM has been acknowledged to its client."""
        for replica in self.alive().values():
            if replica.role == LEADER and replica.established:
                committed = {(i + 1, g) for i, g in enumerate(replica.log_generations()[:replica.hwm])}
                if not committed <= self.acked:
                    self.acked = self.acked | committed
