"""A small hand driver for the kafka example nodes (examples/nodes/kafka/), independent of `hwm test`.

    python3 tests/nodes/kafka_driver.py                    # every node, correct and --bug
    python3 tests/nodes/kafka_driver.py forwarding_node    # one node

It starts 3 copies of a node with `subprocess`, speaks Maelstrom's protocol to them (`init` with
exactly Maelstrom's fields, then the kafka workload's requests from client c1), routes the
node-to-node messages between them (at once, or held and delivered in an order it chooses, or
dropped across a partition), and answers `lin-kv` itself from a dict (each request at once, or held
so two nodes' requests can be interleaved). It checks what the client saw, with a few of hwm's
findings done by hand (OneValuePerOffset, AckedNeverLost, poll order), and that each correct node
gives none and each `--bug` gives the one its docstring names.

Not a pytest module (it takes ~1 minute, mostly the gossip node's 5 s timer and the slow node's
start-up); it exits 1 if any check fails.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NODES_DIR = os.path.join(HERE, "..", "..", "examples", "nodes", "kafka")
NODE_IDS = ["n1", "n2", "n3"]


class Cluster:
    def __init__(self, name, bug=False, quiet=0.25):
        self.name, self.bug, self.quiet = name, bug, quiet
        self.logdir = tempfile.mkdtemp(prefix=f"kafka-{name}-")
        self.lines = queue.Queue()
        self.procs = {}
        self.exited = set()
        self.in_flight = []  # node-to-node messages held by the network
        self.auto_deliver = True  # deliver node-to-node messages as they are sent
        self.blocked = set()  # (src, dest) links cut by a partition: messages on them are lost
        self.kv = {}
        self.kv_hold = False
        self.kv_pending = []  # (node, body) lin-kv requests held for answer_kv
        self.replies = {}  # client msg_id -> reply body
        self.next_msg_id = 0
        self.sends = []  # (key, msg, offset) acknowledged
        self.polls = []  # (node, offsets asked, msgs returned)
        self.dropped = 0
        for node in NODE_IDS:
            cmd = [sys.executable, os.path.join(NODES_DIR, name + ".py")] + (["--bug"] if bug else [])
            err = open(os.path.join(self.logdir, node + ".log"), "w")
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                    env={k: v for k, v in os.environ.items() if k != "NODE_BUG"})
            self.procs[node] = proc
            threading.Thread(target=self._read, args=(node, proc), daemon=True).start()

    def _read(self, node, proc):
        for line in proc.stdout:
            self.lines.put((node, line))
        self.lines.put((node, None))

    def close(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    # ---- the network ---------------------------------------------------------------------------
    def write(self, dest, msg):
        if dest in self.exited:
            return
        try:
            self.procs[dest].stdin.write(json.dumps(msg) + "\n")
            self.procs[dest].stdin.flush()
        except BrokenPipeError:
            self.exited.add(dest)

    def deliver(self, msg):
        if (msg["src"], msg["dest"]) in self.blocked:
            self.dropped += 1
        else:
            self.write(msg["dest"], msg)

    def deliver_held(self, choose=None):
        """Deliver the held node-to-node messages (those `choose` picks, in its order; all by default)."""
        held, self.in_flight = self.in_flight, []
        picked = choose(held) if choose else held
        self.in_flight = [m for m in held if m not in picked]
        for msg in picked:
            self.deliver(msg)

    def kv_answer(self, node, body):
        key, kind = body.get("key"), body["type"]
        if kind == "read":
            reply = {"type": "read_ok", "value": self.kv[key]} if key in self.kv else \
                {"type": "error", "code": 20, "text": "no such key"}
        elif kind == "write":
            self.kv[key] = body["value"]
            reply = {"type": "write_ok"}
        elif kind == "cas":
            if key not in self.kv and not body.get("create_if_not_exists"):
                reply = {"type": "error", "code": 20, "text": "no such key"}
            elif key in self.kv and self.kv[key] != body["from"]:
                reply = {"type": "error", "code": 22, "text": f"expected {body['from']}, had {self.kv[key]}"}
            else:
                self.kv[key] = body["to"]
                reply = {"type": "cas_ok"}
        else:
            reply = {"type": "error", "code": 10, "text": "unsupported"}
        self.write(node, {"src": "lin-kv", "dest": node, "body": dict(reply, in_reply_to=body["msg_id"])})

    def answer_kv(self, pick=lambda node, body: True):
        """Answer the held lin-kv requests that `pick` chooses, in the order they came."""
        held, self.kv_pending = self.kv_pending, []
        for node, body in held:
            if pick(node, body):
                self.kv_answer(node, body)
            else:
                self.kv_pending.append((node, body))

    def _route(self, node, line):
        if line is None:
            self.exited.add(node)
            return
        msg = json.loads(line)
        assert msg["src"] == node, f"{node} sent as {msg['src']}: {line}"
        dest, body = msg["dest"], msg["body"]
        if dest == "lin-kv":
            if self.kv_hold:
                self.kv_pending.append((node, body))
            else:
                self.kv_answer(node, body)
        elif dest in self.procs:
            if self.auto_deliver:
                self.deliver(msg)
            else:
                self.in_flight.append(msg)
        elif dest == "c1":
            self.replies[body["in_reply_to"]] = body
        else:
            raise AssertionError(f"{node} sent to unknown {dest}: {line}")

    def pump(self, until, timeout=5.0):
        """Route lines until `until()` holds (True) or `timeout` seconds pass (False)."""
        end = time.monotonic() + timeout
        while not until():
            left = end - time.monotonic()
            if left <= 0:
                return False
            try:
                node, line = self.lines.get(timeout=min(left, 0.05))
            except queue.Empty:
                continue
            self._route(node, line)
        return True

    def settle(self, seconds=None):
        """Route lines until no node prints for `quiet` seconds."""
        while True:
            try:
                node, line = self.lines.get(timeout=seconds or self.quiet)
            except queue.Empty:
                return
            self._route(node, line)

    # ---- the client ----------------------------------------------------------------------------
    def init(self, timeout=5.0, extra=None):
        ids = []
        for node in NODE_IDS:
            ids.append(self.request(node, dict({"type": "init", "node_id": node, "node_ids": NODE_IDS}, **(extra or {}))))
        self.pump(lambda: all(i in self.replies for i in ids) or self.exited, timeout)
        return [self.replies.get(i) for i in ids]

    def request(self, node, body):
        self.next_msg_id += 1
        self.write(node, {"src": "c1", "dest": node, "body": dict(body, msg_id=self.next_msg_id)})
        return self.next_msg_id

    def result(self, msg_id, timeout=3.0):
        self.pump(lambda: msg_id in self.replies, timeout)
        return self.replies.get(msg_id)

    def call(self, node, body, timeout=3.0):
        return self.result(self.request(node, body), timeout)

    def send(self, node, key, value, timeout=3.0):
        return self.record_send(key, value, self.call(node, {"type": "send", "key": key, "msg": value}, timeout))

    def record_send(self, key, value, reply):
        if reply and reply["type"] == "send_ok":
            self.sends.append((key, value, reply["offset"]))
            return reply["offset"]
        return None

    def poll(self, node, offsets, timeout=3.0):
        reply = self.call(node, {"type": "poll", "offsets": offsets}, timeout)
        if reply and reply["type"] == "poll_ok":
            self.polls.append((node, offsets, reply["msgs"]))
            return reply["msgs"]
        return None

    def commit(self, node, offsets):
        return self.call(node, {"type": "commit_offsets", "offsets": offsets})

    def list_committed(self, node, keys):
        reply = self.call(node, {"type": "list_committed_offsets", "keys": keys})
        return reply["offsets"] if reply and reply["type"] == "list_committed_offsets_ok" else None

    def findings(self):
        """hwm's client-history findings, by hand, over every acknowledged send and every poll."""
        found = []
        at = {}  # (key, offset) -> messages seen there
        for key, value, offset in self.sends:
            at.setdefault((key, offset), set()).add(json.dumps(value))
        for node, asked, msgs in self.polls:
            for key, pairs in msgs.items():
                offsets = [o for o, _ in pairs]
                if offsets != sorted(set(offsets)) or any(o < asked.get(key, 0) for o in offsets):
                    found.append(f"PollOrder: {node} poll {asked} returned {key}: {offsets}")
                for o, value in pairs:
                    at.setdefault((key, o), set()).add(json.dumps(value))
        for (key, offset), values in sorted(at.items()):
            if len(values) > 1:
                found.append(f"OneValuePerOffset: key {key} offset {offset} holds {sorted(values)}")
        for kind, known in (("AckedNeverLost", self.sends),
                            ("ReadNeverTruncated", [(k, v, o) for _, _, m in self.polls
                                                    for k, pairs in m.items() for o, v in pairs])):
            for key, value, offset in known:
                for node, asked, msgs in self.polls:
                    pairs = msgs.get(key, [])
                    if key in asked and asked[key] <= offset and pairs and pairs[-1][0] > offset \
                            and [offset, value] not in pairs:
                        found.append(f"{kind}: {key}@{offset}={value} missing from {node} poll {asked} "
                                     f"returning {pairs}")
        return sorted(set(found))

    def log_tail(self):
        out = []
        for node in NODE_IDS:
            with open(os.path.join(self.logdir, node + ".log")) as f:
                out += [f"  {node}: {line.rstrip()}" for line in f.readlines()[-5:]]
        return "\n".join(out)


# ---- the checks ------------------------------------------------------------------------------------
failures = []


def check(ok, what, cluster=None):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        failures.append(what)
        if cluster:
            print(cluster.log_tail())


def started(name, bug=False, quiet=0.25, init_timeout=5.0):
    cluster = Cluster(name, bug, quiet)
    t0 = time.monotonic()
    replies = cluster.init(init_timeout)
    check(all(r and r["type"] == "init_ok" and set(r) == {"type", "in_reply_to"} for r in replies),
          f"{name}{' --bug' if bug else ''}: init_ok from all 3 in {time.monotonic() - t0:.1f} s, declaring nothing",
          cluster)
    return cluster


def common(cluster, gossip_wait=0.0):
    """Sends on every node, polls on every node, commits that never go back; no finding."""
    offsets = {}
    for i, node in enumerate(NODE_IDS * 2):
        for key in ("k1", "k2"):
            offsets[(key, i)] = cluster.send(node, key, 100 * i + (key == "k2"))
    check(all(o is not None for o in offsets.values()), "12 sends on 3 nodes all acknowledged", cluster)
    for key in ("k1", "k2"):
        mine = [offsets[(key, i)] for i in range(6)]
        check(mine == sorted(set(mine)), f"{key}: offsets unique and increasing in send order: {mine}")
    if gossip_wait:
        time.sleep(gossip_wait)
        cluster.settle()
    for node in NODE_IDS:
        msgs = cluster.poll(node, {"k1": 0, "k2": 0, "k-none": 0})
        complete = msgs is not None and all(len(msgs.get(k, [])) == 6 for k in ("k1", "k2"))
        check(complete, f"poll at {node} from 0 returns all 6 messages of each key", cluster)
    mid = offsets[("k1", 2)]
    msgs = cluster.poll("n2", {"k1": mid})
    check(msgs is not None and [o for o, _ in msgs["k1"]] == [offsets[("k1", i)] for i in range(2, 6)],
          f"poll at n2 from k1@{mid} returns offsets from {mid} on")
    reply = cluster.commit("n1", {"k1": mid, "k2": 1})
    check(reply is not None and reply["type"] == "commit_offsets_ok", "commit_offsets at n1 acknowledged")
    check(cluster.list_committed("n3", ["k1", "k2", "k-none"]) == {"k1": mid, "k2": 1},
          "list_committed_offsets at n3 shows n1's commit; a key never committed is left out")
    cluster.commit("n2", {"k1": 0})
    check(cluster.list_committed("n1", ["k1"]) == {"k1": mid}, "a lower commit does not lower the committed offset")


def verdict(cluster, expected=None):
    found = cluster.findings()
    for f in found:
        print(f"       finding {f}")
    if expected is None:
        check(not found, "no finding", cluster)
    else:
        check(any(f.startswith(expected) for f in found), f"the planted bug gives {expected}", cluster)
    cluster.close()


def strict_record_node():
    c = started("strict_record_node")
    common(c)
    # Two sends of one key on two nodes whose counter reads land before either counter update.
    c.kv_hold = True
    a = c.request("n1", {"type": "send", "key": "race", "msg": "a"})
    b = c.request("n2", {"type": "send", "key": "race", "msg": "b"})
    c.settle()
    c.answer_kv(lambda node, body: body["type"] == "read")  # both read the counter (absent)
    c.settle()
    c.kv_hold = False
    c.answer_kv()
    ra, rb = c.result(a), c.result(b)
    c.record_send("race", "a", ra), c.record_send("race", "b", rb)
    check(ra and rb and ra["offset"] != rb["offset"], f"interleaved sends get two offsets: {ra}, {rb} (cas retried on 22)")
    c.poll("n3", {"race": 0})
    verdict(c)

    # The strict record: a field Maelstrom never sends makes init raise, and the node exits.
    c = Cluster("strict_record_node")
    replies = c.init(extra={"hwm_data_dir": "/tmp"})
    c.pump(lambda: len(c.exited) == 3, 3.0)
    check(replies == [None] * 3 and len(c.exited) == 3 and "TypeError" in c.log_tail(),
          "an init with an extra field (hwm_data_dir) raises TypeError and the node exits")
    c.close()

    c = started("strict_record_node", bug=True)
    c.kv_hold = True
    a = c.request("n1", {"type": "send", "key": "race", "msg": "a"})
    b = c.request("n2", {"type": "send", "key": "race", "msg": "b"})
    c.settle()
    c.answer_kv(lambda node, body: body["type"] == "read")
    c.settle()
    c.kv_hold = False
    c.answer_kv()
    ra, rb = c.result(a), c.result(b)
    c.record_send("race", "a", ra), c.record_send("race", "b", rb)
    check(ra and rb and ra["offset"] == rb["offset"], f"--bug: interleaved sends get one offset: {ra}, {rb}")
    c.poll("n3", {"race": 0})
    verdict(c, "OneValuePerOffset")


def no_unknown_handler_node():
    c = started("no_unknown_handler_node")
    common(c)
    # Forwarding to n1 under reordering: hold the forwards, deliver them newest first.
    c.auto_deliver = False
    ids = [c.request(node, {"type": "send", "key": "r", "msg": node}) for node in ("n2", "n3")]
    c.settle()
    check(not any(i in c.replies for i in ids), "sends at n2 and n3 wait for the leader's answer")
    c.deliver_held(lambda held: list(reversed(held)))
    c.settle()
    c.deliver_held()
    c.settle()
    got = {node: c.record_send("r", node, c.replies.get(i)) for node, i in zip(("n2", "n3"), ids)}
    check(got == {"n3": 0, "n2": 1}, f"delivered newest first, n1 orders them as it receives them: {got}")
    # A partition between n2 and the leader: the send stays unanswered, others are served.
    c.blocked = {("n2", "n1"), ("n1", "n2")}
    c.auto_deliver = True
    c.deliver_held()
    lost = c.request("n2", {"type": "send", "key": "r", "msg": "lost"})
    check(c.result(lost, 1.0) is None, "a send at n2 cut off from the leader stays unanswered")
    check(c.send("n3", "r", "n3-again") == 2, "n3 is served meanwhile")
    c.blocked = set()
    c.poll("n2", {"r": 0})
    verdict(c)

    c = Cluster("no_unknown_handler_node")
    c.init()
    c.request("n1", {"type": "hwm_state"})
    c.pump(lambda: "n1" in c.exited, 3.0)
    check("n1" in c.exited and "KeyError" in c.log_tail(), "a message type Maelstrom never sends (hwm_state): "
                                                           "KeyError, the node exits")
    c.close()

    c = started("no_unknown_handler_node", bug=True)
    c.send("n2", "k", "a"), c.send("n3", "k", "b")
    msgs = c.poll("n2", {"k": 0})
    check(msgs == {"k": [[1, "b"]]}, f"--bug: poll from 0 skips offset 0: {msgs}")
    verdict(c, "AckedNeverLost")


def forwarding_node():
    import zlib
    owner = lambda key: NODE_IDS[zlib.crc32(key.encode()) % 3]
    c = started("forwarding_node")
    common(c)
    key = next(k for k in (f"f{i}" for i in range(100)) if owner(k) == "n1")
    other = next(n for n in NODE_IDS if n != owner(key))
    # A send at a non-owner takes two delivery rounds: the forward, then the owner's answer.
    c.auto_deliver = False
    i = c.request(other, {"type": "send", "key": key, "msg": "x"})
    c.settle()
    check(i not in c.replies and len(c.in_flight) == 1 and c.in_flight[0]["dest"] == "n1",
          f"a send of {key} (owner n1) at {other} is forwarded to n1, unanswered")
    c.deliver_held()
    c.settle()
    check(i not in c.replies and len(c.in_flight) == 1 and c.in_flight[0]["dest"] == other,
          "after the forward is delivered, the owner's answer is in flight")
    c.deliver_held()
    c.settle()
    check(c.record_send(key, "x", c.replies.get(i)) == 0, "after the answer is delivered, the client gets offset 0")
    # A poll of keys of several owners is split and gathered.
    keys = {owner(f"g{i}"): f"g{i}" for i in range(100)}
    check(len(keys) == 3, "three keys owned by n1, n2, n3")
    c.auto_deliver = True
    for k in keys.values():
        c.send("n1", k, "v-" + k)
    msgs = c.poll("n2", {k: 0 for k in keys.values()})
    check(msgs == {k: [[0, "v-" + k]] for k in keys.values()}, f"a poll at n2 of keys of all owners is gathered: {msgs}")
    # The owner unreachable: the request stays unanswered, and is lost for good.
    c.blocked = {(other, "n1")}
    lost = c.request(other, {"type": "send", "key": key, "msg": "lost"})
    check(c.result(lost, 1.0) is None, "a send whose owner is cut off stays unanswered")
    c.blocked = set()
    c.poll(other, {key: 0})
    verdict(c)

    c = started("forwarding_node", bug=True)
    c.send("n1", key, "at-owner")
    guessed = c.send(other, key, "guessed")
    msgs = c.poll("n1", {key: 0})
    check(guessed == 0 and msgs == {key: [[0, "at-owner"], [1, "guessed"]]},
          f"--bug: {other} answers offset {guessed} at once; the owner stored it at 1: {msgs}")
    verdict(c, "OneValuePerOffset")


def timer_gossip_node():
    c = started("timer_gossip_node")
    common(c, gossip_wait=6.0)
    c.send("n1", "g", "first")
    msgs = c.poll("n2", {"g": 0})
    check(msgs in ({"g": []}, {"g": [[0, "first"]]}), f"right after the send, n2 serves a prefix: {msgs}")
    time.sleep(6.0)
    c.settle()
    msgs = c.poll("n2", {"g": 0})
    check(msgs == {"g": [[0, "first"]]}, f"6 s later n2 has it by gossip: {msgs}")
    # n3 cut off from n2: n2's send of h takes offset 0, n3's offset 1 (both from lin-kv); n3 lacks
    # h@0, so from 0 it serves nothing (it never skips it), from 1 its own message.
    c.blocked = {("n2", "n3")}
    c.send("n2", "h", "h0")
    c.send("n3", "h", "h1")
    msgs = c.poll("n3", {"h": 0})
    check(msgs == {"h": []}, f"n3 lacks h@0 and so serves nothing from 0: {msgs}")
    msgs = c.poll("n3", {"h": 1})
    check(msgs == {"h": [[1, "h1"]]}, f"from 1 it serves its own: {msgs}")
    c.blocked = set()
    time.sleep(6.0)
    c.settle()
    for node in NODE_IDS:
        msgs = c.poll(node, {"h": 0})
        check(msgs == {"h": [[0, "h0"], [1, "h1"]]}, f"after healing, gossip makes h whole at {node}: {msgs}")
    verdict(c)

    c = started("timer_gossip_node", bug=True)
    a, b = c.send("n1", "k", "a"), c.send("n2", "k", "b")
    check(a == b == 0, f"--bug: sends at n1 and n2 both get offset 0 ({a}, {b})")
    c.poll("n1", {"k": 0}), c.poll("n2", {"k": 0})
    verdict(c, "OneValuePerOffset")


def slow_start_node():
    c = started("slow_start_node", quiet=0.5, init_timeout=6.0)
    common(c)
    c.kv_hold = True  # two appends of one key from two nodes, interleaved: the cas loser retries
    a = c.request("n1", {"type": "send", "key": "race", "msg": "a"})
    b = c.request("n2", {"type": "send", "key": "race", "msg": "b"})
    c.settle()
    c.answer_kv()
    c.settle()
    c.kv_hold = False
    c.answer_kv()
    ra, rb = c.result(a, 5.0), c.result(b, 5.0)
    c.record_send("race", "a", ra), c.record_send("race", "b", rb)
    check(ra and rb and {ra["offset"], rb["offset"]} == {0, 1}, f"interleaved appends get 0 and 1: {ra}, {rb}")
    c.poll("n3", {"race": 0})
    verdict(c)

    c = started("slow_start_node", bug=True, quiet=0.5, init_timeout=6.0)
    c.send("n1", "k", "a"), c.send("n2", "k", "b"), c.send("n1", "k", "c")
    msgs = c.poll("n1", {"k": 0})
    check(msgs == {"k": [[0, "a"], [2, "c"]]}, f"--bug: n1's poll skips offset 1, appended at n2: {msgs}")
    verdict(c, "AckedNeverLost")


ALL = [strict_record_node, no_unknown_handler_node, forwarding_node, timer_gossip_node, slow_start_node]

if __name__ == "__main__":
    chosen = [f for f in ALL if not sys.argv[1:] or f.__name__ in sys.argv[1:]]
    for scenario in chosen:
        print(scenario.__name__)
        scenario()
    print(f"{len(failures)} failed" if failures else "all checks passed")
    sys.exit(1 if failures else 0)
