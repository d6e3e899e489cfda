"""A network that partitions, over `Sym` states: the cut of model/partition.py for the z3 encodings.

`partition(k)` cuts server k off from every other server, `heal` removes the cut, one cut at a time;
`cut[k]` in `Sym.extra` says k is the isolated one, and `partitions` counts the cuts made when they are
bounded (bounded model checking; induction has them unbounded, as crashes). What crosses the cut is
the system's to say (`cut_allows`: e.g. an action's two servers on one side), and so is what a cut or
a crash does to a leader that no longer reaches a quorum (`lose_quorum`: check-quorum's step down,
`model.zab_partition.PartitionedZabModel._lose_quorum` for ZAB); a system overrides `_effect_partition`
or `_effect_heal` where they do more (Kafka's controller fencing a cut-off broker). The explicit model is the
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
        # A state of the system's model without partitions is one whose network is whole.
        cut = getattr(state, "cut", (False,) * self.n)
        out = list(cut) + ([getattr(state, "partitions", 0)] if self.max_partitions is not None else [])
        return out + super().extra_values(state)

    def concrete(self, model: z3.ModelRef, s: Sym):
        base = super().concrete(model, s)
        cut = tuple(z3.is_true(model.eval(c, model_completion=True)) for c in s.extra["cut"])
        used = (model.eval(s.extra["partitions"], model_completion=True).as_long()
                if self.max_partitions is not None else int(any(cut)))
        return self.state_class(*base, cut, used)

    # ---------------------------------------------------------------- actions
    def cut_allows(self, s: Sym, action) -> list:
        """What the cut asks of `action` besides its own guard (the system's): e.g. its two servers on one
        side."""
        return []

    def lose_quorum(self, t: Sym, cut: list) -> Sym:
        """What `cut` does to a live leader that reaches fewer than a quorum (the system's check-quorum)."""
        return t

    def reaches_quorum(self, t: Sym, k: int, cut: list) -> z3.BoolRef:
        """Server k reaches a quorum of live servers, itself included, on its side of `cut`."""
        return self.count([z3.And(t.alive[j], cut[j] == cut[k]) for j in range(self.n)]) >= self.quorum

    def guard(self, s: Sym, action) -> z3.BoolRef:
        return z3.And([super().guard(s, action)] + self.cut_allows(s, action))

    def effect(self, s: Sym, action) -> Sym:
        t = super().effect(s, action)
        return self.lose_quorum(t, s.extra["cut"]) if action[0] == "crash" else t

    def _guard_partition(self, s: Sym, k: int) -> z3.BoolRef:
        whole = z3.And([z3.Not(c) for c in s.extra["cut"]])
        if self.max_partitions is None:
            return whole
        return z3.And(whole, s.extra["partitions"] < self.max_partitions)

    def _effect_partition(self, s: Sym, k: int) -> Sym:
        t = s.copy()
        t.extra["cut"] = [z3.BoolVal(j == k) for j in range(self.n)]
        if self.max_partitions is not None:
            t.extra["partitions"] = s.extra["partitions"] + 1
        return self.lose_quorum(t, t.extra["cut"])

    def _guard_heal(self, s: Sym) -> z3.BoolRef:
        return z3.Or(s.extra["cut"])

    def _effect_heal(self, s: Sym) -> Sym:
        t = s.copy()
        t.extra["cut"] = [z3.BoolVal(False)] * self.n
        return t


__all__ = ["Partitions"]
