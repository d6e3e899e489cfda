"""Replica storage: the write-ahead log plus an atomically replaced metadata file, or an in-memory twin.

The replica runtime persists through the ``Storage`` protocol and nothing else. Two implementations:

- ``DiskStorage(directory)``: records in ``directory/wal/`` (see ``impl.wal`` for the record layout and
  the recovery rule: a torn tail is dropped, damage before it is a ``CorruptLogError``) and the metadata
  in ``directory/metadata.json``.
- ``MemoryStorage()``: the same interface and crash semantics with no files, so a simulation can run
  many replicas in one process.

Crash semantics, shared by both: ``append`` and ``truncate_from`` take effect on reads at once but are
durable only after ``sync()``; ``save_metadata`` is durable when it returns. ``crash()`` throws away
whatever was not synced, as a process crash would, and leaves the storage ready for ``load()``, which
returns exactly the durable state. (``DiskStorage`` additionally survives power failure: see
``impl.wal`` for what a torn write may cost.) Lifecycle: ``load()`` first, then use, then ``close()``
(which syncs) or ``crash()``; ``load()`` again to reopen.

Metadata file: one JSON object ``{"format": "hwm-metadata/1", "generation": int, "vote": str|null,
"hwm": int, "crc32": int}`` where ``crc32`` is ``zlib.crc32`` of the canonical JSON (sorted keys, no
spaces) of the other four fields. It is replaced atomically: write ``metadata.json.tmp``, fsync, rename
over ``metadata.json``, fsync the directory; a crash at any point leaves either the old or the new
file, and a stray temp file is ignored. A missing file means a fresh replica (generation 0, no vote,
HWM 0).
"""

from __future__ import annotations

import errno
import json
import os
import zlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from hwm.impl.fs import OS_FILESYSTEM, FileSystem, make_directories, replace_file
from hwm.impl.wal import (
    DEFAULT_SEGMENT_BYTES,
    CorruptLogError,
    StorageError,
    WriteAheadLog,
    WriteFailedError,
    check_truncate_index,
    check_entries,
)

__all__ = [
    "CorruptLogError",
    "CorruptMetadataError",
    "DataDirectoryInUse",
    "DiskStorage",
    "Durable",
    "MemoryStorage",
    "Metadata",
    "Storage",
    "StorageError",
    "read_metadata",
    "write_metadata",
]

METADATA_FORMAT = "hwm-metadata/1"
METADATA_FILE = "metadata.json"
LOCK_FILE = "LOCK"
WAL_DIRECTORY = "wal"


class CorruptMetadataError(StorageError):
    """The metadata file cannot be trusted."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"corrupt metadata file {path}: {reason}")


class DataDirectoryInUse(StorageError):
    """Another process (or another storage in this one) holds the data directory's lock."""

    def __init__(self, directory: str, holder: str) -> None:
        self.directory = directory
        self.holder = holder
        super().__init__(f"data directory {directory} is in use by {holder}; two servers on one "
                         "directory would both acknowledge writes that only one of them keeps")


def lock_directory(directory: str, owner: str, fs: FileSystem = OS_FILESYSTEM) -> int:
    """Take the exclusive lock on `directory/LOCK` (flock: released when the process dies, even
    by kill -9) and write `owner` into it; returns the file descriptor that holds the lock."""
    path = os.path.join(directory, LOCK_FILE)
    fd = fs.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fs.lock(fd)
    except OSError as error:
        holder = fs.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
        fs.close(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DataDirectoryInUse(directory, holder) from None
        raise
    fs.ftruncate(fd, 0)
    fs.pwrite(fd, f"{owner} (pid {os.getpid()})\n".encode(), 0)
    return fd


@dataclass(frozen=True)
class Metadata:
    generation: int = 0
    vote: str | None = None
    hwm: int = 0


@dataclass(frozen=True)
class Durable:
    """What a replica recovers: its metadata and log; ``log[k]`` is ``(generation, payload)`` of index k+1."""

    generation: int
    vote: str | None
    hwm: int
    log: tuple[tuple[int, bytes], ...]

    @property
    def last_index(self) -> int:
        return len(self.log)

    def generations(self) -> tuple[int, ...]:
        return tuple(generation for generation, _ in self.log)


@runtime_checkable
class Storage(Protocol):
    def load(self) -> Durable: ...
    def append(self, entries: list[tuple[int, int, bytes]]) -> None: ...
    def truncate_from(self, index: int) -> None: ...
    def save_metadata(self, generation: int, vote: str | None, hwm: int) -> None: ...
    def sync(self) -> None: ...
    def entry(self, index: int) -> tuple[int, bytes]: ...
    @property
    def last_index(self) -> int: ...
    def close(self) -> None: ...


def _check_metadata(generation: object, vote: object, hwm: object) -> Metadata:
    if type(generation) is not int or generation < 0:
        raise ValueError(f"save_metadata: generation must be an int >= 0, got {generation!r}")
    if vote is not None and type(vote) is not str:
        raise ValueError(f"save_metadata: vote must be a server name (str) or None, got {vote!r}")
    if type(hwm) is not int or hwm < 0:
        raise ValueError(f"save_metadata: hwm must be an int >= 0, got {hwm!r}")
    return Metadata(generation, vote, hwm)


def _metadata_crc(fields: dict[str, object]) -> int:
    return zlib.crc32(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode())


def read_metadata(path: str, fs: FileSystem = OS_FILESYSTEM) -> Metadata:
    """Read a metadata file; ``Metadata()`` if it does not exist, ``CorruptMetadataError`` if bad."""
    try:
        raw = fs.read_file(path)
    except FileNotFoundError:
        return Metadata()
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMetadataError(path, f"not valid JSON ({error})") from None
    if not isinstance(document, dict):
        raise CorruptMetadataError(path, f"expected a JSON object, got {type(document).__name__}")
    expected_keys = {"format", "generation", "vote", "hwm", "crc32"}
    if set(document) != expected_keys:
        raise CorruptMetadataError(
            path, f"fields are {sorted(document)}, expected {sorted(expected_keys)}"
        )
    if document["format"] != METADATA_FORMAT:
        raise CorruptMetadataError(path, f"format is {document['format']!r}, expected {METADATA_FORMAT!r}")
    fields = {key: document[key] for key in ("format", "generation", "vote", "hwm")}
    crc = _metadata_crc(fields)
    if document["crc32"] != crc:
        raise CorruptMetadataError(path, f"checksum mismatch: file says {document['crc32']!r}, content gives {crc}")
    try:
        return _check_metadata(document["generation"], document["vote"], document["hwm"])
    except ValueError as error:
        raise CorruptMetadataError(path, str(error).removeprefix("save_metadata: ")) from None


def write_metadata(path: str, metadata: Metadata, fs: FileSystem = OS_FILESYSTEM) -> None:
    """Atomically replace the metadata file: temp file, fsync, rename, fsync the directory."""
    fields = {"format": METADATA_FORMAT, "generation": metadata.generation, "vote": metadata.vote, "hwm": metadata.hwm}
    document = dict(fields, crc32=_metadata_crc(fields))
    data = (json.dumps(document, sort_keys=True) + "\n").encode()
    replace_file(fs, path, data)


class DiskStorage:
    """``Storage`` on disk: ``directory/wal/`` segment files and ``directory/metadata.json``."""

    def __init__(self, directory: str | os.PathLike[str], segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 owner: str = "a replica", fs: FileSystem = OS_FILESYSTEM) -> None:
        self.directory = os.fspath(directory)
        self.fs = fs  # the OS's file system, or a simulated disk (impl.fs)
        self.segment_bytes = segment_bytes
        self.owner = owner  # written into the lock file, so a second user learns who holds it
        self._lock_fd: int | None = None
        self.metadata_path = os.path.join(self.directory, METADATA_FILE)
        self.wal_directory = os.path.join(self.directory, WAL_DIRECTORY)
        self._wal: WriteAheadLog | None = None
        self._metadata = Metadata()

    def load(self) -> Durable:
        """Open and recover: ``CorruptLogError`` / ``CorruptMetadataError`` if the files are damaged."""
        if self._wal is not None:
            raise RuntimeError(f"load: storage {self.directory} is already open; close() or crash() it first")
        make_directories(self.fs, self.directory)  # durably: a vanished directory loses its records
        self._lock_fd = lock_directory(self.directory, self.owner, self.fs)
        try:
            metadata = read_metadata(self.metadata_path, self.fs)
            wal = WriteAheadLog(self.wal_directory, self.segment_bytes, self.fs)
        except BaseException:
            self._unlock()
            raise
        try:
            log = tuple(wal.entries(1, wal.last_index + 1))
        except BaseException:
            wal.crash()
            self._unlock()
            raise
        self._wal = wal
        self._metadata = metadata
        return Durable(metadata.generation, metadata.vote, metadata.hwm, log)

    def _check_open(self) -> WriteAheadLog:
        if self._wal is None:
            raise RuntimeError(f"storage {self.directory} is not open: call load() first")
        return self._wal

    @property
    def wal(self) -> WriteAheadLog:
        """The open write-ahead log (for tests and tools)."""
        return self._check_open()

    @property
    def metadata(self) -> Metadata:
        return self._metadata

    def append(self, entries: list[tuple[int, int, bytes]]) -> None:
        self.wal.append(entries)

    def truncate_from(self, index: int) -> None:
        self.wal.truncate_from(index)

    def save_metadata(self, generation: int, vote: str | None, hwm: int) -> None:
        wal = self._check_open()
        if wal.failed is not None:
            raise wal.failed
        metadata = _check_metadata(generation, vote, hwm)
        try:
            write_metadata(self.metadata_path, metadata, self.fs)
        except OSError as error:
            # Fail-stop, as for the log: the file holds the old or the new metadata.
            wal.failed = WriteFailedError(self.directory, error)
            raise wal.failed from error
        self._metadata = metadata

    def sync(self) -> None:
        self.wal.sync()

    def entry(self, index: int) -> tuple[int, bytes]:
        return self.wal.entry(index)

    def entries(self, start: int, end: int) -> list[tuple[int, bytes]]:
        return self.wal.entries(start, end)

    def generations(self) -> tuple[int, ...]:
        return self.wal.generations()

    @property
    def last_index(self) -> int:
        return self.wal.last_index

    def close(self) -> None:
        """Sync and release files and the lock; ``load()`` reopens."""
        try:
            if self._wal is not None:
                wal, self._wal = self._wal, None
                wal.close()
        finally:
            self._unlock()

    def crash(self) -> None:
        """Release files without syncing: unsynced appends and truncations are lost."""
        if self._wal is not None:
            wal, self._wal = self._wal, None
            wal.crash()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            self.fs.close(fd)  # closing the descriptor releases the flock


class MemoryStorage:
    """``Storage`` in memory with ``DiskStorage``'s crash semantics: what was not synced dies in ``crash()``."""

    def __init__(self) -> None:
        self._durable_log: tuple[tuple[int, bytes], ...] = ()
        self._metadata = Metadata()
        self._log: list[tuple[int, bytes]] | None = None  # None until load()
        self._dirty = False  # appends or truncations since the last sync

    def load(self) -> Durable:
        if self._log is not None:
            raise RuntimeError("load: storage is already open; close() or crash() it first")
        self._log = list(self._durable_log)
        m = self._metadata
        return Durable(m.generation, m.vote, m.hwm, self._durable_log)

    def _open_log(self) -> list[tuple[int, bytes]]:
        if self._log is None:
            raise RuntimeError("storage is not open: call load() first")
        return self._log

    @property
    def metadata(self) -> Metadata:
        return self._metadata

    def append(self, entries: list[tuple[int, int, bytes]]) -> None:
        log = self._open_log()
        checked = check_entries(len(log), entries)
        log.extend((generation, payload) for _, generation, payload in checked)
        self._dirty = self._dirty or bool(checked)

    def truncate_from(self, index: int) -> None:
        log = self._open_log()
        if check_truncate_index(index) <= len(log):
            del log[index - 1 :]
            self._dirty = True

    def save_metadata(self, generation: int, vote: str | None, hwm: int) -> None:
        self._open_log()
        self._metadata = _check_metadata(generation, vote, hwm)

    def sync(self) -> None:
        log = self._open_log()
        if self._dirty:
            self._durable_log = tuple(log)
            self._dirty = False

    def entry(self, index: int) -> tuple[int, bytes]:
        log = self._open_log()
        if type(index) is not int or not 1 <= index <= len(log):
            raise IndexError(f"entry: index {index!r} is outside the log [1, {len(log)}]")
        return log[index - 1]

    def entries(self, start: int, end: int) -> list[tuple[int, bytes]]:
        log = self._open_log()
        if type(start) is not int or type(end) is not int or not 1 <= start <= end <= len(log) + 1:
            raise ValueError(
                f"entries: need 1 <= start <= end <= last_index + 1 = {len(log) + 1}, "
                f"got start={start!r}, end={end!r}"
            )
        return log[start - 1 : end - 1]

    def generations(self) -> tuple[int, ...]:
        return tuple(generation for generation, _ in self._open_log())

    @property
    def last_index(self) -> int:
        return len(self._open_log())

    def close(self) -> None:
        if self._log is not None:
            self.sync()
            self._log = None

    def crash(self) -> None:
        """Forget every unsynced append and truncation; ``load()`` returns the durable state."""
        self._log = None
        self._dirty = False
