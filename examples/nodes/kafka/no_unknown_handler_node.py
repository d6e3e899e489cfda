#!/usr/bin/env python3
"""A Maelstrom kafka node with one leader and a handler table without a fallback.

    python3 examples/nodes/kafka/no_unknown_handler_node.py          # correct
    python3 examples/nodes/kafka/no_unknown_handler_node.py --bug    # planted bug (or NODE_BUG=1)

Style: the dispatch table. Each input is routed with `handlers[body["type"]](msg)` and there is no
fallback: a message type the node does not know raises KeyError and the node exits. That is a
correct program: Maelstrom sends a node only `init`, the workload's requests, services' replies
and what its peers send. A harness that sends anything else kills it.

Design (single leader): the first of `node_ids` (n1) owns every key and keeps the logs and the
committed offsets in memory. Any other node forwards each client request unchanged to the leader
under its own msg_id and answers its client with the leader's reply when it comes back; a request
whose forward or reply is lost stays unanswered (indeterminate, as Maelstrom allows).

- `send`: the leader appends to the key's log; the offset is the position in it (0, 1, ...);
- `poll`: the leader returns every message from the offset asked, in offset order;
- `commit_offsets`: the leader keeps the largest offset committed per key (never lowers it);
- `list_committed_offsets`: the leader's committed offsets of the keys asked.

Planted bug (`--bug`): an off-by-one in poll: the leader returns the messages *after* the offset
asked, `log[offset + 1:]`, so a poll from 0 of a key with two messages returns only offset 1. The
message at the offset asked is skipped by a poll that returns offsets past it. Expected finding:
AckedNeverLost for an acknowledged send at the skipped offset (ReadNeverTruncated when the skipped
message was only seen by an earlier poll).
"""

import json
import os
import sys

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"

node_id = None
node_ids = []
next_msg_id = 0
callbacks = {}  # msg_id of a forwarded request -> function(reply msg)
logs = {}  # key -> [msg, ...], the leader's; offset = position
committed = {}  # key -> offset, the leader's


def log(text):
    print(f"{node_id}: {text}", file=sys.stderr, flush=True)


def send(dest, body):
    sys.stdout.write(json.dumps({"src": node_id, "dest": dest, "body": body}) + "\n")
    sys.stdout.flush()


def reply(msg, body):
    send(msg["src"], dict(body, in_reply_to=msg["body"]["msg_id"]))


def rpc(dest, body, callback):
    global next_msg_id
    next_msg_id += 1
    callbacks[next_msg_id] = callback
    send(dest, dict(body, msg_id=next_msg_id))


def leader():
    return node_ids[0]


def forward_or_handle(serve):
    """The handler: the leader serves the request; any other node forwards it and relays the answer."""
    def handler(msg):
        if node_id == leader():
            reply(msg, serve(msg["body"]))
            return
        body = {k: v for k, v in msg["body"].items() if k != "msg_id"}

        def relay(answer):
            reply(msg, {k: v for k, v in answer["body"].items() if k not in ("msg_id", "in_reply_to")})
        rpc(leader(), body, relay)
    return handler


def on_init(msg):
    global node_id, node_ids
    node_id, node_ids = msg["body"]["node_id"], msg["body"]["node_ids"]
    reply(msg, {"type": "init_ok"})
    log(f"initialised; leader is {leader()}")


def serve_send(body):
    entries = logs.setdefault(body["key"], [])
    entries.append(body["msg"])
    return {"type": "send_ok", "offset": len(entries) - 1}


def serve_poll(body):
    msgs = {}
    for key, offset in body["offsets"].items():
        entries = logs.get(key, [])
        start = offset + 1 if BUG else offset  # planted: skips the message at the offset asked
        msgs[key] = [[o, entries[o]] for o in range(max(start, 0), len(entries))]
    return {"type": "poll_ok", "msgs": msgs}


def serve_commit_offsets(body):
    for key, offset in body["offsets"].items():
        committed[key] = max(committed.get(key, offset), offset)
    return {"type": "commit_offsets_ok"}


def serve_list_committed_offsets(body):
    return {"type": "list_committed_offsets_ok",
            "offsets": {key: committed[key] for key in body["keys"] if key in committed}}


handlers = {
    "init": on_init,
    "send": forward_or_handle(serve_send),
    "poll": forward_or_handle(serve_poll),
    "commit_offsets": forward_or_handle(serve_commit_offsets),
    "list_committed_offsets": forward_or_handle(serve_list_committed_offsets),
}


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        reply_to = msg["body"].get("in_reply_to")
        if reply_to is not None:
            callbacks.pop(reply_to)(msg)
        else:
            handlers[msg["body"]["type"]](msg)


if __name__ == "__main__":
    main()
