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

Every random choice comes from the `random.Random` the disk is given, so a seed replays a crash
exactly. `stats` counts what happened (bytes lost to crashes, torn writes, injected faults) for the
simulation's `sometimes` witnesses.
"""

from __future__ import annotations

import copy
import errno
import os
import posixpath
import random
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["SimDisk"]


@dataclass
class _File:
    data: bytearray = field(default_factory=bytearray)  # the page cache
    durable: bytes = b""
    unsynced: list[tuple] = field(default_factory=list)  # ("write", offset, bytes) | ("truncate", size)
    lock: int | None = None  # the descriptor holding the lock


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
        twin = SimDisk(random.Random(0))
        twin.root = copy.deepcopy(self.root)
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
        return bytes(self._handle(fd).file.data[offset:offset + length])

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
        return bytes(node.data)

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
