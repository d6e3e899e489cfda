"""Kafka's replication of one partition, as an explicit-state model.

What it follows (Apache Kafka, ZooKeeper-era controller):
- The leader's high watermark (HW) is the minimum log end offset (LEO) over the ISR
  (Partition.maybeIncrementLeaderHW), never decreasing. As an abstraction of
  acks=all with min.insync.replicas = a majority, the HW advances only while the ISR
  has at least a majority of replicas (KIP-966's rule); without it Kafka's committed
  entries may sit on fewer than a majority by design.
- The leader shrinks the ISR by a follower that is down or behind its LEO
  (Partition.maybeShrinkIsr: replica.lag.time.max.ms is abstracted away) and expands it
  when a follower's fetch reaches the HW (Partition.maybeExpandIsr). The ISR is the
  controller's (ZooKeeper's): a deposed leader's conditional update fails. A leader counts
  its own copy of the ISR (Partition.inSyncReplicaIds, the leader's maximalIsr): the one
  it was sent at its election (LeaderAndIsr) or last wrote by a shrink or an expand; a
  deposed leader that missed the LeaderAndIsr request keeps counting its old copy.
- `elect(server, voters)` is the controller's election: a new leader epoch, the leader
  chosen from the live ISR (or, with `unclean_election`, any live replica when no ISR
  replica is alive). `voters` are the replicas the LeaderAndIsr request reaches; a live
  replica outside it keeps its old epoch and leader (it missed the update).
- `leader_and_isr(leader, replica)`, with `late_leader_and_isr` only: the LeaderAndIsr request
  of the epoch `leader` still leads reaches a live replica of an older epoch late, one epoch
  at a time (a replica acts on any request newer than its own epoch; the controller's request
  queue to a broker may lag). Without the flag a request arrives with its election or never.
- Each replica's leader-epoch cache (LeaderEpochFileCache: epoch -> start offset) is the
  epochs of the entries in its log, so it is derived from the log, not stored.
- `follower_truncation` decides what a replica truncates when it becomes a follower:
  `own-hwm` (before KIP-101), `leader-epoch` (KIP-101), `leader-epoch-kip279`
  (KIP-279), `fenced` (KIP-320 with KAFKA-7164 and KAFKA-7415), and
  `last-fetched-epoch`, KIP-320's first attempt: nothing on becoming a follower; every
  fetch carries the epoch of the follower's last entry and a mismatch makes it truncate.
- `replicate(leader, follower)` is one fetch round trip: the truncation exchange first
  if the follower must truncate, then the fetch from its LEO. A fetch appends at the
  follower's LEO with no check of the entry before it (Kafka's fetch has none); a fetch
  offset past the leader's LEO is out of range and the follower truncates to the
  leader's LEO (ReplicaFetcherThread.handleOffsetOutOfRange).
- The HW is checkpointed (replication-offset-checkpoint): it survives a crash. A
  restarted broker learns the current epoch and leader from the controller.
- `log_flush` says what a crash keeps of the log. `always` (log.flush.interval.messages=1): every
  append is fsynced first, a crash keeps the whole log. `never`, Kafka's defaults
  (log.flush.interval.messages and log.flush.interval.ms unset; LogManager's flusher never fires):
  the log is in the page cache, and `flush(server)` is the OS writing it back (or a segment roll,
  UnifiedLog.flush): the flushed prefix, the recovery point (recovery-point-offset-checkpoint),
  becomes the whole log. It is offered only while a crash is left: without a power failure to
  follow it changes nothing a property sees. A truncation lowers the recovery point with the log (UnifiedLog.truncateTo).
  A crash is then a power failure: the log keeps its flushed prefix only (LogLoader recovers the
  segments on disk), the HW its checkpoint bounded by the log end (UnifiedLog.updateHighWatermark),
  and the epoch cache follows the log. The power failure outlasts the broker's session, so the
  controller removes it from the ISR (and from its leader's copy), unless it is the last ISR replica:
  the ISR never becomes empty, and that replica is re-elected with what it kept (KIP-966's "last
  replica standing").
Offsets are 0-based in Kafka; here index = offset + 1, so "truncate to offset t" keeps
the first t entries and a log end offset is the log's length.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterator, NamedTuple

from hwm.model.actions import Action, BoundHit, Model, leader_refusal, pair_refusal
from hwm.model.encoding import _reads, canonical, fingerprint_bytes
from hwm.model.rules import rules_of
from hwm.model.state import FOLLOWER, LEADER, Config
from hwm.properties.acked import KAFKA_PROPERTIES
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import describe_server, server_name

NO_LEADER = 0  # `KafkaServer.leader` when a replica knows no leader


class KafkaServer(NamedTuple):
    """One replica. The first five fields are what properties see (a ServerView)."""

    generation: int  # the leader epoch this replica last heard of
    role: str
    log: tuple[int, ...]  # log[k] is the leader epoch of the entry at offset k
    hwm: int  # its high watermark
    alive: bool
    match: tuple[int, ...]  # the leader's view of each replica's LEO (leaders only)
    in_isr: bool  # the controller's ISR holds this replica
    leader: int  # position + 1 of the leader it fetches from, NO_LEADER if none
    truncating: bool  # it must find its truncation point before its next fetch
    # The ISR a leader counts for its HW (Partition.inSyncReplicaIds): isr[k] for each replica,
    # as it was sent at its election or last wrote itself; () unless a leader.
    isr: tuple[bool, ...] = ()
    # log_flush=never: how many of its entries are on disk (the recovery point); 0 under always.
    flushed: int = 0


class KafkaState(NamedTuple):
    """`acked` is the ghost set of (index, generation) producers were acknowledged (acks=all:
    the leader's HW covered an entry it appended)."""

    servers: tuple[KafkaServer, ...]
    reads: frozenset
    crashes: int
    channels: tuple = ()  # Kafka's model runs on the rpc network only
    acked: frozenset = frozenset()

    def describe(self) -> str:
        lines = [f"{server_name(k)} {describe_server(s)}" + (" isr" if s.in_isr else "")
                 for k, s in enumerate(self.servers)]
        if self.reads:
            lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(self.reads)))
        if self.acked:
            lines.append("acked " + " ".join(f"{i}@g{g}" for i, g in sorted(self.acked)))
        return "\n".join(lines)


# ------------------------------------------------------------ leader-epoch cache
def epoch_cache(log: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """LeaderEpochFileCache of a log: (epoch, start offset) for each epoch, in order."""
    cache = []
    for offset, epoch in enumerate(log):
        if not cache or cache[-1][0] != epoch:
            cache.append((epoch, offset))
    return tuple(cache)


def end_offset_kip101(log: tuple[int, ...], requested: int) -> int | None:
    """KIP-101's leader answer to OffsetsForLeaderEpoch: its LEO if `requested` is its latest
    epoch, else the start offset of the first epoch after `requested`; None (UNDEFINED) if
    it has no such epoch."""
    cache = epoch_cache(log)
    if cache and cache[-1][0] == requested:
        return len(log)
    for epoch, start in cache:
        if epoch > requested:
            return start
    return None


def end_offset_for(log: tuple[int, ...], requested: int) -> tuple[int | None, int]:
    """KIP-279's answer (LeaderEpochFileCache.endOffsetFor): the largest epoch at or below
    `requested` and that epoch's end offset (the next epoch's start, or the LEO). With no
    such epoch: (None, start offset of the first epoch, or 0) - KAFKA-7415's answer."""
    cache = epoch_cache(log)
    for k in range(len(cache) - 1, -1, -1):
        epoch, _ = cache[k]
        if epoch <= requested:
            return epoch, cache[k + 1][1] if k + 1 < len(cache) else len(log)
    return None, cache[0][1] if cache else 0


def truncation_offset(rule: str, follower: tuple[int, ...], follower_hwm: int, leader: tuple[int, ...]) -> int:
    """Where a new follower truncates its log, under `follower_truncation` = `rule`."""
    if rule == "own-hwm":
        return min(follower_hwm, len(follower))
    if not follower:
        return 0
    requested = follower[-1]  # the follower's latest epoch
    if rule == "leader-epoch":
        end = end_offset_kip101(leader, requested)
        if end is None:
            # UNDEFINED_EPOCH_OFFSET: the follower falls back to its high watermark.
            return min(follower_hwm, len(follower))
        return min(end, len(follower))
    epoch, end = end_offset_for(leader, requested)
    if epoch is None and rule == "leader-epoch-kip279":
        return min(follower_hwm, len(follower))  # 2.0 still answered UNDEFINED here
    if epoch is not None and epoch != requested:
        # KIP-279: the leader lacks the follower's epoch; truncate to the smaller of the
        # two end offsets for the epoch the leader named.
        own_epoch, own_end = end_offset_for(follower, epoch)
        if own_epoch is not None and own_epoch != epoch:
            # The follower lacks that epoch too: it truncates to the end of its own largest
            # epoch below it and asks again (AbstractFetcherThread: truncationCompleted = false).
            return truncation_offset(rule, follower[:own_end], follower_hwm, leader)
        end = min(end, own_end)
    return min(end, len(follower))


def diverged_at(follower: tuple[int, ...], leader: tuple[int, ...]) -> int | None:
    """KIP-320's first attempt: the fetch carries the epoch of the follower's last entry, and the
    leader answers LOG_TRUNCATION when its log is shorter or holds another epoch there. Then
    the offset to truncate to: one past the last offset where both logs hold the same entry
    (an epoch identifies an entry at an offset); None when the fetch may go ahead."""
    end = len(follower)
    if end == 0 or (end <= len(leader) and leader[end - 1] == follower[-1]):
        return None
    return next((k + 1 for k in range(min(end, len(leader)) - 1, -1, -1) if follower[k] == leader[k]), 0)


# ------------------------------------------------------------------- encoding
_local_bytes: dict[KafkaServer, bytes] = {}


def _server_bytes(server: KafkaServer) -> bytes:
    """The part of a replica that names no other replica (its leader and match do)."""
    try:
        return _local_bytes[server]
    except KeyError:
        data = _local_bytes[server] = bytes([
            server.generation, 1 if server.role == LEADER else 0, server.alive, server.hwm, server.in_isr,
            server.truncating | server.flushed << 1,  # one byte: under log_flush=always the bytes of old
            len(server.log), *server.log])
        return data


def encode(state: KafkaState, order=None, keys=None) -> bytes:
    """Stable bytes of a Kafka state with replicas renamed: new position j is old order[j]."""
    servers = state.servers
    n = len(servers)
    if order is None:
        order = range(n)
    if keys is None:
        keys = [_server_bytes(s) for s in servers]
    renamed = {old: new for new, old in enumerate(order)}
    parts = [bytes((n, 2, state.crashes))]  # 2: a Kafka state (raft's encoding writes 0 or 1)
    for old in order:
        server = servers[old]
        parts.append(keys[old])
        parts.append(bytes((renamed[server.leader - 1] + 1 if server.leader else NO_LEADER,)))
        if server.match:
            parts.append(bytes([server.match[k] for k in order]))
            parts.append(bytes([server.isr[k] for k in order]))
    parts.append(_reads(state.reads))
    parts.append(_reads(state.acked))
    return b"".join(parts)


def decode(data: bytes) -> KafkaState:
    """The state that `encode` wrote (replicas in the encoded order)."""
    it = iter(data)
    n, _, crashes = next(it), next(it), next(it)
    servers = []
    for _ in range(n):
        generation, role, alive, hwm, in_isr, truncating_flushed, length = (next(it) for _ in range(7))
        log = tuple(next(it) for _ in range(length))
        leader = next(it)
        match = tuple(next(it) for _ in range(n)) if role == 1 else ()
        isr = tuple(bool(next(it)) for _ in range(n)) if role == 1 else ()
        servers.append(KafkaServer(generation, LEADER if role == 1 else FOLLOWER, log, hwm, bool(alive), match,
                                   bool(in_isr), leader, bool(truncating_flushed & 1), isr, truncating_flushed >> 1))
    reads = frozenset((next(it), next(it)) for _ in range(next(it)))
    acked = frozenset((next(it), next(it)) for _ in range(next(it)))
    return KafkaState(tuple(servers), reads, crashes, (), acked)


# ---------------------------------------------------------------------- model
class KafkaModel(Model):
    """The explicit-state model of Kafka's replication under one protocol and configuration."""

    ACTIONS = ("elect", "write", "replicate", "shrink_isr", "read", "crash", "restart", "leader_and_isr", "flush")
    # The catalogue, the acknowledged-write promise and Kafka's acks=all statement about leaders.
    properties = KAFKA_PROPERTIES
    # Weakly fair (docs/liveness.md, "Fairness"): a follower keeps fetching from the leader it knows
    # (`replicate`; HW advance and ISR expansion are part of the round trip); the leader removes a replica
    # that stays behind or down from the ISR (`shrink_isr`: the ISR expiration task, replica.lag.time.max.ms;
    # Kafka's design, "Replication": "If a follower dies, gets stuck, or falls behind, the leader will remove
    # it from the list of in sync replicas"); a crashed broker comes back (`restart`); the controller keeps
    # resending a LeaderAndIsr request to a live broker until it arrives (`leader_and_isr`,
    # ControllerChannelManager's RequestSendThread); the OS writes the page cache back (`flush`).
    FAIR = ("replicate", "shrink_isr", "restart", "leader_and_isr", "flush")
    SERVER, STATE = KafkaServer, KafkaState  # a variant's fields build on the server's (model.variant_model)
    NOTHING_TO_READ = "has nothing below its high watermark"

    def __init__(self, protocol: Protocol, config: Config):
        if config.network != "rpc":
            raise ValueError("the Kafka model runs on the rpc network only (network=rpc)")
        self.protocol = protocol
        self.config = config
        self.n = config.servers
        # min.insync.replicas: a majority unless the protocol names a count (1 up to the replicas).
        wanted = protocol.min_insync_replicas
        if wanted != "majority" and wanted > self.n:
            raise ValueError(f"min_insync_replicas={wanted} exceeds the {self.n} replicas (servers={self.n}): "
                             f"no ISR could ever be that large; choose 1 to {self.n} or majority")
        # The HW's rules (model.rules): which replicas count toward it, and min.insync.replicas.
        self.rules = rules_of(protocol, self.n)
        self.counting = frozenset(self.rules.counting())
        self.min_isr = self.rules.replication_quorum()
        # The produce-time check (NotEnoughReplicas) comes with a named count only: the majority
        # default keeps the model's older abstraction, where the leader appends whatever its ISR
        # and only the HW waits (Kafka's NotEnoughReplicasAfterAppend), so its pinned spaces stand.
        self.write_min_isr = 0 if wanted == "majority" else wanted
        self.rule = protocol.follower_truncation
        self.unflushed = protocol.log_flush == "never"  # a crash is a power failure (see the module's text)
        others = range(self.n)
        # LeaderAndIsr recipients per new leader: every set of replicas that includes it.
        self.voter_sets = [[v for size in range(1, self.n + 1) for v in combinations(others, size) if c in v]
                           for c in others]
        self.pairs = [(a, b) for a in others for b in others if a != b]
        self._effects = {name: getattr(self, "effect_" + name) for name in self.ACTIONS}

    # --------------------------------------------------------- the interface
    def action_table(self) -> list[Action]:
        """Every action this configuration can name, in a fixed order: the engines' action ids."""
        table: list[Action] = []
        for c in range(self.n):
            table += [("elect", c, voters) for voters in self.voter_sets[c]]
        for name in ("write", "read", "crash", "restart"):
            table += [(name, k) for k in range(self.n)]
        for name in ("shrink_isr", "replicate"):
            table += [(name, l, f) for l, f in self.pairs]
        if self.protocol.late_leader_and_isr:
            table += [("leader_and_isr", l, r) for l, r in self.pairs]
        if self.unflushed:
            table += [("flush", k) for k in range(self.n)]
        return table

    def initial_state(self) -> KafkaState:
        """Every replica alive, in the ISR, a follower of epoch 0 with an empty log and no leader."""
        server = KafkaServer(0, FOLLOWER, (), 0, True, (), True, NO_LEADER, False)
        return KafkaState((server,) * self.n, frozenset(), 0)

    def fingerprint(self, state: KafkaState, symmetry: bool = True) -> int:
        return fingerprint_bytes(self.encode(state, symmetry))

    def encode(self, state: KafkaState, symmetry: bool = True) -> bytes:
        """The bytes the fingerprint hashes (an engine that moves states as bytes sends these)."""
        return canonical(state, encode=encode, server_bytes=_server_bytes) if symmetry else encode(state)

    def decode(self, data: bytes) -> KafkaState:
        return decode(data)

    # The two halves of `encode` (as `RaftModel.server_keys` and `encode_in_order`).
    def server_keys(self, state: KafkaState) -> list[bytes]:
        return [_server_bytes(server) for server in state.servers]

    def encode_in_order(self, state: KafkaState, order) -> bytes:
        return encode(state, order)

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def epoch(s: KafkaState) -> int:
        """The controller's latest leader epoch (every elected leader received it)."""
        return max(server.generation for server in s.servers)

    def _advance_hwm(self, servers: list, l: int, acked: frozenset) -> frozenset:
        """HW = min LEO over the leader's own copy of the ISR (its own LEO included), when that ISR
        is large enough: a deposed leader counts the ISR it last knew, not the controller's. Returns `acked` with the entries of the leader's own epoch the new HW covers: their
        acks=all producers are answered (DelayedProduce completes)."""
        leader = servers[l]
        # The ISR replicas that count toward the HW (model.rules: every one, unless a variant says not).
        isr = [k for k in range(self.n) if (leader.isr[k] or k == l) and k in self.counting]
        if len(isr) < self.min_isr:
            return acked
        hwm = min(len(leader.log) if k == l else leader.match[k] for k in isr)
        if hwm <= leader.hwm:
            return acked
        servers[l] = leader._replace(hwm=hwm)
        mine = {(i + 1, g) for i, g in enumerate(leader.log[:hwm]) if g == leader.generation}
        return acked | mine if not mine <= acked else acked

    def _isr_names(self, s: KafkaState) -> str:
        return "{" + ",".join(server_name(k) for k, sv in enumerate(s.servers) if sv.in_isr) + "}"

    # ------------------------------------------------------------ the actions
    def guard_elect(self, s: KafkaState, c: int, voters: tuple[int, ...]) -> str | None:
        servers = s.servers
        cand = servers[c]
        if c not in voters:
            return f"the controller's LeaderAndIsr request must reach the new leader {server_name(c)}"
        if not cand.alive:
            return f"{server_name(c)} is down"
        if cand.role == LEADER:
            return f"{server_name(c)} already leads epoch {cand.generation}"
        for v in voters:
            if not servers[v].alive:
                return f"{server_name(v)} is down and cannot receive the LeaderAndIsr request"
        if not cand.in_isr:
            live_isr = [k for k, sv in enumerate(servers) if sv.in_isr and sv.alive]
            if live_isr:
                return (f"{server_name(c)} is not in the ISR {self._isr_names(s)}: the controller elects a live "
                        f"ISR replica ({', '.join(server_name(k) for k in live_isr)})")
            if not self.protocol.unclean_election:
                return (f"no replica of the ISR {self._isr_names(s)} is alive and unclean leader election is "
                        f"disabled: the partition stays offline")
        epoch = self.epoch(s) + 1
        if epoch > self.config.max_generation:
            return BoundHit("max_generation", f"epoch {epoch} exceeds max_generation {self.config.max_generation}")
        return None

    def _skips_make_follower(self, replica: KafkaServer, c: int, epoch: int) -> bool:
        """Partition.makeFollower returns early when the leader is unchanged; since KAFKA-7164
        only when no epoch was missed (the new epoch is the replica's or the next)."""
        if replica.role != FOLLOWER or replica.leader != c + 1:
            return False
        return self.rule != "fenced" or epoch <= replica.generation + 1

    def _become_follower(self, replica: KafkaServer, epoch: int, leader: int) -> KafkaServer:
        """A replica told by the controller that `leader` leads `epoch` (makeFollower)."""
        log, hwm, truncating = replica.log, replica.hwm, replica.truncating
        if self.rule == "own-hwm":
            # Before KIP-101: "truncate the log to the high watermark" on becoming a follower.
            log = log[:hwm]
        elif self.rule != "last-fetched-epoch":  # KIP-320's first attempt truncates only on a fetch
            truncating = True  # the fetcher starts in its truncating state
        return replica._replace(generation=epoch, role=FOLLOWER, log=log, hwm=min(hwm, len(log)), match=(),
                                leader=leader, truncating=truncating, isr=(), flushed=min(replica.flushed, len(log)))

    def _receive_leader_and_isr(self, replica: KafkaServer, c: int, epoch: int) -> KafkaServer:
        """A replica other than the new leader `c` receives the LeaderAndIsr request of `epoch`."""
        if self._skips_make_follower(replica, c, epoch):
            return replica._replace(generation=epoch)
        return self._become_follower(replica, epoch, c + 1)

    def effect_elect(self, s: KafkaState, c: int, voters: tuple[int, ...]) -> KafkaState:
        servers = list(s.servers)
        epoch = self.epoch(s) + 1
        clean = servers[c].in_isr
        for k, replica in enumerate(servers):
            # Clean: the new ISR is the live ISR; unclean: the new leader alone.
            in_isr = k == c or (clean and replica.in_isr and replica.alive)
            if in_isr != replica.in_isr:
                servers[k] = replica._replace(in_isr=in_isr)
        for v in voters:
            if v != c:
                servers[v] = self._receive_leader_and_isr(servers[v], c, epoch)
        cand = servers[c]
        # The LeaderAndIsr request sends the new leader the new ISR: its own copy from now on.
        servers[c] = cand._replace(generation=epoch, role=LEADER, match=(0,) * self.n, leader=c + 1,
                                   truncating=False, isr=tuple(sv.in_isr for sv in servers))
        acked = self._advance_hwm(servers, c, s.acked)
        return KafkaState(tuple(servers), s.reads, s.crashes, (), acked)

    def _isr_size(self, leader: KafkaServer, l: int) -> int:
        """The size of the ISR leader `l` counts: its own copy, itself included."""
        return sum(1 for k in range(self.n) if leader.isr[k] or k == l)

    def guard_write(self, s: KafkaState, l: int) -> str | None:
        refusal = super().guard_write(s, l)
        if refusal is None and self._isr_size(s.servers[l], l) < self.write_min_isr:
            # Partition.appendRecordsToLeader: acks=all with too small an ISR is refused unappended.
            return (f"{server_name(l)} answers NOT_ENOUGH_REPLICAS: its ISR has {self._isr_size(s.servers[l], l)} "
                    f"of the {self.write_min_isr} replicas min.insync.replicas asks for")
        return refusal

    def effect_write(self, s: KafkaState, l: int) -> KafkaState:
        servers = list(s.servers)
        leader = servers[l]
        servers[l] = leader._replace(log=leader.log + (leader.generation,))
        acked = self._advance_hwm(servers, l, s.acked)
        return KafkaState(tuple(servers), s.reads, s.crashes, (), acked)

    def guard_replicate(self, s: KafkaState, l: int, f: int) -> str | None:
        refusal = pair_refusal(s.servers, l, f, "a leader does not fetch from itself")
        if refusal:
            return refusal
        leader, follower = s.servers[l], s.servers[f]
        if follower.role != FOLLOWER:
            return f"{server_name(f)} leads epoch {follower.generation} and does not fetch"
        if follower.leader != l + 1:
            known = server_name(follower.leader - 1) if follower.leader else "no leader"
            return f"{server_name(f)} fetches from {known}, not {server_name(l)} (it knows epoch {follower.generation})"
        if self.rule == "fenced" and follower.generation != leader.generation:
            # KIP-320: requests carry the current leader epoch.
            error = "FENCED_LEADER_EPOCH" if follower.generation < leader.generation else "UNKNOWN_LEADER_EPOCH"
            return (f"{server_name(l)} answers {error}: {server_name(f)}'s fetch carries epoch {follower.generation}, "
                    f"{server_name(l)} leads epoch {leader.generation}")
        return None

    def effect_replicate(self, s: KafkaState, l: int, f: int) -> KafkaState:
        servers = list(s.servers)
        leader, follower = servers[l], servers[f]
        log, hwm = follower.log, follower.hwm
        if follower.truncating:
            # OffsetsForLeaderEpoch, then truncate (AbstractFetcherThread.maybeTruncate).
            log = log[:truncation_offset(self.rule, log, hwm, leader.log)]
        elif self.rule == "last-fetched-epoch":
            truncate_to = diverged_at(log, leader.log)
            if truncate_to is not None:  # LOG_TRUNCATION: truncate, then fetch again from there
                log = log[:truncate_to]
        if len(log) > len(leader.log):
            # OFFSET_OUT_OF_RANGE: the follower truncates to the leader's log end offset.
            log = log[:len(leader.log)]
        flushed = min(follower.flushed, len(log))  # truncateTo lowers the recovery point
        # The fetch from the follower's LEO: what the leader holds there, appended as is.
        log = log + leader.log[len(log):]
        hwm = max(min(hwm, len(log)), min(leader.hwm, len(log)))
        servers[f] = follower._replace(log=log, hwm=hwm, truncating=False, flushed=flushed)
        match = list(leader.match)
        match[f] = len(log)
        servers[l] = leader = leader._replace(match=tuple(match))
        if not servers[f].in_isr and len(log) >= leader.hwm and leader.generation == self.epoch(s):
            # maybeExpandIsr: caught up to the HW; the leader writes the ISR and keeps its copy.
            servers[f] = servers[f]._replace(in_isr=True)
            servers[l] = leader = leader._replace(isr=leader.isr[:f] + (True,) + leader.isr[f + 1:])
        acked = self._advance_hwm(servers, l, s.acked)
        return KafkaState(tuple(servers), s.reads, s.crashes, (), acked)

    def guard_shrink_isr(self, s: KafkaState, l: int, f: int) -> str | None:
        if l == f:
            return "a leader does not remove itself from the ISR"
        refusal = leader_refusal(s.servers, l)
        if refusal:
            return refusal
        leader, follower = s.servers[l], s.servers[f]
        if not follower.in_isr:
            return f"{server_name(f)} is not in the ISR {self._isr_names(s)}"
        if leader.generation != self.epoch(s):
            return (f"{server_name(l)} leads epoch {leader.generation} but the controller is at epoch "
                    f"{self.epoch(s)}: its ISR update is rejected")
        if follower.alive and leader.match[f] >= len(leader.log):
            return f"{server_name(f)} is in sync: it has fetched up to {server_name(l)}'s log end offset {len(leader.log)}"
        return None

    def effect_shrink_isr(self, s: KafkaState, l: int, f: int) -> KafkaState:
        # maybeShrinkIsr, then maybeIncrementLeaderHW: a smaller ISR may raise the HW.
        servers = list(s.servers)
        servers[f] = servers[f]._replace(in_isr=False)
        leader = servers[l]
        servers[l] = leader._replace(isr=leader.isr[:f] + (False,) + leader.isr[f + 1:])
        acked = self._advance_hwm(servers, l, s.acked)
        return KafkaState(tuple(servers), s.reads, s.crashes, (), acked)

    def guard_leader_and_isr(self, s: KafkaState, l: int, r: int) -> str | None:
        if not self.protocol.late_leader_and_isr:
            return ("LeaderAndIsr requests arrive with their election or never (late_leader_and_isr=false): "
                    "none reaches a replica late")
        refusal = pair_refusal(s.servers, l, r, "a leader's own LeaderAndIsr request made it leader")
        if refusal:
            return refusal
        leader, replica = s.servers[l], s.servers[r]
        if replica.generation >= leader.generation:
            return (f"{server_name(r)} knows epoch {replica.generation}: the request of {server_name(l)}'s epoch "
                    f"{leader.generation} is not newer and is ignored")
        return None

    def effect_leader_and_isr(self, s: KafkaState, l: int, r: int) -> KafkaState:
        # A late request: the replica becomes a follower of that epoch as at its election; the
        # controller's ISR and the leader are unchanged.
        server = self._receive_leader_and_isr(s.servers[r], l, s.servers[l].generation)
        return s._replace(servers=s.servers[:r] + (server,) + s.servers[r + 1:])

    def effect_crash(self, s: KafkaState, c: int) -> KafkaState:
        # The log, the leader epoch and the checkpointed HW are on disk; the role and the
        # leader's view of its followers are lost. The ISR is the controller's: unchanged.
        server = s.servers[c]._replace(alive=False, role=FOLLOWER, match=(), isr=())
        if self.unflushed:
            return self._power_failure(s, c, server)
        return s._replace(servers=s.servers[:c] + (server,) + s.servers[c + 1:], crashes=s.crashes + 1)

    def _power_failure(self, s: KafkaState, c: int, server: KafkaServer) -> KafkaState:
        """log_flush=never: the page cache is gone. The log keeps its flushed prefix, the HW its checkpoint
        bounded by the log end; the controller drops the broker from the ISR unless it is the last member."""
        log = server.log[:server.flushed]
        servers = list(s.servers)
        servers[c] = server._replace(log=log, hwm=min(server.hwm, len(log)))
        if server.in_isr and any(sv.in_isr for k, sv in enumerate(s.servers) if k != c):
            servers[c] = servers[c]._replace(in_isr=False)
            epoch = self.epoch(s)
            for k, sv in enumerate(servers):
                # The controller's new ISR reaches the leader of the current epoch, which counts it.
                if sv.alive and sv.role == LEADER and sv.generation == epoch and sv.isr[c]:
                    servers[k] = sv._replace(isr=sv.isr[:c] + (False,) + sv.isr[c + 1:])
                    acked = self._advance_hwm(servers, k, s.acked)
                    return KafkaState(tuple(servers), s.reads, s.crashes + 1, (), acked)
        return s._replace(servers=tuple(servers), crashes=s.crashes + 1)

    def guard_flush(self, s: KafkaState, k: int) -> str | None:
        if not self.unflushed:
            return "every append is on disk before anything else happens (log_flush=always): nothing to flush"
        server = s.servers[k]
        if not server.alive:
            return f"{server_name(k)} is down"
        if server.flushed >= len(server.log):
            return f"{server_name(k)}'s log is on disk up to its log end offset {len(server.log)}"
        if s.crashes >= self.config.max_crashes:
            # What is on disk matters only to a later power failure; with none left, a flush changes
            # nothing a property sees, and leaving it out keeps the space that of no flushes.
            return BoundHit("max_crashes", f"max_crashes {self.config.max_crashes} reached: no power failure is "
                                           f"left for the flush to matter to")
        return None

    def effect_flush(self, s: KafkaState, k: int) -> KafkaState:
        # The OS writes the page cache back (or a segment roll flushes it): the recovery point is the LEO.
        server = s.servers[k]._replace(flushed=len(s.servers[k].log))
        return s._replace(servers=s.servers[:k] + (server,) + s.servers[k + 1:])

    def effect_restart(self, s: KafkaState, r: int) -> KafkaState:
        # The controller sends the restarted broker the current epoch and leader (if that
        # leader is alive); it becomes a follower as on any LeaderAndIsr request.
        epoch = self.epoch(s)
        leader = next((k for k, sv in enumerate(s.servers)
                       if k != r and sv.alive and sv.role == LEADER and sv.generation == epoch), None)
        server = self._become_follower(s.servers[r]._replace(alive=True), epoch,
                                       NO_LEADER if leader is None else leader + 1)
        return s._replace(servers=s.servers[:r] + (server,) + s.servers[r + 1:])

    # ------------------------------------------------------------ enumeration
    def actions(self, s: KafkaState, bounds_hit: set | None = None) -> Iterator[Action]:
        """Every enabled action in a fixed order: the guards' logic without their reasons,
        for speed (`why_not` gives the reasons; tests check that the two agree)."""
        hit = bounds_hit if bounds_hit is not None else set()
        config, servers, n = self.config, s.servers, self.n
        alive = [sv.alive for sv in servers]
        leading = [sv.alive and sv.role == LEADER for sv in servers]
        epoch = self.epoch(s)
        live_isr = any(sv.in_isr and sv.alive for sv in servers)
        unclean = self.protocol.unclean_election
        for c in range(n):
            cand = servers[c]
            if not alive[c] or leading[c] or not (cand.in_isr or (unclean and not live_isr)):
                continue
            for voters in self.voter_sets[c]:
                if not all(alive[v] for v in voters):
                    continue
                if epoch + 1 > config.max_generation:
                    hit.add("max_generation")
                else:
                    yield ("elect", c, voters)
        for action in self.server_actions(s, alive, leading, hit):
            if action[0] != "write" or self._isr_size(servers[action[1]], action[1]) >= self.write_min_isr:
                yield action
        fenced = self.rule == "fenced"
        for l, f in self.pairs:
            if leading[l] and servers[f].in_isr and servers[l].generation == epoch and (
                    not alive[f] or servers[l].match[f] < len(servers[l].log)):
                yield ("shrink_isr", l, f)
        for l, f in self.pairs:
            follower = servers[f]
            if (leading[l] and alive[f] and follower.role == FOLLOWER and follower.leader == l + 1
                    and not (fenced and follower.generation != servers[l].generation)):
                yield ("replicate", l, f)
        if self.protocol.late_leader_and_isr:
            for l, r in self.pairs:
                if leading[l] and alive[r] and servers[r].generation < servers[l].generation:
                    yield ("leader_and_isr", l, r)
        if self.unflushed:
            for k, sv in enumerate(servers):
                if alive[k] and sv.flushed < len(sv.log):
                    if s.crashes < config.max_crashes:
                        yield ("flush", k)
                    else:
                        hit.add("max_crashes")
