"""BookKeeper under the deterministic simulation: three bookies (`impl.bookie_server.BookieServer`,
unmodified), each on a machine of its own with its own simulated disk, and the ledger's writer and
recovery client (`impl.bookkeeper.Writer`, `RecoveryClient`) driven over the simulated network.

A `bridge.dst.Schedule` drives it as it drives the raft family's nodes, with BookKeeper's meaning:
`put` is an add of the writer (sent to every bookie, one connection per request; the entry is
acknowledged once an ack quorum stored it); `get` is a reader's check of one bookie's LAC; `crash`,
`power`, `outage`, `restart`, `isolate`, `heal` and `fault` (ENOSPC or EIO on the `arg`-th write-like
call: the bookie must stop rather than answer what it could not make durable) act on the bookies.
BookKeeper's own steps (`BOOKKEEPER_ACTIONS`): `recover` starts the ledger's recovery now, while the
writer's adds go on (apache/bookkeeper issue 2614 needs exactly that); `cut` and `mend` take one link
away and give it back, between a bookie and the writer's machine (an even `arg`) or the recovery
client's (an odd one). The writer and the recovery client run on machines of their own. After the
last step everything is healed and restarted, the adds under way finish, and the ledger is recovered
(or its recovery finishes): fencing reads to every bookie until E - AQ + 1 answered (the others are
not sent again), recovery reads to every bookie of the entry's write set until the ledger's end,
recovery adds of the entries read to every bookie until an ack quorum of each entry's write set
acknowledged them (sent again to a bookie that did not answer), then the close written back.

Checked (`Outcome.violations`, the first of each kind): when recovery closes the ledger, each entry
it read after the highest LAC reported is on an ack quorum of its write set (the model's
ClosedLedgerOnAckQuorum: recovery closes only once its recovery adds were acknowledged); every
acknowledged entry is in the closed ledger, at its index, with its value (BookKeeper's promise);
every live bookie holds the closed ledger afterwards; a bookie restarts from whatever the crash left
(a refused journal is a violation); no unhandled error. Witnesses: acknowledged adds, adds left unacknowledged, entries
recovered beyond the last acknowledged one, crashes, power failures, restarts, fail-stops, and the
disks' own counts, closes that waited for recovery adds (a round of them left the ledger
open).

`PLANTS` holds the bookie whose journal never fsyncs (`bookie-no-fsync`): it answers an add before
the entry is durable, so a power failure loses an acknowledged entry. The protocol's
`bookkeeper_recovery_reads_fence` is the recovery client's (the preset
bookkeeper-recovery-without-fencing is issue 2614); `bookkeeper_schedules()` draws schedules with
BookKeeper's steps for a search.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import logging
import random

from hwm.bridge.dst.disk import SimDisk
from hwm.bridge.dst.net import MACHINE, SimLoop
from hwm.bridge.dst.plants import _NoFsyncStorage
from hwm.bridge.dst.schedule import Outcome, Schedule, Step, schedules
from hwm.bridge.dst.simulation import DISK_LATENCY, _ClientProtocol, shut_down
from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.bookie_server import BookieServer
from hwm.impl.bookkeeper import HOLE, RecoveryClient, Writer, ledger_options
from hwm.impl.storage import DiskStorage, StorageError
from hwm.properties.protocol import BOOKKEEPER, Protocol

__all__ = ["BOOKIES", "BOOKKEEPER_ACTIONS", "PLANTS", "RECOVERY_RACE", "bookkeeper_schedules", "recovery_race_schedules",
           "run_bookkeeper_schedule"]

BOOKIES = ("S1", "S2", "S3")
WRITER, RECOVERY = "writer", "recovery"
# The clients' machines: the writer's is the simulation's own (None), the recovery client's its own.
WRITER_MACHINE, RECOVERY_MACHINE = None, "recovery-client"
BOOKKEEPER_ACTIONS = ("recover", "cut", "mend")
# Apache/bookkeeper issue 2614's race, as (action, bookie, arg) steps: the writer's add reaches S1
# only (S2 and S3 cut from the writer); recovery starts while S3 is cut from it (its fencing read is
# lost) and, once S1 and S2 answered the fencing reads, S1 is cut from it (its "found" does not come);
# S2 and S3 answer "no such entry", so recovery closes the ledger empty; then the writer reaches S3.
# Without FLAG_DO_FENCING on recovery reads, S3 stores the entry and with S1 acknowledges it.
RECOVERY_RACE = (("cut", 1, 0), ("cut", 2, 0), ("put", 0, 0), ("cut", 2, 1), ("recover", 0, 0), ("cut", 0, 1),
                 ("mend", 2, 1), ("mend", 2, 0))
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
        # The protocol's ledger (E, WQ, AQ); no ensemble changes here (spares stay idle).
        self.writer = Writer(WRITER, BOOKIES, **ledger_options(protocol))
        self.recovery = RecoveryClient(RECOVERY, BOOKIES, protocol, **ledger_options(protocol))
        self.recovering: asyncio.Task | None = None
        self.unclosed: list = []
        self.closed: tuple | None = None
        # Each bookie's journal when it last went down: what it answered for is durable there.
        self.journals: dict[str, tuple] = {}
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
        server = self.servers.pop(bookie, None)
        if server is None:
            return
        if getattr(server, "bookie", None) is not None:  # (it had started)
            self.journals[bookie] = tuple(server.bookie._log)
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
            for bookie in self.writer.ensemble:
                if self.writer.fenced_out:
                    break
                if self.writer.stored[bookie] < entry:  # a bookie that stored it is not asked again
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
            for index, entry in enumerate(answer.entries[: answer.lac], start=1):
                value = entry[1]
                if entry != HOLE and self.values.get(index) != value:  # (a hole: another write set's)
                    self.violation(f"{bookie} serves entry {index} = {value!r} under its LAC {answer.lac}; the "
                                   f"writer added {self.values.get(index)!r}")

    def start_recovery(self) -> asyncio.Task:
        """The ledger's recovery, on the recovery client's machine (once: a second call joins it)."""
        if self.recovering is None:
            context = contextvars.copy_context()
            context.run(MACHINE.set, RECOVERY_MACHINE)
            self.recovering = self.loop.create_task(self.recover(), context=context)
            self.event("recovery starts")
        return self.recovering

    async def recover(self) -> None:
        recovery = self.recovery
        fencing, waited = True, False
        deadline = self.loop.now + 5.0
        while recovery.closed is None and self.loop.now < deadline:
            if fencing:  # until E - AQ + 1 answered; the others are not asked again
                for bookie in recovery.ensemble:
                    if bookie not in recovery.responded:
                        recovery.fence(bookie)
                        await self.exchange(recovery, bookie)
                fencing = len(recovery.responded) < recovery.quorums.fencing_needed
            if not fencing and recovery.closing is None:
                for bookie in recovery.quorums.write_set(recovery.fragments, recovery.reading):
                    if recovery.closing is None and bookie not in recovery.negatives:
                        recovery.recovery_read(bookie)
                        await self.exchange(recovery, bookie)
            if recovery.closing is not None:
                # Recovery adds to every bookie that has not acknowledged them (again, while one does
                # not answer); the close comes once an ack quorum of each write set did.
                for bookie in sorted(recovery.members() - recovery.added, key=BOOKIES.index):
                    if recovery.closed is None:
                        recovery.recovery_add(bookie)
                        await self.exchange(recovery, bookie)
                if recovery.closed is None and not waited:
                    waited = True
                    self.outcome.witnesses["closes that waited for recovery adds"] += 1
            if recovery.closed is None:
                await asyncio.sleep(0.05)
        if recovery.closed is None:
            self.violation(f"recovery could not close the ledger in 5 s (read up to entry {recovery.reading})")
            return
        out = recovery.ready()
        self.closed = out.closed
        self.event(f"recovery closes the ledger at entry {len(out.closed)}")
        self.check_close()
        self.unclosed = list(out.messages)
        await self.write_close()

    def check_close(self) -> None:
        """When recovery closes the ledger, every entry it read after the highest LAC reported is on an
        ack quorum of its write set (it closes once its recovery adds were acknowledged by one). A
        bookie's journal is the live server's, or the one it had when it went down: every entry a
        bookie answered for is durable in it (an unsynced one may be counted too, never one missed)."""
        recovery, closed = self.recovery, self.closed
        for index in range(recovery.recovery_start + 1, len(closed) + 1):
            write_set = recovery.quorums.write_set(recovery.fragments, index)
            holders = []
            for bookie in write_set:
                server = self.servers.get(bookie)
                journal = tuple(server.bookie._log) if getattr(server, "bookie", None) is not None \
                    else self.journals.get(bookie, ())
                if len(journal) >= index and journal[index - 1] == closed[index - 1]:
                    holders.append(bookie)
            if len(holders) < recovery.quorums.ack_quorum:
                self.violation(f"recovery closed the ledger at entry {len(closed)} while entry {index}, which it read "
                               f"after the highest LAC reported ({recovery.recovery_start}), was on "
                               f"{len(holders)} bookie(s) of its write set {list(write_set)} "
                               f"({', '.join(holders) or 'none'}), fewer than the ack quorum of "
                               f"{recovery.quorums.ack_quorum}")
                return

    async def write_close(self) -> None:
        """The close and its write-back to every bookie; a bookie that did not answer gets it again
        once everything is healed."""
        left = []
        for to, message in self.unclosed:
            if not isinstance(await self.call(to, message), m.AddReply):
                left.append((to, message))
        self.unclosed = left

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
                self.loop.network.partition(bookie, WRITER_MACHINE)  # the clients' machines too
                self.loop.network.partition(bookie, RECOVERY_MACHINE)
            elif step.action in ("cut", "mend"):
                client = RECOVERY_MACHINE if step.arg % 2 else WRITER_MACHINE
                if step.action == "cut":
                    self.loop.network.partition(bookie, client)
                else:
                    self.loop.network.mend(bookie, client)
            elif step.action == "recover":
                self.start_recovery()
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
        await self.start_recovery()
        await self.write_close()
        closed = self.closed
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
            if server.failure is not None or bookie not in self.recovery.members():
                continue
            # Its write sets' entries of the closed ledger, a hole (or nothing) elsewhere. Beyond the close
            # anything may lie: a bookie that recovery did not fence may still take a late add of the writer
            # (the model allows it too), and no reader reads past the ledger's end in the metadata.
            journal = tuple(server.bookie._log)
            mine = self.recovery.write_back(bookie)
            if any(
                    want != HOLE and (index >= len(journal) or journal[index] != want)
                    for index, want in enumerate(mine)) or any(
                    want == HOLE and index < len(journal) and journal[index] != HOLE
                    for index, want in enumerate(mine)):
                self.violation(f"{bookie} holds {len(journal)} entries after the close, and they differ from its "
                               f"write sets' entries of the closed ledger's {len(closed)}")


def bookkeeper_schedules(max_steps: int = 10, max_pause_ms: int = 200):
    """Hypothesis strategy (tests only): `bridge.dst.schedules` with BookKeeper's own steps among
    them, a `recover` in every schedule, as the search for issue 2614 needs."""
    from hypothesis import strategies as st

    machine = st.integers(0, len(BOOKIES) - 1)
    own = st.builds(Step, st.integers(0, max_pause_ms), st.sampled_from(BOOKKEEPER_ACTIONS + ("put",)), machine,
                    st.integers(0, 7))

    @st.composite
    def schedule(draw):
        base = draw(schedules(max_steps, max_pause_ms))
        steps = list(base.steps)
        for step in draw(st.lists(own, max_size=max_steps)):
            steps.insert(draw(st.integers(0, len(steps))), step)
        steps.insert(draw(st.integers(0, len(steps))), draw(st.builds(Step, st.integers(0, max_pause_ms),
                                                                      st.just("recover"))))
        return Schedule(base.seed, tuple(steps))

    return schedule()


def recovery_race_schedules(max_pause_ms: int = 500):
    """Hypothesis strategy (tests only): `RECOVERY_RACE`'s steps at random pauses, with a random
    seed (disk and network latencies): a search over when the race's steps happen."""
    from hypothesis import strategies as st

    pauses = st.lists(st.integers(0, max_pause_ms), min_size=len(RECOVERY_RACE), max_size=len(RECOVERY_RACE))
    return st.builds(lambda seed, waits: Schedule(seed, tuple(Step(w, *s) for w, s in zip(waits, RECOVERY_RACE))),
                     st.integers(0, 2**32 - 1), pauses)


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
        shut_down(loop)
        random.setstate(saved_random)
        bookie_log.disabled = disabled
    for disk in simulation.disks.values():
        simulation.outcome.witnesses.update(disk.stats)
    return simulation.outcome
