"""Bounded model checking: the transition relation unrolled from the initial state.

Depth k asks z3 for a path of exactly k actions whose last step (or last state)
violates a property; k grows 1, 2, ... on one incremental solver (each depth's
query is pushed and popped, the path itself stays), so the first depth that is
satisfiable is the length of the shortest counterexample, which must equal the
breadth-first explorer's. The bounds are the explorer's (`Config`): generations,
log length and crashes are bounded exactly as the model's guards bound them.

Every trace z3 returns is replayed on the explicit model (`Model.why_not`,
`Model.apply`) and re-judged by the property catalogue before it is reported,
so an encoding slip shows up as a loud error, not as a wrong length.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from hwm.model.actions import to_step
from hwm.model.registry import build_model
from hwm.proofs.encodings import encoding_for
from hwm.proofs.progress import UNDECIDED, Ledger, ledger_or_new
from hwm.proofs.symbolic import Proof, Sym, checked_properties
from hwm.model.state import Config, State
from hwm.properties.protocol import Protocol


@dataclass
class BmcResult:
    property: str
    length: int | None  # shortest violation, None when none up to `depth`
    depth: int  # the depth searched
    actions: list | None
    seconds: float
    undecided: str = ""  # why z3 did not answer at depth + 1 (its timeout), so longer ones were not searched

    @property
    def steps(self) -> list[str] | None:
        return [str(to_step(a)) for a in self.actions] if self.actions is not None else None


class EncodingMismatch(AssertionError):
    """z3's trace does not replay on the explicit model: the encoding and model/actions.py disagree."""


def replay(protocol: Protocol, config: Config, actions: list, prop: str) -> list[State]:
    """Run `actions` on the explicit model; EncodingMismatch unless each is enabled and the last violates `prop`."""
    model = build_model(protocol, config)
    state = model.initial_state()
    states = [state]
    for number, action in enumerate(actions, 1):
        reason = model.why_not(state, action)
        if reason is not None:
            raise EncodingMismatch(f"step {number} {to_step(action)} is not enabled on the model: {reason}")
        state = model.apply(state, action)
        states.append(state)
    p = {q.name: q for q in model.properties}[prop]
    finding = p.check(states[-2], states[-1]) if p.on == "step" else p.check(states[-1])
    if not finding:
        raise EncodingMismatch(f"the trace replays but does not violate {prop} on the model")
    return states


def bmc(protocol: Protocol, config: Config, properties: tuple[str, ...] = ("ReadNeverTruncated",),
        max_depth: int = 12, *, check_replay: bool = True, ledger: Ledger | None = None,
        name: str = "") -> dict[str, BmcResult]:
    """The shortest violation of each property within `max_depth` steps (None beyond).

    Each (property, depth) query is one obligation of `ledger`: it holds when no violation
    is exactly that many steps long. A property whose query z3 leaves undecided is not
    searched deeper.
    """
    ledger = ledger_or_new(ledger)
    if config.network != "rpc":
        raise ValueError("bounded model checking encodes the rpc network only")
    checked = checked_properties(protocol)
    unknown = [p for p in properties if p not in checked]
    if unknown:
        raise ValueError(f"unknown property {unknown[0]!r}; BMC checks " + ", ".join(checked))
    enc = encoding_for(protocol, config.servers, config.max_log, max_generation=config.max_generation,
                       max_crashes=config.max_crashes, max_partitions=config.max_partitions, bitvectors=True)
    started = time.perf_counter()
    solver = ledger.limit(z3.SolverFor("QF_BV"))
    states: list[Sym] = [enc.fresh("s0")]
    solver.add(enc.init(states[0]))
    choices: list[z3.ArithRef] = []
    results: dict[str, BmcResult] = {}
    remaining = list(properties)
    for depth in range(1, max_depth + 1):
        if not remaining:
            break
        before, after = states[-1], enc.fresh(f"s{depth}")
        choice = enc.choice(f"action{depth}")
        solver.add(enc.step(before, after, choice), enc.bounds(after))
        if depth == 1:
            # Symmetry: some renaming of servers turns any path into one starting like this.
            solver.add(z3.Or([choice == k for k in enc.first_actions()]))
        states.append(after)
        choices.append(choice)
        for prop in list(remaining):
            solver.push()
            solver.add(enc.violation(prop, before, after))
            with ledger.obligation("bmc", f"bmc {name}: {prop} at depth {depth}".replace("  ", " ")) as ob:
                if ledger.check(solver) == z3.sat:
                    m = solver.model()
                    actions = [enc.actions[m.eval(c, model_completion=True).as_long()] for c in choices]
                    if check_replay:
                        replay(protocol, config, actions, prop)
                    ob.fail(f"a violation in {depth} steps")
                    results[prop] = BmcResult(prop, depth, depth, actions, time.perf_counter() - started)
                    remaining.remove(prop)
            if ob.verdict == UNDECIDED:
                results[prop] = BmcResult(prop, None, depth - 1, None, time.perf_counter() - started,
                                          undecided=f"depth {depth}: {ob.detail}")
                remaining.remove(prop)
            solver.pop()
    for prop in remaining:
        results[prop] = BmcResult(prop, None, max_depth, None, time.perf_counter() - started)
    return results


def bmc_proof(name: str, protocol: Protocol, config: Config, *, broken: bool, max_depth: int,
              properties: tuple[str, ...] = ("ReadNeverTruncated",),
              explorer_lengths: dict[str, int | None] | None = None, ledger: Ledger | None = None) -> Proof:
    """BMC as a proof obligation: a broken protocol must show its violation, a safe one none up to the depth.

    With `explorer_lengths`, each length must also equal the breadth-first explorer's.
    """
    started = time.perf_counter()
    results = bmc(protocol, config, properties, max_depth, ledger=ledger, name=name)
    seconds = time.perf_counter() - started
    summary, traces, ok = [], [], True
    for prop in properties:
        r = results[prop]
        if r.undecided:
            text = f"{prop}: none in {r.depth} steps, undecided at {r.undecided}"
        elif r.length is None:
            text = f"{prop}: none in {r.depth} steps"
        else:
            text = f"{prop}: {r.length} steps"
            traces.append(f"{prop}: " + " ".join(r.steps))
        if explorer_lengths is not None and prop in explorer_lengths:
            theirs = explorer_lengths[prop]
            agree = theirs == r.length or (r.length is None and theirs is not None and theirs > r.depth)
            text += f" (explorer: {theirs if theirs is not None else 'none'}{'' if agree else ', DISAGREES'})"
            ok = ok and agree
        summary.append(text)
    found = any(r.length is not None for r in results.values())
    ok = ok and (found if broken else not found)
    # A query z3 left undecided leaves its property's shortest length unknown: a proof that would
    # otherwise be met is undecided.
    undecided = ok and any(r.undecided for r in results.values())
    expectation = "expected a violation" if broken else "expected none"
    lines = [f"{config.describe()}, {expectation}: " + "; ".join(summary)] + traces
    data = {"protocol": name, "config": config.to_mapping(), "broken": broken,
            "results": {p: {"length": r.length, "depth": r.depth, "steps": r.steps, "undecided": r.undecided or None}
                        for p, r in results.items()}}
    return Proof("bmc", f"bmc {name}", ok and not undecided, seconds, "\n".join(lines), data, undecided=undecided)
