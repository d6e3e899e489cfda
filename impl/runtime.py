"""The runtime: one replica per process, asyncio TCP between processes, a client protocol.

A `Node` owns a `Replica` (the sans-IO core, `impl.core`) and a `DiskStorage`. One task, the
*driver*, is the only code that touches either; everything else hands it work through an inbox:

    read frames (peers, clients) ──► inbox ──► driver: step / propose / read / tick the replica
                                                  │
                                                  ▼  ready()
                         persist (truncate, append, sync, metadata) in a worker thread
                                                  │   then, and only then:
                                                  ▼
                         send peer messages, answer clients, confirm committed puts

The driver takes everything that arrived while the previous batch was being fsynced and handles it
as one batch, so many writes share one fsync (group commit) without any timer. Time is `tick()`
every `tick_seconds`; the randomized election timeouts are the core's, counted in ticks.

Connections. Every node listens on one address for peers and clients alike. A node sends to a peer
over a connection it dials itself (reconnecting with backoff, dropping messages while the peer is
down: the core tolerates loss, the leader's heartbeats resend) and receives from a peer on the
connection the peer dialled. Peer messages carry their sender's id; a message from an id that is not
a peer is refused. Peer messages are not authenticated: the cluster trusts its network.

Kafka's brokers (a protocol of system kafka) run `impl.kafka.KafkaReplica` with the same driver,
storage and client protocol: they also dial the partition's controller (`NodeConfig.controller`,
`impl.controller`) and take Kafka's frames (`LeaderAndIsr`, fetches ...) as peer messages, those
without a sender field as the controller's; the ticks drive the fetcher and the ISR.

Clients send `PutRequest`, `GetRequest`, `StatusRequest`, `RegisterClient` and may pipeline them on one connection;
answers come back in request order. A put is answered when its entry is at or below the HWM
(committed), or with an error whose first words say whether it was written (see `impl.client`).
Every answer is sent after the batch it was computed in is durable.

Malformed input (garbage, a bad version or type, a frame longer than the codec's maximum, a reply
sent to a server) gets an `ErrorReply` naming the problem and the connection is closed; nothing of
it reaches the replica or the log. A partial frame left waiting longer than `partial_frame_seconds`
is treated the same way. Storage failures are fatal (fail-stop): a node that cannot make its state
durable stops rather than acknowledge what it may forget.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from collections import Counter, deque
from dataclasses import dataclass
from typing import Callable, Mapping

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.client import Address, format_address
from hwm.impl.core import Entry, NotCommitted, Replica, ReplicaError, persist
from hwm.impl.sessions import DEFAULT_MAX_SESSIONS, REGISTRATION, Sessions
from hwm.impl.storage import DataDirectoryInUse, DiskStorage, StorageError
from hwm.properties.protocol import RAFT, Protocol
from hwm.properties.rules import HookError

__all__ = ["DataDirectoryBusy", "Node", "NodeConfig", "NodeError", "run_node"]

log = logging.getLogger("hwm.node")

# A value is at most this big; an append carries at most MAX_APPEND_BYTES of entries (or one
# entry), well under the codec's frame limit, and at most MAX_IN_FLIGHT appends wait for an answer
# per follower: catching up costs one append per batch, however long the log.
MAX_VALUE_BYTES = 64 * 1024
MAX_APPEND_BYTES = 1024 * 1024
MAX_IN_FLIGHT = 4
# Per connection: answers owed before we stop reading its requests; bytes buffered before we give
# up on a reader that does not read.
MAX_OWED_ANSWERS = 256
MAX_WRITE_BUFFER = 32 * 1024 * 1024
MAX_CONNECTIONS = 256
MAX_BACKLOG = 256  # peer messages held while a connection to that peer is being made
RECONNECT_SECONDS = (0.01, 0.1)  # first and longest pause between attempts to reach a peer
MAX_CATCH_UP_TICKS = 50  # after a stall (a slow fsync, a suspended process) run at most this many
# Committed entries applied to the session table per turn of the driver: a HWM that jumps by tens of
# thousands (a restart) is applied over several turns, with ticks (heartbeats) in between, instead of
# stalling the node for longer than an election timeout. Lookups see the rest as not yet applied.
APPLY_BATCH = 2000


# ------------------------------------------------------------------------- entries
# An entry's payload is the client's value behind one tag byte: PLAIN, or NAMED followed by the
# client id (1-byte length + UTF-8) and the request id (8 bytes, big-endian), so that any server
# that becomes leader finds in its log which requests it already holds (a retried put is applied
# once; `impl.sessions`). A registration is NAMED with request id 0 and an empty value. A payload
# with another first byte is a value as is (the no-op entry is empty).
PLAIN, NAMED = b"\x00", b"\x01"


def encode_entry(value: bytes, client: str | None = None, request: int = 0) -> bytes:
    if client is None:
        return PLAIN + value
    name = client.encode("utf-8")
    return NAMED + bytes((len(name),)) + name + request.to_bytes(8, "big") + value


def decode_entry(payload: bytes) -> tuple[bytes, tuple[str, int] | None]:
    """(value, (client, request) or None) of an entry's payload."""
    if payload[:1] == PLAIN:
        return payload[1:], None
    if payload[:1] == NAMED and len(payload) >= 2:
        end = 2 + payload[1]
        if len(payload) >= end + 8:
            try:
                client = payload[2:end].decode("utf-8")
            except UnicodeDecodeError:
                return payload, None
            return payload[end + 8:], (client, int.from_bytes(payload[end:end + 8], "big"))
    return payload, None


class NodeError(Exception):
    """The node cannot start or had to stop; the text says why (file, address ...)."""

    usage = False  # True when the fix is in how the node was started (exit 2), not in its files


class DataDirectoryBusy(NodeError):
    """Another server holds the data directory's lock."""

    usage = True


@dataclass(frozen=True)
class NodeConfig:
    server_id: str
    listen: Address
    peers: Mapping[str, Address]
    data_dir: str
    protocol: Protocol = RAFT
    tick_seconds: float = 0.01
    # 300-600 ms election timeouts, 50 ms heartbeats: far above an fsync and a loopback round trip
    # even on a busy machine, so leaders are not deposed by a slow disk.
    election_ticks: tuple[int, int] = (30, 60)
    heartbeat_ticks: int = 5
    max_append_entries: int | None = None
    max_append_bytes: int = MAX_APPEND_BYTES
    max_in_flight: int = MAX_IN_FLIGHT
    max_value_bytes: int = MAX_VALUE_BYTES
    put_timeout: float = 10.0
    max_sessions: int = DEFAULT_MAX_SESSIONS  # client sessions kept; the same on every server
    partial_frame_seconds: float = 10.0
    rng_seed: int | None = None  # None: a fresh random seed per start
    # Kafka (impl/kafka.py): where the partition's controller listens (`hwm controller`), and the
    # follower lag after which the leader drops a follower from the ISR (replica.lag.time.max.ms).
    controller: Address | None = None
    replica_lag_ticks: int = 30
    # Where this server records its part of the run as hwm-events/1 (impl/recorder.py), or None.
    record: str | None = None

    def __post_init__(self) -> None:
        m.check_server_id(self.server_id, "server_id")
        for peer in self.peers:
            m.check_server_id(peer, "peers")
        if self.server_id in self.peers:
            raise ValueError(f"peers: {self.server_id} lists itself; peers are the other servers")
        if not isinstance(self.protocol, Protocol):
            raise TypeError(f"protocol: expected a Protocol, got {type(self.protocol).__name__}")
        if not self.tick_seconds > 0:
            raise ValueError(f"tick_seconds must be > 0, got {self.tick_seconds!r}")
        if self.protocol.system == "kafka" and self.controller is None:
            raise ValueError("a Kafka broker needs its controller's address (--controller HOST:PORT, where "
                             "`hwm controller` listens): the controller elects the leaders")
        if self.protocol.system != "kafka" and self.controller is not None:
            raise ValueError(f"--controller is for Kafka brokers; the {self.protocol.system} replicas elect "
                             "their leaders themselves")


# ---------------------------------------------------------------------- connections
class _Connection:
    """An accepted connection: answers go out in the order the requests came in."""

    def __init__(self, writer: asyncio.StreamWriter, name: str):
        self.writer = writer
        self.name = name
        self._owed: deque[list] = deque()  # [answer or None, close after it]
        self.closed = False
        self.done = asyncio.Event()  # set when closed
        self.room = asyncio.Event()  # set while fewer than MAX_OWED_ANSWERS are owed
        self.room.set()

    def reserve(self) -> list:
        slot: list = [None, False]
        self._owed.append(slot)
        if len(self._owed) >= MAX_OWED_ANSWERS:
            self.room.clear()
        return slot

    def answer(self, slot: list, message: m.Message, close: bool = False) -> None:
        slot[0], slot[1] = message, close
        self._pump()

    def refuse(self, text: str) -> None:
        """Queue an ErrorReply after what is owed, then close."""
        self.answer(self.reserve(), m.ErrorReply(text), close=True)

    @property
    def owed(self) -> int:
        return len(self._owed)

    def _pump(self) -> None:
        while self._owed and self._owed[0][0] is not None:
            message, close = self._owed.popleft()
            if self.closed:
                continue
            try:
                self.writer.write(codec.encode(message))
            except (codec.CodecError, RuntimeError, OSError) as error:
                log.warning("cannot answer %s: %s", self.name, error)
                self.close()
                continue
            if self.writer.transport.get_write_buffer_size() > MAX_WRITE_BUFFER:
                log.warning("%s does not read its answers; closing", self.name)
                self.close()
            elif close:
                self.close()
        if len(self._owed) < MAX_OWED_ANSWERS:
            self.room.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()
            self.done.set()
            self.room.set()


class _PeerLink:
    """The connection this node dials to one peer, used only to send to it."""

    def __init__(self, node: "Node", peer: str, address: Address):
        self.node = node
        self.peer = peer
        self.address = address
        self.writer: asyncio.StreamWriter | None = None
        self.dropped = 0
        self.task: asyncio.Task | None = None
        self._kick = asyncio.Event()
        # Messages sent while a connection attempt is under way wait for its outcome (a restarting
        # server's first HwmQuery is sent before its links are up); between attempts they are dropped.
        self._connecting = True
        self._backlog: list[bytes] = []
        # Called with the peer's id when a connection is made and when it is lost (Kafka's
        # controller takes the connection to a broker for its session: impl/controller.py).
        self.on_up: Callable[[str], None] | None = None
        self.on_down: Callable[[str], None] | None = None

    def kick(self) -> None:
        """The peer is alive (it just sent us something): reconnect now, and hold what we send it
        meanwhile (our answer to what it sent) until the attempt succeeds or fails."""
        if self.writer is None:
            self._connecting = True
            self._kick.set()

    async def _pause(self, seconds: float) -> None:
        # The kick is cleared when an attempt starts (run), not here: a kick that lands during a
        # failing attempt still ends the pause that follows it.
        try:
            async with asyncio.timeout(seconds):
                await self._kick.wait()
        except TimeoutError:
            pass

    def send(self, message: m.PeerMessage) -> None:
        writer = self.writer
        if writer is None or writer.is_closing():
            if self._connecting and writer is None and len(self._backlog) < MAX_BACKLOG:
                self._backlog.append(self._encode(message))
            else:
                self.dropped += 1
            return
        if writer.transport.get_write_buffer_size() > MAX_WRITE_BUFFER:
            self.dropped += 1  # the peer is not keeping up; the leader will resend
            return
        writer.write(self._encode(message))

    def _encode(self, message: m.PeerMessage) -> bytes:
        try:
            return codec.encode(message)
        except codec.CodecError as error:
            log.error("%s: cannot send %s to %s: %s", self.node.server_id, type(message).__name__,
                      self.peer, error)
            return b""

    async def run(self) -> None:
        # Retry often: a restarted follower must hear the leader before its election timer fires,
        # or it campaigns and deposes a healthy leader (the core has no pre-vote).
        backoff = RECONNECT_SECONDS[0]
        lost = False
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation that
        # arrives as the connection completes, and the link then outlives stop().
        while not self.node._stopping:
            self._connecting = True
            self._kick.clear()
            try:
                async with asyncio.timeout(1.0):
                    reader, writer = await asyncio.open_connection(*self.address)
            except (OSError, TimeoutError) as error:
                self._connecting = False
                self.dropped += len(self._backlog)
                self._backlog.clear()
                if not lost:
                    log.info("%s: cannot reach %s at %s (%s); retrying", self.node.server_id, self.peer,
                             format_address(self.address), _reason(error))
                    lost = True
                await self._pause(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, RECONNECT_SECONDS[1])
                continue
            backoff = RECONNECT_SECONDS[0]
            lost = False
            self._connecting = False
            self.writer = writer
            if self._backlog:
                writer.write(b"".join(self._backlog))
                self._backlog.clear()
            if self.on_up is not None:
                self.on_up(self.peer)
            log.info("%s: connected to %s at %s", self.node.server_id, self.peer, format_address(self.address))
            try:
                frames = codec.FrameReader()
                while True:
                    data = await reader.read(65536)
                    if not data:
                        break
                    # Peers never answer on this connection, except to refuse something.
                    for payload in frames.feed(data):
                        try:
                            message = codec.decode(payload)
                        except codec.CodecError as error:
                            message = error
                        log.warning("%s: %s answered on the peer connection: %s", self.node.server_id,
                                    self.peer, message)
            except (OSError, codec.CodecError):
                pass
            finally:
                self.writer = None
                writer.close()
            log.info("%s: lost the connection to %s", self.node.server_id, self.peer)
            if self.on_down is not None and not self.node._stopping:
                self.on_down(self.peer)
            lost = True
            await self._pause(backoff)


def _sender(message: m.PeerMessage | m.KafkaMessage) -> str:
    """The server (or Kafka's controller) that sent a peer message."""
    field = m.KAFKA_SENDER_FIELD.get(type(message), "")
    if field == "":
        return m.sender(message)
    if field is None:
        from hwm.impl.kafka import CONTROLLER

        return CONTROLLER
    return getattr(message, field)


def _reason(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


@dataclass
class _PendingPut:
    generation: int
    value: bytes
    connection: _Connection
    slot: list
    deadline: float
    index: int
    done: bool = False


@dataclass
class _Stats:
    batches: int = 0  # Ready batches handed out
    persists: int = 0  # of which made something durable (one fsync each, at most)
    puts: int = 0
    refused_frames: int = 0


# --------------------------------------------------------------------------- the node
class Node:
    """One server. `await start()`, then `await stopped()` (or `await stop()`)."""

    def __init__(self, config: NodeConfig, storage: DiskStorage | None = None):
        self.config = config
        self.server_id = config.server_id
        self.replica: Replica | None = None
        # `storage`: for a simulation (bridge.dst), the same DiskStorage on a simulated disk.
        self.storage = storage if storage is not None else DiskStorage(
            config.data_dir, owner=f"server {config.server_id} listening on {format_address(config.listen)}")
        self._replica_class, self._persist = Replica, persist
        if config.protocol.system == "zab":
            # ZAB's replica, and its currentEpoch file next to the log (impl/zab.py).
            from hwm.impl import zab

            self.storage = zab.EpochStorage(self.storage, config.data_dir)
            self._replica_class, self._persist = zab.ZabReplica, zab.persist
        self._replica_options: dict = {}
        if config.protocol.system == "kafka":
            # Kafka's broker: the controller elects; time drives the fetcher and the ISR (impl/kafka.py).
            from hwm.impl.kafka import KafkaReplica

            self._replica_class = KafkaReplica
            self._replica_options = {"replica_lag_ticks": config.replica_lag_ticks}
        self.stats = _Stats()
        self.failure: BaseException | None = None  # why the node stopped itself, if it did
        self._server: asyncio.AbstractServer | None = None
        self._links: dict[str, _PeerLink] = {}
        self._inbox: list[tuple] = []
        self._wake: asyncio.Event | None = None
        self._answers: list[tuple[_Connection, list, m.Message, bool]] = []
        self._pending: dict[int, list[_PendingPut]] = {}
        self._pending_by_deadline: deque[_PendingPut] = deque()
        # Client sessions, from the committed entries applied in log order; and (client, request)
        # -> index for the named entries above them, not yet applied (a lookup checks the entry
        # is still there: a truncation may have removed it). Both are bounded: the sessions by
        # max_sessions, the rest by the log's uncommitted suffix.
        self.sessions = Sessions(config.max_sessions)
        self._unapplied: dict[tuple[str, int], int] = {}
        self._unapplied_clients: Counter[str] = Counter()  # clients with entries in _unapplied
        self._connections: set[_Connection] = set()
        self._tasks: list[asyncio.Task] = []
        self._driver: asyncio.Task | None = None
        self._stopping = False
        self._stopped: asyncio.Event | None = None
        self._shown: tuple | None = None
        self.recorder = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def address(self) -> Address:
        """Where the node listens (the real port when the configured one was 0)."""
        if self._server is None:
            return self.config.listen
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    async def start(self) -> None:
        """Recover from storage and listen. NodeError if the log is damaged or the port taken."""
        config = self.config
        try:
            durable = await asyncio.to_thread(self.storage.load)
        except DataDirectoryInUse as error:
            raise DataDirectoryBusy(f"{self.server_id}: cannot start: {error}") from None
        except StorageError as error:
            raise NodeError(f"{self.server_id}: cannot start from {config.data_dir}: {error}") from None
        except OSError as error:
            raise NodeError(f"{self.server_id}: cannot open {config.data_dir}: {error}") from None
        seed = config.rng_seed if config.rng_seed is not None else int.from_bytes(os.urandom(4), "big")
        try:
            self.replica = self._replica_class(
                self.server_id, tuple(config.peers), config.protocol, durable,
                election_ticks=config.election_ticks, heartbeat_ticks=config.heartbeat_ticks,
                rng_seed=seed, max_append_entries=config.max_append_entries,
                max_append_bytes=config.max_append_bytes, max_in_flight=config.max_in_flight,
                **self._replica_options)
        except (ValueError, ReplicaError) as error:
            self.storage.close()
            raise NodeError(f"{self.server_id}: cannot start from {config.data_dir}: {error}") from None
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        try:
            self._server = await asyncio.start_server(self._serve, *config.listen, reuse_address=True)
        except OSError as error:
            self.storage.close()
            raise NodeError(f"{self.server_id}: cannot listen on {format_address(config.listen)}: "
                            f"{_reason(error)}") from None
        for index, (_, payload) in enumerate(durable.log, start=1):
            self._remember(index, payload)
        if config.record is not None:
            from hwm.impl.recorder import Recorder

            try:
                self.recorder = Recorder(config.record, self.server_id, [self.server_id, *config.peers],
                                         _protocol_name(config.protocol))
            except OSError as error:  # the command line checked the path; this is what changed since
                self._server.close()
                self.storage.close()
                failure = NodeError(f"{self.server_id}: cannot record to {config.record}: {_reason(error)}")
                failure.usage = True  # the fix is the --record path, as for a path refused up front
                raise failure from None
            self._record()
        log.info("%s: listening on %s; %d entries recovered (generation %d, HWM %d), protocol %s",
                 self.server_id, format_address(self.address), self.replica.last_index, self.replica.generation,
                 self.replica.hwm, _protocol_name(config.protocol))
        links = dict(config.peers)
        if config.controller is not None:
            from hwm.impl.kafka import CONTROLLER

            links[CONTROLLER] = config.controller
        for peer, address in links.items():
            link = _PeerLink(self, peer, address)
            self._links[peer] = link
            link.task = asyncio.create_task(link.run(), name=f"{self.server_id}->{peer}")
            self._tasks.append(link.task)
        self._driver = asyncio.create_task(self._drive(), name=f"{self.server_id} driver")
        self._tasks.append(self._driver)

    async def stopped(self) -> None:
        """Wait until the node stops (by `stop()` or a fatal storage error)."""
        assert self._stopped is not None, "start() first"
        await self._stopped.wait()

    async def stop(self) -> None:
        """Stop serving and close the storage (which syncs). Idempotent."""
        if self._stopping:
            if self._stopped is not None:
                await self._stopped.wait()
            return
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close()
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        driver = self._driver
        # Let the driver finish the batch it may be persisting, then stop everything else.
        if driver is not None and driver in tasks and not driver.done():
            try:
                async with asyncio.timeout(5.0):
                    await asyncio.shield(driver)
            except (TimeoutError, Exception):
                pass
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for link in self._links.values():
            if link.writer is not None:
                link.writer.close()
        try:
            await asyncio.to_thread(self.storage.close)
            if self.recorder is not None:
                self.recorder.close()
        except (OSError, StorageError) as error:
            log.error("%s: closing storage failed: %s", self.server_id, error)
        if self._stopped is not None:
            self._stopped.set()

    # ------------------------------------------------------------------ input
    def _submit(self, item: tuple) -> None:
        self._inbox.append(item)
        assert self._wake is not None
        self._wake.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        name = format_address(peername[:2]) if peername else "a client"
        connection = _Connection(writer, name)
        if self._stopping:
            connection.close()
            return
        if len(self._connections) >= MAX_CONNECTIONS:
            connection.refuse(f"too many connections (at most {MAX_CONNECTIONS})")
            return
        self._connections.add(connection)
        frames = codec.FrameReader()
        try:
            while not connection.closed:
                if not connection.room.is_set():
                    await connection.room.wait()
                    continue
                wait = self.config.partial_frame_seconds if frames.buffered else None
                try:
                    async with asyncio.timeout(wait):
                        data = await reader.read(65536)
                except TimeoutError:
                    self._refuse(connection, f"incomplete frame: {frames.buffered} bytes waited "
                                             f"{self.config.partial_frame_seconds:g} s for the rest")
                    break
                if not data:
                    break  # EOF; a partial frame is dropped with the connection
                try:
                    payloads = frames.feed(data)
                except codec.CodecError as error:
                    self._refuse(connection, f"bad frame: {error}")
                    break
                if not self._dispatch(connection, payloads):
                    break
            # Stop reading; let owed answers (puts waiting to commit) go out, then close.
            if not connection.closed and connection.owed:
                try:
                    async with asyncio.timeout(self.config.put_timeout + 1):
                        await connection.done.wait()
                except TimeoutError:
                    pass
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            connection.close()
            self._connections.discard(connection)

    def _dispatch(self, connection: _Connection, payloads: list[bytes]) -> bool:
        """Decode and route frames; False (and an ErrorReply queued) on the first bad one."""
        for payload in payloads:
            try:
                message = codec.decode(payload)
            except codec.CodecError as error:
                self._refuse(connection, f"bad frame: {error}")
                return False
            if isinstance(message, m.PEER_MESSAGES) or (self.config.controller is not None
                                                        and isinstance(message, m.KAFKA_MESSAGES)):
                self._submit(("peer", message, connection))
            elif isinstance(message, m.CLIENT_REQUESTS):
                self._submit(("client", message, connection, connection.reserve()))
            else:
                self._refuse(connection, f"a server does not accept {type(message).__name__}; requests are "
                                         "PutRequest, GetRequest, StatusRequest, RegisterClient")
                return False
        return True

    def _refuse(self, connection: _Connection, text: str) -> None:
        self.stats.refused_frames += 1
        log.info("%s: refused %s: %s", self.server_id, connection.name, text)
        connection.refuse(text)

    # ------------------------------------------------------------------ the driver
    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        tick = self.config.tick_seconds
        next_tick = loop.time() + tick
        assert self._wake is not None
        try:
            await self._flush()  # the restart rule may have produced work (an HwmQuery, a truncation)
            while not self._stopping:
                if not self._inbox and loop.time() < next_tick:
                    self._wake.clear()
                    timer = loop.call_at(next_tick, self._wake.set)
                    await self._wake.wait()
                    timer.cancel()
                if self._stopping:
                    break
                batch, self._inbox = self._inbox, []
                for item in batch:
                    self._handle(item)
                now = loop.time()
                if now >= next_tick:
                    ticks = 0
                    while now >= next_tick and ticks < MAX_CATCH_UP_TICKS:
                        self.replica.tick()
                        next_tick += tick
                        ticks += 1
                    if now >= next_tick:
                        next_tick = now + tick
                    self._expire_puts(now)
                await self._flush()
        except asyncio.CancelledError:
            raise
        except (OSError, StorageError) as error:
            self.failure = error
            log.critical("%s: storage failure, stopping (fail-stop: nothing more is acknowledged): %s",
                         self.server_id, error)
            asyncio.get_running_loop().create_task(self.stop())
        except HookError as error:  # a variant's rule raised: its one line is the failure (hwm node prints it)
            self.failure = error
            asyncio.get_running_loop().create_task(self.stop())
        except Exception as error:  # a bug: stop rather than serve from a state we do not trust
            self.failure = error
            log.critical("%s: internal error, stopping: %r", self.server_id, error, exc_info=True)
            asyncio.get_running_loop().create_task(self.stop())

    def _handle(self, item: tuple) -> None:
        replica = self.replica
        kind = item[0]
        if kind == "peer":
            _, message, connection = item
            link = self._links.get(_sender(message))
            if link is not None:
                link.kick()
            try:
                replica.step(message)
            except ReplicaError as error:
                self._refuse(connection, str(error))
            return
        _, request, connection, slot = item
        if isinstance(request, m.PutRequest):
            self._answer_put(request, connection, slot)
        elif isinstance(request, m.RegisterClient):
            self._answer_register(request, connection, slot)
        elif isinstance(request, m.GetRequest):
            try:
                generation, payload = replica.read(request.index)
                answer: m.Message = m.GetReply(request.index, generation, decode_entry(payload)[0])
                if self.recorder is not None:
                    self.recorder.read(request.index, generation)
            except NotCommitted as error:
                answer = m.GetReply(request.index, None, None, str(error), m.NOT_COMMITTED)
            self._answers.append((connection, slot, answer, False))
        else:
            self._answers.append((connection, slot, replica.status(), False))

    def _remember(self, index: int, payload: bytes) -> None:
        ids = decode_entry(payload)[1]
        if ids is not None:
            if ids not in self._unapplied:
                self._unapplied_clients[ids[0]] += 1
            self._unapplied[ids] = index

    def _forget_from(self, index: int) -> None:
        """Entries from `index` on were removed from the log. If applied ones were (only a broken
        protocol removes committed entries), the table is rebuilt from the log as it is now."""
        if index <= self.sessions.applied:
            self.sessions.reset()
            self._unapplied, self._unapplied_clients = {}, Counter()
            for k in range(1, self.replica.last_index + 1):
                self._remember(k, self.replica.entry(k)[1])
            return
        self._unapplied = {ids: i for ids, i in self._unapplied.items() if i < index}
        self._unapplied_clients = Counter(client for client, _ in self._unapplied)

    def _apply_committed(self) -> None:
        """Apply up to APPLY_BATCH more committed entries, in log order, to the session table."""
        sessions, replica = self.sessions, self.replica
        readable = min(replica.hwm, replica.last_index)
        if sessions.applied > readable:
            self._forget_from(readable + 1)  # applied entries are no longer readable: rebuild
        for index in range(sessions.applied + 1, min(readable, sessions.applied + APPLY_BATCH) + 1):
            ids = decode_entry(replica.entry(index)[1])[1]
            sessions.apply(index, ids)
            if ids is not None and self._unapplied.get(ids) == index:
                del self._unapplied[ids]
                self._unapplied_clients[ids[0]] -= 1
                if not self._unapplied_clients[ids[0]]:
                    del self._unapplied_clients[ids[0]]

    def _written(self, ids: tuple[str, int]) -> int | None:
        """The index of the entry above the applied ones that carries request `ids`, if any."""
        index = self._unapplied.get(ids)
        replica = self.replica
        if index is None or index > replica.last_index or decode_entry(replica.entry(index)[1])[1] != ids:
            return None
        return index

    def _session_refusal(self, client: str, request: int) -> str | None:
        """Why a put that is neither in the log above the applied entries nor its session's latest
        must not be written (None if it may)."""
        latest = self.sessions.latest.get(client)
        if latest is not None:
            if latest[0] <= request:
                return None
            return (f"request {request} of client {client} is older than its latest applied request "
                    f"{latest[0]}: its outcome is no longer kept; nothing was written")
        if client in self._unapplied_clients:
            return None  # its registration (or a put) is in the log, not yet applied here
        return (f"client {client} has no session (never opened, or evicted: at most "
                f"{self.sessions.limit} are kept); nothing was written: open a new session")

    def _not_leader(self) -> m.PutReply:
        leader = self.replica.leader_id
        text = f"{self.server_id} is not the leader" + (f"; the leader is {leader}" if leader else
                                                         "; no leader is known")
        return m.PutReply(None, text, leader, m.NOT_LEADER)

    def _not_writing(self) -> m.PutReply | None:
        """Why this server cannot write a client's entry now (a put's or a session's), or None."""
        if getattr(self.replica, "prospective", False):
            # ZAB: a new leader takes writes once a quorum synchronised with it (phase 2).
            text = f"{self.server_id} is a prospective leader: a quorum has not acknowledged its NEWLEADER yet"
            return m.PutReply(None, text, None, m.NOT_LEADER)
        if self.replica.role != "leader":
            return self._not_leader()
        return None

    def _answer_put(self, request: m.PutRequest, connection: _Connection, slot: list) -> None:
        replica = self.replica
        if len(request.value) > self.config.max_value_bytes:
            self._answers.append((connection, slot, m.PutReply(
                None, f"the value is {len(request.value)} bytes; at most "
                      f"{self.config.max_value_bytes} are accepted", code=m.REFUSED), False))
            return
        ids = (request.client, request.request) if request.client is not None else None
        index = self._written(ids) if ids is not None else None
        if ids is not None and index is None:
            latest = self.sessions.latest.get(request.client)
            if latest is not None and latest[0] == request.request:
                self._answers.append((connection, slot, m.PutReply(latest[1]), False))  # a retry, applied
                return
            refusal = self._session_refusal(*ids)
            if refusal is not None and replica.role == "leader":
                self._answers.append((connection, slot, m.PutReply(None, refusal, code=m.SESSION_EXPIRED), False))
                return
        if index is not None and index <= min(replica.hwm, replica.last_index):
            self._answers.append((connection, slot, m.PutReply(index), False))  # a retry, committed
            return
        refusal = self._not_writing()
        if refusal is not None:
            self._answers.append((connection, slot, refusal, False))
            return
        if index is None:
            index = replica.propose(encode_entry(request.value, *(ids or (None, 0))))
            self.stats.puts += 1
        elif replica.last_generation < replica.generation:
            # A retry of a put our log holds from an earlier generation, not yet committed. Under
            # commit=current-generation it commits only behind an entry of ours; if every client
            # is retrying, none would come: write an empty one (Raft's no-op).
            replica.propose(b"")
        self._wait_for(index, connection, slot)

    def _answer_register(self, request: m.RegisterClient, connection: _Connection, slot: list) -> None:
        """Open a session: a registration entry, answered with its index once committed."""
        refusal = self._not_writing()
        if refusal is not None:
            self._answers.append((connection, slot, refusal, False))
            return
        self._wait_for(self.replica.propose(encode_entry(b"", request.client, REGISTRATION)), connection, slot)

    def _wait_for(self, index: int, connection: _Connection, slot: list) -> None:
        """Answer `slot` when the entry now at `index` commits (or is overwritten, or times out)."""
        generation, payload = self.replica.entry(index)
        loop = asyncio.get_running_loop()
        pending = _PendingPut(generation, payload, connection, slot, loop.time() + self.config.put_timeout, index)
        self._pending.setdefault(index, []).append(pending)
        self._pending_by_deadline.append(pending)

    def _confirm(self, entry: Entry) -> None:
        """An entry became readable: answer the puts waiting for its index."""
        for pending in self._pending.pop(entry.index, ()):
            pending.done = True
            if (pending.generation, pending.value) == (entry.generation, entry.payload):
                answer = m.PutReply(entry.index)
                if self.recorder is not None:
                    self.recorder.ack(entry.index, entry.generation)
            else:
                answer = m.PutReply(None, f"entry {entry.index} was overwritten by the leader of generation "
                                          f"{entry.generation}; write the value again", code=m.NOT_WRITTEN)
            pending.connection.answer(pending.slot, answer)

    def _expire_puts(self, now: float) -> None:
        queue = self._pending_by_deadline
        while queue and (queue[0].done or queue[0].deadline <= now):
            pending = queue.popleft()
            if pending.done:
                continue
            pending.done = True
            waiting = self._pending.get(pending.index, [])
            if pending in waiting:
                waiting.remove(pending)
                if not waiting:
                    del self._pending[pending.index]
            pending.connection.answer(pending.slot, m.PutReply(
                None, f"entry {pending.index} was not committed within {self.config.put_timeout:g} s "
                      "(no quorum reachable?); it may still be committed", code=m.OUTCOME_UNKNOWN))

    async def _flush(self) -> None:
        """Hand out the replica's Ready: persist first, then send and answer."""
        replica = self.replica
        if replica.has_ready():
            ready = replica.ready()
            self.stats.batches += 1
            if (ready.truncate_from is not None or ready.entries or ready.metadata is not None
                    or getattr(ready, "current_epoch", None) is not None):
                self.stats.persists += 1
                await asyncio.to_thread(self._persist, ready, self.storage)
            if self.recorder is not None:
                self._record()  # persisted, not yet announced: a peer never logs the consequence first
            if ready.truncate_from is not None:
                self._forget_from(ready.truncate_from)
            for entry in ready.entries:
                self._remember(entry.index, entry.payload)
            for to, message in ready.messages:
                link = self._links.get(to)
                if link is not None:
                    link.send(message)
            for entry in ready.committed:
                if entry.index in self._pending:
                    self._confirm(entry)
        self._apply_committed()
        if self.recorder is not None and self.recorder.waiting:
            self._record()  # acknowledgements and reads, after the state that allowed them
        if self._answers:
            answers, self._answers = self._answers, []
            for connection, slot, message, close in answers:
                connection.answer(slot, message, close)
        self._show_role()

    def _record(self) -> None:
        replica = self.replica
        snapshot = replica.snapshot()
        self.recorder.state(snapshot.generation, snapshot.role, snapshot.log, snapshot.hwm,
                            replica.leader_id is not None)

    def describe(self) -> dict:
        """The replica's state (`Replica.describe`) and the node's: puts waiting to commit, the
        inbox, and each peer link (connected or not, messages dropped)."""
        state = self.replica.describe() if self.replica is not None else {"server": self.server_id}
        state.update(pending_puts=sum(len(w) for w in self._pending.values()), inbox=len(self._inbox),
                     sessions=len(self.sessions), sessions_applied=self.sessions.applied,
                     unapplied_requests=len(self._unapplied),
                     batches=self.stats.batches, persists=self.stats.persists, puts=self.stats.puts,
                     links={peer: {"connected": link.writer is not None, "dropped": link.dropped}
                            for peer, link in self._links.items()})
        return state

    def log_state(self) -> None:
        """Log `describe()` as one JSON line (at warning level, so a quiet node shows it too)."""
        log.warning("%s: state %s", self.server_id, json.dumps(self.describe(), sort_keys=True))

    def _show_role(self) -> None:
        replica = self.replica
        shown = (replica.role, replica.generation, replica.leader_id, replica.pre_voting)
        if shown == self._shown:
            return
        self._shown = shown
        if replica.pre_voting:
            log.info("%s: asking for pre-votes for generation %d (last index %d, generation %d)", self.server_id,
                     replica.generation + 1, replica.last_index, replica.last_generation)
        elif replica.role == "leader":
            log.info("%s: leader of generation %d (last index %d, HWM %d)", self.server_id, replica.generation,
                     replica.last_index, replica.hwm)
        elif replica.role == "candidate":
            log.info("%s: candidate in generation %d", self.server_id, replica.generation)
        elif replica.leader_id is not None:
            log.info("%s: follower of %s in generation %d", self.server_id, replica.leader_id, replica.generation)


def _protocol_name(protocol: Protocol) -> str:
    from hwm.properties.protocol import PRESETS
    for name, preset in PRESETS.items():
        if preset.protocol == protocol:
            return name
    diff = protocol.differences(RAFT)
    return "raft+" + ",".join(f"{k}={v}" for k, v in diff.items())


async def run_node(config: NodeConfig, stop: asyncio.Event | None = None) -> Node:
    """Start a node and serve until `stop` is set or the node fails; returns the stopped node."""
    node = Node(config)
    await node.start()
    waiters = [asyncio.create_task(node.stopped())]
    if stop is not None:
        waiters.append(asyncio.create_task(stop.wait()))
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    await node.stop()
    return node
