"""Inductive invariants for the rpc model with unbounded generations, checked with z3.

The state is `proofs_symbolic`'s (N servers, logs of at most L entries,
generations and crashes unbounded), plus two ghost variables that record
history the invariant needs and the model does not keep:

- the read set, one slot per index (see `proofs_symbolic`);
- the commit record: for each index, the entry the first leader to count it as
  committed had there (`committed[p]`, 0 while none did) and the lowest generation
  of the leaders that counted it (`commit_gen[p]`: with five servers a leader may
  count an index after a leader of a later generation did), with a flag raised if
  a leader later counts a different entry at the same index.

`Inv` is a conjunction of named conjuncts. IndInit checks `Init ⇒ Inv`; IndNext
checks `Inv ∧ action ⇒ Inv'` for every action of the model separately; and the
safety check shows `Inv ∧ action ⇒` no step violates ReadNeverTruncated, HwmNeverTruncated or
ReadNeverLost and `Inv ⇒` the state properties of the catalogue. When IndNext
fails, the counterexample to induction (CTI) is printed as a pre-state, an
action and a post-state, and the breadth-first explorer is asked whether the
pre-state is reachable (generations compared up to an order-preserving
renaming, see `shape`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from itertools import permutations
from typing import Callable

import z3

from hwm.model.actions import Model
from hwm.model.raft import RaftModel
from hwm.checker.report import reconstruct
from hwm.model.encoding import fingerprint, fingerprint_bytes
from hwm.checker.engine import CheckOptions, Search, Visitor
from hwm.proofs.progress import UNDECIDED, Ledger, Undecided, ledger_or_new
from hwm.proofs.symbolic import Encoding, Proof, Sym, action_name, checked_properties
from hwm.model.state import Config, Server, State, initial_state
from hwm.properties.catalogue import violations
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import describe_server, server_name


@dataclass(frozen=True)
class Conjunct:
    name: str
    meaning: str
    formula: Callable[[Encoding, Sym], z3.BoolRef]


def _servers(enc: Encoding) -> range:
    return range(enc.n)


def _positions(enc: Encoding) -> range:
    return range(enc.L)


def _all(parts) -> z3.BoolRef:
    parts = list(parts)
    return z3.And(parts) if parts else z3.BoolVal(True)


def _committed(s: Sym, p: int) -> z3.BoolRef:
    return s.ghost["committed"][p] != 0


def later(enc: Encoding, s: Sym, c: int, p: int) -> z3.BoolRef:
    """Server c's log is at least as up to date as (commit generation of index p+1, length p+1).

    Such a log could only have been written by leaders elected after the commit, or
    by the committing leader itself, so it must hold the committed entry.
    """
    last, cg = enc.last_generation(s, c), s.ghost["commit_gen"][p]
    return z3.Or(last > cg, z3.And(last == cg, s.length[c] > p))


# --------------------------------------------------------------- conjuncts
def _well_formed(enc: Encoding, s: Sym) -> z3.BoolRef:
    parts = []
    for i in _servers(enc):
        parts += [s.gen[i] >= 0, s.length[i] >= 0, s.length[i] <= enc.L, s.hwm[i] >= 0,
                  z3.Implies(s.leader[i], z3.And(s.alive[i], s.gen[i] >= 1)), s.match[i][i] == 0]
        for p in _positions(enc):
            parts.append(z3.If(p < s.length[i], s.log[i][p] >= 1, s.log[i][p] == 0))
        for j in _servers(enc):
            parts.append(z3.If(s.leader[i], s.match[i][j] >= 0, s.match[i][j] == 0))
    for p in _positions(enc):
        parts.append(z3.If(s.ghost["read"][p], s.ghost["gen"][p] >= 1, s.ghost["gen"][p] == 0))
        cl, cg = s.ghost["committed"][p], s.ghost["commit_gen"][p]
        parts.append(z3.If(cl == 0, cg == 0, z3.And(cl >= 1, cl <= cg)))
    return _all(parts)


def _hwm_within_log(enc, s):
    return _all(s.hwm[i] <= s.length[i] for i in _servers(enc))


def _reads_agree(enc, s):
    return z3.Not(s.ghost["conflict"])


def _one_commit_per_index(enc, s):
    return z3.Not(s.ghost["commit_conflict"])


def _one_leader_per_generation(enc, s):
    return z3.Not(enc.one_leader_per_generation(s))


def _entries_within_generation(enc, s):
    return _all(z3.Implies(p < s.length[i], s.log[i][p] <= s.gen[i]) for i in _servers(enc) for p in _positions(enc))


def generations_ascend(enc, s):
    """Generations (ZAB's epochs, Kafka's leader epochs) never decrease along any log: every system's
    invariant has this conjunct."""
    return _all(z3.Implies(p + 1 < s.length[i], s.log[i][p] <= s.log[i][p + 1])
                for i in _servers(enc) for p in range(enc.L - 1))


def _generation_on_quorum(enc, s):
    return _all(enc.count([s.gen[j] >= s.gen[i] for j in _servers(enc)]) >= enc.quorum for i in _servers(enc))


def _leader_has_own_entries(enc, s):
    return _all(z3.Implies(z3.And(s.leader[i], enc.holds(s, j, p, s.gen[i])), enc.holds(s, i, p, s.gen[i]))
                for i in _servers(enc) for j in _servers(enc) for p in _positions(enc) if i != j)


def _log_matching(enc, s):
    parts = []
    for a in _servers(enc):
        for b in _servers(enc):
            if a < b:
                for p in _positions(enc):
                    same = z3.And(p < s.length[a], p < s.length[b], s.log[a][p] == s.log[b][p])
                    parts.append(z3.Implies(same, _all(s.log[a][r] == s.log[b][r] for r in range(p))))
    return _all(parts)


def _match_within_log(enc, s):
    return _all(s.match[i][j] <= s.length[i] for i in _servers(enc) for j in _servers(enc))


def _match_means_held(enc, s):
    parts = []
    for i in _servers(enc):
        for j in _servers(enc):
            if i != j:
                current = z3.And(s.leader[i], s.gen[j] == s.gen[i])
                for p in _positions(enc):
                    parts.append(z3.Implies(z3.And(current, p < s.match[i][j]), enc.holds(s, j, p, s.log[i][p])))
    return _all(parts)


def _match_only_from_current(enc, s):
    return _all(z3.Implies(z3.And(s.leader[i], s.match[i][j] > 0), s.gen[j] >= s.gen[i])
                for i in _servers(enc) for j in _servers(enc) if i != j)


def hwm_is_current(enc, s, leading=None):
    """Recomputing a leader's HWM from its match indexes would not change it. `leading(i)`: whose HWM is
    the leader's rule's (ZAB: an established leader's); by default every leader's."""
    parts = []
    for i in _servers(enc):
        t = s.copy()
        enc._advance_hwm(t, i)
        parts.append(z3.Implies(s.leader[i] if leading is None else leading(i), t.hwm[i] == s.hwm[i]))
    return _all(parts)


def _hwm_is_committed(enc, s):
    return _all(z3.Implies(p < s.hwm[i], z3.And(_committed(s, p), s.ghost["committed"][p] == s.log[i][p],
                                                s.gen[i] >= s.ghost["commit_gen"][p]))
                for i in _servers(enc) for p in _positions(enc))


def _reads_are_committed(enc, s):
    return _all(z3.Implies(s.ghost["read"][p], s.ghost["committed"][p] == s.ghost["gen"][p]) for p in _positions(enc))


def _later_logs_hold_commits(enc, s):
    return _all(z3.Implies(z3.And(_committed(s, p), later(enc, s, c, p)), enc.holds(s, c, p, s.ghost["committed"][p]))
                for c in _servers(enc) for p in _positions(enc))


def _commits_on_quorum(enc, s):
    return _all(z3.Implies(_committed(s, p), enc.count([later(enc, s, c, p) for c in _servers(enc)]) >= enc.quorum)
                for p in _positions(enc))


def _leaders_after_commit_are_later(enc, s):
    return _all(z3.Implies(z3.And(_committed(s, p), s.leader[c], s.gen[c] >= s.ghost["commit_gen"][p]),
                           later(enc, s, c, p))
                for c in _servers(enc) for p in _positions(enc))


def may_commit(enc: Encoding, s: Sym, l: int, p: int) -> z3.BoolRef:
    """Leader l may yet count index p+1 as committed through its own entry there: the entry is of l's
    generation (the current-generation rule) and the servers that acknowledged it, with those still
    at l's generation or older (they may acknowledge it later), make a quorum. A server that moved
    to a later generation without acknowledging never will: l steps down on its reply."""
    may_acknowledge = [z3.Or(s.gen[j] <= s.gen[l], s.match[l][j] > p) for j in _servers(enc) if j != l]
    return z3.And(s.leader[l], enc.holds(s, l, p, s.gen[l]), 1 + enc.count(may_acknowledge) >= enc.quorum)


# Who must hold what leader l may still commit at index p+1 (each is needed at five servers).
LATER_HOLDERS: dict[str, Callable] = {
    "leader": lambda enc, s, l, c, p: z3.And(s.leader[c], s.gen[c] > s.gen[l]),
    "log": lambda enc, s, l, c, p: enc.last_generation(s, c) > s.gen[l],
    "acknowledged": lambda enc, s, l, c, p: z3.And(s.gen[c] > s.gen[l], s.match[l][c] > p),
}


def later_generations_hold_what_a_leader_may_commit(holders=tuple(LATER_HOLDERS), table=LATER_HOLDERS) -> Callable:
    """The conjunct's formula, over the servers `holders` names (in `table`: `LATER_HOLDERS`, or a system's
    with more kinds, as ZAB's servers of a later currentEpoch)."""
    # Leader Completeness (Raft §5.4.3) for a commit not counted yet: a leader of a later generation was
    # elected by a quorum, which meets every quorum that may still count l's entry in a server that had
    # acknowledged it before it voted (after voting it would refuse l), so the new leader's log was at
    # least as up to date as one holding the entry. Logs written since by such leaders, and the
    # acknowledgements that moved on with their servers, still hold it.
    def formula(enc, s):
        parts = []
        for l in _servers(enc):
            for p in _positions(enc):
                mc = may_commit(enc, s, l, p)
                parts += [z3.Implies(z3.And(mc, z3.Or([table[h](enc, s, l, c, p) for h in holders])),
                                     enc.holds(s, c, p, s.gen[l]))
                          for c in _servers(enc) if c != l]
        return _all(parts)
    return formula


RAFT_INVARIANT: tuple[Conjunct, ...] = (
    Conjunct("WellFormed", "ranges; slots past a log's end are 0; followers have no match indexes; "
             "the ghost records are consistent", _well_formed),
    Conjunct("HwmWithinLog", "hwm(i) ≤ len(i)", _hwm_within_log),
    Conjunct("ReadsAgree", "no index was read with two generations", _reads_agree),
    Conjunct("OneCommitPerIndex", "no leader counts a different entry at an index another leader committed",
             _one_commit_per_index),
    Conjunct("OneLeaderPerGeneration", "two live leaders have different generations", _one_leader_per_generation),
    Conjunct("EntriesWithinGeneration", "every entry's generation ≤ its server's generation",
             _entries_within_generation),
    Conjunct("GenerationsAscend", "generations never decrease along a log", generations_ascend),
    Conjunct("GenerationOnQuorum", "for every server i, #{j : gen(j) ≥ gen(i)} ≥ ⌊N/2⌋+1",
             _generation_on_quorum),
    Conjunct("LeaderHasOwnEntries", "an entry of a leader's generation anywhere is in the leader's log",
             _leader_has_own_entries),
    Conjunct("LogMatching", "two logs with the same (index, generation) agree on every entry before it",
             _log_matching),
    Conjunct("MatchWithinLog", "a leader's match index for j ≤ its own length", _match_within_log),
    Conjunct("MatchMeansHeld", "if leader i and j share a generation, j holds i's entries up to match(i, j)",
             _match_means_held),
    Conjunct("MatchOnlyFromCurrent", "match(i, j) > 0 ⇒ gen(j) ≥ gen(i)", _match_only_from_current),
    Conjunct("HwmIsCurrent", "recomputing a leader's HWM from its match indexes changes nothing "
             "(it was recomputed whenever they changed)", hwm_is_current),
    Conjunct("HwmIsCommitted", "entries at or below a server's HWM are the committed ones, and the server's "
             "generation ≥ their commit generation", _hwm_is_committed),
    Conjunct("ReadsAreCommitted", "every read entry is the committed entry at its index", _reads_are_committed),
    Conjunct("LaterLogsHoldCommits", "a log at least as up to date as (commit generation, index) holds the "
             "committed entry", _later_logs_hold_commits),
    Conjunct("CommitsOnQuorum", "for each committed index, a majority of logs is at least that up to date",
             _commits_on_quorum),
    Conjunct("LeadersAfterCommitAreLater", "a leader whose generation ≥ a commit generation has a log at least "
             "that up to date", _leaders_after_commit_are_later),
    Conjunct("LaterGenerationsHoldWhatALeaderMayCommit", "if leader l may still commit its own entry at an "
             "index (those that acknowledged it, or may yet, make a quorum), every leader of a later generation, "
             "every log ending in a later generation and every server that acknowledged it and moved on holds it",
             later_generations_hold_what_a_leader_may_commit()),
)


# ------------------------------------------------------------ the ghost, concretely
# Per index: (committed generation, commit generation), 0s while uncommitted; and the conflict flag.
Ghost = tuple


def no_commits(max_log: int) -> Ghost:
    return (((0, 0),) * max_log, False)


def advance_ghost(ghost: Ghost, before: State, after: State, *, lowest: bool = False) -> Ghost:
    """The commit record after a step of the explicit model: per index the entry and generation of the
    first leader to count it (Kafka's record), or with `lowest` the lowest generation of the leaders that
    counted it (raft's, what `Encoding._advance_hwm` records)."""
    records, conflict = ghost
    records = list(records)
    for b, a in zip(before.servers, after.servers):
        if a.role == "leader" and a.alive and a.hwm > b.hwm:
            for p in range(min(a.hwm, len(records))):
                entry = a.log[p] if p < len(a.log) else 0
                if records[p][0] == 0:
                    records[p] = (entry, a.generation)
                elif records[p][0] != entry:
                    conflict = True
                elif lowest and a.generation < records[p][1]:
                    records[p] = (entry, a.generation)
    return (tuple(records), conflict)


def advance_commit_record(ghost: Ghost, before: State, after: State) -> Ghost:
    """Raft's commit record after a step: the entry the first leader counted, the lowest generation that
    counted it. With five servers a leader may count an index after a leader of a later generation did,
    from acknowledgements of servers that have moved on since."""
    return advance_ghost(ghost, before, after, lowest=True)


def describe_ghost(ghost: Ghost) -> str:
    records, conflict = ghost
    shown = [f"{p + 1}@g{g}(by g{cg})" for p, (g, cg) in enumerate(records) if g]
    text = ("committed " + " ".join(shown)) if shown else ""
    return text + (" COMMIT CONFLICT" if conflict else "")


def describe_state(state: State, ghost: Ghost | None = None) -> str:
    """Per server `S1 leader g3 log=[1,3] hwm=2 match=[0,2,1]`, then the reads and the commit record.
    Another system's state without the commit ghost describes itself (BookKeeper's: its fenced bookies)."""
    if ghost is None and hasattr(state, "describe"):
        return state.describe()
    lines = []
    for k, s in enumerate(state.servers):
        line = f"{server_name(k)} {describe_server(s)}"
        if s.match:
            line += " match=[" + ",".join(str(m) for m in s.match) + "]"
        lines.append(line)
    if state.reads:
        lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(state.reads)))
    if ghost is not None and describe_ghost(ghost):
        lines.append(describe_ghost(ghost))
    return "\n".join(lines)


def shape(state: State, ghost: Ghost) -> tuple:
    """State and ghost with generations renamed 0, 1, 2, ... in order (0 stays 0); crashes ignored.

    The model only compares generations (and elects 1 + the largest of the voters'),
    so the explorer is asked about the CTI up to an order-preserving renaming of
    its generations: z3's generations are unbounded, the explorer's are small.
    """
    records, conflict = ghost
    values = {0}
    for s in state.servers:
        values.add(s.generation)
        values.update(s.log)
    values.update(g for _, g in state.reads)
    for g, cg in records:
        values.update((g, cg))
    rank = {g: k for k, g in enumerate(sorted(values))}
    servers = tuple((rank[s.generation], s.role, tuple(rank[g] for g in s.log), s.hwm, s.alive, s.match)
                    for s in state.servers)
    return (servers, frozenset((i, rank[g]) for i, g in state.reads),
            tuple((rank[g], rank[cg]) for g, cg in records), conflict)


def renamed(state: State, order: tuple[int, ...]) -> State:
    """The state with new server j being old server order[j]."""
    servers = []
    for old in order:
        s = state.servers[old]
        match = tuple(s.match[k] for k in order) if s.match else ()
        servers.append(Server(s.generation, s.role, s.log, s.hwm, s.alive, match))
    return State(tuple(servers), state.reads, state.crashes, state.channels)


# -------------------------------------------------------- asking the explorer
class GhostModel:
    """The explicit model with the commit ghost alongside: states are (state, ghost) pairs.

    The one breadth-first search (`checker.engine`) explores it like any model; a
    node is a model state up to symmetry (its fingerprint) and its commit record.
    """

    def __init__(self, model: Model):
        self.model, self.config = model, model.config
        self.n, self.voter_sets, self.pairs = model.n, model.voter_sets, model.pairs
        self.action_table = model.action_table  # the same actions: the same ids

    def initial_state(self) -> tuple:
        return (self.model.initial_state(), no_commits(self.config.max_log))

    def actions(self, node: tuple, bounds_hit: set | None = None):
        return self.model.actions(node[0], bounds_hit)

    def apply(self, node: tuple, action) -> tuple:
        state, ghost = node
        succ = self.model.apply(state, action)
        return (succ, advance_commit_record(ghost, state, succ))

    def successors(self, node: tuple, bounds_hit: set | None = None):
        for action in self.actions(node, bounds_hit):
            yield action, self.apply(node, action)

    def fingerprint(self, node: tuple, symmetry: bool = True) -> int:
        state, ghost = node
        return fingerprint_bytes(fingerprint(state, symmetry).to_bytes(8, "little") + repr(ghost).encode())


class _Shapes(Visitor):
    """The index of the first node of each shape, in breadth-first order."""

    def __init__(self):
        self.seen: dict = {}

    def on_chunk(self, chunk, result) -> None:
        backend = chunk.search.backend
        if chunk.first == 0 and chunk.depth == 0:
            self.seen.setdefault(shape(*backend.states(chunk.frontier)[0]), 0)
        for k, node in enumerate(backend.states(chunk.new_states)):
            self.seen.setdefault(shape(*node), chunk.new_first + k)


class Explorer:
    """Breadth-first search over the explicit model with the commit ghost alongside.

    The engine's search of `GhostModel`, paused between chunks: it can stop at a
    wanted shape and resume later, and it remembers every shape seen, so many CTIs
    cost one exploration.
    """

    def __init__(self, protocol: Protocol, config: Config, max_states: int = 1_000_000):
        self.protocol, self.config, self.max_states = protocol, config, max_states
        self.model = RaftModel(protocol, config)
        self.ghost_model = GhostModel(self.model)
        self.shapes = _Shapes()
        options = CheckOptions(successors="objects", properties=(), max_states=max_states)
        self.search = Search(self.ghost_model, options, [self.shapes], name="explorer")
        self._steps = self.search.steps()
        self._finished = False
        self.started = time.perf_counter()

    @property
    def states(self) -> int:
        return len(self.search.visited)

    @property
    def complete(self) -> bool:
        return self._finished and self.search.report.complete

    def find(self, wanted: set) -> int | None:
        """The key of the first-found node whose shape is in `wanted` (searching further if needed)."""
        seen = self.shapes.seen
        while True:
            hits = [seen[w] for w in wanted if w in seen]
            if hits:
                return min(hits)
            if self._finished:
                return None
            try:
                next(self._steps)
            except StopIteration:
                self._finished = True

    def path(self, key: int) -> list:
        """Actions from the initial state to a node whose shape is `key`'s (renaming servers as needed)."""
        chain = self.search.visited.path(key)
        actions, _ = reconstruct(self.ghost_model, chain, True)
        return actions


def wanted_shapes(state: State, ghost: Ghost) -> set:
    return {shape(renamed(state, order), ghost) for order in permutations(range(len(state.servers)))}


# --------------------------------------------------------------- the check
@dataclass
class CTI:
    """A counterexample to induction: Inv holds before the action, some conjunct fails after."""

    action: tuple
    failed: list[str]
    before: State
    after: State
    before_ghost: Ghost
    after_ghost: Ghost
    property_violations: dict = field(default_factory=dict)
    reachable: bool | None = None
    trace: list | None = None  # the explorer's path to (a renaming of) the pre-state
    verdict: str = ""

    def describe(self) -> str:
        lines = [f"counterexample to induction: {action_name(self.action)} breaks {', '.join(self.failed)}",
                 "  before:"]
        lines += ["    " + line for line in describe_state(self.before, self.before_ghost).splitlines()]
        lines.append(f"  action: {action_name(self.action)}")
        lines.append("  after:")
        lines += ["    " + line for line in describe_state(self.after, self.after_ghost).splitlines()]
        if self.property_violations:
            lines.append("  the step violates " + "; ".join(f"{k} ({v})" for k, v in
                                                            self.property_violations.items()))
        if self.verdict:
            lines.append("  " + self.verdict)
        return "\n".join(lines)


def _ghost_of(enc: Encoding, m: z3.ModelRef, s: Sym) -> Ghost:
    def val(x):
        return m.eval(x, model_completion=True)

    records = tuple((val(s.ghost["committed"][p]).as_long(), val(s.ghost["commit_gen"][p]).as_long())
                    for p in range(enc.L))
    return (records, z3.is_true(val(s.ghost["commit_conflict"])))


def induction_encoding(protocol: Protocol, servers: int, max_log: int) -> Encoding:
    return Encoding(protocol, servers, max_log, ghost_commits=True)


def invariant(enc: Encoding, s: Sym, conjuncts=RAFT_INVARIANT) -> z3.BoolRef:
    return z3.And([c.formula(enc, s) for c in conjuncts])


def _renamed_sym(enc: Encoding, s: Sym, order: tuple[int, ...]) -> Sym:
    """s with new server j being old server order[j] (ghost per index: unchanged)."""
    t = s.copy()
    t.gen = [s.gen[k] for k in order]
    t.leader = [s.leader[k] for k in order]
    t.alive = [s.alive[k] for k in order]
    t.length = [s.length[k] for k in order]
    t.log = [list(s.log[k]) for k in order]
    t.hwm = [s.hwm[k] for k in order]
    t.match = [[s.match[k][j] for j in order] for k in order]
    return t


def _generation_terms(enc: Encoding, s: Sym) -> list:
    return ([*s.gen, *(x for row in s.log for x in row), *s.ghost["gen"], *s.ghost["committed"],
             *s.ghost["commit_gen"]])


def _other_terms(enc: Encoding, s: Sym) -> list:
    return [*s.leader, *s.alive, *s.length, *s.hwm, *(x for row in s.match for x in row), *s.ghost["read"],
            s.ghost["conflict"], s.ghost["commit_conflict"]]


def _not_shape(enc: Encoding, s: Sym, m: z3.ModelRef) -> z3.BoolRef:
    """s is not, up to renaming servers and an order-preserving renaming of generations, m's value of s."""
    gens = [m.eval(x, model_completion=True).as_long() for x in _generation_terms(enc, s)]
    others = [m.eval(x, model_completion=True) for x in _other_terms(enc, s)]
    clauses = []
    for order in permutations(range(enc.n)):
        r = _renamed_sym(enc, s, order)
        terms, rest = _generation_terms(enc, r), _other_terms(enc, r)
        same = [a == v for a, v in zip(rest, others)]
        for i in range(len(terms)):
            same.append((terms[i] == 0) if gens[i] == 0 else (terms[i] > 0))
            for j in range(i + 1, len(terms)):
                a, b = terms[i], terms[j]
                same.append(a < b if gens[i] < gens[j] else (a == b if gens[i] == gens[j] else a > b))
        clauses.append(z3.Not(z3.And(same)))
    return z3.And(clauses)


@dataclass
class InductionResult:
    protocol: str
    servers: int
    max_log: int
    init_failed: list[str]
    ctis: list[CTI]  # one per action whose step breaks the invariant (first found)
    safety_failed: list[str]
    seconds: float
    per_action_seconds: dict
    undecided: list[str] = field(default_factory=list)  # obligations z3 left undecided (its timeout)

    @property
    def ok(self) -> bool:
        return not self.init_failed and not self.ctis and not self.safety_failed and not self.undecided


def _small_model(constraints: list, s: Sym, ledger: Ledger, timeout_ms: int = 20000) -> z3.ModelRef:
    """A model with small generations and short logs: readable, and likelier reachable."""
    opt = ledger.limit(z3.Optimize())
    if ledger.timeout is None or ledger.timeout * 1000 > timeout_ms:
        opt.set("timeout", timeout_ms)
    opt.add(*constraints)
    opt.minimize(z3.Sum(s.gen) + z3.Sum([x for row in s.log for x in row]) + z3.Sum(s.length))
    if opt.check() == z3.sat:
        return opt.model()
    solver = ledger.limit(z3.Solver())
    solver.add(*constraints)
    if ledger.check(solver) != z3.sat:
        raise RuntimeError("z3 lost the counterexample to induction it had found")
    return solver.model()


def _cti_from(enc: Encoding, m: z3.ModelRef, s: Sym, t: Sym, action: tuple, inv_t: dict) -> CTI:
    failed = [name for name, f in inv_t.items() if not z3.is_true(m.eval(f, model_completion=True))]
    before, after = enc.concrete(m, s), enc.concrete(m, t)
    ghosts = (_ghost_of(enc, m, s), _ghost_of(enc, m, t)) if enc.ghost_commits else (None, None)
    return CTI(action, failed, before, after, *ghosts, violations(before, after))


class ConjunctEvaluator:
    """Which conjuncts of an invariant fail on explicit states of the encoding's model (the cross-check
    with the explorer, and the search for a reachable counterexample to induction)."""

    def __init__(self, enc: Encoding, conjuncts):
        self.enc = enc
        self.s = enc.fresh("eval")
        self.variables = enc.variables(self.s)
        self.formulas = [(c.name, c.formula(enc, self.s)) for c in conjuncts]
        self.whole = z3.And([f for _, f in self.formulas])
        self.solver = z3.Solver()

    def failed(self, state) -> list[str]:
        self.solver.push()
        try:
            self.solver.add([v == x for v, x in zip(self.variables, self.enc.values(state))])
            if self.solver.check() != z3.sat:
                raise ValueError(f"the encoding has no state for {state}")
            m = self.solver.model()
            if z3.is_true(m.eval(self.whole, model_completion=True)):
                return []
            return [name for name, f in self.formulas if not z3.is_true(m.eval(f, model_completion=True))]
        finally:
            self.solver.pop()


STEP_PROPERTIES = ("ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost")  # on a step; the rest on a state


def check_induction(protocol: Protocol, servers: int = 3, max_log: int = 2, conjuncts=RAFT_INVARIANT, *,
                    name: str = "", actions: list | None = None, ledger: Ledger | None = None,
                    enc: Encoding | None = None) -> InductionResult:
    """IndInit, IndNext per action (first CTI of each), and the safety implications.

    Obligations of `ledger`: IndInit; IndNext per action (Inv ∧ action ⇒ Inv', and no step of
    it violates ReadNeverTruncated, HwmNeverTruncated or ReadNeverLost); Inv ⇒ each state property
    the encoding states (`checked_properties`). `enc`: another system's encoding (default: raft's
    with the commit ghost).
    """
    ledger = ledger_or_new(ledger)
    started = time.perf_counter()
    enc = enc or induction_encoding(protocol, servers, max_log)
    # A system may state more properties of a step (Kafka's AcknowledgedWriteKept).
    step_properties = STEP_PROPERTIES + getattr(enc, "more_step_properties", ())
    state_properties = [p for p in checked_properties(protocol) if p not in step_properties]
    s, t = enc.fresh("pre"), enc.fresh("post")
    init_failed, undecided = [], []
    prefix = f"induction {name}: ".replace("  ", " ")
    with ledger.obligation("induction", prefix + "IndInit") as ob:
        for c in conjuncts:
            solver = ledger.limit(z3.Solver())
            solver.add(enc.init(s), z3.Not(c.formula(enc, s)))
            if ledger.check(solver) == z3.sat:
                init_failed.append(c.name)
        if init_failed:
            ob.fail("Init does not imply " + ", ".join(init_failed))
    if ob.verdict == UNDECIDED:
        undecided.append(ob.name)
    inv_s = [c.formula(enc, s) for c in conjuncts]
    inv_t = {c.name: c.formula(enc, t) for c in conjuncts}
    broken = z3.Not(z3.And(list(inv_t.values())))
    solver = ledger.limit(z3.Solver())
    solver.add(*inv_s)
    ctis, safety_failed, per_action = [], [], {}
    for action in actions if actions is not None else enc.actions:
        t0 = time.perf_counter()
        step = enc.transition(s, t, action)
        solver.push()
        solver.add(step)
        with ledger.obligation("induction", f"{prefix}IndNext {action_name(action)}") as ob:
            solver.push()
            solver.add(broken)
            try:
                verdict = ledger.check(solver)
            finally:
                solver.pop()
            if verdict == z3.sat:
                cti = _cti_from(enc, _small_model([*inv_s, step, broken], s, ledger), s, t, action, inv_t)
                ctis.append(cti)
                ob.fail("breaks " + ", ".join(cti.failed), cti.describe())
            for prop in step_properties:
                bad = enc.violation(prop, s, t)
                solver.push()
                solver.add(bad)
                try:
                    if ledger.check(solver) == z3.sat:
                        safety_failed.append(f"{prop} on {action_name(action)}")
                        ob.fail(ob.detail or f"a step may violate {prop}")
                finally:
                    solver.pop()
        solver.pop()
        if ob.verdict == UNDECIDED:
            undecided.append(ob.name)
        per_action[action_name(action)] = time.perf_counter() - t0
    for prop in state_properties:
        bad = enc.violation(prop, s, s)
        with ledger.obligation("induction", f"{prefix}Inv ⇒ {prop}") as ob:
            solver.push()
            solver.add(bad)
            try:
                if ledger.check(solver) == z3.sat:
                    safety_failed.append(prop)
                    ob.fail()
            finally:
                solver.pop()
        if ob.verdict == UNDECIDED:
            undecided.append(ob.name)
    return InductionResult(name, servers, max_log, init_failed, ctis, safety_failed,
                           time.perf_counter() - started, per_action, undecided)


def _shrink(solver: z3.Solver, size: z3.ArithRef, m: z3.ModelRef, ledger: Ledger, rounds: int = 6) -> z3.ModelRef:
    """A smaller model by a few rounds of 'size < the last one' (small CTIs are likelier reachable)."""
    for _ in range(rounds):
        solver.push()
        solver.add(size < m.eval(size, model_completion=True))
        try:
            smaller = solver.model() if ledger.check(solver) == z3.sat else None
        except Undecided:  # z3's timeout: the CTI found so far will do
            smaller = None
        finally:
            solver.pop()
        if smaller is None:
            break
        m = smaller
    return m


def search_reachable_cti(protocol: Protocol, servers: int, max_log: int, explorer: Explorer,
                         conjuncts=RAFT_INVARIANT, *, attempts: int = 40,
                         ledger: Ledger | None = None) -> tuple[CTI | None, list[CTI]]:
    """CTIs from z3, each put to the explorer, until one is reachable.

    Only pre-states the explorer could reach are asked for: at most its
    max_generation distinct generations (any such state renames into 1..G) and at
    most max_crashes servers down. z3 first looks for steps that also violate a
    catalogue property (the likeliest real bugs), then for any CTI; each CTI tried
    is excluded up to renaming of servers and generations, so every attempt asks
    about a new shape. Returns (the reachable CTI or None, every CTI tried).
    """
    ledger = ledger_or_new(ledger)
    enc = induction_encoding(protocol, servers, max_log)
    s, t = enc.fresh("pre"), enc.fresh("post")
    choice = z3.Int("action")
    inv_t = {c.name: c.formula(enc, t) for c in conjuncts}
    config = explorer.config
    base = [c.formula(enc, s) for c in conjuncts]
    base += [choice >= 0, choice < len(enc.actions)]
    base += [z3.Implies(choice == k, enc.transition(s, t, a)) for k, a in enumerate(enc.actions)]
    base.append(z3.Not(z3.And(list(inv_t.values()))))
    base += [x <= config.max_generation for x in _generation_terms(enc, s)]
    base.append(enc.count([z3.Not(a) for a in s.alive]) <= config.max_crashes)
    headline = z3.Or([enc.violation(p, s, t) for p in ("ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost")])
    bad_step = z3.Or([enc.violation(p, s, t) for p in ("ReadsAgree", "HwmWithinLog", "CommittedOnQuorum",
                                                        "OneLeaderPerGeneration", "LogMatching")])
    size = z3.Sum([*s.gen, *(x for row in s.log for x in row), *s.length, *s.hwm])
    # Solve in a fresh z3 context: the models z3 picks then do not depend on what else
    # this process asked z3 before (the main context's history), so runs are repeatable.
    ctx = ledger.context()

    def moved(e):
        return e.translate(ctx)

    s = enc.rebuild(s, [moved(v) for v in enc.variables(s)])
    t = enc.rebuild(t, [moved(v) for v in enc.variables(t)])
    choice, headline, bad_step, size = moved(choice), moved(headline), moved(bad_step), moved(size)
    inv_t = {name: moved(f) for name, f in inv_t.items()}
    solver = ledger.limit(z3.Solver(ctx=ctx))
    solver.add(*[moved(f) for f in base])
    tried: list[CTI] = []
    blocks: list = []
    for phase in ([headline], [bad_step], []):
        solver.push()
        solver.add(*phase, *blocks)
        while len(tried) < attempts and ledger.check(solver) == z3.sat:
            m = _shrink(solver, size, solver.model(), ledger)
            action = enc.actions[m.eval(choice, model_completion=True).as_long()]
            cti = _cti_from(enc, m, s, t, action, inv_t)
            blocks.append(_not_shape(enc, s, m))
            solver.add(blocks[-1])
            tried.append(cti)
            ledger.say(f"CTI {len(tried)} ({action_name(action)} breaks {', '.join(cti.failed)}): asking the "
                       f"explorer ({explorer.states} states so far)")
            key = explorer.find(wanted_shapes(cti.before, cti.before_ghost))
            if key is not None:
                cti.reachable = True
                cti.trace = explorer.path(key)
                solver.pop()
                return cti, tried
            cti.reachable = False if explorer.complete else None
        solver.pop()
    return None, tried


def confirm(cti: CTI, explorer: Explorer) -> None:
    """Replay the explorer's path, apply the CTI's action there, and say what the step does."""
    config = explorer.config
    model = RaftModel(explorer.protocol, config)
    state, ghost = initial_state(config), no_commits(config.max_log)
    for a in cti.trace:
        nxt = model.apply(state, a)
        ghost, state = advance_commit_record(ghost, state, nxt), nxt
    bounds = (f"{config.describe()}; generations compared up to an order-preserving renaming, "
              f"servers up to renaming")
    path = " ".join(action_name(a) for a in cti.trace) or "(the initial state)"
    # Which of the reached state's servers plays which of the CTI's.
    target = shape(state, ghost)
    order = next(o for o in permutations(range(config.servers))
                 if shape(renamed(cti.before, o), cti.before_ghost) == target)
    where = {old: new for new, old in enumerate(order)}
    name, *args = cti.action
    action = (name, *[tuple(sorted(where[v] for v in a)) if isinstance(a, tuple) else where[a] for a in args])
    # The CTI's generations are unbounded: its step may need one generation or crash
    # more than the explorer's bounds; take it on a model with that room.
    roomy = RaftModel(explorer.protocol, replace(config, max_generation=config.max_generation + 1,
                                             max_crashes=config.max_crashes + 1))
    reason = roomy.why_not(state, action)
    if reason is None:
        after = roomy.apply(state, action)
        found = violations(state, after)
        effect = (f"then {action_name(action)} violates " + ", ".join(sorted(found)) if found
                  else f"then {action_name(action)} breaks the invariant (no catalogue property yet)")
    else:
        effect = f"but {action_name(action)} is not enabled there ({reason})"
    cti.verdict = (f"reachable: a real bug — the explorer reaches this pre-state in {len(cti.trace)} steps "
                   f"({bounds}): {path}; {effect}")


def induction_proofs(name: str, protocol: Protocol, *, broken: bool, servers: int = 3, max_log: int = 2,
                     explorer_generations: tuple[int, ...] = (2, 3), explorer_crashes: int = 1,
                     attempts: int = 40, explorer_states: int = 1_000_000, ledger: Ledger | None = None) -> Proof:
    """The induction obligation of one protocol.

    A safe protocol must satisfy IndInit, IndNext and the safety implications. For a
    broken one the invariant must fail, and the explorer is asked about z3's CTIs
    until one is reachable (a real bug) or the attempts or the bounded space run out.
    """
    ledger = ledger_or_new(ledger)
    result = check_induction(protocol, servers, max_log, name=name, ledger=ledger)
    data = {"protocol": name, "servers": servers, "max_log": max_log, "generations": "unbounded",
            "crashes": "unbounded", "conjuncts": [c.name for c in RAFT_INVARIANT],
            "init_failed": result.init_failed, "safety_failed": result.safety_failed,
            "actions_with_cti": [action_name(c.action) for c in result.ctis]}
    if result.ok:
        detail = (f"Inv ({len(RAFT_INVARIANT)} conjuncts) holds initially, is preserved by all "
                  f"{len(result.per_action_seconds)} actions and implies ReadNeverTruncated, HwmNeverTruncated, "
                  f"ReadNeverLost, ReadsAgree, HwmWithinLog, CommittedOnQuorum, OneLeaderPerGeneration, LogMatching "
                  f"(N={servers}, L={max_log}, generations and crashes unbounded)")
        if broken:
            detail += " — but this preset is broken: the encoding and the explorer disagree"
        return Proof("induction", f"induction {name}", not broken, result.seconds, detail, data)
    data["undecided"] = result.undecided
    if result.init_failed:
        detail = "IndInit fails for " + ", ".join(result.init_failed)
        return Proof("induction", f"induction {name}", False, result.seconds, detail, data)
    if not result.ctis and not result.safety_failed:  # nothing failed, some obligation z3 left undecided
        shown = [o.removeprefix(f"induction {name}: ") for o in result.undecided]
        detail = (f"undecided: {len(shown)} obligation(s) z3 did not decide (" + ", ".join(shown[:3])
                  + (f" and {len(shown) - 3} more" if len(shown) > 3 else "") + ")")
        return Proof("induction", f"induction {name}", False, result.seconds, detail, data, undecided=True)
    started = time.perf_counter()
    # Small explorer bounds first (cheap, and most bugs show there), then larger ones.
    tried: list[CTI] = []
    with ledger.obligation("induction", f"induction {name}: CTIs put to the explorer", record=False) as search:
        for generations in explorer_generations:
            config = Config(servers=servers, max_generation=generations, max_log=max_log,
                            max_crashes=explorer_crashes)
            explorer = Explorer(protocol, config, max_states=explorer_states)
            reachable, more = search_reachable_cti(protocol, servers, max_log, explorer, attempts=attempts,
                                                   ledger=ledger)
            tried += more
            if reachable is not None:
                break
    seconds = result.seconds + time.perf_counter() - started
    data["ctis_tried"] = len(tried)
    data["explorer_states"] = explorer.states
    data["explorer_config"] = config.to_mapping()
    failing = sorted({f for c in result.ctis for f in c.failed})
    head = (f"IndNext fails on {len(result.ctis)} actions (conjuncts {', '.join(failing)})"
            if result.ctis else "IndNext holds but the safety implications fail: " + ", ".join(result.safety_failed))
    if reachable is not None:
        confirm(reachable, explorer)
        data["cti"] = reachable.describe()
        data["reachable"] = True
        detail = f"{head}; CTI {len(tried)} of those z3 offered is reachable:\n{reachable.describe()}"
        return Proof("induction", f"induction {name}", broken, seconds, detail, data)
    data["reachable"] = False
    first = tried[0] if tried else (result.ctis[0] if result.ctis else None)
    if search.verdict == UNDECIDED:
        detail = f"{head}; undecided whether a CTI is reachable: {search.detail}"
        return Proof("induction", f"induction {name}", False, seconds, detail, data, undecided=True)
    where = ("the whole bounded space" if explorer.complete else f"{explorer.states} states")
    verdict = (f"unreachable within bounds ({config.describe()}, {where} explored, {len(tried)} CTIs tried): "
               f"the invariant needs strengthening, or the bug needs larger bounds")
    if first is not None:
        first.verdict = verdict
        data["cti"] = first.describe()
    detail = f"{head}; {verdict}" + (f"\n{first.describe()}" if first is not None else "")
    return Proof("induction", f"induction {name}", False, seconds, detail, data)
