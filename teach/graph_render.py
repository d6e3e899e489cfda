"""State graphs a person can open: Graphviz .dot text and a self-laid-out .svg.

Nodes are labelled as in the step table (`S1 L1 [1] h1` per server, then the
reads); states that violate an `always` property and the steps that violate one
are red; the initial state is drawn bold. The SVG is laid out here, in layers by
breadth-first depth ordered to cross few edges (`layers`), so nothing beyond Python is needed
to open the picture.
"""

from __future__ import annotations

from html import escape

import networkx as nx

from hwm.teach import systems
from hwm.teach.text import cell
from hwm.properties.snapshot import server_name

MAX_DRAWN = 2_000  # a picture with more states than this is not one a person reads
BAD = "#b00020"


def state_label(state) -> str:
    """A state as in the step table: one line per server, then the reads (and acknowledged writes)."""
    # A leader's match indexes and the system's own state (ISR, epoch cache, NEWLEADER
    # acknowledgements, what is on disk, fences) too: without them two states could look the same.
    label = getattr(state, "label", server_name)
    lines = []
    for k, s in enumerate(state.servers):
        own = systems.row(state, k)
        notes = [w for w in ("prospective", "established") if w in own["role"]] + own["notes"]  # ZAB's phase
        lines.append(f"{label(k)} {cell(s)}" + _match(k, s, own["match"])
                     + (" (" + "; ".join(notes) + ")" if notes else ""))
    if state.reads:
        lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(state.reads)))
    acked = getattr(state, "acked", frozenset())
    if acked:
        lines.append("acked " + " ".join(f"{i}@g{g}" for i, g in sorted(acked)))
    return "\n".join(lines)


def _match(k: int, server, shown) -> str:
    match = getattr(server, "match", ())
    return (" match " + " ".join(f"{server_name(j)}={match[j]}" for j in shown if j != k)) if match else ""


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\l") + ('\\l"' if "\n" in text else '"')


def to_dot(graph: nx.DiGraph, title: str = "") -> str:
    ids = {n: f"s{k}" for k, n in enumerate(sorted(graph.nodes, key=lambda n: (graph.nodes[n]["depth"], n)))}
    out = ["digraph hwm {", f"  label={_dot_string(title)}; labelloc=t;" if title else "",
           '  node [shape=box, fontname="monospace", fontsize=10];', '  edge [fontname="sans-serif", fontsize=9];']
    order = {n: k for k, n in enumerate(ids)}
    for n in sorted(graph.nodes, key=order.get):
        data = graph.nodes[n]
        attrs = [f"label={_dot_string(data['label'] + (chr(10) + 'violates ' + data['violations'] if data['violations'] else ''))}"]
        if data["violations"]:
            attrs.append(f'color="{BAD}", fontcolor="{BAD}"')
        if data.get("initial"):
            attrs.append("penwidth=2.5")
        out.append(f"  {ids[n]} [{', '.join(attrs)}];")
    for a, b, data in sorted(graph.edges(data=True), key=lambda e: (order[e[0]], order[e[1]])):
        attrs = [f"label={_dot_string(data['action'])}"]
        if data["violations"]:
            attrs.append(f'color="{BAD}", fontcolor="{BAD}", penwidth=2, tooltip={_dot_string(data["violations"])}')
        out.append(f"  {ids[a]} -> {ids[b]} [{', '.join(attrs)}];")
    out.append("}")
    return "\n".join(line for line in out if line) + "\n"


def layers(graph: nx.DiGraph, sweeps: int = 4) -> dict[int, list]:
    """The states by breadth-first depth, each layer ordered to cross few edges.

    The barycentre heuristic (Sugiyama's layered drawing): sweeping down, a state moves to the
    mean position of its parents in the layer above; sweeping up, of its children below. Ties
    keep fingerprint order, so the picture is the same on every run.
    """
    out: dict[int, list] = {}
    for n in sorted(graph.nodes):
        out.setdefault(graph.nodes[n]["depth"], []).append(n)
    depths = sorted(out)

    def reorder(depth: int, neighbour_depth: int, neighbours) -> None:
        if neighbour_depth not in out:
            return
        where = {n: k for k, n in enumerate(out[neighbour_depth])}
        current = {n: k for k, n in enumerate(out[depth])}

        def centre(n):
            near = [where[m] for m in neighbours(n) if m in where]
            return (sum(near) / len(near), current[n]) if near else (current[n], current[n])

        out[depth].sort(key=centre)

    for _ in range(sweeps):
        for d in depths[1:]:
            reorder(d, d - 1, graph.predecessors)
        for d in reversed(depths[:-1]):
            reorder(d, d + 1, graph.successors)
    return out


def crossings(graph: nx.DiGraph, ordered: dict[int, list]) -> int:
    """How many pairs of edges between consecutive layers cross (what `layers` keeps low)."""
    where = {n: k for layer in ordered.values() for k, n in enumerate(layer)}
    count = 0
    for d in ordered:
        edges = [(where[a], where[b]) for a, b in graph.edges
                 if graph.nodes[a]["depth"] == d and graph.nodes[b]["depth"] == d + 1]
        count += sum(1 for i, (a1, b1) in enumerate(edges) for a2, b2 in edges[i + 1:]
                     if (a1 - a2) * (b1 - b2) < 0)
    return count


def to_svg(graph: nx.DiGraph, title: str = "") -> str:
    """Layers by breadth-first depth (ordered by `layers`, centred), edges as arrows: down to the
    next layer straight, back or across as a curve, each labelled near where it leaves."""
    ordered = layers(graph)
    line_h, char_w, gap_x, gap_y = 13, 6.6, 30, 70
    size = {}
    for n, data in graph.nodes(data=True):
        lines = data["label"].split("\n") + ([f"violates {data['violations']}"] if data["violations"] else [])
        size[n] = (max(len(line) for line in lines) * char_w + 12, len(lines) * line_h + 10, lines)
    row_width = {d: sum(size[n][0] for n in ordered[d]) + gap_x * (len(ordered[d]) - 1) for d in ordered}
    width = max(row_width.values()) + 40 + 70
    position = {}
    y = 40
    for depth in sorted(ordered):
        x = 90 + (width - 110 - row_width[depth]) / 2  # centred; the depth is written at the left
        for n in ordered[depth]:
            position[n] = (x, y)
            x += size[n][0] + gap_x
        y += max(size[n][1] for n in ordered[depth]) + gap_y
    height = y
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="11">',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>'
           f'<marker id="arrow-bad" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{BAD}"/></marker></defs>']
    if title:
        out.append(f'<text x="20" y="22" font-family="sans-serif" font-size="14" font-weight="bold">{escape(title)}</text>')
    for depth in sorted(ordered):
        top = position[ordered[depth][0]][1]
        out.append(f'<text class="depth" x="10" y="{top + 16:.0f}" font-family="sans-serif" font-size="10" '
                   f'fill="#777">depth {depth}</text>')
    for a, b, data in graph.edges(data=True):
        (ax, ay), (bx, by) = position[a], position[b]
        aw, ah, _ = size[a]
        bw, bh, _ = size[b]
        down = graph.nodes[b]["depth"] == graph.nodes[a]["depth"] + 1
        if down:
            x1, y1, x2, y2 = ax + aw / 2, ay + ah, bx + bw / 2, by
            path = f"M{x1:.0f},{y1:.0f} L{x2:.0f},{y2:.0f}"
            lx, ly = x1 + (x2 - x1) * 0.45 + 3, y1 + (y2 - y1) * 0.45 + 3  # past the fan-out, before the fan-in
        elif a == b:  # a step that changes nothing: a small loop on the state's right
            x1, y1 = ax + aw, ay + ah / 3
            path = f"M{x1:.0f},{y1:.0f} C{x1 + 26:.0f},{y1 - 12:.0f} {x1 + 26:.0f},{y1 + ah / 3 + 12:.0f} " \
                   f"{x1:.0f},{y1 + ah / 3:.0f}"
            lx, ly = x1 + 4, ay - 3
        else:  # back or across: leave from the side and bend out, so it does not run through a layer
            right = bx >= ax
            x1, y1 = (ax + aw if right else ax), ay + ah / 2
            x2, y2 = (bx if right else bx + bw), by + bh / 2
            bend = 40 if right else -40
            path = (f"M{x1:.0f},{y1:.0f} C{x1 + bend:.0f},{y1:.0f} {x2 - bend if right else x2 + bend:.0f},{y2:.0f} "
                    f"{x2:.0f},{y2:.0f}")
            lx, ly = x1 + bend / 2, y1 - 4
        bad = bool(data["violations"])
        colour = BAD if bad else "#777"
        tip = f"<title>{escape(data['action'] + (' violates ' + data['violations'] if bad else ''))}</title>"
        out.append(f'<g class="edge{" violating" if bad else ""}{"" if down else " back"}">{tip}<path d="{path}" '
                   f'fill="none" stroke="{colour}" stroke-width="{2 if bad else 1}" '
                   f'marker-end="url(#{"arrow-bad" if bad else "arrow"})"/>'
                   f'<text x="{lx:.0f}" y="{ly:.0f}" font-family="sans-serif" '
                   f'font-size="9" fill="{colour}">{escape(data["action"])}</text></g>')
    for n, data in graph.nodes(data=True):
        x, y = position[n]
        w, h, lines = size[n]
        bad = bool(data["violations"])
        out.append(f'<g class="state{" violating" if bad else ""}{" initial" if data.get("initial") else ""}" '
                   f'data-depth="{data["depth"]}">'
                   f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="4" fill="#fafafa" '
                   f'stroke="{BAD if bad else "#333"}" stroke-width="{2.5 if data.get("initial") or bad else 1}"/>')
        for k, line in enumerate(lines):
            fill = BAD if bad and line.startswith("violates") else "#222"
            out.append(f'<text x="{x + 6:.0f}" y="{y + 16 + k * line_h:.0f}" fill="{fill}">{escape(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_picture(graph: nx.DiGraph, path: str, title: str = "") -> None:
    """.dot or .svg by the file's suffix; ValueError for a graph too large to read as a picture."""
    if graph.number_of_nodes() > MAX_DRAWN:
        raise ValueError(f"{graph.number_of_nodes():,} states are too many to draw (at most {MAX_DRAWN:,}): "
                         "choose smaller bounds, or write .graphml/.gexf/.json for a graph viewer")
    text = to_dot(graph, title) if path.endswith(".dot") else to_svg(graph, title)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
