"""A simulated disk for the deterministic simulation: the real storage code on a disk that forgets.

`SimDisk` implements `impl.fs.FileSystem` in memory, for one machine. It keeps apart what a real
kernel keeps apart, because that is where a replica that skips an fsync differs from one that does
not:

- every file has its *current* content (what reads see: the page cache) and its *durable* content
  (what survives a power failure), plus the writes and truncations made since its last ``fsync``,
  in order;
- every directory has its current entries and its durable entries, plus the creations, removals
  and renames made since its last ``fsync_directory``: a new file whose directory was not fsynced
  may vanish in a power failure, with all its fsynced bytes;
- `crash(power_loss=False)` is a process crash (kill -9): the page cache survives, descriptors and
  locks die. `crash(power_loss=True)` is a power failure: for every file and directory a random
  prefix of the operations since its last fsync survives (none, some or all of them, as a real
  disk that reorders writes between files but not within one would leave them), and the first
  operation that does not survive may be a write *torn* at a random byte;
- `inject(after, error)` makes the `after`-th write-like call from now (open for writing, write,
  pwrite, fsync, ftruncate, unlink, replace, directory fsync) fail with `error` (ENOSPC or EIO), or
  raise `error` if it is an exception (the process dies inside that call). A failing write first
  writes a random prefix of its bytes (a torn write); a failing fsync leaves the file's unsynced
  operations unsynced (after a failed fsync nothing is promised about them).

`ReorderingDisk` is the same disk with a weaker promise on a power failure: within a file, any
subset of the unsynced pages survives, each page possibly torn at sector granularity (see its
docstring and docs/simulation.md).

Every random choice comes from the `random.Random` the disk is given, so a seed replays a crash
exactly. `stats` counts what happened (bytes lost to crashes, torn writes, injected faults) for the
simulation's `sometimes` witnesses.

`damage(path, kind)` is a fault of the medium under a file at rest, which no fsync prevents (the
faults storage studies inject under ZooKeeper and Kafka): `torn`, only a prefix of the file's bytes
reached the medium; `lost`, its write never did, and it reads back as zeros of its length; `eio`,
every read of it fails with EIO. `restore(path, content)` is the operator's repair.
"""

from __future__ import annotations

import copy
import errno
import os
import posixpath
import random
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["SimDisk", "ReorderingDisk"]


@dataclass
class _File:
    data: bytearray = field(default_factory=bytearray)  # the page cache
    durable: bytes = b""
    unsynced: list[tuple] = field(default_factory=list)  # ("write", offset, bytes) | ("truncate", size)
    lock: int | None = None  # the descriptor holding the lock
    unreadable: bool = False  # damage(path, "eio"): every read fails until the file is restored


@dataclass
class _Directory:
    entries: dict[str, object] = field(default_factory=dict)  # name -> _File | _Directory
    durable: dict[str, object] = field(default_factory=dict)
    # ("link", name, node) | ("unlink", name) | ("rename", from, to, node)
    unsynced: list[tuple] = field(default_factory=list)


@dataclass
class _Open:
    file: _File
    path: str
    writable: bool
    position: int = 0


def _apply_file(content: bytearray, operation: tuple) -> None:
    if operation[0] == "write":
        _, offset, data = operation
        if len(content) < offset:
            content.extend(bytes(offset - len(content)))
        content[offset:offset + len(data)] = data
    else:
        del content[operation[1]:]


def _apply_directory(entries: dict, operation: tuple) -> None:
    if operation[0] == "link":
        entries[operation[1]] = operation[2]
    elif operation[0] == "unlink":
        entries.pop(operation[1], None)
    else:  # ("rename", from, to, node)
        entries.pop(operation[1], None)
        entries[operation[2]] = operation[3]


class SimDisk:
    """One machine's disk: an in-memory `impl.fs.FileSystem` with power-failure semantics."""

    def __init__(self, rng: random.Random, durable_directories: tuple[str, ...] = ()):
        self.rng = rng
        self.root = _Directory()
        self._fds: dict[int, _Open] = {}
        self._next_fd = 3
        self._fault: list | None = None  # [calls left, error]
        self.stats: Counter = Counter()
        for path in durable_directories:  # made by the operator, long ago: durable
            self.makedirs(path)
            self._sync_tree(self.root)

    # ------------------------------------------------------------------ faults and crashes
    def inject(self, after: int | None, error: int | BaseException = 0) -> None:
        """Make the `after`-th write-like call from now fail (None: no fault): with OSError(`error`)
        for an error number, or by raising `error` itself (the process dies in that call)."""
        self._fault = None if after is None else [after, error]

    def _write_like(self, what: str, path: str = "", handle: "_Open | None" = None,
                    write: tuple[int, bytes] | None = None) -> None:
        """Count a write-like call, and fail it if it is the one. A failing write first writes a
        random prefix of its bytes: a torn write."""
        if self._fault is None:
            return
        self._fault[0] -= 1
        if self._fault[0] > 0:
            return
        error = self._fault[1]
        self._fault = None
        if path:  # which file the fault or crash hit (segments counted together)
            name = posixpath.basename(path)
            self.stats["fault or crash in a call on " + ("a log segment" if name.endswith(".log") else name)] += 1
        if write is not None and len(write[1]) > 1:
            offset, data = write
            torn = data[: self.rng.randint(1, len(data) - 1)]
            _apply_file(handle.file.data, ("write", offset, torn))
            handle.file.unsynced.append(("write", offset, torn))
            self.stats["writes torn by a fault or a crash"] += 1
        if isinstance(error, BaseException):
            self.stats["crashes inside a system call"] += 1
            raise error
        self.stats["fault " + errno.errorcode[error]] += 1
        self.stats["fault " + what] += 1
        raise OSError(error, os.strerror(error), *([path] if path else []))

    def crash(self, power_loss: bool) -> None:
        """The machine's process dies (and with `power_loss`, its page cache too)."""
        for handle in self._fds.values():
            handle.file.lock = None
        self._fds.clear()
        self._fault = None
        if power_loss:
            self._lose_unsynced(self.root, set())

    def _lose_unsynced(self, directory: _Directory, seen: set[int]) -> None:
        if directory.unsynced:
            kept = self.rng.randint(0, len(directory.unsynced))
            self.stats["directory operations lost"] += len(directory.unsynced) - kept
            entries = dict(directory.durable)
            for operation in directory.unsynced[:kept]:
                _apply_directory(entries, operation)
            directory.entries, directory.durable, directory.unsynced = entries, dict(entries), []
        for name, node in directory.entries.items():
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, _Directory):
                self._lose_unsynced(node, seen)
            elif node.unsynced:
                self._lose_file(node, "log" if name.endswith(".log") else "other")

    def _lose_file(self, file: _File, kind: str) -> None:
        operations = file.unsynced
        kept = self.rng.randint(0, len(operations))
        content = bytearray(file.durable)
        for operation in operations[:kept]:
            _apply_file(content, operation)
        if kept < len(operations) and operations[kept][0] == "write" and self.rng.random() < 0.5:
            _, offset, data = operations[kept]
            if len(data) > 1:
                _apply_file(content, ("write", offset, data[: self.rng.randint(1, len(data) - 1)]))
                self.stats[f"{kind} writes torn in a crash"] += 1
        if bytes(content) != bytes(file.data):
            self.stats[f"{kind} files that lost data in a crash"] += 1
        file.data, file.durable, file.unsynced = content, bytes(content), []

    def clone(self) -> "SimDisk":
        """An independent copy (to look at what a crashed machine would recover, without touching it)."""
        twin = copy.copy(self)  # the same class and crash model
        twin.rng, twin.root, twin._fds, twin._fault = random.Random(0), copy.deepcopy(self.root), {}, None
        twin.stats = Counter()
        return twin

    def _sync_tree(self, directory: _Directory) -> None:
        directory.durable, directory.unsynced = dict(directory.entries), []
        for node in directory.entries.values():
            if isinstance(node, _Directory):
                self._sync_tree(node)

    # ------------------------------------------------------------------ paths
    def _lookup(self, path: str) -> object | None:
        node: object = self.root
        for part in [p for p in posixpath.normpath(path).split("/") if p]:
            if not isinstance(node, _Directory):
                return None
            node = node.entries.get(part)
            if node is None:
                return None
        return node

    def _parent(self, path: str) -> tuple[_Directory, str]:
        head, name = posixpath.split(posixpath.normpath(path))
        parent = self._lookup(head)
        if not isinstance(parent, _Directory):
            raise FileNotFoundError(errno.ENOENT, "no such directory", head)
        return parent, name

    def _handle(self, fd: int) -> _Open:
        handle = self._fds.get(fd)
        if handle is None:
            raise OSError(errno.EBADF, "bad file descriptor")
        return handle

    # ------------------------------------------------------------------ impl.fs.FileSystem
    def open(self, path: str, flags: int, mode: int = 0o777) -> int:
        writable = bool(flags & (os.O_WRONLY | os.O_RDWR))
        if writable:
            self._write_like("open", path)
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if isinstance(node, _Directory):
            if writable:
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            node = _File()  # a directory opened to fsync it: fsync_directory does that here
        elif node is None:
            if not flags & os.O_CREAT:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            node = _File()
            parent.entries[name] = node
            parent.unsynced.append(("link", name, node))
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            raise FileExistsError(errno.EEXIST, "file exists", path)
        if flags & os.O_TRUNC and node.data:
            node.data = bytearray()
            node.unsynced.append(("truncate", 0))
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = _Open(node, path, writable)
        return fd

    def close(self, fd: int) -> None:
        handle = self._fds.pop(fd, None)
        if handle is None:
            raise OSError(errno.EBADF, "bad file descriptor")
        if handle.file.lock == fd:
            handle.file.lock = None

    def pread(self, fd: int, length: int, offset: int) -> bytes:
        handle = self._handle(fd)
        self._check_readable(handle.file, handle.path)
        return bytes(handle.file.data[offset:offset + length])

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        handle = self._handle(fd)
        if not handle.writable:
            raise OSError(errno.EBADF, "not open for writing")
        data = bytes(data)
        self._write_like("write", handle.path, handle, (offset, data))
        _apply_file(handle.file.data, ("write", offset, data))
        handle.file.unsynced.append(("write", offset, data))
        return len(data)

    def write(self, fd: int, data: bytes) -> int:
        handle = self._handle(fd)
        written = self.pwrite(fd, data, handle.position)
        handle.position += written
        return written

    def fsync(self, fd: int) -> None:
        handle = self._handle(fd)
        self._write_like("fsync", handle.path)
        file = handle.file
        file.durable, file.unsynced = bytes(file.data), []

    def ftruncate(self, fd: int, length: int) -> None:
        handle = self._handle(fd)
        self._write_like("ftruncate", handle.path)
        operation = ("truncate", length)
        if length > len(handle.file.data):
            operation = ("write", len(handle.file.data), bytes(length - len(handle.file.data)))
        _apply_file(handle.file.data, operation)
        handle.file.unsynced.append(operation)

    def unlink(self, path: str) -> None:
        self._write_like("unlink", path)
        parent, name = self._parent(path)
        if not isinstance(parent.entries.get(name), _File):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        del parent.entries[name]
        parent.unsynced.append(("unlink", name))

    def replace(self, source: str, destination: str) -> None:
        self._write_like("replace", source)
        from_parent, from_name = self._parent(source)
        to_parent, to_name = self._parent(destination)
        if from_parent is not to_parent:
            raise OSError(errno.EXDEV, "the simulated disk renames within one directory only")
        node = from_parent.entries.pop(from_name, None)
        if node is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", source)
        to_parent.entries[to_name] = node
        # One operation: a rename is atomic, a crash keeps the old name or the new one.
        to_parent.unsynced.append(("rename", from_name, to_name, node))

    def listdir(self, path: str) -> list[str]:
        node = self._lookup(path)
        if not isinstance(node, _Directory):
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        return list(node.entries)

    def isdir(self, path: str) -> bool:
        return isinstance(self._lookup(path), _Directory)

    def makedirs(self, path: str) -> None:
        node = self.root
        for part in [p for p in posixpath.normpath(path).split("/") if p]:
            child = node.entries.get(part)
            if child is None:
                child = _Directory()
                node.entries[part] = child
                node.unsynced.append(("link", part, child))
            elif not isinstance(child, _Directory):
                raise FileExistsError(errno.EEXIST, "not a directory", path)
            node = child

    def getsize(self, path: str) -> int:
        node = self._lookup(path)
        if not isinstance(node, _File):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return len(node.data)

    def read_file(self, path: str) -> bytes:
        node = self._lookup(path)
        if not isinstance(node, _File):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        self._check_readable(node, path)
        return bytes(node.data)

    @staticmethod
    def _check_readable(file: _File, path: str) -> None:
        if file.unreadable:
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)

    # ------------------------------------------------------------------ the medium's own faults
    def damage(self, path: str, kind: str) -> bytes | None:
        """Damage the file at `path` on the medium (page cache and durable content alike): `torn`
        keeps a random strict prefix of its bytes, `lost` makes them zeros, `eio` makes every read
        fail. Returns what it held before; None (nothing damaged) when there is no such file."""
        node = self._lookup(path)
        if not isinstance(node, _File):
            return None
        kept = bytes(node.data)
        if kind == "torn":
            damaged = kept[: self.rng.randrange(len(kept))] if kept else b""
        elif kind == "lost":
            damaged = bytes(len(kept))
        elif kind == "eio":
            damaged = kept
            node.unreadable = True
        else:
            raise ValueError(f"damage kind {kind!r}: expected torn, lost or eio")
        node.data, node.durable, node.unsynced = bytearray(damaged), damaged, []
        self.stats[f"{posixpath.basename(path)} damaged ({kind})"] += 1
        return kept

    def restore(self, path: str, content: bytes) -> None:
        """The operator puts `content` back in the file at `path`, durably, and it reads again."""
        node = self._lookup(path)
        if not isinstance(node, _File):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        node.data, node.durable, node.unsynced, node.unreadable = bytearray(content), bytes(content), [], False

    def fsync_directory(self, path: str) -> None:
        self._write_like("directory fsync", path)
        node = self._lookup(path)
        if not isinstance(node, _Directory):
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        node.durable, node.unsynced = dict(node.entries), []

    def lock(self, fd: int) -> None:
        handle = self._handle(fd)
        if handle.file.lock is not None and handle.file.lock != fd:
            raise BlockingIOError(errno.EWOULDBLOCK, "the lock is held")
        handle.file.lock = fd


class ReorderingDisk(SimDisk):
    """A `SimDisk` whose power failure keeps unsynced writes out of order, as a real file system's
    write-back does (the ALICE and CrashMonkey studies). The model, per file, for the operations
    made since its last fsync (fsync and directory fsync stay the only barriers):

    - the file is cut in pages of `page_bytes`; each page is written back on its own, so it survives
      as it was after *some prefix of the operations that touched it* (none, some or all), chosen
      independently of every other page: a later write may survive while an earlier one to another
      page of the same file is lost;
    - a page whose write-back is interrupted is *torn at sector granularity*: each `sector_bytes`
      sector of it holds either the survived version or the next one;
    - the file's size is metadata, written back on its own too: it is the size after some prefix of
      the operations, independent of the pages (a file may keep its new length over pages that read
      as zeros, or lose a truncation whose later writes survived);
    - across files and directories everything is independent, as in `SimDisk`; a directory keeps a
      prefix of its own entry operations (creations, removals and atomic renames are journalled in
      order).

    A model with one page per file (`page_bytes` at least the file's size) keeps, like `SimDisk`,
    only prefixes; what it adds is reordering between the pages of one file.
    """

    def __init__(self, rng: random.Random, durable_directories: tuple[str, ...] = (), *,
                 page_bytes: int = 4096, sector_bytes: int = 512):
        if type(page_bytes) is not int or type(sector_bytes) is not int or not 1 <= sector_bytes <= page_bytes \
                or page_bytes % sector_bytes:
            raise ValueError(f"page_bytes {page_bytes!r} must be a positive multiple of sector_bytes {sector_bytes!r}")
        self.page_bytes = page_bytes
        self.sector_bytes = sector_bytes
        super().__init__(rng, durable_directories)

    def _page_versions(self, file: _File) -> tuple[dict[int, list[tuple[int, bytes]]], list[int]]:
        """Every page's successive versions, (index of the operation that made it, content padded
        with zeros to a whole page), the durable one first as (-1, ...); and the size after each
        operation (sizes[k]: after the first k)."""
        page = self.page_bytes
        content = bytearray(file.durable)
        versions: dict[int, list[tuple[int, bytes]]] = {}
        sizes = [len(content)]

        def snapshot(number: int, made_by: int) -> None:
            versions.setdefault(number, []).append(
                (made_by, bytes(content[number * page:(number + 1) * page]).ljust(page, b"\0")))

        for k, operation in enumerate(file.unsynced):
            if operation[0] == "write":
                _, offset, data = operation
                # Extending past the end zero-fills the gap: those pages change too.
                touched = range(min(offset, len(content)) // page, (offset + max(len(data), 1) - 1) // page + 1)
            else:
                touched = range(operation[1] // page, max(len(content), operation[1]) // page + 1)
            for number in touched:
                if number not in versions:
                    snapshot(number, -1)
            _apply_file(content, operation)
            for number in touched:
                snapshot(number, k)
            sizes.append(len(content))
        return versions, sizes

    def _lose_file(self, file: _File, kind: str) -> None:
        versions, sizes = self._page_versions(file)
        operations = len(file.unsynced)
        size = sizes[self.rng.randint(0, operations)]
        content = bytearray(file.durable[:size]).ljust(size, b"\0")
        kept_through: list[int] = []  # per page: the last operation whose effect on it survived
        lost_from: list[int] = []  # per page: the first operation whose effect on it was lost
        torn = False
        lost_below = False  # an earlier page lost (part of) its newest version
        kept_above = False  # ... and a later one kept something newer than its durable version
        for number, history in sorted(versions.items()):
            start = number * self.page_bytes
            if start >= size:
                continue
            chosen = self.rng.randrange(len(history))
            made_by, data = history[chosen]
            page = bytearray(data)
            kept_through.append(made_by)
            if chosen + 1 < len(history):
                lost_from.append(history[chosen + 1][0])
                if self.rng.random() < 0.5:  # write-back interrupted: some sectors hold the next version
                    following = history[chosen + 1][1]
                    for sector in range(0, self.page_bytes, self.sector_bytes):
                        if self.rng.random() < 0.5:
                            page[sector:sector + self.sector_bytes] = following[sector:sector + self.sector_bytes]
                            torn = True
            # Judged on what the page holds, torn sectors included.
            kept_above = kept_above or (lost_below and bytes(page) != history[0][1])
            lost_below = lost_below or bytes(page) != history[-1][1]
            end = min(size, start + self.page_bytes)
            content[start:end] = page[:end - start]
        if torn:
            self.stats[f"{kind} pages torn at a sector in a crash"] += 1
        if kept_through and lost_from and max(kept_through) > min(lost_from):
            self.stats[f"{kind} files whose unsynced pages survived out of order"] += 1
        if kept_above:
            self.stats[f"{kind} files that kept a later page and lost an earlier one"] += 1
        if bytes(content) != bytes(file.data):
            self.stats[f"{kind} files that lost data in a crash"] += 1
        file.data, file.durable, file.unsynced = content, bytes(content), []
