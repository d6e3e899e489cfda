"""Kafka's controller as a process of its own: `hwm controller`, the brokers' `--controller`.

`ControllerNode` runs `impl.kafka.Controller` (sans-IO) on the TCP runtime's pieces: it listens for
the leaders' `AlterIsr` requests, dials every broker (`_PeerLink`, as a node dials its peers) to
send `LeaderAndIsr`, `UpdateMetadata` and `AlterIsrReply`, and keeps the partition state (leader
epoch, leader, ISR) in a file it replaces atomically and fsyncs before anything it decided is sent,
as ZooKeeper holds it: a restarted controller goes on from the same epoch and ISR.

What ZooKeeper's sessions do, the connection does: a broker is live while the controller's
connection to it is up. A killed broker's connection closes at once (`broker_failed`: it no longer
leads); a broker that comes back is dialled again (`broker_started`: it learns the epoch, leader
and ISR). A broker that hangs with its connection open stays live (there is no session timeout).

Election (on each tick): when the partition has no live leader, the controller elects the first
live replica of the ISR, or under `unclean_election` any live replica when none of the ISR is
alive; it waits for every broker, or `startup_ticks`, after it starts, so that a broker that is a
moment late is not left out of the first ISR.

The model assumes the controller atomic and always available; here it is one process, a single
point of failure: while it is down no leader is elected and no ISR changes (the leader's HW stops
when it needs one), and the brokers go on otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from typing import Mapping

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.client import Address, format_address
from hwm.impl.fs import OS_FILESYSTEM, FileSystem, make_directories, replace_file
from hwm.impl.kafka import Controller
from hwm.impl.runtime import MAX_CONNECTIONS, DataDirectoryBusy, NodeError, _PeerLink, _reason
from hwm.impl.storage import DataDirectoryInUse, lock_directory
from hwm.properties.protocol import Protocol

__all__ = ["ControllerConfig", "ControllerNode", "PARTITION_STATE_FILE"]

log = logging.getLogger("hwm.controller")

# The partition state ZooKeeper holds (/brokers/topics/<topic>/partitions/0/state), one JSON object.
PARTITION_STATE_FILE = "partition-state.json"


@dataclass(frozen=True)
class ControllerConfig:
    listen: Address
    brokers: Mapping[str, Address]
    data_dir: str
    protocol: Protocol
    tick_seconds: float = 0.01
    startup_ticks: int = 100  # wait this long for every broker before the first election

    def __post_init__(self) -> None:
        if self.protocol.system != "kafka":
            raise ValueError(f"the controller is Kafka's; {self.protocol.system} replicas elect their leaders "
                             "themselves")
        if not self.brokers:
            raise ValueError("--brokers: the controller needs the brokers (S1=HOST:PORT,...)")
        for broker in self.brokers:
            m.check_server_id(broker, "brokers")


def partition_state_bytes(controller) -> bytes:
    """The partition-state file's content: the controller's leader epoch, leader and ISR."""
    document = {"leader_epoch": controller.leader_epoch, "leader": controller.leader, "isr": list(controller.isr)}
    return json.dumps(document).encode("utf-8")


def parse_partition_state(document, brokers) -> tuple[int, str | None, tuple[str, ...]]:
    """(leader epoch, leader, ISR) from a partition-state document; ValueError naming what does not fit."""
    try:
        epoch, leader, isr = document["leader_epoch"], document["leader"], tuple(document["isr"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"missing or malformed {error}") from None
    brokers = set(brokers)
    if type(epoch) is not int or epoch < 0 or (leader is not None and leader not in brokers) \
            or not set(isr) <= brokers:
        raise ValueError(f"epoch {epoch!r}, leader {leader!r}, ISR {list(isr)} do not fit the brokers "
                         f"{sorted(brokers)}")
    return epoch, leader, isr


class ControllerNode:
    """The controller process. `await start()`, then `await stopped()` (or `await stop()`)."""

    server_id = "controller"  # how the links name it in the log

    def __init__(self, config: ControllerConfig, fs: FileSystem = OS_FILESYSTEM):
        self.config = config
        # The OS's file system, or a simulated one that can fault the partition-state file (impl.fs).
        self.fs = fs
        self._path = os.path.join(config.data_dir, PARTITION_STATE_FILE)
        self.controller: Controller | None = None
        self._links: dict[str, _PeerLink] = {}
        self._server: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        self._stopped: asyncio.Event | None = None
        self._ticks = 0
        self._saved: tuple | None = None
        self._offline: str | None = None  # why no leader can be elected, as last logged
        self._connections: set[asyncio.StreamWriter] = set()  # the brokers' connections to us
        self.failure: BaseException | None = None
        self._lock: int | None = None  # holds DIR/LOCK while the controller runs

    # ------------------------------------------------------------------ the durable state
    def load_state(self) -> tuple[int, str | None, tuple[str, ...]] | None:
        """(leader epoch, leader, ISR) from the state file; None without one. NodeError if damaged."""
        try:
            document = json.loads(self.fs.read_file(self._path).decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise NodeError(f"controller: cannot read {self._path}: {error}") from None
        try:
            return parse_partition_state(document, self.config.brokers)
        except ValueError as error:
            raise NodeError(f"controller: {self._path} is not a partition state: {error}") from None

    def _save(self) -> None:
        """Make the partition state durable (temporary file, fsync, rename, fsync the directory)."""
        c = self.controller
        state = (c.leader_epoch, c.leader, c.isr)
        if state == self._saved:
            return
        replace_file(self.fs, self._path, partition_state_bytes(c))
        self._saved = state

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        config = self.config
        try:
            make_directories(self.fs, config.data_dir)
        except OSError as error:
            raise NodeError(f"controller: cannot create {config.data_dir}: {error}") from None
        try:
            # Two controllers on one state would each elect their own leaders in the same epochs.
            self._lock = lock_directory(config.data_dir, f"the controller listening on {format_address(config.listen)}",
                                        self.fs)
        except DataDirectoryInUse as error:
            raise DataDirectoryBusy(f"controller: cannot start: {error}") from None
        try:
            state = self.load_state()
            self.controller = Controller(tuple(config.brokers), config.protocol, state=state, live=())
            self._saved = state
            try:
                self._server = await asyncio.start_server(self._serve, *config.listen, reuse_address=True)
            except OSError as error:
                raise NodeError(f"controller: cannot listen on {format_address(config.listen)}: "
                                f"{_reason(error)}") from None
        except NodeError:
            self._unlock()
            raise
        self._stopped = asyncio.Event()
        c = self.controller
        log.info("controller: listening on %s; leader epoch %d, leader %s, ISR {%s}", format_address(config.listen),
                 c.leader_epoch, c.leader or "none", ",".join(c.isr))
        for broker, address in config.brokers.items():
            link = _PeerLink(self, broker, address)
            link.on_up, link.on_down = self._broker_started, self._broker_failed
            self._links[broker] = link
            link.task = asyncio.create_task(link.run(), name=f"controller->{broker}")
            self._tasks.append(link.task)
        self._tasks.append(asyncio.create_task(self._tick(), name="controller ticks"))

    async def stopped(self) -> None:
        assert self._stopped is not None, "start() first"
        await self._stopped.wait()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.close()  # each connection's reader sees the end and returns
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for link in self._links.values():
            if link.writer is not None:
                link.writer.close()
        self._unlock()
        if self._stopped is not None:
            self._stopped.set()

    def _unlock(self) -> None:
        if self._lock is not None:
            self.fs.close(self._lock)  # releases the flock
            self._lock = None

    # ------------------------------------------------------------------ decisions, then messages
    def _publish(self) -> None:
        """Persist what was decided, then send it (fail-stop if the state cannot be made durable)."""
        try:
            self._save()
        except OSError as error:
            self.failure = error
            log.critical("controller: cannot save %s, stopping: %s", self._path, error)
            asyncio.get_running_loop().create_task(self.stop())
            return
        for broker, message in self.controller.ready():
            link = self._links.get(broker)
            if link is not None:
                link.send(message)

    def _broker_started(self, broker: str) -> None:
        log.info("controller: %s is live", broker)
        self.controller.broker_started(broker)
        self._publish()

    def _broker_failed(self, broker: str) -> None:
        log.info("controller: %s is down", broker)
        self.controller.broker_failed(broker)
        self._publish()

    def _elect(self) -> None:
        c = self.controller
        if c.leader is not None and c.leader in c.live:
            return
        if self._ticks < self.config.startup_ticks and len(c.live) < len(c.replicas):
            return
        live = [s for s in c.replicas if s in c.live]
        candidates = [s for s in c.isr if s in c.live] or (live if self.config.protocol.unclean_election else [])
        if not candidates:
            why = (f"no replica of the ISR {{{','.join(c.isr)}}} is live (live: {{{','.join(live)}}}) and unclean "
                   "leader election is disabled: the partition is offline")
            if why != self._offline:
                log.warning("controller: %s", why)
                self._offline = why
            return
        refused = c.elect(candidates[0], live)
        if refused is not None:
            log.warning("controller: cannot elect %s: %s", candidates[0], refused)
            return
        self._offline = None
        log.info("controller: elected %s for leader epoch %d, ISR {%s}", c.leader, c.leader_epoch, ",".join(c.isr))
        self._publish()

    async def _tick(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.config.tick_seconds)
            self._ticks += 1
            self._elect()

    # ------------------------------------------------------------------ input: the leaders' AlterIsr
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        name = format_address(peername[:2]) if peername else "a broker"
        frames = codec.FrameReader()
        refusal = None
        if self._stopping or len(self._connections) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._connections.add(writer)
        try:
            while refusal is None:
                data = await reader.read(65536)
                if not data:
                    break
                try:
                    payloads = frames.feed(data)
                except codec.CodecError as error:
                    refusal = f"bad frame: {error}"
                    break
                for payload in payloads:
                    try:
                        message = codec.decode(payload)
                    except codec.CodecError as error:
                        refusal = f"bad frame: {error}"
                        break
                    if type(message) is not m.AlterIsr or message.leader not in self.config.brokers:
                        refusal = (f"the controller accepts only AlterIsr from a broker of "
                                   f"{{{','.join(self.config.brokers)}}}, not {_describe(message)}")
                        break
                    self.controller.step(message)
                    self._publish()
            if refusal is not None:
                log.info("controller: refused %s: %s", name, refusal)
                writer.write(codec.encode(m.ErrorReply(refusal)))
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # (cancelled: the controller stops)
        finally:
            self._connections.discard(writer)
            writer.close()


def _describe(message) -> str:
    if type(message) is m.AlterIsr:
        return f"an AlterIsr from {message.leader!r}"
    return f"a {type(message).__name__}"


async def run_controller(config: ControllerConfig, stop: asyncio.Event) -> ControllerNode:
    """Start the controller and serve until `stop` is set or it fails; returns the stopped controller."""
    node = ControllerNode(config)
    await node.start()
    waiters = [asyncio.create_task(node.stopped()), asyncio.create_task(stop.wait())]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    await node.stop()
    return node
