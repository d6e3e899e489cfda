"""Maelstrom's line protocol as hwm speaks it (jepsen-io/maelstrom doc/protocol.md) plus hwm's additions.

A message is one JSON object per line: {"src", "dest", "body": {"type", "msg_id"?, "in_reply_to"?, ...}}.
Nodes are n1..nN, clients c1.., services by name. Every problem with what a node prints is a
`NodeProtocolError` naming the node and quoting the offending line.
"""

from __future__ import annotations

import json

# Maelstrom's error codes (doc/protocol.md, "Errors").
TIMEOUT, NODE_NOT_FOUND, NOT_SUPPORTED, TEMPORARILY_UNAVAILABLE, MALFORMED_REQUEST = 0, 1, 10, 11, 12
CRASH, ABORT, KEY_DOES_NOT_EXIST, KEY_ALREADY_EXISTS, PRECONDITION_FAILED, TXN_CONFLICT = 13, 14, 20, 21, 22, 30
ERROR_NAMES = {0: "timeout", 1: "node-not-found", 10: "not-supported", 11: "temporarily-unavailable",
               12: "malformed-request", 13: "crash", 14: "abort", 20: "key-does-not-exist",
               21: "key-already-exists", 22: "precondition-failed", 30: "txn-conflict"}
# Errors that say the operation may have happened anyway (Maelstrom calls them indefinite).
INDEFINITE = {TIMEOUT, CRASH}

SERVICES = ("lin-kv", "seq-kv", "lww-kv")
# The replies a client may get to each request it sends (besides "error").
REPLIES = {"init": "init_ok", "send": "send_ok", "poll": "poll_ok", "commit_offsets": "commit_offsets_ok",
           "list_committed_offsets": "list_committed_offsets_ok", "log_append": "log_append_ok",
           "log_read": "log_read_ok", "hwm_state": "hwm_state_ok",
           "read": "read_ok", "write": "write_ok", "cas": "cas_ok"}
# Where a message whose src is not its sender's own id records the sender (never delivered: the
# receiving node gets the message as it was printed).
SENT_BY = "hwm_sent_by"
MAX_LINE_BYTES = 1 << 20  # one message longer than this is a flood, not a message


class NodeProtocolError(Exception):
    """A node broke the protocol (bad line, unknown reply, died, never answered): names node and line."""

    def __init__(self, node: str, problem: str, line: str | None = None):
        self.node, self.problem, self.line = node, problem, line
        shown = f"\n  offending line: {line[:300]!r}" if line is not None else ""
        super().__init__(f"node {node}: {problem}{shown}")


def parse_line(node: str, raw: bytes, known: set[str]) -> dict:
    """The message on one stdout line of `node`, or NodeProtocolError naming what is wrong with it."""
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    try:
        msg = json.loads(text)
    except ValueError as e:
        raise NodeProtocolError(node, f"printed a line that is not JSON ({e.msg} at column {e.colno}); "
                                      "stdout is for protocol messages only, log to stderr", text)
    if not isinstance(msg, dict) or not isinstance(msg.get("body"), dict):
        raise NodeProtocolError(node, "printed JSON that is not a message: expected "
                                      '{"src": ..., "dest": ..., "body": {"type": ...}}', text)
    body = msg["body"]
    if not isinstance(body.get("type"), str):
        raise NodeProtocolError(node, "sent a message whose body has no string field 'type'", text)
    # Maelstrom's network takes any src it has a queue for, not only the sender's own id: a node may
    # pass a client's request on unchanged (Maelstrom's demo Raft proxies so), and the one it reaches
    # answers the client directly.
    for field in ("src", "dest"):
        if msg.get(field) not in known:
            raise NodeProtocolError(node, f"sent a message {'from' if field == 'src' else 'to'} "
                                          f"{msg.get(field)!r}, which is no node, client or service of this run "
                                          f"(nodes n1..; clients c1..; services {', '.join(SERVICES)})", text)
    for field in ("msg_id", "in_reply_to"):
        if field in body and not isinstance(body[field], int):
            raise NodeProtocolError(node, f"sent a body whose {field} is not an integer", text)
    if msg["src"] != node:
        msg[SENT_BY] = node
    return msg


def sender(msg: dict) -> str:
    """The node that printed `msg`: its src, or the node that passed on another's message (`SENT_BY`)."""
    return msg.get(SENT_BY, msg["src"])
