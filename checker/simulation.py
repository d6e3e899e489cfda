"""The simulation engine: random walks for bounds too deep to explore exhaustively.

Each walk takes uniformly random enabled actions until none is enabled or
`max_depth` steps are taken. Half the walks start at the initial state, the
others at a state seen earlier, chosen at random: the second kind reaches the
corners that walks from the start seldom do. Every state and step is checked
against the catalogue; each state keeps the link to the state it was first
reached from, so counterexamples are real traces rebuilt as the breadth-first
engine rebuilds them, but not necessarily the shortest.

Shared with the breadth-first engine (`checker.engine`): the property tracker
(`Tracker`, first finding per property), the report and the one path rebuild
(`finish_report` -> `reconstruct` over fingerprint chains). Not shared: the search
itself. A walk follows one successor per step; asking a backend for a state's
whole batch of successors and fingerprints to keep one would cost about five
times the work per step, and walks need no visited set beyond the parent links.
"""

from __future__ import annotations

import random
import time

from hwm.model.actions import Model
from hwm.checker.report import Report, Tracker, finish_report, path_to, used_symmetry, visit


def simulate(model: Model, protocol_name: str, *, walks: int = 2000, max_depth: int = 40, seed: int = 0,
             symmetry: bool = True, progress=None, properties=None) -> Report:
    started = time.perf_counter()
    rng = random.Random(seed)
    report = Report(protocol_name, model.config.to_mapping(), "simulation", used_symmetry(model, symmetry),
                    complete=False)
    tracker = Tracker(model.properties if properties is None else properties)
    bounds_hit: set[str] = set()
    transitions = 0
    deepest = 0
    init = model.initial_state()
    init_fp = model.fingerprint(init, symmetry)
    parents: dict[int, int | None] = {init_fp: None}
    depth_of = {init_fp: 0}
    seen = [(init, init_fp)]
    tracker.on_state(init, init_fp)
    last_report = started
    for walk in range(walks):
        state, fp = seen[0] if walk % 2 == 0 else rng.choice(seen)
        for _ in range(max_depth):
            choices = list(model.actions(state, bounds_hit))
            if not choices:
                break
            succ = model.apply(state, rng.choice(choices))
            transitions += 1
            succ_fp = model.fingerprint(succ, symmetry)
            if visit(tracker, parents, state, fp, succ, succ_fp):
                depth_of[succ_fp] = depth_of[fp] + 1
                deepest = max(deepest, depth_of[succ_fp])
                seen.append((succ, succ_fp))
            state, fp = succ, succ_fp
        if progress is not None and walk % 64 == 0:
            now = time.perf_counter()
            if now - last_report >= 0.5:
                last_report = now
                progress({"depth": deepest, "states": len(parents), "frontier": walks - walk,
                          "states_per_second": len(parents) / (now - started)})
    report.states = len(parents)
    report.transitions = transitions
    report.depth = deepest
    report.bounds_hit = bounds_hit
    report.seconds = time.perf_counter() - started
    return finish_report(report, model, tracker, lambda f: path_to(parents, f), symmetry)
