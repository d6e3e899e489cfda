"""One row of a replay, as every picture draws it: a `Frame` (the step, the state after it, why it
changed what it changed, what it removed, the findings it triggers), and entries as text.

The terminal replay, the HTML page, the SVG files and the explorer all draw frames; the words in
them come from `hwm.teach.explain` and the pictures' additions from `hwm.teach.motion`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

Values = dict  # (index, generation) -> the value a client wrote, where the trace gives one


@dataclass
class Frame:
    number: int  # 0 is the initial state
    label: str  # the step as text, "(initial)" for frame 0
    state: Any  # a cluster view (a model State, or an implementation snapshot)
    lines: list[str] = field(default_factory=list)  # why the step changed what it changed
    removed: list[tuple[int, int, int]] = field(default_factory=list)  # (server, index, generation)
    violations: dict[str, str] = field(default_factory=dict)  # always properties broken at this step
    witnesses: dict[str, str] = field(default_factory=dict)  # sometimes properties seen at this step
    blocked: str | None = None  # the step was not enabled: why (the state is unchanged)
    step: dict | None = None  # the step as in a trace file
    in_flight: list[str] = field(default_factory=list)  # messages on the async network after the step
    values: Values = field(default_factory=dict, repr=False)  # values written so far, by entry
    # A lasso (a liveness counterexample): `loop` is the first step of the cycle that repeats
    # for ever (the state after the last step is the one before step `loop`); `cycle` marks
    # the frames of the cycle's steps.
    loop: int | None = None
    loop_end: int | None = None  # the cycle's last step
    cycle: bool = False
    # What the pictures add (`hwm.teach.motion.annotate`): the messages the step sends, the
    # quorum behind a leader's new high-water mark, where two protocols on one path part.
    messages: list[dict] = field(default_factory=list)
    quorum: dict | None = None
    departs: str | None = None


# ------------------------------------------------------------------ entries
def entry(index: int, generation: int, values: Values | None = None) -> str:
    """`2@g1` or `2@g1 "b"`: an entry and, when known, the value written there."""
    text = f"{index}@g{generation}"
    if values and (index, generation) in values:
        text += f' "{values[(index, generation)]}"'
    return text


def entries(items: Iterable[tuple[int, int]], values: Values | None = None) -> str:
    return ", ".join(entry(i, g, values) for i, g in items) or "none"


def removed_entries(before_log: Sequence[int], after_log: Sequence[int]) -> list[tuple[int, int]]:
    """Entries (index, generation) in `before_log` that `after_log` no longer holds at their index."""
    return [(k + 1, g) for k, g in enumerate(before_log) if k >= len(after_log) or after_log[k] != g]


def added_entries(before_log: Sequence[int], after_log: Sequence[int]) -> list[tuple[int, int]]:
    return [(k + 1, g) for k, g in enumerate(after_log) if k >= len(before_log) or before_log[k] != g]
