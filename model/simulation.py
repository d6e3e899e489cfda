"""The simulation engine: random walks for bounds too deep to explore exhaustively.

Each walk starts at the initial state and takes uniformly random enabled
actions until none is enabled or `max_depth` steps are taken. Every state and
step is checked against the catalogue. Counterexamples are real traces, but not
necessarily the shortest; the distinct-state count is of the states visited,
so on a small configuration with enough walks it meets the breadth-first count.
"""

from __future__ import annotations

import random
import time

from model.actions import Model, to_step
from model.checker import PropertyResult, Report, Tracker
from model.encoding import fingerprint
from model.state import initial_state
from properties.catalogue import CATALOGUE


def simulate(model: Model, protocol_name: str, *, walks: int = 2000, max_depth: int = 60, seed: int = 0,
             symmetry: bool = True, progress=None, properties=CATALOGUE) -> Report:
    started = time.perf_counter()
    rng = random.Random(seed)
    report = Report(protocol_name, model.config.to_mapping(), "simulation", symmetry, complete=False)
    tracker = Tracker(properties)
    seen: set[int] = set()
    first_trace: dict[str, list] = {}
    bounds_hit: set[str] = set()
    transitions = 0
    deepest = 0
    init = initial_state(model.config)
    init_fp = fingerprint(init, symmetry)
    seen.add(init_fp)
    tracker.on_state(init, init_fp)
    last_report = started
    for walk in range(walks):
        state, fp, actions = init, init_fp, []
        for _ in range(max_depth):
            choices = list(model.successors(state, bounds_hit))
            if not choices:
                break
            action, succ = rng.choice(choices)
            transitions += 1
            succ_fp = fingerprint(succ, symmetry)
            actions.append(action)
            before = set(tracker.found)
            tracker.on_step(state, fp, succ, succ_fp)
            tracker.on_state(succ, succ_fp)
            for name in set(tracker.found) - before:
                first_trace[name] = list(actions)
            seen.add(succ_fp)
            state, fp = succ, succ_fp
        deepest = max(deepest, len(actions))
        if progress is not None and walk % 64 == 0:
            now = time.perf_counter()
            if now - last_report >= 0.5:
                last_report = now
                progress({"depth": deepest, "states": len(seen), "frontier": walks - walk,
                          "states_per_second": len(seen) / (now - started)})
    report.states = len(seen)
    report.transitions = transitions
    report.depth = deepest
    report.bounds_hit = bounds_hit
    report.seconds = time.perf_counter() - started
    for p in tracker.all:
        d = tracker.found.get(p.name)
        if d is None:
            report.results[p.name] = PropertyResult(p.name, p.kind, False)
        else:
            actions = first_trace[p.name]
            report.results[p.name] = PropertyResult(p.name, p.kind, True, d.finding,
                                                    [to_step(a) for a in actions], actions)
    return report
