"""The `hwm-trace/1` counterexample format: one module reads and writes it.

A trace names a protocol, a configuration, a property and an expectation, and
lists steps in the action vocabulary shared by the model and the implementation.
Validation is eager and every error names the file, the step and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from hwm.properties.acked import ALL_BY_NAME as BY_NAME
from hwm.properties.errors import InputError
from hwm.properties.liveness import LIVENESS_BY_NAME
from hwm.properties.protocol import ProtocolError, resolve
from hwm.properties.snapshot import server_position

FORMAT = "hwm-trace/1"
EXPECTATIONS = ("violation", "holds", "blocked")
NETWORKS = ("rpc", "async")

# Each action and the fields it takes: (field, kind), kind "server" or "servers" or "value".
ACTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "elect": (("server", "server"), ("voters", "servers")),
    "write": (("server", "server"), ("value", "value")),
    "replicate": (("leader", "server"), ("follower", "server")),
    "send": (("from", "server"), ("to", "server")),
    "deliver": (("from", "server"), ("to", "server")),
    "drop": (("from", "server"), ("to", "server")),
    "read": (("server", "server"),),
    "crash": (("server", "server"),),
    "restart": (("server", "server"),),
    # ZAB (model/zab.py): the prospective leader synchronises a follower, which acknowledges
    # NEWLEADER; a follower flushes what it holds only in memory to disk.
    "sync": (("leader", "server"), ("follower", "server")),
    "persist": (("server", "server"),),
    # BookKeeper (model/bookkeeper.py): servers are the bookies; the writer and the recovery
    # client are not named. The writer adds an entry, sends its adds to a bookie; recovery
    # fences a bookie with its LAC read and reads the next entry from a bookie.
    "add": (("value", "value"),),
    "send_add": (("bookie", "server"),),
    "fence": (("bookie", "server"),),
    "recovery_read": (("bookie", "server"),),
    # BookKeeper with spare bookies: the writer's add to `bookie` (down) failed, and the writer
    # replaces it in a new fragment by the first live bookie outside its ensemble.
    "change_ensemble": (("bookie", "server"),),
    # Kafka: the leader removes a lagging or dead follower from the ISR (maybeShrinkIsr).
    "shrink_isr": (("leader", "server"), ("follower", "server")),
    # Kafka (late_leader_and_isr): the LeaderAndIsr request of the epoch `leader` leads reaches
    # `replica` late.
    "leader_and_isr": (("leader", "server"), ("replica", "server")),
    # Partitions on the rpc network (model/partition.py): cut `server` off from every other
    # server (no append and no vote crosses the cut), and heal the cut.
    "partition": (("server", "server"),),
    "heal": (),
    # Kafka (log_flush=never): the server's log reaches its disk (the OS writes the page cache back).
    "flush": (("server", "server"),),
}
OPTIONAL_FIELDS = {("write", "value"), ("add", "value")}
NETWORK_ACTIONS = {"rpc": {"replicate"}, "async": {"send", "deliver", "drop"}}

# Configuration keys, their defaults and their valid range. The defaults are the
# embedded default of `hwm check`: the smallest bounds at which Raft's Figure 8
# (an older generation's entry counted as committed, read, then overwritten) shows.
CONFIG_KEYS: dict[str, tuple[Any, Any]] = {
    "servers": (3, range(1, 10)),
    "max_generation": (4, range(1, 100)),
    "max_log": (1, range(0, 100)),
    "max_crashes": (1, range(0, 100)),
    "network": ("rpc", NETWORKS),
    "channel_capacity": (1, range(1, 100)),
    # How many times the rpc network may be partitioned (0: never, as in every model before it).
    "max_partitions": (0, range(0, 10)),
}


# Keys added after traces were first saved: filled in only when a trace gives them (their default
# is the behaviour of every older trace).
LATER_CONFIG_KEYS = frozenset({"max_partitions"})


class TraceError(InputError):
    """A trace that cannot be read: says which file, which step and which field."""

    def __init__(self, message: str, *, file: str | None = None, step: int | None = None,
                 field: str | None = None):
        self.step, self.field = step, field
        super().__init__(message, file, None if step is None else f"step {step}", field and f"field {field!r}")


@dataclass(frozen=True)
class Step:
    """One action, with servers named S1..Sn as in the file."""

    action: str
    args: Mapping[str, Any]

    def __str__(self) -> str:
        parts = []
        for name, kind in ACTIONS[self.action]:
            if name not in self.args:
                continue
            value = self.args[name]
            parts.append("{" + ",".join(value) + "}" if kind == "servers" else str(value))
        return f"{self.action}({', '.join(parts)})"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action}
        for name, kind in ACTIONS[self.action]:
            if name in self.args:
                out[name] = list(self.args[name]) if kind == "servers" else self.args[name]
        return out


@dataclass
class Trace:
    protocol: Any  # a preset name or {"preset": ..., "flags": {...}}, as in the file
    config: dict[str, Any]
    property: str | None
    expect: str
    steps: list[Step]
    title: str = ""
    explanation: str = ""
    source: str | None = None  # the file it was read from
    extra: dict[str, Any] = field(default_factory=dict)
    # A lasso (an `eventually` property's counterexample): the 1-based number of the step
    # that starts the cycle. Steps loop..n repeat forever: after step n the cluster is in
    # the state it was in before step `loop`.
    loop: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "title": self.title, "explanation": self.explanation,
                               "protocol": self.protocol, "config": dict(self.config),
                               "property": self.property, "expect": self.expect}
        if self.loop is not None:
            out["loop"] = self.loop
        out.update(self.extra)
        out["steps"] = [s.to_json() for s in self.steps]
        return out

    def dumps(self) -> str:
        """JSON with one step per line: diffs of saved traces stay readable."""
        body = self.to_json()
        steps = body.pop("steps")
        head = json.dumps(body, indent=2, ensure_ascii=False)[:-2]
        lines = ",\n".join("    " + json.dumps(s, ensure_ascii=False) for s in steps)
        return head + ',\n  "steps": [\n' + lines + "\n  ]\n}\n"

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.dumps(), encoding="utf-8")
        tmp.replace(path)
        return path


def full_config(config: Mapping[str, Any] | None, *, where: str | None = None) -> dict[str, Any]:
    """The configuration with defaults filled in; TraceError on unknown keys or bad values."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise TraceError(f"unknown configuration key {unknown[0]!r}; keys are "
                         + ", ".join(CONFIG_KEYS), file=where, field="config")
    out = {}
    for key, (default, valid) in CONFIG_KEYS.items():
        if key in LATER_CONFIG_KEYS and key not in config:
            continue  # a trace from before the key reads back as it was written
        value = config.get(key, default)
        ok = value in valid and (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)))
        if not ok:
            shown = (f"{valid.start}..{valid.stop - 1}" if isinstance(valid, range)
                     else " or ".join(valid))
            raise TraceError(f"config {key} must be {shown}, not {value!r}", file=where,
                             field=f"config.{key}")
        out[key] = value
    return out


def parse(data: Any, *, source: str | None = None) -> Trace:
    """Validate a decoded JSON document as an hwm-trace/1 trace."""
    if not isinstance(data, dict):
        raise TraceError("a trace is a JSON object", file=source)
    if data.get("format") != FORMAT:
        raise TraceError(f"format must be {FORMAT!r}, not {data.get('format')!r}", file=source,
                         field="format")
    try:
        _, protocol = resolve(data.get("protocol"))
    except ProtocolError as e:
        raise TraceError(str(e), file=source, field="protocol") from None
    # A variant's own properties (model.variant: its invariants, witnesses and liveness) by kind.
    own = protocol.property_kinds() if hasattr(protocol, "property_kinds") else {}
    config = full_config(data.get("config"), where=source)
    expect = data.get("expect")
    if expect not in EXPECTATIONS:
        raise TraceError(f"expect must be one of {', '.join(EXPECTATIONS)}, not {expect!r}",
                         file=source, field="expect")
    prop = data.get("property")
    if prop is not None and prop not in BY_NAME and prop not in LIVENESS_BY_NAME and prop not in own:
        raise TraceError(f"unknown property {prop!r}; properties are " + ", ".join([*BY_NAME, *LIVENESS_BY_NAME, *own]),
                         file=source, field="property")
    if expect == "violation" and prop is None:
        raise TraceError("a trace that expects a violation names its property", file=source,
                         field="property")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list):
        raise TraceError("steps must be a list", file=source, field="steps")
    steps = [parse_step(raw, number, config, source=source) for number, raw in enumerate(raw_steps, 1)]
    loop = parse_loop(data, prop, expect, len(steps), source=source, eventually=own.get(prop) == "eventually")
    known = {"format", "title", "explanation", "protocol", "config", "property", "expect", "steps", "loop"}
    for key in ("title", "explanation"):
        if not isinstance(data.get(key, ""), str):
            raise TraceError(f"{key} must be a string", file=source, field=key)
    return Trace(protocol=data["protocol"], config=config, property=prop, expect=expect, steps=steps,
                 title=data.get("title", ""), explanation=data.get("explanation", ""), source=source,
                 extra={k: v for k, v in data.items() if k not in known}, loop=loop)


def parse_loop(data: Mapping[str, Any], prop: str | None, expect: str, steps: int, *,
               source: str | None = None, eventually: bool = False) -> int | None:
    """The optional `loop` field: a lasso's first cycle step, only for an eventually property (one of
    LIVENESS_BY_NAME, or one of a variant's when `eventually`)."""
    eventually = eventually or prop in LIVENESS_BY_NAME
    if "loop" not in data:
        if eventually:
            raise TraceError(f"{prop} is an eventually property: its counterexample is a lasso, so the "
                             "trace needs loop (the number of the step that starts the cycle)", file=source,
                             field="loop")
        return None
    loop = data["loop"]
    if not eventually:
        raise TraceError("loop marks the cycle of an eventually property's lasso ("
                         + ", ".join(LIVENESS_BY_NAME) + f"), not of {prop!r}", file=source, field="loop")
    if not isinstance(loop, int) or isinstance(loop, bool) or not 1 <= loop <= steps:
        raise TraceError(f"loop is the number of the step that starts the cycle, 1..{steps}, not {loop!r}",
                         file=source, field="loop")
    return loop


def parse_step(raw: Any, number: int, config: Mapping[str, Any], *, source: str | None = None) -> Step:
    if not isinstance(raw, dict):
        raise TraceError("a step is a JSON object", file=source, step=number)
    action = raw.get("action")
    if action not in ACTIONS:
        raise TraceError(f"unknown action {action!r}; actions are " + ", ".join(ACTIONS),
                         file=source, step=number, field="action")
    network = config["network"]
    other = "async" if network == "rpc" else "rpc"
    if action in NETWORK_ACTIONS[other]:
        raise TraceError(f"action {action!r} belongs to the {other} network; this trace uses {network}",
                         file=source, step=number, field="action")
    expected = dict(ACTIONS[action])
    unknown = sorted(set(raw) - set(expected) - {"action"})
    if unknown:
        raise TraceError(f"{action} takes " + ", ".join(expected) + f", not {unknown[0]!r}",
                         file=source, step=number, field=unknown[0])
    args: dict[str, Any] = {}
    for name, kind in expected.items():
        if name not in raw:
            if (action, name) in OPTIONAL_FIELDS:
                continue
            raise TraceError(f"{action} needs {name!r}", file=source, step=number, field=name)
        value = raw[name]
        try:
            if kind == "server":
                server_position(value, config["servers"])
            elif kind == "servers":
                if not isinstance(value, list) or not value:
                    raise ValueError("voters is a non-empty list of server names")
                for v in value:
                    server_position(v, config["servers"])
                if len(set(value)) != len(value):
                    raise ValueError("a server votes once")
                value = tuple(value)
            elif kind == "value" and not isinstance(value, (str, int)):
                raise ValueError("a written value is a string or an integer")
        except ValueError as e:
            raise TraceError(str(e), file=source, step=number, field=name) from None
        args[name] = value
    return Step(action, args)


def load(path: str | Path) -> Trace:
    """Read and validate a trace file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TraceError(f"cannot read: {e.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise TraceError("not UTF-8 text", file=str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"broken JSON at line {e.lineno}, column {e.colno}: {e.msg}", file=str(path)) from None
    return parse(data, source=str(path))
