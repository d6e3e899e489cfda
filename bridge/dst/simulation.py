"""One simulated cluster of the real runtime: three `Node`s on a `SimLoop` with their disks and a
client, stepping through a schedule and checking after each step (the checks are listed in
`bridge/dst/__init__.py`)."""

from __future__ import annotations

import asyncio
import contextvars
import errno
import random
from collections import Counter
from dataclasses import dataclass

from hwm.bridge.dst.disk import ReorderingDisk, SimDisk
from hwm.bridge.dst.net import MACHINE, SimLoop
from hwm.bridge.dst.plants import PLANTS, SESSION_PLANTS
from hwm.bridge.dst.schedule import SERVERS, Outcome, Schedule, Step
from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.core import down_snapshot
from hwm.impl.runtime import Node, NodeConfig, NodeError, decode_entry
from hwm.impl.storage import DiskStorage
from hwm.properties.acked import ACKED
from hwm.properties.catalogue import CATALOGUE, check_state, check_step
from hwm.properties.protocol import RAFT, Protocol
from hwm.properties.snapshot import LEADER, ServerSnapshot

CLIENT = "sim-client"
# Fast elections in virtual time: a simulated second costs the callbacks run in it, so fewer ticks
# per election mean more schedules per second of test.
TICK_SECONDS = 0.02
ELECTION_TICKS = (5, 10)  # 100-200 ms
HEARTBEAT_TICKS = 1
PUT_TIMEOUT = 1.0  # the node's: a put not committed by then is answered "outcome unknown"
ATTEMPT_SECONDS = 0.3  # the client's, per server tried
CLIENT_SECONDS = 2.0  # the client's, per put or get
SETTLE_SECONDS = 10.0  # after healing, the time the cluster gets to commit a write
DISK_LATENCY = ((0.0001, 0.002), (0.001, 0.03))  # seconds a persist (write + fsync) takes
# The reordering disk's pages are small, so that the few records of a schedule span several pages
# and a power failure can keep a later one while losing an earlier one.
REORDERING_PAGE_BYTES, REORDERING_SECTOR_BYTES = 32, 16
DISKS = ("prefix", "reordering")
ALWAYS = tuple(p for p in CATALOGUE + ACKED if p.kind == "always")
SOMETIMES = tuple(p for p in CATALOGUE + ACKED if p.kind == "sometimes")


@dataclass(frozen=True)
class _Said:
    """What a client was told: the entry at `index` (its generation, the client's value, and for a
    put the request ids it carries), by `server` while in `generation`."""

    index: int
    entry_generation: int
    value: bytes
    ids: tuple[str, int] | None
    server: str
    generation: int

    def held_by(self, entry: tuple[int, bytes] | None) -> bool:
        if entry is None or entry[0] != self.entry_generation:
            return False
        value, ids = decode_entry(entry[1])
        return value == self.value and (self.ids is None or ids == self.ids)

    def __str__(self) -> str:
        return f"{self.value!r} at {self.index}@g{self.entry_generation} (told by {self.server} in g{self.generation})"



class _Died(BaseException):
    """The process died inside a system call (BaseException: no `except Exception` catches it)."""


class _ClientProtocol(asyncio.Protocol):
    """The test's client end of one request: the first answer frame, and the tag it came with."""

    def __init__(self, loop: SimLoop):
        self.loop = loop
        self.frames = codec.FrameReader()
        self.answer: asyncio.Future = loop.create_future()

    def data_received(self, data: bytes) -> None:
        try:
            payloads = self.frames.feed(data)
        except codec.CodecError as error:
            payloads = []
            if not self.answer.done():
                self.answer.set_exception(ConnectionError(f"garbled answer: {error}"))
        if payloads and not self.answer.done():
            self.answer.set_result((codec.decode(payloads[0]), self.loop.network.delivery_meta))

    def connection_lost(self, exc) -> None:
        if not self.answer.done():
            self.answer.set_exception(ConnectionError("closed before answering"))


class _Simulation:
    def __init__(self, schedule: Schedule, plant: str | None, first_violation: bool = False,
                 protocol: Protocol = RAFT, disk: str = "prefix", clients: int = 1):
        self.schedule = schedule
        self.protocol = protocol  # raft, or zab (the node adds its currentEpoch file on the same disk)
        self.first_violation = first_violation
        self.stopped = False
        self.node_class, self.storage_class = {**PLANTS, **SESSION_PLANTS}[plant]
        # Half the schedules run on a fast disk, half on a slow one (an fsync of up to 30 ms, as on
        # a busy or networked disk): the slower the fsync, the wider the windows a crash can hit.
        disk_latency = DISK_LATENCY[schedule.seed % len(DISK_LATENCY)]
        self.loop = SimLoop(schedule.seed, disk_latency=disk_latency)
        self.loop.network.meta_of = self._tag
        self.loop.after_step = self._watch
        self.loop.on_job = self._job_started
        self.armed: dict[str, bool] = {}  # server -> power loss: crash it during its next persist
        self.loop.set_exception_handler(self._loop_error)
        self.rng = random.Random(schedule.seed ^ 0x5EED)
        self.addresses = {s: (f"10.0.0.{k + 1}", 7000) for k, s in enumerate(SERVERS)}
        # Only /data exists (durably) at first: each node creates its own data directory.
        self.disk_kind = disk
        self.disks = {s: self.make_disk(k) for k, s in enumerate(SERVERS)}
        self.nodes: dict[str, Node] = {}  # machines whose process runs (maybe still starting)
        self.incarnations: Counter = Counter()
        self.leading: dict[str, int] = {}  # server -> generation it was last seen leading
        self.leaders: dict[int, str] = {}  # generation -> its leader, ever
        self.acks: list[_Said] = []
        self.reads: list[_Said] = []
        self.down_views: dict[str, ServerSnapshot] = {}
        self.previous_view = None
        self.outcome = Outcome()
        # One client (CLIENT) by default; with `clients` > 1, a put step's `arg` picks which one
        # sends it, so several sessions put at once, each retrying its own request ids.
        self.client_ids = (CLIENT,) if clients == 1 else tuple(f"{CLIENT}-{k + 1}" for k in range(clients))
        self.request_ids = {client: iter(range(1, 1 << 30)) for client in self.client_ids}
        self.registered: set[str] = set()  # clients whose session is open
        self.next_server = 0

    def make_disk(self, machine: int) -> SimDisk:
        """The disk of the `machine`-th machine, seeded from the schedule."""
        rng = random.Random(self.schedule.seed * 31 + machine)
        if self.disk_kind == "reordering":
            return ReorderingDisk(rng, ("/data",), page_bytes=REORDERING_PAGE_BYTES,
                                  sector_bytes=REORDERING_SECTOR_BYTES)
        return SimDisk(rng, ("/data",))

    @staticmethod
    def _data_dir(server: str) -> str:
        return f"/data/{server}"

    # ------------------------------------------------------------------ reporting
    def violation(self, text: str) -> None:
        self.outcome.violations.append(f"t={self.loop.now:.3f}s: {text}")
        self.event(f"VIOLATION {text}")
        if self.first_violation and not self.stopped:
            self.stopped = True  # once: a second stop would also end the clean-up's run of the loop
            self.loop.stop()  # a search only needs to know that the schedule fails

    def event(self, text: str) -> None:
        self.outcome.events.append(f"{self.loop.now:.6f} {text}")

    def _loop_error(self, loop, context: dict) -> None:
        """An exception nobody handled. A killed machine's cancelled tasks are expected (asyncio's
        own stream callback asks a cancelled task for its exception); anything else is a bug."""
        error = context.get("exception")
        if isinstance(error, (asyncio.CancelledError, _Died)):
            return  # (_Died: a task of a process that died inside a system call; the machine is down)
        self.violation(f"unhandled error in the event loop: {context.get('message')}: {error!r}")

    # ------------------------------------------------------------------ machines
    def start(self, server: str) -> None:
        if server in self.nodes:
            return
        self.incarnations[server] += 1
        peers = {s: self.addresses[s] for s in SERVERS if s != server}
        config = NodeConfig(server, self.addresses[server], peers, self._data_dir(server),
                            tick_seconds=TICK_SECONDS, election_ticks=ELECTION_TICKS,
                            heartbeat_ticks=HEARTBEAT_TICKS,
                            put_timeout=PUT_TIMEOUT, rng_seed=self.rng.getrandbits(32), protocol=self.protocol,
                            **self.node_options())
        storage = self.storage_class(config.data_dir, owner=f"server {server}", fs=self.disks[server])
        node = self.node_class(config, storage=storage)
        self.nodes[server] = node
        self.leading.pop(server, None)
        context = contextvars.copy_context()
        context.run(MACHINE.set, server)
        self.loop.create_task(self._boot(server, node), context=context)
        self.event(f"start {server}")

    def node_options(self) -> dict:
        """More `NodeConfig` fields for every node (Kafka's: where the controller listens)."""
        return {}

    async def _boot(self, server: str, node: Node) -> None:
        try:
            await node.start()
        except NodeError as error:
            if "corrupt" in str(error):
                self.violation(f"{server} cannot restart from what the crash left: {error}")
            self.event(f"{server} failed to start")
            self.stop(server, power_loss=False, crash=False)
            return
        if node.storage.wal.torn_tail is not None:
            self.outcome.witnesses["torn tail dropped on recovery"] += 1
        if self.incarnations[server] > 1:
            self.outcome.witnesses["restarts"] += 1

    def stop(self, server: str, power_loss: bool, crash: bool = True) -> None:
        """The machine's process dies: a crash, or (`crash=False`) the node stopped itself after a
        disk error or could not start."""
        if self.nodes.pop(server, None) is None:
            return
        if crash:
            self.outcome.witnesses["crashes"] += 1
        disk = self.disks[server]
        for job in self.loop.crash(server):
            # The process may die in the middle of a persist under way: after some of its
            # system calls (a write handed to the OS, its fsync not yet), in one, or before any.
            disk.inject(self.rng.randint(1, 4), _Died())
            try:
                job()
            except BaseException:
                pass
            disk.inject(None)
        disk.crash(power_loss)
        self.leading.pop(server, None)
        self.down_views[server] = self._recovered(server)
        self.event(f"down {server} power_loss={power_loss}")

    def _job_started(self, server: str, finishes: float) -> None:
        if server in self.armed:
            power_loss = self.armed.pop(server)
            self.outcome.witnesses["crashes during a persist"] += 1
            self.loop.call_at(self.rng.uniform(self.loop.now, finishes), self.stop, server, power_loss)

    def _recovered(self, server: str) -> ServerSnapshot:
        """What a crashed machine's disk recovers to (on a copy: the restart recovers the original)."""
        storage = DiskStorage(self._data_dir(server), fs=self.disks[server].clone())
        if self.protocol.system == "zab":
            from hwm.impl.zab import EpochStorage

            storage = EpochStorage(storage, self._data_dir(server))  # its currentEpoch must be readable too
        try:
            durable = storage.load()
        except Exception as error:
            self.violation(f"{server}'s disk does not recover after the crash: {error}")
            return ServerSnapshot(0, "follower", (), 0, False)
        storage.crash()
        return down_snapshot(durable, self.protocol)

    def _tag(self, server: str | None, data: bytes) -> object:
        """Tag an answer to a client with the generation its server was in, and the entry a put's
        answer names (as the server's log held it when it answered)."""
        node = self.nodes.get(server)
        replica = node.replica if node is not None else None
        if replica is None:
            return None
        entry = None
        try:
            answer = codec.decode_frame(data)
        except codec.CodecError:
            answer = None
        if isinstance(answer, m.PutReply) and answer.index is not None:
            try:
                entry = replica.entry(answer.index)
            except IndexError:
                entry = None
        return server, replica.generation, entry

    # ------------------------------------------------------------------ watching
    def _watch(self) -> None:
        """After every loop iteration: fail-stopped nodes, and every newly elected leader."""
        for server, node in list(self.nodes.items()):
            if node.failure is not None:
                self.outcome.witnesses["fail-stop after a disk error"] += 1
                self.stop(server, power_loss=False, crash=False)
                continue
            replica = node.replica
            if replica is not None and replica.role == LEADER and self.leading.get(server) != replica.generation:
                self.leading[server] = replica.generation
                self._elected(server, replica)

    def _elected(self, server: str, replica) -> None:
        generation = replica.generation
        self.event(f"{server} leads generation {generation}")
        other = self.leaders.setdefault(generation, server)
        if other != server:
            self.violation(f"{server} and {other} both became leader of generation {generation}")
        if len(self.leaders) > 1:
            self.outcome.witnesses["leader changes"] += 1
        for kind, said in [("acknowledged put", a) for a in self.acks] + [("read", r) for r in self.reads]:
            if said.generation < generation:
                try:
                    held = replica.entry(said.index)
                except IndexError:
                    held = None
                if not said.held_by(held):
                    self.violation(f"{server} became leader of generation {generation} without the {kind} {said}")
        self.check_properties(f"{server} elected")

    def view(self):
        servers = []
        for server in SERVERS:
            node = self.nodes.get(server)
            if node is not None and node.replica is not None:
                servers.append(node.replica.snapshot())
            else:
                servers.append(self.down_views.get(server, ServerSnapshot(0, "follower", (), 0, False)))
        reads = frozenset((r.index, r.entry_generation) for r in self.reads)
        acked = frozenset((a.index, a.entry_generation) for a in self.acks)
        return _View(tuple(servers), reads, acked)

    def check_properties(self, when: str) -> None:
        view = self.view()
        found = check_state(view, ALWAYS)
        if self.previous_view is not None:
            found.update(check_step(self.previous_view, view, ALWAYS))
            for name, witness in check_step(self.previous_view, view, SOMETIMES).items():
                self.outcome.witnesses[name] += 1
        for name, text in found.items():
            self.violation(f"{name} ({when}): {text}")
        self.previous_view = view

    # ------------------------------------------------------------------ the client
    async def call(self, server: str, request: m.Message):
        """One request on a fresh connection: (answer, tag), or None if there was none in time."""
        protocol = _ClientProtocol(self.loop)
        try:
            async with asyncio.timeout(ATTEMPT_SECONDS):
                transport, _ = await self.loop.create_connection(lambda: protocol, *self.addresses[server])
                try:
                    transport.write(codec.encode(request))
                    return await protocol.answer
                finally:
                    transport.close()
        except (OSError, TimeoutError, ConnectionError):
            return None

    async def put(self, value: bytes, first: int, client: str = CLIENT) -> None:
        request = m.PutRequest(value, client, next(self.request_ids[client]))
        deadline = self.loop.now + CLIENT_SECONDS
        server = SERVERS[first % len(SERVERS)]
        while self.loop.now < deadline:
            # The client protocol's session first (Raft §6.3: retried puts apply once per session).
            outgoing = request if client in self.registered else m.RegisterClient(client)
            got = await self.call(server, outgoing)
            answer, tag = got if got is not None else (None, None)
            if isinstance(answer, m.PutReply) and answer.index is not None and outgoing is not request:
                self.registered.add(client)
                continue
            if isinstance(answer, m.PutReply) and answer.index is not None and tag is not None:
                self._acknowledged(request, answer.index, tag)
                return
            if isinstance(answer, m.PutReply) and answer.code == m.SESSION_EXPIRED:
                self.registered.discard(client)
                continue
            if isinstance(answer, m.PutReply) and answer.code in (m.NOT_WRITTEN, m.REFUSED):
                self.event(f"put {value!r} not written: {answer.error}")
                return
            if isinstance(answer, m.PutReply) and answer.leader in self.addresses:
                server = answer.leader
            else:
                server = SERVERS[(SERVERS.index(server) + 1) % len(SERVERS)]
                await asyncio.sleep(0.02)
        self.event(f"put {value!r} outcome unknown")

    def _acknowledged(self, request: m.PutRequest, index: int, tag) -> None:
        server, generation, entry = tag
        if entry is None:
            self.violation(f"{server} acknowledged put {request.value!r} at index {index}, which its log lacks")
            return
        value, ids = decode_entry(entry[1])
        if (value, ids) != (request.value, (request.client, request.request)):
            self.violation(f"{server} acknowledged put {request.value!r} (request {request.request}) at index "
                           f"{index}, which holds {value!r} of request {ids}")
            return
        self.acks.append(_Said(index, entry[0], value, ids, server, generation))
        self.outcome.acked[index] = request.value
        self.outcome.witnesses["acknowledged puts"] += 1
        self.event(f"ack {request.value!r} at {index}@g{entry[0]} by {server} in g{generation}")

    async def get(self, server: str, index: int) -> None:
        got = await self.call(server, m.GetRequest(index))
        if got is None or not isinstance(got[0], m.GetReply) or got[1] is None or got[0].generation is None:
            return
        answer, (_, generation, _) = got
        read = _Said(index, answer.generation, answer.value, None, server, generation)
        for other in self.reads + self.acks:
            if other.index == index and (other.entry_generation, other.value) != (read.entry_generation, read.value):
                self.violation(f"reads disagree: {read}, but earlier {other}")
                break
        self.reads.append(read)
        self.outcome.witnesses["reads"] += 1
        self.event(f"read {read}")

    # ------------------------------------------------------------------ the schedule
    async def main(self) -> None:
        clients: list[asyncio.Task] = []
        for server in SERVERS:
            self.start(server)
        for number, step in enumerate(self.schedule.steps):
            await asyncio.sleep(step.pause_ms / 1000)
            self.event(f"step {step}")
            await self.take_step(number, step, clients)
            self.check_properties(f"after step {number} ({step})")
        await self.settle(clients)

    async def take_step(self, number: int, step: Step, clients: list[asyncio.Task]) -> None:
        server = SERVERS[step.server % len(SERVERS)]
        action = step.action
        if action == "put":
            client = self.client_ids[step.arg % len(self.client_ids)]
            clients.append(asyncio.create_task(self.put(b"v%d" % number, step.server, client)))
        elif action == "get":
            known = max([a.index for a in self.acks], default=0)
            clients.append(asyncio.create_task(self.get(server, 1 + step.arg % max(known, 1))))
        elif action in ("crash", "power"):
            if step.arg % 2:  # not now: in the middle of the next disk write it makes
                self.armed[server] = action == "power"
            else:
                self.stop(server, power_loss=action == "power")
        elif action == "outage":
            self.outcome.witnesses["outages"] += 1
            for s in SERVERS:
                self.stop(s, power_loss=True)
            await asyncio.sleep(0.05 * (1 + step.arg))
            for s in SERVERS:
                self.start(s)
        elif action == "restart":
            self.start(server)
        elif action == "isolate":
            for other in SERVERS:
                if other != server:
                    self.loop.network.partition(server, other)
            self.outcome.witnesses["partitions"] += 1
        elif action == "heal":
            self.loop.network.heal()
        elif action == "fault":
            if server in self.nodes:
                error = errno.ENOSPC if step.arg % 2 == 0 else errno.EIO
                self.disks[server].inject(1 + step.arg // 2, error)

    async def settle(self, clients: list[asyncio.Task]) -> None:
        """Heal everything, restart everything; a write must then commit; check the history."""
        for server, power_loss in self.armed.items():  # no persist came: crash it now
            self.stop(server, power_loss)
        self.armed.clear()
        self.loop.network.heal()
        for disk in self.disks.values():
            disk.inject(None, 0)
        for server in SERVERS:
            self.start(server)
        await asyncio.gather(*clients)
        deadline = self.loop.now + SETTLE_SECONDS
        while not any(a.value == b"final" for a in self.acks):
            if self.loop.now >= deadline:
                self.violation(f"no write committed within {SETTLE_SECONDS:g} s after every fault was healed")
                return
            for server in SERVERS:  # a node that stopped itself on a disk error comes back
                self.start(server)
            await self.put(b"final", self.next_server, self.client_ids[0])
        await asyncio.sleep(0.1)  # heartbeats carry the final HWM to the followers
        leader = max((n for n in self.nodes.values() if n.replica is not None and n.replica.role == LEADER),
                     key=lambda n: n.replica.generation, default=None)
        if leader is None:
            self.violation("no leader after the final write committed")
            return
        replica = leader.replica
        committed = [replica.entry(i) for i in range(1, replica.hwm + 1)]
        for kind, said in [("acknowledged put", a) for a in self.acks] + [("read", r) for r in self.reads]:
            if not said.held_by(committed[said.index - 1] if said.index <= len(committed) else None):
                self.violation(f"the {kind} {said} is not in the final committed log")
        applied: dict[tuple[str, int], int] = {}
        for index, (_, payload) in enumerate(committed, start=1):
            value, ids = decode_entry(payload)
            if ids is None or ids[1] == 0:  # (request 0: a session's opening, which a retry may repeat)
                continue
            if ids[0] in self.client_ids and ids in applied:
                self.violation(f"request {ids[1]} of {ids[0]} ({value!r}) is in the committed log twice, at "
                               f"{applied[ids]} and {index}: a retry applied again despite its session")
            else:
                applied[ids] = index
        if len(self.client_ids) > 1:
            self.outcome.witnesses["clients acknowledged"] += len({a.ids[0] for a in self.acks if a.ids})
        for server, node in self.nodes.items():
            r = node.replica
            if r is None:
                continue
            mine = [r.entry(i) for i in range(1, min(r.hwm, r.last_index) + 1)]
            if mine != committed[: len(mine)]:
                self.violation(f"{server}'s committed log differs from the leader's")
        self.check_properties("at the end")
        self.event(f"final log {[g for g, _ in committed]}")


@dataclass(frozen=True)
class _View:
    servers: tuple[ServerSnapshot, ...]
    reads: frozenset
    acked: frozenset


def shut_down(loop) -> None:
    """Cancel every task a simulation left on `loop` (its machines' and any other), let them finish, and
    close the loop: the end of every system's run."""
    for tasks in list(loop.tasks.values()):
        for task in tasks:
            task.cancel()
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        gathered = asyncio.gather(*pending, return_exceptions=True)
        for _ in range(3):  # a stop at a violation in main's last step is still queued: it ends one run
            try:
                loop.run_until_complete(gathered)
                break
            except RuntimeError:
                if gathered.done():
                    break
    loop.close()
