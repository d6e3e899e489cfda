"""The lin-kv workload's check: each key's history of read, write and cas is linearizable.

Maelstrom's lin-kv workload (its doc/workloads.md) sends `read {key}`, `write {key, value}` and
`cas {key, from, to}` (optionally `create_if_not_exists`) and expects `read_ok {value}`, `write_ok`,
`cas_ok` or an error. As Maelstrom judges it (Knossos, a cas register per key), the finding is
`Linearizable`: no order of the operations, each placed between its request and its answer, gives
what one register per key would have answered. How each operation enters the check
(`hwm.checker.linearizable`):

- an answered operation occupies [request sent, answer routed]: hwm stamps both in the order they
  happened, which can only widen the interval the node really took;
- a definite error (22 precondition-failed, 11 temporarily-unavailable, 20 on a write or cas, ...)
  did not change the register and is left out; a read answered 20 (key-does-not-exist) is a read
  of an absent key;
- an indefinite error (0 timeout, 13 crash), a node killed before it answered, or no answer at all:
  a write or cas may have taken effect at any time after its request, or never; a read says nothing.

The search has a time budget (`Limits.linearizable_seconds`); a key it could not decide in time is
reported as undecided, never as a finding. A finding shows the smallest sub-history the checker
kept that no order explains.
"""

from __future__ import annotations

import json
import time

from hwm.bridge.maelstrom.history import Finding, describe_op
from hwm.bridge.maelstrom.protocol import KEY_DOES_NOT_EXIST
from hwm.checker.linearizable import ABSENT, UNDECIDED, VIOLATION, Op, check_register

FINDING = "Linearizable"


def _value(value):
    """A JSON value as the register holds it: hashable (a list or object as its JSON text)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def register_op(op: dict) -> Op | None:
    """The register operation a client operation is, or None when it tells nothing (a definite
    error other than a read's key-does-not-exist; an indeterminate read)."""
    request, reply, status = op["request"], op["reply"] or {}, op["status"]
    kind, invoked = op["type"], op["sent"]
    completed = op.get("answered") if status in ("ok", "fail") else None
    if status == "fail":
        if kind == "read" and reply.get("code") == KEY_DOES_NOT_EXIST:
            return Op("read", ABSENT, invoked, completed, id=op["id"])
        return None
    if kind == "read":
        return Op("read", _value(reply.get("value")), invoked, completed, id=op["id"]) if status == "ok" else None
    if kind == "write":
        return Op("write", _value(request.get("value")), invoked, completed, id=op["id"])
    return Op("cas", (_value(request.get("from")), _value(request.get("to"))), invoked, completed,
              create=bool(request.get("create_if_not_exists")), id=op["id"])


def _outcome(op: dict) -> str:
    reply = op["reply"] or {}
    if op["status"] == "ok":
        return f"read {reply.get('value')!r}" if op["type"] == "read" else "ok"
    if op["status"] == "fail":
        return "key does not exist" if reply.get("code") == KEY_DOES_NOT_EXIST else f"error {reply.get('code')}"
    answered = f"error {reply.get('code')}" if "code" in reply else "no answer"
    return f"{answered} (indeterminate)"


def _key(op: dict):
    key = op["request"].get("key")
    return repr(key) if isinstance(key, (list, dict)) else key


class LinKVChecker:
    """The client history of a lin-kv run, judged once at the end (the search is too costly to
    repeat at every answer). The same hooks as `history.HistoryChecker`, which the cluster calls."""

    def __init__(self, budget_s: float = 10.0):
        self.budget_s = budget_s
        self.findings: list[Finding] = []
        self.undecided: list[str] = []  # one line per key the search could not decide in time
        self.ops: list[dict] = []
        self.keys: set = set()
        self.order = 0

    def on_request(self, op: dict) -> None:
        self.order += 1
        op["sent"] = self.order
        self.ops.append(op)
        self.keys.add(_key(op))

    def on_reply(self, op: dict, step) -> None:
        """An answer, a success or an error alike (the order of answers and requests is the check's clock)."""
        if "sent" not in op:  # checked without its request (a table of cases): sent just before
            self.on_request(op)
        self.order += 1
        op["answered"] = self.order

    on_error = on_reply

    def unserved(self, final_ops: list[dict]) -> list:
        return []  # one round of final reads: each is one more operation of the history

    def final_read_requests(self) -> list[dict]:
        """A read of every key a client touched, from every node (the final phase's reads)."""
        return [{"type": "read", "key": key} for key in sorted(self.keys, key=repr)]

    def at_end(self, final_ops: list[dict], after: str = "") -> None:
        began = time.monotonic()
        by_key: dict = {}
        for op in self.ops:
            entry = register_op(op)
            if entry is not None:
                by_key.setdefault(_key(op), []).append(entry)
        ops_by_id = {op["id"]: op for op in self.ops}
        for key in sorted(by_key, key=repr):
            left = max(0.0, self.budget_s - (time.monotonic() - began))
            verdict = check_register(by_key[key], budget_s=left)
            if verdict.status == UNDECIDED:
                shared = f", what the keys before it left of {self.budget_s:g} s" if left < self.budget_s else ""
                self.undecided.append(f"key {key!r}: {verdict.reason}{shared}")
            elif verdict.status == VIOLATION:
                shown = [ops_by_id[entry.id] for entry in verdict.witness]
                steps = [op["reply_step"] for op in shown if op["status"] in ("ok", "fail")]
                lines = "; ".join(f"{describe_op(op)} → {_outcome(op)}" for op in shown)
                self.findings.append(Finding(FINDING, f"key {key!r}: no order of these operations, each placed "
                                                      f"between its request and its answer, is a register's: {lines}",
                                             max(steps) if steps and None not in steps else None))
