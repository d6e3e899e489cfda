"""ZAB (ZooKeeper Atomic Broadcast) as the raft model plus a synchronisation phase.

Zab's phases (Junqueira, Reed, Serafini, DSN 2011), and how they are abstracted here:

1. Discovery / election: the server with the most up-to-date history wins, which is the raft
   model's `elect` under `election=longest-log` (ZooKeeper's fast leader election orders
   candidates by the epoch of their last zxid, then the zxid; the epoch is the generation). The
   winner is a *prospective* leader: it holds the role of leader, but may neither accept writes
   nor advance its high-water mark.
2. Synchronisation: `sync(L, F)` is one whole DIFF/TRUNC/SNAP exchange followed by NEWLEADER and
   the follower's ACK: F's history becomes L's (F truncates what L does not have), F adopts L's
   generation and acknowledges. Once a quorum (L included) has acknowledged NEWLEADER, L is
   established: its whole history is committed at once (ZAB commits the synchronised history by
   the NEWLEADER quorum, not by counting replicas of its own generation as Raft does).
3. Broadcast: the established leader writes; `replicate(L, F)` sends proposals to a follower
   that has synchronised with it; a quorum of ACKs advances the HWM as in the raft model.

Persistence is explicit: `durable[k]` is how much of server k's log is on disk. Every rule of
ZooKeeper persists before it acknowledges, except under the flag `zab_ack_before_persist`
(ZOOKEEPER-3911: `Learner.syncWithLeader` answered NEWLEADER while the proposals of a DIFF sync
were still only in `packetsNotCommitted`; the fix, apache/zookeeper pull request 1445, logs them
before the ACK). Then `sync` leaves the new entries in memory, `persist(F)` is the follower's
SyncRequestProcessor flushing them, and a crash keeps only the durable prefix. A proposal of the
broadcast phase is logged before its ACK, which flushes everything before it (the log is written
in order).

The ghost set `acked` holds every entry a client was told is committed: every entry under an
established leader's HWM.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator, NamedTuple

from hwm.model.actions import Action, BoundHit
from hwm.model.raft import RaftModel, pair_refusal
from hwm.model.encoding import _reads, _server_bytes, canonical, encode, fingerprint_bytes
from hwm.model.state import FOLLOWER, LEADER, Config, Server, State
from hwm.properties.acked import WITH_ACKED
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import describe_server, server_name


def read_server(it) -> Server:
    """One server's local bytes as `model.encoding` writes them (its match follows separately)."""
    generation, role, alive, hwm, length = (next(it) for _ in range(5))
    log = tuple(next(it) for _ in range(length))
    return Server(generation, LEADER if role else FOLLOWER, log, hwm, bool(alive), ())


def read_entries(it) -> frozenset:
    """A set of (index, generation) entries as `model.encoding` writes reads."""
    return frozenset((next(it), next(it)) for _ in range(next(it)))


class ZabState(NamedTuple):
    """A ZAB cluster: the raft model's state plus what the synchronisation phase needs.

    `synced[k]`, for a leader k, is the bit set of the followers that acknowledged its NEWLEADER
    (0 for anyone else); `durable[k]` how many of server k's entries are on disk; `epochs[k]`
    its currentEpoch, the generation of the last history it accepted (as leader, or by
    acknowledging a NEWLEADER; on disk); `acked` the ghost set of (index, generation) entries
    acknowledged to clients.
    """

    servers: tuple[Server, ...]
    reads: frozenset
    crashes: int
    channels: tuple
    synced: tuple[int, ...]
    durable: tuple[int, ...]
    epochs: tuple[int, ...]
    acked: frozenset

    def note(self, k: int) -> str:
        """For a step table: a prospective leader, entries only in memory."""
        server = self.servers[k]
        out = ""
        if server.role == LEADER and server.alive and not self.synced[k] & _ESTABLISHED:
            out += " prospective"
        if self.durable[k] < len(server.log):
            out += f" disk={self.durable[k]}"
        return out

    def describe(self) -> str:
        lines = []
        for k, s in enumerate(self.servers):
            extra = f" durable={self.durable[k]}" if self.durable[k] < len(s.log) else ""
            if s.role == LEADER and s.alive:
                phase = "established" if self.synced[k] & _ESTABLISHED else "prospective"
                extra += f" {phase}"
            lines.append(f"{server_name(k)} {describe_server(s)}{extra}")
        if self.reads:
            lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(self.reads)))
        return "\n".join(lines)


# Bit 7 of a leader's `synced` marks it established (n <= 7 followers use bits 0..6): once a
# quorum acknowledged NEWLEADER, a follower crashing does not send the leader back to phase 2.
_ESTABLISHED = 1 << 7


def _popcount(mask: int) -> int:
    return bin(mask & (_ESTABLISHED - 1)).count("1")


class ZabModel(RaftModel):
    """The ZAB model. Raft-family flags keep their meaning; `commit` only ever sees entries of
    the leader's own generation above the established history, so it changes nothing here."""

    properties = WITH_ACKED
    STATE = ZabState
    # Weakly fair (docs/liveness.md, "Fairness"): raft's, and `sync`: a leader, prospective or
    # established, keeps trying to synchronise each live follower that has not acknowledged its
    # NEWLEADER (a LOOKING server learns the leader from its notifications and connects), and a leader
    # that a quorum no longer follows abandons its role (Zab, DSN 2011, heartbeats; ZooKeeper's
    # Leader.lead: "Not sufficient followers synced"), which `sync` with a follower of a later epoch
    # models. `persist`: the SyncRequestProcessor flushes what it logged once its queue is empty.
    FAIR = ("replicate", "restart", "sync", "persist")

    def __init__(self, protocol: Protocol, config: Config):
        if config.network != "rpc":
            raise ValueError("the ZAB model runs on the rpc network only (each step is one whole exchange)")
        if config.servers > 7:
            raise ValueError("the ZAB model supports at most 7 servers")
        super().__init__(protocol, config)
        self.ack_before_persist = protocol.zab_ack_before_persist
        self.counting_mask = sum(1 << k for k in self.rules.counting())
        # The raft model's election guard with no up-to-date rule: ZAB applies its own.
        self._without_election_rule = RaftModel(replace(protocol, system="raft", zab_ack_before_persist=False,
                                                    election="any"), config)
        self._effects.update(sync=self.effect_sync, persist=self.effect_persist)

    # --------------------------------------------------------- the interface
    def initial_state(self) -> ZabState:
        base = super().initial_state()
        n = self.n
        return ZabState(base.servers, base.reads, base.crashes, base.channels, (0,) * n, (0,) * n, (0,) * n,
                        frozenset())

    def _keys(self, s: ZabState) -> list[bytes]:
        return [_server_bytes(server) + bytes((s.durable[k], s.synced[k] >> 7, s.epochs[k]))
                for k, server in enumerate(s.servers)]

    def _extra(self, s: ZabState):
        def names(order) -> bytes:
            masks = bytes(sum(1 << j for j, old in enumerate(order) if s.synced[k] >> old & 1) for k in order)
            return masks + _reads(s.acked)
        return names

    def encode(self, s: ZabState, symmetry: bool = True) -> bytes:
        keys, extra = self._keys(s), self._extra(s)
        return canonical(s, keys, extra) if symmetry else encode(s, None, keys, extra)

    def fingerprint(self, s: ZabState, symmetry: bool = True) -> int:
        return fingerprint_bytes(self.encode(s, symmetry))

    def server_keys(self, s: ZabState) -> list[bytes]:
        return self._keys(s)

    def encode_in_order(self, s: ZabState, order) -> bytes:
        return encode(s, order, self._keys(s), self._extra(s))

    def decode(self, data: bytes) -> ZabState:
        """The state `encode` wrote (servers in the encoded order)."""
        it = iter(data)
        n, _, crashes = next(it), next(it), next(it)
        servers, durable, established, epochs = [], [], [], []
        for _ in range(n):
            server = read_server(it)
            durable.append(next(it))
            established.append(next(it))
            epochs.append(next(it))
            if server.role == LEADER:
                server = server._replace(match=tuple(next(it) for _ in range(n)))
            servers.append(server)
        reads = read_entries(it)
        synced = tuple(next(it) | (_ESTABLISHED if established[k] else 0) for k in range(n))
        return ZabState(tuple(servers), reads, crashes, (), synced, tuple(durable), tuple(epochs), read_entries(it))

    # ---------------------------------------------------------------- helpers
    def established(self, s: ZabState, leader: int) -> bool:
        return bool(s.synced[leader] & _ESTABLISHED)

    def _with(self, s: ZabState, base: State, synced=None, durable=None) -> ZabState:
        """`base` (a raft-model effect's result) with ZAB's extras, and the acknowledgements of
        every established leader's HWM."""
        synced = s.synced if synced is None else synced
        acked = s.acked
        for k, server in enumerate(base.servers):
            if server.role == LEADER and server.alive and synced[k] & _ESTABLISHED and server.hwm:
                new = {(i + 1, server.log[i]) for i in range(min(server.hwm, len(server.log)))}
                if not new <= acked:
                    acked = acked | new
        return ZabState(base.servers, base.reads, base.crashes, base.channels, synced,
                        s.durable if durable is None else durable, s.epochs, acked)

    @staticmethod
    def _set(values: tuple, k: int, value) -> tuple:
        return values[:k] + (value,) + values[k + 1:]

    # ------------------------------------------------------------ the actions
    def effect_elect(self, s: ZabState, c: int, voters: tuple[int, ...]) -> ZabState:
        base = super().effect_elect(s, c, voters)
        # Voters join the new epoch: whatever leader they had synchronised with loses them,
        # and a voter that led (the candidate included) is back in phase 1.
        clear = sum(1 << v for v in voters)
        synced = tuple(0 if k in voters else mask & ~clear for k, mask in enumerate(s.synced))
        durable = s.durable
        if self.protocol.noop_on_election:
            durable = self._set(durable, c, len(base.servers[c].log))  # the leader logs its own entry
        # The leader's history is the new epoch's initial history (ZooKeeper's Leader.lead sets
        # its currentEpoch once a quorum acknowledged the epoch).
        state = self._with(s, base, synced, durable)._replace(epochs=self._set(s.epochs, c, base.servers[c].generation))
        return self._establish(state, c)

    def freshness(self, s: ZabState, k: int) -> tuple[int, int, int]:
        """Fast leader election's order: currentEpoch, then the last zxid (its epoch, its counter)."""
        log = s.servers[k].log
        return s.epochs[k], (log[-1] if log else 0), len(log)

    def guard_elect(self, s: ZabState, c: int, voters: tuple[int, ...]) -> str | None:
        if self.protocol.election != "longest-log":
            return super().guard_elect(s, c, voters)
        # The raft model's checks without its up-to-date rule, then ZAB's.
        reason = RaftModel.guard_elect(self._without_election_rule, s, c, voters)
        if reason is not None or c not in voters:
            return reason
        mine = self.freshness(s, c)
        for v in voters:
            theirs = self.freshness(s, v)
            if theirs > mine:
                return (f"{server_name(v)} refuses the vote: its history is more up to date (currentEpoch "
                        f"{theirs[0]}, last zxid {theirs[1]}.{theirs[2]}) than {server_name(c)}'s (currentEpoch "
                        f"{mine[0]}, last zxid {mine[1]}.{mine[2]})")
        return None

    def _establish(self, s: ZabState, leader: int) -> ZabState:
        """A quorum acknowledged NEWLEADER: the leader is established and commits its history."""
        mask = s.synced[leader]
        # Q1 of the servers that count (model.rules: a ZooKeeper observer's acknowledgement does not).
        if mask & _ESTABLISHED or _popcount((mask | 1 << leader) & self.counting_mask) < self.quorum:
            return s
        server = s.servers[leader]
        indexes = list(server.match)
        indexes[leader] = len(server.log)
        hwm = max(server.hwm, self.rules.quorum_index(tuple(indexes)))
        servers = self._set(s.servers, leader, server._replace(hwm=hwm))
        s = s._replace(servers=servers, synced=self._set(s.synced, leader, mask | _ESTABLISHED))
        return self._with(s, s)

    def guard_sync(self, s: ZabState, l: int, f: int) -> str | None:
        refusal = pair_refusal(s.servers, l, f, "a leader does not synchronise with itself")
        if refusal:
            return refusal
        if s.synced[l] >> f & 1:
            return f"{server_name(f)} has already acknowledged {server_name(l)}'s NEWLEADER"
        return None

    def effect_sync(self, s: ZabState, l: int, f: int) -> ZabState:
        leader, follower = s.servers[l], s.servers[f]
        if follower.generation > leader.generation:
            # The follower is in a later epoch: the leader learns it is stale and steps down.
            servers = self._set(s.servers, l, leader._replace(generation=follower.generation, role=FOLLOWER,
                                                                match=()))
            return s._replace(servers=servers, synced=self._set(s.synced, l, 0))
        # DIFF/TRUNC/SNAP: the follower's history becomes the leader's.
        log = leader.log
        common = 0
        while common < min(len(log), len(follower.log)) and log[common] == follower.log[common]:
            common += 1
        if self.ack_before_persist:
            # ZOOKEEPER-3911: the truncation is done, the new proposals are only in memory.
            durable = min(s.durable[f], common)
        else:
            durable = len(log)
        hwm = max(follower.hwm, leader.hwm)
        servers = list(s.servers)
        servers[f] = Server(leader.generation, FOLLOWER, log, hwm, True, ())
        match = list(leader.match)
        # Until the leader is established, an ACK of NEWLEADER counts for its whole history; after
        # that, the leader counts a proposal only when the follower's ACK of it comes, which the
        # follower sends once it has logged it (see `effect_persist`).
        match[f] = durable if self.established(s, l) else len(log)
        servers[l] = leader._replace(match=tuple(match))
        # The follower now follows this leader only (and if it led an older epoch, leads no more).
        synced = tuple(0 if k == f else mask & ~(1 << f) for k, mask in enumerate(s.synced))
        synced = self._set(synced, l, s.synced[l] | 1 << f)
        durable_all = self._set(s.durable, f, durable)
        # The follower's currentEpoch is written before its ACK (under either flag).
        epochs = self._set(s.epochs, f, leader.generation)
        state = ZabState(tuple(servers), s.reads, s.crashes, s.channels, synced, durable_all, epochs, s.acked)
        if self.established(state, l):
            servers[l] = self._advance_hwm(servers[l], l)
            state = self._with(state, state._replace(servers=tuple(servers)))
        return self._establish(state, l)

    def guard_persist(self, s: ZabState, k: int) -> str | None:
        if not s.servers[k].alive:
            return f"{server_name(k)} is down"
        if s.durable[k] >= len(s.servers[k].log):
            return f"{server_name(k)} has nothing in memory that is not on disk"
        return None

    def effect_persist(self, s: ZabState, k: int) -> ZabState:
        follower = s.servers[k]
        s = s._replace(durable=self._set(s.durable, k, len(follower.log)))
        for l, leader in enumerate(s.servers):
            if s.synced[l] >> k & 1 and leader.alive and self.established(s, l):
                # The logged proposals are acknowledged to the leader it synchronised with.
                match = self._set(leader.match, k, len(follower.log))
                leader = self._advance_hwm(leader._replace(match=match), l)
                return self._with(s, s._replace(servers=self._set(s.servers, l, leader)))
        return s

    def guard_write(self, s: ZabState, l: int) -> str | None:
        reason = super().guard_write(s, l)
        if reason is None and not self.established(s, l):
            return (f"{server_name(l)} is a prospective leader: a quorum has not acknowledged its "
                    f"NEWLEADER yet (ZAB phase 2)")
        return reason

    def effect_write(self, s: ZabState, l: int) -> ZabState:
        base = super().effect_write(s, l)
        # The leader logs its proposal before counting its own ACK (in order: all before it too).
        return self._with(s, base, durable=self._set(s.durable, l, len(base.servers[l].log)))

    def guard_replicate(self, s: ZabState, l: int, f: int) -> str | None:
        reason = super().guard_replicate(s, l, f)
        if reason is None:
            if not self.established(s, l):
                return (f"{server_name(l)} is a prospective leader: it broadcasts only after a quorum "
                        f"acknowledged its NEWLEADER (ZAB phase 2)")
            if not s.synced[l] >> f & 1:
                return f"{server_name(f)} has not synchronised with {server_name(l)} (no NEWLEADER acknowledged)"
        return reason

    def effect_replicate(self, s: ZabState, l: int, f: int) -> ZabState:
        base = super().effect_replicate(s, l, f)
        # A follower logs a proposal before it ACKs it, and everything before it.
        return self._with(s, base, durable=self._set(s.durable, f, len(base.servers[f].log)))

    def effect_read(self, s: ZabState, r: int) -> ZabState:
        return self._with(s, super().effect_read(s, r))

    def effect_crash(self, s: ZabState, c: int) -> ZabState:
        base = super().effect_crash(s, c)
        server = base.servers[c]
        log = server.log[: s.durable[c]]  # what was only in memory is gone
        servers = self._set(base.servers, c, server._replace(log=log, hwm=min(server.hwm, len(log))))
        # A follower that comes back synchronises again; a leader that comes back is a follower.
        synced = tuple(0 if k == c else mask & ~(1 << c) for k, mask in enumerate(s.synced))
        return self._with(s, base._replace(servers=servers), synced)

    def effect_restart(self, s: ZabState, r: int) -> ZabState:
        base = super().effect_restart(s, r)
        return self._with(s, base, durable=self._set(s.durable, r, min(s.durable[r], len(base.servers[r].log))))

    # ------------------------------------------------------------ enumeration
    def action_table(self) -> list[Action]:
        return (super().action_table() + [("sync", l, f) for l, f in self.pairs]
                + [("persist", k) for k in range(self.n)])

    def actions(self, s: ZabState, bounds_hit: set | None = None) -> Iterator[Action]:
        """The raft model's actions under ZAB's guards, then `sync` and `persist`."""
        zab_election = self.protocol.election == "longest-log"
        hit = bounds_hit if bounds_hit is not None else set()
        servers, synced, config = s.servers, s.synced, self.config
        if zab_election:
            # guard_elect's logic without its explanations, for speed (why_not gives them).
            alive = [sv.alive for sv in servers]
            fresh = [self.freshness(s, k) for k in range(self.n)]
            noop = self.protocol.noop_on_election
            for c in range(self.n):
                if not alive[c] or servers[c].role == LEADER:
                    continue
                for voters in self.voter_sets[c]:
                    if not all(alive[v] and fresh[c] >= fresh[v] for v in voters):
                        continue
                    if 1 + max(servers[v].generation for v in voters) > config.max_generation:
                        hit.add("max_generation")
                    elif noop and len(servers[c].log) >= config.max_log:
                        hit.add("max_log")
                    else:
                        yield ("elect", c, voters)
        for action in super().actions(s, hit):
            kind = action[0]
            if kind == "elect" and zab_election:
                continue
            if kind == "write" and not synced[action[1]] & _ESTABLISHED:
                continue
            if kind == "replicate" and not (synced[action[1]] & _ESTABLISHED and synced[action[1]] >> action[2] & 1):
                continue
            yield action
        servers = s.servers
        for l, f in self.pairs:
            leader = servers[l]
            if leader.alive and leader.role == LEADER and servers[f].alive and not s.synced[l] >> f & 1:
                yield ("sync", l, f)
        if self.ack_before_persist:
            for k, server in enumerate(servers):
                if server.alive and s.durable[k] < len(server.log):
                    yield ("persist", k)


__all__ = ["ZabModel", "ZabState", "BoundHit"]
