"""The virtual-time loop and the simulated network (bridge/dst/net.py)."""

from __future__ import annotations

import asyncio
import contextvars
import time

import pytest

from hwm.bridge.dst.net import MACHINE, SimLoop


class Collect(asyncio.Protocol):
    def __init__(self):
        self.data = bytearray()
        self.lost = False
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.data += data

    def connection_lost(self, exc):
        self.lost = True


def on(machine: str) -> contextvars.Context:
    context = contextvars.copy_context()
    context.run(MACHINE.set, machine)
    return context


def run(loop: SimLoop, coro, machine: str):
    try:
        return loop.run_until_complete(loop.create_task(coro, context=on(machine)))
    finally:
        loop.close()


def test_virtual_time_costs_no_wall_time():
    loop = SimLoop(1)
    started = time.monotonic()
    run(loop, asyncio.sleep(3600), "A")
    assert loop.time() >= 3600 and time.monotonic() - started < 1


def test_a_partition_holds_data_in_order_until_it_heals_and_a_crash_closes_the_connection():
    loop = SimLoop(2)
    server = Collect()
    on("A").run(loop.network.listen, lambda: server, "10.0.0.1", 7000)

    async def client():
        transport, _ = await loop.create_connection(Collect, "10.0.0.1", 7000)
        transport.write(b"a")
        await asyncio.sleep(0.01)
        assert bytes(server.data) == b"a"
        loop.network.partition("A", "B")
        transport.write(b"b")
        transport.write(b"c")
        await asyncio.sleep(5)
        assert bytes(server.data) == b"a"  # held, as TCP retransmits
        loop.network.heal()
        await asyncio.sleep(0.01)
        assert bytes(server.data) == b"abc"
        loop.crash("A")
        with pytest.raises(ConnectionRefusedError):
            await loop.create_connection(Collect, "10.0.0.1", 7000)
        await asyncio.sleep(0.01)
        return transport

    transport = run(loop, client(), "B")
    assert transport.is_closing()  # A's kernel closed the connection when A died


def test_a_disk_job_runs_after_its_latency_and_not_at_all_after_a_crash():
    loop = SimLoop(3, disk_latency=(0.5, 0.5))
    ran = []

    async def node():
        await asyncio.to_thread(ran.append, "first")
        assert loop.time() == pytest.approx(0.5)
        job = asyncio.ensure_future(asyncio.to_thread(ran.append, "second"))
        await asyncio.sleep(0.1)
        interrupted = loop.crash("A")
        assert len(interrupted) == 1  # handed back to be run in part, or not at all
        await asyncio.sleep(1)
        return job

    async def observer():
        task = loop.create_task(node(), context=on("A"))
        await asyncio.sleep(2)
        return task

    task = run(loop, observer(), "B")
    assert ran == ["first"] and task.cancelled()
