"""A network that partitions, over `Sym` states: the cut of model/partition.py for the z3 encodings.

`partition(k)` cuts server k off from every other server, `heal` removes the cut, one cut at a time;
`cut[k]` in `Sym.extra` says k is the isolated one, and `partitions` counts the cuts made when they are
bounded (bounded model checking; induction has them unbounded, as crashes). What crosses the cut is
the system's to say (`cut_allows`: e.g. an action's two servers on one side), and so is what stepping
down forgets (`step_down`) when check-quorum makes a leader that no longer reaches a quorum step down
(`lose_quorum`, after a cut or a crash); a system overrides `_effect_partition` or `_effect_heal` where
they do more (Kafka's controller fencing a cut-off broker). Raft's cut (`RaftCut`, with check-quorum's
refused votes and the lease's election timer) and its invariant with check-quorum and leases
(`LEASE_INVARIANT`) are here, ZAB's and Kafka's cuts beside their encodings. The explicit model is the
system's partitioned one (`model.systems.PARTITIONED`), whose state is the system's plus the cut and the
count (`state_class`).
"""

from __future__ import annotations

from typing import Any

import z3

from hwm.model.partition import PartitionState
from hwm.proofs import system_induction
from hwm.proofs.induction import RAFT_INVARIANT, Conjunct, advance_commit_record, no_commits
from hwm.proofs.symbolic import Encoding, Proof, Sym


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
        """check_quorum (raft's thesis section 6.2, ZooKeeper's syncLimit): after `cut` (a partition, or the
        crash of a leader's majority), every live leader that reaches fewer than a quorum steps down."""
        if not self.protocol.check_quorum:
            return t
        for k in range(self.n):
            t = self._choose(z3.And(t.leader[k], t.alive[k], z3.Not(self.reaches_quorum(t, k, cut))),
                             self.step_down(t, k), t)
        return t

    def step_down(self, t: Sym, k: int) -> Sym:
        """Leader k becomes a follower, keeping its generation, log and HWM (the system's may forget more)."""
        stepped = t.copy()
        stepped.leader[k] = z3.BoolVal(False)
        stepped.match[k] = [self.value(0)] * self.n
        return stepped

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


class RaftCut(Partitions):
    """`model.partition.PartitionedRaftModel`: no vote and no append crosses the cut. With `check_quorum` a
    leader that no longer reaches a quorum steps down, and a server that hears from a live leader refuses
    to vote; with `lease_reads` a server starts an election only when it hears from no live leader of its
    generation or a newer one (its election timer fires only then)."""

    state_class = PartitionState

    def hears_leader(self, s: Sym, k: int) -> z3.BoolRef:
        """`PartitionedRaftModel.hears_leader`: a live leader other than k, on k's side, of a generation k
        accepts."""
        cut = s.extra["cut"]
        return z3.Or([z3.And(s.alive[j], s.leader[j], cut[j] == cut[k], s.gen[j] >= s.gen[k])
                      for j in range(self.n) if j != k])

    def cut_allows(self, s: Sym, action) -> list:
        name, *args = action
        cut = s.extra["cut"]
        if name == "replicate":
            return [cut[args[0]] == cut[args[1]]]
        if name != "elect":
            return []
        c, voters = args
        out = [cut[v] == cut[c] for v in voters]
        if self.protocol.lease_reads:
            out.append(z3.Not(self.hears_leader(s, c)))
        if self.protocol.check_quorum:  # no vote within a leader's lease
            out += [z3.Not(z3.Or(z3.And(s.alive[v], s.leader[v]), self.hears_leader(s, v))) for v in voters if v != c]
        return out


class PartitionedEncoding(RaftCut, Encoding):
    """The raft model on a network that partitions."""


# ------------------------------------------- raft's invariant with check-quorum and leases
# The argument (Raft thesis sections 6.2 and 6.4.1): a newer leader needs a quorum of votes from servers
# that hear from no live leader; with check-quorum a leader that no longer reaches a quorum steps down,
# so while a leader lives, no quorum stops hearing from it and no later generation exists. A lease holder
# is then the newest leader: every committed entry is in its log (leader completeness), the earlier
# generations' before its own entry at or below its HWM, its own generation's below its HWM, since it
# counted them. Each conjunct reads True where its flag is off.
def _leaders_reach_a_quorum(enc, s):
    if not (enc.partitioned and enc.protocol.check_quorum):
        return z3.BoolVal(True)
    return z3.And([z3.Implies(s.leader[l], enc.reaches_quorum(s, l, s.extra["cut"])) for l in range(enc.n)])


def _live_leader_is_newest(enc, s):
    if not enc.protocol.lease_reads:
        return z3.BoolVal(True)
    return z3.And([z3.Implies(s.leader[l], s.gen[j] <= s.gen[l]) for l in range(enc.n) for j in range(enc.n)])


def _leader_hwm_covers_its_commits(enc, s):
    if not enc.protocol.lease_reads:
        return z3.BoolVal(True)
    committed, by = s.ghost["committed"], s.ghost["commit_gen"]
    return z3.And([z3.Implies(z3.And(s.leader[l], committed[p] != 0, by[p] == s.gen[l]), s.hwm[l] > p)
                   for l in range(enc.n) for p in range(enc.L)])


LEASE_INVARIANT = RAFT_INVARIANT + (
    Conjunct("LeadersReachAQuorum", "with check_quorum, a live leader reaches a quorum of live servers on its "
             "side of the cut: it steps down the moment it does not", _leaders_reach_a_quorum),
    Conjunct("LiveLeaderIsNewest", "with lease_reads, no server's generation is later than a live leader's: "
             "a candidate needs a quorum that hears from no live leader", _live_leader_is_newest),
    Conjunct("LeaderHwmCoversItsCommits", "with lease_reads, a leader's HWM covers every index its generation "
             "was the lowest to count committed", _leader_hwm_covers_its_commits),
)


def induction_proof(name: str, protocol, *, broken: bool, servers: int = 3, max_log: int = 2, ledger=None) -> Proof:
    """Raft's induction obligation on a network that partitions (generations, crashes and partitions
    unbounded), with the explorer's breadth-first search for a reachable CTI (`system_induction`)."""
    enc = PartitionedEncoding(protocol, servers, max_log, ghost_commits=True)
    return system_induction.induction_proof(name, protocol, LEASE_INVARIANT, enc, no_commits(max_log),
                                            advance_commit_record, broken=broken, servers=servers, max_log=max_log,
                                            ledger=ledger)


__all__ = ["LEASE_INVARIANT", "PartitionedEncoding", "Partitions", "RaftCut", "induction_proof"]
