"""ITF, the Informal Trace Format of Apalache and the TLA+ tools, for hwm's own variables.

An ITF trace is a JSON object: `#meta`, `vars` (the variable names) and `states`, each state
an object from variable to value, with TLA+ values encoded as ITF says: integers as JSON
numbers (or `{"#bigint": "..."}`), sequences as arrays, sets as `{"#set": [...]}`, functions as
`{"#map": [[key, value], ...]}`, tuples as `{"#tup": [...]}`, records as objects.

hwm's variables, with servers named "S1".."Sn":
  generation, hwm: [Server -> Int]    role: [Server -> "leader" | "follower"]
  log: [Server -> Seq(Int)] (entry generations)    alive: [Server -> BOOLEAN]
  match: [Server -> [Server -> Int]] (empty for a follower: only a leader tracks followers)
  reads: SUBSET (Int \\X Int) (the (index, generation) entries clients read)    crashes: Int
A model with more variables than these (ZAB's, Kafka's, BookKeeper's, a variant's fields) has each
of them after the eight, in the order of its state (`further_variables`): a further field of its
servers as [Server -> value] (Kafka's `in_isr`, a variant's `read_only`), a further field of its
state as its value (ZAB's `synced`, `durable`, `epochs` and `acked`; BookKeeper's clients are
servers S(n+1) and S(n+2)); a tuple is a sequence, except in a set (a tuple there), a frozenset a set,
None `{"#unserializable": "None"}`.
Each state after the first names the step that led to it in its `#meta.action`, and the
trace's `#meta.hwm` keeps what an `hwm-trace/1` file says beyond the states (protocol, config,
property, expect, title). A trace from another tool has neither: hwm recovers the steps from
the states (checker/itf_trace.py). Errors name the file, the state and the variable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from hwm.properties.errors import InputError
from hwm.properties.snapshot import FOLLOWER, LEADER, server_name, server_position

FORMAT_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"
VARIABLES = ("generation", "role", "log", "hwm", "alive", "match", "reads", "crashes")
SERVER_VARIABLES = VARIABLES[:6]
# A state's fields written as the eight above (channels: the rpc network's, always empty).
STATE_FIELDS = ("servers", "reads", "crashes", "channels")
SUFFIX = ".itf.json"


class ItfError(InputError):
    """An ITF trace hwm cannot read: names the file, the state and the variable."""

    def __init__(self, message: str, *, file: str | None = None, state: int | None = None,
                 variable: str | None = None):
        self.state, self.variable = state, variable
        super().__init__(message, file, None if state is None else f"state {state}",
                         None if variable is None else f"variable {variable!r}")


class ItfServer(NamedTuple):
    generation: int
    role: str
    log: tuple[int, ...]
    hwm: int
    alive: bool
    match: tuple[int, ...]


class ItfState(NamedTuple):
    """One state of hwm's variables (a model State of the rpc network has exactly these)."""

    servers: tuple[ItfServer, ...]
    reads: frozenset
    crashes: int
    action: str | None = None  # the step into this state, when the file names it
    # Each variable beyond the eight, as (name, its value as canonical JSON), sorted by name.
    further: tuple[tuple[str, str], ...] = ()


class ItfTrace(NamedTuple):
    states: list[ItfState]
    hwm: dict[str, Any]  # what the file's #meta.hwm says (empty for a trace from another tool)
    loop: int | None = None
    description: str = ""


# ------------------------------------------------------------------- writing
def _map(pairs: Iterable[tuple[Any, Any]]) -> dict:
    return {"#map": [[k, v] for k, v in pairs]}


def further_variables(state) -> tuple[str, ...]:
    """The variables of `state`'s model beyond the eight: its servers' further fields, then its own."""
    server_fields = getattr(state.servers[0], "_fields", SERVER_VARIABLES) if state.servers else ()
    return tuple(f for f in server_fields if f not in SERVER_VARIABLES) + tuple(
        f for f in getattr(state, "_fields", STATE_FIELDS) if f not in STATE_FIELDS)


def _value(value: Any, in_set: bool = False) -> Any:
    """A further variable's value in ITF."""
    if value is None:
        return {"#unserializable": "None"}
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2 ** 53 else {"#bigint": str(value)}
    if isinstance(value, (frozenset, set)):
        return {"#set": [_value(v, True) for v in sorted(value)]}
    if isinstance(value, tuple):
        items = [_value(v) for v in value]
        return {"#tup": items} if in_set else items
    raise ValueError(f"ITF here has no form of {type(value).__name__} {value!r}")


def state_json(state, index: int, action: str | None = None) -> dict[str, Any]:
    """One state (anything with servers of generation/role/log/hwm/alive/match, reads, crashes; a
    model's further variables after them)."""
    names = [server_name(k) for k in range(len(state.servers))]
    servers = list(zip(names, state.servers))
    meta: dict[str, Any] = {"index": index}
    if action is not None:
        meta["action"] = action
    further: dict[str, Any] = {}
    for name in further_variables(state):
        if name in getattr(state, "_fields", ()):
            further[name] = _value(getattr(state, name))
        else:
            further[name] = _map((n, _value(getattr(s, name))) for n, s in servers)
    return {
        "#meta": meta,
        "generation": _map((n, s.generation) for n, s in servers),
        "role": _map((n, s.role) for n, s in servers),
        "log": _map((n, list(s.log)) for n, s in servers),
        "hwm": _map((n, s.hwm) for n, s in servers),
        "alive": _map((n, bool(s.alive)) for n, s in servers),
        "match": _map((n, _map(zip(names, s.match))) for n, s in servers),
        "reads": {"#set": [{"#tup": [i, g]} for i, g in sorted(state.reads)]},
        "crashes": state.crashes,
        **further,
    }


def to_json(states: list, actions: list[str | None], hwm: dict[str, Any] | None = None,
            description: str = "", loop: int | None = None) -> dict[str, Any]:
    """The ITF document of `states`; `actions[k]` is the step into `states[k]` (None for the first)."""
    meta: dict[str, Any] = {"format": "ITF", "format-description": FORMAT_DESCRIPTION, "source": "hwm",
                            "description": description}
    if hwm:
        meta["hwm"] = hwm
    doc: dict[str, Any] = {"#meta": meta, "vars": list(VARIABLES) + list(further_variables(states[0])),
                           "states": [state_json(s, k, a) for k, (s, a) in enumerate(zip(states, actions))]}
    if loop is not None:
        doc["loop"] = loop
    return doc


def dumps(doc: dict[str, Any]) -> str:
    """One state per line, so that diffs stay readable."""
    states = doc["states"]
    head = {k: v for k, v in doc.items() if k != "states"}
    body = json.dumps(head, ensure_ascii=False)[:-1]
    rows = ",\n".join("  " + json.dumps(s, ensure_ascii=False) for s in states)
    return body + (', ' if head else '') + '"states": [\n' + rows + "\n]}\n"


def save(doc: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps(doc), encoding="utf-8")
    tmp.replace(path)
    return path


# ------------------------------------------------------------------- reading
def _int(value: Any) -> int:
    if isinstance(value, dict) and set(value) == {"#bigint"}:
        try:
            return int(value["#bigint"])
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a big integer") from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, not {value!r}")
    return value


def _function(value: Any, what: str) -> dict:
    if isinstance(value, dict) and set(value) == {"#map"} and isinstance(value["#map"], list):
        out = {}
        for pair in value["#map"]:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise ValueError(f"{what}: a #map holds [key, value] pairs, not {pair!r}")
            out[pair[0]] = pair[1]
        return out
    if isinstance(value, dict) and not any(k.startswith("#") for k in value):
        return dict(value)  # a record keyed by server name: what TLC writes for [S1 |-> ...] too
    raise ValueError(f"{what} is a function ({{\"#map\": [...]}}), not {value!r}")


def _set(value: Any, what: str) -> list:
    if isinstance(value, dict) and set(value) == {"#set"} and isinstance(value["#set"], list):
        return value["#set"]
    raise ValueError(f"{what} is a set ({{\"#set\": [...]}}), not {value!r}")


def _tuple(value: Any) -> list:
    if isinstance(value, dict) and set(value) == {"#tup"} and isinstance(value["#tup"], list):
        return value["#tup"]
    if isinstance(value, list):
        return value
    raise ValueError(f"expected a tuple ({{\"#tup\": [...]}}), not {value!r}")


def parse_state(raw: Any, index: int, *, source: str | None = None, servers: int | None = None) -> ItfState:
    if not isinstance(raw, dict):
        raise ItfError("a state is a JSON object", file=source, state=index)
    missing = [v for v in VARIABLES if v not in raw and v != "match"]
    if missing:
        raise ItfError("hwm reads ITF traces of its own variables: " + ", ".join(VARIABLES)
                       + f"; this state has no {missing[0]!r}", file=source, state=index, variable=missing[0])
    variable = "generation"
    try:
        generation = _function(raw["generation"], "generation")
        names = sorted(generation, key=lambda n: server_position(n, 9) if isinstance(n, str) else -1)
        n = len(names)
        if servers is not None and n != servers:
            raise ValueError(f"{n} servers here, {servers} in the first state")
        if names != [server_name(k) for k in range(n)]:
            raise ValueError(f"servers are S1..S{n}, not {', '.join(map(str, names))}")
        columns = {}
        for variable in ("generation", "role", "log", "hwm", "alive", "match"):
            if variable == "match" and variable not in raw:
                columns[variable] = {name: {} for name in names}
                continue
            column = _function(raw[variable], variable)
            if sorted(column) != sorted(names):
                raise ValueError(f"{variable} maps " + ", ".join(map(str, sorted(column)))
                                 + f", not the servers {', '.join(names)}")
            columns[variable] = column
        variable = None
        rows = []
        for name in names:
            variable = "role"
            role = columns["role"][name]
            if role not in (LEADER, FOLLOWER):
                raise ValueError(f"{name}'s role is leader or follower, not {role!r}")
            variable = "log"
            log = columns["log"][name]
            if not isinstance(log, list):
                raise ValueError(f"{name}'s log is a sequence of generations, not {log!r}")
            variable = "alive"
            alive = columns["alive"][name]
            if not isinstance(alive, bool):
                raise ValueError(f"{name}'s alive is a boolean, not {alive!r}")
            variable = "match"
            match = _function(columns["match"][name], "match")
            if set(match) != set(names[:len(match)]):  # BookKeeper's: the bookies', not its clients'
                raise ValueError(f"{name}'s match maps " + ", ".join(map(str, match)) + f", not S1..S{len(match)}")
            match_row = tuple(_int(match[m]) for m in names[:len(match)])
            variable = "generation"
            rows.append(ItfServer(_int(columns["generation"][name]), role, tuple(_int(g) for g in log),
                                  _int(columns["hwm"][name]), alive, match_row))
        variable = "reads"
        reads = set()
        for item in _set(raw["reads"], "reads"):
            pair = _tuple(item)
            if len(pair) != 2:
                raise ValueError(f"a read is an (index, generation) pair, not {item!r}")
            reads.add((_int(pair[0]), _int(pair[1])))
        variable = "crashes"
        crashes = _int(raw["crashes"])
        meta = raw.get("#meta", {})
        action = meta.get("action") if isinstance(meta, dict) else None
    except ValueError as e:
        raise ItfError(str(e), file=source, state=index, variable=variable) from None
    further = tuple(sorted((name, json.dumps(value, sort_keys=True)) for name, value in raw.items()
                           if name not in VARIABLES and name != "#meta"))
    return ItfState(tuple(rows), frozenset(reads), crashes, action if isinstance(action, str) else None, further)


def parse(data: Any, *, source: str | None = None) -> ItfTrace:
    if not isinstance(data, dict) or not isinstance(data.get("states"), list):
        raise ItfError("an ITF trace is a JSON object with a list of states", file=source)
    if not data["states"]:
        raise ItfError("an ITF trace has at least one state", file=source)
    meta = data.get("#meta", {})
    if not isinstance(meta, dict):
        raise ItfError("#meta is an object", file=source)
    states = [parse_state(data["states"][0], 0, source=source)]
    for k, raw in enumerate(data["states"][1:], 1):
        states.append(parse_state(raw, k, source=source, servers=len(states[0].servers)))
    loop = data.get("loop")
    if loop is not None and (not isinstance(loop, int) or isinstance(loop, bool) or not 0 <= loop < len(states)):
        raise ItfError(f"loop is the index of a state, 0..{len(states) - 1}, not {loop!r}", file=source)
    hwm = meta.get("hwm", {})
    if not isinstance(hwm, dict):
        raise ItfError("#meta.hwm is an object", file=source)
    return ItfTrace(states, hwm, loop, str(meta.get("description", "")))


def is_itf(data: Any) -> bool:
    """Whether a decoded JSON document is an ITF trace (rather than an hwm-trace/1 file)."""
    return isinstance(data, dict) and "states" in data and "steps" not in data


def load(path: str | Path) -> ItfTrace:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ItfError(f"cannot read: {e.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise ItfError("not UTF-8 text", file=str(path)) from None
    except json.JSONDecodeError as e:
        raise ItfError(f"broken JSON at line {e.lineno}, column {e.colno}: {e.msg}", file=str(path)) from None
    return parse(data, source=str(path))
