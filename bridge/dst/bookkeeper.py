"""BookKeeper under the deterministic simulation: three bookies (`impl.bookie_server.BookieServer`,
unmodified), each on a machine of its own with its own simulated disk, and the ledger's writer and
recovery client (`impl.bookkeeper.Writer`, `RecoveryClient`) driven over the simulated network.

A `bridge.dst.Schedule` drives it as it drives the raft family's nodes, with BookKeeper's meaning:
`put` is an add of the writer (sent to every bookie, one connection per request; the entry is
acknowledged once an ack quorum stored it); `get` is a reader's check of one bookie's LAC; `crash`,
`power`, `outage`, `restart`, `isolate`, `heal` and `fault` (ENOSPC or EIO on the `arg`-th write-like
call: the bookie must stop rather than answer what it could not make durable) act on the bookies.
After the last step everything is healed and restarted, the adds under way finish, and the ledger
is recovered: fencing reads to every bookie, recovery reads, the close written back.

Checked (`Outcome.violations`, the first of each kind): every acknowledged entry is in the closed
ledger, at its index, with its value (BookKeeper's promise); every live bookie holds the closed
ledger afterwards; a bookie restarts from whatever the crash left (a refused journal is a
violation); no unhandled error. Witnesses: acknowledged adds, adds left unacknowledged, entries
recovered beyond the last acknowledged one, crashes, power failures, restarts, fail-stops, and the
disks' own counts.

`PLANTS` holds the bookie whose journal never fsyncs (`bookie-no-fsync`): it answers an add before
the entry is durable, so a power failure loses an acknowledged entry.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import logging
import random

from hwm.bridge.dst import DISK_LATENCY, Outcome, Schedule, _ClientProtocol, _NoFsyncStorage
from hwm.bridge.dst.disk import SimDisk
from hwm.bridge.dst.net import MACHINE, SimLoop
from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.bookie_server import BookieServer
from hwm.impl.bookkeeper import RecoveryClient, Writer
from hwm.impl.storage import DiskStorage, StorageError
from hwm.properties.protocol import BOOKKEEPER, Protocol

__all__ = ["BOOKIES", "PLANTS", "run_bookkeeper_schedule"]

BOOKIES = ("S1", "S2", "S3")
WRITER, RECOVERY = "writer", "recovery"
ATTEMPT_SECONDS = 0.3  # one request's time to be answered
ADD_SECONDS = 2.0  # an add's time to reach an ack quorum
PLANTS = {None: DiskStorage, "bookie-no-fsync": _NoFsyncStorage}


class BookKeeperSimulation:
    def __init__(self, schedule: Schedule, plant: str | None, protocol: Protocol):
        self.schedule = schedule
        self.storage_class = PLANTS[plant]
        self.loop = SimLoop(schedule.seed, disk_latency=DISK_LATENCY[schedule.seed % len(DISK_LATENCY)])
        self.loop.set_exception_handler(self._loop_error)
        self.rng = random.Random(schedule.seed ^ 0xB00C)
        self.addresses = {b: (f"10.0.0.{k + 1}", 7000) for k, b in enumerate(BOOKIES)}
        self.disks = {b: SimDisk(random.Random(schedule.seed * 31 + k), ("/data",)) for k, b in enumerate(BOOKIES)}
        self.servers: dict[str, BookieServer] = {}
        self.incarnations = {b: 0 for b in BOOKIES}
        self.writer = Writer(WRITER, BOOKIES)
        self.recovery = RecoveryClient(RECOVERY, BOOKIES, protocol)
        self.values: dict[int, bytes] = {}
        self.acknowledged: set[int] = set()
        self.outcome = Outcome()

    # ------------------------------------------------------------------ reporting
    def violation(self, text: str) -> None:
        self.outcome.violations.append(f"t={self.loop.now:.3f}s: {text}")
        self.event(f"VIOLATION {text}")

    def event(self, text: str) -> None:
        self.outcome.events.append(f"{self.loop.now:.6f} {text}")

    def _loop_error(self, loop, context: dict) -> None:
        error = context.get("exception")
        if isinstance(error, asyncio.CancelledError) or type(error).__name__ == "_Died":
            return
        self.violation(f"unhandled error in the event loop: {context.get('message')}: {error!r}")

    # ------------------------------------------------------------------ machines
    def start(self, bookie: str) -> None:
        if bookie in self.servers:
            return
        self.incarnations[bookie] += 1
        storage = self.storage_class(f"/data/{bookie}", owner=f"bookie {bookie}", fs=self.disks[bookie])
        server = BookieServer(bookie, self.addresses[bookie], f"/data/{bookie}", storage=storage)
        self.servers[bookie] = server
        context = contextvars.copy_context()
        context.run(MACHINE.set, bookie)
        self.loop.create_task(self._boot(bookie, server), context=context)

    async def _boot(self, bookie: str, server: BookieServer) -> None:
        try:
            await server.start()
        except (StorageError, OSError) as error:
            if not isinstance(error, OSError) or error.errno not in (errno.ENOSPC, errno.EIO):
                self.violation(f"{bookie} cannot restart from what the crash left: {error}")
            self.servers.pop(bookie, None)
            return
        if self.incarnations[bookie] > 1:
            self.outcome.witnesses["restarts"] += 1
        await server.stopped()
        if server.failure is not None and self.servers.get(bookie) is server:
            self.outcome.witnesses["fail-stops"] += 1
            self.stop(bookie, power_loss=False, crash=False)

    def stop(self, bookie: str, power_loss: bool, crash: bool = True) -> None:
        if self.servers.pop(bookie, None) is None:
            return
        if crash:
            self.outcome.witnesses["power failures" if power_loss else "crashes"] += 1
        for job in self.loop.crash(bookie):
            try:
                job()
            except BaseException:
                pass
        self.disks[bookie].crash(power_loss)
        self.event(f"down {bookie} power_loss={power_loss}")

    # ------------------------------------------------------------------ the clients
    async def call(self, bookie: str, request: m.Message):
        protocol = _ClientProtocol(self.loop)  # the answer is the first frame back
        try:
            async with asyncio.timeout(ATTEMPT_SECONDS):
                transport, _ = await self.loop.create_connection(lambda: protocol, *self.addresses[bookie])
                try:
                    transport.write(codec.encode(request))
                    answer, _ = await protocol.answer
                    return answer
                finally:
                    transport.close()
        except (OSError, TimeoutError, ConnectionError):
            return None

    async def exchange(self, client, bookie: str) -> None:
        """`client`'s requests for `bookie`, and the answers stepped, until it sends nothing more."""
        for _ in range(8):
            if client.closed_ledger() is not None:
                return  # the close goes to every bookie (`recover`)
            out = client.ready()
            for index, _ in out.acknowledged:
                self.acknowledged.add(index)
                self.outcome.witnesses["adds acknowledged"] += 1
            requests = [message for to, message in out.messages if to == bookie]
            if not requests:
                return
            for request in requests:
                answer = await self.call(bookie, request)
                if not isinstance(answer, (m.AddReply, m.ReadLacReply, m.ReadEntryReply)):
                    client.ready()  # lost with the connection (or refused by a bookie that stopped)
                    return
                client.step(answer)

    async def add(self, value: bytes) -> None:
        if self.writer.fenced_out:
            return
        entry = self.writer.add(value)
        self.values[entry] = value
        deadline = self.loop.now + ADD_SECONDS
        while self.writer.lac < entry and self.loop.now < deadline and not self.writer.fenced_out:
            for bookie in BOOKIES:
                self.writer.send_add(bookie)
                await self.exchange(self.writer, bookie)
            if self.writer.lac < entry:
                await asyncio.sleep(0.05)
        if self.writer.lac < entry:
            self.outcome.witnesses["adds not acknowledged"] += 1

    async def read(self, bookie: str) -> None:
        """A reader asks a bookie's LAC (without fencing) and checks the entries up to it."""
        answer = await self.call(bookie, m.ReadLac(RECOVERY, False))
        if isinstance(answer, m.ReadLacReply):
            self.outcome.witnesses["reads"] += 1
            for index, (_, value) in enumerate(answer.entries, start=1):
                if self.values.get(index) != value:
                    self.violation(f"{bookie} serves entry {index} = {value!r} under its LAC {answer.lac}; the "
                                   f"writer added {self.values.get(index)!r}")

    async def recover(self) -> tuple | None:
        deadline = self.loop.now + 5.0
        while self.recovery.closed is None and self.loop.now < deadline:
            for bookie in BOOKIES:
                if bookie not in self.recovery.responded:
                    self.recovery.fence(bookie)
                    await self.exchange(self.recovery, bookie)
            if len(self.recovery.responded) >= self.recovery.quorums.fencing_needed:
                for bookie in sorted(self.recovery.responded):
                    if self.recovery.closed is None and bookie not in self.recovery.negatives:
                        self.recovery.recovery_read(bookie)
                        await self.exchange(self.recovery, bookie)
            if self.recovery.closed is None:
                await asyncio.sleep(0.05)
        if self.recovery.closed is None:
            self.violation(f"recovery could not close the ledger in 5 s (read up to entry {self.recovery.reading})")
            return None
        out = self.recovery.ready()
        for to, message in out.messages:
            await self.call(to, message)
        return out.closed

    # ------------------------------------------------------------------ the schedule
    async def main(self) -> None:
        adds: list[asyncio.Task] = []
        for bookie in BOOKIES:
            self.start(bookie)
        for number, step in enumerate(self.schedule.steps):
            await asyncio.sleep(step.pause_ms / 1000)
            self.event(f"step {step}")
            bookie = BOOKIES[step.server % len(BOOKIES)]
            if step.action == "put":
                adds.append(asyncio.create_task(self.add(b"v%d" % number)))
            elif step.action == "get":
                adds.append(asyncio.create_task(self.read(bookie)))
            elif step.action in ("crash", "power"):
                self.stop(bookie, power_loss=step.action == "power")
            elif step.action == "outage":
                for b in BOOKIES:
                    self.stop(b, power_loss=True)
                await asyncio.sleep(0.05 * (1 + step.arg))
                for b in BOOKIES:
                    self.start(b)
            elif step.action == "restart":
                self.start(bookie)
            elif step.action == "isolate":
                for other in BOOKIES:
                    if other != bookie:
                        self.loop.network.partition(bookie, other)
                self.loop.network.partition(bookie, None)  # the clients' machine too
            elif step.action == "heal":
                self.loop.network.heal()
            elif step.action == "fault" and bookie in self.servers:
                self.disks[bookie].inject(1 + step.arg // 2, errno.ENOSPC if step.arg % 2 == 0 else errno.EIO)
        await self.settle(adds)

    async def settle(self, adds: list[asyncio.Task]) -> None:
        self.loop.network.heal()
        for disk in self.disks.values():
            disk.inject(None, 0)
        for bookie in BOOKIES:
            self.start(bookie)
        await asyncio.gather(*adds)
        await asyncio.sleep(0.1)  # every bookie has started
        closed = await self.recover()
        if closed is None:
            return
        for index in sorted(self.acknowledged):
            if len(closed) < index or closed[index - 1][1] != self.values[index]:
                self.violation(f"entry {index} ({self.values[index]!r}), acknowledged to the writer's client, is "
                               f"not in the closed ledger of {len(closed)} entries")
                break
        self.outcome.witnesses["ledgers closed"] += 1
        if len(closed) > max(self.acknowledged, default=0):
            self.outcome.witnesses["entries recovered beyond the last acknowledged"] += 1
        for bookie, server in self.servers.items():
            journal = tuple(server.bookie._log)
            if server.failure is None and journal != closed:
                self.violation(f"{bookie} holds {len(journal)} entries after the close, not the closed ledger's "
                               f"{len(closed)}")


def run_bookkeeper_schedule(schedule: Schedule, plant: str | None = None, protocol: Protocol = BOOKKEEPER) -> Outcome:
    """Run one schedule on three simulated bookies; deterministic in `schedule` (and `plant`)."""
    if protocol.system != "bookkeeper":
        raise ValueError(f"protocol: BookKeeper's simulation runs bookkeeper presets, not {protocol.system}")
    if plant not in PLANTS:
        raise ValueError(f"plant: {plant!r} is not one of {', '.join(str(p) for p in PLANTS)}")
    simulation = BookKeeperSimulation(schedule, plant, protocol)
    loop = simulation.loop
    saved_random = random.getstate()
    random.seed(schedule.seed)
    bookie_log = logging.getLogger("hwm.bookie")
    disabled, bookie_log.disabled = bookie_log.disabled, True
    try:
        loop.run_until_complete(simulation.main())
    finally:
        for tasks in list(loop.tasks.values()):
            for task in tasks:
                task.cancel()
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
        random.setstate(saved_random)
        bookie_log.disabled = disabled
    for disk in simulation.disks.values():
        simulation.outcome.witnesses.update(disk.stats)
    return simulation.outcome
