"""A network that partitions, over `Sym` states: the cut of model/partition.py for the z3 encodings.

`partition(k)` cuts server k off from every other server, `heal` removes the cut, one cut at a time;
`cut[k]` in `Sym.extra` says k is the isolated one, and `partitions` counts the cuts made when they are
bounded (bounded model checking; induction has them unbounded, as crashes). What crosses the cut is
the system's to say (`same_side`: the pairs of servers an action needs on one side), and so is what a
cut or a crash does to a leader that no longer reaches a quorum (`lose_quorum`: check-quorum's step
down, `model.zab_partition.PartitionedZabModel._lose_quorum` for ZAB). The explicit model is the
system's partitioned one (`model.systems.PARTITIONED`), whose state is the system's plus the cut and
the count (`state_class`).
"""

from __future__ import annotations

from typing import Any

import z3

from hwm.proofs.symbolic import Sym


class Partitions:
    """Mixed in before a system's encoding: the cut, `partition(k)` and `heal`, and the cut's guards."""

    # The partitioned model's state class: the system's state fields, then `cut` and `partitions`.
    state_class: Any = None
    partitioned = True

    def __init__(self, protocol, servers: int, max_log: int, *, max_partitions: int | None = None, **bounds):
        super().__init__(protocol, servers, max_log, **bounds)
        # None: unbounded (induction); a bound needs crashes bounded too (bounded model checking).
        self.max_partitions = max_partitions if self.max_crashes is not None else None
        self.actions += [("partition", k) for k in range(self.n)] + [("heal",)]

    # ------------------------------------------------------------------ state
    def fresh(self, tag: str) -> Sym:
        s = super().fresh(tag)
        # First in `extra`, so that `extra_values` can put them first whatever the system appends.
        head = {"cut": [z3.Bool(f"{tag}_cut_{k}") for k in range(self.n)]}
        if self.max_partitions is not None:
            head["partitions"] = self.number(f"{tag}_partitions")
        s.extra = {**head, **s.extra}
        return s

    def init(self, s: Sym) -> z3.BoolRef:
        parts = [super().init(s)] + [z3.Not(c) for c in s.extra["cut"]]
        if self.max_partitions is not None:
            parts.append(s.extra["partitions"] == 0)
        return z3.And(parts)

    def bounds(self, s: Sym) -> z3.BoolRef:
        if self.max_partitions is None:
            return super().bounds(s)
        used = s.extra["partitions"]
        return z3.And(super().bounds(s), used >= 0, used <= self.max_partitions)

    def extra_values(self, state) -> list:
        out = list(state.cut) + ([state.partitions] if self.max_partitions is not None else [])
        return out + super().extra_values(state)

    def concrete(self, model: z3.ModelRef, s: Sym):
        base = super().concrete(model, s)
        cut = tuple(z3.is_true(model.eval(c, model_completion=True)) for c in s.extra["cut"])
        used = (model.eval(s.extra["partitions"], model_completion=True).as_long()
                if self.max_partitions is not None else int(any(cut)))
        return self.state_class(*base, cut, used)

    # ---------------------------------------------------------------- actions
    def same_side(self, s: Sym, action) -> list[tuple[int, int]]:
        """The pairs of servers `action` needs on one side of the cut (the system's)."""
        return []

    def lose_quorum(self, t: Sym, cut: list) -> Sym:
        """What `cut` does to a live leader that reaches fewer than a quorum (the system's check-quorum)."""
        return t

    def reaches_quorum(self, t: Sym, k: int, cut: list) -> z3.BoolRef:
        """Server k reaches a quorum of live servers, itself included, on its side of `cut`."""
        return self.count([z3.And(t.alive[j], cut[j] == cut[k]) for j in range(self.n)]) >= self.quorum

    def guard(self, s: Sym, action) -> z3.BoolRef:
        name = action[0]
        cut = s.extra["cut"]
        if name == "partition":
            whole = z3.And([z3.Not(c) for c in cut])
            if self.max_partitions is None:
                return whole
            return z3.And(whole, s.extra["partitions"] < self.max_partitions)
        if name == "heal":
            return z3.Or(cut)
        return z3.And([super().guard(s, action)] + [cut[a] == cut[b] for a, b in self.same_side(s, action)])

    def effect(self, s: Sym, action) -> Sym:
        name = action[0]
        if name == "partition":
            t = s.copy()
            t.extra["cut"] = [z3.BoolVal(j == action[1]) for j in range(self.n)]
            if self.max_partitions is not None:
                t.extra["partitions"] = s.extra["partitions"] + 1
            return self.lose_quorum(t, t.extra["cut"])
        if name == "heal":
            t = s.copy()
            t.extra["cut"] = [z3.BoolVal(False)] * self.n
            return t
        t = super().effect(s, action)
        return self.lose_quorum(t, s.extra["cut"]) if name == "crash" else t


__all__ = ["Partitions"]
