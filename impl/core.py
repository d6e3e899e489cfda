"""The sans-IO replica: a deterministic state machine, in the style of etcd's raft.

Inputs: peer messages (`step`), time (`tick`), client requests (`propose`, `read`,
`read_committed`, `status`) and the administrative inputs a simulation needs (`campaign`,
`send_append`, `finish_rejoin`). Outputs are collected and handed out by `ready()` as one `Ready`
batch: the log truncation and entries to append and the metadata (generation, vote, hwm) to save,
which the caller must make durable first (`persist(ready, storage)` does it), then the messages to
send, and the entries that became readable. No sockets, clocks, threads or files in here.

Every protocol flag (`properties.protocol.Protocol`) is honoured with the meaning `model/actions.py`
gives it; comments say which rule of the seed or of Raft each step is. The quorum, commit and vote
rules are asked of the same `properties.rules.Rules` object the model asks (a variant's, when the
protocol is one: docs/variants.md), never worked out here. A restart is a new `Replica`
built from what storage recovered (`Durable`); the `restart` flag is applied in the constructor.

The drivers that run one model action over in-memory replicas (`replicate`, `elect`, `rejoin`)
are in `bridge.simcluster.drivers`, with the rest of the model-to-implementation bridge.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Protocol as TypingProtocol, Sequence

from hwm.impl.messages import (
    AppendReply,
    AppendRequest,
    HwmQuery,
    HwmReply,
    PeerMessage,
    StatusReply,
    VoteReply,
    VoteRequest,
    check_server_id,
    sender,
)
from hwm.properties.protocol import Protocol
from hwm.properties.rules import overridden, rules_of
from hwm.properties.snapshot import FOLLOWER, LEADER, ServerSnapshot

CANDIDATE = "candidate"
# How a leader finds where a follower's log agrees with its own: "probe" (next-index probing with
# conflict hints, pipelined appends; used under append_check=previous-entry) or "match" (every
# append resends everything after the match index, as the model's async network does).
CATCH_UP = ("probe", "match")
# What an entry costs in an append beyond its payload (codec: generation + payload length).
ENTRY_OVERHEAD_BYTES = 12

__all__ = [
    "CANDIDATE", "FOLLOWER", "LEADER",
    "Entry", "Metadata", "Ready", "Replica",
    "ReplicaError", "NotLeader", "NotCommitted",
    "persist", "down_snapshot", "cluster_order",
]


class ReplicaError(Exception):
    """An input the replica refuses (a message from an unknown server, a bad argument ...)."""


class NotLeader(ReplicaError):
    """A write sent to a server that does not lead; `leader` is the leader it knows of, if any."""

    def __init__(self, server: str, leader: str | None):
        self.leader = leader
        hint = f"; the leader is {leader}" if leader else "; no leader is known"
        super().__init__(f"{server} is not the leader{hint}")


class NotCommitted(ReplicaError):
    """A read of an entry the server may not serve: above its high-water mark, or not in its log."""


class Entry(NamedTuple):
    index: int
    generation: int
    payload: bytes


class Metadata(NamedTuple):
    """What `Storage.save_metadata` takes. `hwm` is 0 unless the protocol has `hwm_durable`."""

    generation: int
    vote: str | None
    hwm: int


@dataclass(frozen=True)
class Ready:
    """One batch of outputs. Apply in this order: persist (truncate_from, append `entries`, sync,
    save `metadata`), then send `messages`, then hand `committed` entries to whoever waits for them.

    `truncate_from` is None or the first index to remove from storage; `entries` follow the
    truncation (their indexes are contiguous from the storage's last index + 1).
    """

    truncate_from: int | None
    entries: tuple[Entry, ...]
    metadata: Metadata | None
    messages: tuple[tuple[str, PeerMessage], ...]
    committed: tuple[Entry, ...]

    def __bool__(self) -> bool:
        return bool(self.truncate_from is not None or self.entries or self.metadata is not None
                    or self.messages or self.committed)


class DurableLike(TypingProtocol):
    """What storage recovers (`impl.storage.Durable`): log[k] is (generation, payload) of index k+1."""

    generation: int
    vote: str | None
    hwm: int
    log: Sequence[tuple[int, bytes]]


class StorageLike(TypingProtocol):
    @property
    def metadata(self) -> "DurableLike | Metadata": ...  # what is durable: generation, vote, hwm
    def append(self, entries: list[tuple[int, int, bytes]]) -> None: ...
    def truncate_from(self, index: int) -> None: ...
    def save_metadata(self, generation: int, vote: str | None, hwm: int) -> None: ...
    def sync(self) -> None: ...


def persist(ready: Ready, storage: StorageLike) -> None:
    """Make a Ready's log changes and metadata durable; call before sending its messages.

    Order, so that a crash between any two writes leaves a state a replica starts from: first a
    new generation and vote (with the HWM already durable, or a lower one), so no entry is ever
    durable before the generation that wrote it; then the log; then the new HWM, which may count
    the entries just synced.
    """
    metadata = ready.metadata
    if metadata is not None:
        saved = storage.metadata
        if (metadata.generation, metadata.vote) != (saved.generation, saved.vote):
            storage.save_metadata(metadata.generation, metadata.vote, min(metadata.hwm, saved.hwm))
    if ready.truncate_from is not None:
        storage.truncate_from(ready.truncate_from)
    if ready.entries:
        storage.append(list(ready.entries))
    if ready.truncate_from is not None or ready.entries:
        storage.sync()
    if metadata is not None and metadata.hwm != storage.metadata.hwm:
        storage.save_metadata(*metadata)


def cluster_order(servers: Iterable[str]) -> tuple[str, ...]:
    """The servers in the order the rules number them (S1..Sn are positions 0..n-1): by id, numbers
    compared as numbers (n2 before n10)."""
    return tuple(sorted(servers, key=lambda name: [int(part) if part.isdigit() else part
                                                   for part in re.split(r"(\d+)", name)]))


class _Generations(Sequence):
    """A log's generations without copying it, for the built-in commit rule (it reads one entry)."""

    def __init__(self, log: list[tuple[int, bytes]]):
        self._log = log

    def __len__(self) -> int:
        return len(self._log)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(generation for generation, _ in self._log[index])
        return self._log[index][0]


class Replica:
    """One server of the replicated log. See the module docstring for inputs and outputs."""

    # The systems (`Protocol.system`) whose rules this class follows; a subclass names its own.
    systems: tuple[str, ...] = ("raft",)

    def __init__(
        self,
        server_id: str,
        peers: Iterable[str],
        protocol: Protocol,
        durable: DurableLike,
        *,
        election_ticks: tuple[int, int] = (10, 20),
        heartbeat_ticks: int = 3,
        rng_seed: int | None = None,
        max_append_entries: int | None = None,
        max_append_bytes: int | None = None,
        max_in_flight: int | None = None,
        catch_up: str = "probe",
        pre_vote: bool = True,
        check_quorum: bool = True,
    ):
        check_server_id(server_id, "server_id")
        peers = tuple(peers)
        for peer in peers:
            check_server_id(peer, "peers")
        if server_id in peers:
            raise ValueError(f"peers: {server_id} lists itself; peers are the other servers")
        if len(set(peers)) != len(peers):
            raise ValueError(f"peers: {list(peers)} names a server twice")
        if not isinstance(protocol, Protocol):
            raise TypeError(f"protocol: expected a properties.protocol.Protocol, got {type(protocol).__name__}")
        if protocol.system not in self.systems:
            system = protocol.system
            runner = {"raft": "hwm.impl.core.Replica", "zab": "hwm.impl.zab.ZabReplica", "kafka": "hwm.impl.kafka.KafkaReplica",
                      "bookkeeper": "hwm.impl.bookkeeper (Bookie, Writer, RecoveryClient)"}
            other = f"{runner[system]} runs {system}" if system in runner else f"{system} is model-only for now"
            raise ValueError(f"protocol: {type(self).__name__} runs {' and '.join(self.systems)}; {other}")
        low, high = election_ticks
        if not (type(low) is int and type(high) is int and 1 <= low <= high):
            raise ValueError(f"election_ticks: expected (low, high) with 1 <= low <= high, got {election_ticks!r}")
        if type(heartbeat_ticks) is not int or not 1 <= heartbeat_ticks:
            raise ValueError(f"heartbeat_ticks: expected an int >= 1, got {heartbeat_ticks!r}")
        for name, limit in (("max_append_entries", max_append_entries), ("max_append_bytes", max_append_bytes),
                            ("max_in_flight", max_in_flight)):
            if limit is not None and (type(limit) is not int or limit < 1):
                raise ValueError(f"{name}: expected None or an int >= 1, got {limit!r}")
        if catch_up not in CATCH_UP:
            raise ValueError(f"catch_up: expected one of {', '.join(CATCH_UP)}, got {catch_up!r}")
        log = [(generation, payload) for generation, payload in durable.log]
        if type(durable.generation) is not int or durable.generation < 0:
            raise ValueError(f"durable.generation: expected an int >= 0, got {durable.generation!r}")
        if type(durable.hwm) is not int or durable.hwm < 0:
            raise ValueError(f"durable.hwm: expected an int >= 0, got {durable.hwm!r}")
        if any(generation > durable.generation for generation, _ in log):
            raise ValueError(f"durable.log holds an entry newer than durable.generation {durable.generation}")

        self.server_id = server_id
        self.peers = peers
        self.protocol = protocol
        # The quorum, commit and vote rules: the flags', or a variant's (`properties.rules`), over this
        # cluster's servers in `cluster_order`. Only servers that count vote, stand and hold a quorum.
        self.servers = cluster_order((server_id, *peers))
        self.rules = rules_of(protocol, len(self.servers))
        self.counting = frozenset(s for k, s in enumerate(self.servers) if self.rules.counts(k))
        self.election_quorum = self.rules.election_quorum()
        # A variant's commit rule gets the log as the tuple it is promised; the built-in one reads one
        # entry, and a view spares copying the log at every commit.
        hooks = overridden(self.rules)
        self._commit_log = (self.log_generations if "may_commit" in hooks else lambda: _Generations(self._log))
        # Likewise the append check's log (the built-in one reads one entry); the read rule's position.
        self._check_log = self.log_generations if "accepts_append" in hooks else lambda: _Generations(self._log)
        self._read_hook = self.rules.readable if "readable" in hooks else None
        self.position = self.servers.index(server_id)
        self.election_ticks = (low, high)
        self.heartbeat_ticks = heartbeat_ticks
        self.max_append_entries = max_append_entries
        self.max_append_bytes = max_append_bytes
        self.max_in_flight = max_in_flight
        # Raft thesis 9.6: an election timeout first asks for pre-votes, and a voter that hears a
        # leader refuses them; a leader that hears no quorum for an election timeout steps down.
        # Both act on ticks only: the model's elect (campaign) is a real election at once.
        self.pre_vote = pre_vote
        self.check_quorum = check_quorum
        # Next-index probing needs the previous-entry check: the seed's follower checks nothing
        # before the entries it is sent, so its leader must send from the match index.
        self.probing = catch_up == "probe" and protocol.append_check == "previous-entry"
        self._rng = random.Random(zlib.crc32(server_id.encode()) if rng_seed is None else rng_seed)

        # Persistent state, as recovered.
        self.generation: int = durable.generation
        self.vote: str | None = durable.vote
        self._log: list[tuple[int, bytes]] = log
        # "hwm is restored only if hwm_durable": otherwise a restarted server starts from 0.
        self.high_water_mark: int = durable.hwm if protocol.hwm_durable else 0

        # Volatile state: every (re)start is as a follower.
        self.role: str = FOLLOWER
        self.leader_id: str | None = None
        self.match: dict[str, int] = {}
        self.next_index: dict[str, int] = {}  # probing: the first index the next append sends
        self._votes: set[str] = set()
        self._in_flight: dict[str, int] = {}  # appends sent and not yet answered, per follower
        self._quiet: dict[str, int] = {}  # ticks since each follower's answers last showed progress
        self._silent: dict[str, int] = {}  # ticks since each follower last answered at all
        self._pre_votes: set[str] | None = None  # while asking for pre-votes: who granted
        self._confirmed: set[str] = set()  # followers whose last answer accepted: pipeline to them
        self._rejoin_answers: dict[str, HwmReply] | None = None
        self._rejoin_elapsed = 0
        # How many peers had answered when the last rejoin ended (all of them, unless it timed out).
        self.rejoin_answered: int | None = None

        # Timers, in ticks.
        self._election_elapsed = 0
        self._election_timeout = self._random_election_timeout()
        self._heartbeat_elapsed = 0

        # Outputs not yet handed out by ready().
        self._stored_last = len(log)  # what the caller's storage holds after the last Ready
        self._dirty_from: int | None = None  # first log index changed since the last Ready
        self._metadata_dirty = False
        self._outbox: list[tuple[str, PeerMessage]] = []
        self._handed_out = 0  # entries up to here were given out as committed

        self._apply_restart_rule()

    # ------------------------------------------------------------ read-only views
    @property
    def hwm(self) -> int:
        return self.high_water_mark

    @property
    def last_index(self) -> int:
        return len(self._log)

    @property
    def last_generation(self) -> int:
        return self._log[-1][0] if self._log else 0

    @property
    def rejoining(self) -> bool:
        """True while a restarted server waits for the leader's HWM (`truncate-to-leader-hwm`)."""
        return self._rejoin_answers is not None

    @property
    def pre_voting(self) -> bool:
        """True while asking for pre-votes (an election timeout passed without hearing a leader)."""
        return self._pre_votes is not None

    def entry(self, index: int) -> tuple[int, bytes]:
        """(generation, payload) of the entry at `index`, committed or not (IndexError if absent)."""
        if not 1 <= index <= len(self._log):
            raise IndexError(f"{self.server_id} has no entry {index}; its log ends at {len(self._log)}")
        return self._log[index - 1]

    def log_generations(self) -> tuple[int, ...]:
        return tuple(generation for generation, _ in self._log)

    def snapshot(self) -> ServerSnapshot:
        """What the properties see: a candidate shows as a follower (the model has no candidates)."""
        role = LEADER if self.role == LEADER else FOLLOWER
        return ServerSnapshot(self.generation, role, self.log_generations(), self.high_water_mark, True)

    def status(self) -> StatusReply:
        return StatusReply(self.server_id, self.role, self.generation, self.last_index,
                           self.high_water_mark, self.leader_id)

    def describe(self) -> dict:
        """Everything that decides what this replica does next, for a person diagnosing a stall:
        role, generation, log, HWM, timers, the election under way and, on a leader, each
        follower's match and next index, appends in flight and ticks since it answered."""
        state = {"server": self.server_id, "role": self.role, "generation": self.generation,
                 "vote": self.vote, "leader": self.leader_id, "last_index": self.last_index,
                 "last_generation": self.last_generation, "hwm": self.high_water_mark,
                 "handed_out": self._handed_out, "election_elapsed": self._election_elapsed,
                 "election_timeout": self._election_timeout, "rejoining": self.rejoining,
                 "pre_votes": sorted(self._pre_votes) if self._pre_votes is not None else None,
                 "votes": sorted(self._votes)}
        if self.role == LEADER:
            state["followers"] = {peer: {"match": self.match[peer], "next": self.next_index[peer],
                                         "in_flight": self._in_flight[peer], "confirmed": peer in self._confirmed,
                                         "quiet": self._quiet[peer], "silent": self._silent[peer]}
                                  for peer in self.peers}
        return state

    # ---------------------------------------------------------------- client input
    def propose(self, value: bytes) -> int:
        """Append a client's value to the leader's log and send it on; returns its index.

        "For each log entry, the leader appends it to its local write ahead log, and then sends it
        to all the followers." The value is readable once the index is at or below the HWM.
        """
        if type(value) is not bytes:
            raise TypeError(f"propose: value must be bytes, got {type(value).__name__}")
        if self.role != LEADER:
            raise NotLeader(self.server_id, self.leader_id)
        index = self._append_own(value)
        for peer in self.peers:
            self._send_more(peer)  # within the follower's in-flight limit; replies send the rest
        return index

    def read(self, index: int) -> tuple[int, bytes]:
        """(generation, payload) of a committed entry.

        Seed readEntry: "if (index > replicationState.getHighWaterMark()) throw new
        IllegalArgumentException("Log entry not available")".
        """
        if type(index) is not int or index < 1:
            raise NotCommitted(f"Log entry not available: {index!r} is not an index (indexes start at 1)")
        if self._read_hook is not None:  # a variant's read rule: up to the index it answers
            readable = self.readable()
            if index > readable:
                raise NotCommitted(f"Log entry not available: entry {index} is above what {self.server_id} serves "
                                   f"({readable}, by {type(self.rules).__name__}.readable)")
            return self._log[index - 1]
        if index > self.high_water_mark:
            raise NotCommitted(f"Log entry not available: entry {index} is not yet committed "
                               f"(high-water mark {self.high_water_mark} on {self.server_id})")
        if index > len(self._log):
            raise NotCommitted(f"Log entry not available: {self.server_id}'s log ends at {len(self._log)}")
        return self._log[index - 1]

    def readable(self) -> int:
        """Up to which index a client's read here is served (the read rule, `Rules.readable`): the
        flags' rule, min(hwm, last index), or a variant's."""
        if self._read_hook is None:
            return min(self.high_water_mark, len(self._log))
        return self._read_hook(self.position, self.role == LEADER, self.log_generations(), self.high_water_mark)

    def read_committed(self) -> tuple[Entry, ...]:
        """Every entry a client may read here: indexes 1 .. `readable()` (min(hwm, last index))."""
        readable = self.readable()
        return tuple(Entry(i + 1, g, p) for i, (g, p) in enumerate(self._log[:readable]))

    # ------------------------------------------------------------------ time
    def tick(self) -> None:
        """One unit of time: heartbeats on a leader, election timeouts elsewhere."""
        if self._rejoin_answers is not None:
            self._rejoin_elapsed += 1
            if self._rejoin_elapsed >= self.election_ticks[0]:
                self.finish_rejoin()  # peers that did not answer are down; go with what we have
        if self.role == LEADER:
            for peer in self.peers:
                self._quiet[peer] += 1
                self._silent[peer] += 1
            if self.check_quorum and self.peers:
                heard = {self.server_id} | {peer for peer in self.peers if self._silent[peer] <= self.election_ticks[1]}
                if not self._is_election_quorum(heard):
                    # No quorum has answered for a longest election timeout: another leader may
                    # exist; stop taking writes that cannot commit here.
                    self._adopt_generation(self.generation, leader=None)
                    return
            self._heartbeat_elapsed += 1
            if self._heartbeat_elapsed >= self.heartbeat_ticks:
                self._heartbeat_elapsed = 0
                # "The leader propagates the high-water mark to the followers either as part of
                # the regular HeartBeat or as separate requests."
                for peer in self.peers:
                    self._heartbeat(peer)
        else:
            self._election_elapsed += 1
            if self._election_elapsed >= self._election_timeout and self.server_id in self.counting:
                if self.pre_vote:
                    self.pre_campaign()
                else:
                    self.campaign()

    def _random_election_timeout(self) -> int:
        low, high = self.election_ticks
        return self._rng.randint(low, high)

    def _is_election_quorum(self, voters: set[str]) -> bool:
        """Whether `voters` hold an election quorum (Q1) of the servers that count."""
        return len(voters & self.counting) >= self.election_quorum

    def _reset_election_timer(self) -> None:
        self._election_elapsed = 0
        self._election_timeout = self._random_election_timeout()

    # ------------------------------------------------------------------ elections
    def pre_campaign(self) -> None:
        """Ask the peers whether they would vote for us in generation + 1, changing nobody's state;
        a quorum of yes starts the real election (`campaign`). A server that does not count never stands."""
        if self.role == LEADER or self.server_id not in self.counting:
            return
        if self._rejoin_answers is not None:
            self.finish_rejoin()
        self._pre_votes = {self.server_id}
        self.leader_id = None  # we no longer hear one: others' pre-votes get our yes
        self._reset_election_timer()
        if self._is_election_quorum(self._pre_votes):
            self.campaign()
            return
        request = VoteRequest(self.generation + 1, self.server_id, self.last_index, self.last_generation, True)
        for peer in self.peers:
            self._send(peer, request)

    def _log_ok(self, request: VoteRequest) -> bool:
        # The vote rule, on the candidate's log as its request shows it: its length and last generation,
        # all that the flags' rule reads (a variant's own vote rule may read more: model-only).
        shown = (0,) * (request.last_index - 1) + (request.last_generation,) if request.last_index else ()
        return self.rules.grants_vote(shown, self.log_generations())

    def _on_pre_vote_request(self, request: VoteRequest) -> None:
        # A voter that heard a leader within a shortest election timeout believes it healthy.
        in_lease = self.role == LEADER or (self.leader_id is not None
                                           and self._election_elapsed < self.election_ticks[0])
        granted = not in_lease and request.generation > self.generation and self._log_ok(request)
        self._send(request.candidate, VoteReply(request.generation if granted else self.generation,
                                                self.server_id, granted, True))

    def _on_pre_vote_reply(self, reply: VoteReply) -> None:
        if not reply.granted:
            if reply.generation > self.generation:
                self._adopt_generation(reply.generation, leader=None)
            return
        if self._pre_votes is None or self.role == LEADER or reply.generation != self.generation + 1:
            return
        self._pre_votes.add(reply.voter)
        if self._is_election_quorum(self._pre_votes):
            self.campaign()

    def campaign(self) -> None:
        """Start an election now, for generation + 1 (a leader already leads, and a server that does not
        count never stands: nothing happens)."""
        if self.role == LEADER or self.server_id not in self.counting:
            return
        if self._rejoin_answers is not None:
            self.finish_rejoin()
        self._pre_votes = None
        self.generation += 1
        self.vote = self.server_id
        self._metadata_dirty = True
        self.role = CANDIDATE
        self.leader_id = None
        self._votes = {self.server_id}
        self._reset_election_timer()
        if self._is_election_quorum(self._votes):
            self._become_leader()
            return
        request = VoteRequest(self.generation, self.server_id, self.last_index, self.last_generation)
        for peer in self.peers:
            self._send(peer, request)

    def _on_vote_request(self, request: VoteRequest) -> None:
        if request.pre_vote:
            self._on_pre_vote_request(request)
            return
        if request.generation < self.generation:
            self._send(request.candidate, VoteReply(self.generation, self.server_id, False))
            return
        if request.generation > self.generation:
            # A voter adopts the new generation and becomes a follower (a leader steps down).
            self._adopt_generation(request.generation, leader=None)
        log_ok = self._log_ok(request)
        # At most one vote per generation: the vote is persisted before the reply is sent.
        granted = log_ok and self.vote in (None, request.candidate)
        if granted:
            if self.vote != request.candidate:
                self.vote = request.candidate
                self._metadata_dirty = True
            self._reset_election_timer()
        self._send(request.candidate, VoteReply(self.generation, self.server_id, granted))

    def _on_vote_reply(self, reply: VoteReply) -> None:
        if reply.pre_vote:
            self._on_pre_vote_reply(reply)
            return
        if reply.generation > self.generation:
            self._adopt_generation(reply.generation, leader=None)
            return
        if self.role != CANDIDATE or reply.generation != self.generation or not reply.granted:
            return
        self._votes.add(reply.voter)
        if self._is_election_quorum(self._votes):
            self._become_leader()

    def _become_leader(self) -> None:
        self.role = LEADER
        self.leader_id = self.server_id
        # Match indexes start from nothing: the leader learns each follower's log from its replies.
        self.match = {peer: 0 for peer in self.peers}
        # Probing starts optimistic (Raft): at our last index, so a follower that is up to date
        # costs one round trip whatever the log's length; a refusal's hint moves it back.
        self.next_index = {peer: len(self._log) + 1 for peer in self.peers}
        self._in_flight = {peer: 0 for peer in self.peers}
        self._quiet = {peer: 0 for peer in self.peers}
        self._silent = {peer: 0 for peer in self.peers}
        self._pre_votes = None
        self._confirmed = set()
        self._heartbeat_elapsed = 0
        if self.protocol.noop_on_election:
            # Raft section 8: "a blank no-op entry at the start of its term".
            self._log.append((self.generation, b""))
            self._mark_dirty(len(self._log))
        # The new leader keeps its own HWM; recompute it (it matters for a cluster of one).
        self._advance_high_water_mark()
        for peer in self.peers:
            self.send_append(peer)

    def _adopt_generation(self, generation: int, leader: str | None) -> None:
        """Follow `generation` (>= ours): a new generation clears the vote; a leader steps down."""
        if generation > self.generation:
            self.generation = generation
            self.vote = None
            self._metadata_dirty = True
        self.role = FOLLOWER
        self.leader_id = leader
        self.match = {}
        self.next_index = {}
        self._votes = set()
        self._in_flight = {}
        self._confirmed = set()
        self._pre_votes = None
        self._reset_election_timer()

    # ---------------------------------------------------------------- replication
    def send_append(self, peer: str) -> None:
        """Queue an append for `peer` now, whatever is in flight: the entries from its next index
        (from its match index when not probing), as many as the batch limits allow, and the HWM."""
        if self.role != LEADER:
            raise ReplicaError(f"{self.server_id} is not a leader and sends no appends")
        if peer not in self.match:
            raise ReplicaError(f"{peer} is not a peer of {self.server_id}")
        prev = min(self.next_index[peer] - 1 if self.probing else self.match[peer], len(self._log))
        end = self._batch_end(prev)
        self._in_flight[peer] += 1
        if self.probing and peer in self._confirmed:
            self.next_index[peer] = end + 1  # pipelined: the next append follows this one
        self._send(peer, self._append_request(prev, self._log[prev:end]))

    def _append_request(self, prev: int, entries: list[tuple[int, bytes]]) -> AppendRequest:
        prev_generation = self._log[prev - 1][0] if prev else 0
        return AppendRequest(self.generation, self.server_id, prev, prev_generation, tuple(entries),
                             self.high_water_mark)

    def _batch_end(self, prev: int) -> int:
        """The last index of an append after `prev`: within max_append_entries and, counting
        payloads, max_append_bytes (at least one entry, so any entry can be sent)."""
        end = len(self._log)
        if self.max_append_entries is not None:
            end = min(end, prev + self.max_append_entries)
        if self.max_append_bytes is not None:
            size = 0
            for index in range(prev + 1, end + 1):
                size += len(self._log[index - 1][1]) + ENTRY_OVERHEAD_BYTES
                if size > self.max_append_bytes and index > prev + 1:
                    return index - 1
        return end

    def _limit(self, peer: str) -> int:
        """Appends allowed in flight to `peer`: while probing (until an append succeeds) one, then
        up to max_in_flight pipelined; one when each append resends from the match index."""
        return (self.max_in_flight or 1) if self.probing and peer in self._confirmed else 1

    def _send_more(self, peer: str) -> None:
        """Send `peer` what it lacks, within its in-flight limit; replies and heartbeats send the rest."""
        if self.probing and peer in self._confirmed and self.next_index[peer] > len(self._log):
            return  # everything is sent; heartbeats carry the HWM
        if self._in_flight[peer] < self._limit(peer):
            self.send_append(peer)

    def _heartbeat(self, peer: str) -> None:
        """A heartbeat carries the HWM and any entries the in-flight limit allows. A follower whose
        answers showed no progress for a shortest election timeout lost what was in flight (a
        dropped connection, a restart): start again after its match index."""
        if self._in_flight[peer] and self._quiet[peer] >= self.election_ticks[0]:
            self._in_flight[peer] = 0
            self._quiet[peer] = 0
            if self.probing:
                self.next_index[peer] = self.match[peer] + 1
                self._confirmed.discard(peer)
        if self._in_flight[peer] < self._limit(peer):
            self.send_append(peer)
        else:
            # Busy: an empty append after what was sent carries the HWM, and is refused if what
            # was sent got lost (the refusal's hint restarts the catch-up from there).
            # (While probing, the empty append goes at the match index: it must not confirm.)
            confirmed = self.probing and peer in self._confirmed
            prev = min(self.next_index[peer] - 1 if confirmed else self.match[peer], len(self._log))
            self._in_flight[peer] += 1
            self._send(peer, self._append_request(prev, []))

    def _on_append_request(self, request: AppendRequest) -> None:
        if self._rejoin_answers is not None:
            # Still asking for the leader's HWM: acknowledging entries now and truncating them
            # a moment later would mislead the leader. The next heartbeat brings them again.
            return
        if request.generation < self.generation:
            # A stale leader: refuse with our generation, and it will step down.
            self._send(request.leader, AppendReply(self.generation, self.server_id, False, request.prev_index))
            return
        self._adopt_generation(request.generation, leader=request.leader)
        prev = request.prev_index
        if prev and not self.rules.accepts_append(self._check_log(), prev, request.prev_generation):
            # The append check (`Rules.accepts_append`; Raft's receiver rule 2: reply false if the log
            # has no entry at prevLogIndex whose generation matches prevLogTerm); with a hint of
            # where our logs may agree.
            hint = min(prev, len(self._log))
            while hint and self._log[hint - 1][0] > request.prev_generation:
                hint -= 1
            hint_generation = self._log[hint - 1][0] if hint else 0
            self._send(request.leader, AppendReply(self.generation, self.server_id, False, prev,
                                                   hint, hint_generation))
            return
        acknowledged = self._apply_entries(prev, request.entries)
        # "The followers then set their high-water mark accordingly" (never past what they hold).
        self._set_high_water_mark(max(self.high_water_mark, min(request.leader_hwm, acknowledged)))
        self._send(request.leader, AppendReply(self.generation, self.server_id, True, acknowledged))

    def _apply_entries(self, prev: int, entries: tuple[tuple[int, bytes], ...]) -> int:
        """The follower's side of an accepted append; returns the index it acknowledges."""
        log = self._log
        if self.protocol.append_check == "previous-entry":
            # Raft Figure 2, rules 3-4: "If an existing entry conflicts with a new one (same index
            # but different terms), delete the existing entry and all that follow it. Append any
            # new entries not already in the log."
            for offset, entry in enumerate(entries):
                position = prev + offset
                if position < len(log):
                    if log[position][0] != entry[0]:
                        self._truncate_from(position + 1)
                        log.append(entry)
                        self._mark_dirty(position + 1)
                else:
                    log.append(entry)
                    self._mark_dirty(len(log))
            return prev + len(entries)
        # The seed's follower. maybeTruncate: "entry.getGeneration() !=
        # wal.readAt(entry.getEntryIndex()).getGeneration() ... wal.truncate(entry.getEntryIndex())";
        # then appendEntries writes the entries that do not exist (a WAL only grows at its end)
        # and replies "wal.getLastLogIndex()".
        for offset, entry in enumerate(entries):
            position = prev + offset
            if position < len(log) and log[position][0] != entry[0]:
                self._truncate_from(position + 1)
                break
        for offset, entry in enumerate(entries):
            if prev + offset == len(log):
                log.append(entry)
                self._mark_dirty(len(log))
        return len(log)

    def _on_append_reply(self, reply: AppendReply) -> None:
        if reply.generation > self.generation:
            # "The response also includes the current Generation Clock of the server": a higher
            # one means this leader is stale.
            self._adopt_generation(reply.generation, leader=None)
            return
        if self.role != LEADER or reply.generation != self.generation:
            return  # a reply to an earlier generation's append
        follower = reply.follower
        self._in_flight[follower] = max(self._in_flight[follower] - 1, 0)
        self._silent[follower] = 0
        if not self.probing:
            self._on_append_reply_from_match(reply)
            return
        if reply.success:
            # "The Leader keeps track of log indexes replicated at each server." A reply to an
            # older append can acknowledge less than we know: a match index never goes down.
            # Progress (more matched, or all of it) confirms where the follower's log agrees:
            # pipeline from there. Only progress counts as hearing from it: answers to heartbeats
            # alone do not show that a lost append will ever be answered.
            if reply.index > self.match[follower] or reply.index == len(self._log):
                self._confirmed.add(follower)
                self._quiet[follower] = 0
            if reply.index > self.match[follower]:
                self.match[follower] = reply.index
                self._advance_high_water_mark()
            self.next_index[follower] = max(self.next_index[follower], self.match[follower] + 1)
        else:
            if reply.index < self.match[follower] or reply.index >= self.next_index[follower]:
                return  # a refusal of an append older than what we know since: stale
            if reply.index == self.match[follower]:
                # It lacks an entry it acknowledged: a restart rule that drops persisted entries
                # (truncate-to-own-hwm) lost it. Back off below it, as the model's replicate does.
                self.match[follower] = reply.index - 1
            # The follower lacks our entry at reply.index. Its hint says its entries after
            # hint_index are newer than ours there, and ours after the last index whose
            # generation is at most hint_generation are newer than its: none of them match.
            probe = min(reply.hint_index, reply.index - 1, len(self._log))
            while probe > self.match[follower] and self._log[probe - 1][0] > reply.hint_generation:
                probe -= 1
            self.next_index[follower] = max(probe, self.match[follower]) + 1
            self._confirmed.discard(follower)
            self._quiet[follower] = 0
            self._in_flight[follower] = 0  # appends sent after the refused one will be refused too
        self._send_more(follower)

    def _on_append_reply_from_match(self, reply: AppendReply) -> None:
        """The seed's leader: it sends everything after the match index and sets the match index
        to what the follower acknowledges (which under `generation-mismatch` may be lower)."""
        follower = reply.follower
        if reply.success:
            self.match[follower] = reply.index
            self._advance_high_water_mark()
            if self.match[follower] < len(self._log):
                self.send_append(follower)  # more to send (batch limit, or entries written since)
        else:
            # The follower lacks our entry at reply.index: back off below it and try again.
            self.match[follower] = min(self.match[follower], max(reply.index - 1, 0))
            self._advance_high_water_mark()
            self.send_append(follower)

    def _advance_high_water_mark(self) -> None:
        """Recompute the leader's HWM from the match indexes (its own slot: its last index).

        Seed: "var logIndexAtQuorum = computeHighwaterMark(logIndexesAtAllServers(), ...);
        if (logIndexAtQuorum > currentHighWaterMark && logIndexAtQuorum != 0) ...
        replicationState.setHighWaterMark(logIndexAtQuorum);"
        """
        indexes = tuple(len(self._log) if server == self.server_id else self.match[server] for server in self.servers)
        index_at_quorum = self.rules.quorum_index(indexes)
        if index_at_quorum <= self.high_water_mark:
            return
        # Raft 5.4.2 (commit=current-generation): "only log entries from the leader's current term are
        # committed by counting replicas".
        if not self.rules.may_commit(index_at_quorum, self._commit_log(), self.generation):
            return
        self._set_high_water_mark(index_at_quorum)

    def _append_own(self, payload: bytes) -> int:
        self._log.append((self.generation, payload))
        self._mark_dirty(len(self._log))
        # The leader's own last index counts in the quorum: a write can move the HWM.
        self._advance_high_water_mark()
        return len(self._log)

    # ------------------------------------------------------------------ restart
    def _keep_on_restart(self, leader_hwm: int | None) -> None:
        """What the restart keeps (`Rules.restart_keeps`, as the model's restart asks it): the whole log
        (`keep`), the checkpointed HWM's prefix (`truncate-to-own-hwm`, Kafka before KIP-101: 0 if it is
        not durable), the answering leader's HWM's (`truncate-to-leader-hwm`), or a variant's. The HWM
        falls to what is kept when the log is cut below it, or a leader answered."""
        kept = self.rules.restart_keeps(self.log_generations(), self.high_water_mark, leader_hwm)
        if kept < len(self._log) or leader_hwm is not None:
            self._truncate_from(kept + 1)
            self._set_high_water_mark(min(self.high_water_mark, kept))

    def _apply_restart_rule(self) -> None:
        rule = self.protocol.restart
        if rule != "truncate-to-leader-hwm":
            self._keep_on_restart(None)  # it asks nobody: the rule has what it needs now
        else:
            # "Any server which restarts or rejoins the cluster after a pause, finds the new leader.
            # It then explicitly asks for the current high-water mark, truncates its log to
            # high-water mark."
            self._rejoin_answers = {}
            self._rejoin_elapsed = 0
            if not self.peers:
                self.finish_rejoin()
                return
            for peer in self.peers:
                self._send(peer, HwmQuery(self.generation, self.server_id))

    def _on_hwm_query(self, query: HwmQuery) -> None:
        self._send(query.server, HwmReply(self.generation, self.server_id, self.role == LEADER,
                                          self.high_water_mark))

    def _on_hwm_reply(self, reply: HwmReply) -> None:
        if self._rejoin_answers is None:
            return  # an answer that comes after we stopped waiting
        self._rejoin_answers[reply.server] = reply
        if len(self._rejoin_answers) == len(self.peers):
            self.finish_rejoin()

    def finish_rejoin(self) -> None:
        """Stop waiting for HwmReply answers and truncate to the HWM of the leader of the highest
        generation among them, if that generation is at least ours; with no such leader the log is
        kept. Called by itself once every peer answered, or by `tick` after a timeout; a harness
        whose down servers cannot answer calls it directly. Nothing happens when not rejoining."""
        answers = self._rejoin_answers
        if answers is None:
            return
        self._rejoin_answers = None
        self.rejoin_answered = len(answers)
        leaders = [a for a in answers.values() if a.leader]
        leader = max(leaders, key=lambda a: a.generation) if leaders else None
        # A stale leader's HWM says nothing about our log: as if no leader answered.
        self._keep_on_restart(leader.hwm if leader is not None and leader.generation >= self.generation else None)

    # ------------------------------------------------------------------ input
    def step(self, message: PeerMessage) -> None:
        """Handle one message from a peer (ReplicaError for one no peer could have sent)."""
        handler = self._HANDLERS.get(type(message))
        if handler is None:
            raise ReplicaError(f"{self.server_id} cannot step a {type(message).__name__}: not a peer message")
        origin = sender(message)
        if origin not in self.peers:
            raise ReplicaError(f"{self.server_id} got a {type(message).__name__} from {origin!r}, "
                               f"which is not one of its peers {list(self.peers)}")
        handler(self, message)

    _HANDLERS: dict[type, Callable[["Replica", PeerMessage], None]] = {
        AppendRequest: _on_append_request,
        AppendReply: _on_append_reply,
        VoteRequest: _on_vote_request,
        VoteReply: _on_vote_reply,
        HwmQuery: _on_hwm_query,
        HwmReply: _on_hwm_reply,
    }

    # ------------------------------------------------------------------ output
    def has_ready(self) -> bool:
        return bool(self._dirty_from is not None or self._metadata_dirty or self._outbox
                    or self._handed_out < min(self.high_water_mark, len(self._log)))

    def ready(self) -> Ready:
        """Hand out everything produced since the last call (and forget it): persist, then send."""
        truncate_from = None
        entries: tuple[Entry, ...] = ()
        if self._dirty_from is not None:
            if self._dirty_from <= self._stored_last:
                truncate_from = self._dirty_from
            entries = tuple(Entry(i, g, p) for i, (g, p) in
                            enumerate(self._log[self._dirty_from - 1:], start=self._dirty_from))
        self._dirty_from = None
        self._stored_last = len(self._log)
        metadata = None
        if self._metadata_dirty:
            # Without hwm_durable there is no checkpoint: the saved HWM stays 0.
            hwm = self.high_water_mark if self.protocol.hwm_durable else 0
            metadata = Metadata(self.generation, self.vote, hwm)
            self._metadata_dirty = False
        readable = min(self.high_water_mark, len(self._log))
        committed = tuple(Entry(i, g, p) for i, (g, p) in
                          enumerate(self._log[self._handed_out:readable], start=self._handed_out + 1))
        self._handed_out = max(self._handed_out, readable)
        messages = tuple(self._outbox)
        self._outbox = []
        return Ready(truncate_from, entries, metadata, messages, committed)

    # ------------------------------------------------------------------ helpers
    def _send(self, to: str, message: PeerMessage) -> None:
        self._outbox.append((to, message))

    def _mark_dirty(self, index: int) -> None:
        if self._dirty_from is None or index < self._dirty_from:
            self._dirty_from = index

    def _truncate_from(self, index: int) -> None:
        """Remove the entries at `index` and after (the seed's WALSegment.truncate(logIndex))."""
        if index > len(self._log):
            return
        del self._log[index - 1:]
        self._mark_dirty(index)
        # Entries handed out as committed and now removed will be handed out again if re-committed.
        self._handed_out = min(self._handed_out, index - 1)

    def _set_high_water_mark(self, hwm: int) -> None:
        if hwm != self.high_water_mark:
            self.high_water_mark = hwm
            if self.protocol.hwm_durable:
                self._metadata_dirty = True  # "Persist HWM whenever it changes"

    def __repr__(self) -> str:
        log = ",".join(str(g) for g in self.log_generations())
        return (f"Replica({self.server_id} {self.role} g{self.generation} log=[{log}] "
                f"hwm={self.high_water_mark})")


def down_snapshot(durable: DurableLike, protocol: Protocol) -> ServerSnapshot:
    """The snapshot of a crashed server: what its storage holds (the model's `crash`)."""
    hwm = durable.hwm if protocol.hwm_durable else 0
    return ServerSnapshot(durable.generation, FOLLOWER, tuple(g for g, _ in durable.log), hwm, False)
