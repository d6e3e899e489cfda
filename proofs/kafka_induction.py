"""Kafka's inductive invariant: `model/kafka.py` at N replicas and logs of L entries, epochs and crashes unbounded.

The encoding is `proofs/kafka.py`'s with the read set and the `acked` set one slot per index
(`proofs/ack_slots.py`; Kafka acknowledges only entries of the leader's own epoch, so the epoch that
first acknowledged an index is the entry's own), and the commit record: per offset, the entry the
first leader to raise its HW over it had there and that leader's epoch (`induction.advance_ghost`
computes the same along the explorer's search).

The argument (Kafka's design, "Replication"; KIP-101, KIP-279, KIP-320): a leader raises its HW only
over entries every replica of its ISR copy has fetched, so a committed entry is on every replica of
the controller's ISR, and the controller elects only from the ISR; a follower truncates, after
OffsetsForLeaderEpoch, only where its log and the leader's diverge, and the leader-epoch caches agree,
so no committed entry is truncated. A deposed leader (one the controller's LeaderAndIsr did not reach)
still counts its old ISR copy, but the replica the controller elected was in that copy and never
fetches from it again: the deposed leader's HW stays below that replica's match, which every later
epoch's ISR and leaders hold.
"""

from __future__ import annotations

import z3

from hwm.model.state import Config
from hwm.proofs import system_induction
from hwm.proofs.ack_slots import AckSlots
from hwm.proofs.induction import Conjunct, advance_ghost, generations_ascend, hwm_is_current, no_commits
from hwm.proofs.kafka import KafkaCut, KafkaEncoding
from hwm.proofs.symbolic import Proof, Sym, smin


class KafkaInductionEncoding(AckSlots, KafkaEncoding):
    """`KafkaEncoding` with epochs and crashes unbounded: the `acked` ghost one slot per index, and the
    commit record: per index, the entry the first leader to raise its HW over it had there
    (`committed`, 0 while none did) and that leader's epoch (`commit_by`), with a flag raised if a
    leader later raises its HW over a different entry there (as raft's induction records commits)."""

    more_step_properties = ("AcknowledgedWriteKept",)

    def __init__(self, protocol, servers: int, max_log: int):
        super().__init__(protocol, servers, max_log)

    def fresh(self, tag: str) -> Sym:
        s = super().fresh(tag)
        s.extra.update({"committed": [z3.Int(f"{tag}_committed_{p}") for p in range(self.L)],
                        "commit_by": [z3.Int(f"{tag}_commit_by_{p}") for p in range(self.L)],
                        "commit_conflict": z3.Bool(f"{tag}_commit_conflict")})
        return s

    def init(self, s: Sym) -> z3.BoolRef:
        x = s.extra
        return z3.And(super().init(s), *[v == 0 for v in x["committed"] + x["commit_by"]],
                      z3.Not(x["commit_conflict"]))

    def _advance_hwm(self, t: Sym, l: int) -> None:
        old = t.hwm[l]
        super()._advance_hwm(t, l)
        x = t.extra
        for p in range(self.L):
            counted = z3.And(t.hwm[l] > old, p < t.hwm[l])
            prev, entry = x["committed"][p], t.log[l][p]
            x["commit_conflict"] = z3.Or(x["commit_conflict"], z3.And(counted, prev != 0, prev != entry))
            first = z3.And(counted, prev == 0)
            x["committed"][p] = z3.If(first, entry, prev)
            x["commit_by"][p] = z3.If(first, t.gen[l], x["commit_by"][p])

    # The explicit counterpart: a node is (KafkaState, ghost), the ghost `induction.advance_ghost`'s.
    def extra_values(self, state) -> list:
        n = self.n
        servers = state.servers
        by = [dict(state.acked).get(p + 1, 0) for p in range(self.L)]
        return ([s.in_isr for s in servers] + [s.leader for s in servers] + [s.truncating for s in servers]
                + [bool(s.isr[k]) if s.isr else False for s in servers for k in range(n)]
                + [s.flushed for s in servers] + self.ack_values(state.acked, tuple(by)))

    def values(self, node) -> list:
        state, (records, conflict) = node
        return (super().values(state) + [entry for entry, _ in records] + [by for _, by in records] + [conflict])


def _servers(enc) -> range:
    return range(enc.n)


def _well_formed(enc, s):
    x = s.extra
    parts = []
    for i in _servers(enc):
        parts += [s.gen[i] >= 0, s.length[i] >= 0, s.length[i] <= enc.L, s.hwm[i] >= 0,
                  x["follows"][i] >= 0, x["follows"][i] <= enc.n, s.match[i][i] == 0,
                  z3.Implies(s.leader[i], z3.And(s.alive[i], s.gen[i] >= 1, x["follows"][i] == i + 1,
                                                 z3.Not(x["truncating"][i]), x["isr"][i][i]))]
        parts += [z3.If(p < s.length[i], s.log[i][p] >= 1, s.log[i][p] == 0) for p in range(enc.L)]
        parts += [z3.If(s.leader[i], s.match[i][j] >= 0, s.match[i][j] == 0) for j in _servers(enc)]
        parts += [z3.Implies(z3.Not(s.leader[i]), z3.Not(x["isr"][i][j])) for j in _servers(enc)]
    for p in range(enc.L):
        parts.append(z3.If(s.ghost["read"][p], s.ghost["gen"][p] >= 1, s.ghost["gen"][p] == 0))
        a, g, e = x["acked"][p], x["acked_gen"][p], x["acked_by"][p]
        parts.append(z3.If(a, z3.And(g >= 1, e == g), z3.And(g == 0, e == 0)))
        c, by = x["committed"][p], x["commit_by"][p]
        parts.append(z3.If(c == 0, by == 0, z3.And(c >= 1, c <= by)))
    return z3.And(parts)


def _hwm_within_log(enc, s):
    return z3.And([s.hwm[i] <= s.length[i] for i in _servers(enc)])


def _reads_agree(enc, s):
    return z3.Not(s.ghost["conflict"])


def _acks_agree(enc, s):
    return z3.Not(s.extra["acked_conflict"])


def _entries_within_epoch(enc, s):
    return z3.And([z3.Implies(p < s.length[i], s.log[i][p] <= s.gen[i]) for i in _servers(enc) for p in range(enc.L)])


def _log_matching(enc, s):
    return z3.Not(enc.log_matching(s))


def _leader_has_own_entries(enc, s):
    return z3.And([z3.Implies(z3.And(s.leader[l], enc.holds(s, k, p, s.gen[l])), enc.holds(s, l, p, s.gen[l]))
                   for l in _servers(enc) for k in _servers(enc) for p in range(enc.L) if k != l])


def _fetchers_hold_prefixes(enc, s):
    x = s.extra
    parts = []
    for c in _servers(enc):
        for f in _servers(enc):
            if c != f:
                fetching = z3.And(x["follows"][f] == c + 1, s.gen[f] == s.gen[c], z3.Not(x["truncating"][f]))
                parts.append(z3.Implies(fetching, z3.And(s.length[f] <= s.length[c], *[
                    z3.Implies(p < s.length[f], s.log[f][p] == s.log[c][p]) for p in range(enc.L)])))
    return z3.And(parts)


def _epochs_start_at_one_offset(enc, s):
    parts = []
    for a in _servers(enc):
        for b in _servers(enc):
            for q in range(1, enc.L):
                for p in range(q):
                    # b's entry at q+1 is not the first of its epoch when another log has that epoch earlier.
                    parts.append(z3.Implies(z3.And(q < s.length[b], enc.holds(s, a, p, s.log[b][q])),
                                            s.log[b][q - 1] == s.log[b][q]))
    return z3.And(parts) if parts else z3.BoolVal(True)


def _followed_leads_no_older_epoch(enc, s):
    x = s.extra
    return z3.And([z3.Implies(x["follows"][f] == c + 1, s.gen[c] >= s.gen[f])
                   for c in _servers(enc) for f in _servers(enc) if c != f])


def _deposed_leaders_copy_moved_on(enc, s):
    x = s.extra
    parts = []
    for l in _servers(enc):
        deposed = z3.And(s.leader[l], z3.Or([s.gen[k] > s.gen[l] for k in _servers(enc) if k != l]))
        moved = z3.Or([z3.And(x["isr"][l][j], s.gen[j] > s.gen[l]) for j in _servers(enc) if j != l])
        parts.append(z3.Implies(deposed, moved))
    return z3.And(parts)


def _match_within_log(enc, s):
    return z3.And([s.match[l][f] <= s.length[l] for l in _servers(enc) for f in _servers(enc)])


def _match_means_held(enc, s):
    x = s.extra
    parts = []
    for l in _servers(enc):
        for f in _servers(enc):
            if l != f:
                current = z3.And(s.leader[l], s.gen[f] == s.gen[l])
                parts += [z3.Implies(z3.And(current, p < s.match[l][f]), enc.holds(s, f, p, s.log[l][p]))
                          for p in range(enc.L)]
                parts.append(z3.Implies(z3.And(s.leader[l], s.match[l][f] > 0), s.gen[f] >= s.gen[l]))
                parts.append(z3.Implies(current, x["follows"][f] == l + 1))
    return z3.And(parts)


def _committed(s, p):
    return s.extra["committed"][p] != 0


def _hwm_is_committed(enc, s):
    x = s.extra
    return z3.And([z3.Implies(p < s.hwm[k], z3.And(x["committed"][p] == s.log[k][p], x["commit_by"][p] <= s.gen[k]))
                   for k in _servers(enc) for p in range(enc.L)])


def _acks_are_committed(enc, s):
    x = s.extra
    return z3.And([z3.Implies(x["acked"][p], x["committed"][p] == x["acked_gen"][p]) for p in range(enc.L)])


def _reads_are_committed(enc, s):
    x = s.extra
    return z3.And([z3.Implies(s.ghost["read"][p], x["committed"][p] == s.ghost["gen"][p]) for p in range(enc.L)])


def _isr_holds_commits(enc, s):
    x = s.extra
    return z3.And([z3.Implies(z3.And(_committed(s, p), x["in_isr"][k]), enc.holds(s, k, p, x["committed"][p]))
                   for p in range(enc.L) for k in _servers(enc)])


def _leaders_hold_commits(enc, s):
    x = s.extra
    return z3.And([z3.Implies(z3.And(_committed(s, p), s.leader[l], x["commit_by"][p] <= s.gen[l]),
                              enc.holds(s, l, p, x["committed"][p]))
                   for p in range(enc.L) for l in _servers(enc)])


def _commits_on_quorum(enc, s):
    x = s.extra
    return z3.And([z3.Implies(_committed(s, p), enc.count([z3.And(s.gen[k] >= x["commit_by"][p],
                                                                  enc.holds(s, k, p, x["committed"][p]))
                                                           for k in _servers(enc)]) >= enc.quorum)
                   for p in range(enc.L)])


def _isr_in_leaders_copy(enc, s):
    x = s.extra
    return z3.And([z3.Implies(z3.And(x["in_isr"][k], s.leader[l], s.gen[k] <= s.gen[l]), x["isr"][l][k])
                   for l in _servers(enc) for k in _servers(enc) if k != l])


def _reach(enc, s, l):
    """How far a leader could still raise its HW: not past the match of a member of its ISR copy that
    has moved to a later epoch (it never fetches from l again)."""
    bound = s.length[l]
    for j in _servers(enc):
        if j != l:
            bound = z3.If(z3.And(s.extra["isr"][l][j], s.gen[j] > s.gen[l]), smin(bound, s.match[l][j]), bound)
    # A copy smaller than min.insync.replicas never counts (a deposed leader's copy no longer grows).
    return z3.If(enc._isr_size(s, l) < enc.min_isr, 0, bound)


def _later_epochs_hold_what_a_leader_may_commit(enc, s):
    x = s.extra
    parts = []
    for l in _servers(enc):
        reach = _reach(enc, s, l)
        for k in _servers(enc):
            if k != l:
                later = z3.And(s.leader[l], s.gen[k] > s.gen[l],
                               z3.Or(x["in_isr"][k], s.leader[k], x["isr"][l][k]))
                parts += [z3.Implies(z3.And(later, p < reach), enc.holds(s, k, p, s.log[l][p])) for p in range(enc.L)]
    return z3.And(parts)


KAFKA_INVARIANT = tuple(Conjunct(*c) for c in (
    ("WellFormed", "ranges; slots past a log's end are 0; a leader fetches from itself, is not truncating and is "
     "in its own ISR copy; followers have no match indexes and no ISR copy; the read, acked and commit slots are "
     "consistent", _well_formed),
    ("HwmWithinLog", "hwm(k) ≤ len(k)", _hwm_within_log),
    ("ReadsAgree", "no index was read with two epochs", _reads_agree),
    ("AcksAgree", "no index was acknowledged with two epochs", _acks_agree),
    ("EntriesWithinEpoch", "every entry's epoch ≤ its replica's epoch", _entries_within_epoch),
    ("EpochsAscend", "leader epochs never decrease along a log", generations_ascend),
    ("LogMatching", "two logs with the same (offset, epoch) agree before it", _log_matching),
    ("EpochsStartAtOneOffset", "an epoch's entries start at the same offset in every log (its leader's log end "
     "at its election): the leader-epoch caches agree", _epochs_start_at_one_offset),
    ("LeaderHasOwnEntries", "an entry of a leader's epoch anywhere is in the leader's log", _leader_has_own_entries),
    ("FetchersHoldPrefixes", "a replica that fetches from c in c's epoch and has no truncation pending holds a "
     "prefix of c's log", _fetchers_hold_prefixes),
    ("FollowedLeadsNoOlderEpoch", "a replica follows a replica of its epoch or later (the one that led it)",
     _followed_leads_no_older_epoch),
    ("DeposedLeadersCopyMovedOn", "once a later epoch exists, a member of a leader's ISR copy is in it (the "
     "controller elected it from that ISR)", _deposed_leaders_copy_moved_on),
    ("MatchWithinLog", "match(l, f) ≤ len(l)", _match_within_log),
    ("MatchMeansHeld", "a replica of l's epoch fetches from l and holds l's entries up to match(l, f); "
     "match(l, f) > 0 ⇒ epoch(f) ≥ epoch(l)", _match_means_held),
    ("HwmIsCurrent", "recomputing a leader's HW from its match indexes and ISR copy changes nothing", hwm_is_current),
    ("HwmIsCommitted", "an entry under a replica's HW is the committed one, committed in an epoch ≤ its own",
     _hwm_is_committed),
    ("AcksAreCommitted", "every acknowledged entry is the committed one", _acks_are_committed),
    ("ReadsAreCommitted", "every read entry is the committed one", _reads_are_committed),
    ("IsrHoldsCommits", "every replica of the controller's ISR holds every committed entry", _isr_holds_commits),
    ("LeadersHoldCommits", "a leader of an epoch ≥ an entry's commit epoch holds it", _leaders_hold_commits),
    ("CommitsOnQuorum", "#{k : epoch(k) ≥ the commit epoch, k holds the entry} ≥ a majority", _commits_on_quorum),
    ("IsrInLeadersCopy", "an ISR replica of a leader's epoch or older is in that leader's ISR copy",
     _isr_in_leaders_copy),
    ("LaterEpochsHoldWhatALeaderMayCommit", "an ISR replica, a leader or a member of l's ISR copy of a later epoch "
     "than leader l holds l's entries up to the least match of l's copy members that moved to a later epoch",
     _later_epochs_hold_what_a_leader_may_commit),
))


class PartitionedKafkaInductionEncoding(KafkaCut, KafkaInductionEncoding):
    """On a network that partitions, partitions unbounded too."""


def induction_encoding(protocol, servers: int, max_log: int, cut: bool = True) -> KafkaInductionEncoding:
    """On a network that partitions (`cut`), as Kafka's controller fencing is about: with it, a cut adds steps
    (a session expires, a broker re-registers), so a proof without partitions would not cover them."""
    return (PartitionedKafkaInductionEncoding if cut else KafkaInductionEncoding)(protocol, servers, max_log)


def reachable_nodes(protocol, config: Config, max_states: int = 200_000):
    """Breadth-first, the model's states with the commit record: (node, parent, action), node = (KafkaState,
    `induction.advance_ghost`'s record)."""
    return system_induction.reachable_nodes(protocol, config, no_commits(config.max_log), advance_ghost, max_states)


def induction_proof(name: str, protocol, *, broken: bool, servers: int = 3, max_log: int = 2, ledger=None) -> Proof:
    """Kafka's induction obligation (epochs and crashes unbounded): `system_induction.induction_proof`."""
    return system_induction.induction_proof(name, protocol, KAFKA_INVARIANT,
                                            induction_encoding(protocol, servers, max_log), no_commits(max_log),
                                            advance_ghost, broken=broken, servers=servers, max_log=max_log,
                                            ledger=ledger)


__all__ = ["KafkaInductionEncoding", "KAFKA_INVARIANT", "induction_encoding", "induction_proof", "reachable_nodes"]
