"""End to end with real processes: `hwm node` and `hwm cluster` on 127.0.0.1, kill -9, restart.

Every process runs in its own process group and is killed in a `finally`; every wait is bounded.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.impl.client import Client, format_address
from hwm.impl.runtime import encode_entry
from hwm.impl.zab import CURRENT_EPOCH_FILE
from hwm.impl.wal import RECORD_HEADER, SEGMENT_HEADER
from tests.impl.ports import free_ports

pytestmark = pytest.mark.network

HWM = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')"]
OVERALL_SECONDS = 90


@pytest.fixture(autouse=True)
def overall_timeout():
    """Every test ends within OVERALL_SECONDS: the alarm raises, and its `finally` kills the processes."""

    def expire(signum, frame):
        raise TimeoutError(f"end-to-end test still running after {OVERALL_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(OVERALL_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def wait_for(condition, timeout: float, what: str, pause: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(pause)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Processes:
    """`hwm node` processes, each in its own process group, all killed by close()."""

    def __init__(self, tmp_path: Path, addresses: dict[str, tuple[str, int]], protocol: str | None = None):
        self.tmp_path = tmp_path
        self.addresses = addresses
        self.protocol = protocol
        self.running: dict[str, subprocess.Popen] = {}
        self.logs: list[Path] = []

    def argv(self, server: str) -> list[str]:
        peers = ",".join(f"{s}={format_address(a)}" for s, a in self.addresses.items() if s != server)
        argv = HWM + ["node", "--id", server, "--listen", format_address(self.addresses[server]),
                      "--data", str(self.tmp_path / server)]
        argv += ["--protocol", self.protocol] if self.protocol else []
        return argv + (["--peers", peers] if peers else [])

    def start(self, server: str) -> subprocess.Popen:
        log = self.tmp_path / f"{server}.{len(self.logs)}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            process = subprocess.Popen(self.argv(server), stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.running[server] = process
        return process

    def kill(self, server: str) -> None:
        process = self.running.pop(server)
        os.killpg(process.pid, signal.SIGKILL)  # kill -9
        process.wait(10)

    def close(self) -> None:
        for process in self.running.values():
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(10)
        self.running.clear()

    def output(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')}" for log in self.logs if log.exists())


def statuses(client: Client) -> dict:
    return {a.server: a.reply for a in client.status(timeout=1.0)}


def test_three_processes_kill_9_the_leader_read_everything_back_and_the_old_leader_catches_up(tmp_path):
    addresses = {f"S{k + 1}": ("127.0.0.1", port) for k, port in enumerate(free_ports(3))}
    processes = Processes(tmp_path, addresses)
    try:
        for server in addresses:
            processes.start(server)
        with Client(addresses, timeout=20) as client:
            written = {}
            for k in range(100):
                value = f"entry {k} {'x' * (k % 7)}".encode()
                written[client.put(value)] = value
            assert sorted(written) == list(range(2, 102))  # index 1 opened the client's session
            old_leader = client.leader
            generation = statuses(client)[old_leader].generation
            processes.kill(old_leader)

            # A new leader is elected among the two survivors.
            new_leader = wait_for(lambda: next((s for s, r in statuses(client).items()
                                                if r is not None and r.role == "leader"), None),
                                  20, "a new leader")
            assert new_leader != old_leader
            # Under raft the new leader may only commit entries of older generations through an
            # entry of its own: one more write makes every acknowledged one readable.
            written[client.put(b"after the failover")] = b"after the failover"
            for index, value in written.items():
                entry_generation, read = client.get(index)
                assert read == value, index
                assert entry_generation == (generation if index <= 101 else entry_generation)

            # The killed leader restarts on the same data directory and catches up.
            processes.start(old_leader)

            wait_caught_up(client, old_leader, new_leader, 102)
            for index, value in written.items():
                assert client.get(index, server=old_leader)[1] == value
    except BaseException:
        print(processes.output())
        raise
    finally:
        processes.close()


def test_zab_processes_synchronise_a_new_leader_before_it_takes_writes_and_a_restarted_one_rejoins(tmp_path):
    """`hwm node --protocol zab`: the leader elected after kill -9 synchronises a quorum (NEWLEADER),
    which commits the whole history at once; the old leader comes back, synchronises, catches up."""
    addresses = {f"S{k + 1}": ("127.0.0.1", port) for k, port in enumerate(free_ports(3))}
    processes = Processes(tmp_path, addresses, protocol="zab")
    try:
        for server in addresses:
            processes.start(server)
        with Client(addresses, timeout=20) as client:
            written = {client.put(f"entry {k}".encode()): f"entry {k}".encode() for k in range(20)}
            assert sorted(written) == list(range(2, 22))  # entry 1 opened the client's session
            old_leader = client.leader
            processes.kill(old_leader)
            new_leader = wait_for(lambda: next((s for s, r in statuses(client).items()
                                                if r is not None and r.role == "leader"), None),
                                  20, "a new leader")
            # Established by the NEWLEADER quorum, the new leader has committed all 21 already.
            wait_for(lambda: statuses(client)[new_leader].hwm == 21, 20, "the history committed")
            written[client.put(b"after the failover")] = b"after the failover"
            for index, value in written.items():
                assert client.get(index)[1] == value, index
            processes.start(old_leader)

            wait_caught_up(client, old_leader, new_leader, 22)
            epoch = statuses(client)[new_leader].generation
            assert (tmp_path / old_leader / CURRENT_EPOCH_FILE).read_text() == f"{epoch}\n"
    except BaseException:
        print(processes.output())
        raise
    finally:
        processes.close()


def test_a_corrupted_write_ahead_log_stops_the_node_with_the_file_and_offset_and_leaves_it_alone(tmp_path):
    [port] = free_ports(1)
    addresses = {"S1": ("127.0.0.1", port)}  # a cluster of one commits alone
    processes = Processes(tmp_path, addresses)
    try:
        process = processes.start("S1")
        with Client(addresses, timeout=10, client_id="c") as client:
            for k in range(5):
                client.put(f"v{k}".encode())
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
        processes.running.clear()

        [segment] = sorted((tmp_path / "S1" / "wal").glob("*.log"))
        data = bytearray(segment.read_bytes())
        # Entry 1 opened the client's session; entry 2 is b"v0".
        second_record = SEGMENT_HEADER.size + RECORD_HEADER.size + len(encode_entry(b"", "c", 0))
        data[second_record + RECORD_HEADER.size] ^= 0xFF  # a bit flip in the payload of entry 2
        segment.write_bytes(bytes(data))
        digest = hashlib.sha256(segment.read_bytes()).hexdigest()

        result = subprocess.run(processes.argv("S1"), capture_output=True, text=True, timeout=30)
        assert result.returncode == 1, result.stderr
        assert str(segment) in result.stderr
        assert f"byte offset {second_record}" in result.stderr
        assert "CRC mismatch" in result.stderr
        assert hashlib.sha256(segment.read_bytes()).hexdigest() == digest
    finally:
        processes.close()


def _consecutive_free_ports(count: int) -> int:
    for base in free_ports(20):
        if base + count < 65536 and all(_free(base + k) for k in range(count)):
            return base
    raise AssertionError("no consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_hwm_cluster_starts_serves_the_cli_and_stops_every_server_on_sigterm(tmp_path):
    data = tmp_path / "cluster"
    base = _consecutive_free_ports(3)
    supervisor = subprocess.Popen(HWM + ["cluster", "--servers", "3", "--data", str(data), "--base-port", str(base),
                                         "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
    pids: list[int] = []
    try:
        lines = [supervisor.stdout.readline() for _ in range(5)]
        pids = [int(line.split("pid ")[1].split()[0]) for line in lines if " pid " in line]
        assert len(pids) == 3, lines
        assert lines[4].strip() == (f"--cluster S1=127.0.0.1:{base},S2=127.0.0.1:{base + 1},"
                                    f"S3=127.0.0.1:{base + 2}")
        assert json.loads((data / "cluster.json").read_text())["servers"]["S3"] == f"127.0.0.1:{base + 2}"

        runner = CliRunner()
        env = {"HWM_CLUSTER": None}
        result = runner.invoke(main, ["put", "--data", str(data), "--timeout", "20", "hello"], env=env)
        assert result.exit_code == 0, result.output
        assert result.output.startswith("committed at index 2 (leader S")  # 1: the client's session
        result = runner.invoke(main, ["get", "--data", str(data), "2"], env=env)
        assert result.exit_code == 0 and result.output.split("\t")[-1].strip() == "hello", result.output
        result = runner.invoke(main, ["get", "--data", str(data), "3"], env=env)
        assert result.exit_code == 1 and "not yet committed" in result.output
        deadline = time.monotonic() + 30  # a loaded machine: a server may answer status late
        while True:
            result = runner.invoke(main, ["status", "--data", str(data), "--json"], env=env)
            rows = [json.loads(line) for line in result.output.splitlines()]
            assert [r["server"] for r in rows] == ["S1", "S2", "S3"]
            if all("role" in r and r["last_index"] == 2 for r in rows) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert all("role" in r for r in rows), rows
        assert sum(r["role"] == "leader" for r in rows) == 1 and all(r["last_index"] == 2 for r in rows), rows

        stop_cluster(supervisor, pids)
    finally:
        kill_cluster(supervisor, pids)


def test_hwm_cluster_takes_a_preset_with_flags_changed_as_hwm_check_does(tmp_path):
    # docs/cluster.md's spec: parsed by hwm cluster as by hwm check and hwm node, passed on to every node.
    data, spec = tmp_path / "cluster", "raft,noop_on_election=true"
    base = _consecutive_free_ports(3)
    supervisor = subprocess.Popen(HWM + ["cluster", "--servers", "3", "--data", str(data), "--base-port", str(base),
                                         "--quiet", "--protocol", spec],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pids: list[int] = []
    try:
        lines = [supervisor.stdout.readline() for _ in range(5)]
        pids = [int(line.split("pid ")[1].split()[0]) for line in lines if " pid " in line]
        assert len(pids) == 3 and f"protocol {spec}," in lines[0], lines
        assert json.loads((data / "cluster.json").read_text())["protocol"] == spec
        result = CliRunner().invoke(main, ["put", "--data", str(data), "--timeout", "20", "hello"],
                                    env={"HWM_CLUSTER": None})
        assert result.exit_code == 0 and result.output.startswith("committed at index "), result.output
        stop_cluster(supervisor, pids)
    finally:
        kill_cluster(supervisor, pids)


def test_a_second_node_on_a_data_directory_exits_2_naming_the_holder(tmp_path):
    ports = free_ports(2)
    first = {"S1": ("127.0.0.1", ports[0])}
    processes = Processes(tmp_path, first)
    try:
        processes.start("S1")
        with Client(first, timeout=20) as client:
            client.put(b"one")  # S1 is up and holds its directory
        second = subprocess.run(HWM + ["node", "--id", "S1", "--listen", f"127.0.0.1:{ports[1]}",
                                       "--data", str(tmp_path / "S1")],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr
        assert (f"data directory {tmp_path / 'S1'} is in use by server S1 listening on "
                f"127.0.0.1:{ports[0]} (pid {processes.running['S1'].pid})") in second.stderr
    finally:
        processes.close()


def wait_caught_up(client, follower: str, leader: str, index: int) -> None:
    """Wait until `follower` follows with the leader's last index and HWM, both at `index`."""
    def caught_up():
        now = statuses(client)
        rejoined, leading = now.get(follower), now.get(leader)
        return (rejoined is not None and leading is not None and rejoined.role == "follower"
                and (rejoined.last_index, rejoined.hwm) == (leading.last_index, leading.hwm) == (index, index))

    wait_for(caught_up, 20, f"{follower} to catch up")


def stop_cluster(supervisor, pids) -> None:
    """SIGTERM to `hwm cluster` stops it with exit 0 and every process it started."""
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(15) == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def kill_cluster(supervisor, pids) -> None:
    """Whatever a test left running of an `hwm cluster`, killed."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(supervisor.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    supervisor.wait(10)


def test_a_record_file_that_cannot_be_opened_at_start_stops_the_node_with_its_path(tmp_path):
    # hwm node refuses such a path before it starts; one that fails later (a directory replaced by a
    # file in between) is a NodeError naming it, for exit 2, and the node's port and log are let go.
    import asyncio

    from hwm.impl.runtime import Node, NodeConfig, NodeError

    (tmp_path / "file").write_text("")
    record = tmp_path / "file" / "S1.jsonl"
    [port] = free_ports(1)
    node = Node(NodeConfig("S1", ("127.0.0.1", port), {}, str(tmp_path / "S1"), record=str(record)))
    with pytest.raises(NodeError, match=f"cannot record to {record}: ") as caught:
        asyncio.run(node.start())
    assert caught.value.usage
    assert _free(port)
    again = Node(NodeConfig("S1", ("127.0.0.1", port), {}, str(tmp_path / "S1")))  # the data directory is free

    async def start_and_stop():
        await again.start()
        await again.stop()

    asyncio.run(start_and_stop())
