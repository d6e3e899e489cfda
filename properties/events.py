"""The `hwm-events/1` format: a recorded run of any replicated log, one JSON object a line.

The first line is a header that declares the servers (any names) and which of their
variables the recorder logs; every other line is one event: one server's atomic change
of state, with the fields that changed together.

    {"format": "hwm-events/1", "servers": ["n1", "n2", "n3"], "protocol": "raft"}
    {"server": "n1", "generation": 1, "role": "leader"}
    {"server": "n1", "append": [[1, 1]]}
    {"server": "n2", "generation": 1, "role": "follower", "append": [[1, 1]]}
    {"server": "n1", "hwm": 1}
    {"server": "n1", "read": [[1, 1]]}
    {"server": "n3", "crash": true}

Event fields (all but `server` optional; an event names at least one change):
`generation`, `role` ("leader" | "follower"), `truncate_from` (the log drops every entry
from this index on), `append` ([[index, generation], ...], contiguous: written after the
truncation, overwriting what the log held there), `log` (the whole log, as a snapshot:
[[1, g], [2, g], ...]), `hwm`, `read` (entries a client read from this server), `ack`
(writes this server acknowledged to a client), `crash` / `restart` (true), and `time`
(a number, ignored but for ordering) and `note` (a string, ignored).

Partial logging: the header's `logged` lists the variables the recorder logs (default
every one of `LOGGABLE`); a variable it leaves out may take any value the model allows.
A run starts with every server a follower of generation 0, empty log, high-water mark 0.
Errors name the file, the line and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from hwm.properties.errors import InputError

FORMAT = "hwm-events/1"
LOGGABLE = ("generation", "role", "log", "hwm", "reads")
ROLES = ("leader", "follower")
HEADER_FIELDS = ("format", "servers", "protocol", "logged", "network", "title", "part")
# `generation: null`: the server's generation changed to one the recorder does not name (a
# candidate's, in a system whose model has atomic elections); it is unknown until logged again.
UNNAMED = -1
EVENT_FIELDS = ("server", "generation", "role", "truncate_from", "append", "log", "hwm", "read", "ack",
                "crash", "restart", "time", "note")
# The fields that change or constrain a server (an event needs at least one).
CHANGES = ("generation", "role", "truncate_from", "append", "log", "hwm", "read", "ack", "crash", "restart")
# The variable each field records, for the header's `logged`.
VARIABLE_OF = {"generation": "generation", "role": "role", "truncate_from": "log", "append": "log",
               "log": "log", "hwm": "hwm", "read": "reads"}


class EventError(InputError):
    """A recorded run that cannot be read: says which file, which line and which field."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.line, self.field = line, field
        super().__init__(message, file, None if line is None else f"line {line}", field and f"field {field!r}")


@dataclass(frozen=True)
class Header:
    servers: tuple[str, ...]
    logged: frozenset[str]
    protocol: Any = None  # informational: the command line names the protocol to validate against
    network: str = "rpc"
    title: str = ""
    part: str | None = None  # the one server whose events this file holds (one part of a run)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "servers": list(self.servers)}
        if self.protocol is not None:
            out["protocol"] = self.protocol
        if self.logged != frozenset(LOGGABLE):
            out["logged"] = [v for v in LOGGABLE if v in self.logged]
        if self.network != "rpc":
            out["network"] = self.network
        if self.title:
            out["title"] = self.title
        if self.part is not None:
            out["part"] = self.part
        return out


@dataclass(frozen=True)
class Event:
    """One server's atomic change. Entries are (index, generation) pairs."""

    server: str
    line: int | None = None  # where it was read (None for an event fed by a program)
    generation: int | None = None
    role: str | None = None
    truncate_from: int | None = None
    append: tuple[tuple[int, int], ...] | None = None
    log: tuple[tuple[int, int], ...] | None = None
    hwm: int | None = None
    read: tuple[tuple[int, int], ...] | None = None
    ack: tuple[tuple[int, int], ...] | None = None
    crash: bool = False
    restart: bool = False
    time: float | None = None
    # The file it was read from, where that is not the run's own name (a part of a run merged by time).
    source: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"server": self.server}
        for name in CHANGES:
            value = getattr(self, name)
            if value is None or value is False:
                continue
            if name == "generation" and value == UNNAMED:
                value = None
            out[name] = [list(e) for e in value] if isinstance(value, tuple) else value
        if self.time is not None:
            out["time"] = self.time
        return out

    def __str__(self) -> str:
        return json.dumps(self.to_json(), separators=(", ", ": "))


def _int(value: Any, low: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{what} is an integer >= {low}, not {value!r}")
    return value


def _entries(value: Any, what: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list):
        raise ValueError(f"{what} is a list of [index, generation] pairs, not {value!r}")
    out = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2):
            raise ValueError(f"{what} is a list of [index, generation] pairs; {item!r} is not one")
        out.append((_int(item[0], 1, "an index"), _int(item[1], 0, "a generation")))
    return tuple(out)


def _contiguous(entries: tuple[tuple[int, int], ...], what: str, first: int | None = None) -> None:
    if not entries:
        raise ValueError(f"{what} names no entry")
    start = entries[0][0] if first is None else first
    for k, (index, _) in enumerate(entries):
        if index != start + k:
            raise ValueError(f"{what} must hold consecutive indexes from {start}; found {index} "
                             f"where {start + k} belongs")


def log_edit(before: tuple[int, ...], after: tuple[int, ...]) -> dict:
    """`truncate_from` and `append` that turn log `before` into `after`."""
    common = 0
    for a, b in zip(before, after):
        if a != b:
            break
        common += 1
    out: dict = {}
    if common < len(before):
        out["truncate_from"] = common + 1
    if common < len(after):
        out["append"] = tuple((common + 1 + k, g) for k, g in enumerate(after[common:]))
    return out


def parse_header(data: Any, *, source: str | None = None, line: int | None = 1) -> Header:
    if not isinstance(data, dict):
        raise EventError("the first line is the header, a JSON object", file=source, line=line)
    if data.get("format") != FORMAT:
        raise EventError(f"format must be {FORMAT!r}, not {data.get('format')!r}", file=source, line=line,
                         field="format")
    unknown = sorted(set(data) - set(HEADER_FIELDS))
    if unknown:
        raise EventError("unknown header field; the header takes " + ", ".join(HEADER_FIELDS), file=source,
                         line=line, field=unknown[0])
    servers = data.get("servers")
    if (not isinstance(servers, list) or not servers or not all(isinstance(s, str) and s for s in servers)
            or len(set(servers)) != len(servers)):
        raise EventError(f"servers is a non-empty list of distinct names, not {servers!r}", file=source, line=line,
                         field="servers")
    if len(servers) > 9:
        raise EventError(f"at most 9 servers, not {len(servers)}", file=source, line=line, field="servers")
    logged = data.get("logged", list(LOGGABLE))
    if not isinstance(logged, list) or not all(v in LOGGABLE for v in logged):
        raise EventError("logged is a list of " + ", ".join(LOGGABLE) + f", not {logged!r}", file=source,
                         line=line, field="logged")
    network = data.get("network", "rpc")
    if network not in ("rpc", "async"):
        raise EventError(f"network is rpc or async, not {network!r}", file=source, line=line, field="network")
    title = data.get("title", "")
    if not isinstance(title, str):
        raise EventError("title is a string", file=source, line=line, field="title")
    part = data.get("part")
    if part is not None and part not in servers:
        raise EventError(f"part names the server whose events the file holds, one of the servers, not {part!r}",
                         file=source, line=line, field="part")
    return Header(tuple(servers), frozenset(logged), data.get("protocol"), network, title, part)


def parse_event(data: Any, header: Header, *, source: str | None = None, line: int | None = None) -> Event:
    """Validate one decoded event against the header (EventError naming line and field)."""
    if not isinstance(data, dict):
        raise EventError("an event is a JSON object", file=source, line=line)
    unknown = sorted(set(data) - set(EVENT_FIELDS))
    if unknown:
        raise EventError("unknown event field; events take " + ", ".join(EVENT_FIELDS), file=source, line=line,
                         field=unknown[0])
    server = data.get("server")
    if header.part is not None and server != header.part:
        raise EventError(f"this file is {header.part}'s part of the run; {server!r} is another server", file=source,
                         line=line, field="server")
    if server not in header.servers:
        if "server" not in data:
            raise EventError("an event names its server", file=source, line=line, field="server")
        raise EventError(f"server {server!r} is not declared; the header declares " + ", ".join(header.servers),
                         file=source, line=line, field="server")
    if not any(name in data for name in CHANGES):
        raise EventError("an event records at least one of " + ", ".join(CHANGES), file=source, line=line)
    args: dict[str, Any] = {}
    name = None
    try:
        for name in ("generation", "hwm"):
            if name in data:
                if name == "generation" and data[name] is None:
                    args[name] = UNNAMED
                else:
                    args[name] = _int(data[name], 0, name)
        name = "truncate_from"
        if name in data:
            args[name] = _int(data[name], 1, name)
        name = "role"
        if name in data:
            if data[name] not in ROLES:
                raise ValueError(f"role is leader or follower, not {data[name]!r}")
            args[name] = data[name]
        for name in ("append", "log", "read", "ack"):
            if name in data:
                args[name] = _entries(data[name], name)
        name = "append"
        if "append" in args:
            _contiguous(args["append"], "append")
        name = "log"
        if "log" in args:
            if args["log"]:
                _contiguous(args["log"], "log", first=1)
            if "append" in data or "truncate_from" in data:
                raise ValueError("log is a whole-log snapshot; it does not go with append or truncate_from")
        for name in ("crash", "restart"):
            if name in data:
                if data[name] is not True:
                    raise ValueError(f"{name} is true when present, not {data[name]!r}")
                args[name] = True
        name = "crash"
        if args.get("crash") and len([k for k in data if k in CHANGES]) > 1:
            raise ValueError("a crash is an event of its own")
        name = "time"
        if "time" in data:
            if not isinstance(data["time"], (int, float)) or isinstance(data["time"], bool):
                raise ValueError(f"time is a number, not {data['time']!r}")
            args["time"] = data["time"]
        name = "note"
        if not isinstance(data.get("note", ""), str):
            raise ValueError("note is a string")
    except ValueError as e:
        raise EventError(str(e), file=source, line=line, field=name) from None
    for name in CHANGES:
        variable = VARIABLE_OF.get(name)
        if name in data and variable and variable not in header.logged:
            raise EventError(f"the header's logged list leaves out {variable}, yet this event records it",
                             file=source, line=line, field=name)
    return Event(server=server, line=line, **args)


def parse_lines(lines: Iterable[str], *, source: str | None = None) -> tuple[Header, Iterator[Event]]:
    """The header and a lazy iterator of the events (each validated when reached)."""
    it = iter(enumerate(lines, 1))
    header = None
    for number, text in it:
        if not text.strip():
            continue
        header = parse_header(_decode(text, source, number), source=source, line=number)
        break
    if header is None:
        raise EventError("empty: a recorded run starts with its header line", file=source)

    def events() -> Iterator[Event]:
        for number, text in it:
            if text.strip():
                yield parse_event(_decode(text, source, number), header, source=source, line=number)
    return header, events()


def _decode(text: str, source: str | None, line: int) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise EventError(f"broken JSON at column {e.colno}: {e.msg}", file=source, line=line) from None


def load(path: str | Path) -> tuple[Header, list[Event]]:
    """Read and validate a whole recorded run."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise EventError(f"cannot read: {e.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise EventError("not UTF-8 text", file=str(path)) from None
    header, events = parse_lines(text.splitlines(), source=str(path))
    return header, list(events)


def merge_parts(parts: list[tuple[Header, list[Event]]], *, sources: list[str] | None = None
                ) -> tuple[Header, list[Event]]:
    """One run from its servers' parts (one file each), its events in time order (EventError when the
    parts do not belong together)."""
    sources = sources or [None] * len(parts)
    first, _ = parts[0]
    seen: dict[str, str | None] = {}
    for (header, events), source in zip(parts, sources):
        if header.part is None:
            raise EventError("a file of a run in parts names its server in the header's part", file=source,
                             line=1, field="part")
        if (header.servers, header.protocol, header.logged) != (first.servers, first.protocol, first.logged):
            raise EventError(f"the parts of one run declare the same servers, protocol and logged variables; "
                             f"this one differs from {sources[0]}", file=source, line=1)
        if header.part in seen:
            raise EventError(f"two parts of {header.part}: {seen[header.part]} and this one", file=source,
                             line=1, field="part")
        seen[header.part] = source
        for event in events:
            if event.time is None:
                raise EventError("an event of a run in parts has its time (the parts merge by it)", file=source,
                                 line=event.line, field="time")
    merged = sorted((replace(e, source=source) if source is not None else e
                     for (_, events), source in zip(parts, sources) for e in events), key=lambda e: e.time)
    return replace(first, part=None), merged


def dumps(header: Header, events: Iterable[Event]) -> str:
    lines = [json.dumps(header.to_json())]
    lines += [json.dumps(e.to_json()) for e in events]
    return "\n".join(lines) + "\n"


def from_observation(observation: Mapping[str, Any], header: Header) -> Event:
    """A node's introspection snapshot `{node, generation, role, log: [[index, generation]...], hwm}`
    as an event (a harness that polls nodes feeds these to the validator)."""
    data = {("server" if k == "node" else k): v for k, v in observation.items()}
    return parse_event(data, header)


def load_runs(files: list[Path]) -> list[tuple[Path, object, list]]:
    """(name, header, events) per run: a file, or the parts of one run (files whose header names
    their server's `part`), merged per directory."""
    runs, parts = [], {}
    for f in files:
        header, events = load(f)
        if header.part is None:
            runs.append((f, header, events))
        else:
            parts.setdefault(f.parent, []).append((f, header, events))
    for directory, found in parts.items():
        header, events = merge_parts([(h, e) for _, h, e in found], sources=[str(f) for f, _, _ in found])
        runs.append((directory, header, events))
    return runs
