"""BookKeeper's ledger (`model/bookkeeper.py`) as z3 formulas: bounded model checking and induction.

`model/bookkeeper.py` is normative: each guard and effect below transcribes one there, and
`Encoding.disagreements` compares them on sampled reachable states
(tests/proofs/test_bookkeeper_bmc.py); every BMC trace is replayed on `BookKeeperModel`.

As in the model, the state's servers are the bookies S1..Sn, then the writer (the leader of
generation 1, its HWM the last-add-confirmed, its `match` what each bookie acknowledged) and
the recovery client (the leader of generation 2 once it closes the ledger, its log the closed
ledger). Ledger-wide fields are in `Sym.extra`, one boolean per bookie: `fenced`, `responded`
(answered the fencing LAC read), `negatives` (answered "no such entry" for the entry recovery is
reading); and the ghost set `acked` of entries acknowledged to the writer's client.

Every ledger the model has is encoded (`BookKeeperEncoding`): the ensemble size E, write quorum WQ and
ack quorum AQ are the model's, an entry is stored on its write set only (holes elsewhere), the LAC
counts AQ bookies of each entry's write set, recovery reads after E - AQ + 1 fencing answers and an
entry is missing after WQ - AQ + 1 "no such entry" answers of its write set. With spare bookies the
writer's ensemble changes are fragment slots: one per crash the bounds allow (bounded model checking),
or, with crashes unbounded (induction), one per first entry. Outside the default ledger the properties
count copies on AQ bookies of each entry's write set (`properties.ledger`).

The inductive invariant (`BOOKKEEPER_INVARIANT`) is for every ledger: the default and striped ones,
whose write sets are fixed by the entry, and those with spare bookies, whose ensemble changes it
follows through the fragment slots.
"""

from __future__ import annotations

import time
from collections import deque
from itertools import combinations, permutations
from typing import Any

import z3

from hwm.model.bookkeeper import RECOVERY_GENERATION, WRITER_GENERATION, BookKeeperModel, BookKeeperState
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.induction import CTI, Conjunct, ConjunctEvaluator, check_induction
from hwm.proofs.progress import ledger_or_new
from hwm.proofs.symbolic import Encoding, Proof, Sym, action_name, checked_properties, smax, smin
from hwm.properties.catalogue import violations


class BookKeeperEncoding(Encoding):
    """`model.bookkeeper.BookKeeperModel` over `Sym` states: bookies, writer, recovery.

    The ledger's shape (E, WQ, AQ) is the model's. Write sets of the first fragment are fixed by the
    entry's index, so without spare bookies membership is known before z3 sees a formula. With spares
    the writer's fragments after the first are `Sym.extra` slots, one per possible ensemble change:
    `frag_first[j]`, `frag_ensemble[j][position]`, `frag_count` (how many the writer made) and `stored`
    (how many the ledger metadata holds). A change replaces a bookie that is down, so there are at most
    as many changes as crashes: with crashes bounded (bounded model checking) that many slots suffice.

    With crashes unbounded (induction, `keyed`) the changes are unbounded too, but a change starts its
    fragment at the writer's LAC + 1 and replaces any fragment from there on (`Ledger.ensemble_at`: the
    last one starting at or before an entry), so one slot per first entry 1..L holds every fragment an
    entry can see: `slot_on[j]`, `slot_ensemble[j][position]` (the writer's fragment from entry j + 1),
    `meta_on`, `meta_ensemble` (the metadata's), and `member[b]` (b is in some ensemble the metadata
    holds, replaced ones included: the close writes back to the ledger's members)."""

    def __init__(self, protocol, servers: int, max_log: int, **bounds):
        # Generations are the writer's and recovery's only; the model ignores max_generation.
        bounds["max_generation"] = RECOVERY_GENERATION
        super().__init__(protocol, servers + 2, max_log, **bounds)
        if not self.exact_reads or self.ghost_commits:
            raise ValueError("the BookKeeper encoding is for bounded model checking (no commit ghost)")
        self.bookies = servers
        self.writer, self.recovery = servers, servers + 1
        model = BookKeeperModel(protocol, Config(servers=servers, max_log=max_log,
                                                 max_crashes=self.max_crashes if self.max_crashes is not None else 1))
        self.actions = model.action_table()
        self.ledger = model.ledger
        self.ensemble_size, self.write_quorum = model.ledger.ensemble_size, model.ledger.write_quorum
        self.ack_quorum = model.ack_quorum
        self.fencing_needed = model.fencing_needed
        self.missing_needed = model.missing_needed
        self.reads_fence = protocol.bookkeeper_recovery_reads_fence
        self.block_add_completions = protocol.bookkeeper_block_add_completions
        self.symmetric = model.symmetric
        self.in_ledger_terms = model.in_ledger_terms
        self.spares = self.ensemble_size < servers
        # With crashes unbounded (induction) the changes are too: fragments are then kept one slot per
        # first entry (`keyed`), which is all `Ledger.ensemble_at` reads of them.
        self.keyed = self.spares and self.max_crashes is None
        self.changes = self.max_crashes if self.spares and not self.keyed else 0
        self.fragmented = self.keyed or self.changes > 0

    # ------------------------------------------------------------------ state
    def fresh(self, tag: str) -> Sym:
        s = super().fresh(tag)
        B, I = z3.Bool, self.number
        s.extra = {name: [B(f"{tag}_{name}_{b}") for b in range(self.bookies)]
                   for name in ("fenced", "responded", "negatives")}
        s.extra["acked"] = [[B(f"{tag}_acked_{p}_{g}") for g in range(self.max_generation + 1)] for p in range(self.L)]
        if self.keyed:
            E = self.ensemble_size
            for view in ("slot", "meta"):  # the writer's fragments, the metadata's
                s.extra[f"{view}_on"] = [B(f"{tag}_{view}_on_{j}") for j in range(self.L)]
                s.extra[f"{view}_ensemble"] = [[I(f"{tag}_{view}_ensemble_{j}_{q}") for q in range(E)]
                                               for j in range(self.L)]
            s.extra["member"] = [B(f"{tag}_member_{b}") for b in range(self.bookies)]
        if self.changes:
            s.extra["frag_first"] = [I(f"{tag}_frag_first_{j}") for j in range(self.changes)]
            s.extra["frag_ensemble"] = [[I(f"{tag}_frag_ensemble_{j}_{q}") for q in range(self.ensemble_size)]
                                        for j in range(self.changes)]
            s.extra["frag_count"] = I(f"{tag}_frag_count")
            s.extra["stored"] = I(f"{tag}_stored")
        return s

    def init(self, s: Sym) -> z3.BoolRef:
        """`BookKeeperModel.initial_state`: empty bookies, the writer leading generation 1, nothing fenced."""
        parts = []
        for i in range(self.n):
            writer = i == self.writer
            parts += [s.gen[i] == (WRITER_GENERATION if writer else 0), s.leader[i] == writer, s.alive[i],
                      s.length[i] == 0, s.hwm[i] == 0]
            parts += [x == 0 for x in s.log[i]] + [x == 0 for x in s.match[i]]
        parts += [z3.Not(x) for row in s.ghost["read"] for x in row]
        parts += [z3.Not(v) for name in ("fenced", "responded", "negatives") for v in s.extra[name]]
        parts += [z3.Not(v) for row in s.extra["acked"] for v in row]
        if self.keyed:
            for view in ("slot", "meta"):
                parts += [z3.Not(x) for x in s.extra[f"{view}_on"]]
                parts += [x == 0 for row in s.extra[f"{view}_ensemble"] for x in row]
            parts += [m == (b < self.ensemble_size) for b, m in enumerate(s.extra["member"])]
        if self.changes:
            parts += [x == 0 for x in s.extra["frag_first"]]
            parts += [x == 0 for row in s.extra["frag_ensemble"] for x in row]
            parts += [s.extra["frag_count"] == 0, s.extra["stored"] == 0]
        if s.crashes is not None:
            parts.append(s.crashes == 0)
        return z3.And(parts)

    def extra_values(self, state: BookKeeperState) -> list:
        bits = [bool(mask >> b & 1) for mask in (state.fenced, state.responded, state.negatives)
                for b in range(self.bookies)]
        out = bits + [(p + 1, g) in state.acked for p in range(self.L) for g in range(self.max_generation + 1)]
        if self.keyed:
            for fragments in (state.ensembles, state.ensembles[: state.stored]):
                slots = {}
                for first, ensemble in fragments:  # a later fragment with the same first entry replaces one
                    if not 1 <= first <= self.L:
                        raise ValueError(f"a fragment from entry {first}, past the {self.L} slots")
                    slots[first] = ensemble
                out += [j + 1 in slots for j in range(self.L)]
                out += [k for j in range(self.L) for k in slots.get(j + 1, (0,) * self.ensemble_size)]
            members = {k for _, ensemble in self.ledger.fragments(state.ensembles[: state.stored]) for k in ensemble}
            out += [b in members for b in range(self.bookies)]
        if self.changes:
            if len(state.ensembles) > self.changes:
                raise ValueError(f"{len(state.ensembles)} ensemble changes, more than the {self.changes} slots")
            slots = list(state.ensembles) + [(0, (0,) * self.ensemble_size)] * (self.changes - len(state.ensembles))
            out += [first for first, _ in slots] + [k for _, ensemble in slots for k in ensemble]
            out += [len(state.ensembles), state.stored]
        return out

    def concrete(self, model: z3.ModelRef, s: Sym) -> BookKeeperState:
        base = super().concrete(model, s)

        def val(x):
            return model.eval(x, model_completion=True)

        def mask(name: str) -> int:
            return sum(1 << b for b in range(self.bookies) if z3.is_true(val(s.extra[name][b])))

        acked = frozenset((p + 1, g) for p in range(self.L) for g in range(self.max_generation + 1)
                          if z3.is_true(val(s.extra["acked"][p][g])))
        ensembles, stored = (), 0
        if self.keyed:
            ensembles, stored = self._keyed_fragments(val, s)
        if self.changes:
            count = val(s.extra["frag_count"]).as_long()
            ensembles = tuple((val(s.extra["frag_first"][j]).as_long(),
                               tuple(val(k).as_long() for k in s.extra["frag_ensemble"][j])) for j in range(count))
            stored = val(s.extra["stored"]).as_long()
        return BookKeeperState(base.servers, base.reads, base.crashes, (), mask("fenced"), mask("responded"),
                               mask("negatives"), acked, ensembles, stored)

    def _keyed_fragments(self, val, s: Sym) -> tuple[tuple, int]:
        """`BookKeeperState.ensembles` and `stored` for keyed slots: the metadata's fragments, then the
        writer's that differ; a member of the metadata no fragment left names gets a fragment that a later
        one with the same first entry replaces (only the metadata's members see it)."""
        def fragments(view: str) -> list:
            return [(j + 1, tuple(val(k).as_long() for k in s.extra[f"{view}_ensemble"][j]))
                    for j in range(self.L) if z3.is_true(val(s.extra[f"{view}_on"][j]))]

        stored, writers = fragments("meta"), fragments("slot")
        named = {k for _, ensemble in self.ledger.fragments(tuple(stored)) for k in ensemble}
        hidden = [b for b in range(self.bookies) if z3.is_true(val(s.extra["member"][b])) and b not in named]
        if stored and hidden:
            first, ensemble = stored[0]
            stored = [(first, (b,) + ensemble[1:]) for b in hidden] + stored
        ensembles = stored + [f for f in writers if f not in stored]
        return tuple(ensembles), len(stored)

    def first_actions(self) -> list[int]:
        """One action per orbit under renaming bookies (the clients keep their places); a striped ledger
        or spare bookies give each bookie a place, and no renaming maps the initial state to itself's paths."""
        if not self.symmetric:
            return list(range(len(self.actions)))
        index = {a: k for k, a in enumerate(self.actions)}
        keep = []
        for k, (name, *args) in enumerate(self.actions):
            if all(index[(name, *[perm[a] for a in args])] >= k for perm in permutations(range(self.bookies))):
                keep.append(k)
        return keep

    # ------------------------------------------------------- fragments
    def _fragments(self, s: Sym, stored: bool) -> list:
        """(active, first entry, ensemble) of each fragment after the first: the writer's (those it made)
        or the ledger metadata's (`stored`)."""
        if self.keyed:
            view = "meta" if stored else "slot"
            return [(s.extra[f"{view}_on"][j], self.value(j + 1), s.extra[f"{view}_ensemble"][j])
                    for j in range(self.L)]
        if not self.changes:
            return []
        used = s.extra["stored"] if stored else s.extra["frag_count"]
        return [(j < used, s.extra["frag_first"][j], s.extra["frag_ensemble"][j]) for j in range(self.changes)]

    def ensemble_at(self, s: Sym, entry: int, stored: bool = True) -> list:
        """`Ledger.ensemble_at`: each position's bookie, of the last fragment starting at or before `entry`."""
        found = [self.value(k) for k in self.ledger.first_ensemble()]
        for active, first, ensemble in self._fragments(s, stored):
            here = z3.And(active, first <= entry)
            found = [z3.If(here, k, old) for k, old in zip(ensemble, found)]
        return found

    def in_write_set(self, s: Sym, k: int, entry: int, stored: bool = True):
        """Bookie k is in `entry`'s write set (`Ledger.write_set`): a Python bool without spares."""
        positions = [(entry - 1 + i) % self.ensemble_size for i in range(self.write_quorum)]
        if not self.fragmented:
            return k in positions
        ensemble = self.ensemble_at(s, entry, stored)
        return z3.Or([ensemble[q] == k for q in positions])

    def last_fragment(self, s: Sym, stored: bool) -> tuple[Any, list]:
        """The first entry and the ensemble of the writer's (or the metadata's) last fragment."""
        first, found = self.value(1), [self.value(k) for k in self.ledger.first_ensemble()]
        for active, start, ensemble in self._fragments(s, stored):
            first = z3.If(active, start, first)
            found = [z3.If(active, k, old) for k, old in zip(ensemble, found)]
        return first, found

    def in_ensemble(self, ensemble: list, k: int):
        if not self.fragmented:
            return k < self.ensemble_size
        return z3.Or([q == k for q in ensemble])

    def _members(self, s: Sym, k: int):
        """Bookie k is in some fragment's ensemble the ledger metadata holds."""
        if not self.fragmented:
            return k < self.ensemble_size
        if self.keyed:
            return s.extra["member"][k]
        return z3.Or([k < self.ensemble_size] + [z3.And(active, self.in_ensemble(ensemble, k))
                                                 for active, _, ensemble in self._fragments(s, True)])

    def recovering(self, s: Sym) -> z3.BoolRef:
        """`BookKeeperModel.recovering`: recovery marked the ledger (its first fencing LAC read)."""
        return z3.Or(list(s.extra["responded"]) + [self.closed(s)])

    # ---------------------------------------------------------------- helpers
    def closed(self, s: Sym) -> z3.BoolRef:
        return s.leader[self.recovery]

    def _holds_entry(self, s: Sym, b: int, p: int) -> z3.BoolRef:
        """Bookie b stores entry p+1 (not a hole)."""
        return z3.And(p < s.length[b], s.log[b][p] != 0)

    def _shape(self, t: Sym, k: int, hwm: Any) -> None:
        """`BookKeeperModel._shaped`: trailing holes dropped, then holes up to the LAC (in place)."""
        t.log[k] = [z3.If(p < t.length[k], t.log[k][p], 0) for p in range(self.L)]
        content = self.value(0)
        for p in range(self.L):
            content = z3.If(t.log[k][p] != 0, self.value(p + 1), content)
        t.length[k] = smax([content, hwm])

    # ------------------------------------------------------------ the writer
    def _guard_add(self, s: Sym) -> z3.BoolRef:
        return z3.And(s.leader[self.writer], s.length[self.writer] < self.L)

    def _effect_add(self, s: Sym) -> Sym:
        t = s.copy()
        w = self.writer
        t.log[w] = [z3.If(s.length[w] == p, self.value(WRITER_GENERATION), s.log[w][p]) for p in range(self.L)]
        t.length[w] = s.length[w] + 1
        return t

    def _to_send(self, s: Sym, b: int, p: int) -> z3.BoolRef:
        """Entry p+1 is in the writer's current fragment and in b's write set there."""
        first, _ = self.last_fragment(s, stored=False)
        return z3.And(p < s.length[self.writer], first <= p + 1, self.in_write_set(s, b, p + 1, stored=False))

    def _pending(self, s: Sym, b: int) -> z3.BoolRef:
        """`BookKeeperModel._pending`: an entry of the current fragment in b's write sets that b does not store."""
        return z3.Or([z3.And(self._to_send(s, b, p), z3.Not(self._holds_entry(s, b, p))) for p in range(self.L)])

    def _guard_send_add(self, s: Sym, b: int) -> z3.BoolRef:
        w = self.writer
        _, ensemble = self.last_fragment(s, stored=False)
        return z3.And(s.leader[w], s.alive[b], self.in_ensemble(ensemble, b),
                      z3.Or(self._pending(s, b), s.hwm[b] < s.hwm[w]))

    def _effect_send_add(self, s: Sym, b: int) -> Sym:
        w = self.writer
        # A fenced bookie refuses the add: the writer learns the ledger is fenced and stops.
        refused = s.copy()
        refused.leader[w] = z3.BoolVal(False)
        refused.match[w] = [self.value(0)] * self.n
        # The adds carry the writer's LAC; the bookie stores every entry of its write sets it lacks.
        t = s.copy()
        t.log[b] = [z3.If(self._to_send(s, b, p), self.value(WRITER_GENERATION), s.log[b][p]) for p in range(self.L)]
        t.length[b] = smax([s.length[b], s.length[w]])
        hwm = smax([s.hwm[b], s.hwm[w]])
        self._shape(t, b, hwm)
        t.hwm[b] = hwm
        t.gen[b] = self.value(WRITER_GENERATION)
        t.leader[b] = z3.BoolVal(False)
        t.alive[b] = z3.BoolVal(True)
        t.match[b] = [self.value(0)] * self.n
        t.match[w] = [s.length[w] if j == b else s.match[w][j] for j in range(self.n)]
        t.hwm[w] = self.last_add_confirmed(s, t.match[w])
        # The add callbacks complete in order up to the LAC.
        acked = t.extra["acked"]
        for p in range(self.L):
            acked[p] = [z3.Or(v, p < t.hwm[w]) if g == WRITER_GENERATION else v for g, v in enumerate(acked[p])]
        return self._choose(s.extra["fenced"][b], refused, t)

    def last_add_confirmed(self, s: Sym, match: list) -> Any:
        """`BookKeeperModel.last_add_confirmed`: from the last LAC, each next entry AQ bookies of its
        write set (the writer's fragments) acknowledged."""
        w = self.writer
        confirmed = [self.count([z3.And(self.in_write_set(s, k, p + 1, stored=False), match[k] > p)
                                 for k in range(self.bookies)]) >= self.ack_quorum for p in range(self.L)]
        lac, going = s.hwm[w], z3.BoolVal(True)
        for _ in range(self.L):
            here = z3.Or([z3.And(lac == p, confirmed[p]) for p in range(self.L)])
            going = z3.And(going, lac < s.length[w], here)
            lac = z3.If(going, lac + 1, lac)
        return lac

    def _replacement(self, s: Sym, ensemble: list) -> list:
        """Per bookie: it is `BookKeeperModel._replacement`, the first live bookie outside the ensemble."""
        chosen, taken = [], z3.BoolVal(False)
        for k in range(self.bookies):
            fits = z3.And(s.alive[k], z3.Not(self.in_ensemble(ensemble, k)))
            chosen.append(z3.And(fits, z3.Not(taken)))
            taken = z3.Or(taken, fits)
        return chosen

    def _guard_change_ensemble(self, s: Sym, b: int) -> z3.BoolRef:
        w = self.writer
        _, ensemble = self.last_fragment(s, stored=False)
        failed = z3.Or([z3.And(self._to_send(s, b, p), z3.Not(self._holds_entry(s, b, p)), p + 1 > s.hwm[w])
                        for p in range(self.L)])
        # Each change replaces a bookie that is down, so crashes bound them (the class docstring).
        return z3.And(s.leader[w], self.in_ensemble(ensemble, b), z3.Not(s.alive[b]), failed,
                      z3.Or(self._replacement(s, ensemble)),
                      True if self.keyed else s.extra["frag_count"] < self.changes)

    def _effect_change_ensemble(self, s: Sym, b: int) -> Sym:
        w = self.writer
        # The conditional metadata update fails once recovery began: a writer that blocks its add
        # completions learns the ledger is in recovery and stops.
        stopped = s.copy()
        stopped.leader[w] = z3.BoolVal(False)
        stopped.match[w] = [self.value(0)] * self.n
        _, ensemble = self.last_fragment(s, stored=False)
        chosen = self._replacement(s, ensemble)
        replacement = self.value(0)
        for k in range(self.bookies - 1, -1, -1):
            replacement = z3.If(chosen[k], self.value(k), replacement)
        t = s.copy()
        lac = s.hwm[w]
        new = [z3.If(k == b, replacement, k) for k in ensemble]
        if self.keyed:
            # The fragment from entry lac + 1 on replaces any from there: slot lac, and none after it.
            # Issue 1591: without blocking add completions, a failed update leaves the change the writer's only.
            stores = z3.Not(self.recovering(s))
            for view, applies in (("slot", True), ("meta", stores)):
                for j in range(self.L):
                    here, gone = z3.And(applies, lac == j), z3.And(applies, lac < j)
                    t.extra[f"{view}_on"][j] = z3.If(gone, False, z3.Or(here, s.extra[f"{view}_on"][j]))
                    t.extra[f"{view}_ensemble"][j] = [z3.If(here, k, z3.If(gone, 0, old))
                                                      for k, old in zip(new, s.extra[f"{view}_ensemble"][j])]
            t.extra["member"] = [z3.Or(m, z3.And(stores, self.in_ensemble(new, k)))
                                 for k, m in enumerate(s.extra["member"])]
        count = s.extra["frag_count"] if self.changes else None
        for j in range(self.changes):
            t.extra["frag_first"][j] = z3.If(count == j, lac + 1, s.extra["frag_first"][j])
            t.extra["frag_ensemble"][j] = [z3.If(count == j, k, old)
                                           for k, old in zip(new, s.extra["frag_ensemble"][j])]
        if self.changes:
            t.extra["frag_count"] = count + 1
            # Issue 1591: without blocking add completions, a failed update leaves the change the writer's only.
            t.extra["stored"] = z3.If(self.recovering(s), s.extra["stored"], count + 1)
        # The replaced bookie's acknowledgements from the new fragment on no longer count.
        t.match[w] = [smin(m, lac) if j == b else z3.If(chosen[j], lac, m) if j < self.bookies else m
                      for j, m in enumerate(s.match[w])]
        if self.block_add_completions:
            return self._choose(self.recovering(s), stopped, t)
        return t

    # ------------------------------------------------------------ the reader
    def _guard_read(self, s: Sym, r: int) -> z3.BoolRef:
        # Holes (entries of other write sets) are not served.
        readable = self._readable(s, r)
        unread = z3.Or([z3.And(p < readable, s.log[r][p] != 0, z3.Not(self.read_contains(s, p, s.log[r][p])))
                        for p in range(self.L)])
        return z3.And(s.alive[r], unread)

    def _effect_read(self, s: Sym, r: int) -> Sym:
        t = s.copy()
        readable = self._readable(s, r)
        for p in range(self.L):
            self.read_add(t, p, z3.And(p < readable, s.log[r][p] != 0), s.log[r][p])
        return t

    # ----------------------------------------------------------- recovery
    def _guard_fence(self, s: Sym, b: int) -> z3.BoolRef:
        _, ensemble = self.last_fragment(s, stored=True)
        return z3.And(z3.Not(self.closed(s)), s.alive[b], self.in_ensemble(ensemble, b),
                      z3.Not(s.extra["responded"][b]))

    def _effect_fence(self, s: Sym, b: int) -> Sym:
        # The bookie is fenced and answers with its LAC; recovery starts after the highest one, and
        # never before the last fragment (pull request 2654).
        r = self.recovery
        first, _ = self.last_fragment(s, stored=True)
        start = smax([s.hwm[b], first - 1])
        later = start > s.length[r]
        t = s.copy()
        t.log[r] = [z3.If(later, z3.If(p < start, self.value(WRITER_GENERATION), self.value(0)), s.log[r][p])
                    for p in range(self.L)]
        t.length[r] = z3.If(later, start, s.length[r])
        t.extra["fenced"][b] = z3.BoolVal(True)
        t.extra["responded"][b] = z3.BoolVal(True)
        return t

    def recovery_start(self, s: Sym) -> Any:
        """`BookKeeperModel.recovery_start`: the highest LAC the fencing answers reported, and never before
        the last fragment."""
        first, _ = self.last_fragment(s, stored=True)
        return smax([first - 1] + [z3.If(s.extra["responded"][k], s.hwm[k], self.value(0))
                                   for k in range(self.bookies)])

    def _reading_from(self, s: Sym, b: int) -> z3.BoolRef:
        """Bookie b is in the write set of entry len(R) + 1, the one recovery reads."""
        r = self.recovery
        return z3.Or([z3.And(s.length[r] == p, self.in_write_set(s, b, p + 1)) for p in range(self.L + 1)])

    def _guard_recovery_read(self, s: Sym, b: int) -> z3.BoolRef:
        r = self.recovery
        held = z3.Or([z3.And(s.length[r] == p, self._holds_entry(s, b, p)) for p in range(self.L)])
        closes = z3.And(z3.Not(held), self.count(s.extra["negatives"]) + 1 >= self.missing_needed)
        # `BookKeeperModel._unwritable`: the entries recovery read are written back to an ack quorum of
        # each one's write set first.
        start = self.recovery_start(s)
        unwritable = z3.Or([z3.And(start <= p, p < s.length[r],
                                   self.count([z3.And(self.in_write_set(s, k, p + 1), s.alive[k])
                                               for k in range(self.bookies)]) < self.ack_quorum)
                            for p in range(self.L)])
        return z3.And(z3.Not(self.closed(s)), self.count(s.extra["responded"]) >= self.fencing_needed,
                      s.alive[b], self._reading_from(s, b), z3.Not(s.extra["negatives"][b]),
                      z3.Not(z3.And(closes, unwritable)))

    def _effect_recovery_read(self, s: Sym, b: int) -> Sym:
        r = self.recovery
        index = s.length[r]  # position of entry len + 1
        fenced = [z3.BoolVal(True) if (k == b and self.reads_fence) else v for k, v in enumerate(s.extra["fenced"])]
        held = z3.Or([z3.And(index == p, self._holds_entry(s, b, p)) for p in range(self.L)])
        # Found: recovery will write it back; it reads the next one.
        found = s.copy()
        found.log[r] = [z3.If(index == p, s.log[b][p], s.log[r][p]) for p in range(self.L)]
        found.length[r] = s.length[r] + 1
        found.extra["fenced"] = list(fenced)
        found.extra["negatives"] = [z3.BoolVal(False)] * self.bookies
        # Missing: one more "no such entry"; enough of them close the ledger before it.
        missing = s.copy()
        missing.extra["fenced"] = list(fenced)
        missing.extra["negatives"] = [z3.BoolVal(True) if k == b else v for k, v in enumerate(s.extra["negatives"])]
        close = self.count(missing.extra["negatives"]) >= self.missing_needed
        closing = missing.copy()
        end = s.length[r]
        first, _ = self.last_fragment(s, stored=True)
        for k in range(self.bookies):
            # A live bookie of the ledger gets the last fragment's entries of its write sets written back;
            # a down one (or a spare) keeps its prefix.
            written = closing.copy()
            written.log[k] = [z3.If(p < end, z3.If(z3.And(first <= p + 1, self.in_write_set(s, k, p + 1)),
                                                    self.value(WRITER_GENERATION), s.log[k][p]), self.value(0))
                              for p in range(self.L)]
            written.length[k] = end
            written.hwm[k] = end
            kept = closing.copy()
            kept.length[k] = smin(s.length[k], end)
            hwm = smin(s.hwm[k], end)
            self._shape(kept, k, hwm)
            kept.hwm[k] = hwm
            closing = self._choose(z3.And(s.alive[k], self._members(s, k)), written, kept)
        closing.gen[r] = self.value(RECOVERY_GENERATION)
        closing.leader[r] = z3.BoolVal(True)
        closing.hwm[r] = end
        closing.alive[r] = z3.BoolVal(True)
        return self._choose(held, found, self._choose(close, closing, missing))

    # ------------------------------------------------------ bookie failures
    def _effect_crash(self, s: Sym, c: int) -> Sym:
        # The journal keeps entries, LAC and fence.
        t = s.copy()
        t.alive[c] = z3.BoolVal(False)
        if s.crashes is not None:  # None: crashes unbounded (induction)
            t.crashes = s.crashes + 1
        return t

    def _effect_restart(self, s: Sym, r: int) -> Sym:
        t = s.copy()
        t.alive[r] = z3.BoolVal(True)
        return t

    # ---------------------------------------------------------- properties
    # Outside the default ledger, `properties.ledger` counts an entry's copies on AQ bookies of its
    # write set (the metadata's), and logs have holes, which are no entries.
    def copies(self, s: Sym, p: int, generation: Any) -> Any:
        """`properties.ledger.copies`: bookies of entry p+1's write set that store (p+1, generation)."""
        return self.count([z3.And(self.in_write_set(s, k, p + 1), self.holds(s, k, p, generation))
                           for k in range(self.bookies)])

    def read_never_truncated(self, s: Sym, t: Sym) -> z3.BoolRef:
        if not self.in_ledger_terms:
            return super().read_never_truncated(s, t)
        return z3.Or([z3.And(self.removed(s, t, i, p), s.log[i][p] != 0, self.read_contains(s, p, s.log[i][p]),
                             self.copies(t, p, s.log[i][p]) < self.ack_quorum)
                      for i in range(self.n) for p in range(self.L)])

    def hwm_never_truncated(self, s: Sym, t: Sym) -> z3.BoolRef:
        if not self.in_ledger_terms:
            return super().hwm_never_truncated(s, t)
        return z3.Or([z3.And(self.removed(s, t, i, p), s.log[i][p] != 0, p < s.hwm[i])
                      for i in range(self.n) for p in range(self.L)])

    def committed_on_quorum(self, s: Sym) -> z3.BoolRef:
        if not self.in_ledger_terms:
            return super().committed_on_quorum(s)
        return z3.Or([z3.And(p < s.hwm[i], p < s.length[i], s.log[i][p] != 0,
                             self.copies(s, p, s.log[i][p]) < self.ack_quorum)
                      for i in range(self.n) for p in range(self.L)])

    def acked_write_never_lost(self, s: Sym) -> z3.BoolRef:
        if not self.in_ledger_terms:
            return super().acked_write_never_lost(s)
        return z3.Or([z3.And(s.extra["acked"][p][g], self.copies(s, p, self.value(g)) < self.ack_quorum)
                      for p in range(self.L) for g in range(self.max_generation + 1)])

    def log_matching(self, s: Sym) -> z3.BoolRef:
        if not self.in_ledger_terms:
            return super().log_matching(s)
        # `properties.ledger.log_matching`: only indexes where both logs hold an entry count.
        out = []
        for a, b in combinations(range(self.n), 2):
            both = [z3.And(p < s.length[a], p < s.length[b], s.log[a][p] != 0, s.log[b][p] != 0)
                    for p in range(self.L)]
            for p in range(self.L):
                highest = z3.And([z3.Or(z3.Not(both[q]), s.log[a][q] != s.log[b][q]) for q in range(p + 1, self.L)])
                differ = z3.Or([z3.And(both[r], s.log[a][r] != s.log[b][r]) for r in range(p)]) if p else False
                out.append(z3.And(both[p], s.log[a][p] == s.log[b][p], highest, differ))
        return z3.Or(out) if out else z3.BoolVal(False)


# ------------------------------------------------------ the inductive invariant
# The seed's argument (BookKeeper's "Fencing" page, issue 2614): once E - AQ + 1 bookies are fenced no
# AQ-sized subset of any write set is left unfenced, so the writer's LAC cannot pass what recovery will
# find; and an entry recovery reports missing was missing on WQ - AQ + 1 fenced bookies of its write
# set, so no ack quorum of that write set held it, nor can one form.
# Notation below: W the writer, R the recovery client, lr = len(R) (entries recovery knows),
# closed = R leads, AQ the ack quorum, b ranges over bookies, ws(e) is entry e's write set (every
# bookie in the default ledger; striped round-robin otherwise). The invariant is over ledgers without
# spare bookies: ws(e) is then fixed by e (`BookKeeperEncoding.in_write_set` is a Python bool).
def _bookies(enc: BookKeeperEncoding) -> range:
    return range(enc.bookies)


def _write_set(enc: BookKeeperEncoding, s: Sym, p: int) -> list[tuple[int, Any]]:
    """The bookies that may be in entry p+1's write set (the metadata's), each with the condition that it
    is: True where the ledger has no spares (the entry fixes it), a formula over the fragments otherwise."""
    members = [(b, enc.in_write_set(s, b, p + 1)) for b in _bookies(enc)]
    return [(b, z3.BoolVal(True) if inside is True else inside) for b, inside in members if inside is not False]


def _count_in_write_set(enc, s, p: int, condition) -> Any:
    """#{b ∈ ws(p+1) : condition(b)}."""
    return enc.count([z3.And(inside, condition(b)) for b, inside in _write_set(enc, s, p)])


def _well_formed(enc: BookKeeperEncoding, s: Sym) -> z3.BoolRef:
    W, R = enc.writer, enc.recovery
    parts = [s.gen[W] == WRITER_GENERATION, s.alive[W], s.alive[R],
             s.gen[R] == z3.If(s.leader[R], RECOVERY_GENERATION, 0), s.hwm[R] == z3.If(s.leader[R], s.length[R], 0)]
    for i in range(enc.n):
        parts += [s.length[i] >= 0, s.length[i] <= enc.L, s.hwm[i] >= 0]
        for p in range(enc.L):
            # Every entry is the writer's (generation 1) and the clients' logs have no holes. Where the entry
            # fixes its write set, a bookie stores exactly its write sets' entries below its length (holes
            # elsewhere); with ensemble changes a replaced bookie keeps what it stored, and one that joins has
            # holes until the writer sends it its entries.
            if i >= enc.bookies or not enc.fragmented:
                stored = i >= enc.bookies or enc.in_write_set(s, i, p + 1)
                parts.append(z3.If(z3.And(p < s.length[i], stored), s.log[i][p] == WRITER_GENERATION,
                                   s.log[i][p] == 0))
            else:
                parts.append(z3.If(p < s.length[i], z3.Or(s.log[i][p] == 0, s.log[i][p] == WRITER_GENERATION),
                                   s.log[i][p] == 0))
        for j in range(enc.n):
            if i == W and j < enc.bookies:
                parts.append(z3.If(s.leader[W], z3.And(s.match[W][j] >= 0, s.match[W][j] <= s.length[W]),
                                   s.match[W][j] == 0))
            else:
                parts.append(s.match[i][j] == 0)
    for b in _bookies(enc):
        parts += [z3.Not(s.leader[b]), z3.Or(s.gen[b] == 0, s.gen[b] == WRITER_GENERATION)]
    for p in range(enc.L):
        for g in range(enc.max_generation + 1):
            if g != WRITER_GENERATION:
                parts += [z3.Not(s.ghost["read"][p][g]), z3.Not(s.extra["acked"][p][g])]
    return z3.And(parts)


def _logs_within_writers(enc, s):
    return z3.And([s.length[i] <= s.length[enc.writer] for i in range(enc.n)])


def _hwm_within_log(enc, s):
    return z3.And([s.hwm[i] <= s.length[i] for i in range(enc.n)])


def _acked_up_to_lac(enc, s):
    return z3.And([s.extra["acked"][p][WRITER_GENERATION] == (p < s.hwm[enc.writer]) for p in range(enc.L)])


def _acks_held(enc, s):
    W, R = enc.writer, enc.recovery
    # The close truncates a bookie to the closed ledger, and no further.
    return z3.Implies(s.leader[W], z3.And([
        z3.Implies(z3.And(inside, p < z3.If(enc.closed(s), smin(s.match[W][b], s.length[R]), s.match[W][b])),
                   enc._holds_entry(s, b, p))
        for p in range(enc.L) for b, inside in _write_set(enc, s, p)]))


def _lac_on_acks(enc, s):
    W = enc.writer
    return z3.Implies(s.leader[W], z3.And([
        z3.Implies(p < s.hwm[W], _count_in_write_set(enc, s, p, lambda b: s.match[W][b] > p) >= enc.ack_quorum)
        for p in range(enc.L)]))


def _lac_on_ack_quorum(enc, s):
    W = enc.writer
    return z3.And([z3.Implies(p < s.hwm[W], _count_in_write_set(enc, s, p, lambda b: enc._holds_entry(s, b, p))
                              >= enc.ack_quorum) for p in range(enc.L)])


def _bookie_lac_known(enc, s):
    W, R = enc.writer, enc.recovery
    bound = z3.If(enc.closed(s), s.length[R], s.hwm[W])
    return z3.And([s.hwm[b] <= bound for b in _bookies(enc)])


def _reads_below_lac(enc, s):
    W, R = enc.writer, enc.recovery
    return z3.And([z3.Implies(s.ghost["read"][p][WRITER_GENERATION],
                              z3.Or(p < s.hwm[W], z3.And(enc.closed(s), p < s.length[R]))) for p in range(enc.L)])


def _in_next_write_set(enc, s, b):
    """Bookie b is in the write set of entry lr + 1, the one recovery reads."""
    return enc._reading_from(s, b)


def _missing_is_fenced(enc, s):
    return z3.And([z3.Implies(s.extra["negatives"][b],
                              z3.And(s.extra["fenced"][b], _in_next_write_set(enc, s, b),
                                     z3.Or(enc.closed(s), _lacks_next(enc, s, b))))
                   for b in _bookies(enc)])


def _lacks_next(enc, s, b):
    """Bookie b does not store entry lr + 1, the one recovery reads."""
    R = enc.recovery
    return z3.And([z3.Implies(s.length[R] == p, z3.Not(enc._holds_entry(s, b, p))) for p in range(enc.L)])


def _fenced_in_recovery(enc, s):
    started = s.extra["fenced"] + s.extra["negatives"] + [s.length[enc.recovery] > 0]
    return z3.Implies(z3.Or(started), enc.recovering(s))


def _responded_are_fenced(enc, s):
    return z3.And([z3.Implies(s.extra["responded"][b], s.extra["fenced"][b]) for b in _bookies(enc)])


def _recovered_are_stored(enc, s):
    R = enc.recovery
    return z3.And([z3.Implies(p < s.length[R], _count_in_write_set(enc, s, p, lambda b: enc._holds_entry(s, b, p)) > 0)
                   for p in range(enc.L)])


def _closed_ledger_holds_the_lac(enc, s):
    W, R = enc.writer, enc.recovery
    stuck = enc.count([z3.And(s.extra["negatives"][b], s.extra["fenced"][b], s.match[W][b] <= s.length[R])
                       for b in _bookies(enc)])
    return z3.Implies(enc.closed(s), z3.And(s.hwm[W] <= s.length[R], stuck >= enc.missing_needed))


def _recovery_knows_the_lacs(enc, s):
    R = enc.recovery
    return z3.And([z3.Implies(s.extra["responded"][b], s.hwm[b] <= s.length[R]) for b in _bookies(enc)])


# Ensemble changes (`BookKeeperEncoding.keyed`: one fragment slot per first entry, the writer's and the
# metadata's); each is True for a ledger without spares (no fragments after the first).
# Over `BookKeeperEncoding._fragments`: the writer's fragment slots, and the metadata's (`stored`).
def _metadata_is_writers(enc, s):
    return z3.And([z3.And(on == meta_on, z3.Implies(on, z3.And([a == b for a, b in zip(ensemble, meta)])))
                   for (on, _, ensemble), (meta_on, _, meta) in zip(enc._fragments(s, stored=False),
                                                                    enc._fragments(s, stored=True))])


def _fragments_within_lac(enc, s):
    return z3.And([z3.Implies(on, first <= s.hwm[enc.writer] + 1) for on, first, _ in enc._fragments(s, stored=False)])


def _members_named(enc, s):
    if not enc.keyed:
        return z3.BoolVal(True)
    member = s.extra["member"]
    return z3.And([member[k] for k in range(enc.ensemble_size)] +
                  [z3.Implies(z3.And(on, enc.in_ensemble(ensemble, k)), member[k])
                   for on, _, ensemble in enc._fragments(s, stored=True) for k in _bookies(enc)])


def _closed_ledger_on_ack_quorum(enc, s):
    R = enc.recovery
    return z3.Implies(enc.closed(s), z3.And([
        z3.Implies(p < s.length[R], _count_in_write_set(enc, s, p, lambda b: enc._holds_entry(s, b, p))
                   >= enc.ack_quorum)
        for p in range(enc.L)]))


BOOKKEEPER_INVARIANT = tuple(Conjunct(*c) for c in (
    ("WellFormed", "ranges; every entry is the writer's; the clients' logs have no holes and a bookie stores "
     "exactly its write sets' entries below its length (with spare bookies: entries or holes); the writer "
     "alone has acknowledgements; recovery "
     "leads generation 2 with its HWM its length once it closed the ledger; reads and acknowledgements are "
     "of generation 1", _well_formed),
    ("LogsWithinWriters", "len(i) ≤ len(W): no log is longer than the writer's", _logs_within_writers),
    ("HwmWithinLog", "hwm(i) ≤ len(i)", _hwm_within_log),
    ("AckedUpToLac", "the acknowledged entries are exactly those up to the writer's LAC", _acked_up_to_lac),
    ("AcksHeld", "a bookie holds what it acknowledged (once closed, up to the closed ledger): b ∈ ws(p+1) and "
     "p < match(W, b) (min(match(W, b), lr) once closed) ⇒ b stores entry p+1", _acks_held),
    ("LacOnAcks", "AQ bookies of each entry's write set acknowledged it, up to the LAC: p < hwm(W) ⇒ "
     "#{b ∈ ws(p+1) : match(W, b) > p} ≥ AQ", _lac_on_acks),
    ("LacOnAckQuorum", "AQ bookies of each entry's write set hold it, up to the LAC: p < hwm(W) ⇒ "
     "#{b ∈ ws(p+1) : b stores entry p+1} ≥ AQ (the close keeps it: the LAC is within the closed ledger)",
     _lac_on_ack_quorum),
    ("BookieLacKnown", "a bookie's LAC ≤ the writer's (≤ lr once closed)", _bookie_lac_known),
    ("ReadsBelowLac", "a read entry is at or below the writer's LAC, or in the closed ledger", _reads_below_lac),
    ("MissingIsFenced", "a bookie that reported entry lr+1 missing is fenced, in ws(lr+1) and (before the close) "
     "does not store it", _missing_is_fenced),
    ("RespondedAreFenced", "a bookie that answered the fencing LAC read is fenced", _responded_are_fenced),
    ("FencedInRecovery", "a bookie is fenced or reports an entry missing, and recovery knows an entry, only once "
     "recovery began (a bookie answered the fencing LAC read)", _fenced_in_recovery),
    ("RecoveredAreStored", "every entry recovery knows is stored on some bookie of its write set",
     _recovered_are_stored),
    ("ClosedLedgerHoldsTheLac", "once closed: hwm(W) ≤ lr, and WQ - AQ + 1 fenced bookies of ws(lr+1) reported "
     "entry lr+1 missing with match(W, b) ≤ lr, so no ack quorum of ws(lr+1) can form past the closed ledger",
     _closed_ledger_holds_the_lac),
    ("RecoveryKnowsTheLacs", "a bookie that answered the fencing LAC read reported hwm(b) ≤ lr: recovery "
     "starts after the highest LAC reported", _recovery_knows_the_lacs),
    ("ClosedLedgerOnAckQuorum", "once closed, p < lr ⇒ #{b ∈ ws(p+1) : b stores entry p+1} ≥ AQ: the entries up to "
     "the LACs reported were on an ack quorum of their write sets, and recovery wrote those it read back to "
     "AQ live bookies of each write set before it closed", _closed_ledger_on_ack_quorum),
    ("MetadataIsWriters", "the ledger metadata holds the writer's fragments: the writer changes its ensemble only "
     "through the metadata's conditional write, and stops when that fails", _metadata_is_writers),
    ("FragmentsWithinLac", "a fragment starts at most one past the writer's LAC: a change starts a fragment at "
     "LAC + 1, and the LAC only grows", _fragments_within_lac),
    ("MembersNamed", "a bookie of a fragment's ensemble the metadata holds is a member of the ledger",
     _members_named),
))


def induction_encoding(protocol, servers: int, max_log: int) -> BookKeeperEncoding:
    """The ledger with crashes unbounded, integers (the generations are the two clients'); with spare
    bookies, one fragment slot per first entry (`BookKeeperEncoding.keyed`)."""
    return BookKeeperEncoding(protocol, servers, max_log)


def first_reachable_cti(protocol, enc: BookKeeperEncoding, servers: int, max_log: int, crashes: int,
                        max_states: int = 200_000):
    """The first state, breadth-first, that breaks `BOOKKEEPER_INVARIANT`, with its parent and the action:
    every state before it keeps the invariant, so its parent is a reachable counterexample to induction.
    None when every state within the bounds keeps it."""
    model = build_model(protocol, Config(servers=servers, max_log=max_log, max_crashes=crashes))
    evaluator = ConjunctEvaluator(enc, BOOKKEEPER_INVARIANT)
    start = model.initial_state()
    parents = {model.fingerprint(start): (None, None, start)}
    queue = deque([start])
    while queue and len(parents) < max_states:
        state = queue.popleft()
        for action, after in model.successors(state):
            key = model.fingerprint(after)
            if key in parents:
                continue
            parents[key] = (model.fingerprint(state), action, after)
            failed = evaluator.failed(after)
            if failed:
                trace, at = [], model.fingerprint(state)
                while parents[at][0] is not None:
                    trace.append(parents[at][1])
                    at = parents[at][0]
                cti = CTI(action, failed, state, after, None, None, violations(state, after), reachable=True,
                          trace=trace[::-1])
                return cti, len(parents)
            queue.append(after)
    return None, len(parents)


def induction_proof(name: str, protocol, *, broken: bool, servers: int = 3, max_log: int = 2,
                    explorer_crashes: int = 1, ledger=None):
    """BookKeeper's induction obligation (crashes unbounded; the generations are the two clients').

    A safe ledger must satisfy IndInit, IndNext and the safety implications. When IndNext fails, the
    explorer looks for the first reachable state that breaks the invariant: its parent and the action
    that reaches it are a reachable counterexample to induction (a real bug).
    """
    ledger = ledger_or_new(ledger)
    enc = induction_encoding(protocol, servers, max_log)
    result = check_induction(protocol, servers, max_log, BOOKKEEPER_INVARIANT, name=name, enc=enc, ledger=ledger)
    data = {"protocol": name, "servers": servers, "max_log": max_log, "crashes": "unbounded",
            "conjuncts": [c.name for c in BOOKKEEPER_INVARIANT], "init_failed": result.init_failed,
            "safety_failed": result.safety_failed, "actions_with_cti": [action_name(c.action) for c in result.ctis],
            "undecided": result.undecided}
    title = f"induction {name}"
    if result.ok:
        detail = (f"Inv ({len(BOOKKEEPER_INVARIANT)} conjuncts) holds initially, is preserved by all "
                  f"{len(result.per_action_seconds)} actions and implies {', '.join(checked_properties(protocol))} "
                  f"({servers} bookies, L={max_log}, crashes unbounded)")
        if broken:
            detail += " — but this preset is broken: the encoding and the explorer disagree"
        return Proof("induction", title, not broken, result.seconds, detail, data)
    if result.init_failed or result.undecided or not result.ctis:
        detail = ("IndInit fails for " + ", ".join(result.init_failed) if result.init_failed else
                  "undecided: " + ", ".join(result.undecided) if result.undecided else
                  "the safety implications fail: " + ", ".join(result.safety_failed))
        return Proof("induction", title, False, result.seconds, detail, data,
                     undecided=bool(result.undecided) and not result.init_failed)
    started = time.perf_counter()
    failing = sorted({f for c in result.ctis for f in c.failed})
    head = (f"IndNext fails on {len(result.ctis)} actions ({', '.join(action_name(c.action) for c in result.ctis)}; "
            f"conjuncts {', '.join(failing)})")
    bounds = f"{servers} bookies, log ≤ {max_log}, {explorer_crashes} crash"
    with ledger.obligation("induction", f"{title}: the first reachable state that breaks Inv ({bounds})",
                           record=False):
        cti, explored = first_reachable_cti(protocol, enc, servers, max_log, explorer_crashes)
    seconds = result.seconds + time.perf_counter() - started
    data["explorer_states"] = explored
    data["reachable"] = cti is not None
    if cti is not None:
        path = " ".join(action_name(a) for a in cti.trace) or "(the initial state)"
        cti.verdict = f"reachable: a real bug — the explorer reaches this pre-state in {len(cti.trace)} steps ({bounds}): {path}"
        data["cti"] = cti.describe()
        return Proof("induction", title, broken, seconds, f"{head}; a reachable CTI:\n{cti.describe()}", data)
    detail = (f"{head}; every state within {bounds} ({explored}) keeps Inv: the invariant needs strengthening, "
              f"or the bug larger bounds\n{result.ctis[0].describe()}")
    return Proof("induction", title, False, seconds, detail, data)


__all__ = ["BookKeeperEncoding", "BOOKKEEPER_INVARIANT", "induction_encoding", "induction_proof"]
