"""ZAB's inductive invariant: `model/zab.py` at N servers and logs of L entries, epochs and crashes unbounded.

The encoding is `proofs/zab.py`'s with two ghosts kept one slot per index, so that generations
need no bound: the read set (as raft's induction keeps it) and the `acked` set (`proofs/ack_slots.py`),
which also keeps the epoch of the leader that first acknowledged the index (`acked_by`): the epoch
a client was told the entry is committed in, which the seed's argument counts from.

The argument (Junqueira, Reed, Serafini, "Zab: High-performance broadcast for primary-backup
systems", DSN 2011; ZooKeeper's `Leader.lead`/`Learner.syncWithLeader`): an entry acknowledged
in epoch e is held by a quorum whose currentEpoch is at least e; a server whose currentEpoch
is later than e holds it, because it adopted the history of a leader that held it; servers of
the same currentEpoch hold prefixes of one history, the leader's; so fast leader election,
which orders candidates by (currentEpoch, last zxid), elects only a server that holds every
acknowledged entry, and a follower that synchronises with it keeps what its HWM covers.
"""

from __future__ import annotations

import z3

from hwm.model.state import Config
from hwm.model.zab import _ESTABLISHED, ZabState
from hwm.proofs import system_induction
from hwm.proofs.ack_slots import AckSlots
from hwm.proofs.induction import (LATER_HOLDERS, Conjunct, generations_ascend, hwm_is_current,
                                  later_generations_hold_what_a_leader_may_commit)
from hwm.proofs.symbolic import Proof, Sym
from hwm.proofs.encodings import partitioned
from hwm.proofs.zab import ZabCut, ZabEncoding


class ZabInductionEncoding(AckSlots, ZabEncoding):
    """`ZabEncoding` with epochs and crashes unbounded: the `acked` ghost one slot per index."""

    def __init__(self, protocol, servers: int, max_log: int):
        super().__init__(protocol, servers, max_log)

    # The explicit counterpart: a node is (ZabState, acked_by), acked_by the epoch per index (0: none).
    def extra_values(self, state) -> list:
        return []

    def values(self, node) -> list:
        state, by = node
        n = self.n
        return (super().values(state) + [bool(state.synced[l] >> f & 1) for l in range(n) for f in range(n)]
                + [bool(state.synced[l] & _ESTABLISHED) for l in range(n)] + list(state.durable) + list(state.epochs)
                + self.ack_values(state.acked, by))


def acked_by_after(by: tuple, before: ZabState, after: ZabState) -> tuple:
    """The `acked_by` ghost after a step of `ZabModel`: each acknowledged index takes the lowest epoch of the
    live established leaders whose HWM covers the acknowledged entry (`_with`, `AckSlots.acknowledge`),
    and keeps it while no lower one does."""
    if not after.acked:
        return by
    out = list(by)
    for i, g in after.acked:
        for k, server in enumerate(after.servers):
            if (server.role == "leader" and server.alive and after.synced[k] & _ESTABLISHED
                    and i <= min(server.hwm, len(server.log)) and server.log[i - 1] == g
                    and (out[i - 1] == 0 or server.generation < out[i - 1])):
                out[i - 1] = server.generation
    return tuple(out)


# ------------------------------------------------------ the inductive invariant
# Notation: e(k) = currentEpoch (`epochs`), gen(k) = acceptedEpoch (the raft model's generation),
# A(p) = index p+1 acknowledged, with entry ga(p) first acknowledged in epoch ea(p).
def _acked(s: Sym, p: int):
    x = s.extra
    return x["acked"][p], x["acked_gen"][p], x["acked_by"][p]


def _servers(enc) -> range:
    return range(enc.n)


def _agree_below(enc, s, a, b) -> z3.BoolRef:
    """The logs of a and b agree on every index both have."""
    return z3.And([z3.Implies(z3.And(p < s.length[a], p < s.length[b]), s.log[a][p] == s.log[b][p])
                   for p in range(enc.L)])


def _well_formed(enc, s):
    x = s.extra
    parts = []
    for i in _servers(enc):
        parts += [s.gen[i] >= 0, s.length[i] >= 0, s.length[i] <= enc.L, s.hwm[i] >= 0, x["epochs"][i] >= 0,
                  z3.Implies(s.leader[i], z3.And(s.alive[i], s.gen[i] >= 1)), s.match[i][i] == 0,
                  z3.Not(x["synced"][i][i]), z3.Implies(x["established"][i], s.leader[i])]
        parts += [z3.If(p < s.length[i], s.log[i][p] >= 1, s.log[i][p] == 0) for p in range(enc.L)]
        parts += [z3.If(s.leader[i], s.match[i][j] >= 0, s.match[i][j] == 0) for j in _servers(enc)]
        parts += [z3.Implies(x["synced"][i][j], s.leader[i]) for j in _servers(enc)]
    for p in range(enc.L):
        parts.append(z3.If(s.ghost["read"][p], s.ghost["gen"][p] >= 1, s.ghost["gen"][p] == 0))
        a, g, e = _acked(s, p)
        parts.append(z3.If(a, z3.And(g >= 1, e >= g), z3.And(g == 0, e == 0)))
    return z3.And(parts)


def _hwm_within_log(enc, s):
    return z3.And([s.hwm[i] <= s.length[i] for i in _servers(enc)])


def _logged_before_acknowledged(enc, s):
    return z3.And([s.extra["durable"][i] == s.length[i] for i in _servers(enc)])


def _reads_agree(enc, s):
    return z3.Not(s.ghost["conflict"])


def _acks_agree(enc, s):
    return z3.Not(s.extra["acked_conflict"])


def _one_leader_per_epoch(enc, s):
    return z3.Not(enc.one_leader_per_generation(s))


def _generation_on_quorum(enc, s):
    return z3.And([enc.count([s.gen[j] >= s.gen[i] for j in _servers(enc)]) >= enc.quorum for i in _servers(enc)])


def _current_epoch_within_accepted(enc, s):
    e = s.extra["epochs"]
    return z3.And([z3.And(e[i] <= s.gen[i], z3.Implies(s.leader[i], e[i] == s.gen[i])) for i in _servers(enc)])


def _entries_within_epoch(enc, s):
    return z3.And([z3.Implies(p < s.length[i], s.log[i][p] <= s.extra["epochs"][i])
                   for i in _servers(enc) for p in range(enc.L)])


def _log_matching(enc, s):
    return z3.Not(enc.log_matching(s))


def _same_epoch_one_history(enc, s):
    e = s.extra["epochs"]
    return z3.And([z3.Implies(e[a] == e[b], _agree_below(enc, s, a, b))
                   for a in _servers(enc) for b in _servers(enc) if a < b])


def _leader_is_longest_of_its_epoch(enc, s):
    e = s.extra["epochs"]
    return z3.And([z3.Implies(z3.And(s.leader[l], e[k] == s.gen[l]), s.length[k] <= s.length[l])
                   for l in _servers(enc) for k in _servers(enc) if k != l])


def _leader_has_own_entries(enc, s):
    return z3.And([z3.Implies(z3.And(s.leader[l], enc.holds(s, k, p, s.gen[l])), enc.holds(s, l, p, s.gen[l]))
                   for l in _servers(enc) for k in _servers(enc) for p in range(enc.L) if k != l])


def _match_within_log(enc, s):
    return z3.And([s.match[l][f] <= s.length[l] for l in _servers(enc) for f in _servers(enc)])


def _match_means_held(enc, s):
    parts = []
    for l in _servers(enc):
        for f in _servers(enc):
            if l != f:
                current = z3.And(s.leader[l], s.gen[f] == s.gen[l])
                parts += [z3.Implies(z3.And(current, p < s.match[l][f]), enc.holds(s, f, p, s.log[l][p]))
                          for p in range(enc.L)]
                parts.append(z3.Implies(z3.And(current, s.match[l][f] > 0), s.extra["epochs"][f] == s.gen[l]))
                parts.append(z3.Implies(z3.And(s.leader[l], s.match[l][f] > 0), s.gen[f] >= s.gen[l]))
    return z3.And(parts)


def _synced_followers(enc, s):
    x = s.extra
    parts = []
    for l in _servers(enc):
        for f in _servers(enc):
            if l != f:
                prospective = z3.Not(x["established"][l])
                parts.append(z3.Implies(x["synced"][l][f], z3.And(
                    s.alive[f], s.gen[f] == s.gen[l], x["epochs"][f] == s.gen[l],
                    z3.Implies(prospective, z3.And(s.length[f] == s.length[l], s.match[l][f] == s.length[l])))))
    return z3.And(parts)


def _hwm_is_current(enc, s):
    return hwm_is_current(enc, s, leading=lambda l: s.extra["established"][l])


def _hwm_is_acked(enc, s):
    parts = []
    for k in _servers(enc):
        for p in range(enc.L):
            a, g, e = _acked(s, p)
            parts.append(z3.Implies(p < s.hwm[k], z3.And(a, g == s.log[k][p], e <= s.gen[k])))
    return z3.And(parts)


def _reads_are_acked(enc, s):
    return z3.And([z3.Implies(s.ghost["read"][p], z3.And(_acked(s, p)[0], _acked(s, p)[1] == s.ghost["gen"][p]))
                   for p in range(enc.L)])


def _later_epochs_hold_acks(enc, s):
    parts = []
    for p in range(enc.L):
        a, g, e = _acked(s, p)
        parts += [z3.Implies(z3.And(a, s.extra["epochs"][k] > e), enc.holds(s, k, p, g)) for k in _servers(enc)]
    return z3.And(parts)


def _acking_leader_holds_it(enc, s):
    parts = []
    for p in range(enc.L):
        a, g, e = _acked(s, p)
        parts += [z3.Implies(z3.And(a, s.leader[k], s.gen[k] == e), enc.holds(s, k, p, g)) for k in _servers(enc)]
    return z3.And(parts)


# Who must hold what a leader may still commit: raft's kinds, and a server of a later currentEpoch (it
# adopted the history of a later leader, which holds it).
ZAB_LATER_HOLDERS = {**LATER_HOLDERS, "epoch": lambda enc, s, l, c, p: s.extra["epochs"][c] > s.gen[l]}


def _acks_on_quorum(enc, s):
    parts = []
    for p in range(enc.L):
        a, g, e = _acked(s, p)
        held = enc.count([z3.And(s.extra["epochs"][k] >= e, enc.holds(s, k, p, g)) for k in _servers(enc)])
        parts.append(z3.Implies(a, held >= enc.quorum))
    return z3.And(parts)


ZAB_INVARIANT = tuple(Conjunct(*c) for c in (
    ("WellFormed", "ranges; slots past a log's end are 0; followers have no match indexes and no NEWLEADER "
     "acknowledgements, only leaders are established; the read and acked slots are consistent, ea(p) ≥ ga(p)",
     _well_formed),
    ("HwmWithinLog", "hwm(k) ≤ len(k)", _hwm_within_log),
    ("LoggedBeforeAcknowledged", "durable(k) = len(k): every rule logs a proposal before it acknowledges it "
     "(the fix of ZOOKEEPER-3911)", _logged_before_acknowledged),
    ("ReadsAgree", "no index was read with two generations", _reads_agree),
    ("AcksAgree", "no index was acknowledged to clients with two generations", _acks_agree),
    ("OneLeaderPerEpoch", "two leaders have different epochs", _one_leader_per_epoch),
    ("GenerationOnQuorum", "for every server i, #{j : gen(j) ≥ gen(i)} ≥ ⌊N/2⌋+1 (an epoch was proposed to a "
     "quorum)", _generation_on_quorum),
    ("CurrentEpochWithinAccepted", "e(k) ≤ gen(k) (currentEpoch ≤ acceptedEpoch), and a leader's e = gen",
     _current_epoch_within_accepted),
    ("EntriesWithinEpoch", "every entry's generation ≤ its server's currentEpoch", _entries_within_epoch),
    ("GenerationsAscend", "zxids ascend along a log: generations never decrease", generations_ascend),
    ("LogMatching", "two logs with the same (index, generation) agree on every entry before it", _log_matching),
    ("SameEpochOneHistory", "servers of one currentEpoch hold prefixes of one history: their logs agree "
     "wherever both have an entry", _same_epoch_one_history),
    ("LeaderIsLongestOfItsEpoch", "a leader's log is at least as long as any log of its epoch (so the others "
     "are its prefixes)", _leader_is_longest_of_its_epoch),
    ("LeaderHasOwnEntries", "an entry of a leader's generation anywhere is in the leader's log",
     _leader_has_own_entries),
    ("MatchWithinLog", "match(l, f) ≤ len(l)", _match_within_log),
    ("MatchMeansHeld", "for a leader l and f of its generation, f holds l's entries up to match(l, f) and "
     "match(l, f) > 0 ⇒ e(f) = gen(l); match(l, f) > 0 ⇒ gen(f) ≥ gen(l)", _match_means_held),
    ("SyncedFollowers", "f acknowledged l's NEWLEADER ⇒ f is up, gen(f) = e(f) = gen(l); before l is "
     "established, f holds l's whole history and match(l, f) = len(l)", _synced_followers),
    ("HwmIsCurrent", "recomputing an established leader's HWM from its match indexes changes nothing",
     _hwm_is_current),
    ("HwmIsAcked", "an entry under a server's HWM was acknowledged: A(p), ga(p) = log(k)[p] and ea(p) ≤ gen(k)",
     _hwm_is_acked),
    ("ReadsAreAcked", "every read entry is the acknowledged entry at its index", _reads_are_acked),
    ("LaterEpochsHoldAcks", "A(p) ∧ e(k) > ea(p) ⇒ k holds (p, ga(p)): a later epoch's history has it",
     _later_epochs_hold_acks),
    ("AcksOnQuorum", "A(p) ⇒ #{k : e(k) ≥ ea(p) and k holds (p, ga(p))} ≥ ⌊N/2⌋+1", _acks_on_quorum),
    # Needed from five servers on, as raft's fifth-server conjunct (docs/proofs.md, "Five servers").
    ("AckingLeaderHoldsIt", "A(p) ∧ leader(k) ∧ gen(k) = ea(p) ⇒ k holds (p, ga(p)): the leader of the epoch "
     "that acknowledged an entry holds it", _acking_leader_holds_it),
    ("LaterEpochsHoldWhatALeaderMayCommit", "what an established leader may still count committed through its "
     "own entry is held by every later leader, log ending in a later epoch, server of a later currentEpoch, "
     "and server that acknowledged it and moved on", later_generations_hold_what_a_leader_may_commit(
         tuple(ZAB_LATER_HOLDERS), ZAB_LATER_HOLDERS)),
))


class PartitionedZabInductionEncoding(ZabCut, ZabInductionEncoding):
    """With `check_quorum`, partitions unbounded too: a cut or a crash may take a leader's quorum."""


def induction_encoding(protocol, servers: int, max_log: int) -> ZabInductionEncoding:
    # A cut only removes steps unless a flag gives it consequences (check_quorum's step down).
    cls = PartitionedZabInductionEncoding if partitioned(protocol) else ZabInductionEncoding
    return cls(protocol, servers, max_log)


def reachable_nodes(protocol, config: Config, max_states: int = 200_000):
    """Breadth-first, the model's states with the `acked_by` ghost: (node, parent, action), node = (ZabState,
    acked_by)."""
    return system_induction.reachable_nodes(protocol, config, (0,) * config.max_log, acked_by_after, max_states)


def induction_proof(name: str, protocol, *, broken: bool, servers: int = 3, max_log: int = 2, ledger=None) -> Proof:
    """ZAB's induction obligation (epochs and crashes unbounded): `system_induction.induction_proof`."""
    return system_induction.induction_proof(name, protocol, ZAB_INVARIANT, induction_encoding(protocol, servers, max_log),
                                            (0,) * max_log, acked_by_after, broken=broken, servers=servers,
                                            max_log=max_log, ledger=ledger)


__all__ = ["ZabInductionEncoding", "ZAB_INVARIANT", "acked_by_after", "induction_encoding", "induction_proof",
           "reachable_nodes"]
