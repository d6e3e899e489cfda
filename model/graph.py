"""The reachable state graph as a networkx DiGraph, for teaching and for checks on its SCCs.

Nodes are fingerprints (symmetry classes when `symmetry`), with the state drawn as
text, its breadth-first depth and the `always` properties it violates; edges carry
the action. Meant for small configurations: a state limit stops the build with a
clear error instead of filling memory.
"""

from __future__ import annotations

from collections import deque

import networkx as nx

from model.actions import Model, to_step
from properties.catalogue import properties_for


class GraphTooLarge(ValueError):
    pass


def state_graph(model: Model, *, symmetry: bool = True, max_states: int = 20_000) -> nx.DiGraph:
    graph = nx.DiGraph()
    init = model.initial_state()
    init_fp = model.fingerprint(init, symmetry)
    graph.add_node(init_fp, label=init.describe(), depth=0, violations="", initial=True)
    queue = deque([(init, init_fp)])
    always = [p for p in properties_for(model.protocol.system) if p.kind == "always"]
    state_props = [p for p in always if p.on == "state"]
    step_props = [p for p in always if p.on == "step"]
    while queue:
        state, fp = queue.popleft()
        for action in model.actions(state):
            succ = model.apply(state, action)
            succ_fp = model.fingerprint(succ, symmetry)
            if succ_fp not in graph:
                if graph.number_of_nodes() >= max_states:
                    raise GraphTooLarge(f"more than {max_states:,} states: choose smaller bounds or raise the limit")
                broken = [p.name for p in state_props if p.check(succ)]
                graph.add_node(succ_fp, label=succ.describe(), depth=graph.nodes[fp]["depth"] + 1,
                               violations=",".join(broken), initial=False)
                queue.append((succ, succ_fp))
            broken = [p.name for p in step_props if p.check(state, succ)]
            graph.add_edge(fp, succ_fp, action=str(to_step(action)), violations=",".join(broken))
    return graph


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
