"""The raft model on a network that partitions, with check-quorum and reads from a leader's lease.

`partition(k)` cuts server k off from every other server: no append and no vote crosses the cut
(a client still reaches every server). `heal` removes the cut. At most `max_partitions` partitions
happen in a run, as `max_crashes` bounds crashes. Isolating one server is the smallest cut that
separates a leader from its quorum, and a per-server bit (`cut[k]`: k is the isolated one) names
no other server, so symmetry reduction stays sound: the bit is part of each server's sort key.

Two flags (properties/flags.py) give the partition its consequences:

- `check_quorum` (Raft thesis section 6.2, etcd's CheckQuorum): a leader that cannot reach a
  majority of servers steps down. In etcd it fires when an election timeout passes without a
  majority's heartbeat responses, which is no later than any follower of the other side can time
  out, so the model makes it part of the step that cuts the leader off (the partition, or a crash
  of its majority); a server that hears from a live leader refuses to vote (thesis section 4.2.3,
  etcd's `inLease`).
- `lease_reads` (thesis section 6.4.1, etcd's ReadOnlyLeaseBased): a leader serves reads from its
  lease. A lease assumes bounded delays and clock drift; in the model a server starts an election
  only when it hears from no live leader of its generation or a newer one (it is cut off, or the
  leader is down). The catalogue adds LeaseReadNeverStale (properties/leases.py).

Without either flag, elections stay as free as in the raft model (an asynchronous network may
delay any heartbeat), except that voters are on the candidate's side of the cut.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from hwm.model.actions import Action, BoundHit
from hwm.model.encoding import _server_bytes, canonical, encode, fingerprint_bytes
from hwm.model.raft import RaftModel
from hwm.model.state import FOLLOWER, LEADER, Config, Server, State
from hwm.properties.catalogue import CATALOGUE
from hwm.properties.leases import WITH_LEASES
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import describe_server, server_name



def partition_guard(cut: tuple[bool, ...], partitions: int, max_partitions: int) -> str | BoundHit | None:
    """Why no partition may start now, for every system's partitioned model: one cut at a time (a
    heal first), and at most `max_partitions` cuts a behaviour."""
    if any(cut):
        return "the network is already partitioned (heal it first)"
    if partitions >= max_partitions:
        return BoundHit("max_partitions", f"max_partitions {max_partitions} reached")
    return None

def new_partitions(n: int, partitions: int, max_partitions: int, hit: set) -> Iterator[Action]:
    """The partition actions of a whole network, one per server to cut off, for every system's
    partitioned model; none, and the bound marked hit, once `max_partitions` cuts are made."""
    if partitions < max_partitions:
        yield from (("partition", k) for k in range(n))
    else:
        hit.add("max_partitions")


class PartitionState(NamedTuple):
    """The raft model's state, plus the cut (`cut[k]`: server k is isolated from the others; all
    False when the network is whole) and how many partitions the run has made."""

    servers: tuple[Server, ...]
    reads: frozenset
    crashes: int
    channels: tuple
    cut: tuple[bool, ...]
    partitions: int

    def note(self, k: int) -> str:
        """For a step table: the server a partition isolates."""
        return " cut off" if self.cut[k] else ""

    def describe(self) -> str:
        lines = [f"{server_name(k)} {describe_server(s)}{self.note(k)}" for k, s in enumerate(self.servers)]
        if self.reads:
            lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(self.reads)))
        return "\n".join(lines)


class PartitionedRaftModel(RaftModel):
    """The raft model with partitions (`config.max_partitions`), `check_quorum` and `lease_reads`."""

    def __init__(self, protocol: Protocol, config: Config):
        if config.network != "rpc":
            raise ValueError("partitions, check_quorum and lease_reads are modelled on the rpc network only "
                             "(on the async network a cut would also have to drop the channels' messages)")
        super().__init__(protocol, config)
        self.properties = WITH_LEASES if protocol.lease_reads else CATALOGUE
        self._effects.update(partition=self.effect_partition, heal=self.effect_heal)

    # --------------------------------------------------------- the interface
    def initial_state(self) -> PartitionState:
        base = super().initial_state()
        return PartitionState(*base, (False,) * self.n, 0)

    def _keys(self, s: PartitionState) -> list[bytes]:
        return [_server_bytes(server) + bytes((s.cut[k],)) for k, server in enumerate(s.servers)]

    def encode(self, s: PartitionState, symmetry: bool = True) -> bytes:
        keys = self._keys(s)

        def partitions(order) -> bytes:
            return bytes((s.partitions,))
        return canonical(s, keys, partitions) if symmetry else encode(s, None, keys, partitions)

    def fingerprint(self, s: PartitionState, symmetry: bool = True) -> int:
        return fingerprint_bytes(self.encode(s, symmetry))

    def decode(self, data: bytes) -> PartitionState:
        """The state `encode` wrote (servers in the encoded order)."""
        it = iter(data)
        n, _, crashes = next(it), next(it), next(it)
        servers, cut = [], []
        for _ in range(n):
            generation, role, alive, hwm, length = (next(it) for _ in range(5))
            log = tuple(next(it) for _ in range(length))
            cut.append(bool(next(it)))
            match = tuple(next(it) for _ in range(n)) if role else ()
            servers.append(Server(generation, LEADER if role else FOLLOWER, log, hwm, bool(alive), match))
        reads = frozenset((next(it), next(it)) for _ in range(next(it)))
        return PartitionState(tuple(servers), reads, crashes, (), tuple(cut), next(it))

    def action_table(self) -> list[Action]:
        return super().action_table() + [("partition", k) for k in range(self.n)] + [("heal",)]

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _base(s: PartitionState) -> State:
        return State(s.servers, s.reads, s.crashes, s.channels)

    @staticmethod
    def _with(s: PartitionState, base: State, cut=None, partitions=None) -> PartitionState:
        return PartitionState(base.servers, base.reads, base.crashes, base.channels,
                              s.cut if cut is None else cut, s.partitions if partitions is None else partitions)

    def hears_leader(self, s: PartitionState, k: int) -> int | None:
        """A live leader, other than k, that server k hears from (same side of the cut, a generation
        k accepts), or None: only then does k's election timer fire."""
        me = s.servers[k]
        for j, other in enumerate(s.servers):
            if (j != k and other.alive and other.role == LEADER and s.cut[j] == s.cut[k]
                    and other.generation >= me.generation):
                return j
        return None

    def _step_down(self, servers: tuple, cut: tuple) -> tuple:
        """check_quorum: every live leader that reaches fewer than a majority (itself included) steps
        down, keeping its generation."""
        out = list(servers)
        for k, server in enumerate(servers):
            if server.alive and server.role == LEADER:
                reached = sum(1 for j, other in enumerate(servers) if other.alive and cut[j] == cut[k])
                if reached < self.quorum:
                    out[k] = server._replace(role=FOLLOWER, match=())
        return tuple(out)

    # ------------------------------------------------------------ the actions
    def _election_refusal(self, s: PartitionState, c: int, voters: tuple[int, ...]) -> str | None:
        """What the cut and the timing rules add to the raft model's election guard."""
        for v in voters:
            if s.cut[v] != s.cut[c]:
                return f"{server_name(v)} is on the other side of the partition from {server_name(c)}"
        if self.protocol.lease_reads:
            j = self.hears_leader(s, c)
            if j is not None:
                return (f"{server_name(c)} hears from leader {server_name(j)} of generation "
                        f"{s.servers[j].generation}: its election timer does not fire")
        if self.protocol.check_quorum:
            for v in voters:
                if v == c:
                    continue
                voter = s.servers[v]
                if voter.alive and voter.role == LEADER:
                    return (f"{server_name(v)} refuses the vote: it leads generation {voter.generation} and "
                            f"reaches a majority (check_quorum: no vote within a leader's lease)")
                j = self.hears_leader(s, v)
                if j is not None:
                    return (f"{server_name(v)} refuses the vote: it hears from leader {server_name(j)} "
                            f"(check_quorum: no vote within a leader's lease)")
        return None

    def guard_elect(self, s: PartitionState, c: int, voters: tuple[int, ...]) -> str | None:
        return super().guard_elect(s, c, voters) or self._election_refusal(s, c, voters)

    def effect_elect(self, s: PartitionState, c: int, voters: tuple[int, ...]) -> PartitionState:
        return self._with(s, super().effect_elect(self._base(s), c, voters))

    def effect_write(self, s: PartitionState, l: int) -> PartitionState:
        return self._with(s, super().effect_write(self._base(s), l))

    def guard_replicate(self, s: PartitionState, l: int, f: int) -> str | None:
        refusal = super().guard_replicate(s, l, f)
        if refusal is None and s.cut[l] != s.cut[f]:
            return f"{server_name(l)} and {server_name(f)} are on two sides of the partition"
        return refusal

    def effect_replicate(self, s: PartitionState, l: int, f: int) -> PartitionState:
        return self._with(s, super().effect_replicate(self._base(s), l, f))

    def effect_read(self, s: PartitionState, r: int) -> PartitionState:
        return self._with(s, super().effect_read(self._base(s), r))

    def effect_crash(self, s: PartitionState, c: int) -> PartitionState:
        base = super().effect_crash(self._base(s), c)
        if self.protocol.check_quorum:
            base = base._replace(servers=self._step_down(base.servers, s.cut))
        return self._with(s, base)

    def effect_restart(self, s: PartitionState, r: int) -> PartitionState:
        return self._with(s, super().effect_restart(self._base(s), r))

    def guard_partition(self, s: PartitionState, k: int) -> str | None:
        return partition_guard(s.cut, s.partitions, self.config.max_partitions)

    def effect_partition(self, s: PartitionState, k: int) -> PartitionState:
        cut = tuple(j == k for j in range(self.n))
        servers = self._step_down(s.servers, cut) if self.protocol.check_quorum else s.servers
        return PartitionState(servers, s.reads, s.crashes, s.channels, cut, s.partitions + 1)

    def guard_heal(self, s: PartitionState) -> str | None:
        return None if any(s.cut) else "the network is not partitioned"

    def effect_heal(self, s: PartitionState) -> PartitionState:
        return s._replace(cut=(False,) * self.n)

    # ------------------------------------------------------------ enumeration
    def actions(self, s: PartitionState, bounds_hit: set | None = None) -> Iterator[Action]:
        """The raft model's actions the cut and the timing rules allow, then partition or heal."""
        hit = bounds_hit if bounds_hit is not None else set()
        cut = s.cut
        whole = not any(cut)
        for action in super().actions(s, hit):
            name = action[0]
            if whole:
                if name == "elect" and (self.protocol.lease_reads or self.protocol.check_quorum) \
                        and self._election_refusal(s, action[1], action[2]):
                    continue
            elif name == "replicate":
                if cut[action[1]] != cut[action[2]]:
                    continue
            elif name == "elect" and self._election_refusal(s, action[1], action[2]):
                continue
            yield action
        if not whole:
            yield ("heal",)
        else:
            yield from new_partitions(self.n, s.partitions, self.config.max_partitions, hit)
