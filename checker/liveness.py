"""Checking the `eventually` properties (properties/liveness.py) on the state graph's SCCs.

Fairness. Each system's model names its weakly fair actions (`Model.FAIR`, docs/liveness.md,
"Fairness"): an instance that stays enabled is eventually taken. Raft's, every model's default:
a `replicate(leader, follower)` round trip (the HWM advance is part of it: the leader
recomputes its high-water mark on every response), and `restart` (a crashed server eventually
comes back). ZAB adds `sync` and `persist`, Kafka `shrink_isr`, `leader_and_isr` and `flush`;
BookKeeper's are `send_add` and `restart`. On raft's async network a leader's `send` of an
append takes `replicate`'s place (`Model.ASYNC_FAIR`: a leader keeps sending, as it keeps
replicating on rpc), and `deliver` is strongly fair (`Model.STRONG_FAIR`: a channel is
fair-lossy, an instance enabled infinitely often is taken infinitely often, so a run that
drops every copy of a message resent for ever is not fair); `drop` is not, and a leader that
stops sending to one follower is not fair either. Nothing else is fair: clients may stop writing
or reading, and elections and crashes may stop. They do stop: every election raises
a generation and every crash counts against max_crashes, so an infinite run makes
finitely many of each and ends with a stable set of leaders (the bounds are the
model's, so this is a check within them, not a proof).

A violation is a fair lasso: a path from the initial state to a cycle along which
one obligation of the property (the same key: the same leader and entry, or the same
leader and follower) is open in every state, every weakly fair action instance that is
enabled in every state of the cycle is taken on it, and every strongly fair one that is
enabled in some state of the cycle is taken on it. Per obligation, the states where it is
open form a subgraph. Its strongly connected components are refined for strong fairness
(Emerson and Lei's, as for Streett automata): a strongly fair instance enabled in a
component but taken on none of its inner edges rules out every cycle through a state
where it is enabled, so those states go and the components of the rest are computed
again, until none changes. In a component that remains a fair cycle exists exactly when
each weakly fair instance enabled throughout it is taken by an edge inside it (a cycle
through every edge of the component is then fair), and every fair cycle lies in one.
The shortest lasso: breadth-first stem to a component state, then the shortest cycle
back to that state inside the component that meets every fairness requirement (a
breadth-first search over (state, weak requirements met, strong instances taken, strong
instances owed)); the pair with the fewest steps in total wins, ties going to the
shorter stem, then the first obligation key, then the first state.

Terminal states (no action enabled: a bound stopped everything) are not deadlocks:
a bounded model ends there, and nothing is claimed about what would follow. They are
counted per property (`cut`) when an obligation is open in them.

Two graphs, one answer: where the compiled backend runs the model, the check runs on the
graph its search explores (`checker.liveness_fast`: packed rows, arrays and compiled loops, for
millions of states); elsewhere on `StateGraph`, the model's own objects. Both number states in
breadth-first order with the model's action order on every state's edges, and break ties between
lassos the same way, so their reports are equal (tests/checker/test_liveness_compiled.py).

The check runs without symmetry reduction: fairness names action instances
(`replicate(S1, S2)`), but an edge of the quotient graph carries the action of whichever
member was expanded, and a cycle of classes need not be a cycle of states; both would
need the permutation carried on every edge. Exploring the concrete states keeps lassos
replayable step by step. It refuses partitions (`refusal`): heal is not fair.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import networkx as nx

from hwm.model.actions import Action, Model, to_step
from hwm.checker.report import Verdict, Verdicts
from hwm.checker.engine import Visitor
from hwm.checker.run import CheckRequest, run
from hwm.model.state import State
from hwm.properties.liveness import LIVENESS, LivenessProperty
from hwm.properties.trace import Step

FAIR_ACTIONS = Model.FAIR  # raft's weakly fair actions: a model's unless it names its own
# The state limits of the graphs: Python objects cost about 5 kB a state, packed rows and arrays about
# 150 bytes (checker/liveness_fast.py), so a million states fit in a few hundred MB.
DEFAULT_MAX_STATES = 50_000
COMPILED_MAX_STATES = 3_000_000


def max_states_of(backend: str) -> int:
    """The default state limit of the graph `backend` builds."""
    return COMPILED_MAX_STATES if backend == "fast" else DEFAULT_MAX_STATES


class LivenessRefused(ValueError):
    """The configuration is outside what the liveness check supports; the message says why."""


@dataclass
class LivenessResult(Verdict):
    name: str
    kind: str  # eventually | sometimes
    found: bool  # violated (eventually) or reached (sometimes)
    finding: str | None = None
    steps: list[Step] | None = None
    actions: list[Action] | None = None
    loop: int | None = None  # 1-based number of the cycle's first step (eventually)
    cut: int = 0  # terminal states where an obligation is open (eventually)

    @property
    def stem(self) -> int | None:
        return self.loop - 1 if self.loop is not None else None

    @property
    def cycle(self) -> int | None:
        return len(self.steps) - self.stem if self.loop is not None else None

    def to_json(self) -> dict:
        out = {"kind": self.kind, "verdict": self.verdict, "finding": self.finding,
               "length": len(self.steps) if self.steps is not None else None,
               "steps": [s.to_json() for s in self.steps] if self.steps is not None else None}
        if self.kind == "eventually":
            out.update(loop=self.loop, stem=self.stem, cycle=self.cycle, cut=self.cut)
        return out


@dataclass
class LivenessReport(Verdicts):
    OBLIGATION = "eventually"

    protocol_name: str
    config: dict
    states: int = 0
    transitions: int = 0
    fairness: tuple[str, ...] = FAIR_ACTIONS
    strong_fairness: tuple[str, ...] = ()  # the strongly fair actions: `deliver` on the async network
    results: dict[str, LivenessResult] = field(default_factory=dict)
    properties: tuple[LivenessProperty, ...] = LIVENESS  # what was checked, in order
    successors: str = "reference"  # whose graph: the reference backend's or the compiled one's

    def to_json(self) -> dict:
        return {"protocol": self.protocol_name, "config": self.config, "symmetry": False,
                "successors": self.successors,
                "fairness": self.fairness_json(), "distinct_states": self.states,
                "transitions": self.transitions,
                "properties": {r.name: r.to_json() for r in self.results.values()}}


    def fairness_json(self) -> dict:
        out = {"weak": list(self.fairness)}
        if self.strong_fairness:  # the rpc network's reports keep their shape
            out["strong"] = list(self.strong_fairness)
        return out


class StateGraph(Visitor):
    """The concrete reachable graph: states, labelled edges, breadth-first parents.

    Built by the one breadth-first search (`checker.engine`) without symmetry, as its
    visitor: state k is the k-th discovered, `edges[k]` its transitions in the model's
    action order, `parent[k]` the first transition into it (None for the initial state).
    With a model it runs its own search; without (None), it is a visitor for a caller's.
    """

    def __init__(self, model: Model | None, max_states: int):
        self.max_states = max_states
        self.states: list[State] = []
        self.edges: list[list[tuple[Action, int]]] = []
        self.parent: list[tuple[int, Action] | None] = []
        self._index: dict[int, int] = {}  # fingerprint -> state number
        if model is not None:
            # States stay model objects (the graph keeps every one): no packing and unpacking.
            run(CheckRequest("model", symmetry=False, properties=(), successors="objects"), model=model,
                visitors=[self])

    def on_chunk(self, chunk, result) -> None:
        backend = chunk.search.backend
        if chunk.first == 0 and chunk.depth == 0:
            self.states += backend.states(chunk.frontier)
            self.parent.append(None)
            self._index[int(chunk.frontier_fingerprints()[0])] = 0
        if len(chunk.search.visited) > self.max_states:
            raise LivenessRefused(
                f"the state graph has more than {self.max_states:,} states (the liveness state limit): "
                "choose smaller bounds or raise the limit")
        fps, parents = chunk.fingerprints.tolist(), chunk.parents.tolist()
        actions = [backend.action(a) for a in chunk.actions[:chunk.kept].tolist()]
        for offset, (t, state) in enumerate(zip(chunk.new.tolist(), backend.states(chunk.new_states))):
            self._index[fps[t]] = chunk.new_first + offset
            self.states.append(state)
            self.parent.append((chunk.first + parents[t], actions[t]))
        edges: list[list[tuple[Action, int]]] = [[] for _ in range(len(chunk.frontier))]
        for t, action in enumerate(actions):
            edges[parents[t]].append((action, self._index[fps[t]]))
        self.edges += edges

    @property
    def transitions(self) -> int:
        return sum(len(out) for out in self.edges)

    def path_to(self, k: int) -> list[Action]:
        actions = []
        while self.parent[k] is not None:
            k, action = self.parent[k]
            actions.append(action)
        actions.reverse()
        return actions


def _shortest_fair_cycle(graph: StateGraph, component: set[int], start: int,
                         fair: tuple[str, ...], strong: tuple[str, ...] = ()) -> list[Action] | None:
    """The fewest steps from `start` back to it inside `component` meeting every fairness
    requirement: each weakly fair action enabled somewhere in the component is, on the cycle,
    either taken or disabled in some visited state; each strongly fair one enabled in some
    visited state is taken (it is owed from the first state that enables it until taken)."""
    required = sorted({a for k in component for a, _ in graph.edges[k] if a[0] in fair})
    required_bit = {a: 1 << n for n, a in enumerate(required)}
    full = (1 << len(required)) - 1
    strong_required = sorted({a for k in component for a, _ in graph.edges[k] if a[0] in strong})
    strong_bit = {a: 1 << n for n, a in enumerate(strong_required)}
    disabled, strong_enabled = {}, {}
    for k in component:
        enabled = {a for a, _ in graph.edges[k]}
        disabled[k] = sum(bit for a, bit in required_bit.items() if a not in enabled)
        strong_enabled[k] = sum(bit for a, bit in strong_bit.items() if a in enabled)
    # A node: (state, weak requirements met, strong instances taken, strong instances owed).
    begin = (start, disabled[start], 0, strong_enabled[start])
    parents: dict[tuple[int, int, int, int], tuple[tuple[int, int, int, int], Action] | None] = {begin: None}
    queue = deque([begin])
    while queue:
        node = queue.popleft()
        k, met, taken, owed = node
        for action, j in graph.edges[k]:
            if j not in component:
                continue
            now = met | required_bit.get(action, 0) | disabled[j]
            now_taken = taken | strong_bit.get(action, 0)
            now_owed = (owed | strong_enabled[j]) & ~now_taken
            if j == start and now == full and not now_owed:
                cycle = [action]
                while parents[node] is not None:
                    node, a = parents[node]
                    cycle.append(a)
                cycle.reverse()
                return cycle
            nxt = (j, now, now_taken, now_owed)
            if nxt not in parents:
                parents[nxt] = (node, action)
                queue.append(nxt)
    return None


def _components(graph: StateGraph, members: set[int]):
    """Strongly connected components of the subgraph on `members` that contain a cycle."""
    sub = nx.DiGraph()
    sub.add_nodes_from(members)
    sub.add_edges_from((k, j) for k in members for _, j in graph.edges[k] if j in members)
    for component in nx.strongly_connected_components(sub):
        if len(component) > 1 or sub.has_edge(next(iter(component)), next(iter(component))):
            yield component


def _strong_components(graph: StateGraph, members: set[int], strong: tuple[str, ...]):
    """The components of `members` refined for strong fairness, until stable: where a strongly fair
    instance is enabled in a component but taken on none of its inner edges, no fair cycle passes
    through a state that enables it; those states go, and what is left is split again."""
    pending = [members]
    while pending:
        for component in _components(graph, pending.pop()):
            enabled = {a for k in component for a, _ in graph.edges[k] if a[0] in strong}
            taken = {a for k in component for a, j in graph.edges[k] if j in component}
            starved = enabled - taken
            if not starved:
                yield component
                continue
            rest = {k for k in component if not any(a in starved for a, _ in graph.edges[k])}
            if rest:
                pending.append(rest)


def _fair_component(graph: StateGraph, component: set[int], fair: tuple[str, ...]) -> bool:
    """Some cycle in the component is fair: every fair action enabled in all its states is
    taken by an edge inside it."""
    always_enabled = None
    for k in component:
        enabled = {a for a, _ in graph.edges[k] if a[0] in fair}
        always_enabled = enabled if always_enabled is None else always_enabled & enabled
    taken = {a for k in component for a, j in graph.edges[k] if j in component}
    return always_enabled <= taken


def check_property(graph: StateGraph, prop: LivenessProperty, distance: list[int],
                   fair: tuple[str, ...], strong: tuple[str, ...] = ()) -> LivenessResult:
    open_at: dict = {}  # obligation key -> states where it is open
    cut = 0
    for k, state in enumerate(graph.states):
        obligations = prop.obligations(state)
        if obligations and not graph.edges[k]:
            cut += 1
        for key in obligations:
            open_at.setdefault(key, set()).add(k)
    best = None  # (length, stem, key rank, start, cycle actions, key)
    for rank, key in enumerate(sorted(open_at)):
        for component in _strong_components(graph, open_at[key], strong):
            if not _fair_component(graph, component, fair):
                continue
            for start in sorted(component, key=lambda k: (distance[k], k)):
                if best is not None and distance[start] > best[0]:
                    break
                cycle = _shortest_fair_cycle(graph, component, start, fair, strong)
                if cycle is None:  # cannot happen in a fair component; be loud if it does
                    raise RuntimeError(f"{prop.name}: no fair cycle through a fair component")
                # Ties go to the first key, then the first state: an order of the lassos alone, not
                # of the components' discovery (the compiled graph's agrees, checker/liveness_fast.py).
                candidate = (distance[start] + len(cycle), distance[start], rank, start)
                if best is None or candidate < best[:4]:
                    best = (*candidate, cycle, key)
    if best is None:
        return LivenessResult(prop.name, "eventually", False, cut=cut)
    _, stem_length, _, start, cycle, key = best
    stem = graph.path_to(start)
    actions = stem + cycle
    # The sentence of the cycle's own states (the obligation's key is constant along it).
    finding = prop.obligations(graph.states[start])[key] + ", and stays so forever along a fair cycle"
    return LivenessResult(prop.name, "eventually", True, finding,
                          [to_step(a) for a in actions], actions, loop=stem_length + 1, cut=cut)


def check_witness(graph: StateGraph, prop: LivenessProperty) -> LivenessResult:
    """The breadth-first first state where one of the property's obligations opens."""
    witness = prop.witness
    for k, state in enumerate(graph.states):  # in breadth-first order
        finding = witness.check(state)
        if finding:
            actions = graph.path_to(k)
            return LivenessResult(witness.name, "sometimes", True, finding, [to_step(a) for a in actions], actions)
    return LivenessResult(witness.name, "sometimes", False)


def refusal(model: Model) -> str | None:
    """Why the liveness check cannot run on this model, or None (symmetry is never used: see above)."""
    if getattr(model.config, "max_partitions", 0):
        return ("liveness is not checked with partitions (max_partitions): heal is not a fair action, so a run may "
                "stay partitioned for ever, and nothing is promised to the servers behind the cut")
    return None


def liveness_of(model: Model) -> tuple[tuple[LivenessProperty, ...], tuple[str, ...]]:
    """The `eventually` properties `model` is checked for and its weakly fair actions: the documented
    properties and its system's fairness (`Model.FAIR`, `Model.ASYNC_FAIR` on the async network), and a
    variant's own after them
    (`model.variant_model`: its `liveness` and `fair`)."""
    fair = tuple(model.ASYNC_FAIR if model.config.network == "async" else model.FAIR)
    variant = getattr(model, "variant", None)
    if variant is None or not (variant.liveness or variant.fair):
        return LIVENESS, fair
    from hwm.model.variant_model import liveness_properties
    return LIVENESS + liveness_properties(variant), fair + tuple(variant.fair)


def strong_fairness_of(model: Model) -> tuple[str, ...]:
    """The strongly fair actions of `model`: `Model.STRONG_FAIR` (`deliver`) on the async network, else none."""
    return tuple(model.STRONG_FAIR) if model.config.network == "async" else ()


def liveness_backend(model: Model, successors: str = "auto") -> str:
    """The graph the check runs on: "fast" (the compiled engine's, `checker.liveness_fast`) wherever the
    compiled backend runs the model (`--successors auto`'s choice), else "reference" (`StateGraph`)."""
    if successors == "auto":
        from hwm.checker.auto_backend import auto_backend
        return auto_backend(model)[0]
    if successors not in ("fast", "reference"):
        raise ValueError(f"unknown successor backend {successors!r}: choose auto, fast or reference")
    return successors


def check_liveness(model: Model, protocol_name: str, *, max_states: int | None = None,
                   properties=None, fair: tuple[str, ...] | None = None,
                   strong: tuple[str, ...] | None = None, successors: str = "auto") -> LivenessReport:
    """Every `eventually` property and its witness, on the concrete state graph (no symmetry).

    `properties`, `fair` (the weakly fair actions) and `strong` (the strongly fair ones) default to the
    model's (`liveness_of`, `strong_fairness_of`: the documented fairness; tests weaken it to show that the
    verdicts depend on it). `successors` picks
    the graph (`liveness_backend`); both give the same report. `max_states` defaults to the graph's
    limit (`max_states_of`)."""
    own_properties, own_fair = liveness_of(model)
    properties = own_properties if properties is None else tuple(properties)
    fair = own_fair if fair is None else fair
    strong = strong_fairness_of(model) if strong is None else tuple(strong)
    reason = refusal(model)
    if reason:
        raise LivenessRefused(reason)
    backend = liveness_backend(model, successors)
    if max_states is None:
        max_states = max_states_of(backend)
    if backend == "fast":
        from hwm.checker.liveness_fast import check_on_compiled_graph
        report = check_on_compiled_graph(model, protocol_name, properties, tuple(fair), max_states, LivenessReport,
                                         LivenessResult, LivenessRefused, strong)
        report.successors = "fast"
        return report
    graph = StateGraph(model, max_states)
    distance = [0] * len(graph.states)
    for k in range(1, len(graph.states)):
        distance[k] = distance[graph.parent[k][0]] + 1
    report = LivenessReport(protocol_name, model.config.to_mapping(), len(graph.states), graph.transitions,
                            tuple(fair), strong, properties=properties)
    for prop in properties:
        report.results[prop.name] = check_property(graph, prop, distance, tuple(fair), strong)
    for prop in properties:
        report.results[prop.witness.name] = check_witness(graph, prop)
    return report


def lasso_verdict(model: Model, states: list[State], actions: list[Action], loop: int, prop: LivenessProperty,
                  fair: tuple[str, ...] | None = None,
                  strong: tuple[str, ...] | None = None) -> tuple[str | None, str]:
    """Whether a replayed lasso violates `prop`: (the finding, "") or (None, why it does not), under the
    weakly fair actions `fair` and the strongly fair `strong` (by default the model's, `liveness_of` and
    `strong_fairness_of`).

    `states[k]` is the state after step k (`states[0]` the initial one); steps loop..n are the
    cycle. It must close (the state after step n is the state before step `loop`), one
    obligation must stay open in every state of the cycle, and the cycle must be fair.
    """
    if fair is None:
        fair = liveness_of(model)[1]
    if strong is None:
        strong = strong_fairness_of(model)
    n = len(actions)
    start, cycle_states, cycle_actions = states[loop - 1], states[loop - 1:n], actions[loop - 1:]
    if states[n] != start:
        return None, (f"the loop does not close: after step {n} the cluster is not in the state it was in "
                      f"before step {loop}")
    open_ = set(prop.obligations(start))
    for state in cycle_states[1:]:
        open_ &= set(prop.obligations(state))
    if not open_:
        return None, f"no obligation of {prop.name} stays open along the cycle (steps {loop}..{n})"
    always_enabled = None
    for state in cycle_states:
        enabled = {a for a in model.actions(state) if a[0] in fair}
        always_enabled = enabled if always_enabled is None else always_enabled & enabled
    starved = sorted(always_enabled - set(cycle_actions))
    if starved:
        return None, (f"the cycle is not fair: {to_step(starved[0])} is enabled in every state of the cycle "
                      f"but never taken (weakly fair: {', '.join(fair)})")
    enabled_somewhere = {a for state in cycle_states for a in model.actions(state) if a[0] in strong}
    starved = sorted(enabled_somewhere - set(cycle_actions))
    if starved:
        return None, (f"the cycle is not fair: {to_step(starved[0])} is enabled in some state of the cycle "
                      f"but never taken (strongly fair: {', '.join(strong)})")
    return prop.obligations(start)[min(open_)] + ", and stays so forever along a fair cycle", ""
