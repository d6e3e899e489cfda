"""The Kafka model on a network that partitions, with the controller's fencing as a flag.

`partition(k)` cuts broker k off from every other broker and from the controller (model/partition.py
gives the cut's shape: one isolated server, one bit per server, so symmetry stays sound): no fetch
crosses the cut, and no request of the controller reaches k, so k is neither elected nor told of an
election (a LeaderAndIsr request, or a late one). Producers and consumers still reach every broker.
`heal` removes the cut. A broker that restarts while cut off waits for the heal: a restarted broker
learns the current epoch and leader from the controller (KafkaModel.effect_restart), which it cannot
reach.

`controller_fencing` (properties/flags.py) is what the real system does about a cut-off broker:

- its session expires (ZooKeeper's session timeout; KRaft's broker heartbeat) and the controller
  fences it: it leaves the ISR, unless it is the last member (the rule a power failure follows in
  model/kafka.py), and the current leader counts the smaller ISR; if it led, the controller's next
  election moves leadership away under a new leader epoch, and on healing the broker re-registers
  and learns the current epoch and its leader, as a restarted broker does (ReplicaManager
  .becomeLeaderOrFollower);
- a leader changes the ISR only through the controller: ZooKeeper-era Kafka writes the partition
  state with a conditional update on its zkVersion and keeps its old ISR when the write fails;
  since KIP-497 the leader sends AlterPartition and counts the maximal ISR until the controller
  accepts. A leader cut off from the controller therefore cannot shrink its ISR, and its high
  watermark waits for the followers it can no longer reach.

Without the flag the cut-off leader shrinks the ISR it counts on its own (the update never reaches
the controller, whose ISR keeps every replica) and goes on acknowledging acks=all writes that only
it and the followers it last heard from hold, while the controller elects another replica of its
ISR (Jepsen's Kafka analysis, 2013: a partitioned leader's ISR shrinks to itself). The partition
step itself changes nothing then; only the two rules above differ.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from hwm.model.actions import Action
from hwm.model.encoding import canonical, fingerprint_bytes
from hwm.model.kafka import KafkaModel, KafkaServer, KafkaState, NO_LEADER, _server_bytes, decode as decode_kafka
from hwm.model.kafka import encode as encode_kafka
from hwm.model.partition import new_partitions, partition_guard
from hwm.model.state import LEADER, Config
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import describe_server, server_name


class KafkaPartitionState(NamedTuple):
    """Kafka's state, plus the cut (`cut[k]`: broker k is isolated from the others and from the
    controller) and how many partitions the run has made."""

    servers: tuple[KafkaServer, ...]
    reads: frozenset
    crashes: int
    channels: tuple
    acked: frozenset
    cut: tuple[bool, ...]
    partitions: int

    def note(self, k: int) -> str:
        """For a step table: the broker a partition isolates."""
        return " cut off" if self.cut[k] else ""

    def describe(self) -> str:
        lines = [f"{server_name(k)} {describe_server(s)}" + (" isr" if s.in_isr else "") + self.note(k)
                 for k, s in enumerate(self.servers)]
        if self.reads:
            lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(self.reads)))
        if self.acked:
            lines.append("acked " + " ".join(f"{i}@g{g}" for i, g in sorted(self.acked)))
        return "\n".join(lines)


class PartitionedKafkaModel(KafkaModel):
    """The Kafka model with partitions (`config.max_partitions`) and `controller_fencing`."""

    ACTIONS = KafkaModel.ACTIONS + ("partition", "heal")

    def __init__(self, protocol: Protocol, config: Config):
        super().__init__(protocol, config)
        self.fencing = protocol.controller_fencing

    # --------------------------------------------------------- the interface
    def initial_state(self) -> KafkaPartitionState:
        return self._with(KafkaPartitionState((), frozenset(), 0, (), frozenset(), (False,) * self.n, 0),
                          super().initial_state())

    def action_table(self) -> list[Action]:
        return super().action_table() + [("partition", k) for k in range(self.n)] + [("heal",)]

    def _keys(self, s: KafkaPartitionState) -> list[bytes]:
        return [_server_bytes(server) + bytes((s.cut[k],)) for k, server in enumerate(s.servers)]

    def encode(self, s: KafkaPartitionState, symmetry: bool = True) -> bytes:
        keys = self._keys(s)

        def with_partitions(state, order=None, keys=keys):
            return encode_kafka(state, order, keys) + bytes((s.partitions,))
        return canonical(s, keys, encode=with_partitions) if symmetry else with_partitions(s)

    def fingerprint(self, s: KafkaPartitionState, symmetry: bool = True) -> int:
        return fingerprint_bytes(self.encode(s, symmetry))

    def decode(self, data: bytes) -> KafkaPartitionState:
        """The state `encode` wrote (brokers in the encoded order): each broker's local bytes carry
        its cut bit last, and the partitions spent close the encoding."""
        n = data[0]
        plain, cut, pos = bytearray(data[:3]), [], 3
        for _ in range(n):
            role, length = data[pos + 1], data[pos + 6]
            local = 7 + length
            plain += data[pos:pos + local]
            cut.append(bool(data[pos + local]))
            pos += local + 1
            rest = 1 + (2 * n if role == 1 else 0)  # its leader, and a leader's match and isr
            plain += data[pos:pos + rest]
            pos += rest
        plain += data[pos:-1]
        base = decode_kafka(bytes(plain))
        return KafkaPartitionState(base.servers, base.reads, base.crashes, (), base.acked, tuple(cut), data[-1])

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _base(s: KafkaPartitionState) -> KafkaState:
        return KafkaState(s.servers, s.reads, s.crashes, (), s.acked)

    @staticmethod
    def _with(s: KafkaPartitionState, base: KafkaState, cut=None, partitions=None) -> KafkaPartitionState:
        return KafkaPartitionState(base.servers, base.reads, base.crashes, (), base.acked,
                                   s.cut if cut is None else cut, s.partitions if partitions is None else partitions)

    def _expire_session(self, s: KafkaState, k: int) -> KafkaState:
        """controller_fencing: broker k's session expired. It leaves the ISR unless it is the last
        member, and the leader of the current epoch, if it still counts k, counts the new ISR."""
        servers = list(s.servers)
        if not servers[k].in_isr or not any(sv.in_isr for j, sv in enumerate(servers) if j != k):
            return s
        servers[k] = servers[k]._replace(in_isr=False)
        epoch = self.epoch(s)
        for j, sv in enumerate(servers):
            if j != k and sv.alive and sv.role == LEADER and sv.generation == epoch and sv.isr[k]:
                servers[j] = sv._replace(isr=sv.isr[:k] + (False,) + sv.isr[k + 1:])
                acked = self._advance_hwm(servers, j, s.acked)
                return KafkaState(tuple(servers), s.reads, s.crashes, (), acked)
        return s._replace(servers=tuple(servers))

    def _reregister(self, s: KafkaState, k: int) -> KafkaState:
        """controller_fencing, on healing: a broker that led while cut off, or missed an epoch, learns from
        the controller the current epoch and its leader, as a restarted broker does (its session was
        fenced; re-registering, it gets the LeaderAndIsr requests it missed)."""
        server = s.servers[k]
        epoch = self.epoch(s)
        if not server.alive or (server.role != LEADER and server.generation == epoch):
            return s
        leader = next((j for j, sv in enumerate(s.servers)
                       if j != k and sv.alive and sv.role == LEADER and sv.generation == epoch), None)
        if server.generation == epoch and leader is None and server.in_isr:
            return s  # it is still the controller's leader (the last ISR replica, nobody else elected)
        follower = self._become_follower(server, epoch, NO_LEADER if leader is None else leader + 1)
        return s._replace(servers=s.servers[:k] + (follower,) + s.servers[k + 1:])

    # ------------------------------------------------------------ the actions
    def guard_elect(self, s: KafkaPartitionState, c: int, voters: tuple[int, ...]) -> str | None:
        refusal = super().guard_elect(s, c, voters)
        if refusal is None:
            for v in voters:
                if s.cut[v]:
                    return f"{server_name(v)} is cut off from the controller: no LeaderAndIsr request reaches it"
        return refusal

    def effect_elect(self, s: KafkaPartitionState, c: int, voters: tuple[int, ...]) -> KafkaPartitionState:
        return self._with(s, super().effect_elect(self._base(s), c, voters))

    def effect_write(self, s: KafkaPartitionState, l: int) -> KafkaPartitionState:
        return self._with(s, super().effect_write(self._base(s), l))

    def guard_replicate(self, s: KafkaPartitionState, l: int, f: int) -> str | None:
        refusal = super().guard_replicate(s, l, f)
        if refusal is None and s.cut[l] != s.cut[f]:
            return f"{server_name(l)} and {server_name(f)} are on two sides of the partition: no fetch crosses it"
        return refusal

    def effect_replicate(self, s: KafkaPartitionState, l: int, f: int) -> KafkaPartitionState:
        return self._with(s, super().effect_replicate(self._base(s), l, f))

    def _shrinks_alone(self, s: KafkaPartitionState, l: int) -> bool:
        """Without controller_fencing, a leader cut off from the controller shrinks its own ISR."""
        return not self.fencing and s.cut[l]

    def guard_shrink_isr(self, s: KafkaPartitionState, l: int, f: int) -> str | None:
        if not s.cut[l]:
            return super().guard_shrink_isr(s, l, f)
        if self.fencing:
            refusal = super().guard_shrink_isr(s, l, f)
            return refusal or (f"{server_name(l)} is cut off from the controller: its ISR update (a conditional "
                               f"write) cannot reach it, and it keeps counting its ISR")
        # Without fencing: the guard on the leader's own copy, with no controller to ask.
        if l == f:
            return "a leader does not remove itself from the ISR"
        leader = s.servers[l]
        if not leader.alive or leader.role != LEADER:
            return f"{server_name(l)} is {'down' if not leader.alive else 'not a leader'}"
        if not leader.isr[f]:
            return f"{server_name(f)} is not in the ISR {server_name(l)} counts"
        if s.servers[f].alive and leader.match[f] >= len(leader.log):
            return f"{server_name(f)} is in sync: it has fetched up to {server_name(l)}'s log end offset {len(leader.log)}"
        return None

    def effect_shrink_isr(self, s: KafkaPartitionState, l: int, f: int) -> KafkaPartitionState:
        if not self._shrinks_alone(s, l):
            return self._with(s, super().effect_shrink_isr(self._base(s), l, f))
        # The update never reaches the controller: the leader's own copy shrinks, the controller's ISR not.
        servers = list(s.servers)
        leader = servers[l]
        servers[l] = leader._replace(isr=leader.isr[:f] + (False,) + leader.isr[f + 1:])
        acked = self._advance_hwm(servers, l, s.acked)
        return s._replace(servers=tuple(servers), acked=acked)

    def guard_leader_and_isr(self, s: KafkaPartitionState, l: int, r: int) -> str | None:
        refusal = super().guard_leader_and_isr(s, l, r)
        if refusal is None and s.cut[r]:
            return f"{server_name(r)} is cut off from the controller: no LeaderAndIsr request reaches it"
        return refusal

    def effect_leader_and_isr(self, s: KafkaPartitionState, l: int, r: int) -> KafkaPartitionState:
        return self._with(s, super().effect_leader_and_isr(self._base(s), l, r))

    def effect_read(self, s: KafkaPartitionState, r: int) -> KafkaPartitionState:
        return self._with(s, super().effect_read(self._base(s), r))

    def effect_crash(self, s: KafkaPartitionState, c: int) -> KafkaPartitionState:
        return self._with(s, super().effect_crash(self._base(s), c))

    def guard_restart(self, s: KafkaPartitionState, r: int) -> str | None:
        refusal = super().guard_restart(s, r)
        if refusal is None and s.cut[r]:
            return (f"{server_name(r)} is cut off from the controller: it restarts once the partition heals "
                    f"(a restarted broker learns the epoch and leader from the controller)")
        return refusal

    def effect_restart(self, s: KafkaPartitionState, r: int) -> KafkaPartitionState:
        return self._with(s, super().effect_restart(self._base(s), r))

    def effect_flush(self, s: KafkaPartitionState, k: int) -> KafkaPartitionState:
        return self._with(s, super().effect_flush(self._base(s), k))

    def guard_partition(self, s: KafkaPartitionState, k: int) -> str | None:
        return partition_guard(s.cut, s.partitions, self.config.max_partitions)

    def effect_partition(self, s: KafkaPartitionState, k: int) -> KafkaPartitionState:
        cut = tuple(j == k for j in range(self.n))
        base = self._base(s)
        if self.fencing and base.servers[k].alive:
            base = self._expire_session(base, k)
        return self._with(s, base, cut, s.partitions + 1)

    def guard_heal(self, s: KafkaPartitionState) -> str | None:
        return None if any(s.cut) else "the network is not partitioned"

    def effect_heal(self, s: KafkaPartitionState) -> KafkaPartitionState:
        base = self._base(s)
        if self.fencing:
            base = self._reregister(base, s.cut.index(True))
        return self._with(s, base, (False,) * self.n)

    # ------------------------------------------------------------ enumeration
    def actions(self, s: KafkaPartitionState, bounds_hit: set | None = None) -> Iterator[Action]:
        """The Kafka model's actions the cut allows (and, without fencing, a cut-off leader's own
        shrinks), then partition or heal."""
        hit = bounds_hit if bounds_hit is not None else set()
        cut = s.cut
        if any(cut):
            k = cut.index(True)
            for action in super().actions(s, hit):
                name = action[0]
                if name == "elect":
                    if k in action[2]:
                        continue
                elif name == "replicate":
                    if cut[action[1]] != cut[action[2]]:
                        continue
                elif name == "shrink_isr":
                    if action[1] == k:
                        continue  # a cut-off leader's shrinks follow
                elif name in ("leader_and_isr",):
                    if action[2] == k:
                        continue
                elif name == "restart":
                    if action[1] == k:
                        continue
                yield action
            if not self.fencing:
                leader = s.servers[k]
                if leader.alive and leader.role == LEADER:
                    for f in range(self.n):
                        if f != k and leader.isr[f] and (not s.servers[f].alive or leader.match[f] < len(leader.log)):
                            yield ("shrink_isr", k, f)
            yield ("heal",)
            return
        yield from super().actions(s, hit)
        yield from new_partitions(self.n, s.partitions, self.config.max_partitions, hit)
