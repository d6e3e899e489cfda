"""The reachable state graph as a networkx DiGraph, for teaching and for checks on its SCCs.

Nodes are fingerprints (symmetry classes when `symmetry`), with the state drawn as
text, its breadth-first depth and the `always` properties it violates; edges carry
the action. Meant for small configurations: a state limit stops the build with a
clear error instead of filling memory.
"""

from __future__ import annotations

import networkx as nx

from hwm.model.actions import Model, to_step
from hwm.checker.engine import Visitor
from hwm.checker.run import CheckRequest, run


class GraphTooLarge(ValueError):
    pass


class GraphBuilder(Visitor):
    """Builds the graph from the search: a node per new state, an edge per transition."""

    def __init__(self, max_states: int, label=None, properties=()):
        self.graph = nx.DiGraph()
        self.max_states = max_states
        self.label = label or (lambda state: state.describe())
        always = [p for p in properties if p.kind == "always"]  # the model's own catalogue
        self.state_props = [p for p in always if p.on == "state"]
        self.step_props = [p for p in always if p.on == "step"]

    def in_worker(self, args, backend, frontier, expansion):
        """Each transition's violated step properties (where every transition is a model object)."""
        if expansion is None:
            return None
        before, after = backend.states(frontier), backend.states(expansion.successors)
        return [",".join(p.name for p in self.step_props if p.check(before[k], after[t]))
                for t, k in enumerate(expansion.parents.tolist())]

    def on_chunk(self, chunk, edge_violations) -> None:
        graph, backend = self.graph, chunk.search.backend
        if chunk.first == 0 and chunk.depth == 0:
            init = backend.states(chunk.frontier)[0]
            graph.add_node(int(chunk.frontier_fingerprints()[0]), label=self.label(init), depth=0, violations="",
                           initial=True)
        if len(chunk.search.visited) > self.max_states:
            raise GraphTooLarge(f"more than {self.max_states:,} states: choose smaller bounds or raise the limit")
        fps = chunk.fingerprints.tolist()
        for t, state in zip(chunk.new.tolist(), backend.states(chunk.new_states)):
            broken = [p.name for p in self.state_props if p.check(state)]
            graph.add_node(fps[t], label=self.label(state), depth=chunk.depth + 1, violations=",".join(broken),
                           initial=False)
        sources = chunk.frontier_fingerprints().tolist()
        action = chunk.search.backend.action
        for t in range(chunk.kept):
            source, broken = sources[chunk.parents[t]], edge_violations[t]
            if graph.has_edge(source, fps[t]):
                # Several actions (or symmetric copies of one) join the same two states: keep the
                # first action's name and every violation, so a violating step is never hidden.
                edge = graph.edges[source, fps[t]]
                edge["violations"] = ",".join(sorted(set(filter(None, edge["violations"].split(",")))
                                                     | set(filter(None, broken.split(",")))))
                continue
            graph.add_edge(source, fps[t], action=str(to_step(action(int(chunk.actions[t])))), violations=broken)


def state_graph(model: Model, *, symmetry: bool = True, max_states: int = 20_000, label=None) -> nx.DiGraph:
    """`label(state)` draws a node's state as text (default: the state's own `describe`)."""
    builder = GraphBuilder(max_states, label, model.properties)
    report = run(CheckRequest("model", symmetry=symmetry, properties=()), model=model, visitors=[builder])
    if report.error:  # a variant's hook failed: the graph stops short of the reachable states
        from hwm.model.variant import HookError
        raise HookError(report.error)
    return builder.graph


def summary(graph: nx.DiGraph) -> dict:
    """Strongly connected components and the bottom ones (no way out): where runs end up."""
    condensed = nx.condensation(graph)
    bottom = [c for c in condensed.nodes if condensed.out_degree(c) == 0]
    deadlocks = [n for n in graph.nodes if graph.out_degree(n) == 0]
    return {
        "states": graph.number_of_nodes(),
        "transitions": graph.number_of_edges(),
        "sccs": condensed.number_of_nodes(),
        "bottom_sccs": len(bottom),
        "largest_scc": max(len(condensed.nodes[c]["members"]) for c in condensed.nodes),
        "deadlocks": len(deadlocks),
        "violating_states": sum(1 for _, v in graph.nodes(data="violations") if v),
        "violating_steps": sum(1 for *_, v in graph.edges(data="violations") if v),
    }


def write(graph: nx.DiGraph, path: str) -> None:
    """GraphML (.graphml), GEXF (.gexf) or node-link JSON (.json), by the file's suffix."""
    relabelled = nx.relabel_nodes(graph, {n: f"{n:016x}" for n in graph.nodes})
    if path.endswith(".graphml"):
        nx.write_graphml(relabelled, path)
    elif path.endswith(".gexf"):
        nx.write_gexf(relabelled, path)
    elif path.endswith(".json"):
        import json
        with open(path, "w", encoding="utf-8") as f:
            json.dump(nx.node_link_data(relabelled, edges="edges"), f, indent=1)
    else:
        raise ValueError(f"{path}: write .graphml, .gexf or .json")
