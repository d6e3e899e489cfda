"""The `acked` ghost one slot per index, for inductive invariants with unbounded generations.

A model that keeps the set of entries acknowledged to clients (ZAB's, Kafka's) is encoded for
bounded model checking with one boolean per (index, generation). Induction has no bound on
generations, so there, as raft's induction keeps the read set, each index has one slot: whether it
was acknowledged, the entry's generation, and the lowest epoch of the leaders that acknowledged it
(the epoch a client was told the entry is committed in; as raft's commit record, the lowest, since at
five servers a leader of an older epoch may count an entry after a later one did, from
acknowledgements of servers that moved on since); a flag is raised when a second, different
entry is acknowledged at an index. While the flag is down the slots are exactly the set; two
entries acknowledged at one index cannot both be on a quorum, so the flag is itself a violation
of AckedWriteNeverLost.
"""

from __future__ import annotations

from typing import Any

import z3

from hwm.proofs.symbolic import Sym


class AckSlots:
    """Mixed into a system's encoding (before it): its `acked` ghost as slots. The encoding calls
    `acknowledge` where its model adds to `acked`."""

    ack_slots = True

    def ack_ghost(self, tag: str) -> dict:
        L = range(self.L)
        return {"acked": [z3.Bool(f"{tag}_acked_{p}") for p in L],
                "acked_gen": [z3.Int(f"{tag}_acked_gen_{p}") for p in L],
                "acked_by": [z3.Int(f"{tag}_acked_by_{p}") for p in L],
                "acked_conflict": z3.Bool(f"{tag}_acked_conflict")}

    def no_acks(self, s: Sym) -> list:
        x = s.extra
        return ([z3.Not(v) for v in x["acked"]] + [v == 0 for v in x["acked_gen"] + x["acked_by"]]
                + [z3.Not(x["acked_conflict"])])

    def acknowledge(self, t: Sym, p: int, condition: z3.BoolRef, generation: Any, epoch: Any) -> None:
        x = t.extra
        was, old = x["acked"][p], x["acked_gen"][p]
        x["acked_conflict"] = z3.Or(x["acked_conflict"], z3.And(condition, was, old != generation))
        first = z3.And(condition, z3.Not(was))
        # A stale leader may acknowledge the entry after a later epoch did: the slot keeps the lowest.
        lower = z3.And(condition, was, old == generation, epoch < x["acked_by"][p])
        x["acked"][p] = z3.Or(was, condition)
        x["acked_gen"][p] = z3.If(first, generation, old)
        x["acked_by"][p] = z3.If(z3.Or(first, lower), epoch, x["acked_by"][p])

    def acked_pairs(self, s: Sym) -> list:
        x = s.extra
        return [(p, x["acked_gen"][p], x["acked"][p]) for p in range(self.L)]

    def acked_entries(self, val, s: Sym) -> frozenset:
        return frozenset((p + 1, val(g)) for p, g, present in self.acked_pairs(s) if val(present))

    def acked_write_never_lost(self, s: Sym) -> z3.BoolRef:
        return z3.Or(s.extra["acked_conflict"], *[
            z3.And(present, self.count([self.holds(s, k, p, g) for k in range(self.n)]) < self.quorum)
            for p, g, present in self.acked_pairs(s)])

    def ack_values(self, acked: frozenset, by: tuple) -> list:
        """The slots' values for an explicit `acked` set and the lowest epochs that acknowledged each index."""
        generations = dict(acked)
        if len(generations) != len(acked):
            raise ValueError("one acked slot per index cannot hold two generations")
        return ([p + 1 in generations for p in range(self.L)] + [generations.get(p + 1, 0) for p in range(self.L)]
                + list(by) + [False])


__all__ = ["AckSlots"]
