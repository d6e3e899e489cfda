"""BookKeeper over TCP (impl/bookie_server.py): bookies on loopback, the ledger's writer and recovery
client over real sockets, journals on disk.

The default run serves three bookies from one process (an asyncio loop in a thread); under -m deep
`hwm cluster --protocol bookkeeper` runs them as processes, one is SIGKILLed mid-ledger and restarted,
and every process is gone afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.bookie_server import BookieServer, LedgerClient, LedgerError, read_ledger
from hwm.properties.protocol import BOOKKEEPER, PRESETS
from tests.impl.ports import free_ports

BOOKIES = ("S1", "S2", "S3")


class Loop:
    """An asyncio loop in a thread, for servers the test starts and stops."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def bookies(tmp_path):
    loop = Loop()
    addresses = dict(zip(BOOKIES, (("127.0.0.1", port) for port in free_ports(len(BOOKIES)))))
    ledger_file = str(tmp_path / "ledger.json")
    servers = {}

    def start(name):
        servers[name] = BookieServer(name, addresses[name], str(tmp_path / name), ledger_file)
        loop.run(servers[name].start())
        return servers[name]

    def stop(name):
        loop.run(servers.pop(name).stop())

    for name in BOOKIES:
        start(name)
    yield addresses, ledger_file, start, stop, servers
    for name in list(servers):
        stop(name)
    loop.close()


def test_acknowledged_entries_survive_a_bookie_stopping_and_recovery_closes_the_ledger_with_them(bookies):
    addresses, ledger_file, start, stop, servers = bookies
    with LedgerClient(addresses, BOOKKEEPER, ledger_file=ledger_file, timeout=1.0) as writer:
        acknowledged = [writer.add(f"e{k}".encode()) for k in range(1, 4)]
        stop("S3")
        acknowledged.append(writer.add(b"e4"))  # S1 and S2 are an ack quorum
        stop("S2")
        with pytest.raises(LedgerError, match="entry 5 not acknowledged: stored on fewer than an ack quorum of 2"):
            writer.add(b"e5")
    assert acknowledged == [1, 2, 3, 4]
    start("S2")
    with LedgerClient(addresses, BOOKKEEPER, ledger_file=ledger_file, timeout=1.0) as recovery:
        closed = recovery.recover()  # S1 and S2 answer the fencing reads: E - AQ + 1 = 2
    assert [payload for _, payload in closed][:4] == [b"e1", b"e2", b"e3", b"e4"]
    assert read_ledger(ledger_file) == len(closed)
    # Recovery wrote what it read back to the bookies it reached, and closed the ledger on them.
    for name in ("S1", "S2"):
        assert servers[name].bookie.closed_at == len(closed)
        assert all(servers[name].bookie.holds(entry) for entry in range(1, len(closed) + 1))
    # S3 was down at the close: it trims its journal to the closed ledger when it starts.
    assert start("S3").bookie.closed_at == len(closed)
    # The writer is fenced out of every bookie that answered recovery.
    with LedgerClient(addresses, BOOKKEEPER, timeout=1.0) as late:
        with pytest.raises(LedgerError, match="is fenced"):
            late.add(b"late")


def test_a_bookie_refuses_garbage_and_strangers_and_keeps_serving(bookies):
    import socket

    addresses, *_ = bookies
    for frame, words in ((b"\x00\x00\x00\x02\x09\x09", "bad frame: unsupported codec version 9"),
                         (codec.encode(m.PutRequest(b"x")), "a bookie does not accept PutRequest"),
                         (codec.encode(m.ReadLac("mallory", True)), "got a ReadLac from 'mallory'")):
        with socket.create_connection(addresses["S1"], timeout=2) as sock:
            sock.sendall(frame)
            answer = codec.FrameReader().feed(sock.recv(65536))
            assert words in codec.decode(answer[0]).text
    with LedgerClient(addresses, BOOKKEEPER, timeout=1.0) as writer:
        assert writer.add(b"fine") == 1


@pytest.mark.deep
def test_hwm_cluster_runs_bookies_that_survive_sigkill_and_leaves_no_process(tmp_path):
    import socket

    def free(port):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
                return True
            except OSError:
                return False
    base = next(p for p in free_ports(50) if all(free(p + k) for k in range(3)))
    ports = [base, base + 1, base + 2]
    argv = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')", "cluster", "--protocol",
            "bookkeeper", "--data", str(tmp_path), "--base-port", str(base), "--restart-after", "0.2", "-q"]
    cluster = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = {}
    try:
        while len(pids) < 3:
            line = cluster.stdout.readline()
            found = re.match(r"\s+(S\d)\s+\S+\s+pid (\d+)", line)
            if found:
                pids[found[1]] = int(found[2])
        addresses = {s: ("127.0.0.1", ports[k]) for k, s in enumerate(BOOKIES)}
        ledger_file = str(tmp_path / "ledger.json")
        deadline = time.monotonic() + 20
        for address in addresses.values():  # every bookie is up
            while True:
                try:
                    socket.create_connection(address, timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"no bookie listens on {address}"
                    time.sleep(0.05)
        with LedgerClient(addresses, BOOKKEEPER, timeout=2.0) as writer:
            for k in range(1, 11):
                assert writer.add(f"e{k}".encode()) == k  # acknowledged: on S1 and S3 at least
                if k == 5:
                    os.kill(pids["S2"], signal.SIGKILL)  # mid-ledger; hwm cluster restarts it
        with LedgerClient(addresses, BOOKKEEPER, ledger_file=ledger_file, timeout=2.0) as recovery:
            closed = recovery.recover()
        assert [p for _, p in closed][:10] == [f"e{k}".encode() for k in range(1, 11)]
    finally:
        cluster.send_signal(signal.SIGTERM)
        _, err = cluster.communicate(timeout=20)
    restarted = [int(pid) for pid in re.findall(r"restarted S2 \(pid (\d+)\)", err)]
    assert restarted, err
    for pid in list(pids.values()) + restarted:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_striped_ledger_over_tcp_stores_each_entry_on_its_write_set(bookies):
    # bookkeeper-striped: E = 3, WQ = 2, AQ = 2; entry e goes to the bookies at positions e-1 and e.
    addresses, ledger_file, start, stop, servers = bookies
    striped = PRESETS["bookkeeper-striped"].protocol
    with LedgerClient(addresses, striped, ledger_file=ledger_file, timeout=1.0) as writer:
        assert [writer.add(f"e{k}".encode()) for k in (1, 2, 3)] == [1, 2, 3]
        stop("S3")
        assert writer.add(b"e4") == 4  # S1 and S2
        with pytest.raises(LedgerError, match="entry 5 not acknowledged"):
            writer.add(b"e5")  # S2 and S3
    assert servers["S1"].bookie.snapshot().log[:4] == (1, 0, 1, 1)  # a hole at entry 2 (S2 and S3)
    with LedgerClient(addresses, striped, ledger_file=ledger_file, timeout=1.0) as recovery:
        # Entry 5 reached S2 before its add failed: recovery finds it there, and its recovery add
        # needs S3 too (entry 5's write set, AQ = 2). S3 is down: the ledger stays open.
        with pytest.raises(LedgerError, match=r"recovery waits to close the ledger at entry 5: entry 5's recovery "
                                              r"adds are acknowledged by 1 bookie of its write set \(S2\), not the "
                                              r"ack quorum of 2; the ledger stays open; unreachable: S3 at"):
            recovery.recover(rounds=2)
        assert read_ledger(ledger_file) is None
        start("S3")
        closed = recovery.recover()
    # Entry 2 is on S2 and S3 only (S1 holds a hole): S2's fencing answer carries it. Entry 5 is kept
    # (an unacknowledged entry may survive), now on S2 and S3.
    assert [payload for _, payload in closed] == [b"e1", b"e2", b"e3", b"e4", b"e5"] and read_ledger(ledger_file) == 5
    assert servers["S3"].bookie.read(5) == (1, b"e5")


def test_an_ensemble_change_over_tcp_goes_into_the_metadata_file_that_recovery_follows(bookies):
    # bookkeeper-ensemble-change: an ensemble of S1 and S2 (WQ = AQ = 2), S3 a spare.
    addresses, ledger_file, start, stop, servers = bookies
    preset = PRESETS["bookkeeper-ensemble-change"].protocol
    with LedgerClient(addresses, preset, ledger_file=ledger_file, timeout=1.0) as writer:
        assert writer.add(b"e1") == 1
        stop("S2")
        assert writer.add(b"e2") == 2  # S2 unreachable: S3 replaces it from entry 2 on
    record = json.loads(open(ledger_file).read())
    assert record["fragments"] == [[1, ["S1", "S2"]], [2, ["S1", "S3"]]] and record["version"] == 2
    with LedgerClient(addresses, preset, ledger_file=ledger_file, timeout=1.0) as recovery:
        closed = recovery.recover()  # fences S1 and S3, the last fragment's ensemble
    assert [payload for _, payload in closed] == [b"e1", b"e2"] and read_ledger(ledger_file) == 2
    assert servers["S3"].bookie.fenced and not servers["S3"].bookie.holds(1)


def test_a_writer_whose_ensemble_change_finds_the_ledger_in_recovery_stops(bookies):
    addresses, ledger_file, start, stop, servers = bookies
    preset = PRESETS["bookkeeper-ensemble-change"].protocol
    with LedgerClient(addresses, preset, ledger_file=ledger_file, timeout=1.0) as writer, \
            LedgerClient(addresses, preset, ledger_file=ledger_file, timeout=1.0) as recovery:
        assert writer.add(b"e1") == 1
        # Recovery begins in another client (the metadata is marked in recovery) and fences S2,
        # which then goes down; S1 still takes the writer's next entry.
        recovery.recovery.fence("S2")
        recovery._run(recovery.recovery, "S2")
        stop("S2")
        with pytest.raises(LedgerError, match="replacing S2 by S3 failed, the ledger is being recovered"):
            writer.add(b"e2")
    assert json.loads(open(ledger_file).read())["fragments"] == [[1, ["S1", "S2"]]]
    assert not servers["S3"].bookie.last_entry  # nothing reached the spare
