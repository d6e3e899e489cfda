"""A state drawn as SVG: one row per server, its log as boxes coloured by generation, the HWM as a line.

Written directly (no external tools), so one drawing serves the HTML page, the
explorer and `hwm replay --svg DIR` (one file per step, for slides and docs).
Each picture carries its own legend, so it reads without the tutorial beside it.

From left to right: the server's name and role, its log, the network (the step's
messages as numbered arrows between the rows, and on the async network every
message waiting in a channel), the server's high-water mark, then what clients
have read. Class names (`server`, `entry`, `read`, `truncated`, `hwm-line`,
`violation`, `message`, `quorum-entry`, `legend`, `departs`) are what the page's
CSS and script animate and what the browser tests look for.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from html import escape
from typing import Sequence

from hwm.teach import motion
from hwm.teach import systems
from hwm.teach.frame import Frame
from hwm.properties.snapshot import LEADER, server_name

# Generation colours (colour-blind friendly, Okabe-Ito); generation 0 is unused.
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999")

BOX_W, BOX_H, ROW_H, LEFT = 54, 36, 76, 170
HWM_W, READS_W, MIN_WIDTH = 64, 150, 640
BAD, BLOCKED, QUORUM, DEPARTS, MESSAGE = "#b00020", "#8a5200", "#1b7837", "#8a5200", "#3b5bdb"
CHAR_W = 6.4  # a generous width of one character at 11 px, to wrap text to the picture


@dataclass(frozen=True)
class Layout:
    """What stays fixed across a trace's frames, so pictures line up step after step."""

    servers: int
    columns: int  # log boxes drawn per row
    lanes: int = 2  # the most arrows one frame draws in the network column
    generations: int = 2  # generation colours the legend shows
    memory: bool = False  # ZAB: the legend explains entries only in memory
    hwm_name: str = "hwm"  # Kafka's HW, BookKeeper's LAC

    @classmethod
    def of(cls, frames: Sequence[Frame], max_log: int = 0) -> "Layout":
        longest = max([max_log] + [len(s.log) for f in frames for s in f.state.servers]
                      + [i for f in frames for _, i, _ in f.removed])
        generations = max([2] + [g for f in frames for s in f.state.servers for g in s.log])
        first = frames[0].state
        return cls(len(first.servers), max(longest, 1), max([2] + [len(f.messages) for f in frames]),
                   min(generations, len(PALETTE)), hasattr(first, "synced"), systems.row(first, 0)["hwm"])

    @property
    def network_width(self) -> int:
        return 40 + 24 * self.lanes

    @property
    def width(self) -> int:
        return max(LEFT + self.columns * BOX_W + self.network_width + HWM_W + READS_W, MIN_WIDTH)

    def wrap(self, text: str, size: int = 11, indent: str = "    ") -> list[str]:
        return textwrap.wrap(text, int((self.width - 24) / (CHAR_W * size / 11)), subsequent_indent=indent)


def colour(generation: int) -> str:
    return PALETTE[(generation - 1) % len(PALETTE)]


def _text(x, y, body, cls="", anchor="start", size=12, weight="normal", fill="#222") -> str:
    return (f'<text x="{x:g}" y="{y:g}" class="{cls}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}" fill="{fill}">{escape(str(body))}</text>')


CYCLE = "#6a3d9a"  # a lasso's cycle, in every picture of it

HWM_WORDS = {"hwm": "high-water mark", "HW": "high watermark (HW)", "LAC": "last add confirmed (LAC)",
             "last": "last entry"}


def _cycle_badge(frame: Frame, layout: Layout, y: float, top: float) -> list[str]:
    """For a lasso: where this step stands in the cycle that repeats for ever, and a dashed
    frame around the cluster in every state of the cycle."""
    if frame.loop is None:
        return []
    loop, end = frame.loop, frame.loop_end
    if frame.cycle:
        text, cls = f"\u21bb cycle {frame.number - loop + 1}/{end - loop + 1} (steps {loop}..{end})", "cycle"
    elif frame.number == loop - 1:
        text, cls = "\u21bb the cycle returns to this state", "cycle-home"
    else:
        text, cls = f"stem (the cycle starts at step {loop})", "stem"
    box = (f'<rect x="{LEFT - 6}" y="{top - 20}" width="{layout.width - LEFT}" height="{layout.servers * ROW_H + 8}" '
           f'rx="6" fill="none" stroke="{CYCLE}" stroke-width="2" stroke-dasharray="8 4"/>'
           if frame.cycle or cls == "cycle-home" else "")
    return [f'<g class="{cls}" data-loop="{loop}">{box}' + _text(10, y, text, "cycle-note", "start", 12, "bold", CYCLE)
            + "</g>"]


def _banner(frame: Frame, layout: Layout, y: float) -> tuple[list[str], float]:
    """The step's heading; a violation or a refused step on a solid band, white on red or brown."""
    heading = f"step {frame.number}: {frame.label}" if frame.number else "initial state"
    if frame.violations:
        heading, cls, fill = heading + " - VIOLATION", "violation", BAD
    elif frame.blocked:
        heading, cls, fill = heading + " - NOT ENABLED", "heading blocked", BLOCKED
    else:
        return [_text(10, y, heading, "heading", size=13, weight="bold")], y + 20
    lines = layout.wrap(heading, 13)
    band = (f'<rect class="banner" x="4" y="{y - 14}" width="{layout.width - 8}" height="{18 * len(lines) + 2}" '
            f'rx="3" fill="{fill}"/>')
    texts = [_text(10, y + 18 * k, line, cls, size=13, weight="bold", fill="#fff") for k, line in enumerate(lines)]
    return [band] + texts, y + 18 * len(lines) + 4


def _messages(frame: Frame, layout: Layout, top: float) -> tuple[list[str], list[str]]:
    """Each message as a numbered arrow in the network column, and its line for the key below.

    An arrow leaves the sender's row and bends out to the right to reach the receiver's; its
    number sits at the bend. The dot (`message-dot`) is where the message is: the page moves
    it along the arrow from `data-start` to `data-stop` when the step is played.
    """
    x0 = LEFT + layout.columns * BOX_W + 14
    out, key = [], []
    for number, m in enumerate(frame.messages, 1):
        bulge = 28 + 24 * (number - 1)
        ya = top + m["from"] * ROW_H + BOX_H / 2 - 5
        yb = top + m["to"] * ROW_H + BOX_H / 2 + 5
        d = f"M{x0},{ya:g} C{x0 + bulge},{ya:g} {x0 + bulge},{yb:g} {x0},{yb:g}"
        waiting = m["kind"] == "in-flight"
        colour_ = BAD if m["lost"] else ("#888" if waiting else MESSAGE)

        def point(t):  # on the arrow (a cubic Bezier curve), t from 0 (sender) to 1 (receiver)
            return (x0 + 3 * (1 - t) * t * bulge,
                    (1 - t) ** 3 * ya + 3 * (1 - t) ** 2 * t * ya + 3 * (1 - t) * t ** 2 * yb + t ** 3 * yb)

        # The number sits at the bend, where each arrow bends out further than the one before, so
        # no two numbers meet. Filled: the message is there, waiting in its channel (or lost there);
        # hollow: it has arrived. The dot is drawn only while the page plays the step.
        ax, ay = point(0.5)
        resting = m["stop"] < 1
        fill, ink = (colour_, "#fff") if resting else ("#fff", colour_)
        px, py = point(m["start"])
        out.append(f'<g class="message{" in-flight" if waiting else ""}{" lost" if m["lost"] else ""}" '
                   f'data-kind="{m["kind"]}" data-from="{server_name(m["from"])}" data-to="{server_name(m["to"])}" '
                   f'data-order="{m["order"]}" data-start="{m["start"]}" data-stop="{m["stop"]}">'
                   f'<path class="message-path" d="{d}" fill="none" stroke="{colour_}" stroke-width="1.6"'
                   + (' stroke-dasharray="4 3"' if waiting or m["lost"] else "")
                   + f' marker-end="url(#hwm-arrowhead)"/>'
                   f'<circle class="message-badge" cx="{ax:g}" cy="{ay:g}" r="7" fill="{fill}" stroke="{colour_}"/>'
                   + _text(ax, ay + 3.5, number, "message-number", "middle", 9, "bold", ink)
                   + f'<circle class="message-dot" cx="{px:g}" cy="{py:g}" r="5" fill="{colour_}" opacity="0"/>'
                   + (_text(ax + 6, ay - 6, "\u2717", "lost-mark", "start", 12, "bold", BAD) if m["lost"] else "")
                   + "</g>")
        arrow = f"{server_name(m['from'])}->{server_name(m['to'])}"
        if waiting:
            key.append(f"({number}) in flight: {arrow}: {m['label']}")
        elif m["kind"] == "send" and not m["lost"]:
            key.append(f"({number}) in flight: {arrow}: {m['label']} (just sent)")
        else:
            key.append(f"({number}) {arrow}: {m['label']}")
    return out, key


def _legend(layout: Layout, y: float) -> tuple[list[str], float]:
    """What every mark means, flowed left to right over as many lines as the width needs."""
    items = []  # (drawing at x, y; its width), text
    swatches = layout.generations

    def generations(x, y):
        return "".join(f'<rect x="{x + 18 * k}" y="{y - 10}" width="15" height="13" rx="2" fill="{colour(k + 1)}" '
                       f'stroke="#555"/>' + _text(x + 18 * k + 7.5, y, f"{k + 1}", "", "middle", 8)
                       for k in range(swatches)), 18 * swatches

    def read(x, y):
        return (f'<rect x="{x}" y="{y - 10}" width="22" height="13" rx="2" fill="#ddd" stroke="#000" '
                f'stroke-width="2.5"/>' + _text(x + 16, y - 1, "R", "", "middle", 8, "bold")), 24

    def hwm(x, y):
        return (f'<line x1="{x + 4}" y1="{y - 12}" x2="{x + 4}" y2="{y + 3}" stroke="{BAD}" stroke-width="3"/>'
                f'<line x1="{x + 8}" y1="{y - 4}" x2="{x + 24}" y2="{y - 4}" stroke="{BAD}" stroke-width="1.5" '
                f'stroke-dasharray="5 3"/>'), 26

    def removed(x, y):
        return (f'<rect x="{x}" y="{y - 10}" width="24" height="13" rx="2" fill="#eee" stroke="{BAD}" '
                f'stroke-dasharray="3 2"/>' + _text(x + 12, y - 1, "x", "", "middle", 9, fill=BAD)), 26

    def quorum(x, y):
        return (f'<rect x="{x}" y="{y - 11}" width="22" height="15" rx="3" fill="none" stroke="{QUORUM}" '
                f'stroke-width="3"/>'), 24

    def message(x, y):
        return (f'<line x1="{x}" y1="{y - 4}" x2="{x + 40}" y2="{y - 4}" stroke="{MESSAGE}" stroke-width="1.6" '
                f'marker-end="url(#hwm-arrowhead)"/><circle cx="{x + 10}" cy="{y - 4}" r="6" fill="#fff" '
                f'stroke="{MESSAGE}"/><circle cx="{x + 26}" cy="{y - 4}" r="6" fill="#888" stroke="#888"/>'), 44

    def memory(x, y):
        return (f'<rect x="{x}" y="{y - 10}" width="22" height="13" rx="2" fill="#E69F00" fill-opacity="0.45" '
                f'stroke="#555" stroke-dasharray="4 3"/>'), 24

    name = layout.hwm_name
    items = [(generations, "colour: the entry's generation"), (read, "R, thick border: read by a client"),
             (hwm, f"{HWM_WORDS.get(name, name)}: clients read up to it"),
             (removed, "x i@gN: entry removed from the log"),
             (quorum, f"the quorum behind a new {name}"), (message, "message, numbered below (filled: waiting in its channel)")]
    if layout.memory:
        items.append((memory, "acknowledged, only in memory"))
    out = [f'<g class="legend">' + _text(10, y, "Legend", "legend-title", size=11, weight="bold")]
    x, right = 70, layout.width - 10
    for drawing, text in items:
        svg, w = drawing(x, y)
        need = w + 4 + len(text) * 5.9 + 18
        if x + need > right and x > 70:
            x, y = 70, y + 20
            svg, w = drawing(x, y)
        out.append(f'<g class="legend-item">{svg}' + _text(x + w + 4, y, text, "legend-text", size=10, fill="#333")
                   + "</g>")
        x += need
    out.append("</g>")
    return out, y + 22


def draw(frame: Frame, layout: Layout, *, title: str = "", with_lines: bool = False) -> str:
    """The SVG of one frame. `with_lines` adds the step's explanation under the picture (slides)."""
    state = frame.state
    values = frame.values
    width = layout.width
    body = []
    y = 20
    for line in (layout.wrap(title, 13) if title else []):
        body.append(_text(10, y, line, "title", size=13, weight="bold"))
        y += 18
    banner, y = _banner(frame, layout, y + (4 if title else 0))
    body += banner
    if frame.departs:
        body.append(f'<g class="departs">')
        for line in layout.wrap("\u21c4 " + frame.departs, 11):
            body.append(_text(10, y, line, "departs-text", size=11, weight="bold", fill=DEPARTS))
            y += 15
        body.append("</g>")
        y += 2
    if frame.loop is not None:
        body += _cycle_badge(frame, layout, y, y + 26)
        y += 12
    top = y + 14  # the first row; the index ruler sits just above it (a lasso's cycle frame above that)
    # Index ruler.
    for i in range(1, layout.columns + 1):
        body.append(_text(LEFT + (i - 0.5) * BOX_W, top - 4, i, "index", "middle", 10, fill="#777"))
    network_x = LEFT + layout.columns * BOX_W
    hwm_x = network_x + layout.network_width
    body.append(_text(hwm_x, top - 4, layout.hwm_name, "column-title", size=10, weight="bold", fill=BAD))
    removed = {}
    for k, i, g in frame.removed:
        removed.setdefault(k, []).append((i, g))
    quorum = frame.quorum
    hwm_points = []
    for k, server in enumerate(state.servers):
        y = top + k * ROW_H
        alive = server.alive
        role = systems.role_word(server)
        own = systems.row(state, k)  # the system's own state: ISR, epochs, NEWLEADER, fences
        body.append(f'<g class="server" data-server="{server_name(k)}" data-role="{role}" '
                    f'opacity="{1 if alive else 0.45}">')
        body.append(_text(10, y + 16, server_name(k), "name", size=15, weight="bold"))
        body.append(_text(10, y + 31, own["role"], "role", size=11, weight="bold" if role == "leader" else "normal"))
        notes = own["notes"][:2]
        for line, note in enumerate(notes):
            body.append(_text(10, y + 43 + 10 * line, note, "system-note", size=9, fill="#6a3d9a"))
        match = getattr(server, "match", ())
        if alive and server.role == LEADER and match:
            word = {"HW": "LEO", "LAC": "stored"}.get(own["hwm"], "match")
            held = quorum["holders"] if quorum and quorum["leader"] == k else ()
            parts = " ".join(f"{server_name(j)}={match[j]}" for j in own["match"] if j != k)
            body.append(_text(10, y + 43 + 10 * len(notes), f"{word} {parts}", "match", size=9,
                              weight="bold" if held else "normal", fill=QUORUM if held else "#555"))
        memory_from = own["memory_from"]
        body.append(f'<rect x="{LEFT}" y="{y}" width="{layout.columns * BOX_W}" height="{BOX_H}" '
                    f'fill="none" stroke="#ddd" stroke-dasharray="3 3"/>')
        for position, generation in enumerate(server.log):
            index = position + 1
            x = LEFT + position * BOX_W
            read = (index, generation) in state.reads
            memory = memory_from is not None and index >= memory_from  # ZAB: acknowledged, not yet on disk
            body.append(f'<g class="entry{" read" if read else ""}{" memory-only" if memory else ""}" '
                        f'data-index="{index}" data-generation="{generation}">'
                        f'<rect x="{x + 2}" y="{y}" width="{BOX_W - 4}" height="{BOX_H}" rx="4" '
                        f'fill="{colour(generation)}" stroke="{"#000" if read else "#555"}" '
                        f'stroke-width="{3 if read else 1}"'
                        + (' fill-opacity="0.45" stroke-dasharray="4 3"' if memory else "") + "/>")
            if memory:
                body.append(_text(x + BOX_W / 2, y + BOX_H - 2, "memory", "memory-mark", "middle", 8, fill="#333"))
            body.append(_text(x + BOX_W / 2 - (4 if read else 0), y + 15, f"g{generation}", "", "middle", 12, "bold"))
            value = values.get((index, generation))
            if value is not None and not memory:
                body.append(_text(x + BOX_W / 2, y + 29, str(value)[:7], "value", "middle", 10))
            if read:
                body.append(_text(x + BOX_W - 9, y + 11, "R", "read-mark", "middle", 9, "bold", "#000"))
            body.append("</g>")
        if quorum and k in quorum["holders"]:
            x = LEFT + (quorum["index"] - 1) * BOX_W
            body.append(f'<rect class="quorum-entry" data-index="{quorum["index"]}" x="{x - 1}" y="{y - 3}" '
                        f'width="{BOX_W + 2}" height="{BOX_H + 6}" rx="6" fill="none" stroke="{QUORUM}" '
                        f'stroke-width="3"/>')
        for index, generation in removed.get(k, ()):
            x = LEFT + (index - 1) * BOX_W
            body.append(f'<g class="truncated" data-index="{index}" data-generation="{generation}">'
                        f'<rect x="{x + 4}" y="{y + BOX_H + 5}" width="{BOX_W - 8}" height="16" rx="3" '
                        f'fill="{colour(generation)}" fill-opacity="0.5" stroke="{BAD}" stroke-dasharray="3 2"/>'
                        + _text(x + BOX_W / 2, y + BOX_H + 17, f"x {index}@g{generation}", "", "middle", 9,
                                fill=BAD) + "</g>")
        hx = LEFT + server.hwm * BOX_W
        body.append(f'<line class="hwm-tick" x1="{hx}" y1="{y - 4}" x2="{hx}" y2="{y + BOX_H + 4}" '
                    f'stroke="{BAD}" stroke-width="3"/>')
        body.append(_text(hwm_x, y + BOX_H / 2 + 5, f"{own['hwm']} {server.hwm}", "hwm-label", size=12,
                          weight="bold", fill=BAD))
        hwm_points.append(f"{hx},{y + BOX_H / 2}")
        body.append("</g>")
    body.append(f'<polyline class="hwm-line" points="{" ".join(hwm_points)}" fill="none" stroke="{BAD}" '
                f'stroke-width="1.5" stroke-dasharray="5 3"/>')
    arrows, key = _messages(frame, layout, top)
    body += arrows
    # Reads, at the right.
    rx = hwm_x + HWM_W
    body.append(_text(rx, top - 4, "read by clients:", "reads-title", size=11, weight="bold"))
    for row, (index, generation) in enumerate(sorted(state.reads)):
        value = values.get((index, generation))
        body.append(_text(rx, top + 12 + 14 * row, f"{index}@g{generation}" + (f' "{value}"' if value else ""),
                          "read-entry", size=11))
    y = top + layout.servers * ROW_H + 4
    if quorum:
        body.append('<g class="quorum-note">')
        for line in layout.wrap(motion.holders_text(quorum) + (f"; {quorum['rule']}" if quorum["rule"] else "")):
            body.append(_text(10, y, line, "quorum-text", size=11, weight="bold", fill=QUORUM))
            y += 16
        body.append("</g>")
    for line in key:
        for part in layout.wrap(line):
            body.append(_text(10, y, part, "message-key", size=11, fill="#888" if "in flight" in line else MESSAGE))
            y += 16
    notes = list(frame.lines) if with_lines else []
    notes += [f"{name} violated: {text}" for name, text in frame.violations.items()]
    for note in notes:
        bad = " violated: " in note
        for part in layout.wrap(note):
            body.append(_text(10, y, part, "note", size=11, fill=BAD if bad else "#333"))
            y += 16
    legend, y = _legend(layout, y + 12)
    body += legend
    height = round(y)
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" class="hwm-state" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">',
            '<defs><marker id="hwm-arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
            'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
            '<rect width="100%" height="100%" fill="#fff"/>']
    return "\n".join(head + body + ["</svg>"])
