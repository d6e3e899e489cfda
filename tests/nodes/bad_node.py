"""A node that breaks the protocol in the way argv[1] names (for tests/nodes/test_protocol_errors.py)."""

import json
import os
import sys

mode = sys.argv[1]
pending = []  # kv mode: the request being served, then the length read from lin-kv


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if mode == "exit-at-start":
    print("cannot open my config", file=sys.stderr)
    sys.exit(3)
for line in sys.stdin:
    msg = json.loads(line)
    body = msg["body"]
    me = body.get("node_id", os.environ.get("HWM_NODE_ID"))
    if body["type"] == "init":
        if mode == "no-init":
            continue
        # It takes hwm's virtual clock (ignoring every tick) and its hwm_state (answering error 10).
        out({"src": me, "dest": msg["src"], "body": {"type": "init_ok", "in_reply_to": body["msg_id"],
                                                     "hwm": ["hwm_state", "hwm_tick"]}})
        me = body["node_id"]
        if mode == "child":  # a grandchild in the node's process group, which hwm must kill too
            import subprocess
            child = subprocess.Popen(["sleep", "300"])
            print(os.getpid(), child.pid, file=sys.stderr, flush=True)
        continue
    me = msg["dest"]
    if mode == "kv" and msg["src"] == "lin-kv":  # a node that keeps its log's length in lin-kv
        if body["type"] in ("read_ok", "error"):
            pending.append(body.get("value", 0))
            out({"src": me, "dest": "lin-kv", "body": {"type": "cas", "key": "length", "from": pending[2],
                                                       "to": pending[2] + 1, "create_if_not_exists": True,
                                                       "msg_id": pending[0]}})
        elif body["type"] == "cas_ok":
            msg_id, client, length = pending
            out({"src": me, "dest": client, "body": {"type": "log_append_ok", "index": length + 1,
                                                     "in_reply_to": msg_id}})
        continue
    if body["type"] == "hwm_state":
        out({"src": me, "dest": msg["src"], "body": {"type": "error", "code": 10, "in_reply_to": body["msg_id"]}})
    elif body["type"] == "log_read" and mode != "hang":  # it stores nothing: no index is there to read
        out({"src": me, "dest": msg["src"], "body": {"type": "error", "code": 20, "in_reply_to": body["msg_id"]}})
    elif body["type"] == "log_append":
        if mode == "one-index":  # every append acknowledged at index 1: two values at one index
            out({"src": me, "dest": msg["src"], "body": {"type": "log_append_ok", "index": 1,
                                                         "in_reply_to": body["msg_id"]}})
        elif mode == "not-json":
            sys.stdout.write("appended it!\n")
            sys.stdout.flush()
        elif mode == "unknown-type":
            out({"src": me, "dest": msg["src"], "body": {"type": "log_append_done", "in_reply_to": body["msg_id"]}})
        elif mode == "flood":
            for k in range(100_000):
                out({"src": me, "dest": "n1" if me != "n1" else "n2", "body": {"type": "gossip", "k": k}})
        elif mode == "unknown-src":  # a src that names no one of the run
            out({"src": "n9", "dest": msg["src"], "body": {"type": "log_append_ok", "index": 1,
                                                           "in_reply_to": body["msg_id"]}})
        elif mode == "trace-message-first":  # dies as a Ruby node does: the message, then the frames
            print("raft.rb:438:in `replicate_log!': undefined method `index' for nil:NilClass (NoMethodError)",
                  file=sys.stderr)
            for frame in range(8):
                print(f"\tfrom raft.rb:{200 + frame}:in `block in loop'", file=sys.stderr)
            sys.stderr.flush()
            sys.exit(1)
        elif mode == "hang":
            pass  # never answers a client: an availability finding, not a hang of hwm
        elif mode == "kv":
            pending = [body["msg_id"], msg["src"]]
            out({"src": me, "dest": "lin-kv", "body": {"type": "read", "key": "length", "msg_id": body["msg_id"]}})
        elif mode == "child":
            out({"src": me, "dest": msg["src"], "body": {"type": "error", "code": 11, "in_reply_to": body["msg_id"]}})
