"""A filesystem that can lose power: what was written and not fsynced is dropped (Jepsen's LazyFS idea).

A member's data directory is a FUSE mount (mfusepy, over libfuse) of a folder beside it. Every
operation passes straight through to that folder, so what the server reads is what it wrote; but
before a write or a truncate changes bytes of a file, the bytes it replaces (and the file's size)
are kept in memory, per file, until the file is fsynced (fsync and fdatasync alike; the kernel
fsyncs after each write to a file opened O_SYNC or O_DSYNC). `lose_power` puts every file back as
it was at its last fsync: the kept bytes are written back, newest first, and the file cut to its
synced size. What the server
wrote without an fsync is gone, as from a disk's cache when the power goes.

What it drops is data only. Names are durable at once: a file created, renamed or unlinked, a
directory made or removed, stays so (a journalling filesystem that commits its metadata before
the power goes); an fsync of a directory is accepted and changes nothing. A renamed file keeps
its unsynced bytes under its new name (they follow the inode), and lose them as well.

The filesystem runs as its own process (`python -m hwm.bridge.servers.powerfs BACKING MOUNT
SOCKET`), never inside hwm: libfuse takes the process's signals. hwm speaks to it through a Unix
socket: `lose-power` (answered with the files and bytes dropped), `sync` (everything becomes
durable: an operator's restore is synced before it counts) and `pending`. The kernel caches no
attribute or name (timeouts 0) and drops a file's cached pages at each open, so a server
restarted after `lose_power` reads what the disk kept.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

FUSE_DEVICE = "/dev/fuse"


def unavailable() -> str | None:
    """Why this machine cannot mount hwm's filesystem, in one line naming what to install; None when it can."""
    if not os.path.exists(FUSE_DEVICE):
        return (f"no {FUSE_DEVICE} on this machine: power failures need FUSE (a kernel with fuse; a container "
                "given the device)")
    if shutil.which("fusermount") is None and shutil.which("fusermount3") is None:
        return "fusermount not found on PATH: install the Debian package fuse (apt-get install fuse libfuse2)"
    try:
        import mfusepy  # noqa: F401  (it loads libfuse when imported)
    except ImportError:
        return "power failures need the mfusepy FUSE binding: pip install 'hwm[servers]'"
    except OSError as e:  # mfusepy's "Unable to find libfuse"
        return f"libfuse not found ({e}): install the Debian package libfuse2 (apt-get install libfuse2)"
    if os.geteuid() != 0:
        return "power failures mount a filesystem for each member: run as root"
    return None


@dataclass
class Unsynced:
    """A file's writes since its last fsync: its size then, and the bytes each write replaced."""
    size: int
    replaced: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, bytes there before), oldest first
    written: int = 0  # bytes written or cut since the fsync


def _operations():
    import mfusepy

    class PowerFS(mfusepy.Operations):
        use_ns = True

        def __init__(self, backing: str):
            self.backing = backing
            self.mutex = threading.Lock()  # one change at a time, lose_power included (`lock` is FUSE's)
            self.unsynced: dict[int, Unsynced] = {}  # backing inode -> what it wrote since its fsync

        def _path(self, path: str) -> str:
            return os.path.join(self.backing, path.lstrip("/"))

        @staticmethod
        def _owner(path: str) -> None:
            uid, gid, _ = mfusepy.fuse_get_context()
            os.lchown(path, uid, gid)  # the caller's, as a kernel filesystem makes it

        # ---- what keeps a write undoable ------------------------------------------------------
        def _keep(self, fh: int, offset: int, length: int) -> None:
            st = os.fstat(fh)
            record = self.unsynced.setdefault(st.st_ino, Unsynced(st.st_size))
            record.written += length
            if offset < st.st_size:
                record.replaced.append((offset, os.pread(fh, min(length, st.st_size - offset), offset)))

        def _forget(self, path: str) -> None:
            """The file at `path` is about to lose its last name: its unsynced bytes go with it."""
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return
            if st.st_nlink <= 1:
                self.unsynced.pop(st.st_ino, None)

        def lose_power(self) -> tuple[int, int]:
            """Every file back as at its last fsync; (files, bytes) dropped."""
            with self.mutex:
                paths = {}
                for folder, dirs, files in os.walk(self.backing):
                    for name in files:
                        full = os.path.join(folder, name)
                        paths[os.lstat(full).st_ino] = full
                files = dropped = 0
                for inode, record in self.unsynced.items():
                    if inode not in paths:
                        continue
                    fd = os.open(paths[inode], os.O_WRONLY)
                    try:
                        for offset, old in reversed(record.replaced):
                            os.pwrite(fd, old, offset)
                        os.ftruncate(fd, record.size)
                        dropped += record.written
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    files += 1
                self.unsynced.clear()
                return files, dropped

        def sync(self) -> None:
            with self.mutex:
                self.unsynced.clear()

        def pending(self) -> tuple[int, int]:
            with self.mutex:
                return len(self.unsynced), sum(r.written for r in self.unsynced.values())

        # ---- passthrough ------------------------------------------------------------------------
        def getattr(self, path, fh=None):
            st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_ino", "st_dev")
            attrs = {k: getattr(st, k) for k in keys}
            attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return attrs

        def access(self, path, amode):
            if not os.access(self._path(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._path(path))]

        def readlink(self, path):
            return os.readlink(self._path(path))

        def mkdir(self, path, mode):
            os.mkdir(self._path(path), mode)
            self._owner(self._path(path))
            return 0

        def rmdir(self, path):
            os.rmdir(self._path(path))
            return 0

        def mknod(self, path, mode, dev):
            os.mknod(self._path(path), mode, dev)
            self._owner(self._path(path))
            return 0

        def symlink(self, target, source):
            os.symlink(source, self._path(target))
            self._owner(self._path(target))
            return 0

        def link(self, target, source):
            os.link(self._path(source), self._path(target))
            return 0

        def unlink(self, path):
            with self.mutex:
                self._forget(self._path(path))
                os.unlink(self._path(path))
            return 0

        def rename(self, old, new):
            with self.mutex:
                self._forget(self._path(new))  # a file renamed over loses its name
                os.rename(self._path(old), self._path(new))
            return 0

        def chmod(self, path, mode):
            os.chmod(self._path(path), mode)
            return 0

        def chown(self, path, uid, gid):
            os.lchown(self._path(path), uid, gid)
            return 0

        def utimens(self, path, times=None):
            os.utime(self._path(path), ns=times) if times else os.utime(self._path(path))
            return 0

        def statfs(self, path):
            sv = os.statvfs(self._path(path))
            return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                                "f_files", "f_flag", "f_frsize", "f_namemax")}

        @staticmethod
        def _backing_flags(flags: int) -> int:
            # O_APPEND off: the kernel gives each write its offset, and pwrite honours it only so.
            # Write-only becomes read-write: a write first reads the bytes it replaces.
            flags &= ~(os.O_APPEND | os.O_CREAT)
            return (flags & ~os.O_ACCMODE) | os.O_RDWR if flags & os.O_ACCMODE == os.O_WRONLY else flags

        def open(self, path, flags):
            return os.open(self._path(path), self._backing_flags(flags))

        def create(self, path, mode, flags):
            fd = os.open(self._path(path), self._backing_flags(flags) | os.O_CREAT, mode)
            self._owner(self._path(path))
            return fd

        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            with self.mutex:
                self._keep(fh, offset, len(data))
                return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            with self.mutex:
                fd = fh if fh is not None else os.open(self._path(path), os.O_RDWR)
                try:
                    self._keep(fd, length, max(0, os.fstat(fd).st_size - length))
                    os.ftruncate(fd, length)
                finally:
                    if fh is None:
                        os.close(fd)
            return 0

        def fallocate(self, path, mode, offset, size, fh):
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)  # callers fall back to writing or truncating

        def fsync(self, path, datasync, fh):
            with self.mutex:
                self.unsynced.pop(os.fstat(fh).st_ino, None)
                os.fdatasync(fh) if datasync else os.fsync(fh)
            return 0

        def fsyncdir(self, path, datasync, fh):
            return 0  # names are durable at once

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            os.close(fh)
            return 0

    return PowerFS


def _serve_control(fs, sock_path: str) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(sock_path)
    server.listen(4)
    while True:
        conn, _ = server.accept()
        with conn:
            command = conn.recv(64).decode().strip()
            if command == "lose-power":
                answer = "%d %d" % fs.lose_power()
            elif command == "sync":
                fs.sync()
                answer = "ok"
            elif command == "pending":
                answer = "%d %d" % fs.pending()
            else:
                answer = f"unknown command {command!r}"
            conn.sendall(answer.encode())


def main(argv: list[str]) -> None:
    """python -m hwm.bridge.servers.powerfs BACKING MOUNT SOCKET: serve until unmounted."""
    import mfusepy

    backing, mount, sock_path = argv
    fs = _operations()(backing)
    threading.Thread(target=_serve_control, args=(fs, sock_path), daemon=True).start()
    # No cache of names or attributes: a file's size after lose_power is the disk's at once.
    mfusepy.FUSE(fs, mount, foreground=True, nothreads=True, allow_other=True, default_permissions=True,
                 attr_timeout=0, entry_timeout=0, negative_timeout=0, fsname="hwm-powerfs")


class PowerMount:
    """hwm's side of one mounted directory: start the filesystem's process, lose power, unmount."""

    def __init__(self, backing: Path, mount: Path, control: Path, log: Path):
        self.backing, self.mount, self.control, self.log = backing, mount, control, log
        self.proc: subprocess.Popen | None = None

    def start(self, seconds: float = 10.0) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "hwm.bridge.servers.powerfs", str(self.backing),
                                          str(self.mount), str(self.control)], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + seconds
        while not (os.path.ismount(self.mount) and self.control.exists()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.unmount()
                tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
                raise OSError(f"could not mount {self.mount}: {' '.join(tail) or 'no answer'}")
            time.sleep(0.02)

    def ask(self, command: str) -> str:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(str(self.control))
            s.sendall(command.encode())
            s.shutdown(socket.SHUT_WR)
            return s.recv(256).decode()

    def lose_power(self) -> tuple[int, int]:
        """Drop every unsynced write; (files, bytes) dropped. Only while nothing runs on the mount."""
        files, dropped = self.ask("lose-power").split()
        return int(files), int(dropped)

    def sync(self) -> None:
        self.ask("sync")

    def pending(self) -> tuple[int, int]:
        files, held = self.ask("pending").split()
        return int(files), int(held)

    def unmount(self) -> None:
        unmount(self.mount)
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
            self.proc = None


def mounts_under(folder: Path) -> list[str]:
    """The mount points at or below `folder`, deepest first."""
    prefix = str(folder).rstrip("/")
    try:
        with open("/proc/self/mounts") as f:
            points = [line.split()[1].replace("\\040", " ") for line in f]
    except OSError:
        return []
    return sorted((p for p in points if p == prefix or p.startswith(prefix + "/")), key=len, reverse=True)


def unmount(mount: Path | str) -> bool:
    """Unmount `mount` if it is mounted (lazily when busy); whether it was."""
    if str(mount) not in mounts_under(Path(mount)):
        return False
    tool = shutil.which("fusermount") or shutil.which("fusermount3")
    for command in ([tool, "-u", str(mount)], [tool, "-u", "-z", str(mount)], ["umount", "-l", str(mount)]):
        if command[0] and subprocess.run(command, capture_output=True).returncode == 0:
            return True
    return True


if __name__ == "__main__":
    main(sys.argv[1:])
