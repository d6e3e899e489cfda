"""A cluster in text: one server in a few characters, a replay as a table of steps (what
`hwm replay` prints and the state graphs label their states with)."""

from __future__ import annotations

from typing import Sequence

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
