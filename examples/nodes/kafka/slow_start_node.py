#!/usr/bin/env python3
"""A Maelstrom kafka node that starts slowly, handles every input late and keeps each log in lin-kv.

    python3 examples/nodes/kafka/slow_start_node.py          # correct
    python3 examples/nodes/kafka/slow_start_node.py --bug    # planted bug (or NODE_BUG=1)

Style: a slow program with blocking RPCs. It takes 1-2 s to answer `init` (it loads something
first), and it sleeps 50-100 ms before it handles each input, as a node on a loaded machine or
behind a slow runtime would. As in Maelstrom's Go library, each request is handled on its own
thread, which waits for its service replies (`sync_rpc`); the input loop hands each reply to the
thread that waits for it.

Design: the whole log of a key is one lin-kv value, the list of its messages (offset = position).

- `send`: read the list (error 20: empty), `cas` it to the list plus the message (error 22:
  another send appended first, read again and retry); the offset is the old list's length;
- `poll`: read the list and return the messages from the offset asked;
- `commit_offsets`: `committed/<key>` is raised by cas, never lowered;
- `list_committed_offsets`: reads `committed/<key>`; a key never committed is left out.

Planted bug (`--bug`): polls are served from a cache of the messages this node appended itself,
to save a lin-kv read. It holds none of the offsets appended through other nodes, so a poll skips
them and returns later offsets. Expected finding: AckedNeverLost (an acknowledged send at an
offset that a poll from before it passes over), ReadNeverTruncated when that message was polled.
"""

import json
import os
import queue
import random
import sys
import threading
import time

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"

KEY_DOES_NOT_EXIST = 20
PRECONDITION_FAILED = 22


class Node:
    def __init__(self):
        self.node_id = None
        self.node_ids = []
        self.lock = threading.Lock()  # msg ids, the waiting table and stdout
        self.next_msg_id = 0
        self.waiting = {}  # msg_id of a request -> queue its reply is put in
        self.own_appends = {}  # key -> {offset: msg} this node appended (only the planted bug reads it)

    def log(self, text):
        print(f"{self.node_id}: {text}", file=sys.stderr, flush=True)

    def send(self, dest, body):
        with self.lock:
            sys.stdout.write(json.dumps({"src": self.node_id, "dest": dest, "body": body}) + "\n")
            sys.stdout.flush()

    def reply(self, request, body):
        self.send(request["src"], dict(body, in_reply_to=request["body"]["msg_id"]))

    def sync_rpc(self, dest, body):
        """Send a request and block until its reply (forever if none comes: the request stays open)."""
        answer = queue.Queue(maxsize=1)
        with self.lock:
            self.next_msg_id += 1
            msg_id = self.next_msg_id
            self.waiting[msg_id] = answer
        self.send(dest, dict(body, msg_id=msg_id))
        return answer.get()

    # ---- lin-kv --------------------------------------------------------------------------------
    def kv_read(self, key, default):
        body = self.sync_rpc("lin-kv", {"type": "read", "key": key})
        if body["type"] == "read_ok":
            return body["value"]
        if body["type"] == "error" and body["code"] == KEY_DOES_NOT_EXIST:
            return default
        raise RuntimeError(f"lin-kv read {key}: {body}")

    def kv_cas(self, key, current, new):
        """True if the key went from `current` (None: absent) to `new`; False if it had changed."""
        body = self.sync_rpc("lin-kv", {"type": "cas", "key": key, "from": current, "to": new,
                                        "create_if_not_exists": current is None})
        if body["type"] == "cas_ok":
            return True
        if body["type"] == "error" and body["code"] in (PRECONDITION_FAILED, KEY_DOES_NOT_EXIST):
            return False
        raise RuntimeError(f"lin-kv cas {key}: {body}")

    # ---- the workload ----------------------------------------------------------------------------
    def on_send(self, msg):
        key, value = msg["body"]["key"], msg["body"]["msg"]
        while True:
            current = self.kv_read(f"log/{key}", None)
            entries = current or []
            if self.kv_cas(f"log/{key}", current, entries + [value]):
                break
        offset = len(entries)
        with self.lock:
            self.own_appends.setdefault(key, {})[offset] = value
        self.reply(msg, {"type": "send_ok", "offset": offset})

    def on_poll(self, msg):
        msgs = {}
        for key, offset in msg["body"]["offsets"].items():
            if BUG:
                # Planted: this node's own appends only; offsets appended elsewhere are skipped.
                with self.lock:
                    mine = dict(self.own_appends.get(key, {}))
                msgs[key] = [[o, mine[o]] for o in sorted(mine) if o >= offset]
                continue
            entries = self.kv_read(f"log/{key}", [])
            msgs[key] = [[o, entries[o]] for o in range(max(offset, 0), len(entries))]
        self.reply(msg, {"type": "poll_ok", "msgs": msgs})

    def on_commit_offsets(self, msg):
        for key, offset in msg["body"]["offsets"].items():
            while True:
                current = self.kv_read(f"committed/{key}", None)
                if current is not None and current >= offset:
                    break
                if self.kv_cas(f"committed/{key}", current, offset):
                    break
        self.reply(msg, {"type": "commit_offsets_ok"})

    def on_list_committed_offsets(self, msg):
        offsets = {}
        for key in set(msg["body"]["keys"]):
            value = self.kv_read(f"committed/{key}", None)
            if value is not None:
                offsets[key] = value
        self.reply(msg, {"type": "list_committed_offsets_ok", "offsets": offsets})

    def handle(self, msg):
        handler = {"send": self.on_send, "poll": self.on_poll, "commit_offsets": self.on_commit_offsets,
                   "list_committed_offsets": self.on_list_committed_offsets}.get(msg["body"]["type"])
        if handler is None:
            self.reply(msg, {"type": "error", "code": 10, "text": f"unsupported {msg['body']['type']!r}"})
            return
        try:
            handler(msg)
        except Exception as e:  # an unexpected service answer: log it, leave the request unanswered
            self.log(f"{msg['body']['type']} failed: {e!r}")

    def run(self):
        for line in sys.stdin:
            msg = json.loads(line)
            body = msg["body"]
            if body["type"] == "init":
                time.sleep(random.uniform(1.0, 2.0))  # loading something before it can serve
                self.node_id, self.node_ids = body["node_id"], body["node_ids"]
                self.reply(msg, {"type": "init_ok"})
                self.log("initialised")
                continue
            time.sleep(random.uniform(0.05, 0.10))  # every input is handled late
            if "in_reply_to" in body:
                with self.lock:
                    answer = self.waiting.pop(body["in_reply_to"], None)
                if answer is not None:
                    answer.put(body)
                continue
            threading.Thread(target=self.handle, args=(msg,), daemon=True).start()


if __name__ == "__main__":
    Node().run()
