#!/usr/bin/env python3
"""A Maelstrom lin-kv node that passes a client's request on to the leader unchanged.

    python3 examples/nodes/lin_kv/proxy_node.py          # correct
    python3 examples/nodes/lin_kv/proxy_node.py --bug    # planted bug (or NODE_BUG=1)

Style: Maelstrom's own demo Raft (demo/python/raft.py). A node that is not the leader proxies a
client's request: it prints the client's message again with only `dest` changed, so `src` is still
the client's id and the leader answers the client directly. Maelstrom's network takes any `src` it
knows, and so must hwm. The leader is the first of `node_ids`, known only once an election timer
has run out (1 s after init, wall clock; the demo's is 2 to 4 s): before that every node answers
error 11 (temporarily unavailable), as the demo answers "not a leader". It keeps the map in memory
and applies `read`, `write` and `cas` one at a time. A request proxied to a leader that a partition
cuts off stays unanswered: indeterminate, as Maelstrom allows.

Planted bug (`--bug`): the leader applies a cas without comparing the value it holds with `from`,
so a cas from a value the key no longer holds succeeds. Expected finding: Linearizable.
"""

import json
import os
import sys
import time

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"
ELECTION_TIMEOUT = 1.0  # seconds from init until the leader is known
KEY_DOES_NOT_EXIST, TEMPORARILY_UNAVAILABLE, PRECONDITION_FAILED, NOT_SUPPORTED = 20, 11, 22, 10

node_id, node_ids = None, []
elected_at = None  # when the election timer runs out
store = {}  # the leader's map


def emit(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def reply(request, body):
    emit({"src": node_id, "dest": request["src"], "body": dict(body, in_reply_to=request["body"]["msg_id"])})


def apply(body):
    key = str(body["key"])
    if body["type"] == "read":
        if key not in store:
            return {"type": "error", "code": KEY_DOES_NOT_EXIST, "text": "no such key"}
        return {"type": "read_ok", "value": store[key]}
    if body["type"] == "write":
        store[key] = body["value"]
        return {"type": "write_ok"}
    if key not in store and not body.get("create_if_not_exists"):
        return {"type": "error", "code": KEY_DOES_NOT_EXIST, "text": "no such key"}
    if key in store and store[key] != body["from"] and not BUG:
        return {"type": "error", "code": PRECONDITION_FAILED, "text": f"expected {body['from']}, had {store[key]}"}
    store[key] = body["to"]
    return {"type": "cas_ok"}


def handle(msg):
    global node_id, node_ids, elected_at
    body = msg["body"]
    if body["type"] == "init":
        node_id, node_ids = body["node_id"], body["node_ids"]
        elected_at = time.monotonic() + ELECTION_TIMEOUT
        reply(msg, {"type": "init_ok"})
    elif body["type"] in ("read", "write", "cas"):
        if time.monotonic() < elected_at:
            reply(msg, {"type": "error", "code": TEMPORARILY_UNAVAILABLE, "text": "no leader yet"})
        elif node_id == node_ids[0]:
            reply(msg, apply(body))
        else:
            emit(dict(msg, dest=node_ids[0]))  # the client's own message, src and msg_id kept
    elif "msg_id" in body:
        reply(msg, {"type": "error", "code": NOT_SUPPORTED, "text": f"unsupported {body['type']!r}"})


if __name__ == "__main__":
    for line in sys.stdin:
        handle(json.loads(line))
