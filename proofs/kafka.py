"""Kafka's replication (`model/kafka.py`) as z3 formulas, for bounded model checking.

`model/kafka.py` is normative, as `model/actions.py` is for `proofs/symbolic.py`: each guard
and effect below transcribes one there, branch by branch, and `Encoding.disagreements`
compares them on sampled reachable states (tests/proofs/test_kafka_bmc.py); every BMC trace is
replayed on `KafkaModel`. The raft encoding's state is reused for what properties see (leader
epoch as the generation, role, alive, log, high watermark, the leader's view of each replica's
log end offset as `match`), with Kafka's fields in `Sym.extra`:

- `in_isr[k]`: the controller's ISR; `isr[l][k]`: the copy leader l counts (false unless a leader);
- `follows[k]`: position + 1 of the leader replica k fetches from (0: none);
- `truncating[k]`: it must find its truncation point before its next fetch;
- `flushed[k]`: the recovery point (log_flush=never; 0 otherwise);
- `acked[p][g]`: the ghost set of entries acks=all producers were told are written.

The actions are `KafkaModel.action_table()`, in its order. The leader-epoch cache is derived
from the log, as in the model, so OffsetsForLeaderEpoch (KIP-101, KIP-279 and its second
round trip) and KIP-320's first attempt are computed on the log slots below. Generations are
bounded (exact read and acknowledgement sets): this encoding serves BMC, and `proofs/kafka_induction.py`
extends it for induction. `KafkaCut` puts either on a network that partitions
(`model/kafka_partition.py`: the controller's fencing of a cut-off broker).
"""

from __future__ import annotations

from typing import Any

import z3

from hwm.model.kafka import KafkaModel, KafkaServer, KafkaState
from hwm.model.kafka_partition import KafkaPartitionState
from hwm.model.state import LEADER, Config
from hwm.proofs.partition import Partitions
from hwm.proofs.symbolic import Encoding, Sym, smax, smin


class KafkaEncoding(Encoding):
    """`model.kafka.KafkaModel` over `Sym` states with Kafka's fields in `extra`."""

    # The `acked` ghost one slot per index (`proofs/ack_slots.py`, for induction), not one boolean
    # per (index, generation).
    ack_slots = False

    def __init__(self, protocol, servers: int, max_log: int, **bounds):
        super().__init__(protocol, servers, max_log, **bounds)
        if self.ghost_commits or not (self.exact_reads or self.ack_slots):
            raise ValueError("the Kafka encoding is for bounded model checking (bounded generations, no commit ghost)")
        # The explicit model fixes the action table and the ISR sizes (min.insync.replicas checked there).
        model = KafkaModel(protocol, Config(servers=servers, max_log=max_log,
                                            max_generation=self.max_generation, max_crashes=self.max_crashes))
        self.actions = model.action_table()
        self.rule = protocol.follower_truncation
        self.unclean = protocol.unclean_election
        self.unflushed = protocol.log_flush == "never"
        self.min_isr = model.min_isr
        self.write_min_isr = model.write_min_isr

    # ------------------------------------------------------------------ state
    def fresh(self, tag: str) -> Sym:
        s = super().fresh(tag)
        n, I, B = self.n, self.number, z3.Bool
        s.extra = {
            "in_isr": [B(f"{tag}_in_isr_{k}") for k in range(n)],
            "follows": [I(f"{tag}_follows_{k}") for k in range(n)],
            "truncating": [B(f"{tag}_truncating_{k}") for k in range(n)],
            "isr": [[B(f"{tag}_isr_{l}_{k}") for k in range(n)] for l in range(n)],
            "flushed": [I(f"{tag}_flushed_{k}") for k in range(n)],
        }
        s.extra.update(self.ack_ghost(tag))
        return s

    def ack_ghost(self, tag: str) -> dict:
        """The `acked` ghost: one boolean per (index, generation)."""
        return {"acked": [[z3.Bool(f"{tag}_acked_{p}_{g}") for g in range(self.max_generation + 1)]
                          for p in range(self.L)]}

    def no_acks(self, s: Sym) -> list:
        return [z3.Not(v) for row in s.extra["acked"] for v in row]

    def acked_pairs(self, s: Sym) -> list:
        """(position, generation, present) triples covering the `acked` ghost."""
        return [(p, g, s.extra["acked"][p][g]) for p in range(self.L) for g in range(self.max_generation + 1)]

    def acknowledge(self, t: Sym, p: int, condition: z3.BoolRef, generation: Any, epoch: Any) -> None:
        """Add (p+1, generation) to the `acked` ghost of `t` when `condition` (a leader of `epoch` acked it)."""
        row = t.extra["acked"][p]
        t.extra["acked"][p] = [z3.Or(row[g], z3.And(condition, generation == g)) for g in range(len(row))]

    def init(self, s: Sym) -> z3.BoolRef:
        """`KafkaModel.initial_state`: every replica alive, in the ISR, following no one."""
        x = s.extra
        return z3.And(super().init(s), *x["in_isr"], *[v == 0 for v in x["follows"] + x["flushed"]],
                      *[z3.Not(v) for v in x["truncating"]], *[z3.Not(v) for row in x["isr"] for v in row],
                      *self.no_acks(s))

    def bounds(self, s: Sym) -> z3.BoolRef:
        x = s.extra
        return z3.And(super().bounds(s), *[z3.And(v >= 0, v <= self.n) for v in x["follows"]],
                      *[z3.And(v >= 0, v <= self.L) for v in x["flushed"]])

    def extra_values(self, state: KafkaState) -> list:
        n = self.n
        servers = state.servers
        return ([s.in_isr for s in servers] + [s.leader for s in servers] + [s.truncating for s in servers]
                + [bool(s.isr[k]) if s.isr else False for s in servers for k in range(n)]
                + [s.flushed for s in servers]
                + [(p + 1, g) in state.acked for p in range(self.L) for g in range(self.max_generation + 1)])

    def concrete(self, model: z3.ModelRef, s: Sym) -> KafkaState:
        base = super().concrete(model, s)

        def val(e: Any) -> Any:
            v = model.eval(e, model_completion=True)
            return z3.is_true(v) if z3.is_bool(v) else v.as_long()

        x = s.extra
        servers = tuple(
            KafkaServer(b.generation, b.role, b.log, b.hwm, b.alive, b.match, val(x["in_isr"][k]),
                        val(x["follows"][k]), val(x["truncating"][k]),
                        tuple(val(v) for v in x["isr"][k]) if b.role == LEADER else (), val(x["flushed"][k]))
            for k, b in enumerate(base.servers))
        acked = frozenset((p + 1, val(g) if not isinstance(g, int) else g) for p, g, present in self.acked_pairs(s)
                          if val(present))
        return KafkaState(servers, base.reads, base.crashes, (), acked)

    # ------------------------------------------------------ the epoch cache
    def _at(self, log: list, index: Any) -> Any:
        """The epoch at 1-based `index` of `log` (0 outside 1..L)."""
        out = self.value(0)
        for p in range(self.L - 1, -1, -1):
            out = z3.If(index == p + 1, log[p], out)
        return out

    def _last(self, log: list, length: Any) -> Any:
        return z3.If(length == 0, self.value(0), self._at(log, length))

    def _end_offset_kip101(self, log: list, length: Any, requested: Any) -> tuple:
        """`end_offset_kip101`: (defined, end). The LEO if `requested` is the latest epoch, else the
        start of the first epoch after it (the first offset holding a larger epoch)."""
        defined, end = z3.BoolVal(False), self.value(0)
        for p in range(self.L - 1, -1, -1):
            later = z3.And(p < length, log[p] > requested)
            defined, end = z3.Or(defined, later), z3.If(later, self.value(p), end)
        latest = z3.And(length > 0, self._last(log, length) == requested)
        return z3.Or(latest, defined), z3.If(latest, length, end)

    def _end_offset_for(self, log: list, length: Any, requested: Any) -> tuple:
        """`end_offset_for`: (found, epoch, end) for the largest epoch at or below `requested`; its end
        is one past the last offset holding an epoch at or below it. Not found: end 0."""
        found, epoch, end = z3.BoolVal(False), self.value(0), self.value(0)
        for p in range(self.L):
            at = z3.And(p < length, log[p] <= requested)
            found, epoch, end = z3.Or(found, at), z3.If(at, log[p], epoch), z3.If(at, self.value(p + 1), end)
        return found, epoch, end

    def truncation_offset(self, follower: list, length: Any, hwm: Any, leader: list, leader_length: Any,
                          depth: int | None = None) -> Any:
        """`truncation_offset(rule, follower[:length], hwm, leader[:leader_length])`."""
        depth = self.L + 1 if depth is None else depth
        zero = self.value(0)
        own_hwm = smin(hwm, length)
        if self.rule == "own-hwm":
            return own_hwm
        if depth == 0:  # each second round trip shortens the follower's log: unreachable below L + 1
            return zero
        requested = self._last(follower, length)
        if self.rule == "leader-epoch":
            defined, end = self._end_offset_kip101(leader, leader_length, requested)
            return z3.If(length == 0, zero, z3.If(defined, smin(end, length), own_hwm))
        found, epoch, end = self._end_offset_for(leader, leader_length, requested)
        other = z3.And(found, epoch != requested)
        own_found, own_epoch, own_end = self._end_offset_for(follower, length, epoch)
        again = z3.And(other, own_found, own_epoch != epoch)  # the follower lacks that epoch too: ask again
        end = z3.If(other, smin(end, own_end), end)
        result = z3.If(again, self.truncation_offset(follower, own_end, hwm, leader, leader_length, depth - 1),
                       smin(end, length))
        if self.rule == "leader-epoch-kip279":
            result = z3.If(found, result, own_hwm)  # 2.0 still answered UNDEFINED here
        return z3.If(length == 0, zero, result)

    def diverged_at(self, follower: list, length: Any, leader: list, leader_length: Any) -> tuple:
        """`diverged_at`: (diverged, the offset to truncate to)."""
        fine = z3.Or(length == 0, z3.And(length <= leader_length,
                                         self._at(leader, length) == self._last(follower, length)))
        to = self.value(0)
        for p in range(self.L):
            same = z3.And(p < length, p < leader_length, follower[p] == leader[p])
            to = z3.If(same, self.value(p + 1), to)
        return z3.Not(fine), to

    # ---------------------------------------------------------------- helpers
    def epoch(self, s: Sym) -> Any:
        """The controller's latest leader epoch."""
        return smax(s.gen)

    def _isr_size(self, s: Sym, l: int) -> Any:
        return self.count([z3.BoolVal(True) if k == l else s.extra["isr"][l][k] for k in range(self.n)])

    def _advance_hwm(self, t: Sym, l: int) -> None:
        """`KafkaModel._advance_hwm` (in place): the minimum LEO over the leader's copy of the ISR when
        it is large enough; the leader's own-epoch entries under the new HW are acknowledged."""
        x = t.extra
        low = t.length[l]
        for k in range(self.n):
            if k != l:
                low = z3.If(x["isr"][l][k], smin(low, t.match[l][k]), low)
        advance = z3.And(self._isr_size(t, l) >= self.min_isr, low > t.hwm[l])
        t.hwm[l] = z3.If(advance, low, t.hwm[l])
        for p in range(self.L):
            self.acknowledge(t, p, z3.And(advance, p < low, t.log[l][p] == t.gen[l]), t.gen[l], t.gen[l])

    def _make_follower(self, t: Sym, k: int, epoch: Any, leader: Any) -> None:
        """`KafkaModel._become_follower` on replica k of `t` (in place)."""
        x = t.extra
        if self.rule == "own-hwm":
            t.length[k] = smin(t.length[k], t.hwm[k])  # before KIP-101: truncate to the high watermark
            self._normalise_log(t, k)
        elif self.rule != "last-fetched-epoch":
            x["truncating"][k] = z3.BoolVal(True)
        t.gen[k] = epoch
        t.leader[k] = z3.BoolVal(False)
        t.hwm[k] = smin(t.hwm[k], t.length[k])
        t.match[k] = [self.value(0)] * self.n
        x["follows"][k] = leader
        x["isr"][k] = [z3.BoolVal(False)] * self.n
        x["flushed"][k] = smin(x["flushed"][k], t.length[k])

    def _receive_leader_and_isr(self, t: Sym, k: int, c: int, epoch: Any) -> Sym:
        """Replica k of `t`, other than the new leader c, receives the LeaderAndIsr request of `epoch`."""
        skips = z3.And(z3.Not(t.leader[k]), t.extra["follows"][k] == c + 1)
        if self.rule == "fenced":
            skips = z3.And(skips, epoch <= t.gen[k] + 1)
        skipped = t.copy()
        skipped.gen[k] = epoch
        followed = t.copy()
        self._make_follower(followed, k, epoch, self.value(c + 1))
        return self._choose(skips, skipped, followed)

    # ------------------------------------------------------------ the actions
    def _guard_elect(self, s: Sym, c: int, voters: tuple[int, ...]) -> z3.BoolRef:
        live_isr = z3.Or([z3.And(s.extra["in_isr"][k], s.alive[k]) for k in range(self.n)])
        eligible = s.extra["in_isr"][c]
        if self.unclean:
            eligible = z3.Or(eligible, z3.Not(live_isr))
        parts = [s.alive[c], z3.Not(s.leader[c]), *[s.alive[v] for v in voters], eligible]
        if self.max_generation is not None:  # None: epochs unbounded (induction)
            parts.append(self.epoch(s) + 1 <= self.max_generation)
        return z3.And(parts)

    def _effect_elect(self, s: Sym, c: int, voters: tuple[int, ...]) -> Sym:
        epoch = self.epoch(s) + 1
        clean = s.extra["in_isr"][c]
        t = s.copy()
        # Clean: the new ISR is the live ISR; unclean: the new leader alone.
        t.extra["in_isr"] = [z3.BoolVal(True) if k == c else z3.And(clean, s.extra["in_isr"][k], s.alive[k])
                             for k in range(self.n)]
        for v in voters:
            if v != c:
                t = self._receive_leader_and_isr(t, v, c, epoch)
        t.gen[c] = epoch
        t.leader[c] = z3.BoolVal(True)
        t.match[c] = [self.value(0)] * self.n
        t.extra["follows"][c] = self.value(c + 1)
        t.extra["truncating"][c] = z3.BoolVal(False)
        t.extra["isr"][c] = list(t.extra["in_isr"])  # the LeaderAndIsr request's ISR: its own copy
        self._advance_hwm(t, c)
        return t

    def _guard_write(self, s: Sym, l: int) -> z3.BoolRef:
        guard = super()._guard_write(s, l)
        if self.write_min_isr:
            guard = z3.And(guard, self._isr_size(s, l) >= self.write_min_isr)  # NOT_ENOUGH_REPLICAS
        return guard

    def _guard_replicate(self, s: Sym, l: int, f: int) -> z3.BoolRef:
        parts = [s.alive[l], s.leader[l], s.alive[f], z3.Not(s.leader[f]), s.extra["follows"][f] == l + 1]
        if self.rule == "fenced":
            parts.append(s.gen[f] == s.gen[l])  # KIP-320: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
        return z3.And(parts)

    def _effect_replicate(self, s: Sym, l: int, f: int) -> Sym:
        x = s.extra
        length = s.length[f]
        if self.rule not in ("own-hwm", "last-fetched-epoch"):
            # OffsetsForLeaderEpoch, then truncate (AbstractFetcherThread.maybeTruncate).
            offset = self.truncation_offset(s.log[f], length, s.hwm[f], s.log[l], s.length[l])
            length = z3.If(x["truncating"][f], offset, length)
        elif self.rule == "last-fetched-epoch":
            diverged, to = self.diverged_at(s.log[f], length, s.log[l], s.length[l])
            length = z3.If(diverged, to, length)  # LOG_TRUNCATION
        length = smin(length, s.length[l])  # OFFSET_OUT_OF_RANGE: truncate to the leader's LEO
        t = s.copy()
        y = t.extra
        y["flushed"][f] = smin(x["flushed"][f], length)
        # The fetch from the follower's LEO appends the leader's entries from there.
        t.log[f] = [z3.If(p < length, s.log[f][p], s.log[l][p]) for p in range(self.L)]
        t.length[f] = s.length[l]
        t.hwm[f] = smax([smin(s.hwm[f], t.length[f]), smin(s.hwm[l], t.length[f])])
        y["truncating"][f] = z3.BoolVal(False)
        t.match[l] = [t.length[f] if j == f else s.match[l][j] for j in range(self.n)]
        # maybeExpandIsr: caught up to the HW; the leader writes the ISR and keeps its copy.
        expand = z3.And(z3.Not(x["in_isr"][f]), t.length[f] >= s.hwm[l], s.gen[l] == self.epoch(s))
        y["in_isr"][f] = z3.Or(x["in_isr"][f], expand)
        y["isr"][l] = [z3.Or(x["isr"][l][k], expand) if k == f else x["isr"][l][k] for k in range(self.n)]
        self._advance_hwm(t, l)
        return t

    def _guard_shrink_isr(self, s: Sym, l: int, f: int) -> z3.BoolRef:
        in_sync = z3.And(s.alive[f], s.match[l][f] >= s.length[l])
        return z3.And(s.alive[l], s.leader[l], s.extra["in_isr"][f], s.gen[l] == self.epoch(s), z3.Not(in_sync))

    def _effect_shrink_isr(self, s: Sym, l: int, f: int) -> Sym:
        t = s.copy()
        t.extra["in_isr"][f] = z3.BoolVal(False)
        t.extra["isr"][l][f] = z3.BoolVal(False)
        self._advance_hwm(t, l)
        return t

    def _guard_leader_and_isr(self, s: Sym, l: int, r: int) -> z3.BoolRef:
        return z3.And(s.alive[l], s.leader[l], s.alive[r], s.gen[r] < s.gen[l])

    def _effect_leader_and_isr(self, s: Sym, l: int, r: int) -> Sym:
        return self._receive_leader_and_isr(s.copy(), r, l, s.gen[l])

    def _effect_crash(self, s: Sym, c: int) -> Sym:
        # The log, the epoch and the checkpointed HW are on disk; the role and the leader's views are lost.
        t = s.copy()
        t.alive[c] = z3.BoolVal(False)
        t.leader[c] = z3.BoolVal(False)
        t.match[c] = [self.value(0)] * self.n
        t.extra["isr"][c] = [z3.BoolVal(False)] * self.n
        if s.crashes is not None:  # None: crashes unbounded (induction)
            t.crashes = s.crashes + 1
        if not self.unflushed:
            return t
        # A power failure: the log keeps its flushed prefix, the HW its checkpoint bounded by the log end.
        x = s.extra
        t.length[c] = x["flushed"][c]
        self._normalise_log(t, c)
        t.hwm[c] = smin(s.hwm[c], t.length[c])
        return self._leave_isr(t, c)

    def _leave_isr(self, t: Sym, k: int) -> Sym:
        """Replica k leaves the controller's ISR, unless it is the last member, and the new ISR reaches the
        (first) live leader of the current epoch that counts k, which counts it: a power failure's rule
        (`KafkaModel.effect_crash`), and a fenced session's (`PartitionedKafkaModel._expire_session`)."""
        x = t.extra
        dropped = z3.And(x["in_isr"][k], z3.Or([x["in_isr"][j] for j in range(self.n) if j != k]))
        u = t.copy()
        u.extra["in_isr"][k] = z3.BoolVal(False)
        result = u
        for j in range(self.n - 1, -1, -1):
            if j == k:
                continue
            counts = z3.And(t.alive[j], t.leader[j], t.gen[j] == self.epoch(t), x["isr"][j][k])
            v = u.copy()
            v.extra["isr"][j][k] = z3.BoolVal(False)
            self._advance_hwm(v, j)
            result = self._choose(counts, v, result)
        return self._choose(dropped, result, t)

    def _guard_flush(self, s: Sym, k: int) -> z3.BoolRef:
        # Offered only while a crash is left (`KafkaModel.guard_flush`); with crashes unbounded, always.
        left = z3.BoolVal(True) if s.crashes is None else s.crashes < self.max_crashes
        return z3.And(s.alive[k], s.extra["flushed"][k] < s.length[k], left)

    def _effect_flush(self, s: Sym, k: int) -> Sym:
        t = s.copy()
        t.extra["flushed"][k] = s.length[k]
        return t

    def _current_leader(self, s: Sym, other_than: int) -> Any:
        """What the controller tells a replica that (re)registers: position + 1 of the (first) live leader of
        the current epoch other than `other_than`, 0 if none."""
        epoch = self.epoch(s)
        leader = self.value(0)
        for k in range(self.n - 1, -1, -1):
            if k != other_than:
                leader = z3.If(z3.And(s.alive[k], s.leader[k], s.gen[k] == epoch), self.value(k + 1), leader)
        return leader

    def _effect_restart(self, s: Sym, r: int) -> Sym:
        # The controller sends the current epoch and its live leader (the first, if any).
        t = s.copy()
        t.alive[r] = z3.BoolVal(True)
        self._make_follower(t, r, self.epoch(s), self._current_leader(s, r))
        return t

    # ---------------------------------------------------------- properties
    def acknowledged_write_kept(self, s: Sym, t: Sym) -> z3.BoolRef:
        """Violation of AcknowledgedWriteKept on s -> t: a newly elected leader lacks an acknowledged entry."""
        out = []
        for i in range(self.n):
            elected = z3.And(t.leader[i], t.alive[i],
                             z3.Or(z3.Not(s.leader[i]), s.gen[i] != t.gen[i], z3.Not(s.alive[i])))
            for p, g, present in self.acked_pairs(s):
                out.append(z3.And(elected, present, z3.Not(self.holds(t, i, p, g))))
        return z3.Or(out)

    def violation(self, name: str, s: Sym, t: Sym) -> z3.BoolRef:
        if name == "AcknowledgedWriteKept":
            return self.acknowledged_write_kept(s, t)
        return super().violation(name, s, t)


class KafkaCut(Partitions):
    """`model.kafka_partition.PartitionedKafkaModel`: a cut-off broker neither fetches across the cut nor
    hears from the controller (no election, LeaderAndIsr request or restart reaches it). With
    `controller_fencing` its session expires (it leaves the ISR unless it is the last member, and the
    current leader counts the smaller ISR), a cut-off leader cannot shrink its ISR, and on healing the
    broker re-registers and learns the current epoch and leader. Without it, a cut-off leader shrinks the
    ISR copy it counts on its own. Mixed in before a Kafka encoding."""

    state_class = KafkaPartitionState

    def cut_allows(self, s: Sym, action) -> list:
        name, *args = action
        cut = s.extra["cut"]
        if name == "elect":
            return [z3.Not(cut[v]) for v in args[1]]
        if name == "replicate":
            return [cut[args[0]] == cut[args[1]]]
        if name == "leader_and_isr":
            return [z3.Not(cut[args[1]])]
        if name == "restart":
            return [z3.Not(cut[args[0]])]
        return []

    def _guard_shrink_isr(self, s: Sym, l: int, f: int) -> z3.BoolRef:
        cut = s.extra["cut"][l]
        if self.protocol.controller_fencing:  # its ISR update cannot reach the controller
            return z3.And(z3.Not(cut), super()._guard_shrink_isr(s, l, f))
        # Without fencing a cut-off leader shrinks its own copy, with no controller to ask.
        alone = z3.And(s.alive[l], s.leader[l], s.extra["isr"][l][f],
                       z3.Not(z3.And(s.alive[f], s.match[l][f] >= s.length[l])))
        return z3.If(cut, alone, super()._guard_shrink_isr(s, l, f))

    def _effect_shrink_isr(self, s: Sym, l: int, f: int) -> Sym:
        if self.protocol.controller_fencing:
            return super()._effect_shrink_isr(s, l, f)
        alone = s.copy()  # the controller's ISR keeps f
        alone.extra["isr"][l][f] = z3.BoolVal(False)
        self._advance_hwm(alone, l)
        return self._choose(s.extra["cut"][l], alone, super()._effect_shrink_isr(s, l, f))

    def _reregister(self, s: Sym, k: int) -> Sym:
        """`PartitionedKafkaModel._reregister`: a live broker that led while cut off, or missed an epoch,
        becomes a follower of the current epoch and its leader, unless it is still the controller's leader."""
        epoch, leader = self.epoch(s), self._current_leader(s, k)
        current = z3.And(z3.Not(s.leader[k]), s.gen[k] == epoch)
        still = z3.And(s.gen[k] == epoch, leader == 0, s.extra["in_isr"][k])
        t = s.copy()
        self._make_follower(t, k, epoch, leader)
        return self._choose(z3.Or(z3.Not(s.alive[k]), current, still), s, t)

    def _effect_partition(self, s: Sym, k: int) -> Sym:
        t = super()._effect_partition(s, k)
        if not self.protocol.controller_fencing:
            return t
        return self._choose(s.alive[k], self._leave_isr(t, k), t)  # its session expires

    def _effect_heal(self, s: Sym) -> Sym:
        t = super()._effect_heal(s)
        if not self.protocol.controller_fencing:
            return t
        for k in range(self.n):
            t = self._choose(s.extra["cut"][k], self._reregister(t, k), t)
        return t


class PartitionedKafkaEncoding(KafkaCut, KafkaEncoding):
    """Kafka on a network that partitions, for bounded model checking."""


__all__ = ["KafkaCut", "KafkaEncoding", "PartitionedKafkaEncoding"]
