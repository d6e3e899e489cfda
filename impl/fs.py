"""The file system the storage code runs on: the operating system's, or one a test simulates.

``impl.wal`` and ``impl.storage`` make every file system call through a ``FileSystem`` object, by
default ``OS_FILESYSTEM``, whose methods are the ``os`` calls of the same names and nothing else.
The seam exists so that a deterministic simulation (``bridge.dst``) can run the very same storage
code on a disk that loses unsynced data on a crash, tears writes and fails with ENOSPC or EIO;
production code paths do not change.

The interface is the subset of POSIX the storage needs, with POSIX's meaning (in particular: data
written with ``pwrite``/``write`` is durable only after ``fsync`` of its descriptor, and a created,
removed or renamed directory entry only after ``fsync_directory`` of its directory).
"""

from __future__ import annotations

import fcntl
import os
from typing import Protocol

__all__ = ["FileSystem", "OsFileSystem", "OS_FILESYSTEM", "make_directories"]


class FileSystem(Protocol):
    def open(self, path: str, flags: int, mode: int = 0o777) -> int: ...
    def close(self, fd: int) -> None: ...
    def pread(self, fd: int, length: int, offset: int) -> bytes: ...
    def pwrite(self, fd: int, data: bytes, offset: int) -> int: ...
    def write(self, fd: int, data: bytes) -> int: ...
    def fsync(self, fd: int) -> None: ...
    def ftruncate(self, fd: int, length: int) -> None: ...
    def unlink(self, path: str) -> None: ...
    def replace(self, source: str, destination: str) -> None: ...
    def listdir(self, path: str) -> list[str]: ...
    def isdir(self, path: str) -> bool: ...
    def makedirs(self, path: str) -> None: ...
    def getsize(self, path: str) -> int: ...
    def read_file(self, path: str) -> bytes: ...
    def fsync_directory(self, path: str) -> None: ...
    def lock(self, fd: int) -> None: ...


class OsFileSystem:
    """The operating system's file system. Each method looks ``os`` up when called, so a test that
    swaps this module's ``os`` (tests/impl/diskfaults.py) sees every call."""

    def open(self, path: str, flags: int, mode: int = 0o777) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pread(self, fd: int, length: int, offset: int) -> bytes:
        return os.pread(fd, length, offset)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def replace(self, source: str, destination: str) -> None:
        os.replace(source, destination)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def getsize(self, path: str) -> int:
        return os.path.getsize(path)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as file:
            return file.read()

    def fsync_directory(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, fd: int) -> None:
        """An exclusive lock held until ``fd`` is closed (flock: released when the process dies,
        even by kill -9); ``BlockingIOError`` (or another ``OSError``) if someone holds it."""
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


OS_FILESYSTEM = OsFileSystem()


def make_directories(fs: FileSystem, path: str) -> None:
    """Create `path` and any missing parents so that they survive a power failure: a new
    directory's entry is durable only once its parent is fsynced, and a data directory that
    vanishes takes every fsynced record in it along."""
    path = os.path.abspath(path)
    missing = []
    while not fs.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if not missing:
        return
    fs.makedirs(missing[0])
    for created in reversed(missing):
        fs.fsync_directory(os.path.dirname(created))


def replace_file(fs: FileSystem, path: str, data: bytes) -> None:
    """Atomically replace the small file `path` with `data`, durably when it returns: a temporary
    file, fsync, rename, fsync the directory. A failure leaves the old file as it was."""
    temporary = path + ".tmp"
    fd = fs.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[fs.write(fd, view) :]
            fs.fsync(fd)
        finally:
            fs.close(fd)
    except OSError:
        try:
            fs.unlink(temporary)  # give back the space; the old file is untouched
        except OSError:
            pass
        raise
    fs.replace(temporary, path)
    fs.fsync_directory(os.path.dirname(os.path.abspath(path)))
