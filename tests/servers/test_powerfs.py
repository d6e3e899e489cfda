"""hwm's filesystem that loses power (bridge/servers/powerfs.py), with real files on a real mount:
what was fsynced survives a power failure, what was not is dropped, names are durable at once,
and no mount outlives its run. Skipped where FUSE is not usable (no /dev/fuse, not root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hwm.bridge.servers import powerfs

HWM = [sys.executable, "-m", "hwm.cli"]


def needs_fuse():
    why = powerfs.unavailable()
    if why is not None:
        pytest.skip(why)


@pytest.fixture
def mount(tmp_path):
    needs_fuse()
    m = powerfs.PowerMount(tmp_path / "disk", tmp_path / "mnt", tmp_path / "fs.sock", tmp_path / "fs.log")
    m.start()
    try:
        yield m
    finally:
        m.unmount()
    assert powerfs.mounts_under(tmp_path) == []


def test_fsynced_bytes_survive_and_the_rest_is_dropped(mount):
    path = mount.mount / "log"
    with open(path, "wb") as f:
        f.write(b"kept")
        f.flush()
        os.fsync(f.fileno())
        f.write(b"+lost")  # past the synced end: the file is cut back
    with open(path, "r+b") as f:
        f.write(b"KE")  # over synced bytes: they come back
    assert path.read_bytes() == b"KEpt+lost"  # the server reads what it wrote until the power goes
    assert mount.pending() == (1, 7)
    assert mount.lose_power() == (1, 7)
    assert path.read_bytes() == b"kept"
    assert mount.pending() == (0, 0)


def test_fdatasync_and_o_dsync_make_writes_durable(mount):
    with open(mount.mount / "a", "wb") as f:
        f.write(b"data")
        f.flush()
        os.fdatasync(f.fileno())
    fd = os.open(mount.mount / "b", os.O_WRONLY | os.O_CREAT | os.O_DSYNC, 0o644)
    os.write(fd, b"each write synced")
    os.close(fd)
    mount.lose_power()
    assert (mount.mount / "a").read_bytes() == b"data"
    assert (mount.mount / "b").read_bytes() == b"each write synced"


def test_names_are_durable_and_unsynced_bytes_follow_a_rename(mount):
    (mount.mount / "dir").mkdir()
    with open(mount.mount / "dir" / "tmp", "wb") as f:
        f.write(b"never synced")
    (mount.mount / "dir" / "tmp").rename(mount.mount / "dir" / "final")
    fd = os.open(mount.mount / "dir", os.O_RDONLY)
    os.fsync(fd)  # a directory's fsync is accepted; it changes nothing here
    os.close(fd)
    (mount.mount / "gone").write_bytes(b"x")
    (mount.mount / "gone").unlink()
    assert mount.pending() == (1, 12)  # a file unlinked takes its unsynced bytes with it
    mount.lose_power()
    assert sorted(os.listdir(mount.mount)) == ["dir"]
    assert os.listdir(mount.mount / "dir") == ["final"]
    assert (mount.mount / "dir" / "final").read_bytes() == b""  # the name stayed, the bytes did not


def test_a_truncate_is_undone_and_a_synced_one_kept(mount):
    path = mount.mount / "t"
    with open(path, "wb") as f:
        f.write(b"0123456789")
        f.flush()
        os.fsync(f.fileno())
    with open(path, "r+b") as f:
        f.truncate(3)
    assert path.read_bytes() == b"012"
    mount.lose_power()
    assert path.read_bytes() == b"0123456789"
    with open(path, "r+b") as f:
        f.truncate(5)
        f.flush()
        os.fsync(f.fileno())
        f.seek(0, 2)
        f.write(b"tail")
    mount.lose_power()
    assert path.read_bytes() == b"01234"


def test_sync_makes_everything_durable(mount):
    (mount.mount / "f").write_bytes(b"restored by an operator")
    mount.sync()
    assert mount.lose_power() == (0, 0)
    assert (mount.mount / "f").read_bytes() == b"restored by an operator"


def test_a_machine_without_fuse_is_refused_in_one_line(monkeypatch):
    from click.testing import CliRunner

    from hwm.cli import main
    monkeypatch.setattr(powerfs, "FUSE_DEVICE", "/nonexistent/fuse")
    if powerfs.unavailable() is None or not powerfs.unavailable().startswith("no /nonexistent/fuse"):
        pytest.skip("etcd or the binding is missing first")
    import shutil
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed")
    done = CliRunner().invoke(main, ["test", "--server", "etcd", "--faults", "kill,power_fail"])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        "error: no /nonexistent/fuse on this machine: power failures need FUSE (a kernel with fuse; a container "
        "given the device)"]


def _started_power_run(prefix: str, save: Path) -> tuple[subprocess.Popen, Path]:
    """`hwm test --server etcd --faults power_fail` in a process of its own, once its members run on
    their mounts."""
    needs_fuse()
    import shutil
    import tempfile

    from hwm.bridge.servers.lifecycle import RUN_PREFIX
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed")
    hwm = subprocess.Popen([*HWM, "test", "--server", "etcd", "--loopback", prefix, "--faults", "power_fail",
                            "--schedules", "50", "--save", str(save / "found.json")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for candidate in Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}{hwm.pid}-*"):
            try:
                owner = json.loads((candidate / "owner.json").read_text())
            except (OSError, ValueError):
                continue
            if len(owner.get("process_groups", [])) == 3:
                return hwm, candidate
        assert hwm.poll() is None, hwm.communicate()
        time.sleep(0.1)
    hwm.kill()
    raise AssertionError("the run did not start its members within 60 s")


@pytest.mark.network
def test_sigterm_unmounts_every_data_directory(tmp_path):
    import signal
    hwm, folder = _started_power_run("127.0.34", tmp_path)
    assert len(powerfs.mounts_under(folder)) == 3
    hwm.send_signal(signal.SIGTERM)
    _, err = hwm.communicate(timeout=60)
    assert hwm.returncode == 130, err
    assert powerfs.mounts_under(folder) == [] and not folder.exists()


@pytest.mark.network
def test_the_next_run_unmounts_what_a_run_killed_with_sigkill_left(tmp_path):
    """hwm killed with SIGKILL mid-run leaves its members, its filesystems and their mounts; the next
    run removes them first and names them."""
    hwm, folder = _started_power_run("127.0.33", tmp_path)
    hwm.kill()
    hwm.wait()
    left = powerfs.mounts_under(folder)
    assert len(left) == 3
    after = subprocess.run([*HWM, "test", "--server", "etcd", "--loopback", "127.0.33", "--faults", "kill",
                            "--schedules", "1", "--steps", "1", "--save", str(tmp_path / "next.json")],
                           capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    note = next(line for line in after.stderr.splitlines() if str(folder) in line)
    assert note.startswith(f"note: removed {folder} left by hwm run {hwm.pid}, which is gone (killed 3 of its "
                           "server processes; unmounted ")
    assert all(point in note for point in left)
    assert powerfs.mounts_under(folder) == [] and not folder.exists()
