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

from itertools import permutations
from typing import Any

import z3

from hwm.model.bookkeeper import RECOVERY_GENERATION, WRITER_GENERATION, BookKeeperModel, BookKeeperState
from hwm.model.state import Config
from hwm.proofs.symbolic import Encoding, Sym, smax, smin
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

    def _guard_recovery_read(self, s: Sym, b: int) -> z3.BoolRef:
        return z3.And(z3.Not(self.closed(s)), self.count(s.extra["responded"]) >= self.fencing_needed,
                      s.alive[b], z3.Not(s.extra["negatives"][b]))

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
        t.crashes = s.crashes + 1
        return t

    def _effect_restart(self, s: Sym, r: int) -> Sym:
        t = s.copy()
        t.alive[r] = z3.BoolVal(True)
        return t


__all__ = ["BookKeeperEncoding", "unencoded_ledger"]
