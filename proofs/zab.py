"""The ZAB model (`model/zab.py`) as z3 formulas: the raft encoding plus the synchronisation phase.

`model/zab.py` is normative, as `model/actions.py` is for `proofs/symbolic.py`: each
guard and effect below transcribes one there, and `Encoding.disagreements` compares them
on sampled reachable states (tests/proofs/test_zab_bmc.py). The raft encoding's actions
are reused as ZAB's model reuses the raft model's, with ZAB's additions:

- per server, in `Sym.extra`: `synced[l][f]` (f acknowledged l's NEWLEADER), `established[l]`
  (a quorum did: l may write and broadcast), `durable[k]` (how much of k's log is on disk)
  and `epochs[k]` (currentEpoch);
- the ghost set `acked` of (index, generation) entries acknowledged to clients, one boolean
  per pair (bounded generations: this encoding is for bounded model checking);
- the actions `sync(L, F)` and `persist(F)`; election by fast leader election's order
  (currentEpoch, last zxid) instead of Raft's up-to-date rule.

`ZabCut` puts it on a network that partitions (`model/zab_partition.py`: check-quorum's step down).
"""

from __future__ import annotations

from typing import Any

import z3

from hwm.model.zab import _ESTABLISHED, ZabState
from hwm.model.zab_partition import ZabPartitionState
from hwm.proofs.partition import Partitions
from hwm.proofs.symbolic import Encoding, Sym, quorum_index, smax, smin


class ZabEncoding(Encoding):
    """`model.zab.ZabModel` over `Sym` states with ZAB's fields in `extra`."""

    # The `acked` ghost one slot per index (`proofs/ack_slots.py`, for induction), not one boolean
    # per (index, generation).
    ack_slots = False

    def __init__(self, protocol, servers: int, max_log: int, **bounds):
        super().__init__(protocol, servers, max_log, **bounds)
        if self.ghost_commits or not (self.exact_reads or self.ack_slots):
            raise ValueError("the ZAB encoding is for bounded model checking (bounded generations, no commit ghost)")
        self.ack_before_persist = protocol.zab_ack_before_persist
        pairs = [(a, b) for a in range(servers) for b in range(servers) if a != b]
        self.actions += [("sync", l, f) for l, f in pairs] + [("persist", k) for k in range(servers)]

    # ------------------------------------------------------------------ state
    def fresh(self, tag: str) -> Sym:
        s = super().fresh(tag)
        n, I, B = self.n, self.number, z3.Bool
        s.extra = {
            "synced": [[B(f"{tag}_synced_{l}_{f}") for f in range(n)] for l in range(n)],
            "established": [B(f"{tag}_established_{l}") for l in range(n)],
            "durable": [I(f"{tag}_durable_{k}") for k in range(n)],
            "epochs": [I(f"{tag}_epoch_{k}") for k in range(n)],
        }
        s.extra.update(self.ack_ghost(tag))
        return s

    def ack_ghost(self, tag: str) -> dict:
        """The `acked` ghost: one boolean per (index, generation)."""
        return {"acked": [[z3.Bool(f"{tag}_acked_{p}_{g}") for g in range(self.max_generation + 1)]
                          for p in range(self.L)]}

    def no_acks(self, s: Sym) -> list:
        return [z3.Not(v) for row in s.extra["acked"] for v in row]

    def init(self, s: Sym) -> z3.BoolRef:
        x = s.extra
        return z3.And(super().init(s), *[z3.Not(v) for row in x["synced"] for v in row],
                      *[z3.Not(v) for v in x["established"]], *[v == 0 for v in x["durable"] + x["epochs"]],
                      *self.no_acks(s))

    def bounds(self, s: Sym) -> z3.BoolRef:
        x = s.extra
        return z3.And(super().bounds(s), *[z3.And(d >= 0, d <= self.L) for d in x["durable"]],
                      *[z3.And(e >= 0, e <= self.max_generation) for e in x["epochs"]])

    def extra_values(self, state: ZabState) -> list:
        n = self.n
        return ([bool(state.synced[l] >> f & 1) for l in range(n) for f in range(n)]
                + [bool(state.synced[l] & _ESTABLISHED) for l in range(n)] + list(state.durable)
                + list(state.epochs)
                + [(p + 1, g) in state.acked for p in range(self.L) for g in range(self.max_generation + 1)])

    def concrete(self, model: z3.ModelRef, s: Sym) -> ZabState:
        base = super().concrete(model, s)

        def val(e: Any) -> Any:
            v = model.eval(e, model_completion=True)
            return z3.is_true(v) if z3.is_bool(v) else v.as_long()

        x = s.extra
        synced = tuple(sum(1 << f for f in range(self.n) if val(x["synced"][l][f]))
                       | (_ESTABLISHED if val(x["established"][l]) else 0) for l in range(self.n))
        acked = self.acked_entries(val, s)
        return ZabState(base.servers, base.reads, base.crashes, base.channels, synced,
                        tuple(val(d) for d in x["durable"]), tuple(val(e) for e in x["epochs"]), acked)

    def acked_entries(self, val, s: Sym) -> frozenset:
        """The `acked` set a z3 model assigns to `s` (`val` evaluates a term)."""
        return frozenset((p + 1, g) for p in range(self.L) for g in range(self.max_generation + 1)
                         if val(s.extra["acked"][p][g]))

    # ---------------------------------------------------------------- helpers
    def freshness(self, s: Sym, k: int) -> tuple:
        """Fast leader election's order: currentEpoch, then the last zxid (its epoch, its counter)."""
        return s.extra["epochs"][k], self.last_generation(s, k), s.length[k]

    def votes_for(self, s: Sym, c: int, v: int) -> z3.BoolRef:
        (ec, gc, lc), (ev, gv, lv) = self.freshness(s, c), self.freshness(s, v)
        # theirs > mine refuses the vote (tuples compared in order)
        return z3.Or(ec > ev, z3.And(ec == ev, z3.Or(gc > gv, z3.And(gc == gv, lc >= lv))))

    def _with(self, t: Sym) -> Sym:
        """`ZabModel._with`: every established live leader's entries under its HWM are acknowledged."""
        x = t.extra
        for k in range(self.n):
            counts = z3.And(t.leader[k], t.alive[k], x["established"][k])
            for p in range(self.L):
                self.acknowledge(t, p, z3.And(counts, p < smin(t.hwm[k], t.length[k])), t.log[k][p], t.gen[k])
        return t

    def acknowledge(self, t: Sym, p: int, condition: z3.BoolRef, generation: Any, epoch: Any) -> None:
        """Add (p+1, generation) to the `acked` ghost of `t` when `condition` (a leader of `epoch` acked it)."""
        row = t.extra["acked"][p]
        t.extra["acked"][p] = [z3.Or(row[g], z3.And(condition, generation == g)) for g in range(len(row))]

    def _establish(self, t: Sym, l: int) -> Sym:
        """`ZabModel._establish`: a quorum acknowledged l's NEWLEADER: l commits its history."""
        x = t.extra
        quorum = self.count([x["synced"][l][j] for j in range(self.n) if j != l]) + 1 >= self.quorum
        now = z3.And(z3.Not(x["established"][l]), quorum)
        indexes = [t.length[l] if j == l else t.match[l][j] for j in range(self.n)]
        u = t.copy()
        u.hwm[l] = smax([t.hwm[l], quorum_index(self.protocol.quorum, indexes)])
        u.extra["established"][l] = z3.BoolVal(True)
        return self._choose(now, self._with(u), t)

    def _forget(self, t: Sym, k: int) -> None:
        """Server k follows no one and leads no synchronised followers (its row and its bit cleared)."""
        x = t.extra
        x["synced"] = [[z3.BoolVal(False) if k in (row, f) else x["synced"][row][f] for f in range(self.n)]
                       for row in range(self.n)]
        x["established"][k] = z3.BoolVal(False)

    # ------------------------------------------------------------ the actions
    def _effect_elect(self, s: Sym, c: int, voters: tuple[int, ...]) -> Sym:
        t = super()._effect_elect(s, c, voters)
        x = t.extra
        # Voters join the new epoch: no leader keeps them, and a voter that led is back in phase 1.
        x["synced"] = [[z3.BoolVal(False) if (row in voters or f in voters) else x["synced"][row][f]
                        for f in range(self.n)] for row in range(self.n)]
        x["established"] = [z3.BoolVal(False) if k in voters else x["established"][k] for k in range(self.n)]
        if self.protocol.noop_on_election:
            x["durable"][c] = t.length[c]
        x["epochs"][c] = t.gen[c]
        return self._establish(self._with(t), c)

    def _guard_write(self, s: Sym, l: int) -> z3.BoolRef:
        return z3.And(super()._guard_write(s, l), s.extra["established"][l])

    def _effect_write(self, s: Sym, l: int) -> Sym:
        t = super()._effect_write(s, l)
        t.extra["durable"][l] = t.length[l]
        return self._with(t)

    def _guard_replicate(self, s: Sym, l: int, f: int) -> z3.BoolRef:
        return z3.And(super()._guard_replicate(s, l, f), s.extra["established"][l], s.extra["synced"][l][f])

    def _effect_replicate(self, s: Sym, l: int, f: int) -> Sym:
        t = super()._effect_replicate(s, l, f)
        t.extra["durable"][f] = t.length[f]
        return self._with(t)

    def _effect_read(self, s: Sym, r: int) -> Sym:
        return self._with(super()._effect_read(s, r))

    def _effect_crash(self, s: Sym, c: int) -> Sym:
        t = super()._effect_crash(s, c)
        t.length[c] = smin(t.length[c], s.extra["durable"][c])  # what was only in memory is gone
        self._normalise_log(t, c)
        t.hwm[c] = smin(t.hwm[c], t.length[c])
        self._forget(t, c)
        return self._with(t)

    def _effect_restart(self, s: Sym, r: int) -> Sym:
        t = super()._effect_restart(s, r)
        t.extra["durable"][r] = smin(s.extra["durable"][r], t.length[r])
        return self._with(t)

    def _guard_sync(self, s: Sym, l: int, f: int) -> z3.BoolRef:
        return z3.And(s.alive[l], s.leader[l], s.alive[f], z3.Not(s.extra["synced"][l][f]))

    def _effect_sync(self, s: Sym, l: int, f: int) -> Sym:
        x = s.extra
        # The follower is in a later epoch: the leader learns it is stale and steps down.
        stale = s.copy()
        self._become_follower(stale, l, s.gen[f])
        stale.extra["synced"][l] = [z3.BoolVal(False)] * self.n
        stale.extra["established"][l] = z3.BoolVal(False)
        # DIFF/TRUNC/SNAP: the follower's history becomes the leader's.
        common, agreeing = self.value(0), z3.BoolVal(True)
        for p in range(self.L):
            agreeing = z3.And(agreeing, p < s.length[l], p < s.length[f], s.log[l][p] == s.log[f][p])
            common = z3.If(agreeing, p + 1, common)
        # ZOOKEEPER-3911: the truncation is done, the new proposals only in memory.
        durable = smin(x["durable"][f], common) if self.ack_before_persist else s.length[l]
        t = s.copy()
        t.log[f], t.length[f] = list(s.log[l]), s.length[l]
        t.hwm[f] = smax([s.hwm[f], s.hwm[l]])
        self._become_follower(t, f, s.gen[l])
        t.alive[f] = z3.BoolVal(True)
        # Before the leader is established an ACK of NEWLEADER counts for its whole history.
        t.match[l] = [z3.If(x["established"][l], durable, s.length[l]) if j == f else s.match[l][j]
                      for j in range(self.n)]
        self._forget(t, f)
        t.extra["synced"][l][f] = z3.BoolVal(True)
        t.extra["durable"][f] = durable
        t.extra["epochs"][f] = s.gen[l]
        counting = t.copy()
        self._advance_hwm(counting, l)
        t = self._choose(x["established"][l], self._with(counting), t)
        return self._choose(s.gen[f] > s.gen[l], stale, self._establish(t, l))

    def _guard_persist(self, s: Sym, k: int) -> z3.BoolRef:
        return z3.And(s.alive[k], s.extra["durable"][k] < s.length[k])

    def _effect_persist(self, s: Sym, k: int) -> Sym:
        t = s.copy()
        t.extra["durable"][k] = s.length[k]
        result = t
        # The logged proposals are acknowledged to the (first) established leader it synchronised with.
        for l in range(self.n - 1, -1, -1):
            acking = z3.And(t.extra["synced"][l][k], t.alive[l], t.extra["established"][l])
            u = t.copy()
            u.match[l] = [s.length[k] if j == k else t.match[l][j] for j in range(self.n)]
            self._advance_hwm(u, l)
            result = self._choose(acking, self._with(u), result)
        return result


class ZabCut(Partitions):
    """`model.zab_partition.PartitionedZabModel`: no vote, synchronisation or proposal crosses the cut, and
    with `check_quorum` a leader that no longer reaches a quorum goes back to LOOKING (ZooKeeper's
    Leader.lead, syncLimit), keeping its epoch and history. Mixed in before a ZAB encoding."""

    state_class = ZabPartitionState

    def cut_allows(self, s: Sym, action) -> list:
        name, *args = action
        pairs = [(args[0], v) for v in args[1]] if name == "elect" else [args] if name in ("sync", "replicate") else []
        cut = s.extra["cut"]
        return [cut[a] == cut[b] for a, b in pairs]

    def step_down(self, t: Sym, k: int) -> Sym:
        # Back to LOOKING: it leads no synchronised followers.
        stepped = super().step_down(t, k)
        stepped.extra["synced"][k] = [z3.BoolVal(False)] * self.n
        stepped.extra["established"][k] = z3.BoolVal(False)
        return stepped


class PartitionedZabEncoding(ZabCut, ZabEncoding):
    """ZAB on a network that partitions, for bounded model checking."""


__all__ = ["PartitionedZabEncoding", "ZabCut", "ZabEncoding"]
