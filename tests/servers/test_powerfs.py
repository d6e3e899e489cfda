"""hwm's filesystem that loses power (bridge/servers/powerfs.py), with real files on a real mount:
what was fsynced survives a power failure, what was not is dropped (bytes, directory entries whose
directory was not fsynced, pages a shared mapping dirtied and no msync covered), or with a seed a
prefix of it kept (the last write perhaps torn at a sector); on a journalled filesystem a file's
fsync keeps names too; and no mount outlives its run. Skipped where FUSE is not usable (no
/dev/fuse, not root)."""

from __future__ import annotations

import json
import os
import signal
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


def mounted(folder: Path, filesystem: str = "posix"):
    needs_fuse()
    m = powerfs.PowerMount(folder / "disk", folder / "mnt", folder / "fs.sock", folder / "fs.log", filesystem)
    m.start()
    try:
        yield m
    finally:
        m.unmount()
    assert powerfs.mounts_under(folder) == []


@pytest.fixture
def mount(tmp_path):
    yield from mounted(tmp_path)


@pytest.fixture
def journalled(tmp_path):
    yield from mounted(tmp_path, "journalled")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """`path` holds `data`, fsynced, and its name too (its directory fsynced)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(path.parent)


def test_fsynced_bytes_survive_and_the_rest_is_dropped(mount):
    path = mount.mount / "log"
    with open(path, "wb") as f:
        f.write(b"kept")
        f.flush()
        os.fsync(f.fileno())
        f.write(b"+lost")  # past the synced end: the file is cut back
    fsync_dir(mount.mount)
    with open(path, "r+b") as f:
        f.write(b"KE")  # over synced bytes: they come back
    assert path.read_bytes() == b"KEpt+lost"  # the server reads what it wrote until the power goes
    assert mount.pending() == powerfs.Dropped(files=1, bytes=7, entries=0)
    assert mount.lose_power() == powerfs.Dropped(files=1, bytes=7, entries=0)
    assert path.read_bytes() == b"kept"
    assert mount.pending() == powerfs.Dropped(0, 0, 0)


def test_fdatasync_and_o_dsync_make_writes_durable(mount):
    with open(mount.mount / "a", "wb") as f:
        f.write(b"data")
        f.flush()
        os.fdatasync(f.fileno())
    fd = os.open(mount.mount / "b", os.O_WRONLY | os.O_CREAT | os.O_DSYNC, 0o644)
    os.write(fd, b"each write synced")
    os.close(fd)
    fsync_dir(mount.mount)
    mount.lose_power()
    assert (mount.mount / "a").read_bytes() == b"data"
    assert (mount.mount / "b").read_bytes() == b"each write synced"


def test_names_their_directory_fsynced_survive_and_unsynced_bytes_follow_a_rename(mount):
    (mount.mount / "dir").mkdir()
    with open(mount.mount / "dir" / "tmp", "wb") as f:
        f.write(b"never synced")
    (mount.mount / "dir" / "tmp").rename(mount.mount / "dir" / "final")
    fsync_dir(mount.mount / "dir")
    fsync_dir(mount.mount)
    (mount.mount / "gone").write_bytes(b"x")
    (mount.mount / "gone").unlink()
    # a file unlinked that the disk never named takes its unsynced bytes with it; its name is counted
    assert mount.pending() == powerfs.Dropped(files=1, bytes=12, entries=1)
    assert mount.lose_power() == powerfs.Dropped(files=1, bytes=12, entries=0)
    assert sorted(os.listdir(mount.mount)) == ["dir"]
    assert os.listdir(mount.mount / "dir") == ["final"]
    assert (mount.mount / "dir" / "final").read_bytes() == b""  # the name stayed, the bytes did not


def test_a_file_fsynced_in_a_directory_not_fsynced_is_gone(mount):
    """The server's fsync of the file keeps its bytes, not its name."""
    path = mount.mount / "log.1"
    with open(path, "wb") as f:
        f.write(b"acknowledged")
        f.flush()
        os.fsync(f.fileno())
    assert mount.lose_power() == powerfs.Dropped(files=0, bytes=0, entries=1)
    assert os.listdir(mount.mount) == []


def test_a_file_fsynced_and_its_directory_too_is_kept(mount):
    (mount.mount / "wal").mkdir()
    fsync_dir(mount.mount)
    write_synced(mount.mount / "wal" / "0.wal", b"acknowledged")
    assert mount.lose_power() == powerfs.Dropped(0, 0, 0)
    assert (mount.mount / "wal" / "0.wal").read_bytes() == b"acknowledged"


def test_a_rename_whose_directory_was_not_fsynced_is_undone(mount):
    """The write-a-temporary-file-then-rename-it pattern, without the directory's fsync: the old
    file comes back under its name, with its synced bytes, and the new one is gone."""
    write_synced(mount.mount / "currentEpoch", b"1")
    write_synced(mount.mount / "moved", b"m")
    with open(mount.mount / "currentEpoch.tmp", "wb") as f:
        f.write(b"2")
        f.flush()
        os.fsync(f.fileno())
    (mount.mount / "currentEpoch.tmp").rename(mount.mount / "currentEpoch")
    (mount.mount / "moved").rename(mount.mount / "moved.new")
    assert sorted(os.listdir(mount.mount)) == ["currentEpoch", "moved.new"]
    assert (mount.mount / "currentEpoch").read_bytes() == b"2"
    dropped = mount.lose_power()
    assert sorted(os.listdir(mount.mount)) == ["currentEpoch", "moved"]
    assert (mount.mount / "currentEpoch").read_bytes() == b"1"
    assert (mount.mount / "moved").read_bytes() == b"m"
    # currentEpoch, moved and moved.new named something else on disk (currentEpoch.tmp, nothing on
    # disk, is nothing again)
    assert dropped == powerfs.Dropped(files=0, bytes=0, entries=3)
    # and with the directory's fsync the rename stays
    write_synced(mount.mount / "currentEpoch.tmp", b"3")
    (mount.mount / "currentEpoch.tmp").rename(mount.mount / "currentEpoch")
    fsync_dir(mount.mount)
    assert mount.lose_power() == powerfs.Dropped(0, 0, 0)
    assert sorted(os.listdir(mount.mount)) == ["currentEpoch", "moved"]
    assert (mount.mount / "currentEpoch").read_bytes() == b"3"


def test_an_unlinked_file_comes_back_with_its_synced_bytes(mount):
    write_synced(mount.mount / "snapshot.1", b"durable")
    with open(mount.mount / "snapshot.1", "ab") as f:
        f.write(b"+never synced")
    (mount.mount / "snapshot.1").unlink()
    assert os.listdir(mount.mount) == []
    assert mount.lose_power() == powerfs.Dropped(files=1, bytes=13, entries=1)
    assert (mount.mount / "snapshot.1").read_bytes() == b"durable"
    # an unlink its directory's fsync made durable stays, and the file leaves the attic at once
    (mount.mount / "snapshot.1").unlink()
    fsync_dir(mount.mount)
    assert os.listdir(powerfs.attic_of(mount.backing)) == []
    assert mount.lose_power() == powerfs.Dropped(0, 0, 0)
    assert os.listdir(mount.mount) == []


def test_directories_made_and_removed_are_undone_with_what_they_hold(mount):
    (mount.mount / "old").mkdir()
    write_synced(mount.mount / "old" / "kept", b"k")
    fsync_dir(mount.mount)
    (mount.mount / "new").mkdir()
    write_synced(mount.mount / "new" / "f", b"synced, in a directory whose own name is not")
    (mount.mount / "old" / "kept").unlink()
    (mount.mount / "old").rmdir()
    assert os.listdir(mount.mount) == ["new"]
    mount.lose_power()
    assert os.listdir(mount.mount) == ["old"]
    assert os.listdir(mount.mount / "old") == ["kept"]
    assert (mount.mount / "old" / "kept").read_bytes() == b"k"
    assert os.listdir(powerfs.attic_of(mount.backing)) == []


def test_a_truncate_is_undone_and_a_synced_one_kept(mount):
    path = mount.mount / "t"
    write_synced(path, b"0123456789")
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


MAPPED_WRITER = """
import mmap, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDWR)
mapped = mmap.mmap(fd, 0)  # MAP_SHARED, writable
mapped[0:4] = b"SYNC"
mapped.flush()  # msync(MS_SYNC): the kernel writes the page back, then fsyncs
mapped[10:14] = b"LOST"  # dirty in the kernel's page cache, never msynced
print("written", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)  # its pages still mapped and dirty when the power goes
"""


def test_a_shared_mapping_keeps_what_msync_covered_and_loses_the_rest(mount):
    path = mount.mount / "mapped"
    write_synced(path, b"0123456789" * 2)
    writer = subprocess.Popen([sys.executable, "-c", MAPPED_WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "written\n"
        dropped = mount.lose_power()  # the writer still holds its dirty page
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert dropped == powerfs.Dropped(files=1, bytes=20, entries=0)  # the page as the kernel wrote it back
    assert path.read_bytes() == b"SYNC456789" + b"0123456789"


def fsync_only_the_file(path: Path, data: bytes = b"") -> None:
    """`path` holds `data`, fsynced; its directory is not."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def unsynced_writes(path: Path, writes: list[tuple[int, bytes]]) -> None:
    """Each write a write(2) of its own, so each reaches the filesystem as one."""
    fd = os.open(path, os.O_WRONLY)
    try:
        for offset, data in writes:
            os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def test_a_seed_keeps_a_prefix_of_a_files_unsynced_writes_in_order(mount):
    path = mount.mount / "wal"
    records = [(0, b"a" * 100), (100, b"b" * 100), (200, b"c" * 100)]  # in one sector: never torn
    kept = {}
    for seed in range(24):
        write_synced(path, b"")  # what a power failure kept is on disk: start again from nothing
        unsynced_writes(path, records)
        dropped = mount.lose_power(seed)
        assert dropped.bytes + dropped.kept_bytes == 300 and dropped.torn == 0
        kept[seed] = path.read_bytes()
    assert set(kept.values()) == {b"", b"a" * 100, b"a" * 100 + b"b" * 100, b"a" * 100 + b"b" * 100 + b"c" * 100}
    for seed in range(24):  # the same writes and the same seed keep the same (a replay)
        write_synced(path, b"")
        unsynced_writes(path, records)
        mount.lose_power(seed)
        assert path.read_bytes() == kept[seed]
    write_synced(path, b"")
    unsynced_writes(path, records)
    assert mount.lose_power() == powerfs.Dropped(files=1, bytes=300, entries=0)  # no seed: all lost
    assert path.read_bytes() == b""


def test_a_seed_may_tear_a_write_at_a_sector_boundary(mount):
    path = mount.mount / "segment"
    torn = set()
    for seed in range(40):
        write_synced(path, b"o" * 2048)
        unsynced_writes(path, [(100, b"n" * 2048)])  # over sectors 0 to 4 of the file
        dropped = mount.lose_power(seed)
        data = path.read_bytes()
        new = data.count(b"n")
        if new == 2048:  # kept whole
            assert data == b"o" * 100 + b"n" * 2048 and dropped.bytes == 0
        else:  # lost, or its first sectors kept: up to a boundary, with the old bytes after
            assert data == b"o" * 100 + b"n" * new + b"o" * (1948 - new)
            assert dropped == powerfs.Dropped(1, 2048 - new, 0, new, torn=int(new > 0))
            if new:
                torn.add(100 + new)
    assert torn and torn <= {512, 1024, 1536, 2048}, torn
    assert len(torn) > 1


def test_a_torn_append_ends_the_file_at_the_sector_boundary(mount):
    path = mount.mount / "log"
    sizes = set()
    for seed in range(30):
        write_synced(path, b"h" * 10)
        unsynced_writes(path, [(10, b"r" * 1500)])
        mount.lose_power(seed)
        data = path.read_bytes()
        assert data == b"h" * 10 + b"r" * (len(data) - 10)
        sizes.add(len(data))
    assert sizes == {10, 512, 1024, 1510}


def test_reorder_keeps_any_of_a_files_unsynced_sectors_and_replays_the_same(mount):
    """One write over sectors 0 to 3 of a synced file: with `reorder` each sector is the new one or the
    synced one, whatever the others are, so a later sector kept with an earlier one lost happens (a
    prefix alone never gives that); the same seed keeps the same."""
    path = mount.mount / "wal"
    shapes, kept = set(), {}
    for seed in range(40):
        write_synced(path, b"o" * 2048)
        unsynced_writes(path, [(0, b"n" * 2048)])
        dropped = mount.lose_power(seed, reorder=True)
        data = path.read_bytes()
        assert len(data) == 2048
        sectors = [data[k:k + 512] for k in range(0, 2048, 512)]
        assert all(sector in (b"o" * 512, b"n" * 512) for sector in sectors), data
        shape = "".join("n" if sector[0:1] == b"n" else "o" for sector in sectors)
        assert dropped.kept_bytes == 512 * shape.count("n") and dropped.bytes == 512 * shape.count("o")
        assert dropped.reordered == int("on" in shape), (shape, dropped)
        shapes.add(shape)
        kept[seed] = data
    assert any("on" in shape for shape in shapes), shapes  # out of order
    assert len(shapes) > 4
    for seed in (0, 7, 19):
        write_synced(path, b"o" * 2048)
        unsynced_writes(path, [(0, b"n" * 2048)])
        mount.lose_power(seed, reorder=True)
        assert path.read_bytes() == kept[seed]


def test_reorder_may_keep_an_append_past_a_lost_sector_as_a_hole_of_zeros(mount):
    """An append of three sectors to a synced 10-byte file: the file keeps its synced size or the new
    one; a sector kept beyond one lost leaves zeros where the lost one was."""
    path = mount.mount / "log"
    holes = False
    for seed in range(40):
        write_synced(path, b"h" * 10)
        unsynced_writes(path, [(10, b"r" * 1526)])  # to byte 1536: sectors 0, 1 and 2
        mount.lose_power(seed, reorder=True)
        data = path.read_bytes()
        assert len(data) in (10, 1536), len(data)
        assert data[:10] == b"h" * 10 and data[10:512] in (b"", b"r" * 502, bytes(502))
        for k in range(512, len(data), 512):
            assert data[k:k + 512] in (b"r" * 512, bytes(512))
        holes = holes or (len(data) == 1536 and data[512:1024] == bytes(512) and data[1024:1536] == b"r" * 512)
    assert holes


def test_a_seed_keeps_some_of_a_directorys_unsynced_names_in_order(mount):
    folder = mount.mount / "version-2"
    folder.mkdir()
    fsync_dir(mount.mount)
    fsync_dir(folder)
    kept = set()
    for seed in range(24):
        for name in ("log.1", "log.2", "log.3"):
            fsync_only_the_file(folder / name, name.encode())
        dropped = mount.lose_power(seed)
        names = sorted(os.listdir(folder))
        assert (dropped.entries, dropped.kept_entries) == (3 - len(names), len(names))
        assert all((folder / name).read_bytes() == name.encode() for name in names)  # with their fsynced bytes
        kept.add(tuple(names))
        for name in names:
            (folder / name).unlink()
        fsync_dir(folder)
    assert kept == {(), ("log.1",), ("log.1", "log.2"), ("log.1", "log.2", "log.3")}


def test_a_seed_keeps_a_prefix_of_the_journal_across_directories(journalled):
    for name in ("a", "b"):
        (journalled.mount / name).mkdir()
    fsync_dir(journalled.mount)
    kept = set()
    for seed in range(24):
        for path in ("a/1", "b/2", "a/3"):
            (journalled.mount / path).write_bytes(b"")  # no fsync: the journal holds the names
        journalled.lose_power(seed)
        names = tuple(sorted(f"{d}/{n}" for d in ("a", "b") for n in os.listdir(journalled.mount / d)))
        kept.add(names)
        for path in names:
            (journalled.mount / path).unlink()
        fsync_dir(journalled.mount / "a")  # commits the journal: the unlinks
    assert kept == {(), ("a/1",), ("a/1", "b/2"), ("a/1", "a/3", "b/2")}


@pytest.mark.parametrize("filesystem", ["posix", "journalled"])
def test_a_files_fsync_keeps_its_name_and_earlier_ones_only_when_journalled(tmp_path, filesystem):
    """ZooKeeper's currentEpoch: a temporary file fsynced and renamed over the old one, no fsync of
    the directory; then the log fsynced. ext4 and XFS keep the rename (journalled), POSIX need not."""
    for m in mounted(tmp_path, filesystem):
        write_synced(m.mount / "currentEpoch", b"1")
        write_synced(m.mount / "snapshot.0", b"old")
        fsync_only_the_file(m.mount / "currentEpoch.tmp", b"2")
        (m.mount / "currentEpoch.tmp").rename(m.mount / "currentEpoch")
        (m.mount / "snapshot.0").unlink()
        fsync_only_the_file(m.mount / "log.1", b"acknowledged")
        (m.mount / "after").write_bytes(b"")  # after the last fsync: lost on both
        dropped = m.lose_power()
        if filesystem == "journalled":
            assert sorted(os.listdir(m.mount)) == ["currentEpoch", "log.1"]
            assert (m.mount / "currentEpoch").read_bytes() == b"2"
            assert (m.mount / "log.1").read_bytes() == b"acknowledged"
            assert dropped == powerfs.Dropped(0, 0, entries=1)
        else:
            assert sorted(os.listdir(m.mount)) == ["currentEpoch", "snapshot.0"]
            assert (m.mount / "currentEpoch").read_bytes() == b"1"
            assert (m.mount / "snapshot.0").read_bytes() == b"old"
            assert dropped == powerfs.Dropped(0, 0, entries=4)


def test_sync_makes_everything_durable(mount):
    (mount.mount / "f").write_bytes(b"restored by an operator")
    mount.sync()
    assert mount.lose_power() == powerfs.Dropped(0, 0, 0)
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


POWER_STEPS = [{"op": "log_append", "node": "n1", "value": 1}, {"op": "kill", "node": "n2"},
               {"op": "power_fail", "node": "n1", "keep_seed": 7}, {"op": "power_fail", "node": "n2"}]


def test_a_saved_schedule_keeps_its_filesystem_and_its_keep_seeds(tmp_path):
    """What a replay needs to lose what the run lost: the filesystem, and each power failure's seed."""
    from hwm.bridge.maelstrom.schedule import Schedule, describe, load
    from hwm.bridge.servers import server_named
    from hwm.bridge.servers.run import ServerRun

    saved = Schedule(workload="log", clock="wall", server="etcd", filesystem="journalled",
                     steps=POWER_STEPS).save(tmp_path / "power.json")
    loaded = load(saved)
    assert (loaded.server, loaded.filesystem, loaded.steps) == ("etcd", "journalled", POWER_STEPS)
    assert describe(loaded.steps[2]) == "power_fail(n1, keep_seed=7)"
    run = ServerRun(server_named("etcd"), loaded)  # builds the cluster's plan; starts nothing
    assert run.cluster.power and run.cluster.filesystem == "journalled"
    raw = json.loads(saved.read_text())
    del raw["filesystem"]  # a file saved before the choice existed: posix, as it ran then
    (tmp_path / "older.json").write_text(json.dumps(raw))
    assert ServerRun(server_named("etcd"), load(tmp_path / "older.json")).cluster.filesystem == "posix"


def _replayed(tmp_path, args: list[str], **changes):
    from click.testing import CliRunner

    from hwm.bridge.maelstrom.schedule import Schedule
    from hwm.cli import main
    schedule = Schedule(workload="log", clock="wall", server="etcd", steps=POWER_STEPS).to_json()
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(dict(schedule, **changes)))
    return CliRunner().invoke(main, ["replay", str(path), *args]), path


@pytest.mark.parametrize("args, line", [
    (["--filesystem", "ext4"], "error: --filesystem 'ext4' is not posix or journalled"),
    (["--power-loss", "some"], "error: --power-loss 'some' is not all, torn or reordered"),
    (["--faults", "kill", "--filesystem", "journalled"],
     "error: --filesystem is about power failures: add power_fail to --faults"),
    (["--faults", "kill", "--power-loss", "torn"], "error: --power-loss is about power failures: add power_fail to --faults"),
])
def test_a_bad_power_choice_is_one_line_and_exit_2(args, line):
    from click.testing import CliRunner

    from hwm.cli import main
    done = CliRunner().invoke(main, ["test", "--server", "etcd", *args])
    if "not posix" not in line and "not all" not in line and done.output.startswith("error: etcd not found"):
        pytest.skip("etcd is not installed (its absence is said first)")
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [line]


def test_a_schedule_with_a_bad_filesystem_or_keep_seed_is_one_line_and_exit_2(tmp_path):
    done, path = _replayed(tmp_path, [], filesystem="ext4")
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        f"error: {path}, field 'filesystem': filesystem must be one of posix, journalled, got 'ext4'"]
    done, path = _replayed(tmp_path, [], steps=[{"op": "power_fail", "node": "n1", "keep_seed": -1}])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        f"error: {path}, step 1, field 'keep_seed': 'keep_seed' must be a non-negative integer (what the disk keeps "
        "of unsynced writes is drawn from it), got -1"]
    done, _ = _replayed(tmp_path, ["--filesystem", "ext4"])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == ["error: --filesystem 'ext4' is not posix or journalled"]


def test_a_saved_schedule_keeps_a_reordering_power_failure_and_refuses_one_without_a_seed(tmp_path):
    from hwm.bridge.maelstrom.schedule import Schedule, describe, load
    steps = [{"op": "log_append", "node": "n1", "value": 1},
             {"op": "power_fail", "node": "n1", "keep_seed": 7, "reorder": True}]
    loaded = load(Schedule(workload="log", clock="wall", server="etcd", steps=steps).save(tmp_path / "power.json"))
    assert loaded.steps == steps and describe(loaded.steps[1]) == "power_fail(n1, keep_seed=7, reorder)"
    for step, message in [({"op": "power_fail", "node": "n1", "reorder": True},
                           "'reorder' says the disk keeps the unsynced sectors 'keep_seed' draws in any order; "
                           "there is no 'keep_seed'"),
                          ({"op": "power_fail", "node": "n1", "keep_seed": 1, "reorder": "yes"},
                           "'reorder' must be true or false, got 'yes'")]:
        done, path = _replayed(tmp_path, [], steps=[step])
        assert done.exit_code == 2
        assert done.output.strip().splitlines() == [f"error: {path}, step 1, field 'reorder': {message}"]


def test_the_reordered_hunt_draws_reordering_power_failures(monkeypatch):
    """--power-loss reordered: some seeded power failures of a hunt carry `reorder`, and shrinking tries
    a finding's without it first (a prefix is the plainer loss)."""
    from hwm.bridge.servers import hunt
    assert hunt.PLAINER.index(("reorder",)) < hunt.PLAINER.index(("keep_seed", "reorder"))
    assert "reordered" in hunt.POWER_LOSSES


IN_FLIGHT = {"op": "power_fail", "node": "n1", "keep_seed": 3, "after_ms": 8,
             "during": [{"op": "log_append", "node": "n1", "value": 2},
                        {"op": "log_read", "node": "n1", "index": 1, "serializable": True}]}


def test_a_saved_schedule_keeps_a_power_failure_during_requests(tmp_path):
    """What a replay needs to cut the power while the same requests are in flight: the requests and
    the milliseconds from sending them to the cut."""
    from hwm.bridge.maelstrom.schedule import Schedule, describe, load
    from hwm.bridge.servers import server_named
    from hwm.bridge.servers.run import ServerRun

    steps = [POWER_STEPS[0], IN_FLIGHT]
    loaded = load(Schedule(workload="log", clock="wall", server="etcd", steps=steps).save(tmp_path / "in-flight.json"))
    assert loaded.steps == steps
    assert describe(IN_FLIGHT) == "power_fail(n1, keep_seed=3, 8 ms into log_append(n1, 2) ‖ log_read(n1, 1))"
    assert ServerRun(server_named("etcd"), loaded).cluster.power


@pytest.mark.parametrize("changes, field, message", [
    ({"after_ms": -1}, "after_ms", "'after_ms' must be an integer from 0 to 1000 (the requests are in flight), got -1"),
    ({"after_ms": 1.5}, "after_ms", "'after_ms' must be an integer from 0 to 1000 (the requests are in flight), got 1.5"),
    ({"after_ms": 5000}, "after_ms",
     "'after_ms' must be an integer from 0 to 1000 (the requests are in flight), got 5000"),
    ({"after_ms": None}, "after_ms",
     "a power failure 'during' requests needs 'after_ms', the milliseconds from sending them to the cut"),
    ({"during": None}, "after_ms",
     "'after_ms' says when the power goes while the requests of 'during' are in flight; there is no 'during'"),
    ({"during": []}, "during",
     "a power failure's 'during' needs at least one request of the log workload (log_append, log_read)"),
    ({"during": [{"op": "kill", "node": "n1"}]}, "during",
     "a power failure's 'during' are requests of the log workload (log_append, log_read), got {'op': 'kill', "
     "'node': 'n1'}"),
    ({"during": [{"op": "log_append", "node": "n7", "value": 2}]}, "node", "no node 'n7'; this run has n1, n2, n3"),
])
def test_a_bad_power_failure_during_requests_is_one_line_and_exit_2(tmp_path, changes, field, message):
    step = {k: v for k, v in dict(IN_FLIGHT, **changes).items() if v is not None}
    done, path = _replayed(tmp_path, [], steps=[POWER_STEPS[0], step])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [f"error: {path}, step 2, field '{field}': {message}"]


@pytest.mark.parametrize("needs_seed, left", [(set(), []), ({3}, [3]), ({3, 4}, [3, 4])])
def test_a_shrunk_finding_keeps_only_the_keep_seeds_it_needs(needs_seed, left):
    """Shrinking ends with power failures that keep nothing, where the finding still shows without
    their seeds (here, a stand-in for the server shows it while the steps in needs_seed keep theirs)."""
    from hwm.bridge.maelstrom.cluster import RunResult
    from hwm.bridge.maelstrom.history import Finding
    from hwm.bridge.maelstrom.schedule import Schedule
    from hwm.bridge.servers.hunt import ServerHuntReport, plainer_power_failures

    steps = [{"op": "log_append", "node": "n1", "value": 1}, {"op": "kill", "node": "n2"},
             {"op": "kill", "node": "n3"}, {"op": "power_fail", "node": "n1", "keep_seed": 5},
             {"op": "power_fail", "node": "n2", "keep_seed": 6}, {"op": "power_fail", "node": "n3", "keep_seed": 7}]

    def rerun(schedule):
        seeded = {k for k, step in enumerate(schedule.steps) if "keep_seed" in step}
        found = [Finding("AckedNeverLost", "lost")] if needs_seed <= seeded else []
        return RunResult(schedule, findings=found)

    found = RunResult(Schedule(workload="log", clock="wall", server="etcd", filesystem="journalled", steps=steps),
                      findings=[Finding("AckedNeverLost", "lost")])
    report = ServerHuntReport()
    shrunk = plainer_power_failures(found, "AckedNeverLost", rerun, 60, report)
    assert [k for k, step in enumerate(shrunk.schedule.steps) if "keep_seed" in step] == left
    assert [{k: v for k, v in s.items() if k != "keep_seed"} for s in shrunk.schedule.steps] == \
        [{k: v for k, v in s.items() if k != "keep_seed"} for s in steps]
    assert shrunk.schedule.filesystem == "journalled"


@pytest.mark.parametrize("needs_in_flight", [False, True])
def test_a_shrunk_finding_cuts_the_power_between_steps_where_it_still_shows(needs_in_flight):
    """Shrinking makes a power failure during requests a plain one (no requests in flight, no seed)
    where the finding still shows without them; else the requests stay, and only the seed goes."""
    from hwm.bridge.maelstrom.cluster import RunResult
    from hwm.bridge.maelstrom.history import Finding
    from hwm.bridge.maelstrom.schedule import Schedule
    from hwm.bridge.servers.hunt import ServerHuntReport, plainer_power_failures

    def rerun(schedule):
        in_flight = any("during" in step for step in schedule.steps)
        return RunResult(schedule, findings=[Finding("AckedNeverLost", "lost")] if in_flight or not needs_in_flight
                         else [])

    found = RunResult(Schedule(workload="log", clock="wall", server="etcd", steps=[POWER_STEPS[0], IN_FLIGHT]),
                      findings=[Finding("AckedNeverLost", "lost")])
    shrunk = plainer_power_failures(found, "AckedNeverLost", rerun, 60, ServerHuntReport())
    plain = {"op": "power_fail", "node": "n1"}
    assert shrunk.schedule.steps[1] == ({k: v for k, v in IN_FLIGHT.items() if k != "keep_seed"} if needs_in_flight
                                        else plain)


def test_the_attic_and_its_limbo_are_never_taken_for_an_inode_a_recorded_change_names(tmp_path):
    # Both are made by the filesystem itself, and either may get the number of an inode a recorded
    # change names, freed and reused since: a power failure then moved the limbo away and failed
    # ("No such file or directory: .../n3.attic/limbo") in a hunt of stock etcd with --power-loss torn.
    needs_fuse()
    (tmp_path / "backing").mkdir()
    fs = powerfs._operations()(str(tmp_path / "backing"))
    limbo = Path(fs.attic) / "limbo"
    (limbo / "held").mkdir(parents=True)
    where = fs._inodes()
    assert os.lstat(fs.attic).st_ino not in where and os.lstat(limbo).st_ino not in where
    assert where[os.lstat(limbo / "held").st_ino] == [str(limbo / "held")]  # what they hold is named
