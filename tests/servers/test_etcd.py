"""A real 3-member etcd on loopback: it serves, survives a kill -9 and a restart on its data directory,
a partition cuts a member off and healing brings it back, and every process, folder and nftables
table is gone when the cluster closes, on every way out. A few seconds each; skipped where etcd is
not installed."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hwm.bridge.servers import server_named
from hwm.bridge.servers.adapter import Definite
from hwm.bridge.servers.lifecycle import RUN_PREFIX, ServerCluster
from tests.servers.conftest import group_running, needs_etcd, needs_partitions, tables

pytestmark = pytest.mark.network
HWM = [sys.executable, "-m", "hwm.cli"]
DOC = Path(__file__).resolve().parents[2] / "docs" / "real-servers.md"


def run_folders(pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}{pid}-*"))


def test_put_read_kill_restart_partition_heal_and_nothing_left():
    needs_etcd()
    needs_partitions()
    cluster = ServerCluster(server_named("etcd"), 3, prefix="127.0.21")
    with cluster:
        groups = [p.proc.pid for p in cluster.procs.values()]
        n1 = cluster.client("n1")
        assert [n1.append(10), n1.append(11)] == [1, 2]
        assert cluster.client("n2").read(2) == 11
        assert cluster.client("n3").read(3) is None
        cluster.kill("n2")
        assert not cluster.alive("n2")
        cluster.wait_serving(15, ["n1", "n3"])  # an election first, if n2 led
        assert cluster.client("n1").append(12) == 3  # two of three still commit
        cluster.restart("n2")
        cluster.wait_serving(15, ["n2"])
        assert cluster.client("n2").read(3) == 12  # on the same data directory, and caught up
        cluster.partition([["n1"], ["n2", "n3"]])
        cluster.wait_serving(15, ["n2"])  # the majority's side elects a leader if n1 led
        with pytest.raises(Definite):
            cluster.client("n1", timeout=1.0).read(1)  # a linearizable read needs the majority
        assert cluster.client("n2", timeout=3.0).append(13) == 4
        cluster.heal()
        cluster.wait_serving(15, ["n1"])
        assert cluster.client("n1").read(4) == 13
        root, table = cluster.root, cluster.partitions.table
        assert f"inet {table}" in tables()
    assert not root.exists()
    assert f"inet {table}" not in tables()
    assert not any(group_running(g) for g in groups)


def shown_in_the_doc(command: str, output: str) -> bool:
    """Whether docs/real-servers.md shows `command` followed by exactly `output`."""
    return f"$ {command}\n{output}\n```" in DOC.read_text()


def test_a_missing_binary_names_the_debian_package(tmp_path):
    done = subprocess.run([*HWM, "test", "--server", "etcd"], capture_output=True, text=True,
                          env=dict(os.environ, PATH=str(tmp_path)), timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: etcd not found on PATH: install the Debian package etcd-server (apt-get install etcd-server)"]
    assert shown_in_the_doc("PATH=/nowhere hwm test --server etcd", done.stderr.strip())


def test_a_port_in_use_refuses_before_anything_starts():
    needs_etcd()
    needs_partitions()
    taken = socket.socket()
    taken.bind(("127.0.23.2", 2380))
    taken.listen()
    try:
        hwm = subprocess.Popen([*HWM, "test", "--server", "etcd", "--loopback", "127.0.23"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        _, err = hwm.communicate(timeout=60)
        assert hwm.returncode == 2
        assert err.strip().splitlines() == [
            "error: 127.0.23.2:2380 (n2's peer port) is in use: Address already in use; another run may hold it "
            "(give another loopback prefix)"]
        assert shown_in_the_doc("hwm test --server etcd --loopback 127.0.23", err.strip())
        assert run_folders(hwm.pid) == []
        assert f"inet hwm_{hwm.pid}" not in tables()
    finally:
        taken.close()


def _started_run(prefix: str, save: Path) -> tuple[subprocess.Popen, Path]:
    """`hwm test --server etcd` in a process of its own, once its members run (its folder records them)."""
    hwm = subprocess.Popen([*HWM, "test", "--server", "etcd", "--loopback", prefix, "--schedules", "50",
                            "--save", str(save / "found.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for folder in run_folders(hwm.pid):
            owner = folder / "owner.json"
            if owner.exists() and owner.read_text().count(",") >= 4:  # pid, start time, three groups
                return hwm, folder
        assert hwm.poll() is None, hwm.communicate()
        time.sleep(0.1)
    hwm.kill()
    raise AssertionError("the run did not start its members within 60 s")


def test_sigterm_ends_a_run_with_everything_removed(tmp_path):
    needs_etcd()
    needs_partitions()
    hwm, folder = _started_run("127.0.24", tmp_path)
    import json
    groups = json.loads((folder / "owner.json").read_text())["process_groups"]
    hwm.send_signal(signal.SIGTERM)
    _, err = hwm.communicate(timeout=60)
    assert hwm.returncode == 130, err
    assert "interrupted: every server process has been killed" in err
    assert not folder.exists()
    assert f"inet hwm_{hwm.pid}" not in tables()
    assert not any(group_running(g) for g in groups)


def test_the_next_run_cleans_up_after_a_run_killed_with_sigkill(tmp_path):
    needs_etcd()
    needs_partitions()
    hwm, folder = _started_run("127.0.25", tmp_path)
    import json
    groups = json.loads((folder / "owner.json").read_text())["process_groups"]
    hwm.kill()  # SIGKILL: no handler runs
    hwm.wait()
    assert folder.exists() and f"inet hwm_{hwm.pid}" in tables()
    assert any(group_running(g) for g in groups)  # its members outlive it
    # The next run cleans up first, and says so.
    after = subprocess.run([*HWM, "test", "--server", "etcd", "--loopback", "127.0.25", "--schedules", "1",
                            "--steps", "1", "--save", str(tmp_path / "next.json")], capture_output=True, text=True,
                           timeout=120)
    assert after.returncode == 0, after.stderr
    notes = after.stderr.splitlines()
    # As many as were running at the SIGKILL: a schedule's own kill step may have had one down then.
    left = re.compile(rf"note: removed {re.escape(str(folder))} left by hwm run {hwm.pid}, which is gone "
                      r"\(killed [1-3] of its server processes\)")
    assert any(left.fullmatch(note) for note in notes), notes
    assert f"note: removed nftables table inet hwm_{hwm.pid} left by a run that is gone" in notes
    assert not folder.exists()
    assert f"inet hwm_{hwm.pid}" not in tables()
    assert not any(group_running(g) for g in groups)


@pytest.mark.parametrize("given, named", [(["--clock", "virtual"], "--clock virtual"), (["--protocol", "raft"], "--protocol"),
                                          (["--require-replies"], "--require-replies")])
def test_a_node_only_option_with_server_is_one_line(given, named):
    from click.testing import CliRunner

    from hwm.cli import main
    done = CliRunner().invoke(main, ["test", "--server", "etcd", *given])
    assert done.exit_code == 2
    assert f"Error: {named} does not apply to --server" in done.output


def test_without_root_partitions_are_refused_or_left_out():
    needs_etcd()
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv, to run hwm as another user")
    with tempfile.TemporaryDirectory() as scratch:  # pytest's own is root's alone
        Path(scratch).chmod(0o777)
        nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", *HWM, "test", "--server",
                  "etcd", "--loopback", "127.0.29", "--save", f"{scratch}/found.json"]
        asked = subprocess.run([*nobody, "--faults", "partition"], capture_output=True, text=True, timeout=60)
        assert asked.returncode == 2
        assert asked.stderr.strip().splitlines() == [
            "error: partitions need root (hwm adds an nftables table and runs each member under its own uid)"]
        default = subprocess.run([*nobody, "--schedules", "1", "--steps", "3"], capture_output=True, text=True,
                                 timeout=120, cwd=scratch)
        assert default.returncode == 0, default.stderr
        assert default.stderr.startswith("note: no partitions: partitions need root")
        assert "(kill, pause)" in default.stdout
