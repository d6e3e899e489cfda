"""BookKeeper's ledger (`model/bookkeeper.py`) as z3 formulas, for bounded model checking.

`model/bookkeeper.py` is normative: each guard and effect below transcribes one there, and
`Encoding.disagreements` compares them on sampled reachable states
(tests/proofs/test_bookkeeper_bmc.py); every BMC trace is replayed on `BookKeeperModel`.

As in the model, the state's servers are the bookies S1..Sn, then the writer (the leader of
generation 1, its HWM the last-add-confirmed, its `match` what each bookie acknowledged) and
the recovery client (the leader of generation 2 once it closes the ledger, its log the closed
ledger). Ledger-wide fields are in `Sym.extra`, one boolean per bookie: `fenced`, `responded`
(answered the fencing LAC read), `negatives` (answered "no such entry" for the entry recovery is
reading); and the ghost set `acked` of entries acknowledged to the writer's client.

Only the default ledger is encoded: the ensemble is every bookie, write quorum = ensemble, ack
quorum a majority (the `bookkeeper` and `bookkeeper-recovery-without-fencing` presets). Striping,
spare bookies and ensemble changes (`ensemble_size`, `write_quorum`, `ack_quorum`) are not:
`unencoded` refuses them.
"""

from __future__ import annotations

import time
from collections import deque
from itertools import permutations
from typing import Any

import z3

from hwm.model.bookkeeper import RECOVERY_GENERATION, WRITER_GENERATION, BookKeeperModel, BookKeeperState
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.induction import CTI, Conjunct, ConjunctEvaluator, check_induction
from hwm.proofs.progress import ledger_or_new
from hwm.proofs.symbolic import Encoding, Proof, Sym, action_name, checked_properties, smax, smin
from hwm.properties.catalogue import violations
from hwm.properties.quorum import majority


def unencoded_ledger(protocol) -> str | None:
    """Why the encoding cannot stand for this BookKeeper protocol's ledger, or None."""
    shaped = [f"{flag}={getattr(protocol, flag)}" for flag, default in
              (("ensemble_size", "all"), ("write_quorum", "ensemble"), ("ack_quorum", "majority"))
              if getattr(protocol, flag) != default]
    if shaped:
        return (f"the z3 encoding has the default ledger only (every bookie in the ensemble, write quorum = "
                f"ensemble, ack quorum a majority), not {', '.join(shaped)}")
    return None


class BookKeeperEncoding(Encoding):
    """`model.bookkeeper.BookKeeperModel` (default ledger) over `Sym` states: bookies, writer, recovery."""

    def __init__(self, protocol, servers: int, max_log: int, **bounds):
        why = unencoded_ledger(protocol)
        if why:
            raise ValueError(why)
        # Generations are the writer's and recovery's only; the model ignores max_generation.
        bounds["max_generation"] = RECOVERY_GENERATION
        super().__init__(protocol, servers + 2, max_log, **bounds)
        if not self.exact_reads or self.ghost_commits:
            raise ValueError("the BookKeeper encoding is for bounded model checking (no commit ghost)")
        self.bookies = servers
        self.writer, self.recovery = servers, servers + 1
        model = BookKeeperModel(protocol, Config(servers=servers, max_log=max_log, max_crashes=self.max_crashes))
        self.actions = model.action_table()
        self.ack_quorum = majority(servers)
        self.fencing_needed = model.fencing_needed
        self.missing_needed = model.missing_needed
        self.reads_fence = protocol.bookkeeper_recovery_reads_fence

    # ------------------------------------------------------------------ state
    def fresh(self, tag: str) -> Sym:
        s = super().fresh(tag)
        B = z3.Bool
        s.extra = {name: [B(f"{tag}_{name}_{b}") for b in range(self.bookies)]
                   for name in ("fenced", "responded", "negatives")}
        s.extra["acked"] = [[B(f"{tag}_acked_{p}_{g}") for g in range(self.max_generation + 1)] for p in range(self.L)]
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
        if s.crashes is not None:
            parts.append(s.crashes == 0)
        return z3.And(parts)

    def extra_values(self, state: BookKeeperState) -> list:
        bits = [bool(mask >> b & 1) for mask in (state.fenced, state.responded, state.negatives)
                for b in range(self.bookies)]
        return bits + [(p + 1, g) in state.acked for p in range(self.L) for g in range(self.max_generation + 1)]

    def concrete(self, model: z3.ModelRef, s: Sym) -> BookKeeperState:
        base = super().concrete(model, s)

        def mask(name: str) -> int:
            return sum(1 << b for b in range(self.bookies)
                       if z3.is_true(model.eval(s.extra[name][b], model_completion=True)))

        acked = frozenset((p + 1, g) for p in range(self.L) for g in range(self.max_generation + 1)
                          if z3.is_true(model.eval(s.extra["acked"][p][g], model_completion=True)))
        return BookKeeperState(base.servers, base.reads, base.crashes, (), mask("fenced"), mask("responded"),
                               mask("negatives"), acked)

    def first_actions(self) -> list[int]:
        """One action per orbit under renaming bookies (the clients keep their places)."""
        index = {a: k for k, a in enumerate(self.actions)}
        keep = []
        for k, (name, *args) in enumerate(self.actions):
            if all(index[(name, *[perm[a] for a in args])] >= k for perm in permutations(range(self.bookies))):
                keep.append(k)
        return keep

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

    def _count(self, flags: list) -> Any:
        return self.count(flags)

    # ------------------------------------------------------------ the writer
    def _guard_add(self, s: Sym) -> z3.BoolRef:
        return z3.And(s.leader[self.writer], s.length[self.writer] < self.L)

    def _effect_add(self, s: Sym) -> Sym:
        t = s.copy()
        w = self.writer
        t.log[w] = [z3.If(s.length[w] == p, self.value(WRITER_GENERATION), s.log[w][p]) for p in range(self.L)]
        t.length[w] = s.length[w] + 1
        return t

    def _pending(self, s: Sym, b: int) -> z3.BoolRef:
        """Some entry of the writer's that bookie b does not store."""
        return z3.Or([z3.And(p < s.length[self.writer], z3.Not(self._holds_entry(s, b, p))) for p in range(self.L)])

    def _guard_send_add(self, s: Sym, b: int) -> z3.BoolRef:
        w = self.writer
        return z3.And(s.leader[w], s.alive[b], z3.Or(self._pending(s, b), s.hwm[b] < s.hwm[w]))

    def _effect_send_add(self, s: Sym, b: int) -> Sym:
        w = self.writer
        # A fenced bookie refuses the add: the writer learns the ledger is fenced and stops.
        refused = s.copy()
        refused.leader[w] = z3.BoolVal(False)
        refused.match[w] = [self.value(0)] * self.n
        # The adds carry the writer's LAC; the bookie stores every entry it lacks.
        t = s.copy()
        t.log[b] = [z3.If(p < s.length[w], self.value(WRITER_GENERATION), s.log[b][p]) for p in range(self.L)]
        t.length[b] = smax([s.length[b], s.length[w]])
        hwm = smax([s.hwm[b], s.hwm[w]])
        self._shape(t, b, hwm)
        t.hwm[b] = hwm
        t.gen[b] = self.value(WRITER_GENERATION)
        t.leader[b] = z3.BoolVal(False)
        t.alive[b] = z3.BoolVal(True)
        t.match[b] = [self.value(0)] * self.n
        t.match[w] = [s.length[w] if j == b else s.match[w][j] for j in range(self.n)]
        # The LAC: from the last one, each next entry an ack quorum of bookies acknowledged.
        lac, going = s.hwm[w], z3.BoolVal(True)
        for _ in range(self.L):
            going = z3.And(going, lac < s.length[w],
                           self.count([t.match[w][k] > lac for k in range(self.bookies)]) >= self.ack_quorum)
            lac = z3.If(going, lac + 1, lac)
        t.hwm[w] = lac
        # The add callbacks complete in order up to the LAC.
        acked = t.extra["acked"]
        for p in range(self.L):
            acked[p] = [z3.Or(v, p < lac) if g == WRITER_GENERATION else v for g, v in enumerate(acked[p])]
        return self._choose(s.extra["fenced"][b], refused, t)

    # ----------------------------------------------------------- recovery
    def _guard_fence(self, s: Sym, b: int) -> z3.BoolRef:
        return z3.And(z3.Not(self.closed(s)), s.alive[b], z3.Not(s.extra["responded"][b]))

    def _effect_fence(self, s: Sym, b: int) -> Sym:
        # The bookie is fenced and answers with its LAC; recovery starts after the highest one.
        r = self.recovery
        start = s.hwm[b]
        later = start > s.length[r]
        t = s.copy()
        t.log[r] = [z3.If(later, z3.If(p < start, self.value(WRITER_GENERATION), self.value(0)), s.log[r][p])
                    for p in range(self.L)]
        t.length[r] = z3.If(later, start, s.length[r])
        t.extra["fenced"][b] = z3.BoolVal(True)
        t.extra["responded"][b] = z3.BoolVal(True)
        return t

    def recovery_start(self, s: Sym) -> Any:
        """`BookKeeperModel.recovery_start`: the highest LAC the fencing answers reported."""
        return smax([self.value(0)] + [z3.If(s.extra["responded"][k], s.hwm[k], self.value(0))
                                       for k in range(self.bookies)])

    def _guard_recovery_read(self, s: Sym, b: int) -> z3.BoolRef:
        r = self.recovery
        held = z3.Or([z3.And(s.length[r] == p, self._holds_entry(s, b, p)) for p in range(self.L)])
        closes = z3.And(z3.Not(held), self.count(s.extra["negatives"]) + 1 >= self.missing_needed)
        # `BookKeeperModel._unwritable`: the entries recovery read are written back to an ack quorum first.
        unwritable = z3.And(s.length[r] > self.recovery_start(s),
                            self.count([s.alive[k] for k in range(self.bookies)]) < self.ack_quorum)
        return z3.And(z3.Not(self.closed(s)), self.count(s.extra["responded"]) >= self.fencing_needed,
                      s.alive[b], z3.Not(s.extra["negatives"][b]), z3.Not(z3.And(closes, unwritable)))

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
        for k in range(self.bookies):
            # A live bookie gets the closed ledger written back; a down one keeps its prefix.
            written = closing.copy()
            written.log[k] = [z3.If(p < end, self.value(WRITER_GENERATION), self.value(0)) for p in range(self.L)]
            written.length[k] = end
            written.hwm[k] = end
            kept = closing.copy()
            kept.length[k] = smin(s.length[k], end)
            hwm = smin(s.hwm[k], end)
            self._shape(kept, k, hwm)
            kept.hwm[k] = hwm
            closing = self._choose(s.alive[k], written, kept)
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


# ------------------------------------------------------ the inductive invariant
# The seed's argument (BookKeeper's "Fencing" page, issue 2614): once E - AQ + 1 bookies are fenced no
# ack quorum of unfenced bookies is left, so the writer's LAC cannot pass what recovery will find; and
# an entry recovery reports missing was missing on WQ - AQ + 1 fenced bookies, so no ack quorum held it.
# Notation below: W the writer, R the recovery client, lr = len(R) (entries recovery knows),
# closed = R leads, AQ the ack quorum, b ranges over bookies.
def _bookies(enc: BookKeeperEncoding) -> range:
    return range(enc.bookies)


def _well_formed(enc: BookKeeperEncoding, s: Sym) -> z3.BoolRef:
    W, R = enc.writer, enc.recovery
    parts = [s.gen[W] == WRITER_GENERATION, s.alive[W], s.alive[R],
             s.gen[R] == z3.If(s.leader[R], RECOVERY_GENERATION, 0), s.hwm[R] == z3.If(s.leader[R], s.length[R], 0)]
    for i in range(enc.n):
        parts += [s.length[i] >= 0, s.length[i] <= enc.L, s.hwm[i] >= 0]
        # Every entry is the writer's (generation 1), and a default ledger's logs have no holes.
        parts += [z3.If(p < s.length[i], s.log[i][p] == WRITER_GENERATION, s.log[i][p] == 0) for p in range(enc.L)]
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
        z3.If(enc.closed(s), smin(s.match[W][b], s.length[R]), s.match[W][b]) <= s.length[b]
        for b in _bookies(enc)]))


def _lac_on_acks(enc, s):
    W = enc.writer
    acked = enc.count([s.match[W][b] >= s.hwm[W] for b in _bookies(enc)])
    return z3.Implies(z3.And(s.leader[W], s.hwm[W] > 0), acked >= enc.ack_quorum)


def _lac_on_ack_quorum(enc, s):
    W = enc.writer
    return enc.count([s.length[b] >= s.hwm[W] for b in _bookies(enc)]) >= enc.ack_quorum


def _bookie_lac_known(enc, s):
    W, R = enc.writer, enc.recovery
    bound = z3.If(enc.closed(s), s.length[R], s.hwm[W])
    return z3.And([s.hwm[b] <= bound for b in _bookies(enc)])


def _reads_below_lac(enc, s):
    W, R = enc.writer, enc.recovery
    return z3.And([z3.Implies(s.ghost["read"][p][WRITER_GENERATION],
                              z3.Or(p < s.hwm[W], z3.And(enc.closed(s), p < s.length[R]))) for p in range(enc.L)])


def _missing_is_fenced(enc, s):
    R = enc.recovery
    return z3.And([z3.Implies(s.extra["negatives"][b],
                              z3.And(s.extra["fenced"][b], z3.Or(enc.closed(s), s.length[b] <= s.length[R])))
                   for b in _bookies(enc)])


def _responded_are_fenced(enc, s):
    return z3.And([z3.Implies(s.extra["responded"][b], s.extra["fenced"][b]) for b in _bookies(enc)])


def _recovered_are_stored(enc, s):
    R = enc.recovery
    return z3.And([z3.Implies(p < s.length[R], z3.Or([s.length[b] > p for b in _bookies(enc)]))
                   for p in range(enc.L)])


def _closed_ledger_holds_the_lac(enc, s):
    W, R = enc.writer, enc.recovery
    stuck = enc.count([z3.And(s.extra["negatives"][b], s.extra["fenced"][b], s.match[W][b] <= s.length[R])
                       for b in _bookies(enc)])
    return z3.Implies(enc.closed(s), z3.And(s.hwm[W] <= s.length[R], stuck >= enc.missing_needed))


def _recovery_knows_the_lacs(enc, s):
    R = enc.recovery
    return z3.And([z3.Implies(s.extra["responded"][b], s.hwm[b] <= s.length[R]) for b in _bookies(enc)])


def _closed_ledger_on_ack_quorum(enc, s):
    R = enc.recovery
    return z3.Implies(enc.closed(s), enc.count([s.length[b] >= s.length[R] for b in _bookies(enc)]) >= enc.ack_quorum)


BOOKKEEPER_INVARIANT = tuple(Conjunct(*c) for c in (
    ("WellFormed", "ranges; every entry is the writer's and logs have no holes; the writer alone has "
     "acknowledgements; recovery leads generation 2 with its HWM its length once it closed the ledger; "
     "reads and acknowledgements are of generation 1", _well_formed),
    ("LogsWithinWriters", "len(i) ≤ len(W): every log is a prefix of the writer's", _logs_within_writers),
    ("HwmWithinLog", "hwm(i) ≤ len(i)", _hwm_within_log),
    ("AckedUpToLac", "the acknowledged entries are exactly those up to the writer's LAC", _acked_up_to_lac),
    ("AcksHeld", "a bookie holds what it acknowledged (once closed, up to the closed ledger): match(W, b) ≤ "
     "len(b), min(match(W, b), lr) ≤ len(b)", _acks_held),
    ("LacOnAcks", "an ack quorum acknowledged the LAC: #{b : match(W, b) ≥ hwm(W)} ≥ AQ", _lac_on_acks),
    ("LacOnAckQuorum", "an ack quorum of bookies holds the LAC: #{b : len(b) ≥ hwm(W)} ≥ AQ (the close keeps it: "
     "the LAC is within the closed ledger)",
     _lac_on_ack_quorum),
    ("BookieLacKnown", "a bookie's LAC ≤ the writer's (≤ lr once closed)", _bookie_lac_known),
    ("ReadsBelowLac", "a read entry is at or below the writer's LAC, or in the closed ledger", _reads_below_lac),
    ("MissingIsFenced", "a bookie that reported entry lr+1 missing is fenced and (before the close) lacks it: "
     "len(b) ≤ lr", _missing_is_fenced),
    ("RespondedAreFenced", "a bookie that answered the fencing LAC read is fenced", _responded_are_fenced),
    ("RecoveredAreStored", "every entry recovery knows is stored on some bookie", _recovered_are_stored),
    ("ClosedLedgerHoldsTheLac", "once closed: hwm(W) ≤ lr, and WQ - AQ + 1 fenced bookies reported entry lr+1 "
     "missing with match(W, b) ≤ lr, so no ack quorum can form past the closed ledger",
     _closed_ledger_holds_the_lac),
    ("RecoveryKnowsTheLacs", "a bookie that answered the fencing LAC read reported hwm(b) ≤ lr: recovery "
     "starts after the highest LAC reported", _recovery_knows_the_lacs),
    ("ClosedLedgerOnAckQuorum", "once closed, #{b : len(b) ≥ lr} ≥ AQ: the entries up to the LACs reported "
     "were on an ack quorum, and recovery wrote those it read back to AQ live bookies before it closed",
     _closed_ledger_on_ack_quorum),
))


def induction_encoding(protocol, servers: int, max_log: int) -> BookKeeperEncoding:
    """The default ledger with crashes unbounded, integers (the generations are the two clients')."""
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


__all__ = ["BookKeeperEncoding", "BOOKKEEPER_INVARIANT", "induction_encoding", "induction_proof", "unencoded_ledger"]
