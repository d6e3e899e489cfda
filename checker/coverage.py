"""Model coverage of recorded runs: which of a protocol's reachable states and transitions (at
given bounds, after symmetry) the runs' explanations pass through, and which no run reached.

A run's states are the model states consistent with it after each event, and the states along
the model steps that explain its events (checker/validate.py); they count where they fit the
bounds (every generation, log and the crash count within them). States and transitions are
compared by their canonical fingerprints (model/encoding.py), so a run that visits a state with
its servers renamed covers the same class. Steps that change nothing (a heartbeat) are not
counted: no recorded run can show them. Coverage says what the runs exercised of the model
at these bounds, not what they tested of the implementation (see docs/validation.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hwm.model.registry import build_model
from hwm.model.state import Config


class RunCoverage:
    """What one run visits, as fingerprints: `states`, and `transitions` (source, action name, target)."""

    def __init__(self, model, config: Config):
        self.model, self.config = model, config
        self.states: set[int] = set()
        self.transitions: set[tuple[int, str, int]] = set()

    def fits(self, state) -> bool:
        c = self.config
        return (state.crashes <= c.max_crashes and len(state.servers) == c.servers
                and all(s.generation <= c.max_generation and len(s.log) <= c.max_log for s in state.servers))

    def state(self, state) -> None:
        if self.fits(state):
            self.states.add(self.model.fingerprint(state))

    def transition(self, source, action, target) -> None:
        if self.fits(source) and self.fits(target):
            fp = self.model.fingerprint
            self.transitions.add((fp(source), action[0], fp(target)))
            self.states.add(fp(target))


@dataclass
class Reachable:
    """Every reachable state and transition of a model at its bounds, as fingerprints."""

    states: dict[int, object]  # fingerprint -> a representative state
    transitions: set[tuple[int, str, int]]
    depth: dict[int, int] = field(default_factory=dict)  # fingerprint -> breadth-first level

    def by_action(self) -> Counter:
        return Counter(name for _, name, _ in self.transitions)


def reachable(protocol, config: Config, limit: int = 2_000_000) -> Reachable:
    """Breadth-first enumeration of the reachable states and transitions (symmetry on)."""
    model = build_model(protocol, config)
    initial = model.initial_state()
    fp = model.fingerprint
    start = fp(initial)
    states, depth = {start: initial}, {start: 0}
    transitions: set[tuple[int, str, int]] = set()
    frontier = [initial]
    level = 0
    while frontier:
        level += 1
        following = []
        for state in frontier:
            source = fp(state)
            for action, after in model.successors(state):
                target = fp(after)
                if target != source:  # a step that changes nothing (a heartbeat): no run can show it
                    transitions.add((source, action[0], target))
                if target not in states:
                    states[target] = after
                    depth[target] = level
                    following.append(after)
        if len(states) > limit:
            raise ValueError(f"more than {limit} reachable states at {config.describe()}: lower the bounds")
        frontier = following
    return Reachable(states, transitions, depth)


@dataclass
class CoverageTable:
    """Per run its verdict and first bad event; over all runs the model coverage."""

    runs: list[dict]  # {"run", "valid", "events", "event", "line", "reason", "states"}
    states_covered: int
    states_reachable: int
    transitions_covered: dict[str, tuple[int, int]]  # action name -> (covered, reachable)
    missing: list[str]  # the never-reached states, shallowest first, described
    missing_count: int

    def to_json(self) -> dict:
        return {"runs": self.runs, "states": {"covered": self.states_covered, "reachable": self.states_reachable},
                "transitions": {k: {"covered": c, "reachable": r} for k, (c, r) in sorted(self.transitions_covered.items())},
                "missing": {"count": self.missing_count, "shallowest": self.missing}}

    def describe(self) -> str:
        lines = [f"{'run':<40} {'verdict':<8} {'events':>7} {'first bad event':<16} states"]
        for r in self.runs:
            bad = "" if r["valid"] else (f"line {r['line']}" if r.get("line") else f"event {r['event']}")
            lines.append(f"{r['run'][-40:]:<40} {'valid' if r['valid'] else 'INVALID':<8} {r['events']:>7} "
                         f"{bad:<16} {r['states']}")
        share = self.states_covered / self.states_reachable if self.states_reachable else 0.0
        lines.append(f"model coverage: {self.states_covered} of {self.states_reachable} reachable states "
                     f"({share:.1%}, after symmetry)")
        for name, (covered, total) in sorted(self.transitions_covered.items()):
            lines.append(f"  {name:<10} {covered} of {total} transitions")
        if self.missing_count:
            lines.append(f"never reached: {self.missing_count} states; the shallowest:")
            for text in self.missing:
                lines += ["  " + row for row in text.splitlines()]
                lines.append("  --")
            lines.pop()
        return "\n".join(lines)


def table(results: list[tuple[str, dict, set, set]], space: Reachable, shown: int = 3) -> CoverageTable:
    """The table from per-run results (name, verdict row, state fps, transition fps) and the reachable space."""
    states: set[int] = set()
    transitions: set = set()
    rows = []
    for name, row, run_states, run_transitions in sorted(results, key=lambda r: r[0]):
        states |= run_states & space.states.keys()
        transitions |= run_transitions & space.transitions
        rows.append(dict(row, run=name, states=len(run_states & space.states.keys())))
    reach = space.by_action()
    covered = Counter(name for _, name, _ in transitions)
    missing = sorted(set(space.states) - states, key=lambda f: (space.depth.get(f, 0), f))
    return CoverageTable(rows, len(states), len(space.states),
                         {name: (covered.get(name, 0), total) for name, total in reach.items()},
                         [space.states[f].describe() for f in missing[:shown]], len(missing))
