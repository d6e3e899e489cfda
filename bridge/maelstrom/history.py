"""The client history and its checks, run online as each reply arrives and once more at the end.

An operation is a dict: {"id", "client", "node", "step", "type", "request", "status", "reply",
"reply_step"}; status is `pending`, `ok`, `fail` (a definite error) or `info` (an indefinite error,
or the node was killed before it answered). The checks (kafka and log workloads alike, an offset
being a log index):

- `ReadNeverTruncated`: a polled `[offset, msg]` (a read value) is never contradicted by a later
  poll (read), nor missing from a later poll of its key that starts at or before it and returns
  offsets past it;
- `AckedNeverLost`: an acknowledged send (append) is never contradicted, never missing in the same
  way, and at the end, after the recovery period, some node still serves it;
- `OneValuePerOffset`: clients never see two messages at one offset of a key (two values at one index);
- `CommittedOffsetsMonotonic`: a listed committed offset never goes below one acknowledged or listed
  before, unless a client committed that low since (Maelstrom lets a consumer commit lower).
These are Maelstrom's kafka semantics: no recency requirement (a node may serve an acknowledged
message only later, after its replication timer), and a request never answered is indeterminate,
not a finding. Every finding names the operations and the nodes involved.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwm.bridge.maelstrom.protocol import KEY_DOES_NOT_EXIST


@dataclass
class Finding:
    name: str
    text: str
    step: int | None = None  # the step at which it became visible

    def __str__(self) -> str:
        at = f" (step {self.step})" if self.step is not None else ""
        return f"{self.name}{at}: {self.text}"


def describe_op(op: dict) -> str:
    request = op["request"]
    args = {"send": lambda: f"{request.get('key')}, {request.get('msg')}", "log_append": lambda: f"{request.get('value')}",
            "log_read": lambda: f"{request.get('index')}", "poll": lambda: f"{request.get('offsets')}",
            "commit_offsets": lambda: f"{request.get('offsets')}",
            "list_committed_offsets": lambda: f"{request.get('keys')}",
            "read": lambda: f"{request.get('key')}", "write": lambda: f"{request.get('key')}, {request.get('value')}",
            "cas": lambda: f"{request.get('key')}, {request.get('from')}→{request.get('to')}"
                           + (", create" if request.get("create_if_not_exists") else "")}.get(op["type"], lambda: "")()
    where = f"step {op['step']}" if op.get("step") is not None else "the final reads"
    return f"op {op['id']} {op['client']}→{op['node']} {op['type']}({args}) at {where}"


class HistoryChecker:
    def __init__(self):
        self.findings: list[Finding] = []
        # (key, offset) -> (value, op, how): how is "acknowledged" or "read"
        self.known: dict[tuple, tuple] = {}
        # key -> [(offset, op)]: acknowledged commits and listed committed offsets, each a floor
        self.floors: dict[str, list[tuple]] = {}
        self.commits: dict[str, list[tuple]] = {}  # key -> [(offset, op)]: every commit sent
        self.order = 0  # sends and replies in the order they happened (op["sent"], op["answered"])
        self.reported: set[tuple] = set()  # (property, key, offset): one finding per entry is enough

    def _find(self, name: str, text: str, step, about=None) -> None:
        if about is not None:
            if (name, *about) in self.reported:
                return
            self.reported.add((name, *about))
        self.findings.append(Finding(name, text, step))

    def _saw(self, key, offset, value, op, how, step) -> None:
        entry = (key, offset)
        if entry not in self.known:
            self.known[entry] = (value, op, how)
            return
        old_value, old_op, old_how = self.known[entry]
        if old_value == value:
            if how == "acknowledged" and old_how == "read":
                self.known[entry] = (value, op, how)
            return
        where = f"offset {offset} of key {key!r}" if key is not None else f"index {offset}"
        name = ("OneValuePerOffset" if old_how == how == "acknowledged" else
                "AckedNeverLost" if old_how == "acknowledged" else "ReadNeverTruncated")
        self._find(name, f"{describe_op(old_op)} {old_how} {old_value!r} at {where}; "
                         f"{describe_op(op)} got {value!r} there", step, entry)

    def _missing(self, key, start, returned: list[int], op, step) -> None:
        if not returned:
            return
        top = max(returned)
        present = set(returned)
        for (k, offset), (value, old_op, how) in sorted(self.known.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if k == key and start <= offset < top and offset not in present and value is not None:
                name = "AckedNeverLost" if how == "acknowledged" else "ReadNeverTruncated"
                self._find(name, f"{describe_op(old_op)} {how} {value!r} at offset {offset} of key {key!r}; "
                                 f"{describe_op(op)} returned offsets past it without it", step, (k, offset))

    def on_request(self, op: dict) -> None:
        """One request just sent."""
        self.order += 1
        op["sent"] = self.order
        if op["type"] == "commit_offsets" and isinstance(op["request"].get("offsets"), dict):
            for key, offset in op["request"]["offsets"].items():
                self.commits.setdefault(key, []).append((offset, op))

    def on_reply(self, op: dict, step) -> None:
        """Check one operation that just completed with status ok."""
        if "sent" not in op:  # checked without its request (a table of cases): sent just before
            self.on_request(op)
        self.order += 1
        op["answered"] = self.order
        kind, request, reply = op["type"], op["request"], op["reply"]
        if kind == "send":
            self._saw(request["key"], reply.get("offset"), request["msg"], op, "acknowledged", step)
        elif kind == "log_append":
            self._saw(None, reply.get("index"), request["value"], op, "acknowledged", step)
        elif kind == "log_read":
            self._saw(None, reply.get("index"), reply.get("value"), op, "read", step)
        elif kind == "poll":
            for key, pairs in (reply.get("msgs") or {}).items():
                offsets = [p[0] for p in pairs if isinstance(p, list) and len(p) == 2]
                if len(set(offsets)) != len(offsets):
                    self._find("OneValuePerOffset", f"{describe_op(op)} returned two messages at one offset "
                                                    f"of key {key!r}: {pairs}", step)
                for offset, msg in (p for p in pairs if isinstance(p, list) and len(p) == 2):
                    self._saw(key, offset, msg, op, "read", step)
                self._missing(key, request["offsets"].get(key, 0), offsets, op, step)
        elif kind == "commit_offsets":
            for key, offset in request["offsets"].items():
                self.floors.setdefault(key, []).append((offset, op))
        elif kind == "list_committed_offsets":
            for key, offset in (reply.get("offsets") or {}).items():
                if isinstance(offset, int):
                    self._committed(key, offset, op, step)

    def on_error(self, op: dict, step) -> None:
        """An operation answered with an error: these checks learn nothing from it."""

    def _committed(self, key, offset, op, step) -> None:
        """A listed committed offset below a floor set before this request was sent (an acknowledged
        commit, an earlier listing) is a finding, unless a client sent a commit at or below it after
        that floor's request and before this answer: the consumer committed lower, as it may."""
        for floor, floor_op in self.floors.get(key, []):
            if floor <= offset or floor_op.get("answered", 0) > op["sent"]:
                continue
            lowered = any(c <= offset and c_op["status"] != "fail" and floor_op["sent"] < c_op["sent"] < op["answered"]
                          for c, c_op in self.commits.get(key, []))
            if not lowered:
                how = "had committed" if floor_op["type"] == "commit_offsets" else "listed committed"
                self._find("CommittedOffsetsMonotonic", f"{describe_op(floor_op)} {how} offset {floor} for key "
                                                        f"{key!r}; {describe_op(op)} says {offset}", step, (key, "committed"))
                break
        self.floors.setdefault(key, []).append((offset, op))

    def unserved(self, final_ops: list[dict]) -> list[tuple]:
        """The entries (key, offset) clients were shown that no final read has served yet."""
        served = _served(final_ops)
        return [entry for entry, (value, _, _) in self.known.items() if (*entry, repr(value)) not in served]

    def at_end(self, final_ops: list[dict], after: str = "after healing") -> None:
        """After the final reads: every acknowledged entry (and every read one) is served by some node.
        An entry of a key (an index) that no final read could read at all is not judged: the nodes
        were unavailable, which says nothing of what they store."""
        served = _served(final_ops)
        readable = {(key, None) for key, _, _ in served} | _answered(final_ops)
        for (key, offset), (value, op, how) in sorted(self.known.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if (key, offset, repr(value)) in served:
                continue
            if (key, None) not in readable and (key, offset) not in readable:
                continue
            where = f"offset {offset} of key {key!r}" if key is not None else f"index {offset}"
            name = "AckedNeverLost" if how == "acknowledged" else "ReadNeverTruncated"
            self._find(name, f"{describe_op(op)} {how} {value!r} at {where}; {after}, "
                             "no node serves it any more", None, (key, offset))


def _served(final_ops: list[dict]) -> set[tuple]:
    """(key, offset, repr(value)) of every entry some final read served."""
    served: set[tuple] = set()
    for op in final_ops:
        if op["status"] != "ok":
            continue
        if op["type"] == "log_read":
            served.add((None, op["reply"].get("index"), repr(op["reply"].get("value"))))
        elif op["type"] == "poll":
            for key, pairs in (op["reply"].get("msgs") or {}).items():
                served.update((key, p[0], repr(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2)
    return served


def _answered(final_ops: list[dict]) -> set[tuple]:
    """(key, None) for each key a final poll was answered for, (None, index) for each index a final
    log_read was answered for: ok, or error 20, the node saying the index is not there for it to serve.
    Any other error (11: it cannot serve reads now) says nothing of what it stores."""
    answered: set[tuple] = set()
    for op in final_ops:
        if op["status"] != "ok" and not (op["status"] == "fail" and op["reply"].get("code") == KEY_DOES_NOT_EXIST):
            continue
        if op["type"] == "log_read":
            answered.add((None, op["request"].get("index")))
        elif op["type"] == "poll" and op["status"] == "ok":
            answered.update((key, None) for key in op["request"].get("offsets", {}))
    return answered


def final_read_requests(workload: str, checker: HistoryChecker) -> list[dict]:
    """What the final phase asks every node: each index (key) the history acknowledged or read."""
    if workload == "lin-kv":
        return checker.final_read_requests()
    if workload == "log":
        indexes = sorted({offset for (key, offset) in checker.known if isinstance(offset, int)})
        return [{"type": "log_read", "index": i} for i in indexes]
    keys = sorted({key for (key, _) in checker.known if key is not None})
    return [{"type": "poll", "offsets": {k: 0 for k in keys}}] if keys else []
