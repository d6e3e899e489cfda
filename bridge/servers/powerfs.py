"""A filesystem that can lose power: what was written and not fsynced is dropped (Jepsen's LazyFS idea).

A member's data directory is a FUSE mount (mfusepy, over libfuse) of a folder beside it. Every
operation passes straight through to that folder, so what the server reads is what it wrote; but
before a write or a truncate changes bytes of a file, the bytes it replaces (and the file's size)
are kept in memory, per file, until the file is fsynced (fsync and fdatasync alike; the kernel
fsyncs after each write to a file opened O_SYNC or O_DSYNC). `lose_power` puts every file back as
it was at its last fsync: the kept bytes are written back, newest first, and the file cut to its
synced size. What the server wrote without an fsync is gone, as from a disk's cache when the power
goes.

Names are lost the same way. A directory entry created, renamed or removed (a file or a directory,
a link, a symlink) is durable only once its directory is fsynced: POSIX's fsync(2) ("an explicit
fsync() on a file descriptor for the directory is also needed") and ALICE's default persistence
model (a directory entry's creation or deletion waits for a sync of its parent). A file's own
fsync keeps its bytes, not its name; ext4 and XFS, which journal the name with the inode, are
kinder, so a server this catches is relying on them. Before a name first changes after its
directory's fsync, the inode it names on disk (or that it names nothing) is kept; an inode that
loses its last name while the disk still names it waits in a folder beside the backing one (the
attic), so that `lose_power` can put it back with its synced bytes: a created file vanishes, a
rename is undone, an unlinked file or a removed directory comes back. A rename counts at each end
in its own directory; a file's mode, owner and times are durable at once. LazyFS (its lfs_rename
and lfs_unlink) passes names straight through and loses data only. That is `posix`, the default; a
`journalled` filesystem (ext4 and XFS, whose journal holds every name change in order and is
committed by any fsync) makes every name changed before a file's or a directory's fsync durable
with it. Bytes stay each file's own on both: another file's unsynced writes are not kept.

`lose_power(seed)` keeps part of what was not fsynced, as a disk that wrote some of it back before
the power went: each file a prefix of its writes and truncates since its fsync, in the order they
came, and half the time the next write torn (its first sectors kept, the rest as it was: a disk
writes a 512-byte sector whole or not at all, and a page is eight of them, so a tear at a page
boundary is one of these); each directory a prefix of its own name changes (posix), or the journal
a prefix of every directory's (journalled). How much, and where the tear falls, is drawn from the
seed and the file's or the directory's path, so that the same seed on the same writes keeps the
same. A file created and removed since its directory's fsync stays removed, even where a kept
prefix names it. `lose_power(seed, reorder=True)` keeps each file's unsynced sectors in any order
instead (a disk's cache writes back pages, and a drive sectors, in no order the writes came in):
each 512-byte sector that differs from the file's synced bytes is either kept or not, drawn from
the seed, and so is the file's size (the new one or the synced one; a sector kept past the synced
end with the one before it lost leaves a hole of zeros). Names are kept as with a prefix.

A process writing through a shared writable mmap reaches this filesystem when the kernel writes
its dirty pages back: as write() at msync, munmap, close or the kernel's own writeback, and its
msync(MS_SYNC) as fsync. `lose_power` first makes the kernel write back what it still holds
(syncfs of the mount), so that pages no msync covered are dropped with the rest instead of
arriving after the power came back.

The filesystem runs as its own process (`python -m hwm.bridge.servers.powerfs BACKING MOUNT SOCKET
[posix|journalled]`), never inside hwm: libfuse takes the process's signals. hwm speaks to it
through a Unix socket: `lose-power [SEED]` (answered with the files, bytes and directory entries
dropped, and what was kept), `sync` (everything becomes durable: an operator's restore is synced
before it counts) and `pending`. The kernel caches no attribute or name (timeouts 0) and drops a
file's cached pages at each open, so a server restarted after `lose_power` reads what the disk kept.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import astuple, dataclass, field
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


# What a file's fsync promises of its name (`--filesystem`): posix, nothing (its directory's fsync
# does); journalled (ext4, XFS: directory entries are journalled, and any fsync commits the journal),
# the name and every directory entry changed before it.
FILESYSTEMS = ("posix", "journalled")
# A power failure with a seed may tear a write: its first sectors reach the disk, the rest does not.
# A disk writes a sector whole or not at all, and 512 bytes is the smallest sector (a 4096-byte
# page is eight of them, so a tear at a page boundary is one of these).
SECTOR_BYTES = 512


@dataclass(frozen=True)
class Change:
    """One write or truncate since its file's fsync, with what undoes it."""
    offset: int  # where it starts (a truncate: the new size)
    length: int  # bytes written, or cut
    replaced: bytes  # the bytes there before, from offset to the old end at most
    size: int  # the file's size before it
    write: bool  # a write (a tear keeps its first sectors), else a truncate

    def undo(self, fd: int, keep: int = 0) -> None:
        """Put back what this change replaced, past its first `keep` bytes (a torn write keeps those)."""
        if keep < len(self.replaced):
            os.pwrite(fd, self.replaced[keep:], self.offset + keep)
        os.ftruncate(fd, max(self.size, self.offset + keep if keep else 0))

    def undo_in(self, data: bytearray) -> None:
        """`undo` (whole, no tear) on the file's bytes held in memory."""
        end = self.offset + len(self.replaced)
        data.extend(bytes(max(0, end - len(data))))
        data[self.offset:end] = self.replaced
        del data[self.size:]
        data.extend(bytes(self.size - len(data)))

    def tears(self) -> list[int]:
        """How many of its first bytes a tear may keep: up to each sector boundary strictly inside it."""
        first = (self.offset // SECTOR_BYTES + 1) * SECTOR_BYTES
        return [end - self.offset for end in range(first, self.offset + self.length, SECTOR_BYTES)] if self.write else []


@dataclass
class Unsynced:
    """A file's changes since its last fsync, oldest first."""
    changes: list[Change] = field(default_factory=list)

    @property
    def written(self) -> int:  # bytes written or cut since the fsync
        return sum(c.length for c in self.changes)


@dataclass(frozen=True)
class Dropped:
    """What a power failure dropped (or what one would drop now), and, with a seed, what it kept."""
    files: int  # files whose bytes went back (to their last fsync, or to what the disk kept since)
    bytes: int  # bytes written or cut since their fsync, and dropped
    entries: int  # directory entries put back (as at their directory's last fsync, or what the disk kept)
    kept_bytes: int = 0  # bytes written or cut since their fsync, and kept
    torn: int = 0  # writes torn: their first sectors kept, the rest dropped
    kept_entries: int = 0  # names changed since their directory's fsync, and kept
    reordered: int = 0  # files that kept a later unsynced sector and lost an earlier one (reorder)


def attic_of(backing: str | Path) -> str:
    """Where inodes the disk still names wait once they lose their last name: beside the backing
    folder, on its filesystem (an inode moves there by rename), out of the mount's sight."""
    return str(backing).rstrip("/") + ".attic"


def _syncfs(folder: str) -> None:
    """Every page the kernel holds dirty for the mount, written to the daemon before this returns.
    syncfs starts the writes but does not wait for a FUSE daemon's replies (newer kernels never
    wait on an untrusted server); closing a file does, so every file is opened and closed once."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), f"syncfs {folder}")
    finally:
        os.close(fd)
    for where, _, names in os.walk(folder):
        for name in names:
            try:
                os.close(os.open(os.path.join(where, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK))
            except OSError:
                pass  # a symlink, a socket, a name already gone: no pages of its own


def _operations():
    import mfusepy

    class PowerFS(mfusepy.Operations):
        use_ns = True

        def __init__(self, backing: str, mount: str | None = None, filesystem: str = "posix"):
            if filesystem not in FILESYSTEMS:
                raise ValueError(f"filesystem {filesystem!r} is not {' or '.join(FILESYSTEMS)}")
            self.backing, self.mount, self.filesystem = backing, mount, filesystem
            self.attic = attic_of(backing)
            shutil.rmtree(self.attic, ignore_errors=True)  # an earlier process's: nothing names it now
            os.mkdir(self.attic)
            self.mutex = threading.Lock()  # one change at a time, lose_power included (`lock` is FUSE's)
            self.unsynced: dict[int, Unsynced] = {}  # backing inode -> what it wrote since its fsync
            # directory inode -> {name: [(operation, the inode named there before it, or None), ...]},
            # for each name changed since the directory's fsync, oldest first: the first names what the
            # disk names there
            self.entries: dict[int, dict[str, list[tuple[int, int | None]]]] = {}
            self.operation = 0  # the name-changing operations so far (a rename's two ends are one)
            self.kept: set[int] = set()  # inodes in the attic

        def _path(self, path: str) -> str:
            return os.path.join(self.backing, path.lstrip("/"))

        @staticmethod
        def _owner(path: str) -> None:
            uid, gid, _ = mfusepy.fuse_get_context()
            os.lchown(path, uid, gid)  # the caller's, as a kernel filesystem makes it

        # ---- what keeps a write undoable ------------------------------------------------------
        def _keep(self, fh: int, offset: int, length: int, write: bool) -> None:
            st = os.fstat(fh)
            replaced = os.pread(fh, min(length, st.st_size - offset), offset) if offset < st.st_size else b""
            self.unsynced.setdefault(st.st_ino, Unsynced()).changes.append(
                Change(offset, length, replaced, st.st_size, write))

        # ---- what keeps a name undoable -------------------------------------------------------
        @contextlib.contextmanager
        def _names_change(self):
            """The mutex, held for one operation that changes names, numbered (a power failure may keep
            the first ones)."""
            with self.mutex:
                self.operation += 1
                yield

        def _changing(self, path: str) -> None:
            """The entry at `path` is about to change: keep what it names now (the first time since its
            directory's fsync, what the disk names there)."""
            folder, name = os.path.split(path)
            try:
                before = os.lstat(path).st_ino
            except FileNotFoundError:
                before = None
            self.entries.setdefault(os.lstat(folder).st_ino, {}).setdefault(name, []).append((self.operation, before))

        def _named_on_disk(self, inode: int) -> bool:
            return any(changes[0][1] == inode for names in self.entries.values() for changes in names.values())

        def _drop_name(self, path: str, st: os.stat_result) -> None:
            """Unlink or rmdir `path` (`st` its lstat). An inode left with no name that the disk still
            names moves to the attic instead, to come back at a power failure."""
            self._changing(path)
            directory = stat.S_ISDIR(st.st_mode)
            if (directory or st.st_nlink == 1) and self._named_on_disk(st.st_ino):
                os.rename(path, os.path.join(self.attic, str(st.st_ino)))
                self.kept.add(st.st_ino)
            elif directory:
                os.rmdir(path)
                self.entries.pop(st.st_ino, None)  # its number may be a new directory's next
            else:
                os.unlink(path)
                if st.st_nlink == 1:
                    self.unsynced.pop(st.st_ino, None)  # its unsynced bytes go with it

        def _sweep_attic(self) -> None:
            """Inodes the disk no longer names leave the attic (a directory there is empty: rmdir's)."""
            for inode in [i for i in self.kept if not self._named_on_disk(i)]:
                path = os.path.join(self.attic, str(inode))
                st = os.lstat(path)
                if stat.S_ISDIR(st.st_mode):
                    os.rmdir(path)
                    self.entries.pop(inode, None)
                else:
                    os.unlink(path)
                    if st.st_nlink == 1:
                        self.unsynced.pop(inode, None)
                self.kept.discard(inode)

        def _empty_attic(self) -> None:
            for name in os.listdir(self.attic):
                path = os.path.join(self.attic, name)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            self.kept.clear()

        def _inodes(self) -> dict[int, list[str]]:
            """Every inode of the backing folder and the attic, with its paths (the live ones first)."""
            where: dict[int, list[str]] = {os.lstat(self.backing).st_ino: [self.backing]}
            # Not the attic nor `_revert_entries`' limbo themselves, only what they hold: made by hwm,
            # either may have the number of an inode a recorded change names, freed and reused since.
            own = (self.attic, os.path.join(self.attic, "limbo"))
            for top in (self.backing, self.attic):
                for folder, dirs, files in os.walk(top):
                    for name in dirs + files:
                        full = os.path.join(folder, name)
                        if full not in own:
                            where.setdefault(os.lstat(full).st_ino, []).append(full)
            return where

        def _kept_operations(self, where: dict[int, list[str]], seed: int | None) -> dict[int, int]:
            """Directory inode -> the last name-changing operation the disk keeps there: none without a
            seed; with one, a prefix of the directory's own operations (posix), or of every directory's
            together (journalled: the journal commits them in order), drawn from the seed."""
            done = {folder: sorted({n for changes in names.values() for n, _ in changes})
                    for folder, names in self.entries.items()}
            if seed is None:
                return {folder: 0 for folder in done}
            if self.filesystem == "journalled":
                journal = sorted({n for numbers in done.values() for n in numbers})
                k = random.Random(f"{seed} journal").randint(0, len(journal))
                return {folder: journal[k - 1] if k else 0 for folder in done}
            kept = {}
            for folder, numbers in done.items():
                name = os.path.relpath(where[folder][0], self.backing) if folder in where else str(folder)
                k = random.Random(f"{seed} {name}/").randint(0, len(numbers))
                kept[folder] = numbers[k - 1] if k else 0
            return kept

        def _revert_entries(self, seed: int | None = None) -> tuple[int, int]:
            """Every changed name back to what the disk names there, after the operations it keeps
            (`_kept_operations`); how many differed, and how many changed names it keeps."""
            limbo = os.path.join(self.attic, "limbo")  # the attic's own names are inode numbers
            os.mkdir(limbo)
            last = self._kept_operations(self._inodes(), seed)
            changed, kept = [], 0
            for folder, names in self.entries.items():
                for name, changes in names.items():
                    lost = [before for n, before in changes if n > last[folder]]
                    if lost:  # the disk names what the first change it lost found there
                        changed.append((folder, name, lost[0]))
                    else:
                        kept += 1
            reverted = 0
            for n, (folder, name, inode) in enumerate(changed):  # what the disk does not name there leaves
                where = self._inodes()
                if folder not in where:
                    continue  # a directory that is gone and that no synced entry names
                path = os.path.join(where[folder][0], name)
                try:
                    now = os.lstat(path).st_ino
                except FileNotFoundError:
                    now = None
                if now != inode:
                    reverted += 1
                    if now is not None:
                        os.rename(path, os.path.join(limbo, str(n)))
            for folder, name, inode in changed:  # and what it names comes back
                where = self._inodes()
                if inode is None or folder not in where or inode not in where:
                    continue
                path = os.path.join(where[folder][0], name)
                if os.path.lexists(path):
                    continue
                source = where[inode][0]
                directory = stat.S_ISDIR(os.lstat(source).st_mode)  # one name only: it moves
                if directory or os.path.dirname(source) in (self.attic, limbo):
                    os.rename(source, path)
                else:
                    os.link(source, path, follow_symlinks=False)  # a file with another name keeps it
            shutil.rmtree(limbo)
            return reverted, kept

        @staticmethod
        def _kept_changes(record: Unsynced, rng: random.Random | None) -> tuple[int, int]:
            """(how many of a file's changes the disk keeps whole, how many bytes of the next one): none
            without a seed; with one, a prefix drawn from it, and half the time the next change, if a
            write across a sector boundary, torn at one."""
            if rng is None:
                return 0, 0
            whole = rng.randint(0, len(record.changes))
            tears = record.changes[whole].tears() if whole < len(record.changes) else []
            return whole, rng.choice(tears) if tears and rng.random() < 0.5 else 0

        @staticmethod
        def _reorder(fd: int, record: Unsynced, rng: random.Random) -> tuple[int, int, bool]:
            """Keep each unsynced sector of the file, and its new size, or not, in no order: (bytes lost,
            bytes kept, whether a later changed sector was kept where an earlier one was lost)."""
            now = os.pread(fd, os.fstat(fd).st_size, 0)
            synced = bytearray(now)
            for change in reversed(record.changes):  # the bytes of its last fsync
                change.undo_in(synced)
            old = bytes(synced)
            size = len(now) if rng.random() < 0.5 else len(old)
            out = bytearray(old[:size].ljust(size, b"\0"))
            lost = kept = 0
            lost_one = out_of_order = False
            for start in range(0, max(len(now), len(old)), SECTOR_BYTES):
                new_part, old_part = now[start:start + SECTOR_BYTES], old[start:start + SECTOR_BYTES]
                if new_part == old_part:
                    continue
                if rng.random() < 0.5 and start < size:  # the disk wrote it back (within the size it kept)
                    out[start:start + len(new_part)] = new_part
                    kept += min(len(new_part), size - start)
                    out_of_order = out_of_order or lost_one
                else:
                    lost += max(len(new_part), len(old_part))
                    lost_one = True
            del out[size:]
            os.ftruncate(fd, 0)
            os.pwrite(fd, bytes(out), 0)
            return lost, kept, out_of_order

        def lose_power(self, seed: int | None = None, reorder: bool = False) -> Dropped:
            """Every file's bytes back as at its last fsync, every directory's entries as at its last
            fsync (posix; journalled: at the last fsync of anything); what was dropped. With a seed, each
            file keeps a prefix of its changes since, the last perhaps torn, and each directory (posix)
            or the journal a prefix of its name changes, drawn from the seed and the file's or the
            directory's path, so that the same changes lose the same."""
            if self.mount is not None:  # outside the mutex: what the kernel still holds comes through write()
                _syncfs(self.mount)
            with self.mutex:
                where = self._inodes()
                files = dropped = kept_bytes = torn = reordered = 0
                for inode, record in self.unsynced.items():
                    if inode not in where:
                        continue
                    path = where[inode][0]
                    rng = None if seed is None else random.Random(f"{seed} {os.path.relpath(path, self.backing)}")
                    if rng is not None and reorder:
                        fd = os.open(path, os.O_RDWR)
                        try:
                            lost, kept, out_of_order = self._reorder(fd, record, rng)
                            os.fsync(fd)
                        finally:
                            os.close(fd)
                        files, dropped, kept_bytes = files + (lost > 0), dropped + lost, kept_bytes + kept
                        reordered += out_of_order
                        continue
                    whole, keep = self._kept_changes(record, rng)
                    if whole == len(record.changes):
                        kept_bytes += record.written
                        continue
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        for change in reversed(record.changes[whole + 1:]):
                            change.undo(fd)
                        record.changes[whole].undo(fd, keep)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    lost = sum(c.length for c in record.changes[whole:]) - keep
                    files, dropped, kept_bytes, torn = files + 1, dropped + lost, kept_bytes + record.written - lost, \
                        torn + (keep > 0)
                entries, kept_entries = self._revert_entries(seed)
                self.unsynced.clear()
                self.entries.clear()
                self._empty_attic()
                return Dropped(files, dropped, entries, kept_bytes, torn, kept_entries, reordered)

        def sync(self) -> None:
            if self.mount is not None:
                _syncfs(self.mount)
            with self.mutex:
                self.unsynced.clear()
                self.entries.clear()
                self._empty_attic()

        def pending(self) -> Dropped:
            """What a power failure now would drop at most (names changed since their directory's fsync,
            some perhaps changed back)."""
            with self.mutex:
                return Dropped(len(self.unsynced), sum(r.written for r in self.unsynced.values()),
                               sum(len(names) for names in self.entries.values()))

        def _commit_journal(self) -> None:
            """journalled: any fsync commits the journal, and with it every name changed so far."""
            if self.filesystem == "journalled":
                self.entries.clear()
                self._sweep_attic()

        # ---- passthrough ------------------------------------------------------------------------
        def getattr(self, path, fh=None):
            st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_ino", "st_dev")
            attrs = {k: getattr(st, k) for k in keys}
            attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            if st.st_ino in self.kept and not stat.S_ISDIR(st.st_mode):
                attrs["st_nlink"] -= 1  # the attic's link is no name of the server's
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
            with self._names_change():
                self._changing(self._path(path))
                os.mkdir(self._path(path), mode)
                self._owner(self._path(path))
            return 0

        def rmdir(self, path):
            with self._names_change():
                st = os.lstat(self._path(path))
                if not stat.S_ISDIR(st.st_mode):
                    raise mfusepy.FuseOSError(errno.ENOTDIR)
                if os.listdir(self._path(path)):
                    raise mfusepy.FuseOSError(errno.ENOTEMPTY)
                self._drop_name(self._path(path), st)
            return 0

        def mknod(self, path, mode, dev):
            with self._names_change():
                self._changing(self._path(path))
                os.mknod(self._path(path), mode, dev)
                self._owner(self._path(path))
            return 0

        def symlink(self, target, source):
            with self._names_change():
                self._changing(self._path(target))
                os.symlink(source, self._path(target))
                self._owner(self._path(target))
            return 0

        def link(self, target, source):
            with self._names_change():
                self._changing(self._path(target))
                os.link(self._path(source), self._path(target))
            return 0

        def unlink(self, path):
            with self._names_change():
                st = os.lstat(self._path(path))
                if stat.S_ISDIR(st.st_mode):
                    raise mfusepy.FuseOSError(errno.EISDIR)
                self._drop_name(self._path(path), st)
            return 0

        def rename(self, old, new):
            old, new = self._path(old), self._path(new)
            with self._names_change():
                source = os.lstat(old)
                try:
                    target = os.lstat(new)
                except FileNotFoundError:
                    target = None
                if target is not None and target.st_ino == source.st_ino:
                    return 0  # two names of one file: rename(2) does nothing
                # The kernel has refused a directory over a file and the reverse, and a directory into
                # itself; a directory replaced must be empty.
                if target is not None and stat.S_ISDIR(target.st_mode) and os.listdir(new):
                    raise mfusepy.FuseOSError(errno.ENOTEMPTY)
                if target is not None:
                    self._drop_name(new, target)  # the file renamed over loses its name
                else:
                    self._changing(new)
                self._changing(old)
                os.rename(old, new)
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
            with self._names_change():
                if not os.path.lexists(self._path(path)):
                    self._changing(self._path(path))
                fd = os.open(self._path(path), self._backing_flags(flags) | os.O_CREAT, mode)
                self._owner(self._path(path))
            return fd

        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            with self.mutex:
                self._keep(fh, offset, len(data), write=True)
                return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            with self.mutex:
                fd = fh if fh is not None else os.open(self._path(path), os.O_RDWR)
                try:
                    self._keep(fd, length, max(0, os.fstat(fd).st_size - length), write=False)
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
                self._commit_journal()
            return 0

        def fsyncdir(self, path, datasync, fh):
            with self.mutex:
                self.entries.pop(os.lstat(self._path(path)).st_ino, None)  # its entries are on disk now
                self._sweep_attic()
                self._commit_journal()
            return 0

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
            command, *seed = conn.recv(64).decode().split()
            reorder = seed[1:] == ["reorder"]
            if reorder:
                seed = seed[:1]
            if command in ("lose-power", "pending") and all(s.isdigit() for s in seed) and (seed or not reorder):
                try:
                    dropped = fs.lose_power(*map(int, seed), reorder=reorder) if command == "lose-power" else fs.pending()
                except OSError as e:  # answered, not the end of the control thread
                    answer = f"error {command}: {e}"
                else:
                    answer = " ".join(str(n) for n in astuple(dropped))
            elif command == "sync":
                fs.sync()
                answer = "ok"
            else:
                answer = f"unknown command {command!r}"
            conn.sendall(answer.encode())


def main(argv: list[str]) -> None:
    """python -m hwm.bridge.servers.powerfs BACKING MOUNT SOCKET [FILESYSTEM]: serve until unmounted."""
    import mfusepy

    backing, mount, sock_path, *filesystem = argv
    fs = _operations()(backing, mount, *filesystem)
    threading.Thread(target=_serve_control, args=(fs, sock_path), daemon=True).start()
    # No cache of names or attributes: a file's size after lose_power is the disk's at once.
    mfusepy.FUSE(fs, mount, foreground=True, nothreads=True, allow_other=True, default_permissions=True,
                 attr_timeout=0, entry_timeout=0, negative_timeout=0, fsname="hwm-powerfs")


class PowerMount:
    """hwm's side of one mounted directory: start the filesystem's process, lose power, unmount."""

    def __init__(self, backing: Path, mount: Path, control: Path, log: Path, filesystem: str = "posix"):
        self.backing, self.mount, self.control, self.log = backing, mount, control, log
        self.filesystem = filesystem
        self.proc: subprocess.Popen | None = None

    def start(self, seconds: float = 10.0) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "hwm.bridge.servers.powerfs", str(self.backing),
                                          str(self.mount), str(self.control), self.filesystem],
                                         stdin=subprocess.DEVNULL,
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

    def lose_power(self, seed: int | None = None, reorder: bool = False) -> Dropped:
        """Drop every unsynced write and directory entry, or with a seed what it does not keep
        (PowerFS.lose_power; `reorder`: each file's sectors in any order). Only while nothing runs on the mount."""
        answer = self.ask("lose-power" if seed is None else f"lose-power {seed}" + (" reorder" if reorder else ""))
        if answer.startswith("error") or not answer:
            raise OSError(f"{self.mount}: the power failure failed: {answer or 'no answer (see ' + str(self.log) + ')'}")
        return Dropped(*map(int, answer.split()))

    def sync(self) -> None:
        self.ask("sync")

    def pending(self) -> Dropped:
        return Dropped(*map(int, self.ask("pending").split()))

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
