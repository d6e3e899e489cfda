"""A state drawn as SVG: one row per server, its log as boxes coloured by generation, the HWM as a line.

Written directly (no external tools), so one drawing serves the HTML page, the
explorer and `hwm replay --svg DIR` (one file per step, for slides and docs).
Class names (`server`, `entry`, `read`, `truncated`, `hwm-line`, `violation`)
are what the page's CSS animates and what the browser tests look for.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from html import escape
from typing import Sequence

from hwm.teach import systems
from hwm.teach.explain import Frame
from hwm.properties.snapshot import LEADER, server_name

# Generation colours (colour-blind friendly, Okabe-Ito); generation 0 is unused.
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999")

BOX_W, BOX_H, ROW_H, LEFT, TOP = 54, 36, 70, 150, 54


@dataclass(frozen=True)
class Layout:
    """What stays fixed across a trace's frames, so pictures line up step after step."""

    servers: int
    columns: int  # log boxes drawn per row

    @classmethod
    def of(cls, frames: Sequence[Frame], max_log: int = 0) -> "Layout":
        longest = max([max_log] + [len(s.log) for f in frames for s in f.state.servers]
                      + [i for f in frames for _, i, _ in f.removed])
        return cls(len(frames[0].state.servers), max(longest, 1))

    @property
    def width(self) -> int:
        return max(LEFT + self.columns * BOX_W + 230, 560)

    def height(self, extra_lines: int) -> int:
        return TOP + self.servers * ROW_H + 20 + 16 * extra_lines


def colour(generation: int) -> str:
    return PALETTE[(generation - 1) % len(PALETTE)]


def _text(x, y, body, cls="", anchor="start", size=12, weight="normal", fill="#222") -> str:
    return (f'<text x="{x}" y="{y}" class="{cls}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}" fill="{fill}">{escape(str(body))}</text>')


CYCLE = "#6a3d9a"  # a lasso's cycle, in every picture of it


def _cycle_badge(frame: Frame, layout: Layout) -> list[str]:
    """For a lasso: where this step stands in the cycle that repeats for ever (top right), and a
    dashed frame around the cluster in every state of the cycle."""
    if frame.loop is None:
        return []
    loop, end = frame.loop, frame.loop_end
    if frame.cycle:
        text, cls = f"\u21bb cycle {frame.number - loop + 1}/{end - loop + 1} (steps {loop}..{end})", "cycle"
    elif frame.number == loop - 1:
        text, cls = "\u21bb the cycle returns to this state", "cycle-home"
    else:
        text, cls = f"stem (the cycle starts at step {loop})", "stem"
    box = (f'<rect x="{LEFT - 6}" y="{TOP - 12}" width="{layout.width - LEFT}" height="{layout.servers * ROW_H + 4}" '
           f'rx="6" fill="none" stroke="{CYCLE}" stroke-width="2" stroke-dasharray="8 4"/>'
           if frame.cycle or cls == "cycle-home" else "")
    return [f'<g class="{cls}" data-loop="{loop}">{box}'
            + _text(layout.width - 10, 38, text, "cycle-note", "end", 12, "bold", CYCLE) + "</g>"]


def draw(frame: Frame, layout: Layout, *, title: str = "", with_lines: bool = False) -> str:
    """The SVG of one frame. `with_lines` adds the step's explanation under the picture (slides)."""
    state = frame.state
    values = frame.values
    notes = list(frame.lines) if with_lines else []
    notes += [f"{name} violated: {text}" for name, text in frame.violations.items()]
    notes += [f"in flight: {m}" for m in frame.in_flight]
    # Wrap to the picture's width (about 6.2 px per character at 11 px), indenting continuations.
    notes = [part for note in notes for part in
             textwrap.wrap(note, int((layout.width - 20) / 6.2), subsequent_indent="    ")]
    height = layout.height(len(notes))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="hwm-state" width="{layout.width}" '
           f'height="{height}" viewBox="0 0 {layout.width} {height}" font-family="sans-serif">',
           f'<rect width="100%" height="100%" fill="#fff"/>']
    heading = f"step {frame.number}: {frame.label}" if frame.number else "initial state"
    if title:
        out.append(_text(10, 18, title, "title", size=13, weight="bold"))
    banner_fill = "#b00020" if frame.violations else ("#b26a00" if frame.blocked else "#222")
    banner = heading + (" - VIOLATION" if frame.violations else " - NOT ENABLED" if frame.blocked else "")
    out.append(_text(10, 38, banner, "violation" if frame.violations else "heading", size=13,
                     weight="bold", fill=banner_fill))
    out += _cycle_badge(frame, layout)
    # Index ruler.
    for i in range(1, layout.columns + 1):
        out.append(_text(LEFT + (i - 0.5) * BOX_W, TOP - 4, i, "index", "middle", 10, fill="#777"))
    removed = {}
    for k, i, g in frame.removed:
        removed.setdefault(k, []).append((i, g))
    hwm_points = []
    for k, server in enumerate(state.servers):
        y = TOP + k * ROW_H
        alive = server.alive
        role = ("leader" if server.role == LEADER else "follower") if alive else "down"
        own = systems.row(state, k)  # the system's own state: ISR, epochs, NEWLEADER, fences
        out.append(f'<g class="server" data-server="{server_name(k)}" data-role="{role}" '
                   f'opacity="{1 if alive else 0.45}">')
        out.append(_text(10, y + 16, server_name(k), "name", size=15, weight="bold"))
        out.append(_text(10, y + 32, own["role"], "role", size=11,
                         weight="bold" if role == "leader" else "normal"))
        match = getattr(server, "match", ())
        if alive and server.role == LEADER and match:
            shown = " ".join(f"{server_name(j)}={match[j]}" for j in own["match"] if j != k)
            word = {"HW": "LEO", "LAC": "stored"}.get(own["hwm"], "match")
            if own["notes"]:  # under the system's notes, smaller
                out.append(_text(10, y + 43 + 10 * len(own["notes"][:2]), f"{word} {shown}", "match", size=9,
                                 fill="#555"))
            else:
                out.append(_text(10, y + 46, f"{word} {shown}", "match", size=10, fill="#555"))
        for line, note in enumerate(own["notes"][:2]):
            out.append(_text(10, y + 43 + 10 * line, note, "system-note", size=9, fill="#6a3d9a"))
        memory_from = own["memory_from"]
        out.append(f'<rect x="{LEFT}" y="{y}" width="{layout.columns * BOX_W}" height="{BOX_H}" '
                   f'fill="none" stroke="#ddd" stroke-dasharray="3 3"/>')
        for position, generation in enumerate(server.log):
            index = position + 1
            x = LEFT + position * BOX_W
            read = (index, generation) in state.reads
            memory = memory_from is not None and index >= memory_from  # ZAB: acknowledged, not yet on disk
            out.append(f'<g class="entry{" read" if read else ""}{" memory-only" if memory else ""}" '
                       f'data-index="{index}" data-generation="{generation}">'
                       f'<rect x="{x + 2}" y="{y}" width="{BOX_W - 4}" height="{BOX_H}" rx="4" '
                       f'fill="{colour(generation)}" stroke="{"#000" if read else "#555"}" stroke-width="{3 if read else 1}"'
                       + (' fill-opacity="0.45" stroke-dasharray="4 3"' if memory else "") + "/>")
            if memory:
                out.append(_text(x + BOX_W / 2, y + BOX_H - 2, "memory", "memory-mark", "middle", 8, fill="#333"))
            out.append(_text(x + BOX_W / 2, y + 15, f"g{generation}", "", "middle", 12, "bold"))
            value = values.get((index, generation))
            if value is not None:
                out.append(_text(x + BOX_W / 2, y + 29, str(value)[:7], "value", "middle", 10))
            if read:
                out.append(_text(x + BOX_W - 9, y + 11, "R", "read-mark", "middle", 9, "bold", "#000"))
            out.append("</g>")
        for index, generation in removed.get(k, ()):
            x = LEFT + (index - 1) * BOX_W
            out.append(f'<g class="truncated" data-index="{index}" data-generation="{generation}">'
                       f'<rect x="{x + 6}" y="{y + BOX_H + 3}" width="{BOX_W - 12}" height="16" rx="3" '
                       f'fill="{colour(generation)}" stroke="#b00020" stroke-dasharray="3 2"/>'
                       + _text(x + BOX_W / 2, y + BOX_H + 15, f"x {index}@g{generation}", "", "middle", 9,
                               fill="#b00020") + "</g>")
        hx = LEFT + server.hwm * BOX_W
        out.append(f'<line class="hwm-tick" x1="{hx}" y1="{y - 6}" x2="{hx}" y2="{y + BOX_H + 6}" '
                   f'stroke="#b00020" stroke-width="3"/>')
        out.append(_text(hx + 4, y + BOX_H + 14 if not removed.get(k) else y - 6, f"{own['hwm']} {server.hwm}",
                         "hwm-label", size=10, fill="#b00020"))
        hwm_points.append(f"{hx},{y + BOX_H / 2}")
        out.append("</g>")
    out.append(f'<polyline class="hwm-line" points="{" ".join(hwm_points)}" fill="none" stroke="#b00020" '
               f'stroke-width="1.5" stroke-dasharray="5 3"/>')
    # Reads, at the right.
    rx = LEFT + layout.columns * BOX_W + 16
    out.append(_text(rx, TOP + 10, "read by clients:", "reads-title", size=11, weight="bold"))
    for row, (index, generation) in enumerate(sorted(state.reads)):
        value = values.get((index, generation))
        out.append(_text(rx, TOP + 26 + 14 * row, f"{index}@g{generation}" + (f' "{value}"' if value else ""),
                         "read-entry", size=11))
    y = TOP + layout.servers * ROW_H + 10
    for line in notes:
        bad = " violated: " in line
        out.append(_text(10, y, line, "note", size=11, fill="#b00020" if bad else "#333"))
        y += 16
    out.append("</svg>")
    return "\n".join(out)
