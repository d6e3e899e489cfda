#!/usr/bin/env python3
"""A Maelstrom kafka node with one writer per key: non-owners forward to the key's owner.

    python3 examples/nodes/kafka/forwarding_node.py          # correct
    python3 examples/nodes/kafka/forwarding_node.py --bug    # planted bug (or NODE_BUG=1)

Style: the challenge's own hint ("one writer per key"). The owner of a key is a stable hash of
the key modulo the number of nodes (crc32, not Python's `hash`, which is salted per process, so
two nodes would disagree). The owner keeps the key's log and committed offset in memory.

A node that does not own a key forwards the request for it to the owner under its own msg_id and
answers the client only when the owner's reply comes back, so a forwarded request takes two
delivery rounds. A request naming keys of several owners (poll, commit_offsets,
list_committed_offsets) is split by owner, and the client is answered once every part is back.
If an owner is unreachable, the request stays unanswered: indeterminate, as Maelstrom allows.

Planted bug (`--bug`): a non-owner answers `send_ok` at once with an offset it guesses from its
own count of the sends of that key it has seen, and forwards the message without waiting. The
owner gives the message another offset, and a message already at the guessed offset, or a later
one, contradicts the answer. Expected finding: OneValuePerOffset (a poll shows another message at
the offset the client was told), or AckedNeverLost (the forward is lost to a partition: no node
ever has the message).
"""

import json
import os
import sys
import zlib

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"


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

    def log(self, text):
        print(f"{self.node_id}: {text}", file=sys.stderr, flush=True)

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
                self.reply(msg, {"type": "init_ok"})
                continue
            if "in_reply_to" in body:
                callback = self.callbacks.pop(body["in_reply_to"], None)
                if callback:
                    callback(body)
                continue
            handler = self.handlers.get(body["type"])
            if handler is None:
                self.reply(msg, {"type": "error", "code": 10, "text": f"unsupported {body['type']!r}"})
            else:
                handler(msg)


node = Node()
logs = {}  # key -> [msg, ...] for the keys this node owns
committed = {}  # key -> offset for the keys this node owns
seen_sends = {}  # key -> sends of it this node forwarded (only the planted bug uses it)


def owner(key):
    return node.node_ids[zlib.crc32(str(key).encode()) % len(node.node_ids)]


def by_owner(keys):
    parts = {}
    for key in keys:
        parts.setdefault(owner(key), []).append(key)
    return parts


def gather(msg, parts, serve_local, make_request, merge, done):
    """Serve each owner's part: ours at once, the others' by forwarding; done() when all are back."""
    waiting = set(parts)

    def part_done(dest, answer):
        merge(answer)
        waiting.discard(dest)
        if not waiting:
            done()

    for dest, keys in parts.items():
        if dest == node.node_id:
            part_done(dest, serve_local(keys))
        else:
            node.rpc(dest, make_request(keys), lambda answer, dest=dest: part_done(dest, answer))
    if not parts:
        done()


def serve_send(key, value):
    entries = logs.setdefault(key, [])
    entries.append(value)
    return len(entries) - 1


def on_send(msg):
    key = msg["body"]["key"]
    if owner(key) == node.node_id:
        node.reply(msg, {"type": "send_ok", "offset": serve_send(key, msg["body"]["msg"])})
        return
    forward = {"type": "send", "key": key, "msg": msg["body"]["msg"]}
    if BUG:
        # Planted: answer now with a guessed offset, without waiting for the owner's.
        guess = seen_sends.get(key, 0)
        seen_sends[key] = guess + 1
        node.rpc(owner(key), forward, lambda answer: None)
        node.reply(msg, {"type": "send_ok", "offset": guess})
        return

    def relay(answer):
        node.reply(msg, {k: v for k, v in answer.items() if k not in ("msg_id", "in_reply_to")})
    node.rpc(owner(key), forward, relay)


def on_poll(msg):
    offsets = msg["body"]["offsets"]
    msgs = {}

    def serve_local(keys):
        return {"msgs": {key: [[o, logs.get(key, [])[o]] for o in range(max(offsets[key], 0), len(logs.get(key, [])))]
                         for key in keys}}

    gather(msg, by_owner(offsets),
           serve_local,
           lambda keys: {"type": "poll", "offsets": {key: offsets[key] for key in keys}},
           lambda answer: msgs.update(answer.get("msgs", {})),
           lambda: node.reply(msg, {"type": "poll_ok", "msgs": msgs}))


def on_commit_offsets(msg):
    offsets = msg["body"]["offsets"]

    def serve_local(keys):
        for key in keys:
            committed[key] = max(committed.get(key, offsets[key]), offsets[key])
        return {}

    gather(msg, by_owner(offsets),
           serve_local,
           lambda keys: {"type": "commit_offsets", "offsets": {key: offsets[key] for key in keys}},
           lambda answer: None,
           lambda: node.reply(msg, {"type": "commit_offsets_ok"}))


def on_list_committed_offsets(msg):
    result = {}

    def serve_local(keys):
        return {"offsets": {key: committed[key] for key in keys if key in committed}}

    gather(msg, by_owner(set(msg["body"]["keys"])),
           serve_local,
           lambda keys: {"type": "list_committed_offsets", "keys": keys},
           lambda answer: result.update(answer.get("offsets", {})),
           lambda: node.reply(msg, {"type": "list_committed_offsets_ok", "offsets": result}))


node.on("send", on_send)
node.on("poll", on_poll)
node.on("commit_offsets", on_commit_offsets)
node.on("list_committed_offsets", on_list_committed_offsets)

if __name__ == "__main__":
    node.run()
