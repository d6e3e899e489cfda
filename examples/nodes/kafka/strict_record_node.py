#!/usr/bin/env python3
"""A Maelstrom kafka node that parses every message into a strict record and keeps its log in lin-kv.

    python3 examples/nodes/kafka/strict_record_node.py          # correct
    python3 examples/nodes/kafka/strict_record_node.py --bug    # planted bug (or NODE_BUG=1)

Style: the typed, strict way. `init` is built with `InitBody(**body)` from a dataclass that names
exactly Maelstrom's fields (type, msg_id, node_id, node_ids), and each client request likewise, so
any field Maelstrom does not send raises TypeError and the node exits. That is a correct program:
Maelstrom never sends another field. A harness that adds one of its own breaks it.

Design (state in Maelstrom's `lin-kv` service, nothing in the node but pending callbacks):

- `send {key, msg}`: read the counter `<key>/next` (error 20: 0), advance it by
  `cas from=n to=n+1` (error 22: someone else took n, read again and retry), then
  `write <key>/<n> = msg` and answer `send_ok {offset: n}`;
- `poll {offsets}`: read `<key>/<o>`, `<key>/<o+1>`, ... until the first error 20, so a poll
  returns only the contiguous run of written offsets from the one asked (an offset whose counter
  was advanced but whose message is not yet written ends the run; a later poll returns it);
- `commit_offsets`: `<key>/committed` is raised to the new offset by cas, never lowered;
- `list_committed_offsets`: reads `<key>/committed`; a key never committed is left out.

Planted bug (`--bug`): the counter is read and then written with a plain `write`, not `cas`. Two
sends that read the counter before either writes it get the same offset, and the second message
overwrites the first at `<key>/<n>`: clients are told two messages at one offset, and a poll shows
only one of them. Expected finding: OneValuePerOffset (or AckedNeverLost for the overwritten
send). It needs two sends of one key whose counter reads both land before either counter write.
"""

import json
import os
import sys
from dataclasses import dataclass

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"

KEY_DOES_NOT_EXIST = 20
PRECONDITION_FAILED = 22


@dataclass
class InitBody:
    type: str
    msg_id: int
    node_id: str
    node_ids: list


@dataclass
class SendBody:
    type: str
    msg_id: int
    key: str
    msg: object


@dataclass
class PollBody:
    type: str
    msg_id: int
    offsets: dict


@dataclass
class CommitOffsetsBody:
    type: str
    msg_id: int
    offsets: dict


@dataclass
class ListCommittedOffsetsBody:
    type: str
    msg_id: int
    keys: list


class Node:
    def __init__(self):
        self.node_id = None
        self.node_ids = []
        self.next_msg_id = 0
        self.callbacks = {}  # msg_id of our request -> function(reply body)

    def log(self, text):
        print(f"{self.node_id}: {text}", file=sys.stderr, flush=True)

    def send(self, dest, body):
        sys.stdout.write(json.dumps({"src": self.node_id, "dest": dest, "body": body}) + "\n")
        sys.stdout.flush()

    def reply(self, src, request_msg_id, body):
        self.send(src, dict(body, in_reply_to=request_msg_id))

    def rpc(self, dest, body, callback):
        self.next_msg_id += 1
        self.callbacks[self.next_msg_id] = callback
        self.send(dest, dict(body, msg_id=self.next_msg_id))

    # ---- lin-kv helpers ----------------------------------------------------------------------
    def kv_read(self, key, callback):
        """callback(value or None when the key does not exist)."""
        def done(body):
            if body["type"] == "read_ok":
                callback(body["value"])
            elif body["type"] == "error" and body["code"] == KEY_DOES_NOT_EXIST:
                callback(None)
            else:
                self.log(f"lin-kv read {key}: unexpected {body}; request left unanswered")
        self.rpc("lin-kv", {"type": "read", "key": key}, done)

    def kv_raise_to(self, key, value, callback):
        """Raise the number at `key` to `value` (never lower it), then callback()."""
        def got(current):
            if current is not None and current >= value:
                callback()
                return

            def done(body):
                if body["type"] == "cas_ok":
                    callback()
                elif body["type"] == "error" and body["code"] in (PRECONDITION_FAILED, KEY_DOES_NOT_EXIST):
                    self.kv_raise_to(key, value, callback)  # changed under us: read again
                else:
                    self.log(f"lin-kv cas {key}: unexpected {body}; request left unanswered")
            self.rpc("lin-kv", {"type": "cas", "key": key, "from": current, "to": value,
                                "create_if_not_exists": current is None}, done)
        self.kv_read(key, got)

    # ---- the workload ------------------------------------------------------------------------
    def handle(self, msg):
        body = msg["body"]
        if "in_reply_to" in body:
            callback = self.callbacks.pop(body["in_reply_to"], None)
            if callback is None:
                self.log(f"reply to an unknown request: {body}")
            else:
                callback(body)
            return
        kind = body["type"]
        if kind == "init":
            init = InitBody(**body)
            self.node_id, self.node_ids = init.node_id, init.node_ids
            self.reply(msg["src"], init.msg_id, {"type": "init_ok"})
            self.log(f"initialised as {self.node_id} of {self.node_ids}")
        elif kind == "send":
            self.on_send(msg["src"], SendBody(**body))
        elif kind == "poll":
            self.on_poll(msg["src"], PollBody(**body))
        elif kind == "commit_offsets":
            self.on_commit_offsets(msg["src"], CommitOffsetsBody(**body))
        elif kind == "list_committed_offsets":
            self.on_list_committed_offsets(msg["src"], ListCommittedOffsetsBody(**body))
        else:
            self.reply(msg["src"], body.get("msg_id"), {"type": "error", "code": 10, "text": f"unsupported {kind!r}"})

    def on_send(self, client, req):
        counter = f"{req.key}/next"

        def store(offset):
            def written(body):
                if body["type"] != "write_ok":
                    self.log(f"lin-kv write {req.key}/{offset}: unexpected {body}")
                    return
                self.reply(client, req.msg_id, {"type": "send_ok", "offset": offset})
            self.rpc("lin-kv", {"type": "write", "key": f"{req.key}/{offset}", "value": req.msg}, written)

        def got_counter(current):
            offset = 0 if current is None else current
            if BUG:
                # Planted: a plain write; a concurrent send that read the same counter gets `offset` too.
                self.rpc("lin-kv", {"type": "write", "key": counter, "value": offset + 1}, lambda body: store(offset))
                return

            def advanced(body):
                if body["type"] == "cas_ok":
                    store(offset)
                elif body["type"] == "error" and body["code"] in (PRECONDITION_FAILED, KEY_DOES_NOT_EXIST):
                    self.kv_read(counter, got_counter)  # another send took this offset: try the next
                else:
                    self.log(f"lin-kv cas {counter}: unexpected {body}; send left unanswered")
            self.rpc("lin-kv", {"type": "cas", "key": counter, "from": current, "to": offset + 1,
                                "create_if_not_exists": current is None}, advanced)
        self.kv_read(counter, got_counter)

    def on_poll(self, client, req):
        msgs = {}
        pending = set(req.offsets)
        if not pending:
            self.reply(client, req.msg_id, {"type": "poll_ok", "msgs": {}})

        def read_from(key, offset):
            def got(value):
                if value is None:  # the end of the contiguous run
                    pending.discard(key)
                    if not pending:
                        self.reply(client, req.msg_id, {"type": "poll_ok", "msgs": msgs})
                    return
                msgs.setdefault(key, []).append([offset, value])
                read_from(key, offset + 1)
            self.kv_read(f"{key}/{offset}", got)

        for key, offset in req.offsets.items():
            read_from(key, offset)

    def on_commit_offsets(self, client, req):
        pending = set(req.offsets)
        if not pending:
            self.reply(client, req.msg_id, {"type": "commit_offsets_ok"})
        for key, offset in req.offsets.items():
            def done(key=key):
                pending.discard(key)
                if not pending:
                    self.reply(client, req.msg_id, {"type": "commit_offsets_ok"})
            self.kv_raise_to(f"{key}/committed", offset, done)

    def on_list_committed_offsets(self, client, req):
        offsets = {}
        pending = set(req.keys)
        if not pending:
            self.reply(client, req.msg_id, {"type": "list_committed_offsets_ok", "offsets": {}})
        for key in set(req.keys):
            def got(value, key=key):
                if value is not None:
                    offsets[key] = value
                pending.discard(key)
                if not pending:
                    self.reply(client, req.msg_id, {"type": "list_committed_offsets_ok", "offsets": offsets})
            self.kv_read(f"{key}/committed", got)


def main():
    node = Node()
    for line in sys.stdin:
        if line.strip():
            node.handle(json.loads(line))


if __name__ == "__main__":
    main()
