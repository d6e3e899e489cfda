"""The steps of a run, and the `hwm-schedule/1` file that saves one (a sibling of `hwm-trace/1`).

```json
{"format": "hwm-schedule/1", "title": "...", "workload": "log", "nodes": 3, "clock": "virtual",
 "protocol": "raft", "seed": 0,
 "steps": [{"op": "tick"}, {"op": "deliver_all"},
           {"op": "log_append", "node": "n1", "value": 1},
           {"op": "deliver", "from": "n1", "to": "n2"}, {"op": "kill", "node": "n1"}],
 "findings": ["..."], "history": [...], "observations": [...]}
```
Step ops: client requests (`send`, `poll`, `commit_offsets`, `list_committed_offsets` for the kafka
workload; `log_append`, `log_read` for the log workload; `read`, `write`, `cas` for the lin-kv
workload, Maelstrom's, with integer keys and values and a cas's optional `create_if_not_exists`), each sent by the node's client (c1 for
n1, ...); the network's `deliver` / `drop` / `duplicate` (the oldest message from `from` to `to`, or
the `nth`, which reorders), `deliver_all`, `partition` (`groups` of nodes), `heal`; faults `kill`
(SIGKILL), `restart`, `pause` (SIGSTOP), `resume`, and for a real server `rollback` (its data directory
replaced by the copy kept at start-up, bridge/servers/run.py) and `power_fail` (SIGKILL, its writes
and directory entries not fsynced dropped, a restart: bridge/servers/powerfs.py; with `keep_seed`, what
the disk keeps of them, a prefix of each file's writes, the last perhaps torn, and of each directory's
entries, is drawn from that seed (with `reorder`, each file's unsynced sectors in any order); with
`during`, client requests of the workload sent at once, each by a client of its own, and the power cut
`after_ms` milliseconds later, while they are in flight: what the member was writing for them is what it
had not fsynced), and `concurrent`: its `steps`, client
requests of the workload, sent at once by clients of their own (a real server's run, bridge/servers/run.py); the clock's `tick` (one node, or all) and
`wait` (`ms` of wall-clock time); `settle` is `rounds` rounds of a tick of every node and deliver_all. `findings`, `history` and `observations` record what the saved
run saw; a replay runs `steps` and compares. A real server's schedule with power failures names the
`filesystem` they happen on (`posix`, the default: a name is durable once its directory is fsynced;
`journalled`: a file's fsync keeps its name and every name changed before it, as ext4 and XFS do).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hwm.properties.protocol import ProtocolError, resolve

FORMAT = "hwm-schedule/1"
WORKLOADS = ("kafka", "log", "lin-kv")
CLOCKS = ("wall", "virtual")

# op -> {field: type}; every field listed is required, "nth" and a tick's "node" are optional.
STEP_FIELDS: dict[str, dict[str, type | tuple]] = {
    "send": {"node": str, "key": str, "msg": int},
    "poll": {"node": str, "offsets": dict},
    "commit_offsets": {"node": str, "offsets": dict},
    "list_committed_offsets": {"node": str, "keys": list},
    "log_append": {"node": str, "value": int},
    "log_read": {"node": str, "index": int},
    "read": {"node": str, "key": int},
    "write": {"node": str, "key": int, "value": int},
    "cas": {"node": str, "key": int, "from": int, "to": int},
    "deliver": {"from": str, "to": str},
    "drop": {"from": str, "to": str},
    "duplicate": {"from": str, "to": str},
    "deliver_all": {},
    "partition": {"groups": list},
    "heal": {},
    "kill": {"node": str},
    "restart": {"node": str},
    "pause": {"node": str},
    "resume": {"node": str},
    "rollback": {"node": str},
    "power_fail": {"node": str},
    "concurrent": {"steps": list},
    "tick": {},
    "wait": {"ms": int},
    "settle": {"rounds": int},
}
CLIENT_OPS = {"kafka": ("send", "poll", "commit_offsets", "list_committed_offsets"),
              "log": ("log_append", "log_read"), "lin-kv": ("read", "write", "cas")}


class ScheduleError(ValueError):
    """A malformed schedule file or step: names the file, the step (1-based) and the field."""

    def __init__(self, message: str, file=None, step: int | None = None, field: str | None = None):
        where = ", ".join(x for x in (str(file) if file else None, f"step {step}" if step else None,
                                       f"field {field!r}" if field else None) if x)
        super().__init__(f"{where}: {message}" if where else message)


@dataclass
class Schedule:
    workload: str = "log"
    nodes: int = 3
    clock: str = "virtual"
    steps: list[dict] = field(default_factory=list)
    seed: int = 0
    protocol: str | None = None
    title: str = ""
    findings: list[str] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    observations: list[dict] = field(default_factory=list)
    source: str | None = None
    server: str | None = None  # a real server's adapter (bridge/servers: "etcd"), else a node command
    filesystem: str | None = None  # a real server's power failures: what a file's fsync keeps (powerfs.py)

    def node_ids(self) -> list[str]:
        return [f"n{k}" for k in range(1, self.nodes + 1)]

    def to_json(self) -> dict:
        return {"format": FORMAT, "title": self.title, "workload": self.workload, "nodes": self.nodes,
                "clock": self.clock, "protocol": self.protocol, **({"server": self.server} if self.server else {}),
                **({"filesystem": self.filesystem} if self.filesystem else {}),
                "seed": self.seed, "steps": self.steps,
                "findings": self.findings, "history": self.history, "observations": self.observations}

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        tmp.replace(path)
        return path


# Steps only a real server's run takes (bridge/servers/run.py): a node program's run has no data
# directory copy, no filesystem of hwm's under it and one client at a time.
SERVER_STEPS = ("rollback", "power_fail", "concurrent")
# A power failure during requests comes while they are in flight: within one request's wait.
MAX_AFTER_MS = 1000


def check_step(step, nodes: list[str], workload: str, number: int | None = None, file=None) -> dict:
    """`step` itself when it is well formed for this run, else ScheduleError naming step and field."""
    def bad(message, name=None):
        raise ScheduleError(message, file=file, step=number, field=name)

    if not isinstance(step, dict) or not isinstance(step.get("op"), str):
        bad('a step is an object with a string "op"', "op")
    op = step["op"]
    if op not in STEP_FIELDS:
        bad(f"unknown op {op!r}; ops are {', '.join(STEP_FIELDS)}", "op")
    for other, ops in CLIENT_OPS.items():
        if op in ops and other != workload:
            bad(f"{op!r} belongs to the {other} workload; this schedule's workload is {workload}", "op")
    for name, kind in STEP_FIELDS[op].items():
        if name not in step:
            bad(f"{op} needs field {name!r}", name)
        if not isinstance(step[name], kind) or isinstance(step[name], bool):
            bad(f"{name!r} must be {getattr(kind, '__name__', kind)}, got {step[name]!r}", name)
    if op == "tick" and "node" in step and not isinstance(step["node"], str):
        bad("'node' must be str", "node")
    if op == "cas" and not isinstance(step.get("create_if_not_exists", False), bool):
        bad("'create_if_not_exists' must be true or false", "create_if_not_exists")
    # A delivery's from and to are nodes; a cas's are values.
    for name in ("node", "from", "to") if op in ("deliver", "drop", "duplicate") else ("node",):
        if name in step and step[name] not in nodes:
            bad(f"no node {step[name]!r}; this run has {', '.join(nodes)}", name)
    if "nth" in step and (not isinstance(step["nth"], int) or step["nth"] < 0):
        bad("'nth' must be a non-negative integer", "nth")
    if op == "power_fail" and "keep_seed" in step and (type(step["keep_seed"]) is not int or step["keep_seed"] < 0):
        bad(f"'keep_seed' must be a non-negative integer (what the disk keeps of unsynced writes is drawn from "
            f"it), got {step['keep_seed']!r}", "keep_seed")
    if op == "power_fail" and "reorder" in step:
        if type(step["reorder"]) is not bool:
            bad(f"'reorder' must be true or false, got {step['reorder']!r}", "reorder")
        if step["reorder"] and "keep_seed" not in step:
            bad("'reorder' says the disk keeps the unsynced sectors 'keep_seed' draws in any order; there is no "
                "'keep_seed'", "reorder")
    if op == "power_fail" and ("during" in step or "after_ms" in step):
        if "during" not in step:
            bad("'after_ms' says when the power goes while the requests of 'during' are in flight; there is no "
                "'during'", "after_ms")
        if "after_ms" not in step:
            bad("a power failure 'during' requests needs 'after_ms', the milliseconds from sending them to the cut",
                "after_ms")
        if type(step["after_ms"]) is not int or not 0 <= step["after_ms"] <= MAX_AFTER_MS:
            bad(f"'after_ms' must be an integer from 0 to {MAX_AFTER_MS} (the requests are in flight), "
                f"got {step['after_ms']!r}", "after_ms")
        _check_requests(step["during"], "during", "a power failure's 'during'", bad, nodes, workload, number, file)
    if op == "concurrent":
        _check_requests(step["steps"], "steps", "a concurrent step's steps", bad, nodes, workload, number, file)
    if op == "partition":
        seen = [n for group in step["groups"] if isinstance(group, list) for n in group]
        if not all(isinstance(g, list) for g in step["groups"]) or any(n not in nodes for n in seen):
            bad(f"groups must be lists of nodes of {', '.join(nodes)}", "groups")
    return step


def _check_requests(requests, name: str, what: str, bad, nodes, workload, number, file) -> None:
    """Requests sent at once (a concurrent step's, a power failure's `during`): a non-empty list of
    client requests of the workload."""
    ops = CLIENT_OPS.get(workload, ())
    if not isinstance(requests, list) or not requests:
        bad(f"{what} needs at least one request of the {workload} workload ({', '.join(ops)})", name)
    for inner in requests:
        if not isinstance(inner, dict) or inner.get("op") not in ops:
            bad(f"{what} are requests of the {workload} workload ({', '.join(ops)}), got {inner!r}", name)
        check_step(inner, nodes, workload, number, file)


def load(path) -> Schedule:
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except OSError as e:
        raise ScheduleError(f"cannot read: {e.strerror}", file=path)
    except ValueError as e:
        raise ScheduleError(f"not JSON: {e}", file=path)
    return from_json(raw, path)


def is_schedule_file(path) -> bool:
    """Whether `path` holds an hwm-schedule/1 document (cheap enough for `hwm replay` to ask)."""
    try:
        return json.loads(Path(path).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def from_json(raw, file=None) -> Schedule:
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ScheduleError(f'expected "format": "{FORMAT}"', file=file, field="format")
    workload = raw.get("workload", "log")
    if workload not in WORKLOADS:
        raise ScheduleError(f"workload must be one of {', '.join(WORKLOADS)}", file=file, field="workload")
    clock = raw.get("clock", "virtual")
    if clock not in CLOCKS:
        raise ScheduleError(f"clock must be one of {', '.join(CLOCKS)}", file=file, field="clock")
    nodes = raw.get("nodes", 3)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= 9:
        raise ScheduleError("nodes must be an integer from 1 to 9", file=file, field="nodes")
    steps = raw.get("steps")
    if not isinstance(steps, list):
        raise ScheduleError("steps must be a list", file=file, field="steps")
    protocol = raw.get("protocol")
    if protocol is not None:
        try:
            resolve(protocol)
        except ProtocolError as e:
            raise ScheduleError(f"not a protocol: {e}", file=file, field="protocol")
    filesystem = raw.get("filesystem")
    if filesystem is not None:
        from hwm.bridge.servers.powerfs import FILESYSTEMS
        if filesystem not in FILESYSTEMS:
            raise ScheduleError(f"filesystem must be one of {', '.join(FILESYSTEMS)}, got {filesystem!r}", file=file,
                                field="filesystem")
    schedule = Schedule(workload=workload, nodes=nodes, clock=clock, seed=int(raw.get("seed", 0)),
                        protocol=raw.get("protocol"), title=raw.get("title", ""),
                        findings=list(raw.get("findings", [])), history=list(raw.get("history", [])),
                        observations=list(raw.get("observations", [])), source=str(file) if file else None,
                        server=raw.get("server") if isinstance(raw.get("server"), str) else None,
                        filesystem=filesystem)
    for number, step in enumerate(steps, 1):
        schedule.steps.append(check_step(step, schedule.node_ids(), workload, number, file))
        if schedule.server is None and step["op"] in SERVER_STEPS:
            raise ScheduleError(f"{step['op']} is a step of a real server's run (hwm test --server); this "
                                "schedule runs node programs, which have no such step", file=file, step=number,
                                field="op")
    return schedule


def describe(step: dict) -> str:
    """A step as one short line: `log_append(n1, 3)`, `deliver(n1→n2)`, `partition(n1 | n2 n3)`."""
    op = step["op"]
    if op in ("deliver", "drop", "duplicate"):
        nth = f", #{step['nth']}" if step.get("nth") else ""
        return f"{op}({step['from']}→{step['to']}{nth})"
    if op == "partition":
        return "partition(" + " | ".join(" ".join(g) for g in step["groups"] if g) + ")"
    if op == "concurrent":
        return " ‖ ".join(describe(inner) for inner in step["steps"])
    if "during" in step:  # power_fail while requests are in flight
        plain = describe({k: v for k, v in step.items() if k not in ("during", "after_ms")})
        return f"{plain[:-1]}, {step['after_ms']} ms into {' ‖ '.join(describe(inner) for inner in step['during'])})"
    args = [str(step[k]) for k in ("node", "key", "msg", "value", "index", "ms", "rounds") if k in step]
    if "keep_seed" in step:
        args.append(f"keep_seed={step['keep_seed']}" + (", reorder" if step.get("reorder") else ""))
    if op == "cas":
        args.append(f"{step['from']}→{step['to']}" + (", create" if step.get("create_if_not_exists") else ""))
    for k in ("offsets", "keys"):
        if k in step:
            args.append(json.dumps(step[k], separators=(",", ":")))
    return f"{op}({', '.join(args)})"
