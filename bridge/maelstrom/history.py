"""The client history and its checks, run online as each reply arrives and once more at the end.

An operation is a dict: {"id", "client", "node", "step", "type", "request", "status", "reply",
"reply_step"}; status is `pending`, `ok`, `fail` (a definite error) or `info` (an indefinite error,
or the node was killed before it answered). The checks (kafka and log workloads alike, an offset
being a log index):

- `ReadNeverTruncated`: a polled `[offset, msg]` (a read value) is never contradicted by a later
  poll (read), nor missing from a later poll of its key that starts at or before it and returns
  offsets past it;
- `AckedNeverLost`: an acknowledged send (append) is never contradicted, never missing in the same
  way, and at the end some node still serves it;
- `OneValuePerOffset`: clients never see two messages at one offset of a key (two values at one index);
- `CommittedOffsetsMonotonic`: committed offsets never go back.
Every finding names the operations and the nodes involved.
"""

from __future__ import annotations

from dataclasses import dataclass


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
            "list_committed_offsets": lambda: f"{request.get('keys')}"}.get(op["type"], lambda: "")()
    where = f"step {op['step']}" if op.get("step") is not None else "the final reads"
    return f"op {op['id']} {op['client']}→{op['node']} {op['type']}({args}) at {where}"


class HistoryChecker:
    def __init__(self):
        self.findings: list[Finding] = []
        # (key, offset) -> (value, op, how): how is "acknowledged" or "read"
        self.known: dict[tuple, tuple] = {}
        self.committed: dict[str, tuple] = {}  # key -> (offset, op) highest committed offset seen
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

    def on_reply(self, op: dict, step) -> None:
        """Check one operation that just completed with status ok."""
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
            # An acknowledged commit sets a floor; a client may commit a lower offset later, but the
            # committed offset a node lists must never go below what it acknowledged.
            for key, offset in request["offsets"].items():
                if key not in self.committed or offset > self.committed[key][0]:
                    self.committed[key] = (offset, op)
        elif kind == "list_committed_offsets":
            for key, offset in (reply.get("offsets") or {}).items():
                self._committed(key, offset, op, step)

    def _committed(self, key, offset, op, step) -> None:
        old = self.committed.get(key)
        if old is not None and offset < old[0]:
            self._find("CommittedOffsetsMonotonic", f"{describe_op(old[1])} had committed offset {old[0]} "
                                                    f"for key {key!r}; {describe_op(op)} says {offset}", step)
            return
        if old is None or offset > old[0]:
            self.committed[key] = (offset, op)

    def at_end(self, final_ops: list[dict]) -> None:
        """After the final reads: every acknowledged entry (and every read one) is served by some node."""
        served: set[tuple] = set()
        for op in final_ops:
            if op["status"] != "ok":
                continue
            if op["type"] == "log_read":
                served.add((None, op["reply"].get("index"), repr(op["reply"].get("value"))))
            elif op["type"] == "poll":
                for key, pairs in (op["reply"].get("msgs") or {}).items():
                    served.update((key, p[0], repr(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2)
        for (key, offset), (value, op, how) in sorted(self.known.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if (key, offset, repr(value)) not in served:
                where = f"offset {offset} of key {key!r}" if key is not None else f"index {offset}"
                name = "AckedNeverLost" if how == "acknowledged" else "ReadNeverTruncated"
                self._find(name, f"{describe_op(op)} {how} {value!r} at {where}; after healing, "
                                 "no node serves it any more", None, (key, offset))


def final_read_requests(workload: str, checker: HistoryChecker) -> list[dict]:
    """What the final phase asks every node: each index (key) the history acknowledged or read."""
    if workload == "log":
        indexes = sorted({offset for (key, offset) in checker.known if isinstance(offset, int)})
        return [{"type": "log_read", "index": i} for i in indexes]
    keys = sorted({key for (key, _) in checker.known if key is not None} | set(checker.committed))
    return [{"type": "poll", "offsets": {k: 0 for k in keys}}] if keys else []
