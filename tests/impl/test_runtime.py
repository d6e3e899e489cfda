"""The runtime and the client, in one process: nodes on an event loop in a thread, real TCP on 127.0.0.1.

What is pinned here: the client protocol (put follows the leader, get refuses above the HWM, status,
pipelined answers in order), and that malformed input of every kind (garbage, truncated, oversized,
a reply sent to a server, a peer message from a stranger, a frame that never completes) gets an
ErrorReply and a closed connection, never a crash and never a change to the log. The end-to-end
tests with real processes and kill -9 are in test_e2e.py.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import struct
import threading
import time
from contextlib import closing

import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.client import Client, ClientError, NotCommittedError, parse_address, parse_cluster
from tests.impl.ports import free_ports
from hwm.impl.runtime import Node, NodeConfig, NodeError
from hwm.properties.protocol import PRESETS


class ThreadCluster:
    """`n` nodes on one event loop in a daemon thread; stop() within a bounded time."""

    def __init__(self, tmp_path, n: int = 3, **config):
        self.addresses = {f"S{k + 1}": ("127.0.0.1", port) for k, port in enumerate(free_ports(n))}
        self.tmp_path = tmp_path
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.nodes: dict[str, Node] = {}
        for server in self.addresses:
            self.start(server)

    def call(self, coroutine, timeout: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def start(self, server: str) -> Node:
        peers = {s: a for s, a in self.addresses.items() if s != server}
        node = Node(NodeConfig(server, self.addresses[server], peers, str(self.tmp_path / server), **self.config))
        self.call(node.start())
        self.nodes[server] = node
        return node

    def stop(self, server: str) -> None:
        self.call(self.nodes.pop(server).stop())

    def client(self, **options) -> Client:
        return Client(self.addresses, **{"timeout": 10.0, **options})

    def leader(self, timeout: float = 10.0) -> str:
        with self.client(timeout=timeout) as client:
            return client.find_leader()

    def close(self) -> None:
        try:
            # All at once, so one slow stop does not eat the others' time.
            nodes, self.nodes = list(self.nodes.values()), {}
            async def stop_all():
                await asyncio.gather(*(node.stop() for node in nodes))
            self.call(stop_all(), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


@pytest.fixture
def cluster(tmp_path):
    made = ThreadCluster(tmp_path)
    yield made
    made.close()


def exchange(address, data: bytes, *, close_write: bool = False, timeout: float = 2.0) -> list:
    """Send raw bytes on a fresh connection; return the messages read until the server closes
    (then "closed" is the last item), answers something other than an ErrorReply, or `timeout`."""
    with closing(socket.create_connection(address, timeout=timeout)) as sock:
        sock.sendall(data)
        if close_write:
            sock.shutdown(socket.SHUT_WR)
        frames = codec.FrameReader()
        received: list = []
        deadline = time.monotonic() + timeout
        closed = False
        while time.monotonic() < deadline:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            received += [codec.decode(p) for p in frames.feed(chunk)]
            if any(not isinstance(r, m.ErrorReply) for r in received):
                break
        return received + (["closed"] if closed else [])


# ------------------------------------------------------------------------- no network
def test_addresses_and_cluster_strings_parse_with_errors_naming_the_part():
    assert parse_address("127.0.0.1:7001") == ("127.0.0.1", 7001)
    assert parse_address("[::1]:7001") == ("::1", 7001)
    assert parse_cluster("S1=127.0.0.1:1, S2=localhost:2") == {"S1": ("127.0.0.1", 1), "S2": ("localhost", 2)}
    with pytest.raises(ValueError, match="port 'x'"):
        parse_address("h:x")
    with pytest.raises(ValueError, match="S2 is given twice"):
        parse_cluster("S2=h:1,S2=h:2")
    with pytest.raises(ValueError, match="'S1' is not ID=HOST:PORT"):
        parse_cluster("S1")


def test_node_config_refuses_itself_as_a_peer():
    with pytest.raises(ValueError, match="lists itself"):
        NodeConfig("S1", ("127.0.0.1", 1), {"S1": ("127.0.0.1", 2)}, "/nonexistent")


@pytest.mark.parametrize("args, message", [
    (["put", "x", "--cluster", "S1"], "is not ID=HOST:PORT"),
    (["put", "x", "--data", "/nonexistent/dir"], "no /nonexistent/dir/cluster.json"),
    (["get", "--cluster", "S1=h:1"], "give an INDEX or --all"),
    (["get", "0", "--cluster", "S1=h:1"], "0 is not in the range x>=1"),
    (["node", "--id", "S1", "--listen", "nowhere", "--data", "d"], "is not HOST:PORT"),
    (["node", "--id", "S1", "--listen", "h:1", "--peers", "S1=h:2", "--data", "d"], "lists itself"),
    (["node", "--id", "S1", "--listen", "h:1", "--data", "d", "--protocol", "paxos"], "unknown protocol"),
    (["cluster", "--servers", "0"], "0 is not in the range"),
])
def test_cli_usage_errors_exit_2(args, message, tmp_path):
    result = CliRunner().invoke(main, args, env={"HWM_CLUSTER": None})
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.network
def test_no_leader_reachable_exits_1_naming_every_address_tried():
    ports = free_ports(2)
    cluster = f"S1=127.0.0.1:{ports[0]},S2=127.0.0.1:{ports[1]}"
    result = CliRunner().invoke(main, ["put", "x", "--cluster", cluster, "--timeout", "0.5"])
    assert result.exit_code == 1
    assert f"S1=127.0.0.1:{ports[0]} (connection refused)" in result.output
    assert f"S2=127.0.0.1:{ports[1]} (connection refused)" in result.output
    result = CliRunner().invoke(main, ["status", "--cluster", cluster])
    assert result.exit_code == 1 and "no server answered" in result.output


# --------------------------------------------------------------------------- cluster
@pytest.mark.network
def test_put_get_status_and_the_client_follows_the_leader_hint(cluster):
    leader = cluster.leader()
    follower = next(s for s in cluster.addresses if s != leader)
    with cluster.client() as client:
        client.leader = follower  # start at a follower: it answers with a hint, the client follows
        indexes = [client.put(f"value {k}".encode()) for k in range(20)]
        assert indexes == list(range(2, 22))  # index 1 opened the client's session
        assert client.leader == leader
        assert client.get(7) == (cluster.nodes[leader].replica.generation, b"value 5")
        with pytest.raises(NotCommittedError, match="not yet committed"):
            client.get(22)
        # The follower serves reads up to its own HWM, learnt from the next heartbeat.
        deadline = time.monotonic() + 5
        while client.status([follower])[0].reply.hwm < 21 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.get(21, server=follower)[1] == b"value 19"
        answers = {a.server: a.reply for a in client.status()}
        assert answers[leader].role == "leader" and answers[leader].hwm == 21
        assert all(r.last_index == 21 and r.leader == leader for r in answers.values())


@pytest.mark.network
def test_a_value_over_the_limit_is_refused_and_nothing_is_written(cluster):
    with cluster.client() as client:
        client.put(b"small")
        leader = cluster.addresses[client.leader]
        [reply] = exchange(leader, codec.encode(m.PutRequest(b"x" * (64 * 1024 + 1))), timeout=1)[:1]
        assert reply.index is None and reply.code == m.REFUSED
        assert reply.error.startswith("the value is 65537 bytes")
        with pytest.raises(ClientError, match="refused: the value is 65537 bytes; at most 65536"):
            client.put(b"x" * (64 * 1024 + 1))
        assert client.status([client.leader])[0].reply.last_index == 2  # the session, b"small"


@pytest.mark.network
def test_pipelined_requests_are_answered_in_order(cluster):
    leader = cluster.addresses[cluster.leader()]
    requests = [m.PutRequest(b"a"), m.StatusRequest(), m.GetRequest(1), m.PutRequest(b"b"), m.GetRequest(2)]
    with closing(socket.create_connection(leader, timeout=5)) as sock:
        sock.sendall(b"".join(codec.encode(r) for r in requests))
        frames, answers = codec.FrameReader(), []
        while len(answers) < len(requests):
            answers += [codec.decode(p) for p in frames.feed(sock.recv(65536))]
    kinds = [type(a).__name__ for a in answers]
    assert kinds == ["PutReply", "StatusReply", "GetReply", "PutReply", "GetReply"]
    assert answers[0].index == 1 and answers[3].index == 2
    # The get of 1 was handled after the put of 1 was proposed, but before it committed.
    assert answers[4].error is None or "not yet committed" in answers[4].error


MALFORMED = {
    "garbage": (struct.pack(">I", 5) + b"\x07hello", "unsupported codec version 7"),
    "unknown type": (struct.pack(">I", 2) + bytes((codec.VERSION, 0xEE)), "unknown message type 238"),
    "oversized": (struct.pack(">I", codec.MAX_FRAME_BYTES + 1), "exceeds the maximum"),
    "a reply sent to a server": (codec.encode(m.StatusReply("S1", "leader", 1, 0, 0, None)),
                                 "does not accept StatusReply"),
    "a stranger's vote request": (codec.encode(m.VoteRequest(99, "intruder", 0, 0)), "'intruder'"),
    "trailing bytes": (struct.pack(">I", 3) + bytes((codec.VERSION, 0x14, 0x00)), "1 trailing bytes"),
}


@pytest.mark.network
@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_input_gets_an_error_reply_and_the_connection_is_closed(cluster, name):
    data, expected = MALFORMED[name]
    server = cluster.leader()
    before = cluster.nodes[server].replica.generation
    received = exchange(cluster.addresses[server], data)
    assert received[-1] == "closed", name
    assert isinstance(received[0], m.ErrorReply) and expected in received[0].text, received
    assert cluster.nodes[server].replica.generation == before  # the stranger deposed nobody
    with cluster.client() as client:
        assert client.put(b"still serving") >= 1


@pytest.mark.network
def test_a_frame_that_never_completes_is_dropped_after_a_while(tmp_path):
    made = ThreadCluster(tmp_path, n=1, partial_frame_seconds=0.3)
    try:
        received = exchange(made.addresses["S1"], struct.pack(">I", 100) + b"\x01\x10", timeout=3)
        assert received[-1] == "closed"
        assert isinstance(received[0], m.ErrorReply) and "incomplete frame" in received[0].text
    finally:
        made.close()


def _fuzz_frames(rng: random.Random, count: int) -> list[tuple[bytes, bool]]:
    """(bytes to send, whether to close our side after): random, mutated, truncated, oversized."""
    stranger = "intruder"  # mutations of it never produce a real peer id, so nothing can impersonate
    templates = [
        m.PutRequest(b"fuzz"), m.GetRequest(1), m.GetRequest(10**6), m.StatusRequest(),
        m.VoteRequest(3, stranger, 5, 2), m.AppendRequest(4, stranger, 0, 0, ((1, b"x"), (4, b"y")), 2),
        m.AppendReply(2, stranger, True, 3), m.HwmQuery(1, stranger), m.VoteReply(1, stranger, True),
        m.PutReply(3), m.ErrorReply("boo"), m.GetReply(1, None, None, "no", m.NOT_COMMITTED),
    ]
    frames = []
    for _ in range(count):
        kind = rng.randrange(6)
        if kind == 0:  # random bytes behind a length prefix that matches
            payload = rng.randbytes(rng.randrange(0, 64))
            frames.append((struct.pack(">I", len(payload)) + payload, False))
        elif kind == 1:  # a valid frame with bytes flipped
            frame = bytearray(codec.encode(rng.choice(templates)))
            for _ in range(rng.randrange(1, 4)):
                position = rng.randrange(4, len(frame)) if len(frame) > 4 else 0
                frame[position] = rng.randrange(256)
            frames.append((bytes(frame), False))
        elif kind == 2:  # a valid frame cut short, then we close
            frame = codec.encode(rng.choice(templates))
            frames.append((frame[:rng.randrange(0, len(frame))], True))
        elif kind == 3:  # a payload shortened or extended, with a length prefix that agrees
            payload = codec.encode(rng.choice(templates))[4:]
            payload = payload[:rng.randrange(0, len(payload))] if rng.random() < 0.5 else payload + rng.randbytes(3)
            frames.append((struct.pack(">I", len(payload)) + payload, False))
        elif kind == 4:  # a length prefix over the maximum
            frames.append((struct.pack(">I", rng.randrange(codec.MAX_FRAME_BYTES + 1, 2**32)), False))
        else:  # pure noise, no framing at all
            frames.append((rng.randbytes(rng.randrange(1, 40)), True))
    return frames


@pytest.mark.network
def test_a_live_node_survives_500_random_and_truncated_frames_and_loses_no_entry(cluster):
    with cluster.client() as client:
        for k in range(30):
            client.put(f"before {k}".encode())
        leader = client.leader
        follower = next(s for s in cluster.addresses if s != leader)
        hwm_before = {a.server: a.reply.hwm for a in client.status()}
        log_before = [client.get(k) for k in range(1, hwm_before[leader] + 1)]
        rng = random.Random(20240601)
        answered = 0
        for data, close_write in _fuzz_frames(rng, 500):
            target = cluster.addresses[rng.choice([leader, follower])]
            for message in exchange(target, data, close_write=close_write, timeout=0.3):
                # Whatever comes back decodes; a refusal comes as an ErrorReply.
                assert message == "closed" or isinstance(message, m.CLIENT_REPLIES)
                answered += message != "closed"
        assert answered > 100
        # Every node still answers, still agrees on the leader, and holds every committed entry.
        for node in cluster.nodes.values():
            assert node.failure is None
        after = {a.server: a.reply for a in client.status()}
        assert all(reply is not None for reply in after.values())
        assert after[leader].role == "leader"
        assert after[leader].hwm >= hwm_before[leader]
        assert [client.get(k) for k in range(1, hwm_before[leader] + 1)] == log_before
        assert client.put(b"after the fuzz") > hwm_before[leader]


@pytest.mark.network
def test_a_node_refuses_to_start_on_a_taken_port(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        address = sock.getsockname()
        node = Node(NodeConfig("S1", address, {}, str(tmp_path / "S1")))
        with pytest.raises(NodeError, match=f"cannot listen on 127.0.0.1:{address[1]}"):
            asyncio.run(node.start())


@pytest.mark.network
def test_a_restarting_server_hears_every_peer_before_its_rejoin_times_out(tmp_path):
    """restart=truncate-to-leader-hwm: the HwmQuery a replica sends as it starts goes out on links
    that are still connecting, and the answers come back on links the peers must re-dial; both are
    held, not dropped, so the rejoin ends on every peer's answer, not on its timeout."""
    from hwm.properties.protocol import resolve

    made = ThreadCluster(tmp_path, protocol=resolve("raft-truncate-to-leader-hwm")[1], tick_seconds=0.1)
    try:
        with made.client() as client:
            for k in range(3):
                client.put(b"x")
            follower = next(s for s in made.addresses if s != client.leader)
        made.stop(follower)
        node = made.start(follower)
        deadline = time.monotonic() + 10  # a bound on the wait, not an assertion on speed
        while node.replica.rejoining and time.monotonic() < deadline:
            time.sleep(0.005)
        assert not node.replica.rejoining
        assert node.replica.rejoin_answered == len(made.addresses) - 1  # ended on answers, not the timeout
        assert all(link.dropped == 0 for link in node._links.values())
    finally:
        made.close()


def test_a_peer_link_stops_when_cancelled_even_as_its_connection_completes(monkeypatch):
    """stop() cancels the peer links and waits for them. A cancellation that arrives in the same
    loop iteration as a completed connection must still end the link (asyncio.wait_for on 3.11
    swallowed it, and the link kept reading: the intermittent teardown hang)."""
    from types import SimpleNamespace
    from hwm.impl.runtime import _PeerLink

    class Reader:
        async def read(self, size):
            await asyncio.get_running_loop().create_future()  # a peer that never speaks

    class Writer:
        def write(self, data): pass
        def close(self): pass
        def is_closing(self): return False

    async def connected(*address):
        return Reader(), Writer()

    monkeypatch.setattr(asyncio, "open_connection", connected)

    async def scenario() -> list[int]:
        survived = []
        for steps in range(8):  # cancel after 0..7 loop iterations: one lands on the completion
            link = _PeerLink(SimpleNamespace(server_id="S1", _stopping=False), "S2", ("127.0.0.1", 1))
            task = asyncio.create_task(link.run())
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=1.0)
            if not done:
                survived.append(steps)
                task.cancel()
        return survived

    assert asyncio.run(scenario()) == []


@pytest.mark.network
def test_a_full_disk_stops_the_node_unacknowledged_and_it_restarts_from_what_is_durable(tmp_path):
    import errno
    from tests.impl.diskfaults import faulty_disk

    made = ThreadCluster(tmp_path, n=1)  # a cluster of one commits alone
    try:
        with made.client(timeout=3) as client:
            assert [client.put(f"v{k}".encode()) for k in range(3)] == [2, 3, 4]  # 1: the session
            with faulty_disk(1, OSError(errno.ENOSPC, "No space left on device")):
                with pytest.raises(ClientError):
                    client.put(b"never acknowledged")
                node = made.nodes["S1"]
                made.call(node.stopped())
            assert "No space left on device" in str(node.failure)
        made.nodes.clear()
        made.start("S1")  # the directory loads: nothing durable was damaged
        with made.client() as client:
            assert client.put(b"after") >= 6  # (raft commits older entries through a new one)
            assert [client.get(k)[1] for k in (2, 3, 4)] == [b"v0", b"v1", b"v2"]
    finally:
        made.close()


@pytest.mark.network
def test_a_retried_put_with_the_same_request_id_is_applied_once(cluster):
    leader = cluster.addresses[cluster.leader()]
    opened = exchange(leader, codec.encode(m.RegisterClient("client-1")), timeout=5)[0]
    assert opened.index is not None, opened
    request = m.PutRequest(b"once", "client-1", 7)
    first = exchange(leader, codec.encode(request), timeout=5)[0]
    again = exchange(leader, codec.encode(request), timeout=5)[0]
    other = exchange(leader, codec.encode(m.PutRequest(b"once", "client-1", 8)), timeout=5)[0]
    assert first.index is not None and again.index == first.index
    assert other.index == first.index + 1  # a new request id is a new put
    with cluster.client() as client:
        assert client.get(first.index)[1] == b"once"
        assert client.status([client.find_leader()])[0].reply.last_index == other.index
    # Only the latest request of a session is kept: an older one cannot be told, and is refused.
    stale = exchange(leader, codec.encode(request), timeout=5)[0]
    assert stale.index is None and stale.code == m.SESSION_EXPIRED
    assert "older than its latest applied request 8" in stale.error
    # A put of a client that never opened a session is refused, and nothing is written.
    unknown = exchange(leader, codec.encode(m.PutRequest(b"who?", "stranger", 3)), timeout=5)[0]
    assert unknown.code == m.SESSION_EXPIRED and "client stranger has no session" in unknown.error
    with cluster.client() as client:
        assert client.status([client.find_leader()])[0].reply.last_index == other.index


def session_tables(cluster, until_applied: int, timeout: float = 10.0) -> dict:
    """Every node's session table (least recently used first), once each applied `until_applied`."""
    deadline = time.monotonic() + timeout
    while any(node.sessions.applied < until_applied for node in cluster.nodes.values()):
        assert time.monotonic() < deadline, {s: n.sessions.applied for s, n in cluster.nodes.items()}
        time.sleep(0.02)
    return {server: list(node.sessions.latest.items()) for server, node in cluster.nodes.items()}


@pytest.mark.network
def test_sessions_stay_within_their_bound_every_replica_evicts_the_same_and_an_evicted_client_is_told(tmp_path):
    made = ThreadCluster(tmp_path, max_sessions=3)
    try:
        clients = [made.client(client_id=f"c{k}") for k in range(8)]
        last = 0
        for round_ in range(2):
            for k, client in enumerate(clients):
                last = client.put(f"c{k} value {round_}".encode())
        # A retried put of a live session is answered with its index, not written again.
        latest = made.nodes[made.leader()].sessions.latest
        assert list(latest) == ["c5", "c6", "c7"]  # the most recently used three, in log order
        retry = exchange(made.addresses[clients[7].leader], codec.encode(
            m.PutRequest(b"c7 value 1", "c7", latest["c7"][0])), timeout=5)[0]
        assert retry.index == last == latest["c7"][1]
        # Every replica applied the same log to the same bounded table.
        tables = session_tables(made, last)
        assert all(len(table) == 3 for table in tables.values())
        assert len({tuple(table) for table in tables.values()}) == 1, tables
        assert all(node.sessions.evicted > 0 for node in made.nodes.values())
        # c0's session was evicted: a retry of its latest put is refused, not written again ...
        leader = made.addresses[made.leader()]
        refused = exchange(leader, codec.encode(m.PutRequest(b"c0 value 1", "c0", 2)), timeout=5)[0]
        assert refused.code == m.SESSION_EXPIRED and "evicted" in refused.error, refused
        # ... and the client itself opens a new session and writes its next value there.
        index = clients[0].put(b"c0 value 2")
        assert clients[0].get(index)[1] == b"c0 value 2"
        tables = session_tables(made, index)
        assert len({tuple(table) for table in tables.values()}) == 1
        assert list(dict(tables["S1"])) == ["c6", "c7", "c0"]
        for client in clients:
            client.close()
    finally:
        made.close()


@pytest.mark.network
def test_a_server_that_accepts_and_never_answers_does_not_block_a_put(cluster):
    """A paused server (SIGSTOP) still completes TCP handshakes from its backlog and then says
    nothing. The client leaves it after attempt_timeout and the put goes to the leader."""
    with closing(socket.socket()) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        servers = {"S0": silent.getsockname(), **cluster.addresses}
        with Client(servers, timeout=20, attempt_timeout=0.5) as client:
            client.leader = "S0"  # the last leader it knew is the paused one
            index = client.put(b"past the silent one")
            assert client.leader in cluster.addresses
            assert client.get(index)[1] == b"past the silent one"


@pytest.mark.network
def test_a_put_that_cannot_open_its_session_says_the_value_was_not_written():
    """The registration's outcome is unknown (the only server never answers), the value's is not:
    it was never sent."""
    from hwm.impl.client import NoLeaderError, UnknownOutcomeError

    with closing(socket.socket()) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        with Client({"S0": silent.getsockname()}, timeout=1.0, attempt_timeout=0.3) as client:
            with pytest.raises(NoLeaderError, match="the value was not written: cannot open a session") as caught:
                client.put(b"never sent")
            assert not isinstance(caught.value, UnknownOutcomeError)


@pytest.mark.network
def test_a_retry_of_an_uncommitted_entry_from_an_earlier_generation_commits_it(tmp_path):
    """Every server's log ends with a put (client c, request 5) of generation 1 that was never
    committed; the old leader is gone. When the client retries it on the new leader and nobody else
    writes, the leader must write an entry of its own generation (a no-op): under raft's commit rule
    nothing else would ever commit the retried entry."""
    from hwm.impl.runtime import encode_entry
    from hwm.impl.storage import DiskStorage

    for server in ("S1", "S2", "S3"):
        storage = DiskStorage(tmp_path / server)
        storage.load()
        storage.save_metadata(1, None, 0)
        storage.append([(1, 1, encode_entry(b"a")), (2, 1, encode_entry(b"retried", "c", 5))])
        storage.close()
    made = ThreadCluster(tmp_path)
    try:
        leader = made.addresses[made.leader()]
        [reply] = exchange(leader, codec.encode(m.PutRequest(b"retried", "c", 5)), timeout=5)[:1]
        assert reply.index == 2, reply
        with made.client() as client:
            assert client.get(2)[1] == b"retried"
            assert client.get(3)[1] == b""  # the no-op
    finally:
        made.close()


@pytest.mark.network
def test_a_long_committed_log_is_applied_to_the_sessions_in_batches_with_the_same_result(tmp_path, monkeypatch):
    """A restarted node learns a HWM tens of thousands of entries ahead: it applies them a batch per
    turn of its driver (ticks and heartbeats in between), and ends with the table a single pass over
    the log gives; a retried put whose entry is not applied yet is still found."""
    import hwm.impl.runtime as runtime
    from hwm.impl.runtime import decode_entry, encode_entry
    from hwm.impl.sessions import REGISTRATION, Sessions
    from hwm.impl.storage import DiskStorage

    monkeypatch.setattr(runtime, "APPLY_BATCH", 7)
    log = []
    for k in range(20):
        log.append(encode_entry(b"", f"c{k % 6}", REGISTRATION) if k < 6 else
                   encode_entry(f"v{k}".encode(), f"c{k % 6}", k))
    storage = DiskStorage(tmp_path / "S1")
    storage.load()
    storage.save_metadata(1, None, 0)
    storage.append([(i, 1, payload) for i, payload in enumerate(log, start=1)])
    storage.close()
    made = ThreadCluster(tmp_path, n=1, max_sessions=4)
    try:
        node = made.nodes["S1"]
        made.leader()
        assert node.sessions.applied == 0  # HWM 0 after a restart: nothing is committed yet
        # c1's latest request (19) is in the log, not applied: the retry is answered, not rewritten.
        [reply] = exchange(made.addresses["S1"], codec.encode(m.PutRequest(b"v19", "c1", 19)), timeout=5)[:1]
        assert reply.index == 20, reply
        deadline = time.monotonic() + 5
        while node.sessions.applied < node.replica.hwm and time.monotonic() < deadline:
            time.sleep(0.01)
        expected = Sessions(4)
        for index in range(1, node.replica.hwm + 1):
            expected.apply(index, decode_entry(node.replica.entry(index)[1])[1])
        assert list(node.sessions.latest.items()) == list(expected.latest.items())
        assert node.replica.last_index == 21  # the retry wrote nothing; 21 is the leader's no-op
    finally:
        made.close()


def test_a_prospective_zab_leader_refuses_to_open_a_session_and_keeps_serving(tmp_path, monkeypatch):
    """ZAB's new leader takes no write until a quorum acknowledged its NEWLEADER: opening a session
    is a write too. (A RegisterClient reaching a prospective leader used to stop the node.)"""
    from hwm.impl.zab import ZabReplica

    made = ThreadCluster(tmp_path, n=1, protocol=PRESETS["zab"].protocol)
    try:
        address = made.addresses[made.leader()]  # one server: established at once
        monkeypatch.setattr(ZabReplica, "prospective", property(lambda self: True))
        refused = exchange(address, codec.encode(m.RegisterClient("client-1")), timeout=5)[0]
        assert refused.index is None and refused.code == m.NOT_LEADER, refused
        assert "prospective leader" in refused.error
        monkeypatch.undo()
        opened = exchange(address, codec.encode(m.RegisterClient("client-1")), timeout=5)[0]
        assert opened.index is not None, opened  # still serving, and nothing was written before
    finally:
        made.close()


@pytest.mark.network
def test_a_connection_serves_request_after_request_and_nothing_after_a_refused_frame(caplog, tmp_path):
    # A node that stopped reading a connection after its first frames would pass every other test
    # (the client reconnects and retries); a put behind a refused frame is not written; and the log
    # line of a pre-vote names the generation asked for, the next one (docs/mutation.md).
    caplog.set_level(logging.INFO, logger="hwm.node")
    made = ThreadCluster(tmp_path)
    try:
        leader = made.addresses[made.leader()]
        with closing(socket.create_connection(leader, timeout=5)) as sock:
            frames = codec.FrameReader()
            for _ in range(3):
                sock.sendall(codec.encode(m.StatusRequest()))
                answers: list = []
                while not answers:
                    chunk = sock.recv(65536)
                    assert chunk, "the node closed a connection that had asked for nothing wrong"
                    answers += [codec.decode(p) for p in frames.feed(chunk)]
                assert [type(a).__name__ for a in answers] == ["StatusReply"]
        before = answers[0].last_index
        refused = m.StatusReply("S1", "leader", 1, 0, 0, None)  # a reply sent to a server
        received = exchange(leader, codec.encode(refused) + codec.encode(m.PutRequest(b"after the refusal")))
        assert [type(r).__name__ for r in received[:1]] == ["ErrorReply"] and "PutReply" not in map(
            lambda r: type(r).__name__, received), received
        time.sleep(0.3)  # a put that was taken would be in the leader's log by now
        status = exchange(leader, codec.encode(m.StatusRequest()))[0]
        assert status.last_index == before, "the node wrote a put that followed a frame it refused"
    finally:
        made.close()
    asked = [r.getMessage() for r in caplog.records if "asking for pre-votes" in r.getMessage()]
    assert asked and " for generation 1 (" in asked[0], asked


def test_a_peer_link_to_a_peer_that_refuses_waits_between_attempts(monkeypatch):
    """The link backs off between connection attempts (a link that did not wait dialled a down peer
    thousands of times a second and passed the suite: docs/mutation.md)."""
    from types import SimpleNamespace
    from hwm.impl.runtime import RECONNECT_SECONDS, _PeerLink

    attempts: list[float] = []

    async def refused(*address):
        attempts.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0)
        raise ConnectionRefusedError(111, "refused")

    monkeypatch.setattr(asyncio, "open_connection", refused)

    async def scenario() -> None:
        link = _PeerLink(SimpleNamespace(server_id="S1", _stopping=False), "S2", ("127.0.0.1", 1))
        started = asyncio.get_running_loop().time()
        task = asyncio.create_task(link.run())
        await asyncio.sleep(6 * RECONNECT_SECONDS[0])
        elapsed = asyncio.get_running_loop().time() - started
        # Every pause is at least half the first one: a bound that a slow machine cannot break.
        most = 1 + elapsed / (0.5 * RECONNECT_SECONDS[0])
        assert 2 <= len(attempts) <= most, f"{len(attempts)} attempts in {elapsed:.3f} s"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


@pytest.mark.parametrize("during_attempt", [False, True], ids=["while-waiting", "during-an-attempt"])
def test_a_kick_ends_a_peer_links_wait_even_when_it_lands_during_an_attempt(monkeypatch, during_attempt):
    """A kick (the peer just spoke to us) ends the wait between attempts at once, also when it lands
    while an attempt is under way and that attempt then fails: the pause that follows must not swallow
    it (it did, and a machine busy enough to land the kick there failed CI). The pauses here are 30 s,
    so only the kick can bring the next attempt within the test's bound."""
    from types import SimpleNamespace
    from hwm.impl import runtime
    from hwm.impl.runtime import _PeerLink

    monkeypatch.setattr(runtime, "RECONNECT_SECONDS", (30.0, 30.0))
    attempts: list[asyncio.Event] = []

    async def refused(*address):
        release = asyncio.Event()
        attempts.append(release)
        if during_attempt and len(attempts) == 1:
            await release.wait()  # held until the test has kicked
        raise ConnectionRefusedError(111, "refused")

    monkeypatch.setattr(asyncio, "open_connection", refused)

    async def until(condition, seconds: float = 5.0) -> bool:
        deadline = asyncio.get_running_loop().time() + seconds
        while not condition() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.001)
        return condition()

    async def scenario() -> None:
        link = _PeerLink(SimpleNamespace(server_id="S1", _stopping=False), "S2", ("127.0.0.1", 1))
        task = asyncio.create_task(link.run())
        assert await until(lambda: len(attempts) == 1)
        if during_attempt:
            link.kick()
            attempts[0].set()
        else:
            await asyncio.sleep(0.05)  # the link is in its 15-45 s pause now
            assert len(attempts) == 1
            link.kick()
        assert await until(lambda: len(attempts) == 2), "a kick did not end the wait"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


@pytest.mark.network
def test_a_follower_refuses_a_session_and_answers_the_next_request_on_the_same_connection(cluster):
    leader = cluster.leader()
    follower = cluster.addresses[next(name for name in cluster.addresses if name != leader)]
    requests = [m.RegisterClient("c1"), m.StatusRequest()]
    with closing(socket.create_connection(follower, timeout=5)) as sock:
        sock.sendall(b"".join(codec.encode(r) for r in requests))
        frames, answers = codec.FrameReader(), []
        deadline = time.monotonic() + 5
        while len(answers) < len(requests) and time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break  # closed: the refusal must not close the connection
            answers += [codec.decode(p) for p in frames.feed(chunk)]
    assert [type(a).__name__ for a in answers] == ["PutReply", "StatusReply"], answers
    assert answers[0].code == m.NOT_LEADER and answers[0].leader == leader
