"""The model of `model/actions.py` (rpc network) as z3 formulas, shared by the proofs.

`model/actions.py` is normative: every guard and effect below transcribes one
there, branch by branch. Two checks keep them together: `disagreements` compares
every guard and effect with `Model.why_not`/`Model.apply` on concrete states
(tests/proofs/test_proofs.py samples them from the explorer), and bounded model checking
replays each trace z3 finds on the explicit model.

A symbolic state has, per server: generation, leader, alive, log length, one
generation per log slot (0 beyond the length), high-water mark and the leader's
match index per server (0 for followers and for the leader's own slot, which
`_advance_hwm` never reads). Reads are the ghost set of (index, generation):

- exact (bounded generations, for bounded model checking): one boolean per
  (index, generation);
- one slot per index (unbounded generations, for induction): whether the index
  was read, the generation read, and a `conflict` flag raised when a second,
  different generation is read at an index. While `conflict` is false the slots
  are exactly the read set; the invariant includes `not conflict` (ReadsAgree).

Induction adds a second ghost (`ghost_commits`): per index, the entry the first
leader to count it as committed had there, and the lowest generation of the leaders
that counted it.

Bounds: `max_log` slots always (the model's log bound); `max_generation` and
`max_crashes` only when given (None: unbounded, as induction needs). Bounded
encodings may use bit-vectors, which z3 bit-blasts to SAT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Callable, Sequence

import z3

from hwm.model.actions import to_step
from hwm.model.state import FOLLOWER, LEADER, Server, State
from hwm.properties.protocol import Protocol
from hwm.properties.quorum import majority

Action = tuple


@dataclass
class Proof:
    """One proof obligation's outcome, for the report and for `--json`."""

    part: str  # quorum | induction | bmc
    name: str
    ok: bool  # the obligation is met (for a broken protocol: its expected counterexample was found)
    seconds: float
    detail: str
    data: dict[str, Any] = field(default_factory=dict)
    undecided: bool = False  # z3 answered unknown (its timeout) where the verdict needed an answer; ok is False

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "name": self.name, "ok": self.ok, "undecided": self.undecided,
                "seconds": round(self.seconds, 3), "detail": self.detail, **self.data}


# ----------------------------------------------------------------- arithmetic
def count(conditions: Sequence[z3.BoolRef]) -> z3.ArithRef:
    return z3.Sum([z3.If(c, 1, 0) for c in conditions]) if conditions else z3.IntVal(0)


def smax(values: Sequence[Any]) -> Any:
    best = values[0]
    for v in values[1:]:
        best = z3.If(v > best, v, best)
    return best


def smin(a: Any, b: Any) -> Any:
    return z3.If(a <= b, a, b)


def _exchange_int(a: Any, b: Any) -> tuple[Any, Any]:
    return z3.If(a >= b, a, b), z3.If(a >= b, b, a)


def _exchange_bool(a: Any, b: Any) -> tuple[Any, Any]:
    return z3.Or(a, b), z3.And(a, b)


def sorted_descending(values: Sequence[Any], exchange: Callable = _exchange_int) -> list[Any]:
    """A bubble-sort network of compare-exchange steps (`proofs_quorum` proves it sorts).

    `exchange` returns (larger, smaller); the 0/1 version (or, and) serves the 0-1 principle.
    """
    out = list(values)
    n = len(out)
    for sweep in range(n):
        for j in range(n - 1 - sweep):
            out[j], out[j + 1] = exchange(out[j], out[j + 1])
    return out


def quorum_index(rule: str, match_indexes: Sequence[Any]) -> Any:
    """`properties.quorum.quorum_index` over symbolic match indexes."""
    n = len(match_indexes)
    ordered = sorted_descending(match_indexes)
    if rule == "majority":
        return ordered[majority(n) - 1]  # sort descending, take position majority-1
    if rule == "seed-index":
        return ordered[n - 1 - n // 2]  # sort ascending, take [N/2]
    raise ValueError(f"unknown quorum rule {rule!r}")


# ------------------------------------------------------------------ the state
@dataclass
class Sym:
    """One symbolic state (or the expressions of an effect)."""

    gen: list
    leader: list
    alive: list
    length: list
    log: list  # log[i][p]: the generation at index p+1
    hwm: list
    match: list  # match[i][j]
    ghost: dict  # the ghost variables: the read set (and the commit record, for induction)
    crashes: Any  # None when crashes are unbounded
    # What another system's model adds to the raft model's state (`proofs/zab.py`): name -> a
    # variable, a list of them, or a list of lists.
    extra: dict = field(default_factory=dict)

    def copy(self) -> "Sym":
        return Sym(list(self.gen), list(self.leader), list(self.alive), list(self.length),
                   [list(x) for x in self.log], list(self.hwm), [list(x) for x in self.match],
                   _copied(self.ghost), self.crashes, _copied(self.extra))


def _copied(fields: dict) -> dict:
    return {k: [list(x) if isinstance(x, list) else x for x in v] if isinstance(v, list) else v
            for k, v in fields.items()}


class Encoding:
    """The rpc-network model of one protocol as transition relations over `Sym` states."""

    partitioned = False  # the network never partitions (proofs/partition.py's encodings say True)

    def __init__(self, protocol: Protocol, servers: int, max_log: int, *, max_generation: int | None = None,
                 max_crashes: int | None = None, bitvectors: bool = False, ghost_commits: bool = False):
        self.protocol = protocol
        self.ghost_commits = ghost_commits
        # Bounded models may use bit-vectors (signed, wide enough for every value plus one),
        # which z3 bit-blasts to SAT: much faster for bounded model checking.
        self.width = None
        if bitvectors:
            if max_generation is None or max_crashes is None:
                raise ValueError("bit-vectors need bounded generations and crashes")
            self.width = max(max_generation + 1, max_log + 1, servers + 1, max_crashes + 1).bit_length() + 1
        self.n = servers
        self.L = max_log
        self.max_generation = max_generation
        self.max_crashes = max_crashes
        self.quorum = majority(servers)
        self.exact_reads = max_generation is not None
        others = range(servers)
        self.voter_sets = [[v for size in range(self.quorum, servers + 1) for v in combinations(others, size)
                            if c in v] for c in others]
        self.actions: list[Action] = []
        for c in others:
            for voters in self.voter_sets[c]:
                self.actions.append(("elect", c, voters))
        for k in others:
            self.actions += [("write", k), ("read", k), ("crash", k), ("restart", k)]
        self.actions += [("replicate", a, b) for a in others for b in others if a != b]

    # --------------------------------------------------------------- variables
    def number(self, name: str) -> Any:
        return z3.Int(name) if self.width is None else z3.BitVec(name, self.width)

    def choice(self, name: str) -> Any:
        """A variable numbering the action taken (an index into `self.actions`)."""
        if self.width is None:
            return z3.Int(name)
        return z3.BitVec(name, max(8, len(self.actions).bit_length() + 1))

    def value(self, v: int) -> Any:
        return z3.IntVal(v) if self.width is None else z3.BitVecVal(v, self.width)

    def count(self, conditions: Sequence[z3.BoolRef]) -> Any:
        if self.width is None:
            return count(conditions)
        total = self.value(0)
        for c in conditions:
            total = total + z3.If(c, self.value(1), self.value(0))
        return total

    def fresh(self, tag: str) -> Sym:
        n, L = self.n, self.L
        I, B = self.number, z3.Bool
        s = Sym(
            gen=[I(f"{tag}_gen_{i}") for i in range(n)],
            leader=[B(f"{tag}_leader_{i}") for i in range(n)],
            alive=[B(f"{tag}_alive_{i}") for i in range(n)],
            length=[I(f"{tag}_len_{i}") for i in range(n)],
            log=[[I(f"{tag}_log_{i}_{p}") for p in range(L)] for i in range(n)],
            hwm=[I(f"{tag}_hwm_{i}") for i in range(n)],
            match=[[I(f"{tag}_match_{i}_{j}") for j in range(n)] for i in range(n)],
            ghost={},
            crashes=I(f"{tag}_crashes") if self.max_crashes is not None else None,
        )
        if self.exact_reads:
            s.ghost["read"] = [[B(f"{tag}_read_{p}_{g}") for g in range(self.max_generation + 1)]
                               for p in range(L)]
        else:
            s.ghost["read"] = [B(f"{tag}_read_{p}") for p in range(L)]
            s.ghost["gen"] = [I(f"{tag}_readgen_{p}") for p in range(L)]
            s.ghost["conflict"] = B(f"{tag}_conflict")
        if self.ghost_commits:
            s.ghost["committed"] = [I(f"{tag}_committed_{p}") for p in range(L)]
            s.ghost["commit_gen"] = [I(f"{tag}_commit_gen_{p}") for p in range(L)]
            s.ghost["commit_conflict"] = B(f"{tag}_commit_conflict")
        return s

    def variables(self, s: Sym) -> list:
        out = [*s.gen, *s.leader, *s.alive, *s.length, *(x for row in s.log for x in row), *s.hwm,
               *(x for row in s.match for x in row)]
        for v in [*s.ghost.values(), *s.extra.values()]:
            if isinstance(v, list):
                for x in v:
                    out.extend(x if isinstance(x, list) else [x])
            else:
                out.append(v)
        if s.crashes is not None:
            out.append(s.crashes)
        return out

    def equal(self, s: Sym, t: Sym) -> z3.BoolRef:
        return z3.And([a == b for a, b in zip(self.variables(s), self.variables(t))])

    # ----------------------------------------------------------------- reads
    def read_contains(self, s: Sym, p: int, generation: Any) -> z3.BoolRef:
        """Whether (p+1, generation) is in the read set."""
        if self.exact_reads:
            return z3.Or([z3.And(generation == g, s.ghost["read"][p][g]) for g in range(self.max_generation + 1)])
        return z3.And(s.ghost["read"][p], s.ghost["gen"][p] == generation)

    def read_add(self, s: Sym, p: int, condition: z3.BoolRef, generation: Any) -> None:
        """Add (p+1, generation) to the read set of `s` (an effect being built) when `condition`."""
        if self.exact_reads:
            row = s.ghost["read"][p]
            s.ghost["read"][p] = [z3.Or(row[g], z3.And(condition, generation == g)) for g in range(len(row))]
        else:
            was, old = s.ghost["read"][p], s.ghost["gen"][p]
            s.ghost["conflict"] = z3.Or(s.ghost["conflict"], z3.And(condition, was, old != generation))
            s.ghost["read"][p] = z3.Or(was, condition)
            s.ghost["gen"][p] = z3.If(z3.And(condition, z3.Not(was)), generation, old)

    def read_entries(self, s: Sym) -> list[tuple[int, Any, z3.BoolRef]]:
        """(position, generation, present) triples covering the read set."""
        if self.exact_reads:
            return [(p, g, s.ghost["read"][p][g]) for p in range(self.L) for g in range(self.max_generation + 1)]
        return [(p, s.ghost["gen"][p], s.ghost["read"][p]) for p in range(self.L)]

    # --------------------------------------------------------------- helpers
    def entry_at(self, s: Sym, i: int, index: Any) -> Any:
        """The generation at 1-based `index` of server i's log (0 outside 1..L)."""
        out = self.value(0)
        for p in range(self.L - 1, -1, -1):
            out = z3.If(index == p + 1, s.log[i][p], out)
        return out

    def last_generation(self, s: Sym, i: int) -> Any:
        return z3.If(s.length[i] == 0, 0, self.entry_at(s, i, s.length[i]))

    def up_to_date(self, s: Sym, c: int, v: int) -> z3.BoolRef:
        """Raft 5.4.1: c's (last generation, length) is at least v's."""
        lc, lv = self.last_generation(s, c), self.last_generation(s, v)
        return z3.Or(lc > lv, z3.And(lc == lv, s.length[c] >= s.length[v]))

    def votes_for(self, s: Sym, c: int, v: int) -> z3.BoolRef:
        """Voter v grants c its vote under election=longest-log (another system's encoding may say otherwise)."""
        return self.up_to_date(s, c, v)

    def holds(self, s: Sym, i: int, p: int, generation: Any) -> z3.BoolRef:
        """Server i's log has (p+1, generation)."""
        return z3.And(s.length[i] > p, s.log[i][p] == generation)

    def _normalise_log(self, t: Sym, i: int) -> None:
        t.log[i] = [z3.If(p < t.length[i], t.log[i][p], 0) for p in range(self.L)]

    def _advance_hwm(self, t: Sym, l: int) -> None:
        """`Model._advance_hwm` on the leader of `t` (in place)."""
        indexes = [t.length[l] if j == l else t.match[l][j] for j in range(self.n)]
        q = quorum_index(self.protocol.quorum, indexes)
        advance = q > t.hwm[l]
        if self.protocol.commit == "current-generation":
            advance = z3.And(advance, q <= t.length[l], self.entry_at(t, l, q) == t.gen[l])
        t.hwm[l] = z3.If(advance, q, t.hwm[l])
        if self.ghost_commits:
            # Ghost: the first leader to count index p+1 as committed records the entry
            # there; a different entry later is a commit conflict. The generation recorded is
            # the lowest of the leaders that counted it: with five servers a stale leader may
            # count an index after a later leader did (acknowledgements from servers that have
            # since moved on still count).
            for p in range(self.L):
                counted = z3.And(advance, p < q)
                old, entry, by = t.ghost["committed"][p], t.log[l][p], t.ghost["commit_gen"][p]
                t.ghost["commit_conflict"] = z3.Or(t.ghost["commit_conflict"],
                                                   z3.And(counted, old != 0, old != entry))
                first = z3.And(counted, old == 0)
                t.ghost["committed"][p] = z3.If(first, entry, old)
                lower = z3.And(counted, old == entry, t.gen[l] < by)
                t.ghost["commit_gen"][p] = z3.If(z3.Or(first, lower), t.gen[l], by)

    def _become_follower(self, t: Sym, i: int, generation: Any) -> None:
        t.gen[i] = generation
        t.leader[i] = z3.BoolVal(False)
        t.match[i] = [self.value(0)] * self.n

    # ------------------------------------------------------------------ init
    def init(self, s: Sym) -> z3.BoolRef:
        """`initial_state`: every server alive, a follower of generation 0 with an empty log."""
        parts = []
        for i in range(self.n):
            parts += [s.gen[i] == 0, z3.Not(s.leader[i]), s.alive[i], s.length[i] == 0, s.hwm[i] == 0]
            parts += [x == 0 for x in s.log[i]] + [x == 0 for x in s.match[i]]
        if self.exact_reads:
            parts += [z3.Not(x) for row in s.ghost["read"] for x in row]
        else:
            parts += [z3.Not(x) for x in s.ghost["read"]] + [x == 0 for x in s.ghost["gen"]]
            parts.append(z3.Not(s.ghost["conflict"]))
        if self.ghost_commits:
            parts += [x == 0 for x in s.ghost["committed"] + s.ghost["commit_gen"]]
            parts.append(z3.Not(s.ghost["commit_conflict"]))
        if s.crashes is not None:
            parts.append(s.crashes == 0)
        return z3.And(parts)

    # --------------------------------------------------------------- actions
    def guard(self, s: Sym, action: Action) -> z3.BoolRef:
        return getattr(self, "_guard_" + action[0])(s, *action[1:])

    def effect(self, s: Sym, action: Action) -> Sym:
        return getattr(self, "_effect_" + action[0])(s, *action[1:])

    def transition(self, s: Sym, t: Sym, action: Action) -> z3.BoolRef:
        """The action is enabled in s and t is its effect."""
        return z3.And(self.guard(s, action), self.equal(t, self.effect(s, action)))

    def step(self, s: Sym, t: Sym, choice: z3.ArithRef) -> z3.BoolRef:
        """t follows s by the action numbered `choice` (an index into `self.actions`).

        Encoded with frame axioms: each variable of t is an if-then-else over only the
        actions that change it, which keeps the unrolled formula small.
        """
        before = self.variables(s)
        after = self.variables(t)
        effects = [self.variables(self.effect(s, a)) for a in self.actions]
        parts = [choice >= 0, choice < len(self.actions)]
        parts += [z3.Implies(choice == k, self.guard(s, a)) for k, a in enumerate(self.actions)]
        for position, (old, new) in enumerate(zip(before, after)):
            value = old
            for k in range(len(self.actions) - 1, -1, -1):
                changed = effects[k][position]
                if not changed.eq(old):
                    value = z3.If(choice == k, changed, value)
            parts.append(new == value)
        return z3.And(parts)

    def first_actions(self) -> list[int]:
        """One action per orbit under renaming servers (the smallest index).

        The initial state is symmetric, so every path has a renamed twin of the same
        length whose first action is one of these: bounded model checking may start
        with them only.
        """
        from itertools import permutations

        index = {a: k for k, a in enumerate(self.actions)}

        def rename(action: Action, perm: tuple[int, ...]) -> Action:
            name, *args = action
            out = [perm[a] if isinstance(a, int) else tuple(sorted(perm[v] for v in a)) for a in args]
            return (name, *out)

        keep = []
        for k, action in enumerate(self.actions):
            if all(index[rename(action, perm)] >= k for perm in permutations(range(self.n))):
                keep.append(k)
        return keep

    def changes(self, s: Sym, t: Sym) -> z3.BoolRef:
        """t differs from s (a shortest path never stutters)."""
        return z3.Or([a != b for a, b in zip(self.variables(s), self.variables(t))])

    def bounds(self, s: Sym) -> z3.BoolRef:
        """Ranges every reachable value lies in (redundant; they help the solver)."""
        parts = []
        top = self.max_generation
        for i in range(self.n):
            parts += [s.length[i] >= 0, s.length[i] <= self.L, s.hwm[i] >= 0, s.hwm[i] <= self.L, s.gen[i] >= 0]
            parts += [z3.And(x >= 0, x <= self.L) for x in s.match[i]]
            parts += [x >= 0 for x in s.log[i]]
            if top is not None:
                parts += [s.gen[i] <= top] + [x <= top for x in s.log[i]]
        return z3.And(parts)

    def _new_generation(self, s: Sym, voters: Sequence[int]) -> Any:
        return 1 + smax([s.gen[v] for v in voters])

    def _guard_elect(self, s: Sym, c: int, voters: tuple[int, ...]) -> z3.BoolRef:
        parts = [s.alive[c], z3.Not(s.leader[c])] + [s.alive[v] for v in voters]
        if self.protocol.election == "longest-log":
            parts += [self.votes_for(s, c, v) for v in voters]
        if self.max_generation is not None:
            parts.append(self._new_generation(s, voters) <= self.max_generation)
        if self.protocol.noop_on_election:
            parts.append(s.length[c] < self.L)
        return z3.And(parts)

    def _effect_elect(self, s: Sym, c: int, voters: tuple[int, ...]) -> Sym:
        t = s.copy()
        generation = self._new_generation(s, voters)
        for v in voters:
            self._become_follower(t, v, generation)
        t.leader[c] = z3.BoolVal(True)
        if self.protocol.noop_on_election:
            t.log[c] = [z3.If(s.length[c] == p, generation, s.log[c][p]) for p in range(self.L)]
            t.length[c] = s.length[c] + 1
        self._advance_hwm(t, c)
        return t

    def _guard_write(self, s: Sym, l: int) -> z3.BoolRef:
        return z3.And(s.alive[l], s.leader[l], s.length[l] < self.L)

    def _effect_write(self, s: Sym, l: int) -> Sym:
        t = s.copy()
        t.log[l] = [z3.If(s.length[l] == p, s.gen[l], s.log[l][p]) for p in range(self.L)]
        t.length[l] = s.length[l] + 1
        self._advance_hwm(t, l)
        return t

    def _guard_replicate(self, s: Sym, l: int, f: int) -> z3.BoolRef:
        return z3.And(s.alive[l], s.leader[l], s.alive[f])

    def _effect_replicate(self, s: Sym, l: int, f: int) -> Sym:
        L = self.L
        stale = s.gen[f] > s.gen[l]
        len_l = s.length[l]
        prev = smin(s.match[l][f], len_l)
        cur = list(s.log[f])
        cur_len = s.length[f]
        if self.protocol.append_check == "previous-entry":
            # Back off: the largest p <= prev where the follower holds the leader's entry (0 always does).
            start = prev
            prev = self.value(0)
            for p in range(1, L + 1):
                ok = z3.And(s.length[f] >= p, s.log[f][p - 1] == s.log[l][p - 1])
                prev = z3.If(z3.And(p <= start, ok), p, prev)
            for p in range(L):
                in_batch = z3.And(prev <= p, p < len_l)
                g = s.log[l][p]
                conflict = z3.And(in_batch, p < cur_len, cur[p] != g)
                append = z3.And(in_batch, p >= cur_len)
                cur[p] = z3.If(z3.Or(conflict, append), g, cur[p])
                cur_len = z3.If(z3.Or(conflict, append), p + 1, cur_len)
            acknowledged = len_l  # prev + len(entries)
        else:
            truncated = z3.BoolVal(False)
            for p in range(L):
                in_batch = z3.And(prev <= p, p < len_l)
                hit = z3.And(z3.Not(truncated), in_batch, p < s.length[f], s.log[f][p] != s.log[l][p])
                cur_len = z3.If(hit, p, cur_len)
                truncated = z3.Or(truncated, hit)
            for p in range(L):
                append = z3.And(prev <= p, p < len_l, p == cur_len)
                cur[p] = z3.If(append, s.log[l][p], cur[p])
                cur_len = z3.If(append, p + 1, cur_len)
            acknowledged = cur_len  # wal.getLastLogIndex()
        t = s.copy()
        # The append round trip (follower not ahead in generation).
        t.log[f] = cur
        t.length[f] = cur_len
        self._normalise_log(t, f)
        t.hwm[f] = smax([s.hwm[f], smin(s.hwm[l], acknowledged)])
        self._become_follower(t, f, s.gen[l])
        t.match[l] = [acknowledged if j == f else s.match[l][j] for j in range(self.n)]
        self._advance_hwm(t, l)
        # Or the reply carries a higher generation: the leader steps down, nothing else changes.
        u = s.copy()
        self._become_follower(u, l, s.gen[f])
        return self._choose(stale, u, t)

    def _choose(self, condition: z3.BoolRef, then: Sym, otherwise: Sym) -> Sym:
        a, b = self.variables(then), self.variables(otherwise)
        values = [x if x.eq(y) else z3.If(condition, x, y) for x, y in zip(a, b)]
        return self.rebuild(then, values)

    def rebuild(self, template: Sym, values: list) -> Sym:
        """A Sym shaped like `template` whose variables (in `variables` order) are `values`."""
        it = iter(values)
        n, L = self.n, self.L
        t = template.copy()
        t.gen = [next(it) for _ in range(n)]
        t.leader = [next(it) for _ in range(n)]
        t.alive = [next(it) for _ in range(n)]
        t.length = [next(it) for _ in range(n)]
        t.log = [[next(it) for _ in range(L)] for _ in range(n)]
        t.hwm = [next(it) for _ in range(n)]
        t.match = [[next(it) for _ in range(n)] for _ in range(n)]
        for fields, into in ((template.ghost, t.ghost), (template.extra, t.extra)):
            for key, v in fields.items():
                if isinstance(v, list):
                    into[key] = [[next(it) for _ in x] if isinstance(x, list) else next(it) for x in v]
                else:
                    into[key] = next(it)
        if template.crashes is not None:
            t.crashes = next(it)
        return t

    def _readable(self, s: Sym, r: int) -> Any:
        return smin(s.hwm[r], s.length[r])

    def _guard_read(self, s: Sym, r: int) -> z3.BoolRef:
        readable = self._readable(s, r)
        unread = z3.Or([z3.And(p < readable, z3.Not(self.read_contains(s, p, s.log[r][p]))) for p in range(self.L)])
        return z3.And(s.alive[r], readable > 0, unread)

    def _effect_read(self, s: Sym, r: int) -> Sym:
        t = s.copy()
        readable = self._readable(s, r)
        for p in range(self.L):
            self.read_add(t, p, p < readable, s.log[r][p])
        return t

    def _guard_crash(self, s: Sym, c: int) -> z3.BoolRef:
        if self.max_crashes is None:
            return s.alive[c]
        return z3.And(s.alive[c], s.crashes < self.max_crashes)

    def _effect_crash(self, s: Sym, c: int) -> Sym:
        t = s.copy()
        t.alive[c] = z3.BoolVal(False)
        self._become_follower(t, c, s.gen[c])
        if not self.protocol.hwm_durable:
            t.hwm[c] = self.value(0)
        if t.crashes is not None:
            t.crashes = s.crashes + 1
        return t

    def _guard_restart(self, s: Sym, r: int) -> z3.BoolRef:
        return z3.Not(s.alive[r])

    def _effect_restart(self, s: Sym, r: int) -> Sym:
        t = s.copy()
        t.alive[r] = z3.BoolVal(True)
        rule = self.protocol.restart
        if rule == "truncate-to-own-hwm":
            t.length[r] = smin(s.length[r], s.hwm[r])
            self._normalise_log(t, r)
        elif rule == "truncate-to-leader-hwm":
            # The live leader of the highest generation (the first such server on ties).
            new_length, new_hwm = s.length[r], s.hwm[r]
            for k in range(self.n):
                if k == r:
                    continue
                live = [z3.And(s.alive[j], s.leader[j]) for j in range(self.n)]
                beaten = [z3.And(live[j], z3.Or(s.gen[j] > s.gen[k], z3.And(s.gen[j] == s.gen[k], j < k)))
                          for j in range(self.n) if j not in (k, r)]
                chosen = z3.And(live[k], z3.Not(z3.Or(beaten)) if beaten else z3.BoolVal(True),
                                s.gen[k] >= s.gen[r])
                truncated = smin(s.length[r], s.hwm[k])
                new_length = z3.If(chosen, truncated, new_length)
                new_hwm = z3.If(chosen, smin(s.hwm[r], truncated), new_hwm)
            t.length[r], t.hwm[r] = new_length, new_hwm
            self._normalise_log(t, r)
        return t

    # ---------------------------------------------------------- properties
    def removed(self, s: Sym, t: Sym, i: int, p: int) -> z3.BoolRef:
        """Server i's entry at index p+1 in s is gone (or replaced) in t."""
        return z3.And(p < s.length[i], z3.Or(p >= t.length[i], t.log[i][p] != s.log[i][p]))

    def read_never_truncated(self, s: Sym, t: Sym) -> z3.BoolRef:
        """Violation of ReadNeverTruncated on the step s -> t: a read entry removed and left on
        fewer than a quorum of servers (every server's log counts, down or not)."""
        out = []
        for i in range(self.n):
            for p in range(self.L):
                g = s.log[i][p]
                left = self.count([self.holds(t, o, p, g) for o in range(self.n)])
                out.append(z3.And(self.removed(s, t, i, p), self.read_contains(s, p, g), left < self.quorum))
        return z3.Or(out)

    def hwm_never_truncated(self, s: Sym, t: Sym) -> z3.BoolRef:
        """Violation of HwmNeverTruncated on the step s -> t: a server removes an entry at or
        below its own high-water mark."""
        return z3.Or([z3.And(self.removed(s, t, i, p), p < s.hwm[i]) for i in range(self.n) for p in range(self.L)])

    def read_never_lost(self, s: Sym, t: Sym) -> z3.BoolRef:
        out = []
        for i in range(self.n):
            elected = z3.And(t.leader[i], t.alive[i],
                             z3.Or(z3.Not(s.leader[i]), s.gen[i] != t.gen[i], z3.Not(s.alive[i])))
            for p, g, present in self.read_entries(s):
                out.append(z3.And(elected, present, z3.Not(self.holds(t, i, p, g))))
        return z3.Or(out)

    def reads_agree(self, s: Sym) -> z3.BoolRef:
        if self.exact_reads:
            row = s.ghost["read"]
            return z3.Or([z3.And(row[p][a], row[p][b]) for p in range(self.L)
                          for a, b in combinations(range(self.max_generation + 1), 2)])
        return s.ghost["conflict"]

    def hwm_within_log(self, s: Sym) -> z3.BoolRef:
        return z3.Or([s.hwm[i] > s.length[i] for i in range(self.n)])

    def committed_on_quorum(self, s: Sym) -> z3.BoolRef:
        out = []
        for i in range(self.n):
            for p in range(self.L):
                g = s.log[i][p]
                held = self.count([self.holds(s, o, p, g) for o in range(self.n)])
                out.append(z3.And(p < s.hwm[i], p < s.length[i], held < self.quorum))
        return z3.Or(out)

    def one_leader_per_generation(self, s: Sym) -> z3.BoolRef:
        return z3.Or([z3.And(s.alive[a], s.leader[a], s.alive[b], s.leader[b], s.gen[a] == s.gen[b])
                      for a, b in combinations(range(self.n), 2)])

    def log_matching(self, s: Sym) -> z3.BoolRef:
        out = []
        for a, b in combinations(range(self.n), 2):
            common = smin(s.length[a], s.length[b])
            same = [s.log[a][p] == s.log[b][p] for p in range(self.L)]
            for p in range(self.L):
                # p is the highest common position where both hold the same entry ...
                highest = z3.And([z3.Or(q >= common, z3.Not(same[q])) for q in range(p + 1, self.L)])
                # ... and the logs differ somewhere before it.
                differ = z3.Or([z3.Not(same[r]) for r in range(p)]) if p else z3.BoolVal(False)
                out.append(z3.And(p < common, same[p], highest, differ))
        return z3.Or(out)

    def acked_write_never_lost(self, s: Sym) -> z3.BoolRef:
        """Violation of AckedWriteNeverLost in state s: an acknowledged entry on fewer than a quorum
        (an encoding whose model keeps the `acked` ghost has it in `extra`, one boolean per entry)."""
        return z3.Or([z3.And(s.extra["acked"][p][g],
                             self.count([self.holds(s, o, p, g) for o in range(self.n)]) < self.quorum)
                      for p in range(self.L) for g in range(self.max_generation + 1)])

    def violation(self, name: str, s: Sym, t: Sym) -> z3.BoolRef:
        """The catalogue's `always` property `name` fails on the step s -> t (or in state t)."""
        if name == "AckedWriteNeverLost":
            return self.acked_write_never_lost(t)
        step = {"ReadNeverTruncated": self.read_never_truncated, "HwmNeverTruncated": self.hwm_never_truncated,
                "ReadNeverLost": self.read_never_lost}
        if name in step:
            return step[name](s, t)
        state = {"ReadsAgree": self.reads_agree, "HwmWithinLog": self.hwm_within_log,
                 "CommittedOnQuorum": self.committed_on_quorum,
                 "OneLeaderPerGeneration": self.one_leader_per_generation, "LogMatching": self.log_matching,
                 "LeaseReadNeverStale": self.lease_read_never_stale}
        return state[name](t)

    def holds_lease(self, s: Sym, k: int) -> z3.BoolRef:
        """`properties.leases.holds_lease`: a live leader with an entry of its own generation at or below its
        HWM."""
        return z3.And(s.alive[k], s.leader[k],
                      z3.Or([z3.And(p < s.hwm[k], p < s.length[k], s.log[k][p] == s.gen[k]) for p in range(self.L)]))

    def lease_read_never_stale(self, s: Sym) -> z3.BoolRef:
        """Violation of `properties.leases.lease_read_never_stale`: a lease holder lacks, at or below its HWM,
        an entry clients have read."""
        return z3.Or([z3.And(self.holds_lease(s, k), present, z3.Or(p >= s.hwm[k], z3.Not(self.holds(s, k, p, g))))
                      for k in range(self.n) for p, g, present in self.read_entries(s)])

    # ------------------------------------------------ z3 model -> model State
    def concrete(self, model: z3.ModelRef, s: Sym) -> State:
        """The explicit-model `State` that a z3 model assigns to `s`."""
        def val(x: Any) -> Any:
            v = model.eval(x, model_completion=True)
            return z3.is_true(v) if z3.is_bool(v) else v.as_long()

        servers = []
        for i in range(self.n):
            leader = val(s.leader[i])
            length = val(s.length[i])
            servers.append(Server(val(s.gen[i]), LEADER if leader else FOLLOWER,
                                  tuple(val(s.log[i][p]) for p in range(max(0, min(length, self.L)))),
                                  val(s.hwm[i]), val(s.alive[i]),
                                  tuple(val(x) for x in s.match[i]) if leader else ()))
        reads = set()
        for p, g, present in self.read_entries(s):
            if val(present):
                reads.add((p + 1, val(g) if not isinstance(g, int) else g))
        crashes = val(s.crashes) if s.crashes is not None else 0
        return State(tuple(servers), frozenset(reads), crashes, ())


    # ------------------------------------- conformance with model/actions.py
    def values(self, state: State) -> list:
        """The explicit state's values in `variables` order. With the commit ghost, `state` is a node
        (state, commit record) as `proofs.induction.GhostModel` explores them."""
        records = None
        if self.ghost_commits:
            state, (records, commit_conflict) = state
        out: list = []
        servers = state.servers
        out += [s.generation for s in servers] + [s.role == LEADER for s in servers]
        out += [s.alive for s in servers] + [len(s.log) for s in servers]
        for s in servers:
            out += list(s.log) + [0] * (self.L - len(s.log))
        out += [s.hwm for s in servers]
        for s in servers:
            out += list(s.match) if s.match else [0] * self.n
        if self.exact_reads:
            out += [(p + 1, g) in state.reads for p in range(self.L) for g in range(self.max_generation + 1)]
        else:
            generations = {i: g for i, g in state.reads}
            if len(generations) != len(state.reads):
                raise ValueError("one read slot per index cannot hold two generations")
            out += [p + 1 in generations for p in range(self.L)] + [generations.get(p + 1, 0) for p in range(self.L)]
            out.append(False)
        if records is not None:
            out += [entry for entry, _ in records] + [by for _, by in records] + [commit_conflict]
        out += self.extra_values(state)
        if self.max_crashes is not None:
            out.append(state.crashes)
        return out

    def extra_values(self, state: Any) -> list:
        """The values of `Sym.extra` for an explicit state of another system's model (`variables` order)."""
        return []

    def disagreements(self, model: Any, states: Sequence[State], limit: int = 5) -> list[str]:
        """Where the encoding's guards or effects differ from `model` (a `Model`) on `states`."""
        s = self.fresh("c")
        variables = self.variables(s)
        guards = [self.guard(s, a) for a in self.actions]
        effects = [self.variables(self.effect(s, a)) for a in self.actions]
        problems = []
        for state in states:
            solver = z3.Solver()
            solver.add([v == x for v, x in zip(variables, self.values(state))])
            if solver.check() != z3.sat:
                problems.append(f"the encoding has no state for {state}")
                continue
            m = solver.model()

            def value(e: Any) -> Any:
                v = m.eval(e, model_completion=True)
                return z3.is_true(v) if z3.is_bool(v) else v.as_long()

            for k, action in enumerate(self.actions):
                enabled = model.why_not(state, action) is None
                if value(guards[k]) != enabled:
                    problems.append(f"{action_name(action)} enabled={not enabled} in z3, {enabled} in the model, "
                                    f"at {state}")
                elif enabled:
                    expected = self.values(model.apply(state, action))
                    got = [value(e) for e in effects[k]]
                    if got != expected:
                        wrong = [str(v) for v, a, b in zip(variables, got, expected) if a != b]
                        problems.append(f"{action_name(action)} at {state}: z3 and the model differ on "
                                        + ", ".join(wrong))
                if len(problems) >= limit:
                    return problems
        return problems


ALWAYS_CHECKED = ("ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "HwmWithinLog", "CommittedOnQuorum",
                  "OneLeaderPerGeneration", "LogMatching")
ACKED_CHECKED = ("AckedWriteNeverLost",)  # encoded where the model keeps the `acked` ghost
# Which systems' models keep it, and what each adds (Kafka's acks=all statement about leaders).
SYSTEM_CHECKED = {"raft": (), "zab": ACKED_CHECKED, "bookkeeper": ACKED_CHECKED,
                  "kafka": ACKED_CHECKED + ("AcknowledgedWriteKept",)}
LEASE_CHECKED = ("LeaseReadNeverStale",)  # a model whose leaders serve reads from a lease (properties/leases.py)
# Every property some encoding states.
ENCODED_PROPERTIES = (ALWAYS_CHECKED + tuple(dict.fromkeys(p for extra in SYSTEM_CHECKED.values() for p in extra))
                      + LEASE_CHECKED)


def checked_properties(protocol: Protocol) -> tuple[str, ...]:
    """The `always` properties the encoding of `protocol` states (`Encoding.violation`)."""
    return ALWAYS_CHECKED + SYSTEM_CHECKED.get(protocol.system, ()) + (LEASE_CHECKED if protocol.lease_reads else ())


def action_name(action: Action) -> str:
    """An action in the explorer's step notation: elect(S1, {S1,S2})."""
    return str(to_step(action))

