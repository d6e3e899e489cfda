"""ITF on the command line: `hwm replay` reads ITF traces and writes them (`--itf OUT`), `hwm check
--save DIR --itf` writes each saved counterexample as ITF beside it (FILE.itf.json)."""

from __future__ import annotations

import json
from pathlib import Path

from hwm.checker.itf_trace import itf_of_trace, trace_of_itf, unsupported
from hwm.model.variant_source import TRACE_KEY, source_changed
from hwm.properties import itf
from hwm.properties.protocol import resolve
from hwm.properties.trace import Trace, TraceError, load, parse


def load_any(path: Path, protocol=None) -> Trace:
    """An hwm-trace/1 file, or an ITF trace turned into one (TraceError or ItfError naming the file)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return load(path)  # its own error message, naming the file
    if itf.is_itf(data):
        parsed = itf.parse(data, source=str(path))
        trace, saved = trace_of_itf(parsed, protocol, source=str(path)), parsed.hwm.get(TRACE_KEY)
    else:
        trace = parse(data, source=str(path))
        saved = trace.extra.get(TRACE_KEY)
    # A variant's trace replays under the file it was found with; --protocol replays it under another.
    changed = source_changed(resolve(trace.protocol)[1], saved) if protocol is None else None
    if changed:
        raise TraceError(changed, file=str(path), field="protocol")
    return trace


def itf_path(path: Path) -> Path:
    """FILE.json -> FILE.itf.json."""
    return path.with_name(path.name[: -len(".json")] + itf.SUFFIX if path.name.endswith(".json") else
                          path.name + itf.SUFFIX)


def save_beside(paths) -> tuple[list[Path], list[str]]:
    """Each saved counterexample as ITF beside it; the ones ITF cannot carry, with why."""
    written, skipped = [], []
    for path in paths:
        trace = load(path)
        try:
            written.append(itf.save(itf_of_trace(trace), itf_path(path)))
        except TraceError as e:
            skipped.append(f"{path.name}: {e.reason}")
    return written, skipped


def write(trace: Trace, protocol, out: Path) -> Path:
    return itf.save(itf_of_trace(trace, protocol), out)


def refusal(protocol_spec) -> str | None:
    """Why ITF cannot carry a protocol's traces, or None."""
    return unsupported(resolve(protocol_spec)[1])
