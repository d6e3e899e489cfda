"""Kafka's controller saves its partition state before it sends what it decided.

A broker told "S1 leads epoch 1" by a controller that then fails before that epoch is on its disk
would follow a leader the restarted controller never elected, and the controller would elect
another leader for the same epoch. Here the controller runs for real (TCP, its links dialling three
loopback brokers that record what they hear) on a disk whose fsync fails from the k-th call on: a
controller that sends first lets the brokers hear a state the disk never held.
"""

from __future__ import annotations

import asyncio
import errno
import json

import pytest

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.controller import PARTITION_STATE_FILE, ControllerConfig, ControllerNode, parse_partition_state
from hwm.impl.fs import OsFileSystem
from hwm.properties.protocol import KAFKA
from tests.impl.ports import free_ports

pytestmark = pytest.mark.network

BROKERS = ("S1", "S2", "S3")


class FsyncFailsFrom(OsFileSystem):
    """The OS's file system, but every fsync from the `first_failing`-th on fails with EIO."""

    def __init__(self, first_failing: int):
        self.first_failing = first_failing
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        if self.fsyncs >= self.first_failing:
            raise OSError(errno.EIO, "injected fsync failure")
        super().fsync(fd)


async def _brokers_hear(ports, heard):
    async def serve(reader, writer, broker):
        frames = codec.FrameReader()
        while data := await reader.read(65536):
            heard[broker].extend(codec.decode(payload) for payload in frames.feed(data))
        writer.close()

    return [await asyncio.start_server(lambda r, w, b=b: serve(r, w, b), "127.0.0.1", port)
            for b, port in zip(BROKERS, ports)]


@pytest.mark.parametrize("first_failing", [1, 2])
def test_the_brokers_hear_only_partition_states_the_controller_has_saved(tmp_path, first_failing):
    # first_failing 1: the first save (a broker registers) fails; 2: the first election's save fails.
    *broker_ports, listen = free_ports(4)
    heard: dict[str, list] = {b: [] for b in BROKERS}
    fs = FsyncFailsFrom(first_failing)

    async def scenario():
        servers = await _brokers_hear(broker_ports, heard)
        config = ControllerConfig(("127.0.0.1", listen), {b: ("127.0.0.1", p) for b, p in zip(BROKERS, broker_ports)},
                                  str(tmp_path), KAFKA, tick_seconds=0.001, startup_ticks=1000)
        node = ControllerNode(config, fs=fs)
        await node.start()
        try:
            async with asyncio.timeout(10):
                await node.stopped()  # fail-stop on the failed save
            await asyncio.sleep(0.1)  # whatever was written reaches the brokers
        finally:
            await node.stop()
            for server in servers:
                server.close()
                await server.wait_closed()
        return node

    node = asyncio.run(scenario())
    assert isinstance(node.failure, OSError)
    path = tmp_path / PARTITION_STATE_FILE
    saved = None
    if path.exists():
        document = json.loads(path.read_text())
        saved = (document["leader_epoch"], document["leader"], tuple(document["isr"]))
    announced = {(msg.leader_epoch, msg.leader, msg.isr) for msgs in heard.values() for msg in msgs
                 if isinstance(msg, (m.LeaderAndIsr, m.UpdateMetadata))}
    assert announced <= {saved}, f"brokers heard {sorted(announced, key=str)}; the disk holds {saved}"
    if first_failing == 2:
        assert saved == (0, None, BROKERS) and announced == {saved}  # registered, then the election failed


@pytest.mark.parametrize("document", [
    {"leader_epoch": -1, "leader": None, "isr": []},  # an epoch below the first
    {"leader_epoch": True, "leader": None, "isr": []},  # a bool is no epoch
    {"leader_epoch": 1, "leader": "S9", "isr": ["S1"]},  # a leader that is no broker
    {"leader_epoch": 1, "leader": "S1", "isr": ["S1", "S9"]},  # an ISR replica that is no broker
])
def test_a_partition_state_that_does_not_fit_the_brokers_is_refused_naming_it(document):
    assert parse_partition_state({"leader_epoch": 0, "leader": None, "isr": []}, ["S1", "S2"]) == (0, None, ())
    with pytest.raises(ValueError, match=r"do not fit the brokers \['S1', 'S2'\]"):
        parse_partition_state(document, ["S1", "S2"])
