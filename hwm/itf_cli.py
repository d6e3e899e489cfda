"""ITF on the command line: `hwm replay` reads ITF traces and writes them (`--itf OUT`), `hwm check
--save DIR --itf` writes each saved counterexample as ITF beside it (FILE.itf.json)."""

from __future__ import annotations

import json
from pathlib import Path

from hwm.checker.itf_trace import itf_of_trace, trace_of_itf
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
        return trace_of_itf(itf.parse(data, source=str(path)), protocol, source=str(path))
    return parse(data, source=str(path))


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
    _, protocol = resolve(protocol_spec)
    return None if protocol.system == "raft" else f"ITF here carries the raft family's variables, not {protocol.system}'s"
