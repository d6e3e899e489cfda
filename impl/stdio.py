"""hwm's own replica as a node of Maelstrom's protocol: JSON lines on stdin and stdout.

`hwm node --stdio --protocol P` runs one server of the replicated log whose network is whoever
started it (`hwm test`, Maelstrom, a test's own driver): every message, to a peer or a client,
is one JSON object per line, ``{"src": ..., "dest": ..., "body": {"type": ..., "msg_id": n, ...}}``.
The replica is the sans-IO core of the TCP runtime (`impl.core`, `impl.zab`, `impl.kafka`) on
the same write-ahead log (`impl.storage`), in the data directory the node is started in.

What it answers (requests carry ``msg_id``; answers ``in_reply_to`` it):

- ``init {node_id, node_ids[, hwm_data_dir]}`` -> ``init_ok {hwm: [...]}``: opens the storage (the
  directory of ``hwm_data_dir``, else ``$HWM_DATA_DIR``, else the current one) and recovers from it;
  ``hwm`` declares the extensions of `hwm test` it takes part in (`HWM_EXTENSIONS`).
- the log workload: ``log_append {value}`` -> ``log_append_ok {index}`` once the entry is at or
  below the leader's high-water mark; ``log_read {index}`` -> ``log_read_ok {index, value}``, or
  error 20 above this node's high-water mark (11 while it cannot serve reads).
- Maelstrom's kafka workload, multiplexed onto the one log: a ``send {key, msg}`` is one entry and
  its offset is the entry's index; ``poll`` returns only entries at or below the high-water mark;
  ``commit_offsets`` is an entry too, and ``list_committed_offsets`` reads the committed ones.
- ``hwm_state`` -> ``hwm_state_ok {generation, role, log, hwm[, isr], kafka_offsets: "log-index"}``
  (the kafka workload's offsets are log indexes: hwm checks sends and polls against the log), the
  state after everything the node read before the request: on the real clock the lines of one read
  are handled before one flush, so the request first settles what those lines made ready (persisted,
  sent, the embedded controller's answers to its own broker taken, a no-op written).
- ``hwm_tick`` (no answer): one tick of a virtual clock. From the first one on (or from the start
  with ``clock="virtual"``) the node uses no timer of its own, so what it does depends only on the
  lines it reads. A virtual tick is a step of a schedule, not 10 ms: with ``clock="virtual"`` or
  ``"hwm_clock": "virtual"`` in init (or ``HWM_CLOCK=virtual``, as `hwm test` sets it) the node
  takes `VIRTUAL_TIMING` (elections after 3-6 ticks);
  a node that learns of the virtual clock only from its first tick keeps `REAL_TIMING`'s counts.

Writes go to the leader: a follower that knows the leader forwards a client's write to it (a message
on the network between them, as any other) and relays the leader's answer once its own high-water mark
covers the index, so that a read there next sees the write; one not answered within two election
timeouts (a lost forward or answer, a leader gone) is answered error 0 (it may still commit). A node that knows no leader,
or a write forwarded to a node that does not lead, is answered error 11 (temporarily unavailable, a
definite "not done") naming the leader it knows. A write the leader accepted and that is not committed within
`Timing.request_timeout` ticks, or before the leader steps down, is answered error 0 (timeout: it
may still commit); one whose index is committed with another entry is answered error 14 (abort: it
is not in the log).

Peers talk in ``hwm_peer`` bodies: the runtime's validated binary frame (`impl.codec`) in base64,
so that a peer message is checked exactly as one from a TCP connection. A line that is not JSON,
not an envelope, not for this node, or a peer message its ``src`` did not send gets a line on
stderr and is dropped; a request of an unknown type is answered error 10, a malformed one error 12.

Kafka's controller (elections from the ISR, ISR changes) runs inside the first node of
``node_ids`` (`impl.stdio_controller.EmbeddedController`): the brokers' heartbeats are its ZooKeeper
sessions. It is one process, a single point of failure, as `hwm controller` is on the TCP runtime.

Order: as on the TCP runtime, a batch's log changes and metadata are made durable before any of its
messages or answers is written. Under the real clock, lines that arrive together are one batch
(group commit); under the virtual clock every line is its own batch, so the output is a function of
the input lines alone.
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.core import NotCommitted, NotLeader, Replica, ReplicaError, persist
from hwm.impl.fs import OS_FILESYSTEM, FileSystem, make_directories, replace_file
from hwm.impl.stdio_controller import EmbeddedController
from hwm.impl.storage import DataDirectoryInUse, DiskStorage, StorageError
from hwm.properties.protocol import Protocol

__all__ = [
    "CLOCKS", "PEER_TYPE", "REAL_TIMING", "StdioNode", "Timing", "VIRTUAL_TIMING", "serve",
    "TIMEOUT", "NODE_NOT_FOUND", "NOT_SUPPORTED", "TEMPORARILY_UNAVAILABLE", "MALFORMED_REQUEST", "CRASH",
    "ABORT", "KEY_DOES_NOT_EXIST",
]

# Maelstrom's error codes (doc/protocol.md) that this node answers.
TIMEOUT, NODE_NOT_FOUND, NOT_SUPPORTED, TEMPORARILY_UNAVAILABLE = 0, 1, 10, 11
MALFORMED_REQUEST, CRASH, ABORT, KEY_DOES_NOT_EXIST = 12, 13, 14, 20

CLOCKS = ("real", "virtual")
PEER_TYPE = "hwm_peer"
HEARTBEAT_TYPE = "hwm_broker_heartbeat"
LINK_TYPE = "hwm_link"  # ZAB and Kafka: a node's new incarnation, announced to a peer
MAX_CATCH_UP_TICKS = 50  # after a stall (a slow fsync, SIGSTOP) tick at most this many at once
MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer line is dropped (and logged) without being buffered whole


@dataclass(frozen=True)
class Timing:
    """The node's timers, in ticks. Kafka's embedded controller: a broker heartbeats every
    `broker_heartbeat`; one silent for `broker_session` is down (zookeeper.session.timeout); the
    first election waits up to `controller_startup` for every broker (as `hwm controller` does)."""

    election: tuple[int, int]
    heartbeat: int
    replica_lag: int  # Kafka's replica.lag.time.max.ms
    request_timeout: int  # a write accepted and not committed is answered error 0 after this
    broker_heartbeat: int
    broker_session: int
    controller_startup: int


# The real clock: the TCP runtime's numbers for 10 ms ticks (elections after 300-600 ms, heartbeats
# every 50 ms, 10 s for a write). The virtual clock's tick is a step of a schedule: a leader is
# elected within a few of them, as hwm's example nodes are.
REAL_TIMING = Timing(election=(30, 60), heartbeat=5, replica_lag=30, request_timeout=1000,
                     broker_heartbeat=10, broker_session=60, controller_startup=100)
VIRTUAL_TIMING = Timing(election=(3, 6), heartbeat=1, replica_lag=4, request_timeout=100,
                        broker_heartbeat=1, broker_session=6, controller_startup=6)
# The systems whose servers assume FIFO links (TCP): ZAB (its broadcast is defined over FIFO
# channels) and Kafka (a fetch response is taken as the answer to the last fetch). Their peer
# messages carry link numbers; the raft family's take the network as it is (Raft assumes nothing).
FIFO_SYSTEMS = ("zab", "kafka")
# What init_ok declares to `hwm test` (bridge/maelstrom/cluster.py's EXTENSIONS): it answers
# hwm_state, follows hwm_tick, keeps its state on disk (kills are fair) and drops a duplicate.
HWM_EXTENSIONS = ("hwm_state", "hwm_tick", "kill", "duplicate")
INCARNATION_FILE = "stdio-incarnation"  # how many times a node started in this data directory


class _Malformed(Exception):
    """A request with a missing or ill-typed field: answered error 12 with this text."""


@dataclass
class _Forwarded:
    """A client's write this follower forwarded to the leader, until it relays the answer."""

    client: str
    msg_id: Any
    leader: str
    deadline: int  # in ticks
    index: int | None = None  # the leader acknowledged this index, above this node's HWM: held until it is not
    answer: dict | None = None


@dataclass
class _Pending:
    """A client write accepted by the leader, answered when its index commits."""

    index: int
    generation: int
    payload: bytes
    client: str
    msg_id: Any
    answer: Callable[[int], dict]  # the _ok body for the entry's index
    deadline: int  # in ticks


def _entry_payload(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def _decode_record(payload: bytes) -> dict | None:
    """The client record an entry holds (None for a no-op or anything else)."""
    if not payload:
        return None
    try:
        record = json.loads(payload)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class StdioNode:
    """One node: `handle_line` for each input line, `tick` for each tick of the clock; both return
    the output lines (bytes, newline-terminated), already made durable where needed."""

    def __init__(self, protocol: Protocol, *, clock: str = "real", log: TextIO | None = None,
                 fs: FileSystem = OS_FILESYSTEM, data_dir: str | None = None):
        if clock not in CLOCKS:
            raise ValueError(f"clock: expected one of {', '.join(CLOCKS)}, got {clock!r}")
        self.protocol = protocol
        self.clock = clock
        self.fs = fs
        self._log_file = log if log is not None else sys.stderr
        self._data_dir = data_dir
        self.node_id: str | None = None
        self.node_ids: tuple[str, ...] = ()
        self.replica: Replica | None = None
        self.storage = None
        self._persist = persist
        self.controller: EmbeddedController | None = None
        self.ticks = 0
        self.timing = VIRTUAL_TIMING if clock == "virtual" else REAL_TIMING  # fixed at init
        self._next_msg_id = 0
        self._out: list[bytes] = []  # peer messages and answers of the batch, written after persist
        self._answers: list[bytes] = []
        self._pending: dict[int, list[_Pending]] = {}
        self._forwarded: dict[int, _Forwarded] = {}  # our msg_id to the leader -> the client's write
        self._held: list[_Forwarded] = []  # acknowledged by the leader above this node's HWM
        self._records: dict[int, tuple[bytes, dict | None]] = {}  # index -> (payload, record) cache
        self.failure: str | None = None  # why the node must stop (storage)
        self._shown: tuple | None = None  # the role, generation and leader last logged
        # ZAB's and Kafka's FIFO links: this process's incarnation, the last number sent to each
        # peer, and the last (incarnation, number) taken from each.
        self.incarnation = 0
        self._link_sent: dict[str, int] = {}
        self._link_received: dict[str, tuple[int, int]] = {}
        self._peer_incarnation: dict[str, int] = {}
        self.exit_code = 0

    # ------------------------------------------------------------------ output
    def log(self, text: str) -> None:
        self._log_file.write(f"{self.node_id or 'node'}: {text}\n")
        self._log_file.flush()

    def _line(self, dest: str, body: dict) -> bytes:
        self._next_msg_id += 1
        body.setdefault("msg_id", self._next_msg_id)
        envelope = {"src": self.node_id or "", "dest": dest, "body": body}
        return (json.dumps(envelope, separators=(",", ":")) + "\n").encode()

    def _reply(self, request: dict, body: dict) -> None:
        if "msg_id" in request["body"]:
            body["in_reply_to"] = request["body"]["msg_id"]
        self._answers.append(self._line(request["src"], body))

    def _error(self, request: dict, code: int, text: str) -> None:
        self._reply(request, {"type": "error", "code": code, "text": text})

    # ------------------------------------------------------------------ input
    def handle_line(self, line: bytes) -> list[bytes]:
        """Handle one input line (without or with its newline); the lines to write."""
        self._handle(line)
        return self.flush()

    def _handle(self, line: bytes) -> None:
        text = line.strip()
        if not text:
            return
        try:
            envelope = json.loads(text)
        except (ValueError, UnicodeDecodeError) as error:
            self.log(f"dropped a line that is not JSON ({error}): {_excerpt(text)}")
            return
        if (not isinstance(envelope, dict) or not isinstance(envelope.get("body"), dict)
                or not isinstance(envelope.get("src"), str) or not isinstance(envelope["body"].get("type"), str)):
            self.log(f"dropped a line that is not a message (expected {{src, dest, body: {{type, ...}}}}): "
                     f"{_excerpt(text)}")
            return
        body = envelope["body"]
        kind = body["type"]
        dest = envelope.get("dest")
        if kind == "init":
            self._init(envelope)
            return
        if self.replica is None:
            if kind not in (PEER_TYPE, HEARTBEAT_TYPE, LINK_TYPE, "hwm_tick") and "msg_id" in body:
                self._error(envelope, TEMPORARILY_UNAVAILABLE, "not initialised: init first")
            else:
                self.log(f"dropped a {kind} that came before init")
            return
        if dest != self.node_id:
            self.log(f"dropped a {kind} for {dest!r}, not for {self.node_id}")
            return
        reply_to = body.get("in_reply_to")
        forwarded = self._forwarded.get(reply_to) if type(reply_to) is int else None
        if forwarded is not None and envelope["src"] == forwarded.leader:
            self._relay(body)
            return
        handler = self._HANDLERS.get(kind)
        if handler is None:
            if "in_reply_to" in body or "msg_id" not in body:
                self.log(f"dropped a {kind} from {envelope['src']}: not a request this node knows")
            else:
                self._error(envelope, NOT_SUPPORTED, f"{self.node_id} does not support {kind!r}")
            return
        try:
            handler(self, envelope)
        except _Malformed as error:
            if "msg_id" in body:
                self._error(envelope, MALFORMED_REQUEST, f"{kind}: {error}")
            else:
                self.log(f"dropped a malformed {kind} from {envelope['src']}: {error}")

    def tick(self) -> list[bytes]:
        """One tick of time: timers of the replica (and the controller), request timeouts."""
        self._tick()
        return self.flush()

    def _tick(self) -> None:
        if self.replica is None:
            return
        self.ticks += 1
        self.replica.tick()
        if self.controller is not None:
            self.controller.tick(self.ticks)
        if self.protocol.system == "kafka" and self.ticks % self.timing.broker_heartbeat == 0:
            self._heartbeat()
        self._expire()

    # ------------------------------------------------------------------ init and storage
    def _init(self, envelope: dict) -> None:
        body = envelope["body"]
        node_id, node_ids = body.get("node_id"), body.get("node_ids")
        if (not isinstance(node_id, str) or not isinstance(node_ids, list)
                or not all(isinstance(k, str) for k in node_ids) or node_id not in node_ids
                or len(set(node_ids)) != len(node_ids)):
            self._error(envelope, MALFORMED_REQUEST, "init: expected node_id (a str) among node_ids (distinct strs), "
                                                     f"got node_id {node_id!r}, node_ids {node_ids!r}")
            return
        if self.replica is not None:
            if node_id == self.node_id:
                self._reply(envelope, {"type": "init_ok"})  # a resent init
            else:
                self._error(envelope, MALFORMED_REQUEST, f"init: already initialised as {self.node_id}")
            return
        directory = body.get("hwm_data_dir") or self._data_dir or os.environ.get("HWM_DATA_DIR") or os.getcwd()
        if not isinstance(directory, str):
            self._error(envelope, MALFORMED_REQUEST, f"init: hwm_data_dir must be a str, got {directory!r}")
            return
        if (body.get("hwm_clock") == "virtual" or os.environ.get("HWM_CLOCK") == "virtual") and self.clock != "virtual":
            self.clock = "virtual"  # hwm's hint: ticks will come; take the virtual clock's timers now
        self.node_id, self.node_ids = node_id, tuple(node_ids)
        peers = tuple(k for k in node_ids if k != node_id)
        try:
            self._open(directory, peers)
        except DataDirectoryInUse as error:
            self._stop_on(envelope, f"cannot start: {error}", 2)
            return
        except (StorageError, OSError, ValueError, ReplicaError) as error:
            self._stop_on(envelope, f"cannot start from {directory}: {error}", 1)
            return
        replica = self.replica
        self.log(f"started in {directory}: {replica.last_index} entries recovered (generation {replica.generation}, "
                 f"HWM {replica.hwm}), peers {', '.join(peers) or 'none'}, {self.clock} clock")
        self._reply(envelope, {"type": "init_ok", "hwm": list(HWM_EXTENSIONS)})
        if self.protocol.system in FIFO_SYSTEMS:
            for peer in peers:
                self._announce(peer)
        if self.protocol.system == "kafka":
            self._heartbeat(started=True)

    def _stop_on(self, envelope: dict, text: str, code: int) -> None:
        self.log(text)
        self._error(envelope, CRASH, f"{envelope['body'].get('node_id')}: {text}")
        self.failure, self.exit_code = text, code
        self.node_id = None

    def _open(self, directory: str, peers: tuple[str, ...]) -> None:
        timing = self.timing = VIRTUAL_TIMING if self.clock == "virtual" else REAL_TIMING
        options: dict = {"election_ticks": timing.election, "heartbeat_ticks": timing.heartbeat}
        if self.clock == "real":
            options["rng_seed"] = int.from_bytes(os.urandom(4), "big")  # else: from the node id, repeatable
        storage = DiskStorage(directory, owner=f"node {self.node_id} (hwm node --stdio, pid {os.getpid()})",
                              fs=self.fs)
        replica_class = Replica
        system = self.protocol.system
        if system == "zab":
            from hwm.impl import zab

            storage = zab.EpochStorage(storage, directory)
            replica_class, self._persist = zab.ZabReplica, zab.persist
        elif system == "kafka":
            from hwm.impl.kafka import KafkaReplica

            replica_class = KafkaReplica
            options["replica_lag_ticks"] = timing.replica_lag
        durable = storage.load()
        try:
            if system in FIFO_SYSTEMS:
                self._start_incarnation(directory)
            self.replica = replica_class(self.node_id, peers, self.protocol, durable, **options)
            if system == "kafka" and self.node_id == self.node_ids[0]:
                self.controller = EmbeddedController(self, directory)
        except BaseException:
            storage.close()
            self.replica = None
            raise
        self.storage = storage

    def _start_incarnation(self, directory: str) -> None:
        """Count this start in INCARNATION_FILE: what a peer tells this process's links from the last one's."""
        path = os.path.join(directory, INCARNATION_FILE)
        try:
            text = self.fs.read_file(path).decode("ascii").strip()
        except FileNotFoundError:
            text = "0"
        if not text.isdigit():
            raise StorageError(f"{path}: expected a non-negative integer, got {text[:40]!r}")
        self.incarnation = int(text) + 1
        make_directories(self.fs, os.path.dirname(path))
        replace_file(self.fs, path, f"{self.incarnation}\n".encode())

    def close(self) -> None:
        if self.storage is not None:
            try:
                self.storage.close()
            except (OSError, StorageError) as error:
                self.log(f"closing the storage failed: {error}")
            self.storage = None

    # ------------------------------------------------------------------ peers
    def _send_peer(self, to: str, message) -> None:
        if self.protocol.system == "kafka":
            from hwm.impl.kafka import CONTROLLER

            if to == CONTROLLER:
                to = self.node_ids[0]
                if self.controller is not None:
                    self.controller.step(message)
                    return
            elif to == self.node_id:  # the embedded controller to its own broker
                self.replica.step(message)
                return
        frame = base64.b64encode(codec.encode_payload(message)).decode("ascii")
        self._out.append(self._line(to, self._linked(to, {"type": PEER_TYPE, "message": type(message).__name__,
                                                           "frame": frame})))

    def _linked(self, to: str, body: dict) -> dict:
        """Under ZAB and Kafka, number the body on its link: [our incarnation, n, the incarnation of
        `to` we last heard from (0: none yet)]."""
        if self.protocol.system in FIFO_SYSTEMS:
            self._link_sent[to] = self._link_sent.get(to, 0) + 1
            body["link"] = [self.incarnation, self._link_sent[to], self._peer_incarnation.get(to, 0)]
        return body

    def _on_peer(self, envelope: dict) -> None:
        source = envelope["src"]
        frame = envelope["body"].get("frame")
        if source not in self.node_ids or source == self.node_id:
            self.log(f"dropped a peer message from {source!r}, not one of the peers")
            return
        if self.protocol.system in FIFO_SYSTEMS and not self._in_order(source, envelope["body"].get("link")):
            return
        try:
            message = codec.decode(base64.b64decode(frame, validate=True))
        except (TypeError, ValueError, codec.CodecError) as error:
            self.log(f"dropped a peer message from {source} that is not a valid frame: {error}")
            return
        if type(message) not in m.PEER_MESSAGES and type(message) not in m.KAFKA_MESSAGES:
            self.log(f"dropped a {type(message).__name__} from {source}: not a peer message")
            return
        origin = _origin(message)
        if origin is None:  # Kafka's controller's requests come from the controller's node
            origin = self.node_ids[0]
        if origin != source:
            self.log(f"dropped a {type(message).__name__} that names {origin} as its sender but came from {source}")
            return
        if type(message) is m.AlterIsr:
            if self.controller is None:
                self.log(f"dropped an AlterIsr from {source}: the controller runs on {self.node_ids[0]}")
            else:
                self.controller.step(message)
            return
        try:
            self.replica.step(message)
        except ReplicaError as error:
            self.log(f"refused a {type(message).__name__} from {source}: {error}")

    def _in_order(self, source: str, link: object) -> bool:
        """ZAB and Kafka assume TCP between servers: a connection joins two incarnations of two
        servers, delivers at most once and in order, and a restarted sender's new connection
        supersedes the old one. A message whose (incarnation, number) is not past the last one taken
        from `source` is a duplicate or overtook a later one; one sent to an earlier incarnation of
        this node went down with it. Either is dropped, as if lost (which both protocols tolerate)."""
        if (not isinstance(link, list) or len(link) != 3 or not all(type(k) is int and k >= 0 for k in link)
                or link[0] < 1 or link[1] < 1):
            self.log(f"dropped a message from {source} without its link numbers (expected [incarnation, n, "
                     "the receiver's incarnation])")
            return False
        if link[2] not in (0, self.incarnation):
            self.log(f"dropped a message from {source} sent to incarnation {link[2]} of {self.node_id}, "
                     f"not to this one ({self.incarnation})")
            self._announce(source)  # as a reset tells a TCP peer to connect again
            return False
        last = self._link_received.get(source, (0, 0))
        if tuple(link[:2]) <= last:
            self.log(f"dropped a message from {source} numbered {link[:2]}, not after {list(last)}: "
                     f"a duplicate, or it overtook a later one ({self.protocol.system} runs over FIFO links)")
            return False
        self._link_received[source] = tuple(link[:2])
        self._peer_incarnation[source] = link[0]
        return True

    def _announce(self, peer: str) -> None:
        """Tell `peer` this node's incarnation (a new connection): it addresses this one from now on."""
        self._out.append(self._line(peer, self._linked(peer, {"type": LINK_TYPE})))

    def _on_link(self, envelope: dict) -> None:
        source = envelope["src"]
        if source not in self.node_ids or source == self.node_id:
            self.log(f"dropped a link announcement from {source!r}, not one of the peers")
        elif self.protocol.system in FIFO_SYSTEMS:
            self._in_order(source, envelope["body"].get("link"))  # takes note of its incarnation

    def _heartbeat(self, started: bool = False) -> None:
        """A Kafka broker's session with the controller (on the first node)."""
        host = self.node_ids[0]
        epoch = self.replica.partition_epoch
        if host == self.node_id:
            self.controller.heard(self.node_id, started, epoch, self.ticks)
        else:
            self._out.append(self._line(host, self._linked(host, {"type": HEARTBEAT_TYPE, "started": started,
                                                                   "epoch": epoch})))

    def _on_heartbeat(self, envelope: dict) -> None:
        source = envelope["src"]
        if self.controller is None or source not in self.node_ids:
            self.log(f"dropped a broker heartbeat from {source!r}: no controller here, or not a broker")
            return
        if not self._in_order(source, envelope["body"].get("link")):
            return
        epoch = envelope["body"].get("epoch")
        self.controller.heard(source, envelope["body"].get("started") is True,
                              epoch if type(epoch) is int else None, self.ticks)

    def _on_tick(self, envelope: dict) -> None:
        if self.clock != "virtual":
            self.clock = "virtual"
            self.log("hwm_tick received: virtual clock from now on, no timers of its own")
        self._tick()

    # ------------------------------------------------------------------ client requests
    def _field(self, envelope: dict, name: str, kind: type | tuple, what: str) -> Any:
        value = envelope["body"].get(name)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise _Malformed(f"field {name!r}: expected {what}, got {json.dumps(value)[:80]}")
        return value

    def _cannot_write(self) -> str | None:
        replica = self.replica
        if replica.role != "leader":
            leader = replica.leader_id
            return f"{self.node_id} is not the leader; " + (f"the leader is {leader}" if leader else "no leader is known")
        if getattr(replica, "prospective", False):
            return f"{self.node_id} is a prospective leader: a quorum has not acknowledged its NEWLEADER yet"
        return None

    def _write(self, envelope: dict, record: dict, answer: Callable[[int], dict]) -> None:
        refusal = self._cannot_write()
        if refusal is not None:
            if not self._forward(envelope):
                self._error(envelope, TEMPORARILY_UNAVAILABLE, refusal)
            return
        payload = _entry_payload(record)
        try:
            index = self.replica.propose(payload)
        except NotLeader as error:
            self._error(envelope, TEMPORARILY_UNAVAILABLE, str(error))
            return
        generation = self.replica.entry(index)[0]
        pending = _Pending(index, generation, payload, envelope["src"], envelope["body"].get("msg_id"), answer,
                           self.ticks + self.timing.request_timeout)
        self._pending.setdefault(index, []).append(pending)

    def _forward(self, envelope: dict) -> bool:
        """Send a client's write on to the leader this follower knows; False when it cannot (no leader
        known, or the write was itself forwarded: a stale leader hint must not bounce it around)."""
        leader = self.replica.leader_id
        if (self.replica.role == "leader" or leader is None or leader == self.node_id or leader not in self.node_ids
                or envelope["src"] in self.node_ids or "msg_id" not in envelope["body"]):
            return False
        body = {k: v for k, v in envelope["body"].items() if k != "msg_id"}
        self._out.append(self._line(leader, body))  # numbered by this node: the leader answers us
        # A lost forward or answer is answered error 0 within two election timeouts, long before a
        # client's own timeout: the leader may be gone, and this node will learn of the next one.
        self._forwarded[body["msg_id"]] = _Forwarded(envelope["src"], envelope["body"]["msg_id"], leader,
                                                     self.ticks + 2 * self.timing.election[1])
        return True

    def _relay(self, body: dict) -> None:
        """The leader's answer to a forwarded write, to the client; an acknowledgement waits until this
        node's own HWM covers its index."""
        forwarded = self._forwarded.pop(body["in_reply_to"])
        answer = {k: v for k, v in body.items() if k not in ("msg_id", "in_reply_to")}
        index = answer.get("index", answer.get("offset"))
        if answer["type"] in ("log_append_ok", "send_ok") and type(index) is int and index > self._readable():
            forwarded.index, forwarded.answer = index, answer
            self._held.append(forwarded)
            return
        self._answer_forwarded(forwarded, answer)

    def _answer_forwarded(self, forwarded: _Forwarded, answer: dict) -> None:
        answer["in_reply_to"] = forwarded.msg_id
        self._answers.append(self._line(forwarded.client, answer))

    def _release_forwarded(self) -> None:
        """Held acknowledgements whose index this node's HWM now covers; expired forwards."""
        for forwarded in list(self._held):
            if forwarded.index <= self._readable():
                self._held.remove(forwarded)
                self._answer_forwarded(forwarded, forwarded.answer)
        late = [f for f in self._held if f.deadline <= self.ticks]
        for key, forwarded in list(self._forwarded.items()):
            if forwarded.deadline <= self.ticks:
                del self._forwarded[key]
                late.append(forwarded)
        for forwarded in late:
            if forwarded in self._held:
                self._held.remove(forwarded)
            what = "acknowledged by" if forwarded.answer is not None else "forwarded to"
            self._answer_forwarded(forwarded, {
                "type": "error", "code": TIMEOUT,
                "text": f"{self.node_id} {what} {forwarded.leader}, no answer it could give within "
                        f"{2 * self.timing.election[1]} ticks; it may still be committed"})

    def _on_log_append(self, envelope: dict) -> None:
        if "value" not in envelope["body"]:
            raise _Malformed("field 'value' is missing")
        self._write(envelope, {"append": envelope["body"]["value"]},
                    lambda index: {"type": "log_append_ok", "index": index})

    def _on_log_read(self, envelope: dict) -> None:
        index = self._field(envelope, "index", int, "an index (an int >= 1)")
        if index < 1:
            raise _Malformed(f"field 'index': indexes start at 1, got {index}")
        if getattr(self.replica, "rejoining", False):
            self._error(envelope, TEMPORARILY_UNAVAILABLE, f"{self.node_id} is rejoining: it waits for the "
                                                           "leader's high-water mark before serving reads")
            return
        try:
            self.replica.read(index)
        except NotCommitted as error:
            self._error(envelope, KEY_DOES_NOT_EXIST, str(error))
            return
        record = self._record(index)
        value = record.get("append") if record is not None else None
        self._reply(envelope, {"type": "log_read_ok", "index": index, "value": value})

    def _on_send(self, envelope: dict) -> None:
        key = self._field(envelope, "key", str, "a key (a str)")
        if "msg" not in envelope["body"]:
            raise _Malformed("field 'msg' is missing")
        self._write(envelope, {"send": [key, envelope["body"]["msg"]]},
                    lambda index: {"type": "send_ok", "offset": index})

    def _on_poll(self, envelope: dict) -> None:
        offsets = self._field(envelope, "offsets", dict, "an object {key: offset}")
        for key, offset in offsets.items():
            if type(offset) is not int:
                raise _Malformed(f"field 'offsets': the offset of {key!r} must be an int, got {json.dumps(offset)}")
        msgs: dict[str, list] = {key: [] for key in offsets}
        for index in range(max(1, min(offsets.values(), default=1)), self._readable() + 1):
            record = self._record(index)
            send = record.get("send") if record is not None else None
            if isinstance(send, list) and len(send) == 2 and send[0] in offsets and index >= offsets[send[0]]:
                msgs[send[0]].append([index, send[1]])
        self._reply(envelope, {"type": "poll_ok", "msgs": msgs})

    def _on_commit_offsets(self, envelope: dict) -> None:
        offsets = self._field(envelope, "offsets", dict, "an object {key: offset}")
        for key, offset in offsets.items():
            if type(offset) is not int:
                raise _Malformed(f"field 'offsets': the offset of {key!r} must be an int, got {json.dumps(offset)}")
        self._write(envelope, {"commit": offsets}, lambda index: {"type": "commit_offsets_ok"})

    def _on_list_committed_offsets(self, envelope: dict) -> None:
        keys = self._field(envelope, "keys", list, "a list of keys")
        wanted = set(k for k in keys if isinstance(k, str))
        offsets: dict[str, int] = {}
        for index in range(1, self._readable() + 1):
            record = self._record(index)
            commit = record.get("commit") if record is not None else None
            if isinstance(commit, dict):
                for key, offset in commit.items():
                    if key in wanted and type(offset) is int and offset > offsets.get(key, -1):
                        offsets[key] = offset
        self._reply(envelope, {"type": "list_committed_offsets_ok", "offsets": offsets})

    def _on_state(self, envelope: dict) -> None:
        # The state after everything before this request, as hwm reads the answer: on the real clock
        # the lines of one read are handled before one flush, and what the flush does changes the state
        # (the embedded controller's answer to its own broker's AlterIsr, a no-op). Answered before
        # it, a leader of five showed its ISR a request behind, and two expansions and a shrink at once.
        self._settle()
        replica = self.replica
        body = {"type": "hwm_state_ok", "generation": replica.generation, "role": replica.role,
                "log": [[i, g] for i, g in enumerate(replica.log_generations(), start=1)], "hwm": replica.hwm,
                "kafka_offsets": "log-index"}  # a send's offset is its entry's index in the one log
        if self.protocol.system == "kafka":
            body["isr"] = list(replica.isr)
        self._reply(envelope, body)

    def _readable(self) -> int:
        return min(self.replica.hwm, self.replica.last_index)

    def _record(self, index: int) -> dict | None:
        payload = self.replica.entry(index)[1]
        cached = self._records.get(index)
        if cached is None or cached[0] != payload:
            cached = (payload, _decode_record(payload))
            self._records[index] = cached
        return cached[1]

    _HANDLERS: dict[str, Callable[["StdioNode", dict], None]] = {
        PEER_TYPE: _on_peer,
        LINK_TYPE: _on_link,
        HEARTBEAT_TYPE: _on_heartbeat,
        "hwm_tick": _on_tick,
        "log_append": _on_log_append,
        "log_read": _on_log_read,
        "send": _on_send,
        "poll": _on_poll,
        "commit_offsets": _on_commit_offsets,
        "list_committed_offsets": _on_list_committed_offsets,
        "hwm_state": _on_state,
    }

    # ------------------------------------------------------------------ the batch
    def _expire(self) -> None:
        for index in list(self._pending):
            waiting = self._pending[index]
            late = [p for p in waiting if p.deadline <= self.ticks]
            if not late:
                continue
            self._pending[index] = [p for p in waiting if p.deadline > self.ticks]
            if not self._pending[index]:
                del self._pending[index]
            for pending in late:
                self._answer(pending, {"type": "error", "code": TIMEOUT,
                                       "text": f"entry {index} was not committed within {self.timing.request_timeout} ticks "
                                               "(no quorum reachable?); it may still be committed"})

    def _answer(self, pending: _Pending, body: dict) -> None:
        if pending.msg_id is not None:
            body["in_reply_to"] = pending.msg_id
        self._answers.append(self._line(pending.client, body))

    def flush(self) -> list[bytes]:
        """Hand out the replica's Ready: persist first, then the messages and answers it allows."""
        self._settle()
        out = self._out + self._answers
        self._out, self._answers = [], []
        return out

    def _settle(self) -> None:
        """What `flush` does before it hands out the lines: persist what the replica made ready, send its
        messages (Kafka's embedded controller answers its own broker's AlterIsr here, at once), answer
        what is committed, write a no-op where one is needed. The lines wait in `_out` and `_answers`."""
        replica = self.replica
        while replica is not None and replica.has_ready():
            ready = replica.ready()
            if (ready.truncate_from is not None or ready.entries or ready.metadata is not None
                    or getattr(ready, "current_epoch", None) is not None):
                self._persist(ready, self.storage)  # StorageError/OSError: the caller stops the node
            for to, message in ready.messages:
                self._send_peer(to, message)  # may step our own replica (Kafka's controller): loop
            for entry in ready.committed:
                for pending in self._pending.pop(entry.index, ()):
                    if (pending.generation, pending.payload) == (entry.generation, entry.payload):
                        self._answer(pending, pending.answer(entry.index))
                    else:
                        self._answer(pending, {"type": "error", "code": ABORT,
                                               "text": f"entry {entry.index} was overwritten by the leader of "
                                                       f"generation {entry.generation}; it is not in the log"})
        if replica is not None:
            if self._needs_noop():
                replica.propose(b"")
                self._settle()
                return
            if self._forwarded or self._held:
                self._release_forwarded()
            self._orphan_pending()
            self._show_role()

    def _needs_noop(self) -> bool:
        """Raft's family under commit=current-generation: a new leader whose log ends with entries of
        earlier generations above its HWM cannot commit them until it writes one of its own (Raft
        §5.4.2). Clients of this node may never write again (a run's final phase only reads), so it
        writes an empty entry (Raft §8's no-op), as the TCP runtime does for a retried put."""
        replica = self.replica
        return (self.protocol.system == "raft" and self.protocol.commit == "current-generation"
                and replica.role == "leader" and replica.last_generation < replica.generation
                and replica.hwm < replica.last_index)

    def _orphan_pending(self) -> None:
        """A leader that stepped down (or moved to a later generation) will not see its writes through:
        nobody may ever commit or overwrite their indexes (a raft leader without a no-op writes
        nothing until a client does). Answer them now, indefinitely: they may still be committed."""
        replica = self.replica
        if not self._pending:
            return
        leading = replica.role == "leader"
        for index in list(self._pending):
            waiting = self._pending[index]
            orphans = [p for p in waiting if not leading or p.generation != replica.generation]
            if not orphans:
                continue
            self._pending[index] = [p for p in waiting if p not in orphans]
            if not self._pending[index]:
                del self._pending[index]
            for pending in orphans:
                self._answer(pending, {"type": "error", "code": TIMEOUT,
                                       "text": f"{self.node_id} stopped leading generation {pending.generation} "
                                               f"before entry {index} was committed; it may still be committed"})

    def _show_role(self) -> None:
        """A line on stderr when the node's role, generation or leader changes: the log a person reads."""
        replica = self.replica
        shown = (replica.role, replica.generation, replica.leader_id)
        if shown == self._shown:
            return
        self._shown = shown
        if replica.role == "leader":
            self.log(f"leader of generation {replica.generation} (last index {replica.last_index}, HWM {replica.hwm})")
        elif replica.role == "candidate":
            self.log(f"candidate in generation {replica.generation}")
        elif replica.leader_id is not None:
            self.log(f"follower of {replica.leader_id} in generation {replica.generation}")


def _origin(message) -> str | None:
    """The node a peer message says it comes from (None: Kafka's controller)."""
    field = m.KAFKA_SENDER_FIELD.get(type(message), "")
    if field == "":
        return m.sender(message)
    return None if field is None else getattr(message, field)


def _excerpt(text: bytes | str, limit: int = 120) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


# ---------------------------------------------------------------------- the process
class _Stop(Exception):
    pass


def serve(protocol: Protocol, *, clock: str = "real", tick_seconds: float = 0.01,
          stdin: int | None = None, stdout=None, log: TextIO | None = None) -> int:
    """Run a node on stdin/stdout until stdin ends (exit 0), SIGTERM (0), Ctrl-C (130), or a storage
    failure (1; 2 when another process holds the data directory). Returns the exit status."""
    stdin = sys.stdin.fileno() if stdin is None else stdin
    stdout = sys.stdout.buffer if stdout is None else stdout
    node = StdioNode(protocol, clock=clock, log=log)

    def on_term(signum, frame):
        raise _Stop()

    previous = signal.signal(signal.SIGTERM, on_term)
    buffer = b""
    skipping = False  # inside an over-long line
    next_tick = time.monotonic() + tick_seconds
    try:
        while True:
            timeout = None
            if node.clock == "real" and node.replica is not None:
                timeout = max(0.0, next_tick - time.monotonic())
            readable, _, _ = select.select([stdin], [], [], timeout)
            out: list[bytes] = []
            if readable:
                data = os.read(stdin, 65536)
                if not data:
                    break
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                if skipping and lines:
                    lines, skipping = lines[1:], False
                if len(buffer) > MAX_LINE_BYTES:
                    node.log(f"dropped a line longer than {MAX_LINE_BYTES} bytes")
                    buffer, skipping = b"", True
                for line in lines:
                    if node.clock == "virtual":
                        out += node.handle_line(line)  # one batch per line: repeatable
                    else:
                        node._handle(line)
                if node.failure is not None:
                    _write(stdout, out + node.flush())
                    return node.exit_code
            if node.clock == "real" and node.replica is not None:
                now = time.monotonic()
                ticks = 0
                while now >= next_tick and ticks < MAX_CATCH_UP_TICKS:
                    out += node.tick()
                    next_tick += tick_seconds
                    ticks += 1
                if now >= next_tick:
                    next_tick = now + tick_seconds
            else:
                next_tick = time.monotonic() + tick_seconds
            out += node.flush()
            _write(stdout, out)
    except _Stop:
        node.log("SIGTERM: stopping")
    except KeyboardInterrupt:
        node.exit_code = 130
    except (StorageError, OSError) as error:
        node.log(f"storage failure, stopping (fail-stop: nothing more is acknowledged): {error}")
        node.exit_code = 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        node.close()
    return node.exit_code


def _write(stdout, lines: list[bytes]) -> None:
    if lines:
        stdout.write(b"".join(lines))
        stdout.flush()
