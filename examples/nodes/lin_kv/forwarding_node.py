#!/usr/bin/env python3
"""A Maelstrom lin-kv node with one leader: every node forwards every operation to it.

    python3 examples/nodes/lin_kv/forwarding_node.py          # correct
    python3 examples/nodes/lin_kv/forwarding_node.py --bug    # planted bug (or NODE_BUG=1)

Style: the common first solution to Maelstrom's lin-kv workload. The leader is fixed, the first of
`node_ids`; it keeps the map in memory and applies `read`, `write` and `cas` one at a time, so its
answers are those of one register per key. Every other node forwards each request to the leader
under its own msg_id and answers the client when the leader's answer comes back (two delivery
rounds). The leader also sends each change to the followers (`replicate`), so each holds a copy
of the map, for a reader that may take over one day. A request whose forward or answer is lost to a
partition stays unanswered: indeterminate, as Maelstrom allows. No failover: while the leader is
cut off, the others serve nothing.

The node runs no timers, so it follows hwm's virtual clock trivially and declares "hwm_tick" in its
init_ok (hwm then sends it hwm_tick, which it ignores).

Planted bug (`--bug`): a follower answers reads from its own copy instead of forwarding them. A
copy lags the leader by a delivery, so a read there just after a write was acknowledged returns
the value the write replaced. Expected finding: Linearizable (a stale read).
"""

import json
import os
import sys

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"
KEY_DOES_NOT_EXIST, PRECONDITION_FAILED, NOT_SUPPORTED = 20, 22, 10


class Node:
    """Maelstrom's demo library, in small: handlers by type, RPC replies by in_reply_to."""

    def __init__(self):
        self.node_id = None
        self.node_ids = []
        self.next_msg_id = 0
        self.handlers = {}
        self.callbacks = {}

    def on(self, kind, handler):
        self.handlers[kind] = handler

    def send(self, dest, body):
        sys.stdout.write(json.dumps({"src": self.node_id, "dest": dest, "body": body}) + "\n")
        sys.stdout.flush()

    def reply(self, request, body):
        self.send(request["src"], dict(body, in_reply_to=request["body"]["msg_id"]))

    def rpc(self, dest, body, callback):
        self.next_msg_id += 1
        self.callbacks[self.next_msg_id] = callback
        self.send(dest, dict(body, msg_id=self.next_msg_id))

    def run(self):
        for line in sys.stdin:
            msg = json.loads(line)
            body = msg["body"]
            if body["type"] == "init":
                self.node_id, self.node_ids = body["node_id"], body["node_ids"]
                self.reply(msg, {"type": "init_ok", "hwm": ["hwm_tick"]})
                continue
            if "in_reply_to" in body:
                callback = self.callbacks.pop(body["in_reply_to"], None)
                if callback:
                    callback(body)
                continue
            handler = self.handlers.get(body["type"])
            if handler is None:
                self.reply(msg, {"type": "error", "code": NOT_SUPPORTED, "text": f"unsupported {body['type']!r}"})
            else:
                handler(msg)


node = Node()
store = {}  # the leader's map; on a follower, its copy


def leader():
    return node.node_ids[0]


def apply(body):
    """The leader's answer to one operation, applied to `store`."""
    key = str(body["key"])  # JSON object keys are strings: a copy sent in `replicate` agrees
    if body["type"] == "read":
        if key not in store:
            return {"type": "error", "code": KEY_DOES_NOT_EXIST, "text": "no such key"}
        return {"type": "read_ok", "value": store[key]}
    if body["type"] == "write":
        store[key] = body["value"]
        changed(key)
        return {"type": "write_ok"}
    if key not in store and not body.get("create_if_not_exists"):
        return {"type": "error", "code": KEY_DOES_NOT_EXIST, "text": "no such key"}
    if key in store and store[key] != body["from"]:
        return {"type": "error", "code": PRECONDITION_FAILED, "text": f"expected {body['from']}, had {store[key]}"}
    store[key] = body["to"]
    changed(key)
    return {"type": "cas_ok"}


def changed(key):
    for peer in node.node_ids:
        if peer != node.node_id:
            node.send(peer, {"type": "replicate", "key": key, "value": store[key]})


def client_request(msg):
    body = msg["body"]
    if node.node_id == leader():
        node.reply(msg, apply(body))
    elif BUG and body["type"] == "read":
        node.reply(msg, apply(body))  # the copy here may lag the leader
    else:
        request = {k: v for k, v in body.items() if k != "msg_id"}
        node.rpc(leader(), {"type": "forward", "request": request},
                 lambda answer: node.reply(msg, answer["answer"]))


def forward(msg):
    node.reply(msg, {"type": "forward_ok", "answer": apply(msg["body"]["request"])})


def replicate(msg):
    store[msg["body"]["key"]] = msg["body"]["value"]


for kind in ("read", "write", "cas"):
    node.on(kind, client_request)
node.on("forward", forward)
node.on("replicate", replicate)
node.on("hwm_tick", lambda msg: None)

if __name__ == "__main__":
    node.run()
