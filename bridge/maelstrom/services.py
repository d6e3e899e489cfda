"""The key-value services hwm answers itself (Maelstrom's doc/services.md): lin-kv, seq-kv, lww-kv.

Each is exercised as weakly as its documented guarantee allows, with choices drawn from the run's
seeded random source (so a replay makes the same choices):

- `lin-kv` is linearizable: one map, every request sees the latest write.
- `seq-kv` is sequentially consistent: writes and cas apply to the latest version, but a read may
  return an older version of the key, never one older than the last this node wrote or read of it
  (its own order is kept; other nodes' recent writes may be invisible, "stale reads").
- `lww-kv` is last-write-wins: each node talks to its own replica; replicas merge from time to
  time, each write stamped by a node clock with its own skew, so of two writes the later in real
  time can lose to an earlier one with a larger stamp ("lost writes").
"""

from __future__ import annotations

import random

from bridge.maelstrom.protocol import KEY_DOES_NOT_EXIST, MALFORMED_REQUEST, NOT_SUPPORTED, PRECONDITION_FAILED

_MISSING = object()


def _error(code: int, text: str) -> dict:
    return {"type": "error", "code": code, "text": text}


def _key(body: dict):
    key = body.get("key")
    return repr(key) if isinstance(key, (list, dict)) else key  # JSON lists are keys too; make them hashable


def _apply(current, body: dict):
    """(new value or _MISSING, reply body) of one request against `current` (_MISSING if absent)."""
    kind = body.get("type")
    if kind == "read":
        if current is _MISSING:
            return current, _error(KEY_DOES_NOT_EXIST, f"key {body.get('key')!r} does not exist")
        return current, {"type": "read_ok", "value": current}
    if kind == "write":
        if "value" not in body:
            return current, _error(MALFORMED_REQUEST, "write needs a 'value'")
        return body["value"], {"type": "write_ok"}
    if kind == "cas":
        if "from" not in body or "to" not in body:
            return current, _error(MALFORMED_REQUEST, "cas needs 'from' and 'to'")
        if current is _MISSING:
            if body.get("create_if_not_exists"):
                return body["to"], {"type": "cas_ok"}
            return current, _error(KEY_DOES_NOT_EXIST, f"key {body.get('key')!r} does not exist")
        if current != body["from"]:
            return current, _error(PRECONDITION_FAILED, f"expected {body['from']!r}, but had {current!r}")
        return body["to"], {"type": "cas_ok"}
    return current, _error(NOT_SUPPORTED, f"the key-value services do not support {kind!r} (read, write, cas)")


class LinKV:
    name = "lin-kv"

    def __init__(self, rng: random.Random):
        self.values: dict = {}

    def handle(self, node: str, body: dict) -> dict:
        key = _key(body)
        new, reply = _apply(self.values.get(key, _MISSING), body)
        if new is not _MISSING:
            self.values[key] = new
        return reply


class SeqKV:
    name = "seq-kv"

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.versions: dict = {}  # key -> [value, ...], oldest first
        self.seen: dict = {}  # (node, key) -> the oldest version that node may still be shown

    def handle(self, node: str, body: dict) -> dict:
        key = _key(body)
        versions = self.versions.setdefault(key, [])
        floor = self.seen.get((node, key), 0)
        if body.get("type") == "read" and len(versions) > floor + 1:
            shown = self.rng.randint(floor, len(versions) - 1)  # a stale read, within this node's order
            self.seen[(node, key)] = shown
            return {"type": "read_ok", "value": versions[shown]}
        current = versions[-1] if versions else _MISSING
        new, reply = _apply(current, body)
        if new is not current:
            versions.append(new)
        if versions:
            self.seen[(node, key)] = len(versions) - 1
        return reply


class LwwKV:
    name = "lww-kv"

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.clock = 0
        self.skew: dict = {}  # node -> how far ahead its clock runs
        self.replicas: dict = {}  # node -> {key: (stamp, value)}

    def handle(self, node: str, body: dict) -> dict:
        if self.rng.random() < 0.5:
            self.merge()
        replica = self.replicas.setdefault(node, {})
        key = _key(body)
        stamp, current = replica.get(key, (0, _MISSING))
        new, reply = _apply(current, body)
        if new is not current:
            self.clock += 1
            skew = self.skew.setdefault(node, self.rng.randint(0, 4))
            replica[key] = (self.clock + skew, new)
        return reply

    def merge(self) -> None:
        """Every replica takes, per key, the value with the largest stamp: the other writes are lost."""
        merged: dict = {}
        for replica in self.replicas.values():
            for key, entry in replica.items():
                if key not in merged or entry[0] > merged[key][0]:
                    merged[key] = entry
        for replica in self.replicas.values():
            replica.update(merged)


def services(rng: random.Random) -> dict:
    return {cls.name: cls(rng) for cls in (LinKV, SeqKV, LwwKV)}
