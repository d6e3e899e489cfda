"""A virtual-time event loop and an in-memory network, so the real runtime runs deterministically.

`SimLoop` is asyncio's own `SelectorEventLoop` with two things replaced:

- the clock: `time()` is virtual, and the selector never blocks: asked to wait `t` seconds for I/O
  (there is none), it moves the clock `t` seconds on, to the next timer. A simulated second costs
  only the callbacks that run in it, and the order of events is a function of the seed alone;
- the outside world: `create_server` and `create_connection` (what `asyncio.start_server` and
  `asyncio.open_connection` call) make in-memory stream connections on a `SimNetwork`, and
  `run_in_executor` (what `asyncio.to_thread` calls, and so the runtime's persist) runs the job on
  the loop after a simulated disk latency instead of in a thread.

Everything else is unchanged asyncio: `impl.runtime.Node` runs its own tasks, timers, peer links
and client handling, unmodified, on this loop.

Which simulated machine a piece of code belongs to is the context variable `MACHINE`: a node is
started in a context where it names the node, and asyncio copies the context into every task and
callback the node creates, so connections, disk jobs and tasks are attributed to their machine
without the runtime knowing. `crash(machine)` kills a machine at once: its tasks are cancelled, its
disk jobs never run, its listener goes away and its connections close (the peer sees an EOF after
what was already on the wire, as when a kernel closes the sockets of a killed process).

The network is TCP-like: a connection is two ordered byte streams; each chunk written arrives after
a latency drawn from the stream's own random generator (seeded from the network seed and the
stream's number, so the order in which connections happen to be closed cannot change any timing),
never before the chunk written before it. `partition(a, b)` stops delivery between two machines:
what is in flight waits (TCP retransmits) and arrives after `heal`, in order; new connections across
it hang until the dialler's timeout. A machine that is down refuses connections.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import functools
import random
import selectors
from collections import deque
from typing import Callable

__all__ = ["MACHINE", "SimLoop", "SimNetwork", "SimulationStalled"]

# The simulated machine the running code belongs to (None: the test's own client code).
MACHINE: contextvars.ContextVar[str | None] = contextvars.ContextVar("hwm_sim_machine", default=None)


class SimulationStalled(RuntimeError):
    """Nothing is ready and no timer is set: every task waits for something that cannot happen."""


class _VirtualSelector(selectors.BaseSelector):
    """Holds registrations (the loop's self-pipe) but never waits: time jumps to the next timer."""

    def __init__(self) -> None:
        self._map: dict = {}
        self.loop: SimLoop | None = None

    def register(self, fileobj, events, data=None):
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._map[fd] = key
        return key

    def unregister(self, fileobj):
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._map.pop(fd)

    def select(self, timeout=None):
        if timeout is None:
            raise SimulationStalled("the simulation stalled: no task can make progress and no timer is set")
        if timeout > 0:
            self.loop.now += timeout
        return []

    def get_map(self):
        return self._map

    def close(self) -> None:
        self._map.clear()


class _Stream:
    """One direction of a connection: chunks in flight, delivered in order after a latency."""

    def __init__(self, network: "SimNetwork", number: int, source: str | None, target: str | None):
        self.network = network
        self.rng = random.Random(network.seed * 1_000_003 + number)
        self.source, self.target = source, target
        self.receiver: "_Transport | None" = None
        self.queue: deque[tuple[float, bytes | None, object]] = deque()  # (arrival, data or None: EOF, meta)
        self.timer: asyncio.TimerHandle | None = None
        self.last_arrival = 0.0

    def push(self, data: bytes | None, meta: object = None) -> None:
        loop = self.network.loop
        arrival = max(loop.now + self.rng.uniform(*self.network.latency), self.last_arrival)
        self.last_arrival = arrival
        self.queue.append((arrival, data, meta))
        self._arm()

    def _arm(self) -> None:
        if self.timer is None and self.queue and not self.network.blocked(self.source, self.target):
            loop = self.network.loop
            self.timer = loop.call_at(max(self.queue[0][0], loop.now), self._deliver)

    def _deliver(self) -> None:
        self.timer = None
        if self.network.blocked(self.source, self.target):
            return  # held until heal()
        _, data, meta = self.queue.popleft()
        receiver = self.receiver
        if receiver is not None and not receiver.dead:
            if data is None:
                receiver.peer_closed()
            elif not receiver.peer_gone:
                self.network.delivery_meta = meta
                receiver.protocol.data_received(data)
                self.network.delivery_meta = None
        self._arm()


class _Transport(asyncio.Transport):
    """One end of a simulated connection."""

    def __init__(self, network: "SimNetwork", machine: str | None, outgoing: _Stream,
                 local: tuple[str, int], remote: tuple[str, int]):
        super().__init__()
        self.network = network
        self.machine = machine
        self.outgoing = outgoing
        self.protocol: asyncio.Protocol | None = None
        self.context: contextvars.Context | None = None
        self._extra = {"sockname": local, "peername": remote}
        self.closing = False
        self.dead = False  # its machine crashed: nothing more reaches its protocol
        self.peer_gone = False

    def get_extra_info(self, name, default=None):
        return self._extra.get(name, default)

    def write(self, data) -> None:
        if self.closing or self.dead or not data:
            return
        if self.peer_gone:
            return  # the peer closed: a real socket would fail with EPIPE later; the data is lost
        data = bytes(data)
        # What the test's client is told is tagged with what the server knew when it said it.
        meta = self.network.meta_of(self.machine, data) if self.outgoing.target is None else None
        self.outgoing.push(data, meta)

    def writelines(self, chunks) -> None:
        self.write(b"".join(chunks))

    def is_closing(self) -> bool:
        return self.closing or self.dead or self.peer_gone

    def close(self) -> None:
        if self.closing or self.dead:
            return
        self.closing = True
        self.outgoing.push(None)
        if not self.peer_gone:
            self.network.loop.call_soon(self.protocol.connection_lost, None, context=self.context)

    def abort(self) -> None:
        self.close()

    def peer_closed(self) -> None:
        """The other end closed (or its machine died): EOF here, after everything it sent."""
        if self.peer_gone:
            return
        self.peer_gone = True
        if not self.closing:
            self.context.run(self.protocol.connection_lost, None)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def get_write_buffer_limits(self):
        return (0, 0)

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return True


class _FakeSocket:
    def __init__(self, address: tuple[str, int]):
        self._address = address

    def getsockname(self):
        return self._address


class _Server(asyncio.AbstractServer):
    def __init__(self, network: "SimNetwork", address: tuple[str, int]):
        self.network = network
        self.address = address
        self.sockets = (_FakeSocket(address),)

    def close(self) -> None:
        self.network.listeners.pop(self.address, None)

    async def wait_closed(self) -> None:
        return None

    def is_serving(self) -> bool:
        return self.address in self.network.listeners

    def get_loop(self):
        return self.network.loop


class SimNetwork:
    """Listeners, connections and partitions between simulated machines."""

    def __init__(self, loop: "SimLoop", seed: int, latency: tuple[float, float] = (0.0001, 0.002)):
        self.loop = loop
        self.seed = seed
        self.latency = latency
        # address -> (machine, protocol factory, context of the machine)
        self.listeners: dict[tuple[str, int], tuple[str | None, Callable, contextvars.Context]] = {}
        self.transports: list[_Transport] = []
        self.cut: set[frozenset] = set()  # pairs of machines that cannot reach each other
        self.streams: list[_Stream] = []
        self.delivery_meta: object = None  # meta of the chunk being delivered (see meta_of)
        self.meta_of: Callable[[str | None, bytes], object] = lambda machine, data: None
        self._ports = 40000

    def blocked(self, a: str | None, b: str | None) -> bool:
        return bool(self.cut) and frozenset((a, b)) in self.cut

    def partition(self, a: str, b: str) -> None:
        self.cut.add(frozenset((a, b)))

    def mend(self, a: str | None, b: str | None) -> None:
        """One cut link back (what it held is delivered); `heal` mends them all."""
        self.cut.discard(frozenset((a, b)))
        for stream in self.streams:
            stream._arm()

    def heal(self) -> None:
        self.cut.clear()
        for stream in self.streams:
            stream._arm()

    def crash(self, machine: str) -> None:
        """Close the listeners and connections of a machine that died."""
        for address, (owner, _, _) in list(self.listeners.items()):
            if owner == machine:
                del self.listeners[address]
        alive = []
        for transport in self.transports:
            if transport.machine == machine:
                if not transport.closing:
                    transport.outgoing.push(None)
                transport.dead = True
            elif not (transport.dead or (transport.closing and transport.peer_gone)):
                alive.append(transport)
        self.transports = alive
        self.streams = [s for s in self.streams if s.queue or s.receiver is None or not s.receiver.dead]

    async def connect(self, protocol_factory, host: str, port: int):
        source = MACHINE.get()
        listener = self.listeners.get((host, port))
        target = listener[0] if listener is not None else None
        number = len(self.streams)
        rng = random.Random(self.seed * 7919 + number)
        await asyncio.sleep(rng.uniform(*self.latency) * 2)  # SYN, SYN-ACK
        listener = self.listeners.get((host, port))
        if listener is None:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "connection refused")
        target, server_factory, server_context = listener
        if self.blocked(source, target):
            await asyncio.sleep(3600)  # SYNs are dropped: the dialler's timeout ends this
            raise OSError(errno.ETIMEDOUT, "connection timed out")
        self._ports += 1
        client_address = ("10.0.1.1", self._ports)
        there = _Stream(self, len(self.streams), source, target)
        back = _Stream(self, len(self.streams) + 1, target, source)
        self.streams += [there, back]
        near = _Transport(self, source, there, client_address, (host, port))
        far = _Transport(self, target, back, (host, port), client_address)
        there.receiver, back.receiver = far, near
        near.context = contextvars.copy_context()
        far.context = server_context
        self.transports += [near, far]
        near.protocol = protocol_factory()
        far.protocol = server_context.run(server_factory)
        near.protocol.connection_made(near)
        server_context.run(far.protocol.connection_made, far)
        return near, near.protocol

    def listen(self, protocol_factory, host: str, port: int) -> _Server:
        address = (host, port)
        if address in self.listeners:
            raise OSError(errno.EADDRINUSE, f"address {host}:{port} already in use")
        self.listeners[address] = (MACHINE.get(), protocol_factory, contextvars.copy_context())
        return _Server(self, address)


class _Job:
    """A `run_in_executor` call: runs on the loop once its simulated disk latency has passed."""

    def __init__(self, func: Callable, args: tuple, future: asyncio.Future):
        self.func, self.args, self.future = func, args, future
        self.handle: asyncio.TimerHandle | None = None
        self.done = False

    def run(self) -> None:
        self.done = True
        if self.future.cancelled():
            return
        try:
            result = self.func(*self.args)
        except BaseException as error:  # handed to the awaiting task, as a thread would
            self.future.set_exception(error)
        else:
            self.future.set_result(result)


class SimLoop(asyncio.SelectorEventLoop):
    """asyncio's loop on a virtual clock, with a `SimNetwork` and simulated disk latency."""

    def __init__(self, seed: int, latency: tuple[float, float] = (0.0001, 0.002),
                 disk_latency: tuple[float, float] = (0.0001, 0.003)):
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = 0.0
        self.rng = random.Random(seed)
        self.disk_latency = disk_latency
        self.network = SimNetwork(self, seed, latency)
        self.tasks: dict[str, list[asyncio.Task]] = {}
        self.jobs: dict[str, list[_Job]] = {}
        self.after_step: Callable[[], None] | None = None  # called after every loop iteration
        self.on_job: Callable[[str, float], None] | None = None  # (machine, when the job runs)

    def time(self) -> float:
        return self.now

    def _run_once(self) -> None:
        super()._run_once()
        if self.after_step is not None:
            self.after_step()

    def create_task(self, coro, *, name=None, context=None):
        task = super().create_task(coro, name=name, context=context)
        machine = (context.get(MACHINE) if context is not None else MACHINE.get())
        if machine is not None:
            tasks = self.tasks.setdefault(machine, [])
            if len(tasks) > 64:
                tasks[:] = [t for t in tasks if not t.done()]
            tasks.append(task)
        return task

    def run_in_executor(self, executor, func, *args):
        """Run `func` on the loop after a simulated disk latency (the runtime's `to_thread`)."""
        future = self.create_future()
        machine = MACHINE.get()
        job = _Job(func, args, future)
        job.handle = self.call_later(self.rng.uniform(*self.disk_latency), job.run)
        if machine is not None and self.on_job is not None:
            self.on_job(machine, job.handle.when())
        if machine is not None:
            jobs = self.jobs.setdefault(machine, [])
            if len(jobs) > 64:
                jobs[:] = [j for j in jobs if not j.done]
            jobs.append(job)
        return future

    def crash(self, machine: str) -> list[Callable[[], object]]:
        """Kill a machine's process at once: no more of its code runs, except cancellation.
        Returns the disk jobs it had under way (not run), for the caller to run part of: a crash
        in the middle of a persist."""
        interrupted = []
        for job in self.jobs.pop(machine, []):
            if not job.done:
                job.handle.cancel()
                job.done = True
                interrupted.append(functools.partial(job.func, *job.args))
        self.network.crash(machine)
        for task in self.tasks.pop(machine, []):
            task.cancel()
        return interrupted

    async def create_connection(self, protocol_factory, host=None, port=None, **kwargs):
        return await self.network.connect(protocol_factory, host, port)

    async def create_server(self, protocol_factory, host=None, port=None, **kwargs):
        return self.network.listen(protocol_factory, host, port)

    async def getaddrinfo(self, *args, **kwargs):
        raise OSError(errno.EAFNOSUPPORT, "the simulated network has no name resolution")

