"""Text a person reads: step tables, property verdicts, the progress line."""

from __future__ import annotations

import sys
import time
from typing import Iterable, Sequence

from hwm.properties.snapshot import LEADER, fields_text, server_name


def cell(server) -> str:
    """One server in a few characters: role letter and generation, log, HWM.

    `L3 [1,3] h1` is a leader of generation 3 whose log holds entries of
    generations 1 and 3, with high-water mark 1; F is a follower, x a server that is down.
    A Kafka replica in the ISR ends with `*`; a variant's fields follow as `name=value`.
    """
    role = ("L" if server.role == LEADER else "F") if server.alive else "x"
    isr = "*" if getattr(server, "in_isr", False) else ""
    return f"{role}{server.generation} [{','.join(map(str, server.log))}] h{server.hwm}{isr}{fields_text(server)}"


def step_table(rows: Sequence[tuple[str, object]], marks: dict[int, str] | None = None) -> str:
    """A table of (step label, cluster view) rows, one column per server, reads last.

    `marks` adds a note under a row (e.g. the violation found at that step).
    """
    if not rows:
        return ""
    n = len(rows[0][1].servers)
    # A model whose states say more (ZAB's durable prefix, BookKeeper's fences and roles) names
    # its columns with `label(k)` and adds to a cell with `note(k)`.
    label = getattr(rows[0][1], "label", server_name)
    header = ["#", "step"] + [label(k) for k in range(n)] + ["reads"]
    body = []
    for number, (step, view) in enumerate(rows):
        reads = " ".join(f"{i}@g{g}" for i, g in sorted(view.reads))
        note = getattr(view, "note", None)
        cells = [cell(s) + (note(k) if note else "") for k, s in enumerate(view.servers)]
        body.append([str(number), step] + cells + [reads])
    widths = [max(len(r[c]) for r in [header] + body) for c in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    for number, r in enumerate(body):
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        if marks and number in marks:
            lines.append(" " * (widths[0] + 2) + "^ " + marks[number])
    return "\n".join(lines)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [list(map(str, r)) for r in rows]
    widths = [max(len(str(r[c])) for r in [list(header)] + rows) for c in range(len(header))]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(out)


def duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `2 h 03 min`."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
    """Progress of a search: a one-line display redrawn on a terminal; off one (a CI log), a plain
    line every `interval` seconds, so a long check is not silent until it ends.

    Shows the elapsed time, the states so far, the mean rate, and the growth: new states per
    second since the previous line, which falls as the search nears its end (or as it slows).
    `mode`: auto (redrawn on a terminal, lines off one), always (lines, even on a terminal), never.
    """

    def __init__(self, label: str, stream=None, enabled: bool | None = None, mode: str = "auto",
                 interval: float = 10.0):
        self.stream = stream or sys.stderr
        tty = self.stream.isatty()
        self.enabled = (mode != "never") if enabled is None else enabled
        self.redraw = tty and mode == "auto"
        self.interval = interval
        self.logged: float | None = None  # when the last plain line was written
        self.label = label
        self.shown = False
        self.started = time.perf_counter()
        self.last: tuple[float, int] | None = None  # (elapsed, states) at the previous line

    def line(self, info: dict) -> str:
        elapsed = info.get("elapsed", time.perf_counter() - self.started)
        states = info["states"]
        growth = ""
        if self.last is not None and elapsed > self.last[0]:
            growth = f"  +{(states - self.last[1]) / (elapsed - self.last[0]):,.0f} new/s"
        self.last = (elapsed, states)
        frontier = f"  frontier {info['frontier']:,}" if "frontier" in info else ""
        return (f"{self.label}: {duration(elapsed)}  depth {info['depth']}  states {states:,}{frontier}  "
                f"{info['states_per_second']:,.0f} states/s{growth}{self.eta(info)}")

    @staticmethod
    def eta(info: dict) -> str:
        """`  ETA 3 min 05 s` once the levels have started to shrink (checker.estimate), else nothing."""
        from hwm.checker.estimate import remaining_seconds

        seconds = remaining_seconds(info)
        return "" if seconds is None or seconds < 1 else f"  ETA {duration(seconds)}"  # < 1: ending

    def __call__(self, info: dict) -> None:
        if not self.enabled:
            return
        if not self.redraw:
            now = time.perf_counter()
            if self.logged is None and now - self.started < self.interval:
                return  # a check that ends within one interval needs no progress in its log
            if self.logged is not None and now - self.logged < self.interval:
                return
            self.logged = now
            self.stream.write(self.line(info) + "\n")
            self.stream.flush()
            return
        self.stream.write("\r" + self.line(info)[:160].ljust(100))
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 160 + "\r")
            self.stream.flush()
            self.shown = False
