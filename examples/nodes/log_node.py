#!/usr/bin/env python3
"""A replicated log with a high-water mark, as a Maelstrom node (Python 3 standard library only).

Run it under hwm:  hwm test --workload log -- python3 examples/nodes/log_node.py
and step its states against the model of the preset it implements:
                   hwm test --workload log --protocol raft-noop,hwm_durable=true -- python3 examples/nodes/log_node.py

It speaks Maelstrom's protocol on stdin/stdout (one JSON message per line) and serves the `kafka`
workload (send, poll, commit_offsets, list_committed_offsets), hwm's log workload (log_append,
log_read) and Maelstrom's `lin-kv` workload (read, write, cas), on one replicated log:

- a leader is elected per generation by a majority of votes, and only a server whose log is at
  least as up to date (last generation, then length) gets a vote;
- the leader appends each entry to its log and sends it to the followers; the high-water mark is
  the last index stored on a majority, counted only for an entry of the leader's own generation;
- a client is acknowledged once its entry is at or below the high-water mark, and reads (polls)
  return entries at or below the high-water mark of the server asked;
- lin-kv: every read, write and cas is an entry of the log, answered once it is at or below the
  high-water mark with what it did to the key-value map the log's entries build in order (a
  replicated state machine; the read goes through the log too, so a deposed leader cannot answer
  it from a stale map);
- the log, the generation, the vote and the high-water mark live in `state.json` in the node's
  data directory (HWM_DATA_DIR), replaced atomically, so a SIGKILL loses nothing acknowledged.

Its `init_ok` declares the extensions of hwm's it takes part in (`"hwm": [...]`): it answers
hwm's introspection request (`hwm_state`), follows hwm's virtual clock (`hwm_tick`; `HWM_CLOCK=virtual`
says it is on, else it ticks every 50 ms of wall-clock time), keeps its state on disk, so a kill
is fair, and ignores a duplicated message.

`naive_node.py` is this node with the pattern's three classic mistakes switched on (MISTAKES).
"""

import json
import os
import select
import sys
import time

MISTAKES = set()  # "ack-on-write", "poll-above-hwm", "truncate-to-own-hwm" (naive_node.py sets them)
TICK_SECONDS = 0.05  # one tick of wall-clock time, until hwm's virtual clock takes over


class Node:
    def __init__(self):
        self.node_id = None
        self.peers = []
        self.data_dir = os.environ.get("HWM_DATA_DIR", ".")
        self.generation = 0
        self.voted_for = None
        self.log = []  # [generation, payload]; position k holds index k+1
        self.hwm = 0
        self.role = "follower"
        self.leader = None
        self.ticks_quiet = 0  # ticks since the leader (or a vote) was last heard
        self.votes = set()
        self.match = {}
        self.next_index = {}
        self.waiting = {}  # index -> (client, msg_id, reply type) acknowledged at the high-water mark
        self.next_msg_id = 0
        self.virtual_clock = False

    # ---- input and output -------------------------------------------------------------------
    def send(self, dest, body):
        self.next_msg_id += 1
        body.setdefault("msg_id", self.next_msg_id)
        sys.stdout.write(json.dumps({"src": self.node_id, "dest": dest, "body": body}) + "\n")
        sys.stdout.flush()

    def reply(self, msg, body):
        body["in_reply_to"] = msg["body"].get("msg_id")
        self.send(msg["src"], body)

    def error(self, msg, code, text):
        self.reply(msg, {"type": "error", "code": code, "text": text})

    def log_line(self, text):
        print(f"{self.node_id}: {text}", file=sys.stderr, flush=True)

    # ---- durable state ----------------------------------------------------------------------
    def state_path(self):
        return os.path.join(self.data_dir, "state.json")

    def persist(self):
        # Write, fsync, rename: a kill at any moment leaves the old state or the new one.
        tmp = self.state_path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"generation": self.generation, "voted_for": self.voted_for, "log": self.log,
                       "hwm": self.hwm}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path())

    def recover(self):
        try:
            with open(self.state_path()) as f:
                saved = json.load(f)
        except FileNotFoundError:
            return
        self.generation, self.voted_for = saved["generation"], saved["voted_for"]
        self.log, self.hwm = saved["log"], saved["hwm"]
        if "truncate-to-own-hwm" in MISTAKES and len(self.log) > self.hwm:
            # Kafka before KIP-101: a restarted follower cuts its log back to its own high-water
            # mark, which lags the leader's, and may drop entries a majority had acknowledged.
            self.log_line(f"restart: truncating log from {len(self.log)} to own hwm {self.hwm}")
            del self.log[self.hwm:]
        self.log_line(f"recovered generation {self.generation}, {len(self.log)} entries, hwm {self.hwm}")

    # ---- roles ------------------------------------------------------------------------------
    def majority(self):
        return (len(self.peers) + 1) // 2 + 1

    def election_timeout(self):
        # Distinct per node (n1: 3 ticks, n2: 5, n3: 7): no random numbers, so a run depends only
        # on its inputs, and split votes do not repeat.
        return 1 + 2 * int(self.node_id.lstrip("n") or 1)

    def last_generation(self):
        return self.log[-1][0] if self.log else 0

    def become_follower(self, generation, leader=None):
        if generation > self.generation:
            self.generation, self.voted_for = generation, None
            self.persist()
        if self.role == "leader":
            # Entries still waiting may yet be committed by the next leader: say we do not know.
            for index, (client, msg_id, _) in sorted(self.waiting.items()):
                self.send(client, {"type": "error", "in_reply_to": msg_id, "code": 0,
                                   "text": f"{self.node_id} lost leadership; entry {index} may or may not commit"})
            self.waiting.clear()
        self.role, self.leader = "follower", leader

    def on_tick(self):
        if self.role == "leader":
            for peer in self.peers:
                self.send_append(peer)
            return
        self.ticks_quiet += 1
        if self.ticks_quiet >= self.election_timeout():
            self.start_election()

    def start_election(self):
        self.ticks_quiet = 0
        self.generation += 1
        self.voted_for = self.node_id
        self.role, self.leader, self.votes = "candidate", None, {self.node_id}
        self.persist()
        for peer in self.peers:
            self.send(peer, {"type": "request_vote", "generation": self.generation,
                             "last_index": len(self.log), "last_generation": self.last_generation()})
        self.maybe_win()

    def maybe_win(self):
        if self.role != "candidate" or len(self.votes) < self.majority():
            return
        self.role, self.leader = "leader", self.node_id
        self.match = {p: 0 for p in self.peers}
        self.next_index = {p: len(self.log) + 1 for p in self.peers}
        # An entry of the new generation commits everything before it (Raft's no-op).
        self.log.append([self.generation, None])
        self.persist()
        self.log_line(f"leader of generation {self.generation}")
        for peer in self.peers:
            self.send_append(peer)
        self.advance_hwm()

    def on_request_vote(self, msg):
        body = msg["body"]
        if body["generation"] > self.generation:
            self.become_follower(body["generation"])
        up_to_date = (body["last_generation"], body["last_index"]) >= (self.last_generation(), len(self.log))
        granted = (body["generation"] == self.generation and up_to_date
                   and self.voted_for in (None, msg["src"]))
        if granted:
            self.voted_for, self.ticks_quiet = msg["src"], 0
            self.persist()
        self.send(msg["src"], {"type": "vote", "generation": self.generation, "granted": granted})

    def on_vote(self, msg):
        body = msg["body"]
        if body["generation"] > self.generation:
            self.become_follower(body["generation"])
        elif body["granted"] and body["generation"] == self.generation and self.role == "candidate":
            self.votes.add(msg["src"])
            self.maybe_win()

    # ---- replication ------------------------------------------------------------------------
    def send_append(self, peer):
        prev = self.next_index[peer] - 1
        self.send(peer, {"type": "append", "generation": self.generation, "prev_index": prev,
                         "prev_generation": self.log[prev - 1][0] if prev else 0,
                         "entries": self.log[prev:], "hwm": self.hwm})

    def on_append(self, msg):
        body = msg["body"]
        if body["generation"] < self.generation:
            self.send(msg["src"], {"type": "append_reply", "generation": self.generation, "ok": False, "match": 0})
            return
        if body["generation"] > self.generation or self.role != "follower":
            self.become_follower(body["generation"], msg["src"])
        self.leader, self.ticks_quiet = msg["src"], 0
        prev = body["prev_index"]
        if prev > len(self.log) or (prev and self.log[prev - 1][0] != body["prev_generation"]):
            self.send(msg["src"], {"type": "append_reply", "generation": self.generation, "ok": False,
                                   "match": min(prev - 1, len(self.log))})
            return
        changed = False
        for k, entry in enumerate(body["entries"]):
            index = prev + 1 + k
            if index <= len(self.log) and self.log[index - 1][0] != entry[0]:
                del self.log[index - 1:]  # the first entry whose generation differs, and all after
            if index > len(self.log):
                self.log.append(entry)
                changed = True
        last = prev + len(body["entries"])
        hwm = max(self.hwm, min(body["hwm"], last))
        if changed or hwm != self.hwm:
            self.hwm = hwm
            self.persist()
        self.send(msg["src"], {"type": "append_reply", "generation": self.generation, "ok": True, "match": last})

    def on_append_reply(self, msg):
        body, peer = msg["body"], msg["src"]
        if body["generation"] > self.generation:
            self.become_follower(body["generation"])
            return
        if self.role != "leader" or body["generation"] != self.generation:
            return
        if body["ok"]:
            self.match[peer] = max(self.match[peer], body["match"])
            self.next_index[peer] = self.match[peer] + 1
            self.advance_hwm()
        else:
            self.next_index[peer] = max(1, min(self.next_index[peer] - 1, body["match"] + 1))
            self.send_append(peer)

    def advance_hwm(self):
        stored = sorted([len(self.log)] + list(self.match.values()), reverse=True)
        quorum_index = stored[self.majority() - 1]
        if quorum_index > self.hwm and self.log[quorum_index - 1][0] == self.generation:
            self.hwm = quorum_index
            self.persist()
        for index in sorted(i for i in self.waiting if i <= self.hwm):
            client, msg_id, kind = self.waiting.pop(index)
            self.send(client, self.ok_body(kind, index, msg_id))

    def ok_body(self, kind, index, msg_id):
        if kind in ("read", "write", "cas"):
            return dict(self.kv_answer(index), in_reply_to=msg_id)
        if kind == "send":
            return {"type": "send_ok", "offset": index, "in_reply_to": msg_id}
        if kind == "log_append":
            return {"type": "log_append_ok", "index": index, "in_reply_to": msg_id}
        return {"type": "commit_offsets_ok", "in_reply_to": msg_id}

    def kv_answer(self, index):
        """What the lin-kv operation at `index` answers: the map built by the entries before it, in order."""
        store, answer = {}, None
        for _, payload in self.log[:index]:
            op = (payload or {}).get("kv")
            if op is None:
                continue
            key = str(op["key"])
            if op["type"] == "read":
                answer = ({"type": "read_ok", "value": store[key]} if key in store else
                          {"type": "error", "code": 20, "text": f"key {op['key']} does not exist"})
            elif op["type"] == "write":
                store[key], answer = op["value"], {"type": "write_ok"}
            elif key not in store and not op.get("create_if_not_exists"):
                answer = {"type": "error", "code": 20, "text": f"key {op['key']} does not exist"}
            elif key in store and store[key] != op["from"]:
                answer = {"type": "error", "code": 22, "text": f"expected {op['from']}, had {store[key]}"}
            else:
                store[key], answer = op["to"], {"type": "cas_ok"}
        return answer

    # ---- clients ----------------------------------------------------------------------------
    def append_for_client(self, msg, payload):
        if self.role != "leader":
            hint = f" (try {self.leader})" if self.leader else ""
            self.error(msg, 11, f"{self.node_id} is not the leader{hint}")
            return
        self.log.append([self.generation, payload])
        self.persist()
        index, kind = len(self.log), msg["body"]["type"]
        if "ack-on-write" in MISTAKES:
            # The mistake: acknowledge on the leader's own write, before a majority stores it.
            self.reply(msg, self.ok_body(kind, index, msg["body"].get("msg_id")))
        else:
            self.waiting[index] = (msg["src"], msg["body"].get("msg_id"), kind)
        for peer in self.peers:
            self.send_append(peer)
        self.advance_hwm()

    def readable(self):
        """The last index a client may read here: the high-water mark (the mistake: the whole log)."""
        return len(self.log) if "poll-above-hwm" in MISTAKES else self.hwm

    def on_poll(self, msg):
        msgs = {}
        for key, start in msg["body"]["offsets"].items():
            msgs[key] = [[i, p["m"]] for i, (_, p) in enumerate(self.log[:self.readable()], 1)
                         if i >= start and p and p.get("k") == key]
        self.reply(msg, {"type": "poll_ok", "msgs": msgs})

    def on_list_committed_offsets(self, msg):
        # Committed offsets must never go back, so only a leader whose own generation has committed
        # (its high-water mark is at least as high as any earlier leader's) answers.
        if self.role != "leader" or not self.hwm or self.log[self.hwm - 1][0] != self.generation:
            self.error(msg, 11, f"{self.node_id} cannot list committed offsets now (not a settled leader)")
            return
        committed = {}
        for _, p in self.log[:self.hwm]:
            for key, offset in ((p or {}).get("c") or {}).items():
                committed[key] = max(committed.get(key, 0), offset)
        self.reply(msg, {"type": "list_committed_offsets_ok",
                         "offsets": {k: committed[k] for k in msg["body"]["keys"] if k in committed}})

    def on_log_read(self, msg):
        index = msg["body"]["index"]
        if not isinstance(index, int) or index < 1 or index > self.readable():
            self.error(msg, 20, f"index {index} is above {self.node_id}'s high-water mark {self.hwm}")
            return
        payload = self.log[index - 1][1]
        self.reply(msg, {"type": "log_read_ok", "index": index, "value": (payload or {}).get("v")})

    def on_hwm_state(self, msg):
        self.reply(msg, {"type": "hwm_state_ok", "generation": self.generation, "role": self.role,
                         "log": [[i, e[0]] for i, e in enumerate(self.log, 1)], "hwm": self.hwm})

    # ---- dispatch ---------------------------------------------------------------------------
    def handle(self, msg):
        kind = msg["body"].get("type")
        if kind == "init":
            body = msg["body"]
            self.node_id = body["node_id"]
            self.peers = [n for n in body["node_ids"] if n != self.node_id]
            self.virtual_clock = os.environ.get("HWM_CLOCK") == "virtual"  # hwm's clock: no timers of ours
            self.recover()
            # hwm's extensions this node takes part in: it answers hwm_state, follows hwm_tick, keeps
            # its state in its data directory (so a kill is fair) and ignores a duplicated message.
            self.reply(msg, {"type": "init_ok", "hwm": ["hwm_state", "hwm_tick", "kill", "duplicate"]})
        elif kind == "hwm_tick":
            self.virtual_clock = True
            self.on_tick()
        elif kind == "request_vote":
            self.on_request_vote(msg)
        elif kind == "vote":
            self.on_vote(msg)
        elif kind == "append":
            self.on_append(msg)
        elif kind == "append_reply":
            self.on_append_reply(msg)
        elif kind == "send":
            self.append_for_client(msg, {"k": msg["body"]["key"], "m": msg["body"]["msg"]})
        elif kind == "log_append":
            self.append_for_client(msg, {"v": msg["body"]["value"]})
        elif kind == "commit_offsets":
            self.append_for_client(msg, {"c": msg["body"]["offsets"]})
        elif kind in ("read", "write", "cas"):
            self.append_for_client(msg, {"kv": {k: v for k, v in msg["body"].items() if k != "msg_id"}})
        elif kind == "poll":
            self.on_poll(msg)
        elif kind == "list_committed_offsets":
            self.on_list_committed_offsets(msg)
        elif kind == "log_read":
            self.on_log_read(msg)
        elif kind == "hwm_state":
            self.on_hwm_state(msg)
        elif "msg_id" in msg["body"]:
            self.error(msg, 10, f"{self.node_id} does not support {kind!r}")


def main():
    node = Node()
    buffered = b""
    next_tick = time.monotonic() + TICK_SECONDS
    while True:
        wait = None if node.virtual_clock or node.node_id is None else max(0.0, next_tick - time.monotonic())
        ready, _, _ = select.select([0], [], [], wait)
        if ready:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                if line.strip():
                    node.handle(json.loads(line))
        if not node.virtual_clock and node.node_id is not None and time.monotonic() >= next_tick:
            next_tick = time.monotonic() + TICK_SECONDS
            node.on_tick()


if __name__ == "__main__":
    main()
