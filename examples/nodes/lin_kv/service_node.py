#!/usr/bin/env python3
"""A Maelstrom lin-kv node that keeps nothing itself: every operation goes to Maelstrom's lin-kv service.

    python3 examples/nodes/lin_kv/service_node.py          # correct
    python3 examples/nodes/lin_kv/service_node.py --bug    # planted bug (or NODE_BUG=1)

Style: the shortest correct answer to the lin-kv workload. A client's read, write or cas is sent on,
as it is, to the `lin-kv` service (itself linearizable) under the node's own msg_id, and the
service's answer, success or error, is relayed to the client. Every node is alike; none talks to
another. The node runs no timers, so it declares "hwm_tick" and ignores the ticks.

Planted bug (`--bug`): to save a round trip, each node remembers the last value it wrote, read or
set by cas for each key and answers later reads of that key from this cache. A write through
another node makes the cache stale. Expected finding: Linearizable.
"""

import json
import os
import sys

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"

node_id = None
next_msg_id = 0
waiting = {}  # msg_id sent to lin-kv -> the client's request
cache = {}  # --bug: key -> the value this node last saw


def send(dest, body):
    sys.stdout.write(json.dumps({"src": node_id, "dest": dest, "body": body}) + "\n")
    sys.stdout.flush()


def remember(request, answer):
    body = request["body"]
    if answer["type"] == "read_ok":
        cache[body["key"]] = answer["value"]
    elif answer["type"] == "write_ok":
        cache[body["key"]] = body["value"]
    elif answer["type"] == "cas_ok":
        cache[body["key"]] = body["to"]


def handle(msg):
    global node_id, next_msg_id
    body = msg["body"]
    if body["type"] == "init":
        node_id = body["node_id"]
        send(msg["src"], {"type": "init_ok", "in_reply_to": body["msg_id"], "hwm": ["hwm_tick"]})
    elif body["type"] == "hwm_tick":
        pass
    elif msg["src"] == "lin-kv":
        request = waiting.pop(body.get("in_reply_to"), None)
        if request is not None:
            if BUG:
                remember(request, body)
            answer = {k: v for k, v in body.items() if k not in ("msg_id", "in_reply_to")}
            send(request["src"], dict(answer, in_reply_to=request["body"]["msg_id"]))
    elif body["type"] in ("read", "write", "cas"):
        if BUG and body["type"] == "read" and body["key"] in cache:
            send(msg["src"], {"type": "read_ok", "value": cache[body["key"]], "in_reply_to": body["msg_id"]})
            return
        next_msg_id += 1
        waiting[next_msg_id] = msg
        send("lin-kv", dict(body, msg_id=next_msg_id))
    elif "msg_id" in body:
        send(msg["src"], {"type": "error", "code": 10, "text": f"unsupported {body['type']!r}",
                          "in_reply_to": body["msg_id"]})


if __name__ == "__main__":
    for line in sys.stdin:
        handle(json.loads(line))
