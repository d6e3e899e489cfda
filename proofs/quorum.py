"""The quorum arithmetic of `properties/quorum.py`, proved with z3 for every N up to a bound.

The code sorts the match indexes and takes one position. Both rules and every
characterisation below depend only on the multiset of match indexes, never on
which server holds which, so "sorted descending" is encoded by taking the
symbolic indexes y_0 ≥ y_1 ≥ ... ≥ y_{N-1} ≥ 0 (what `sorted(..., reverse=True)`
returns); `majority` is then y[⌊N/2⌋] and `seed-index` (ascending, position N/2)
is y[N-1-⌊N/2⌋]. Each claim is checked for all such vectors at once:

- `majority` picks an index held by ⌊N/2⌋+1 servers, one of the match indexes,
  and no larger index is held by a majority; it is the only v with
  #{m ≥ v} ≥ maj and #{m ≥ v+1} < maj;
- any two majorities of N servers intersect;
- `seed-index` meets that characterisation for every odd N and fails it for
  every even N; z3 gives the smallest counterexample (least sum of match
  indexes), which is then run through the real `properties.quorum.quorum_index`,
  so the proof and the code cannot drift apart unnoticed;
- the sorting network the induction and BMC encodings use for the quorum index
  sorts every 0/1 vector, hence every vector (Knuth's 0-1 principle: it is made
  of compare-exchange steps only), and evaluates like the code on random vectors.
"""

from __future__ import annotations

import random

import z3

from hwm.proofs.progress import HOLDS, UNDECIDED, Ledger, ledger_or_new
from hwm.proofs.symbolic import Proof, _exchange_bool, count, quorum_index, sorted_descending
from hwm.properties import quorum as code
from hwm.properties.quorum import majority


def _descending(n: int) -> list[z3.ArithRef]:
    """Symbolic match indexes as `sorted(..., reverse=True)` returns them, and their constraints."""
    return [z3.Int(f"y{k}") for k in range(n)]


def _sorted_constraints(ys: list) -> list:
    return [y >= 0 for y in ys] + [ys[k] >= ys[k + 1] for k in range(len(ys) - 1)]


def _holders(ys: list, v) -> z3.ArithRef:
    return count([y >= v for y in ys])


def _check(*constraints, ledger: Ledger | None = None) -> z3.ModelRef | None:
    """None when the constraints are unsatisfiable (the claim they negate is proved), else a model
    (`Undecided` when z3 answers unknown)."""
    ledger = ledger_or_new(ledger)
    solver = ledger.limit(z3.SolverFor("QF_LIA"))
    solver.add(*constraints)
    return solver.model() if ledger.check(solver) == z3.sat else None


def majority_is_largest_majority_held(n: int, ledger: Ledger | None = None) -> bool:
    ys = _descending(n)
    q, maj, v = ys[majority(n) - 1], majority(n), z3.Int("v")
    # The negation, quantifier-free: q is not a value, or not held by maj, or some larger v is.
    return _check(*_sorted_constraints(ys), z3.Or(z3.And([y != q for y in ys]), _holders(ys, q) < maj,
                                                  z3.And(v > q, _holders(ys, v) >= maj)),
                  ledger=ledger) is None


def majority_is_unique_threshold(n: int, ledger: Ledger | None = None) -> bool:
    """The v with #{m ≥ v} ≥ maj and #{m ≥ v+1} < maj is unique and is the order statistic."""
    ys = _descending(n)
    q, maj, v = ys[majority(n) - 1], majority(n), z3.Int("v")

    def threshold(w):
        return z3.And(_holders(ys, w) >= maj, _holders(ys, w + 1) < maj)

    return _check(*_sorted_constraints(ys), z3.Or(z3.Not(threshold(q)), z3.And(threshold(v), v != q)),
                  ledger=ledger) is None


def majorities_intersect(n: int, ledger: Ledger | None = None) -> bool:
    a = [z3.Bool(f"a{k}") for k in range(n)]
    b = [z3.Bool(f"b{k}") for k in range(n)]
    maj = majority(n)
    return _check(count(a) >= maj, count(b) >= maj, *[z3.Not(z3.And(x, y)) for x, y in zip(a, b)],
                  ledger=ledger) is None


def network_sorts(n: int, ledger: Ledger | None = None) -> bool:
    """Every 0/1 input leaves the network descending (0-1 principle: then every input does)."""
    bits = [z3.Bool(f"b{k}") for k in range(n)]
    out = sorted_descending(bits, _exchange_bool)
    unsorted = [z3.And(z3.Not(out[k]), out[k + 1]) for k in range(n - 1)]
    return not unsorted or _check(z3.Or(unsorted), ledger=ledger) is None


def seed_index_counterexample(n: int, ledger: Ledger | None = None) -> list[int] | None:
    """None when seed-index picks the largest majority-held index for every vector of N servers;
    else the smallest vector (least sum) where it does not, in ascending order."""
    ys = _descending(n)
    seed, maj, v = ys[n - 1 - n // 2], majority(n), z3.Int("v")
    wrong = z3.Or(_holders(ys, seed) < maj, z3.And(v > seed, _holders(ys, v) >= maj))
    if _check(*_sorted_constraints(ys), wrong, ledger=ledger) is None:
        return None
    ledger = ledger_or_new(ledger)
    opt = ledger.limit(z3.Optimize())
    opt.add(*_sorted_constraints(ys), wrong)
    opt.minimize(z3.Sum(ys))
    if ledger.check(opt) != z3.sat:
        raise RuntimeError(f"z3 found a seed-index counterexample for N={n} but no smallest one")
    m = opt.model()
    return sorted(m.eval(y, model_completion=True).as_long() for y in ys)


def formula_matches_code(n: int, samples: int = 200, seed: int = 0, ledger: Ledger | None = None) -> bool:
    """The symbolic rules evaluate like `properties.quorum.quorum_index` on random vectors (no solver: the
    ledger only stands beside the other claims')."""
    xs = [z3.Int(f"m{k}") for k in range(n)]
    formulas = {rule: quorum_index(rule, xs) for rule in ("majority", "seed-index")}
    rng = random.Random(seed + n)
    for _ in range(samples):
        vector = [rng.randrange(0, 4) for _ in range(n)]
        pairs = [(x, z3.IntVal(v)) for x, v in zip(xs, vector)]
        for rule, f in formulas.items():
            if z3.simplify(z3.substitute(f, *pairs)).as_long() != code.quorum_index(rule, vector):
                return False
    return True


def quorum_proofs(max_n: int = 15, ledger: Ledger | None = None) -> list[Proof]:
    """Every claim for N = 1..max_n: one Proof per claim (all N together), each one obligation."""
    ledger = ledger_or_new(ledger)
    proofs = []
    claims = [
        ("majority = largest index held by ⌊N/2⌋+1 servers", majority_is_largest_majority_held),
        ("majority = the unique v with #{m≥v} ≥ maj > #{m≥v+1}", majority_is_unique_threshold),
        ("any two majorities intersect", majorities_intersect),
        ("the encodings' sorting network sorts (0-1 principle)", network_sorts),
        ("the encodings' quorum index evaluates like properties.quorum (200 random vectors)",
         formula_matches_code),
    ]
    for title, claim in claims:
        failed: list[int] = []
        with ledger.obligation("quorum", f"quorum: {title}") as ob:
            failed = [n for n in range(1, max_n + 1) if not claim(n, ledger=ledger)]
            if failed:
                ob.fail(f"fails for N = {failed}")
        detail = f"N = 1..{max_n}" + (f"; FAILS for N = {failed}" if failed else "")
        proofs.append(_proof(title, ob, detail, {"max_n": max_n, "failed": failed}))

    wrong_odd, missing_even, mismatches, examples = [], [], [], {}
    with ledger.obligation("quorum", "quorum: seed-index is correct exactly for odd N") as ob:
        for n in range(1, max_n + 1):
            cex = seed_index_counterexample(n, ledger)
            if cex is None:
                if n % 2 == 0:
                    missing_even.append(n)
                continue
            if n % 2 == 1:
                wrong_odd.append(n)
            # Concrete evaluation with the code the model and the implementation run.
            picked = code.quorum_index("seed-index", cex)
            held = code.holders(cex, picked)
            if held >= majority(n) or code.quorum_index("majority", cex) == picked:
                mismatches.append(n)
            examples[n] = {"match_indexes": cex, "seed_index": picked, "held_by": held,
                           "majority_index": code.quorum_index("majority", cex)}
        if wrong_odd or missing_even or mismatches:
            ob.fail()
    ok = not wrong_odd and not missing_even and not mismatches
    smallest = min(examples) if examples else None
    if smallest is not None:
        e = examples[smallest]
        shown = (f"smallest: N={smallest} {e['match_indexes']} → seed picks {e['seed_index']}, held by "
                 f"{e['held_by']} of {smallest} (majority rule: {e['majority_index']})")
    else:
        shown = "no counterexample"
    detail = (f"seed-index = majority for odd N ≤ {max_n}; wrong for every even N ({shown})"
              if ok else f"odd N wrong: {wrong_odd}; even N without counterexample: {missing_even}; "
                         f"code disagrees with z3 at N = {mismatches}")
    proofs.append(_proof("seed-index is correct exactly for odd N", ob, detail,
                         {"max_n": max_n, "counterexamples": {str(n): e for n, e in examples.items()}}))
    return proofs


def _proof(title: str, ob, detail: str, data: dict) -> Proof:
    if ob.verdict == UNDECIDED:
        detail = f"undecided: {ob.detail}"
    return Proof("quorum", title, ob.verdict == HOLDS, ob.seconds, detail, data, undecided=ob.verdict == UNDECIDED)
