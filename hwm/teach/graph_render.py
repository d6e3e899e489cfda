"""State graphs a person can open: Graphviz .dot text and a self-laid-out .svg.

Nodes are labelled as in the step table (`S1 L1 [1] h1` per server, then the
reads); states that violate an `always` property and the steps that violate one
are red; the initial state is drawn bold. The SVG is laid out here, in layers by
breadth-first depth, so nothing beyond Python is needed to open the picture.
"""

from __future__ import annotations

from html import escape

import networkx as nx

from hwm.render import cell
from hwm.teach import systems
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


def to_svg(graph: nx.DiGraph, title: str = "") -> str:
    """Layers by breadth-first depth, nodes left to right in fingerprint order, edges as lines."""
    layers: dict[int, list] = {}
    for n in sorted(graph.nodes):
        layers.setdefault(graph.nodes[n]["depth"], []).append(n)
    line_h, char_w, gap_x, gap_y = 13, 6.6, 30, 70
    size = {}
    for n, data in graph.nodes(data=True):
        lines = data["label"].split("\n") + ([f"violates {data['violations']}"] if data["violations"] else [])
        size[n] = (max(len(line) for line in lines) * char_w + 12, len(lines) * line_h + 10, lines)
    position = {}
    y = 40
    width = 0
    for depth in sorted(layers):
        x = 20
        row_h = max(size[n][1] for n in layers[depth])
        for n in layers[depth]:
            position[n] = (x, y)
            x += size[n][0] + gap_x
        width = max(width, x)
        y += row_h + gap_y
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
    for a, b, data in graph.edges(data=True):
        (ax, ay), (bx, by) = position[a], position[b]
        aw, ah, _ = size[a]
        bw, bh, _ = size[b]
        x1, y1 = ax + aw / 2, ay + ah
        x2, y2 = bx + bw / 2, by
        if graph.nodes[b]["depth"] <= graph.nodes[a]["depth"]:  # back or level edge: leave from the side
            y1, y2 = ay + ah / 2, by + bh / 2
            x1 = ax + aw if bx >= ax else ax
            x2 = bx if bx >= ax else bx + bw
        bad = bool(data["violations"])
        colour = BAD if bad else "#777"
        tip = f"<title>{escape(data['action'] + (' violates ' + data['violations'] if bad else ''))}</title>"
        out.append(f'<g class="edge{" violating" if bad else ""}">{tip}<line x1="{x1:.0f}" y1="{y1:.0f}" '
                   f'x2="{x2:.0f}" y2="{y2:.0f}" stroke="{colour}" stroke-width="{2 if bad else 1}" '
                   f'marker-end="url(#{"arrow-bad" if bad else "arrow"})"/>'
                   f'<text x="{(x1 + x2) / 2 + 3:.0f}" y="{(y1 + y2) / 2:.0f}" font-family="sans-serif" '
                   f'font-size="9" fill="{colour}">{escape(data["action"])}</text></g>')
    for n, data in graph.nodes(data=True):
        x, y = position[n]
        w, h, lines = size[n]
        bad = bool(data["violations"])
        out.append(f'<g class="state{" violating" if bad else ""}{" initial" if data.get("initial") else ""}">'
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
