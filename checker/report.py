"""Checking a model: the report every engine returns (`checker.run.run` runs them), and trace
reconstruction.

Engines share one contract: given a `Model` and options they return a `Report`
with the distinct-state count, transitions, depth, the bounds that cut
exploration, and for every property its verdict with the shortest trace. The
counts of equal configurations are equal across engines (tests pin them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from hwm.model.actions import Action, Model, to_step
from hwm.model.state import State
from hwm.properties.catalogue import CATALOGUE, Property
from hwm.properties.trace import Step

ProgressFn = Callable[[dict], None]


class Verdict:
    """A property's verdict from its kind and `found`: a `sometimes` witness is reached or
    unreached; any other property (always, eventually) is violated or holds."""

    @property
    def verdict(self) -> str:
        if self.kind == "sometimes":
            return "reached" if self.found else "unreached"
        return "violated" if self.found else "holds"


class Verdicts:
    """A report's verdicts over its `results`: which of its `OBLIGATION` properties are violated,
    which `sometimes` witnesses unreached, and whether all is well."""

    OBLIGATION = "always"

    @property
    def violated(self) -> list[str]:
        return [r.name for r in self.results.values() if r.kind == self.OBLIGATION and r.found]

    @property
    def unreached(self) -> list[str]:
        return [r.name for r in self.results.values() if r.kind == "sometimes" and not r.found]

    @property
    def ok(self) -> bool:
        """Every obligation holds and every sometimes witness is reached."""
        return not self.violated and not self.unreached


@dataclass
class PropertyResult(Verdict):
    name: str
    kind: str  # always | sometimes
    found: bool  # violated (always) or reached (sometimes)
    finding: str | None = None
    steps: list[Step] | None = None  # the shortest trace, when found
    actions: list[Action] | None = None

    @property
    def length(self) -> int | None:
        return len(self.steps) if self.steps is not None else None


@dataclass
class Report(Verdicts):
    protocol_name: str
    config: dict
    engine: str
    symmetry: bool
    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    bounds_hit: set[str] = field(default_factory=set)
    complete: bool = True  # False when a state or depth limit stopped the search
    interrupted: bool = False  # True when the user stopped it (Ctrl-C): a partial report
    error: str | None = None  # what stopped the search when a variant's hook failed (interrupted too)
    results: dict[str, PropertyResult] = field(default_factory=dict)
    successors: str = "reference"  # the successor backend (checker.backend)
    setup_seconds: float = 0.0  # building the backend (compiling or loading its cache), apart from `seconds`

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float("inf")

    def to_json(self) -> dict:
        return {
            "protocol": self.protocol_name, "config": self.config, "engine": self.engine,
            "symmetry": self.symmetry, "distinct_states": self.states, "transitions": self.transitions,
            "depth": self.depth, "seconds": round(self.seconds, 3),
            "bounds_hit": sorted(self.bounds_hit), "complete": self.complete,
            "interrupted": self.interrupted, **({"error": self.error} if self.error else {}),
            "successors": self.successors, "setup_seconds": round(self.setup_seconds, 3),
            "properties": {
                r.name: {"kind": r.kind, "verdict": r.verdict, "finding": r.finding, "length": r.length,
                         "steps": [s.to_json() for s in r.steps] if r.steps is not None else None}
                for r in self.results.values()
            },
        }


@dataclass
class Discovery:
    """Where a property was first found: a state (`before` is None) or a step into a state."""

    prop: Property
    target: int  # fingerprint of the state reached
    before: int | None  # fingerprint of the state the step left, for step properties
    finding: str


class Tracker:
    """Evaluates the catalogue during a search, each property until it is first found."""

    def __init__(self, properties: Iterable[Property] = CATALOGUE):
        props = list(properties)
        self.state_props = [p for p in props if p.on == "state"]
        self.step_props = [p for p in props if p.on == "step"]
        self.found: dict[str, Discovery] = {}
        self.all = props

    def on_state(self, state: State, fp: int) -> None:
        for p in self.state_props:
            finding = p.check(state)
            if finding:
                self.found[p.name] = Discovery(p, fp, None, finding)
        if self.state_props and any(p.name in self.found for p in self.state_props):
            self.state_props = [p for p in self.state_props if p.name not in self.found]

    def on_step(self, before: State, before_fp: int, after: State, after_fp: int) -> None:
        hit = False
        for p in self.step_props:
            finding = p.check(before, after)
            if finding:
                self.found[p.name] = Discovery(p, after_fp, before_fp, finding)
                hit = True
        if hit:
            self.step_props = [p for p in self.step_props if p.name not in self.found]

    def record(self, discovery: Discovery) -> None:
        """Keep a property's first discovery and stop checking it (later ones are ignored)."""
        name = discovery.prop.name
        if name in self.found:
            return
        self.found[name] = discovery
        self.state_props = [p for p in self.state_props if p.name != name]
        self.step_props = [p for p in self.step_props if p.name != name]

    @property
    def done(self) -> bool:
        return not self.state_props and not self.step_props


def used_symmetry(model: Model, asked: bool) -> bool:
    """The symmetry a search of `model` uses when `asked` for it: none where the model gives servers
    places of their own (a variant's counts or fields, a striped BookKeeper ledger), whatever was asked."""
    return asked and getattr(model, "symmetric", True)


def visit(tracker: Tracker, parents: dict, state: State, fp: int, succ: State, succ_fp: int) -> bool:
    """Check the step state -> succ, and succ itself when it is new; True when it is new."""
    if tracker.step_props:
        tracker.on_step(state, fp, succ, succ_fp)
    if succ_fp in parents:
        return False
    parents[succ_fp] = fp
    if tracker.state_props:
        tracker.on_state(succ, succ_fp)
    return True


def path_to(parents: dict[int, int | None], fp: int) -> list[int]:
    """Fingerprints from the initial state to `fp`, following parent links."""
    chain = [fp]
    while parents[chain[-1]] is not None:
        chain.append(parents[chain[-1]])
    chain.reverse()
    return chain


def reconstruct(model: Model, chain: list[int], symmetry: bool,
                last: Callable[[State, State], bool] | None = None) -> tuple[list[Action], list[State]]:
    """A concrete action sequence through the fingerprints of `chain`.

    Under symmetry a fingerprint names a class of states; any member's successor
    in the next class will do, and the actions keep their real server names.
    `last`, when given, must also accept the final step (a step property's check).
    """
    state = model.initial_state()
    states, actions = [state], []
    for position, target in enumerate(chain[1:], start=1):
        final = position == len(chain) - 1
        for action, succ in model.successors(state):
            if model.fingerprint(succ, symmetry) == target and not (final and last and not last(state, succ)):
                actions.append(action)
                states.append(succ)
                state = succ
                break
        else:
            raise RuntimeError(f"no successor reaches fingerprint {target:#x} at step {position}")
    return actions, states


def finish_report(report: Report, model: Model, tracker: Tracker, parents_of: Callable[[int], list[int]],
                  symmetry: bool) -> Report:
    """Turn the tracker's discoveries into shortest traces, whatever engine found them."""
    for p in tracker.all:
        d = tracker.found.get(p.name)
        if d is None:
            report.results[p.name] = PropertyResult(p.name, p.kind, False)
            continue
        if d.before is None:
            actions, states = reconstruct(model, parents_of(d.target), symmetry)
            finding = p.check(states[-1])
        else:
            chain = parents_of(d.before) + [d.target]
            actions, states = reconstruct(model, chain, symmetry, last=lambda b, a, p=p: bool(p.check(b, a)))
            finding = p.check(states[-2], states[-1])
        # The sentence comes from the rebuilt trace, never from the state the engine found:
        # under symmetry that state is another member of the class (the Spark engine even
        # holds canonical states), so its server names need not match the trace's steps.
        if not finding:
            raise RuntimeError(f"{p.name}: the rebuilt trace does not show what the engine found "
                               f"({d.finding}); is the property symmetric in server names?")
        report.results[p.name] = PropertyResult(p.name, p.kind, True, finding,
                                                [to_step(a) for a in actions], actions)
    return report
