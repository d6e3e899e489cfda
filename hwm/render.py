"""Text a person reads: property verdicts, the progress line (a replay's step table is the
teaching library's, `hwm.teach.text`)."""

from __future__ import annotations

import sys
import time
from typing import Iterable, Sequence


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
