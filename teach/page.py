"""The picture of a trace: one self-contained HTML page, and one SVG file per step.

The page inlines its CSS, its script and every frame (SVG drawn by
`hwm.teach.svg`, reasons from `hwm.teach.explain`), so it opens from a file with
no network access. A slider and keys step forward and back; the violating step
is highlighted and a removed entry drops out of its log. With a second column
the same steps play under another protocol side by side.
"""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from pathlib import Path
from typing import Sequence

from hwm.teach.frame import Frame
from hwm.teach.motion import mark_departure
from hwm.teach.svg import Layout, draw


def asset(name: str) -> str:
    """A static file shipped with the package (package data, no build step)."""
    return resources.files("hwm.teach").joinpath("static", name).read_text(encoding="utf-8")


def frame_payload(frame: Frame, layout: Layout) -> dict:
    """A frame as the browser draws it: its SVG and its reasons."""
    return {"number": frame.number, "label": frame.label, "svg": draw(frame, layout),
            "lines": frame.lines, "violations": frame.violations, "witnesses": frame.witnesses,
            "blocked": frame.blocked, "in_flight": frame.in_flight, "step": frame.step,
            "removed": len(frame.removed), "loop": frame.loop, "cycle": frame.cycle, "departs": frame.departs,
            "messages": len(frame.messages)}


def column(heading: str, frames: Sequence[Frame], layout: Layout) -> dict:
    return {"heading": heading, "frames": [frame_payload(f, layout) for f in frames]}


def _script_json(data) -> str:
    # Inside <script>, "</" would end the element early.
    return json.dumps(data, ensure_ascii=False).replace("</", "<\\/")


def page(title: str, explanation: str, meta: str, columns: Sequence[dict]) -> str:
    """The whole page as text."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)}</title>
<style>
{asset("view.css")}
</style>
</head>
<body>
<h1>{escape(title)}</h1>
<p class="meta">{escape(meta)}</p>
<p class="explanation">{escape(explanation)}</p>
<div class="controls">
  <button id="first" title="first step (Home)">&laquo; first</button>
  <button id="back" title="step back (left arrow)">&#x25C0;</button>
  <input id="slider" type="range" min="0" value="0" aria-label="step">
  <button id="forward" title="step forward (right arrow)">&#x25B6;</button>
  <button id="last" title="last step (End)">last &raquo;</button>
  <button id="jump" title="the violating or blocked step (v)">violation</button>
  <button id="play" title="play the steps one after another, messages moving (space)">play</button>
  <label>speed <select id="speed" aria-label="speed">
    <option value="0.25">0.25x</option><option value="0.5">0.5x</option><option value="1" selected>1x</option>
    <option value="2">2x</option><option value="4">4x</option></select></label>
  <span id="counter"></span>
  <span class="meta"><kbd>&larr;</kbd> <kbd>&rarr;</kbd> step, <kbd>v</kbd> violation, <kbd>space</kbd> play/pause;
  the address ends in <code>#step=N</code>: a link to this step</span>
</div>
<div id="cycle" class="cycle-bar" hidden></div>
<div id="columns" class="columns"></div>
<h2 style="font-size:1em">Steps</h2>
<div id="steps"></div>
<script type="application/json" id="hwm-data">{_script_json({"columns": list(columns)})}</script>
<script>
{asset("view.js")}
</script>
<script>
{asset("page.js")}
</script>
</body>
</html>
"""


def write_page(path: Path, title: str, explanation: str, meta: str,
               columns: Sequence[tuple[str, Sequence[Frame]]], max_log: int = 0) -> Path:
    """Write the page of one or more columns of frames (the same steps under different protocols)."""
    if len(columns) == 2:  # the same steps under two protocols: mark where they part, on both
        mark_departure(columns[0][1], columns[1][1], tuple(_protocol_name(h) for h, _ in columns))
    layout = Layout.of([f for _, frames in columns for f in frames], max_log)
    text = page(title, explanation, meta, [column(h, frames, layout) for h, frames in columns])
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def _protocol_name(heading: str) -> str:
    """`raft` of the heading `raft on the model: holds`."""
    return heading.split(" on the ", 1)[0].split(": ", 1)[0]


def write_svgs(directory: Path, frames: Sequence[Frame], title: str = "", max_log: int = 0) -> list[Path]:
    """One SVG per step (`step-00.svg` is the initial state), each with the step's reasons under it."""
    layout = Layout.of(frames, max_log)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for frame in frames:
        path = directory / f"step-{frame.number:02d}.svg"
        path.write_text(draw(frame, layout, title=title, with_lines=True), encoding="utf-8")
        written.append(path)
    return written


def trace_columns(trace, protocol=None, compare=None, targets=("model",)) -> list[tuple[str, list[Frame]]]:
    """Frames of `trace` per target (model, impl) and, with `compare`, under a second protocol."""
    from hwm.bridge.replay import REPLAYERS
    from hwm.teach.explain import frames_of_outcome
    from hwm.properties.protocol import resolve

    out = []
    for target in targets:
        outcome = REPLAYERS[target](trace, protocol)
        out.append((f"{outcome.protocol} on the {target}: {outcome.summary()}",
                    frames_of_outcome(trace, outcome, protocol)))
    if compare is not None:
        outcome = REPLAYERS["model"](trace, compare)
        out.append((f"{resolve(compare)[0]} on the model: {outcome.summary()}",
                    frames_of_outcome(trace, outcome, compare)))
    return out


def trace_meta(trace) -> str:
    from hwm.properties.protocol import resolve
    config = " ".join(f"{k}={v}" for k, v in trace.config.items())
    expected = f"expects {trace.expect}" + (f" of {trace.property}" if trace.property else "")
    return f"protocol {resolve(trace.protocol)[0]}  |  {config}  |  {expected}  |  {len(trace.steps)} steps"


def write_trace_page(trace, out: Path, protocol=None, compare=None, targets=("model",)) -> Path:
    """The page of a saved trace (what `hwm replay FILE --html OUT` and `hwm check --save` write)."""
    columns = trace_columns(trace, protocol, compare, targets)
    return write_page(out, trace.title or str(trace.source), trace.explanation, trace_meta(trace), columns,
                      trace.config.get("max_log", 0))
