"""ZAB on the real replicated log: the raft-family `Replica` plus ZAB's synchronisation phase.

`ZabReplica` is `impl.core.Replica` with the rules `model/zab.py` gives ZAB (Junqueira, Reed,
Serafini, DSN 2011), in the same abstraction:

1. Election: the vote request carries the candidate's currentEpoch (`ZabVoteRequest`), and a voter
   refuses a candidate whose (currentEpoch, last zxid) is behind its own (fast leader election's
   order; the zxid is the last entry's generation, then its index). The winner is a *prospective*
   leader: it records the new epoch as its currentEpoch, accepts no writes and broadcasts nothing.
2. Synchronisation: the prospective leader sends its whole history and HWM to a follower
   (`NewLeader`); the follower keeps the prefix it shares, truncates the rest, takes the leader's
   entries, writes its currentEpoch and acknowledges (`NewLeaderAck`). Once a quorum (the leader
   included) acknowledged, the leader is *established* and its whole history is committed at once.
3. Broadcast: the established leader takes writes and sends appends, as the raft core does, to the
   followers that synchronised with it; a quorum of ACKs advances the HWM under the commit rule.

Persistence follows the model's `durable`: `logged` is how much of the log is on disk. A follower
logs the synchronised entries before its ACK, unless the protocol has `zab_ack_before_persist`
(ZOOKEEPER-3911: `Learner.syncWithLeader` answered NEWLEADER with the proposals of a DIFF only in
`packetsNotCommitted`). Then the entries after `logged` stay in the replica's memory and are not
handed to storage: a crash (a new replica from storage) loses them, as in the bug. `flush()` is the
follower logging them later (the model's `persist`), after which it ACKs them to its leader. An
append a follower accepts, and a leader's own write, log everything before them too.

currentEpoch is durable on its own, as ZooKeeper keeps it in the file `currentEpoch`: `EpochStorage`
wraps a storage with it, the `Ready` of a `ZabReplica` carries it (`ZabReady.current_epoch`), and
`persist` here writes it after the log and before any message is sent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Callable

from hwm.impl.core import LEADER, NotLeader, Ready, Replica, ReplicaError
from hwm.impl.core import persist as persist_log
from hwm.impl.messages import (
    AppendReply,
    AppendRequest,
    HwmQuery,
    HwmReply,
    NewLeader,
    NewLeaderAck,
    PeerMessage,
    VoteReply,
    VoteRequest,
    ZabVoteRequest,
)
from hwm.impl.storage import Durable
from hwm.impl.fs import OS_FILESYSTEM, replace_file
from hwm.impl.wal import StorageError

__all__ = ["CURRENT_EPOCH_FILE", "EpochStorage", "NotEstablished", "ZabDurable", "ZabReady", "ZabReplica",
           "persist"]

# ZooKeeper's name for the file that holds the epoch of the last history a server accepted.
CURRENT_EPOCH_FILE = "currentEpoch"


class NotEstablished(NotLeader):
    """A write sent to a prospective leader: no quorum has acknowledged its NEWLEADER yet."""

    def __init__(self, server: str):
        ReplicaError.__init__(self, f"{server} is a prospective leader: a quorum has not acknowledged its "
                                    f"NEWLEADER yet (ZAB phase 2)")
        self.leader = None


@dataclass(frozen=True)
class ZabDurable(Durable):
    """What a ZAB server recovers: the log and metadata, and its currentEpoch (None: never written)."""

    current_epoch: int | None = None


@dataclass(frozen=True)
class ZabReady(Ready):
    """A Ready and, when it changed, the currentEpoch to make durable before the messages are sent."""

    current_epoch: int | None = None

    def __bool__(self) -> bool:
        return super().__bool__() or self.current_epoch is not None


class EpochStorage:
    """A storage (MemoryStorage, DiskStorage) plus the durable currentEpoch.

    With a `directory` the epoch is the file `currentEpoch` there, replaced atomically (temporary
    file, fsync, rename, fsync the directory); without one it lives in this object, which, like
    MemoryStorage, survives a simulated crash. Everything else is the wrapped storage's.
    """

    def __init__(self, inner, directory: str | os.PathLike[str] | None = None):
        self.inner = inner
        self._path = os.path.join(directory, CURRENT_EPOCH_FILE) if directory is not None else None
        # The wrapped storage's file system: the OS's, or a simulated disk that can fault this file too.
        self._fs = getattr(inner, "fs", OS_FILESYSTEM)
        self._epoch: int | None = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def load(self) -> ZabDurable:
        durable = self.inner.load()
        return ZabDurable(durable.generation, durable.vote, durable.hwm, durable.log, self.current_epoch)

    @property
    def current_epoch(self) -> int | None:
        if self._path is None:
            return self._epoch
        try:
            text = self._fs.read_file(self._path).decode("ascii", errors="replace")
        except FileNotFoundError:
            return None
        if not text.strip().isdigit():
            raise StorageError(f"{self._path}: expected a non-negative integer, got {text[:40]!r}")
        return int(text)

    def save_current_epoch(self, epoch: int) -> None:
        """Durable when it returns."""
        if type(epoch) is not int or epoch < 0:
            raise ValueError(f"save_current_epoch: expected an int >= 0, got {epoch!r}")
        self._epoch = epoch
        if self._path is None:
            return
        replace_file(self._fs, self._path, f"{epoch}\n".encode("ascii"))


def persist(ready: Ready, storage) -> None:
    """`impl.core.persist`, then the currentEpoch a ZabReady carries (storage: an EpochStorage)."""
    persist_log(ready, storage)
    epoch = getattr(ready, "current_epoch", None)
    if epoch is not None:
        storage.save_current_epoch(epoch)


class ZabReplica(Replica):
    """One ZAB server: see the module docstring. Options are `Replica`'s."""

    systems = ("zab",)

    def __init__(self, server_id, peers, protocol, durable, **options):
        self.synced: set[str] = set()  # as leader: the followers that acknowledged our NEWLEADER
        self.established = False  # as leader: a quorum acknowledged it (phase 3)
        self.synced_with: str | None = None  # as follower: the leader whose NEWLEADER we acknowledged
        self._epoch_dirty = False
        self.logged = len(durable.log)
        epoch = getattr(durable, "current_epoch", None)
        # ZooKeeper, when the file is missing, takes the epoch of the last logged zxid.
        self.current_epoch: int = (durable.log[-1][0] if durable.log else 0) if epoch is None else epoch
        self.ack_before_persist = protocol.zab_ack_before_persist
        super().__init__(server_id, peers, protocol, durable, **options)
        if type(self.current_epoch) is not int or not 0 <= self.current_epoch <= self.generation:
            raise ValueError(f"durable.current_epoch: expected an int in 0..{self.generation} (the generation), "
                             f"got {self.current_epoch!r}")

    # ------------------------------------------------------------------ views
    @property
    def prospective(self) -> bool:
        return self.role == LEADER and not self.established

    def broadcast_refusal(self, peer: str) -> str | None:
        """Why this server may not send proposals to `peer` (None: it may), in the model's words."""
        if self.role != LEADER:
            return f"{self.server_id} is not a leader and sends no appends"
        if not self.established:
            return (f"{self.server_id} is a prospective leader: it broadcasts only after a quorum "
                    f"acknowledged its NEWLEADER (ZAB phase 2)")
        if peer not in self.synced:
            return f"{peer} has not synchronised with {self.server_id} (no NEWLEADER acknowledged)"
        return None

    # ------------------------------------------------------------------ client input
    def propose(self, value: bytes) -> int:
        if self.prospective:
            raise NotEstablished(self.server_id)
        return super().propose(value)

    def flush(self) -> None:
        """Log what the synchronisation left in memory (ZOOKEEPER-3911's follower, later), and ACK
        it to the leader we synchronised with: the model's `persist`."""
        if self.logged >= len(self._log):
            raise ReplicaError(f"{self.server_id} has nothing in memory that is not on disk")
        self._log_everything()
        if self.role != LEADER and self.synced_with is not None:
            self._send(self.synced_with, AppendReply(self.generation, self.server_id, True, len(self._log)))

    # ------------------------------------------------------------------ connections
    def peer_down(self, peer: str) -> None:
        """The connection to `peer` closed (it crashed, or follows another leader now): as leader,
        it must synchronise again before it gets proposals (its match index stays what it was)."""
        self.synced.discard(peer)

    def tick(self) -> None:
        super().tick()
        if self.role == LEADER:
            # ZooKeeper's syncLimit: a follower silent for a longest election timeout has gone.
            for peer in [p for p in self.synced if self._silent.get(p, 0) > self.election_ticks[1]]:
                self.peer_down(peer)

    # ------------------------------------------------------------------ election (phase 1)
    def _send(self, to: str, message: PeerMessage) -> None:
        if type(message) is VoteRequest:  # the core's campaign: ZAB's request carries the currentEpoch
            message = ZabVoteRequest(message.generation, message.candidate, message.last_index,
                                     message.last_generation, message.pre_vote, self.current_epoch)
        super()._send(to, message)

    def freshness(self) -> tuple[int, int, int]:
        """Fast leader election's order: currentEpoch, then the last zxid (its epoch, its counter)."""
        return self.current_epoch, self.last_generation, self.last_index

    def _log_ok(self, request: VoteRequest) -> bool:
        if self.protocol.election != "longest-log":
            return True
        theirs = (getattr(request, "current_epoch", 0), request.last_generation, request.last_index)
        return theirs >= self.freshness()

    def _become_leader(self) -> None:
        self.synced = set()
        self.established = False
        self.synced_with = None
        self._set_epoch(self.generation)  # the new epoch's initial history is ours
        super()._become_leader()  # its appends to the peers go out as NEWLEADER (send_append)
        if self.protocol.noop_on_election:
            self._log_everything()  # the leader logs its own entry, and all before it
        self._establish()  # a cluster of one

    def _adopt_generation(self, generation: int, leader: str | None) -> None:
        super()._adopt_generation(generation, leader)
        self.synced = set()
        self.established = False
        if leader != self.synced_with:
            self.synced_with = None

    # ------------------------------------------------------------------ synchronisation (phase 2)
    def send_new_leader(self, peer: str) -> None:
        """Queue the synchronisation of `peer`: our whole history and HWM, then NEWLEADER."""
        if self.role != LEADER:
            raise ReplicaError(f"{self.server_id} is not a leader and sends no NEWLEADER")
        if peer not in self.match:
            raise ReplicaError(f"{peer} is not a peer of {self.server_id}")
        if peer in self.synced:
            raise ReplicaError(f"{peer} has already acknowledged {self.server_id}'s NEWLEADER")
        self._send(peer, NewLeader(self.generation, self.server_id, tuple(self._log), self.high_water_mark))

    def send_append(self, peer: str) -> None:
        """Proposals go to followers that synchronised with an established leader; any other peer is
        sent the synchronisation it needs first (an election's announcement, a heartbeat). A follower
        that acknowledged a prospective leader's NEWLEADER is sent nothing until the quorum's ACKs
        establish it (ZooKeeper's leader pings its learners only then)."""
        if self.role == LEADER and peer in self.synced and not self.established:
            return
        if self.role == LEADER and peer in self.match and (not self.established or peer not in self.synced):
            self.send_new_leader(peer)
            # Counted in flight: heartbeats send it again only once the peer was quiet for a shortest
            # election timeout (the whole history is not resent every heartbeat to a peer that is down).
            self._in_flight[peer] += 1
            return
        super().send_append(peer)

    def _send_more(self, peer: str) -> None:
        if peer in self.synced:  # a write is broadcast to synchronised followers only
            super()._send_more(peer)

    def _on_new_leader(self, message: NewLeader) -> None:
        if message.generation < self.generation:
            # A leader of an older epoch: refuse with ours, and it steps down.
            self._send(message.leader, AppendReply(self.generation, self.server_id, False, 0))
            return
        self._adopt_generation(message.generation, leader=message.leader)
        history, log = message.entries, self._log
        common = 0
        while common < min(len(history), len(log)) and log[common][0] == history[common][0]:
            common += 1
        self._truncate_from(common + 1)  # TRUNC: durable at once
        if common < len(history):
            log.extend(history[common:])  # DIFF
            self._mark_dirty(common + 1)
        if not self.ack_before_persist:
            self._log_everything()  # the fix: logged before the ACK (apache/zookeeper#1445)
        self._set_high_water_mark(max(self.high_water_mark, message.leader_hwm))
        self._set_epoch(message.generation)  # written before the ACK, under either flag
        self.synced_with = message.leader
        self._send(message.leader, NewLeaderAck(self.generation, self.server_id, len(log), self.logged))

    def _on_new_leader_ack(self, ack: NewLeaderAck) -> None:
        if ack.generation > self.generation:
            self._adopt_generation(ack.generation, leader=None)
            return
        if self.role != LEADER or ack.generation != self.generation:
            return  # an ACK of an older epoch's NEWLEADER
        follower = ack.follower
        self._silent[follower] = self._quiet[follower] = 0
        self._in_flight[follower] = 0
        was_established = self.established
        self.synced.add(follower)
        # A prospective leader counts the ACK of NEWLEADER for its whole history; an established
        # one counts only what the follower logged (the rest is ACKed when it is logged).
        self.match[follower] = ack.logged if was_established else ack.index
        self.next_index[follower] = ack.index + 1
        self._confirmed.discard(follower)
        if was_established:
            self._advance_high_water_mark()
        else:
            self._establish()

    def _establish(self) -> None:
        """A quorum (us included) acknowledged NEWLEADER: established, the history is committed."""
        # Q1 of the servers that count (`self.rules`, as the model's: an observer's ACK does not).
        acknowledged = sum(1 for server in {self.server_id, *self.synced} if server in self.counting)
        if self.role != LEADER or self.established or acknowledged < self.election_quorum:
            return
        self.established = True
        indexes = tuple(len(self._log) if s == self.server_id else self.match[s] for s in self.servers)
        self._set_high_water_mark(max(self.high_water_mark, self.rules.quorum_index(indexes)))

    # ------------------------------------------------------------------ broadcast (phase 3)
    def _on_append_request(self, request: AppendRequest) -> None:
        if request.generation >= self.generation and request.leader != self.synced_with:
            return  # proposals from a leader we have not synchronised with: it will send NEWLEADER
        Replica._on_append_request(self, request)
        if request.generation == self.generation and self.role != LEADER:
            self._log_everything()  # a proposal is logged before its ACK, and everything before it

    def _on_append_reply(self, reply: AppendReply) -> None:
        if reply.generation <= self.generation and (not self.established or reply.follower not in self.synced):
            return  # from a follower that has not synchronised with us (or we are prospective)
        Replica._on_append_reply(self, reply)

    def _append_own(self, payload: bytes) -> int:
        index = super()._append_own(payload)
        self._log_everything()  # the leader logs its proposal before counting its own ACK
        return index

    # ------------------------------------------------------------------ durability
    def _log_everything(self) -> None:
        if self.logged < len(self._log):
            self._mark_dirty(self.logged + 1)
            if self.protocol.hwm_durable and self.high_water_mark > self.logged:
                self._metadata_dirty = True  # the durable HWM may now cover what was held back
            self.logged = len(self._log)

    def _truncate_from(self, index: int) -> None:
        super()._truncate_from(index)
        self.logged = min(self.logged, len(self._log))

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.current_epoch:
            self.current_epoch = epoch
            self._epoch_dirty = True

    def has_ready(self) -> bool:
        return super().has_ready() or self._epoch_dirty

    def ready(self) -> ZabReady:
        """Replica.ready, except that entries past `logged` stay in memory (ZOOKEEPER-3911) and the
        currentEpoch, when it changed, comes along."""
        stored = self._stored_last
        base = super().ready()
        kept = tuple(entry for entry in base.entries if entry.index <= self.logged)
        if base.truncate_from is not None:
            stored = base.truncate_from - 1
        self._stored_last = kept[-1].index if kept else stored  # what storage holds after this Ready
        metadata = base.metadata
        if metadata is not None and metadata.hwm > self._stored_last:
            # A durable HWM never covers entries held only in memory (a crash keeps min(hwm, log)).
            metadata = metadata._replace(hwm=self._stored_last)
        epoch = self.current_epoch if self._epoch_dirty else None
        self._epoch_dirty = False
        values = {f.name: getattr(base, f.name) for f in fields(Ready)}
        return ZabReady(**{**values, "entries": kept, "metadata": metadata}, current_epoch=epoch)

    _HANDLERS: dict[type, Callable[[Replica, PeerMessage], None]] = {
        AppendRequest: _on_append_request,
        AppendReply: _on_append_reply,
        ZabVoteRequest: Replica._HANDLERS[VoteRequest],
        VoteReply: Replica._HANDLERS[VoteReply],
        HwmQuery: Replica._HANDLERS[HwmQuery],
        HwmReply: Replica._HANDLERS[HwmReply],
        NewLeader: _on_new_leader,
        NewLeaderAck: _on_new_leader_ack,
    }
