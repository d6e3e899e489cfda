"""The induction obligation of a system whose invariant reads a ghost the explorer computes along its
search: ZAB's (`proofs/zab_induction.py`: the epoch that first acknowledged each index) and Kafka's
(`proofs/kafka_induction.py`: the commit record).

IndInit, IndNext per action and the safety implications are `check_induction`'s. When IndNext
fails, the explorer searches breadth-first, carrying the ghost, for the first reachable state that
breaks the invariant: every state before it keeps the invariant, so its parent and the action that
reaches it are a reachable counterexample to induction (a real bug), as BookKeeper's
(`proofs/bookkeeper.py`) without a ghost.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.induction import CTI, ConjunctEvaluator, check_induction
from hwm.proofs.progress import ledger_or_new
from hwm.proofs.symbolic import Encoding, Proof, action_name, checked_properties
from hwm.properties.catalogue import violations

# (ghost, state before, state after) -> the ghost after the step
Advance = Callable[[object, object, object], object]


def reachable_nodes(protocol, config: Config, ghost, advance: Advance, max_states: int = 200_000):
    """Breadth-first (servers not renamed), the model's states with the ghost: yields (node, parent, action)
    with node = (state, ghost), parent None for the initial state."""
    model = build_model(protocol, config)
    start = (model.initial_state(), ghost)
    seen = {start}
    queue = deque([start])
    yield start, None, None
    while queue and len(seen) < max_states:
        node = queue.popleft()
        state, ghost = node
        for action, after in model.successors(state):
            nxt = (after, advance(ghost, state, after))
            if nxt in seen:
                continue
            seen.add(nxt)
            yield nxt, node, action
            queue.append(nxt)


def first_reachable_cti(protocol, enc: Encoding, conjuncts, config: Config, ghost, advance: Advance,
                        suspects, max_states: int = 200_000):
    """The first state, breadth-first, that breaks the invariant, as a CTI from its parent (with the path
    to the parent), and the number of states explored; (None, explored) when every one keeps it.

    Only states reached by an action of `suspects` (those whose IndNext failed) are evaluated: the
    first state that breaks the invariant is reached from one that keeps it, by such an action."""
    evaluator = ConjunctEvaluator(enc, conjuncts)
    suspects = set(suspects)
    parents = {}
    for node, parent, action in reachable_nodes(protocol, config, ghost, advance, max_states):
        parents[node] = (parent, action)
        failed = evaluator.failed(node) if action in suspects else []
        if failed:
            trace, at = [], parent
            while parents[at][0] is not None:
                trace.append(parents[at][1])
                at = parents[at][0]
            before, after = parent[0], node[0]
            return CTI(action, failed, before, after, None, None, violations(before, after), reachable=True,
                       trace=trace[::-1]), len(parents)
    return None, len(parents)


def induction_proof(name: str, protocol, conjuncts, enc: Encoding, ghost, advance: Advance, *, broken: bool,
                    servers: int, max_log: int, explorer_generations: int = 3, explorer_crashes: int = 1,
                    ledger=None) -> Proof:
    """The induction obligation: a safe protocol must satisfy IndInit, IndNext and the safety implications;
    a broken one fails them, and the explorer confirms a CTI (generations and crashes unbounded)."""
    ledger = ledger_or_new(ledger)
    result = check_induction(protocol, servers, max_log, conjuncts, name=name, enc=enc, ledger=ledger)
    data = {"protocol": name, "servers": servers, "max_log": max_log, "generations": "unbounded",
            "crashes": "unbounded", **({"partitions": "unbounded"} if enc.partitioned else {}),
            "conjuncts": [c.name for c in conjuncts],
            "init_failed": result.init_failed, "safety_failed": result.safety_failed,
            "actions_with_cti": [action_name(c.action) for c in result.ctis], "undecided": result.undecided}
    title = f"induction {name}"
    epochs = "generations" if protocol.system == "raft" else "epochs"
    unbounded = f"{epochs}, crashes and partitions" if enc.partitioned else f"{epochs} and crashes"
    if result.ok:
        detail = (f"Inv ({len(conjuncts)} conjuncts) holds initially, is preserved by all "
                  f"{len(result.per_action_seconds)} actions and implies {', '.join(checked_properties(protocol))} "
                  f"(N={servers}, L={max_log}, {unbounded} unbounded)")
        if broken:
            detail += " — but this preset is broken: the encoding and the explorer disagree"
        return Proof("induction", title, not broken, result.seconds, detail, data)
    if result.init_failed or result.undecided:
        detail = ("IndInit fails for " + ", ".join(result.init_failed) if result.init_failed else
                  "undecided: " + ", ".join(result.undecided))
        return Proof("induction", title, False, result.seconds, detail, data,
                     undecided=bool(result.undecided) and not result.init_failed)
    started = time.perf_counter()
    failing = sorted({f for c in result.ctis for f in c.failed})
    head = (f"IndNext fails on {len(result.ctis)} actions ({', '.join(action_name(c.action) for c in result.ctis)}; "
            f"conjuncts {', '.join(failing)})" if result.ctis else
            "IndNext holds but the safety implications fail: " + ", ".join(result.safety_failed))
    # A partitioned encoding's cut has consequences: the explorer makes one too.
    config = Config(servers=servers, max_generation=explorer_generations, max_log=max_log,
                    max_crashes=explorer_crashes, max_partitions=1 if enc.partitioned else 0)
    bounds = config.describe()
    with ledger.obligation("induction", f"{title}: the first reachable state that breaks Inv ({bounds})",
                           record=False):
        # With IndNext holding and a safety implication failing, any action may lead to the state.
        suspects = [c.action for c in result.ctis] if result.ctis else enc.actions
        cti, explored = first_reachable_cti(protocol, enc, conjuncts, config, ghost, advance, suspects)
    seconds = result.seconds + time.perf_counter() - started
    data["explorer_states"] = explored
    data["reachable"] = cti is not None
    if cti is not None:
        path = " ".join(action_name(a) for a in cti.trace) or "(the initial state)"
        cti.verdict = (f"reachable: a real bug — the explorer reaches this pre-state in {len(cti.trace)} steps "
                       f"({bounds}): {path}")
        data["cti"] = cti.describe()
        return Proof("induction", title, broken, seconds, f"{head}; a reachable CTI:\n{cti.describe()}", data)
    shown = f"\n{result.ctis[0].describe()}" if result.ctis else ""
    detail = (f"{head}; every state within {bounds} ({explored}) keeps Inv: the invariant needs strengthening, "
              f"or the bug larger bounds{shown}")
    return Proof("induction", title, False, seconds, detail, data)


__all__ = ["reachable_nodes", "first_reachable_cti", "induction_proof"]
