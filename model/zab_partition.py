"""The ZAB model on a network that partitions, with the leader stepping down when it loses its quorum.

`partition(k)` cuts server k off from every other server (the cut's shape is model/partition.py's:
one isolated server, one bit per server, so symmetry stays sound): no election vote, no
synchronisation and no proposal crosses the cut; clients still reach every server. `heal` removes it.

`check_quorum` (properties/protocol.py) is ZooKeeper's rule: the leader's loop (Leader.lead) checks
every half tick that a quorum of the followers it synchronised with has been heard from within
syncLimit, and otherwise shuts the leader down ("Not sufficient followers synced, only synced with
sids ..."): the server goes back to LOOKING, keeping its epoch and history. As check_quorum does for
raft (model/partition.py), the model makes the step-down part of the step that takes the quorum
away: the partition, or a crash. A prospective leader waiting for NEWLEADER acknowledgements gives
up the same way (initLimit).

What the step-down buys in ZAB is availability, not safety: a leader commits only with a quorum of
acknowledgements (NEWLEADER's, then each proposal's), so a leader cut off from its quorum commits
nothing, whether or not it steps down, and the catalogue holds either way at the bounds checked
(docs/systems.md). Reads are served by any server from what it has committed (ZooKeeper's reads
are sequentially consistent, not linearizable, unless the client calls sync first), so a stale
leader's read is a stale read ZooKeeper allows. The catalogue adds the witness LeaderStepsDown
(properties/step_down.py) so that a check shows the rule firing.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from hwm.model.actions import Action
from hwm.model.encoding import encode, fingerprint_bytes, canonical
from hwm.model.partition import new_partitions, partition_guard
from hwm.model.state import FOLLOWER, LEADER, Config, Server
from hwm.model.zab import ZabModel, ZabState
from hwm.properties.acked import WITH_STEP_DOWN
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import server_name


class ZabPartitionState(NamedTuple):
    """ZAB's state, plus the cut (`cut[k]`: server k is isolated from the others) and how many
    partitions the run has made."""

    servers: tuple[Server, ...]
    reads: frozenset
    crashes: int
    channels: tuple
    synced: tuple[int, ...]
    durable: tuple[int, ...]
    epochs: tuple[int, ...]
    acked: frozenset
    cut: tuple[bool, ...]
    partitions: int

    def _zab(self) -> ZabState:
        return ZabState(*self[:8])

    def note(self, k: int) -> str:
        return self._zab().note(k) + (" cut off" if self.cut[k] else "")

    def describe(self) -> str:
        lines = self._zab().describe().split("\n")
        for k in range(len(self.servers)):
            if self.cut[k]:
                lines[k] += " cut off"
        return "\n".join(lines)


class PartitionedZabModel(ZabModel):
    """The ZAB model with partitions (`config.max_partitions`) and `check_quorum`."""

    def __init__(self, protocol: Protocol, config: Config):
        super().__init__(protocol, config)
        self.step_down = protocol.check_quorum
        if self.step_down:
            self.properties = WITH_STEP_DOWN
        self._effects.update(partition=self.effect_partition, heal=self.effect_heal)

    # --------------------------------------------------------- the interface
    def initial_state(self) -> ZabPartitionState:
        return ZabPartitionState(*super().initial_state(), (False,) * self.n, 0)

    def action_table(self) -> list[Action]:
        return super().action_table() + [("partition", k) for k in range(self.n)] + [("heal",)]

    def _keys(self, s: ZabPartitionState) -> list[bytes]:
        return [key + bytes((s.cut[k],)) for k, key in enumerate(super()._keys(s))]

    def _extra(self, s: ZabPartitionState):
        names = super()._extra(s)
        return lambda order: names(order) + bytes((s.partitions,))

    def encode(self, s: ZabPartitionState, symmetry: bool = True) -> bytes:
        keys, extra = self._keys(s), self._extra(s)
        return canonical(s, keys, extra) if symmetry else encode(s, None, keys, extra)

    def fingerprint(self, s: ZabPartitionState, symmetry: bool = True) -> int:
        return fingerprint_bytes(self.encode(s, symmetry))

    def decode(self, data: bytes) -> ZabPartitionState:
        """The state `encode` wrote: each server's local bytes end with its cut bit, and the
        partitions spent close the encoding."""
        n = data[0]
        plain, cut, pos = bytearray(data[:3]), [], 3
        for _ in range(n):
            role, length = data[pos + 1], data[pos + 4]
            local = 5 + length + 3  # the server, then durable, established, epoch
            plain += data[pos:pos + local]
            cut.append(bool(data[pos + local]))
            pos += local + 1
            if role:
                plain += data[pos:pos + n]
                pos += n
        plain += data[pos:-1]
        base = super().decode(bytes(plain))
        return ZabPartitionState(*base, tuple(cut), data[-1])

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _uncut(s: ZabPartitionState) -> ZabState:
        return ZabState(*s[:8])

    @staticmethod
    def _recut(s: ZabPartitionState, base: ZabState, cut=None, partitions=None) -> ZabPartitionState:
        return ZabPartitionState(*base[:8], s.cut if cut is None else cut,
                                 s.partitions if partitions is None else partitions)

    def _lose_quorum(self, s: ZabState, cut: tuple) -> ZabState:
        """check_quorum: every live leader that reaches fewer than a quorum of servers (itself included)
        shuts down and goes back to LOOKING, keeping its epoch and history (Leader.lead, syncLimit)."""
        servers, synced = list(s.servers), list(s.synced)
        for k, server in enumerate(s.servers):
            if server.alive and server.role == LEADER:
                reached = sum(1 for j, other in enumerate(s.servers) if other.alive and cut[j] == cut[k])
                if reached < self.quorum:
                    servers[k] = server._replace(role=FOLLOWER, match=())
                    synced[k] = 0
        return s._replace(servers=tuple(servers), synced=tuple(synced))

    def _cut_refusal(self, s: ZabPartitionState, a: int, b: int) -> str | None:
        if s.cut[a] != s.cut[b]:
            return f"{server_name(a)} and {server_name(b)} are on two sides of the partition"
        return None

    # ------------------------------------------------------------ the actions
    def guard_elect(self, s: ZabPartitionState, c: int, voters: tuple[int, ...]) -> str | None:
        refusal = super().guard_elect(s, c, voters)
        if refusal is None:
            for v in voters:
                if s.cut[v] != s.cut[c]:
                    return f"{server_name(v)} is on the other side of the partition from {server_name(c)}"
        return refusal

    def guard_sync(self, s: ZabPartitionState, l: int, f: int) -> str | None:
        return super().guard_sync(s, l, f) or self._cut_refusal(s, l, f)

    def guard_replicate(self, s: ZabPartitionState, l: int, f: int) -> str | None:
        return super().guard_replicate(s, l, f) or self._cut_refusal(s, l, f)

    def _lifted(name: str):
        """The ZAB model's effect `name`, on the state without the cut, with the cut put back."""
        def effect(self, s: ZabPartitionState, *args) -> ZabPartitionState:
            return self._recut(s, getattr(ZabModel, name)(self, self._uncut(s), *args))
        effect.__name__ = name
        return effect

    effect_elect = _lifted("effect_elect")
    effect_write = _lifted("effect_write")
    effect_replicate = _lifted("effect_replicate")
    effect_sync = _lifted("effect_sync")
    effect_persist = _lifted("effect_persist")
    effect_read = _lifted("effect_read")
    effect_restart = _lifted("effect_restart")
    del _lifted

    def effect_crash(self, s: ZabPartitionState, c: int) -> ZabPartitionState:
        base = ZabModel.effect_crash(self, self._uncut(s), c)
        if self.step_down:
            base = self._lose_quorum(base, s.cut)
        return self._recut(s, base)

    def guard_partition(self, s: ZabPartitionState, k: int) -> str | None:
        return partition_guard(s.cut, s.partitions, self.config.max_partitions)

    def effect_partition(self, s: ZabPartitionState, k: int) -> ZabPartitionState:
        cut = tuple(j == k for j in range(self.n))
        base = self._uncut(s)
        if self.step_down:
            base = self._lose_quorum(base, cut)
        return self._recut(s, base, cut, s.partitions + 1)

    def guard_heal(self, s: ZabPartitionState) -> str | None:
        return None if any(s.cut) else "the network is not partitioned"

    def effect_heal(self, s: ZabPartitionState) -> ZabPartitionState:
        return s._replace(cut=(False,) * self.n)

    # ------------------------------------------------------------ enumeration
    def actions(self, s: ZabPartitionState, bounds_hit: set | None = None) -> Iterator[Action]:
        """The ZAB model's actions the cut allows, then partition or heal."""
        hit = bounds_hit if bounds_hit is not None else set()
        cut = s.cut
        if any(cut):
            for action in super().actions(s, hit):
                name = action[0]
                if name == "elect":
                    side = cut[action[1]]
                    if any(cut[v] != side for v in action[2]):
                        continue
                elif name in ("replicate", "sync"):
                    if cut[action[1]] != cut[action[2]]:
                        continue
                yield action
            yield ("heal",)
            return
        yield from super().actions(s, hit)
        yield from new_partitions(self.n, s.partitions, self.config.max_partitions, hit)
