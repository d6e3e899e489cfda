"""The obligations of one `hwm prove` run, as they are decided.

Every z3 query the proofs make belongs to a named obligation (`IndNext write(S1)`,
`ReadNeverTruncated at depth 7`, a quorum claim). The `Ledger` times each one, says
on its report line when one starts and how it ended, applies z3's timeout to every
solver, and keeps the verdicts, so a run that is stopped (SIGTERM, Ctrl-C) can still
print what it decided.

An obligation's verdict is `holds` (z3 proved it: the query was unsatisfiable),
`fails` (z3 found a counterexample: a CTI, a violation at that depth), or `undecided`
(z3 answered unknown: its timeout, or the run was interrupted).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import z3

HOLDS, FAILS, UNDECIDED = "holds", "fails", "undecided"


class Undecided(Exception):
    """z3 answered unknown; the obligation it belongs to is undecided (the run goes on)."""


class Interrupted(Exception):
    """The run was stopped (SIGTERM, Ctrl-C): no further obligation is started."""


@dataclass
class Obligation:
    part: str  # quorum | induction | bmc
    name: str  # e.g. "induction raft: IndNext write(S1)"
    verdict: str = HOLDS
    seconds: float = 0.0
    detail: str = ""  # why undecided, what failed
    cti: str | None = None  # a counterexample to induction, as `CTI.describe` writes it

    def fail(self, detail: str = "", cti: str | None = None) -> None:
        self.verdict, self.detail = FAILS, detail or self.detail
        if cti is not None:
            self.cti = cti

    def to_json(self) -> dict[str, Any]:
        out = {"part": self.part, "name": self.name, "verdict": self.verdict, "seconds": round(self.seconds, 3)}
        if self.detail:
            out["detail"] = self.detail
        if self.cti is not None:
            out["cti"] = self.cti
        return out


@dataclass
class Ledger:
    """The run's obligations, its z3 timeout, and where its progress lines go.

    `timeout`: seconds z3 may spend on one query (None: no limit). `report`: called with
    one line as each obligation starts and ends (None: silent, as the library's callers
    want it).
    """

    timeout: float | None = None
    report: Callable[[str], None] | None = None
    obligations: list[Obligation] = field(default_factory=list)
    proofs: list = field(default_factory=list)  # the `Proof`s finished so far
    interrupted_by: str | None = None
    started: float = field(default_factory=time.perf_counter)
    _contexts: list = field(default_factory=list)
    _running: list = field(default_factory=list)  # (name, started) of the obligations under way, innermost last
    _last_line: float = field(default_factory=time.perf_counter)

    # ------------------------------------------------------------- z3
    def limit(self, solver):
        """`solver` (a Solver or Optimize) with the run's timeout applied.

        z3 would otherwise take SIGINT for itself during a query and cancel only that query;
        the run's own handler stops the whole run instead (`interrupt`).
        """
        solver.set("ctrl_c", False)
        if self.timeout is not None:
            solver.set("timeout", max(1, int(self.timeout * 1000)))
        return solver

    def context(self) -> z3.Context:
        """A fresh z3 context that `interrupt` reaches too."""
        ctx = z3.Context()
        self._contexts.append(ctx)
        return ctx

    def check(self, solver, *assumptions) -> z3.CheckSatResult:
        """sat or unsat; Undecided on unknown (Interrupted when the run was stopped)."""
        if self.interrupted_by:
            raise Interrupted(self.interrupted_by)
        verdict = solver.check(*assumptions)
        if verdict == z3.unknown:
            if self.interrupted_by:
                raise Interrupted(self.interrupted_by)
            reason = solver.reason_unknown()
            raise Undecided(f"z3's timeout of {self.timeout:g}s" if self.timeout is not None and
                            reason in ("timeout", "canceled") else f"z3 gave up: {reason}")
        return verdict

    def interrupt(self, why: str) -> None:
        """Stop the run (from a signal handler): z3's running query returns unknown, no new one starts."""
        self.interrupted_by = why
        z3.main_ctx().interrupt()
        for ctx in self._contexts:
            ctx.interrupt()

    # ------------------------------------------------------------ obligations
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def say(self, text: str) -> None:
        if self.report is not None:
            self._last_line = time.perf_counter()
            self.report(f"[{self.elapsed():7.1f}s] {text}")

    def heartbeat(self, every: float) -> None:
        """When no line was written for `every` seconds, say what is still running (a long z3 query,
        the explorer's search): called by whoever waits for the proofs."""
        if self._running and time.perf_counter() - self._last_line >= every:
            name, since = self._running[-1]
            self.say(f"{name}: still running ({time.perf_counter() - since:.0f}s)")

    @contextmanager
    def obligation(self, part: str, name: str, *, record: bool = True) -> Iterator[Obligation]:
        """Time one obligation, announce it, and record its verdict (`Undecided` ends it as undecided).

        With record=False it is work that is announced but is no obligation (the explorer's search).
        """
        ob = Obligation(part, name)
        self.say(f"{name} …")
        t0 = time.perf_counter()
        self._running.append((name, t0))
        try:
            yield ob
        except Undecided as e:
            ob.verdict, ob.detail = UNDECIDED, str(e)
        except Exception as e:
            if not self.interrupted_by:
                raise
            # Once interrupted, z3 cancels whatever it is asked next (a push, a check) with an error.
            ob.verdict, ob.detail = UNDECIDED, f"interrupted by {self.interrupted_by}"
            if isinstance(e, Interrupted):
                raise
            raise Interrupted(self.interrupted_by) from e
        finally:
            self._running.pop()
            ob.seconds = time.perf_counter() - t0
            if record:
                self.obligations.append(ob)
            shown = ob.verdict if record or ob.verdict != HOLDS else "done"
            self.say(f"{name}: {shown}" + (f" ({ob.detail})" if ob.verdict != HOLDS and ob.detail else "")
                     + f" in {ob.seconds:.2f}s")

    def undecided(self, part: str | None = None) -> list[Obligation]:
        return [o for o in self.obligations if o.verdict == UNDECIDED and (part is None or o.part == part)]


def ledger_or_new(ledger: Ledger | None) -> Ledger:
    return ledger if ledger is not None else Ledger()
