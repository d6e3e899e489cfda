"""`hwm node --stdio`: three real node processes on real pipes, routed by a small driver here.

The driver is the network and the clock: it writes each line to one node, then a `hwm_state`
request as a barrier, and reads that node's output up to the barrier's answer: everything before
it is what the node said in answer to the line (the node handles its input in order). Peer
messages go into one FIFO queue, delivered in order; messages to a killed node are lost. Under
the virtual clock a run is a function of this schedule alone. (The last tests drive one node in
process, where a peer's exact message matters.)
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.stdio import PEER_TYPE, StdioNode
from hwm.properties.protocol import PRESETS

NODE_IDS = ["n1", "n2", "n3"]
MSG_IDS = itertools.count(1)
READ_TIMEOUT = 20.0  # seconds for a node to answer the barrier: a generous bound on a busy machine


class NodeProcess:
    def __init__(self, node_id: str, data: Path, protocol: str):
        self.node_id = node_id
        data.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HWM_DATA_DIR=str(data), HWM_NODE_ID=node_id)
        self.stderr_path = data.parent / f"{node_id}.stderr"
        self.stderr = open(self.stderr_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--clock", "virtual", "--protocol", protocol],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, cwd=data, env=env)
        self.buffer = b""

    def write(self, envelope: dict | bytes) -> None:
        line = envelope if isinstance(envelope, bytes) else json.dumps(envelope).encode() + b"\n"
        self.process.stdin.write(line)
        self.process.stdin.flush()

    def request(self, body: dict, src: str = "c1") -> dict:
        body = dict(body, msg_id=next(MSG_IDS))  # unique across restarts: answers are keyed by it
        self.write({"src": src, "dest": self.node_id, "body": body})
        return body

    def barrier(self) -> tuple[list[dict], dict]:
        """(the lines the node wrote since the last barrier, its hwm_state_ok now)."""
        sent = self.request({"type": "hwm_state"}, src="driver")
        lines = []
        deadline = time.monotonic() + READ_TIMEOUT
        fd = self.process.stdout.fileno()
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                body = message["body"]
                if message["dest"] == "driver" and body.get("in_reply_to") == sent["msg_id"]:
                    assert body["type"] == "hwm_state_ok", body
                    return lines, body
                lines.append(message)
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"{self.node_id} did not answer within {READ_TIMEOUT} s: {self.stderr_text()}"
            data = os.read(fd, 65536)
            assert data, f"{self.node_id} exited ({self.process.poll()}): {self.stderr_text()}"
            self.buffer += data

    def stderr_text(self) -> str:
        self.stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-2000:]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.stderr.close()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                return self.process.wait(timeout=10)
            finally:
                self.stderr.close()
        self.stderr.close()
        return self.process.returncode


class Cluster:
    """Three nodes, a FIFO network between them, client answers collected per msg_id."""

    def __init__(self, root: Path, protocol: str):
        self.root, self.protocol = root, protocol
        self.nodes: dict[str, NodeProcess] = {}
        self.states: dict[str, dict] = {}
        self.network: list[dict] = []
        self.answers: dict[tuple[str, int], dict] = {}  # (node, msg_id) -> answer body
        self.state_at_answer: dict[tuple[str, int], dict] = {}  # the node's state right after it answered
        for node_id in NODE_IDS:
            self.start(node_id)

    def start(self, node_id: str) -> None:
        node = NodeProcess(node_id, self.root / node_id, self.protocol)
        self.nodes[node_id] = node
        node.request({"type": "init", "node_id": node_id, "node_ids": NODE_IDS})
        self.collect(node)

    def collect(self, node: NodeProcess) -> None:
        lines, state = node.barrier()
        self.states[node.node_id] = state
        for message in lines:
            if message["dest"] in NODE_IDS:
                self.network.append(message)
            else:
                self.answers[(node.node_id, message["body"]["in_reply_to"])] = message["body"]
                self.state_at_answer[(node.node_id, message["body"]["in_reply_to"])] = state

    def send(self, node_id: str, body: dict) -> tuple[str, int]:
        node = self.nodes[node_id]
        sent = node.request(body)
        self.collect(node)
        return node_id, sent["msg_id"]

    def deliver_all(self, limit: int = 500) -> None:
        for _ in range(limit):
            if not self.network:
                return
            message = self.network.pop(0)
            node = self.nodes.get(message["dest"])
            if node is None or node.process.poll() is not None:
                continue  # lost: the node is down
            node.write(message)
            self.collect(node)
        raise AssertionError(f"the network did not quiesce in {limit} deliveries")

    def tick(self, ticks: int = 1) -> None:
        for node_id, node in self.nodes.items():
            if node.process.poll() is None:
                for _ in range(ticks):
                    node.write({"src": "driver", "dest": node_id, "body": {"type": "hwm_tick"}})
                self.collect(node)
        self.deliver_all()

    def leader(self) -> str | None:
        leaders = [n for n, s in self.states.items() if s["role"] == "leader" and self.nodes[n].process.poll() is None]
        assert len(leaders) <= 1 or len({self.states[n]["generation"] for n in leaders}) == len(leaders), self.states
        return max(leaders, key=lambda n: self.states[n]["generation"]) if leaders else None

    def wait_for(self, condition, what: str, rounds: int = 200, ticks: int = 5):
        for _ in range(rounds):
            result = condition()
            if result:
                return result
            self.tick(ticks)
        raise AssertionError(f"no {what} after {rounds * ticks} ticks: {self.states}")

    def kill(self, node_id: str) -> None:
        self.nodes[node_id].kill()
        del self.nodes[node_id]
        del self.states[node_id]

    def stop(self) -> None:
        for node in self.nodes.values():
            assert node.stop() == 0, node.stderr_text()


@pytest.fixture
def cluster_factory(tmp_path):
    made = []

    def make(protocol: str) -> Cluster:
        cluster = Cluster(tmp_path, protocol)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        for node in cluster.nodes.values():
            if node.process.poll() is None:
                node.process.kill()
                node.process.wait()


def _append_until_acknowledged(cluster: Cluster, values: list[str]) -> dict[str, int]:
    """Append each value on the leader; the index each was acknowledged at."""
    acknowledged = {}
    for value in values:
        leader = cluster.wait_for(cluster.leader, "leader")
        key = cluster.send(leader, {"type": "log_append", "value": value})
        cluster.wait_for(lambda: key in cluster.answers, f"answer to the append of {value}")
        answer = cluster.answers[key]
        if answer["type"] == "log_append_ok":
            acknowledged[value] = answer["index"]
    return acknowledged


def _read_everywhere(cluster: Cluster, acknowledged: dict[str, int]) -> None:
    """Every node serves each acknowledged entry at or below its HWM, and refuses above it."""
    for node_id in cluster.nodes:
        hwm = cluster.states[node_id]["hwm"]
        for value, index in acknowledged.items():
            key = cluster.send(node_id, {"type": "log_read", "index": index})
            answer = cluster.answers[key]
            if index <= hwm:
                assert answer == {"type": "log_read_ok", "index": index, "value": value,
                                  "in_reply_to": key[1], "msg_id": answer["msg_id"]}, (node_id, answer)
            else:
                assert answer["type"] == "error" and answer["code"] == 20, (node_id, index, hwm, answer)
        above = cluster.send(node_id, {"type": "log_read", "index": hwm + 1})
        assert cluster.answers[above]["code"] == 20, cluster.answers[above]


@pytest.mark.parametrize("protocol", ["raft", "zab", "kafka"])
def test_elect_append_kill_the_leader_restart_and_nothing_acknowledged_is_lost(cluster_factory, protocol):
    cluster = cluster_factory(protocol)
    first = _append_until_acknowledged(cluster, ["a", "b", "c"])
    assert set(first) == {"a", "b", "c"}, first
    cluster.wait_for(lambda: all(s["hwm"] >= max(first.values()) for s in cluster.states.values()), "HWM everywhere")
    _read_everywhere(cluster, first)

    old_leader = cluster.leader()
    old_generation = cluster.states[old_leader]["generation"]
    old_log = cluster.states[old_leader]["log"]

    def restart() -> None:
        cluster.start(old_leader)  # kill -9, then back on the same data directory
        # Before any peer has spoken, what it shows is what it recovered from its disk.
        assert cluster.states[old_leader]["log"] == old_log

    cluster.kill(old_leader)
    if protocol == "kafka" and old_leader == NODE_IDS[0]:
        restart()  # the controller lives in n1: nothing is elected without it
    second = _append_until_acknowledged(cluster, ["d", "e"])
    assert set(second) == {"d", "e"}, second
    assert cluster.states[cluster.leader()]["generation"] > old_generation
    if old_leader not in cluster.nodes:
        restart()
    acknowledged = {**first, **second}
    last = max(acknowledged.values())
    cluster.wait_for(lambda: all(s["hwm"] >= last for s in cluster.states.values()), "the restarted node caught up")
    _read_everywhere(cluster, acknowledged)
    logs = {n: s["log"] for n, s in cluster.states.items()}
    assert all(log[:last] == logs[old_leader][:last] for log in logs.values()), logs
    cluster.stop()


def test_garbage_bad_requests_and_a_held_data_directory_get_a_log_line_or_an_error_never_a_crash(cluster_factory):
    cluster = cluster_factory("raft")
    node = cluster.nodes["n1"]
    node.write(b"this is not json\n")
    node.write(b"[1, 2, 3]\n")
    node.write(b"\xff\xfe\n")
    node.write(b'{"src": "c1", "dest": "n2", "body": {"type": "log_read", "msg_id": 99, "index": 1}}\n')
    node.write(b'{"src": "n2", "dest": "n1", "body": {"type": "hwm_peer", "frame": "bm90IGEgZnJhbWU="}}\n')
    node.write(b'{"src": "n3", "dest": "n1", "body": {"type": "hwm_peer", "frame": "%%%"}}\n')
    unknown = cluster.send("n1", {"type": "frobnicate"})
    bad_index = cluster.send("n1", {"type": "log_read", "index": "one"})
    missing_value = cluster.send("n1", {"type": "log_append"})
    assert cluster.answers[unknown]["code"] == 10
    assert cluster.answers[bad_index]["code"] == 12 and "'index'" in cluster.answers[bad_index]["text"]
    assert cluster.answers[missing_value]["code"] == 12
    not_leader = cluster.send("n1", {"type": "send", "key": "k", "msg": 1})
    assert cluster.answers[not_leader]["code"] == 11, cluster.answers[not_leader]
    log = node.stderr_text()
    for expected in ("not JSON", "not a message", "for 'n2'", "not a valid frame"):
        assert expected in log, (expected, log)
    cluster.wait_for(cluster.leader, "leader")  # still serving

    # A second node on n1's data directory: refused (error 13 to init, exit 2), n1 unharmed.
    second = NodeProcess("n1", cluster.root / "n1", "raft")
    try:
        second.request({"type": "init", "node_id": "n1", "node_ids": NODE_IDS})
        answer = json.loads(second.process.stdout.readline())["body"]
        assert answer["type"] == "error" and answer["code"] == 13 and "in use" in answer["text"], answer
        assert second.process.wait(timeout=10) == 2
    finally:
        if second.process.poll() is None:
            second.process.kill()
            second.process.wait()
    cluster.tick()
    cluster.stop()


def test_the_kafka_workload_on_one_replicated_log_and_nothing_above_the_hwm(cluster_factory):
    cluster = cluster_factory("raft")
    leader = cluster.wait_for(cluster.leader, "leader")
    offsets = {}
    for key, msg in [("k1", 10), ("k2", 20), ("k1", 11)]:
        sent = cluster.send(leader, {"type": "send", "key": key, "msg": msg})
        cluster.wait_for(lambda: sent in cluster.answers, "send_ok")
        assert cluster.answers[sent]["type"] == "send_ok", cluster.answers[sent]
        offsets[(key, msg)] = cluster.answers[sent]["offset"]
    assert offsets[("k1", 10)] < offsets[("k1", 11)]
    polled = cluster.send(leader, {"type": "poll", "offsets": {"k1": 0, "k2": 0, "k3": 0}})
    assert cluster.answers[polled]["msgs"] == {"k1": [[offsets[("k1", 10)], 10], [offsets[("k1", 11)], 11]],
                                              "k2": [[offsets[("k2", 20)], 20]], "k3": []}
    committed = cluster.send(leader, {"type": "commit_offsets", "offsets": {"k1": offsets[("k1", 11)]}})
    cluster.wait_for(lambda: committed in cluster.answers, "commit_offsets_ok")
    assert cluster.answers[committed]["type"] == "commit_offsets_ok"
    listed = cluster.send(leader, {"type": "list_committed_offsets", "keys": ["k1", "k2"]})
    assert cluster.answers[listed]["offsets"] == {"k1": offsets[("k1", 11)]}

    # A send the followers have not seen: on the leader's log, above its HWM. Not acknowledged,
    # not polled, not readable, until a quorum holds it.
    cluster.wait_for(lambda: not cluster.network and cluster.states[leader]["hwm"] == len(cluster.states[leader]["log"]),
                     "a quiet network")
    unreplicated = cluster.send(leader, {"type": "send", "key": "k1", "msg": 12})
    index = len(cluster.states[leader]["log"])
    assert cluster.states[leader]["hwm"] == index - 1
    assert unreplicated not in cluster.answers, cluster.answers[unreplicated]
    polled = cluster.send(leader, {"type": "poll", "offsets": {"k1": index}})
    assert cluster.answers[polled]["msgs"] == {"k1": []}
    read = cluster.send(leader, {"type": "log_read", "index": index})
    assert cluster.answers[read]["code"] == 20, cluster.answers[read]
    cluster.deliver_all()
    cluster.wait_for(lambda: unreplicated in cluster.answers, "send_ok")
    assert cluster.answers[unreplicated]["offset"] == index
    polled = cluster.send(leader, {"type": "poll", "offsets": {"k1": index}})
    assert cluster.answers[polled]["msgs"] == {"k1": [[index, 12]]}

    # A follower forwards a client's write to the leader, on the network like any message, and
    # relays the answer only once its own HWM covers the index: a read there next sees the write.
    follower = next(n for n in NODE_IDS if n != leader)
    via = cluster.send(follower, {"type": "send", "key": "k2", "msg": 21})
    assert via not in cluster.answers  # not refused
    assert [m["body"]["msg"] for m in cluster.network if (m["src"], m["dest"]) == (follower, leader)
            and m["body"]["type"] == "send"] == [21]
    answer = cluster.wait_for(lambda: cluster.answers.get(via), "the relayed send_ok", ticks=1)
    assert answer["type"] == "send_ok" and answer["in_reply_to"] == via[1] and answer["offset"] == index + 1, answer
    assert cluster.state_at_answer[via]["hwm"] >= index + 1
    polled = cluster.send(follower, {"type": "poll", "offsets": {"k2": index + 1}})
    assert cluster.answers[polled]["msgs"] == {"k2": [[index + 1, 21]]}
    # A forward the leader never receives (it is killed) is answered error 0: it may still commit.
    lost = cluster.send(follower, {"type": "send", "key": "k2", "msg": 22})
    cluster.kill(leader)
    answer = cluster.wait_for(lambda: cluster.answers.get(lost), "the answer to a lost forward", ticks=1)
    assert answer["code"] == 0 and f"forwarded to {leader}" in answer["text"], answer
    cluster.stop()


def test_the_real_clock_elects_and_commits_with_the_nodes_own_timers(tmp_path):
    """No hwm_tick: the nodes' own timers elect a leader; the driver only forwards lines as they come."""
    nodes = {}
    try:
        for node_id in NODE_IDS:
            data = tmp_path / node_id
            data.mkdir()
            nodes[node_id] = subprocess.Popen(
                [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--protocol", "raft"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=data,
                env=dict(os.environ, HWM_DATA_DIR=str(data), HWM_NODE_ID=node_id))
        buffers = {node_id: b"" for node_id in nodes}
        client_id = 0

        def write(node_id: str, body: dict, src: str = "c1") -> None:
            line = json.dumps({"src": src, "dest": node_id, "body": body}).encode() + b"\n"
            nodes[node_id].stdin.write(line)
            nodes[node_id].stdin.flush()

        for node_id in nodes:
            write(node_id, {"type": "init", "msg_id": 0, "node_id": node_id, "node_ids": NODE_IDS})
        acknowledged = None
        next_try = 0.0
        deadline = time.monotonic() + 20
        fds = {process.stdout.fileno(): node_id for node_id, process in nodes.items()}
        while acknowledged is None:
            assert time.monotonic() < deadline, "no log_append_ok within 20 s"
            if time.monotonic() >= next_try:  # the client tries every node in turn until one leads
                client_id += 1
                write(NODE_IDS[client_id % 3], {"type": "log_append", "msg_id": client_id, "value": "v"})
                next_try = time.monotonic() + 0.2
            ready, _, _ = select.select(list(fds), [], [], 0.05)
            for fd in ready:
                node_id = fds[fd]
                data = os.read(fd, 65536)
                assert data, f"{node_id} exited"
                buffers[node_id] += data
                *lines, buffers[node_id] = buffers[node_id].split(b"\n")
                for line in lines:
                    message = json.loads(line)
                    if message["dest"] in nodes:
                        nodes[message["dest"]].stdin.write(line + b"\n")
                        nodes[message["dest"]].stdin.flush()
                    elif message["body"]["type"] == "log_append_ok":
                        acknowledged = message["body"]["index"]
        assert acknowledged >= 1
        for process in nodes.values():
            process.send_signal(signal.SIGTERM)
        assert [process.wait(timeout=10) for process in nodes.values()] == [0, 0, 0]
    finally:
        for process in nodes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.deep
@pytest.mark.parametrize("protocol", ["raft", "zab", "kafka"])
@pytest.mark.parametrize("seed", range(5))
def test_random_schedules_of_faults_lose_no_acknowledged_entry(cluster_factory, protocol, seed):
    """A random schedule: ticks, appends and reads on any node, deliveries in any order, drops,
    duplicates, kill -9 and restart (one node down at a time). Then heal, and every acknowledged
    entry must be readable on every node with its value, and no read ever disagreed with another."""
    import random

    rng = random.Random(seed)
    cluster = cluster_factory(protocol)
    appended: dict[tuple[str, int], str] = {}  # request -> value
    reads: dict[int, object] = {}  # index -> the value first read there
    value = 0
    for _ in range(150):
        op = rng.choice(["tick", "tick", "deliver", "deliver", "deliver", "drop", "duplicate", "append", "read",
                         "kill", "restart"])
        alive = [n for n in NODE_IDS if n in cluster.nodes]
        if op == "tick":
            cluster.tick(rng.randint(1, 3)) if rng.random() < 0.3 else None
            node_id = rng.choice(alive)
            cluster.nodes[node_id].write({"src": "driver", "dest": node_id, "body": {"type": "hwm_tick"}})
            cluster.collect(cluster.nodes[node_id])
        elif op in ("deliver", "drop", "duplicate") and cluster.network:
            message = cluster.network[rng.randrange(len(cluster.network))]
            if op != "duplicate":
                cluster.network.remove(message)
            node = cluster.nodes.get(message["dest"])
            if op != "drop" and node is not None:
                node.write(message)
                cluster.collect(node)
        elif op == "append":
            value += 1
            appended[cluster.send(rng.choice(alive), {"type": "log_append", "value": f"v{value}"})] = f"v{value}"
        elif op == "read":
            node_id = rng.choice(alive)
            index = rng.randint(1, max(1, len(cluster.states[node_id]["log"])))
            answer = cluster.answers[cluster.send(node_id, {"type": "log_read", "index": index})]
            if answer["type"] == "log_read_ok":
                assert reads.setdefault(index, answer["value"]) == answer["value"], (index, reads, answer)
        elif op == "kill" and len(alive) == 3:
            cluster.kill(rng.choice(alive))
        elif op == "restart" and len(alive) < 3:
            cluster.start(next(n for n in NODE_IDS if n not in cluster.nodes))
    for node_id in NODE_IDS:
        if node_id not in cluster.nodes:
            cluster.start(node_id)
    acknowledged = {}
    for key, value in appended.items():
        answer = cluster.answers.get(key)
        if answer is not None and answer["type"] == "log_append_ok":
            assert acknowledged.setdefault(answer["index"], value) == value, (answer, acknowledged)
    for index, value in reads.items():
        if index in acknowledged:
            assert acknowledged[index] == value, (index, value, acknowledged[index])
    _append_until_acknowledged(cluster, ["last"])  # commits everything before it
    last = max(len(s["log"]) for s in cluster.states.values())
    cluster.wait_for(lambda: all(s["hwm"] >= last for s in cluster.states.values()), "every node caught up")
    for node_id in NODE_IDS:
        for index, value in {**acknowledged, **reads}.items():
            answer = cluster.answers[cluster.send(node_id, {"type": "log_read", "index": index})]
            assert answer.get("value") == value, (node_id, index, value, answer)
    cluster.stop()


@pytest.mark.parametrize("args, message", [
    (["node", "--stdio", "--id", "S1"], "--id is for the TCP runtime"),
    (["node", "--stdio", "--peers", "S2=h:1"], "--peers is for the TCP runtime"),
    (["node", "--stdio", "--protocol", "bookkeeper"], "BookKeeper's bookies run on the TCP runtime only"),
    (["node", "--listen", "h:1", "--data", "d"], "Missing option '--id' (required unless --stdio)"),
])
def test_stdio_usage_errors_exit_2(args, message):
    from click.testing import CliRunner

    from hwm.cli import main

    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and message in result.output, result.output


# ---------------------------------------------- a put whose entry another leader replaced, in process
def _line(src: str, body: dict) -> bytes:
    return json.dumps({"src": src, "dest": "n1", "body": body}).encode()


def _peer(node: StdioNode, src: str, message) -> list[bytes]:
    frame = base64.b64encode(codec.encode_payload(message)).decode("ascii")
    return node.handle_line(_line(src, {"type": PEER_TYPE, "message": type(message).__name__, "frame": frame,
                                        "link": [1, 1, 0]}))


def _leader_waiting_on_a_put(tmp_path) -> StdioNode:
    """n1 in process, no pipes: it wins generation 1 with n2's pre-vote and vote, and appends client
    c1's put at index 1, unanswered (no follower has it yet)."""
    node = StdioNode(PRESETS["raft"].protocol, clock="virtual", log=io.StringIO(), data_dir=str(tmp_path))
    node.handle_line(_line("c0", {"type": "init", "msg_id": 1, "node_id": "n1", "node_ids": NODE_IDS}))
    for _ in range(1000):  # until its election timer fires: a pre-vote request to each peer
        if any(b'"hwm_peer"' in raw for raw in node.tick()):
            break
    _peer(node, "n2", m.VoteReply(1, "n2", True, pre_vote=True))
    _peer(node, "n2", m.VoteReply(1, "n2", True))
    assert (node.replica.role, node.replica.generation) == ("leader", 1)
    assert node.handle_line(_line("c1", {"type": "log_append", "msg_id": 5, "value": "v1"})) == []
    return node


def _client_answers(out: list[bytes]) -> list[dict]:
    return [json.loads(raw)["body"] for raw in out if json.loads(raw)["dest"] == "c1"]


@pytest.mark.parametrize("payload", [b'{"append":"x"}', b'{"append":"v1"}'])  # another put; the same value
def test_a_put_whose_entry_another_leader_replaced_is_answered_not_written(tmp_path, payload):
    # n3 leads generation 2 and sends n1 its own entry 1 with its HWM 1: n1 truncates its entry 1@g1,
    # appends 1@g2 and commits it in one step, before it answers what it was waiting on. The put
    # waited on its own entry at index 1: "not written", never confirmed because some entry is
    # committed there (not even one with the same value: another client's put, or a retry, in g2).
    # tests/sim/test_dst_clients.py pins the same rule for the simulation's client sessions.
    node = _leader_waiting_on_a_put(tmp_path)
    answers = _client_answers(_peer(node, "n3", m.AppendRequest(2, "n3", 0, 0, ((2, payload),), 1)))
    assert [(a["type"], a.get("in_reply_to")) for a in answers] == [("error", 5)], answers
    assert answers[0]["text"] == "entry 1 was overwritten by the leader of generation 2; it is not in the log"


def test_a_put_whose_own_entry_commits_is_confirmed(tmp_path):
    node = _leader_waiting_on_a_put(tmp_path)
    answers = _client_answers(_peer(node, "n2", m.AppendReply(1, "n2", True, 1)))
    assert [(a["type"], a.get("in_reply_to"), a.get("index")) for a in answers] == [("log_append_ok", 5, 1)], answers


@pytest.mark.parametrize("source", ["c1", "n1"])  # a client; the node itself
def test_a_peer_message_from_no_peer_is_dropped_with_a_log_line(tmp_path, source):
    # The frame names its sender as the envelope does, so only the check of the peers refuses it.
    log = io.StringIO()
    node = StdioNode(PRESETS["raft"].protocol, clock="virtual", log=log, data_dir=str(tmp_path))
    node.handle_line(_line("c0", {"type": "init", "msg_id": 1, "node_id": "n1", "node_ids": NODE_IDS}))
    assert _peer(node, source, m.VoteRequest(5, source, 0, 0)) == []
    assert node.replica.generation == 0
    assert f"dropped a peer message from {source!r}, not one of the peers" in log.getvalue()


def test_a_follower_forwards_a_clients_write_to_its_leader_but_not_one_that_expects_no_answer(tmp_path):
    """A write with a msg_id goes on to the leader the follower knows; one without (Maelstrom's
    fire-and-forget: nobody waits for its answer) is not forwarded, and the node goes on."""
    node = StdioNode(PRESETS["raft"].protocol, clock="virtual", log=io.StringIO(), data_dir=str(tmp_path))
    node.handle_line(_line("c0", {"type": "init", "msg_id": 1, "node_id": "n1", "node_ids": NODE_IDS}))
    _peer(node, "n2", m.AppendRequest(1, "n2", 0, 0, (), 0))  # n2 leads generation 1
    assert (node.replica.role, node.replica.leader_id) == ("follower", "n2")

    def to_leader(out):
        return [json.loads(raw)["body"] for raw in out if json.loads(raw)["dest"] == "n2"
                and json.loads(raw)["body"]["type"] == "log_append"]
    assert to_leader(node.handle_line(_line("c1", {"type": "log_append", "value": "quiet"}))) == []
    [forwarded] = to_leader(node.handle_line(_line("c1", {"type": "log_append", "msg_id": 7, "value": "v"})))
    assert forwarded["value"] == "v" and "msg_id" in forwarded


def test_a_dropped_line_is_quoted_whole_up_to_its_limit_and_marked_cut_past_it():
    from hwm.impl.stdio import _excerpt
    assert _excerpt("x" * 120) == repr("x" * 120)  # exactly the limit: nothing was cut
    assert _excerpt(b"y" * 121) == repr("y" * 120 + "...")
