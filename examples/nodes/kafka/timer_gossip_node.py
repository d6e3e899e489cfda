#!/usr/bin/env python3
"""A Maelstrom kafka node that takes offsets from lin-kv and replicates messages by timed gossip.

    python3 examples/nodes/kafka/timer_gossip_node.py          # correct
    python3 examples/nodes/kafka/timer_gossip_node.py --bug    # planted bug (or NODE_BUG=1)

Style: replication on a timer, as in the broadcast challenges. A thread wakes every
GOSSIP_SECONDS (5 s) and sends each peer every message this node holds; a peer merges them into
its own copy. There are no acknowledgements and no retries: a gossip lost to a partition is made
good by the next one.

- `send {key, msg}`: the offset comes from lin-kv, a per-key counter `offset/<key>` advanced by
  `cas` (error 22: read again and retry; error 20: the key starts at 0), so every offset is given
  once; the message is stored at that offset locally and acknowledged at once;
- `poll`: served from the local copy, only the contiguous run of offsets it holds from the one
  asked, so it never skips an offset whose message has not reached this node yet. An acknowledged
  message reaches the other nodes' polls only with the next gossip, ~5 s later: that is allowed,
  Maelstrom's kafka workload asks no recency of a poll;
- `commit_offsets` / `list_committed_offsets`: in lin-kv, `committed/<key>` raised by cas, never
  lowered (a gossiped committed offset would go back when listed at a node that lags).

Planted bug (`--bug`): the offset is the length of the local log, `len(local[key])`, not a lin-kv
counter, as a real node did. Two nodes that each take a send of one key before a gossip give both
messages offset 0. Expected finding: OneValuePerOffset (polls at the two nodes, or one node after
the gossip, show two messages at one offset).
"""

import json
import os
import sys
import threading
import time

BUG = "--bug" in sys.argv[1:] or os.environ.get("NODE_BUG") == "1"
GOSSIP_SECONDS = 5.0

KEY_DOES_NOT_EXIST = 20
PRECONDITION_FAILED = 22

lock = threading.Lock()  # the gossip thread and the input loop share the state and stdout
node_id = None
node_ids = []
next_msg_id = 0
callbacks = {}
local = {}  # key -> {offset: msg}, this node's copy of every log


def log(text):
    print(f"{node_id}: {text}", file=sys.stderr, flush=True)


def send(dest, body):
    sys.stdout.write(json.dumps({"src": node_id, "dest": dest, "body": body}) + "\n")
    sys.stdout.flush()


def reply(request, body):
    send(request["src"], dict(body, in_reply_to=request["body"]["msg_id"]))


def rpc(dest, body, callback):
    global next_msg_id
    next_msg_id += 1
    callbacks[next_msg_id] = callback
    send(dest, dict(body, msg_id=next_msg_id))


def kv_read(key, callback):
    def done(body):
        if body["type"] == "read_ok":
            callback(body["value"])
        elif body["type"] == "error" and body["code"] == KEY_DOES_NOT_EXIST:
            callback(None)
        else:
            log(f"lin-kv read {key}: {body}; request left unanswered")
    rpc("lin-kv", {"type": "read", "key": key}, done)


def kv_cas(key, current, new, on_ok, on_conflict):
    def done(body):
        if body["type"] == "cas_ok":
            on_ok()
        elif body["type"] == "error" and body["code"] in (PRECONDITION_FAILED, KEY_DOES_NOT_EXIST):
            on_conflict()
        else:
            log(f"lin-kv cas {key}: {body}; request left unanswered")
    rpc("lin-kv", {"type": "cas", "key": key, "from": current, "to": new,
                   "create_if_not_exists": current is None}, done)


def on_send(msg):
    key, value = msg["body"]["key"], msg["body"]["msg"]
    entries = local.setdefault(key, {})
    if BUG:
        offset = len(entries)  # planted: another node may give the same offset to another message
        entries[offset] = value
        reply(msg, {"type": "send_ok", "offset": offset})
        return

    def take(current):
        offset = 0 if current is None else current

        def taken():
            entries[offset] = value
            reply(msg, {"type": "send_ok", "offset": offset})
        kv_cas(f"offset/{key}", current, offset + 1, taken, lambda: kv_read(f"offset/{key}", take))
    kv_read(f"offset/{key}", take)


def on_poll(msg):
    msgs = {}
    for key, offset in msg["body"]["offsets"].items():
        entries = local.get(key, {})
        run = []
        while offset in entries:  # the contiguous run from the offset asked
            run.append([offset, entries[offset]])
            offset += 1
        msgs[key] = run
    reply(msg, {"type": "poll_ok", "msgs": msgs})


def on_commit_offsets(msg):
    offsets = msg["body"]["offsets"]
    waiting = set(offsets)
    if not waiting:
        reply(msg, {"type": "commit_offsets_ok"})

    def raise_to(key, value):
        def got(current):
            if current is not None and current >= value:
                done()
            else:
                kv_cas(f"committed/{key}", current, value, done, lambda: raise_to(key, value))

        def done():
            waiting.discard(key)
            if not waiting:
                reply(msg, {"type": "commit_offsets_ok"})
        kv_read(f"committed/{key}", got)

    for key, value in offsets.items():
        raise_to(key, value)


def on_list_committed_offsets(msg):
    keys = set(msg["body"]["keys"])
    offsets = {}
    waiting = set(keys)
    if not waiting:
        reply(msg, {"type": "list_committed_offsets_ok", "offsets": {}})
    for key in keys:
        def got(value, key=key):
            if value is not None:
                offsets[key] = value
            waiting.discard(key)
            if not waiting:
                reply(msg, {"type": "list_committed_offsets_ok", "offsets": offsets})
        kv_read(f"committed/{key}", got)


def on_gossip(msg):
    for key, pairs in msg["body"]["msgs"].items():
        entries = local.setdefault(key, {})
        for offset, value in pairs:
            entries.setdefault(offset, value)  # an offset's message never changes


def on_init(msg):
    global node_id, node_ids
    node_id, node_ids = msg["body"]["node_id"], msg["body"]["node_ids"]
    reply(msg, {"type": "init_ok"})
    threading.Thread(target=gossip_forever, daemon=True).start()


def gossip_forever():
    while True:
        time.sleep(GOSSIP_SECONDS)
        with lock:
            everything = {key: sorted(entries.items()) for key, entries in local.items() if entries}
            if not everything:
                continue
            for peer in node_ids:
                if peer != node_id:
                    send(peer, {"type": "gossip", "msgs": everything})


handlers = {
    "init": on_init,
    "send": on_send,
    "poll": on_poll,
    "commit_offsets": on_commit_offsets,
    "list_committed_offsets": on_list_committed_offsets,
    "gossip": on_gossip,
}


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        body = msg["body"]
        with lock:
            if "in_reply_to" in body:
                callback = callbacks.pop(body["in_reply_to"], None)
                if callback:
                    callback(body)
            elif body["type"] in handlers:
                handlers[body["type"]](msg)
            else:
                reply(msg, {"type": "error", "code": 10, "text": f"unsupported {body['type']!r}"})


if __name__ == "__main__":
    main()
