"""The write-ahead log: segment files of CRC-checked records, truncation by index, torn-tail recovery.

Layout on disk
--------------
A log is a directory of segment files, each named by the index of its first record, zero-padded
to 20 digits (``00000000000000000001.log``). Other files in the directory are ignored.

Every segment starts with a 16-byte header, then records back to back::

    segment header  <4sB3sQ   magic b"HWMW", format version (1), 3 reserved zero bytes, first index
    record header   <IQQI     crc32, index, generation, payload length
    record payload            `payload length` bytes

All integers are little-endian. The record's crc32 (``zlib.crc32``) covers the record header after
the crc field (index, generation, length) followed by the payload, so a flipped bit anywhere in a
record is detected. Indexes start at 1 and are contiguous across records and segments; the first
segment starts at index 1.

Writing
-------
``append`` only buffers records in memory; ``flush`` hands them to the operating system (``write``),
and ``sync`` flushes, fsyncs the last segment, and fsyncs the directory when a segment was created or
removed. A new segment is started when the next record would take the current one past
``segment_bytes`` (a segment always holds at least one record, so a record bigger than
``segment_bytes`` gets a segment of its own). Rolling over fsyncs the finished segment first, so a
crash can only ever tear the last segment.

``truncate_from(index)`` works like the seed's ``WALSegment.truncate``: an in-memory map from index
to (segment, byte offset) gives the position of the first removed record; the segment holding it is
cut there with ``ftruncate`` (or removed, if the record was its first) and every later segment is
deleted. The cut is applied at the next flush or sync and is fsynced *before* any record is written
after it: otherwise a power failure could persist the new records over the old bytes while losing
the cut, and resurrect stale records behind the new ones, a log that never existed.

Recovery rule
-------------
Opening a log scans every segment and keeps every complete record whose CRC is valid. What is wrong
is either a *torn tail* (cut off: the file is truncated there, a last segment whose header is torn is
removed) or *corruption* (``CorruptLogError`` naming the file and byte offset; the log is left exactly
as it was). Which one depends on whether the damage can hit a record that was fsynced:

- damage in a segment that is not the last (with records after it), a segment missing or misnamed,
  is corruption: rolling over fsyncs the finished segment, so only the last one holds unsynced data;
- in the last segment, the **synced index** decides. The file ``synced-index`` in the log directory
  holds the index of the last record known to be fsynced (written after every ``sync`` that made
  new records durable; see below). Damage at a record whose index is at most the synced index, or a
  log that ends before it, is corruption: those records were fsynced and may have been
  acknowledged. Damage after it is a torn tail, *even when valid records follow*: a power failure
  writes a file's unsynced pages back in any order (a later record may reach the disk while an
  earlier one, or a new segment's header under its surviving length, does not), and every record
  after the damage was unsynced too, so dropping them is the same as the crash having happened a
  moment earlier;
- without the file (a log written before it existed), a bad record followed by a valid one is
  corruption, as the prefix of a crash never leaves one; with the file present but unreadable (a
  write of it torn by a crash), the synced index is taken as 0: only the last segment's damage is
  forgiven then, which the crash model allows (nothing fsynced is damaged by a crash).

Why the difference: a replica fsyncs appended records before it acknowledges them, so the only
records that can be torn by a crash were never acknowledged to anyone. Damage to synced records,
which no crash causes (a failing disk, someone editing the files), may lose records that were
acknowledged, counted in a quorum, and read by a client below the high-water mark; quietly dropping
them, and everything after them, would lose acknowledged data. So recovery refuses and an operator
decides (for example: wipe the replica and let it catch up from the leader).

The synced-index file: 16 bytes, ``<4sQI`` (magic ``b"HWMS"``, the synced index, crc32 of the first
12 bytes), rewritten in place. It is a floor: the value written after a ``sync`` was true when
written, and a write of it that a power failure loses leaves an older, lower value. ``sync`` writes
it without an fsync of its own (the next one, or the OS's write-back, makes it durable), so it costs
one small write per sync; a truncation lowers it and fsyncs it *before* cutting the log, so it never
names a record that is gone; recovery rewrites it with what it kept and fsyncs it.

What survives a crash (``S`` = the log at the last completed ``sync``, ``W`` = the log as last
handed to the OS by ``flush``/``sync``):

- a process crash (page cache intact) recovers exactly ``W``; if nothing was flushed since the last
  sync, that is ``S``. Recovery fsyncs what it kept, so what it returns is durable;
- a power failure recovers ``W[:k]`` for some ``k`` at least the durable floor: ``len(S)``, lowered
  to ``t - 1`` by a truncation at ``t`` flushed since the last sync. Every synced record that was
  not truncated survives, nothing that was never written appears, and a torn final record is dropped.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Sequence

from hwm.impl.fs import OS_FILESYSTEM, FileSystem, make_directories

__all__ = [
    "CorruptLogError",
    "DEFAULT_SEGMENT_BYTES",
    "RECORD_HEADER",
    "SEGMENT_HEADER",
    "SYNCED_INDEX",
    "SYNCED_INDEX_FILE",
    "StorageError",
    "TornTail",
    "WriteAheadLog",
    "check_entries",
    "check_truncate_index",
    "encode_record",
    "fsync_directory",
    "segment_name",
]

DEFAULT_SEGMENT_BYTES = 1 << 20

MAGIC = b"HWMW"
VERSION = 1
SEGMENT_HEADER = struct.Struct("<4sB3sQ")  # magic, version, reserved, first index
RECORD_HEADER = struct.Struct("<IQQI")  # crc32, index, generation, payload length
_RESERVED = b"\0\0\0"
_MAX_U64 = (1 << 64) - 1
_MAX_PAYLOAD = (1 << 32) - 1
SYNCED_INDEX = struct.Struct("<4sQI")  # magic, the index of the last fsynced record, crc32 of the rest
SYNCED_INDEX_FILE = "synced-index"
_SYNCED_MAGIC = b"HWMS"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_READ_FDS_CACHED = 32  # open read handles kept for older segments


class StorageError(Exception):
    """Base class for errors about what is stored on disk."""


class CorruptLogError(StorageError):
    """The log is damaged somewhere other than a torn tail; nothing was modified."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(
            f"corrupt write-ahead log: {path} at byte offset {offset}: {reason}; the log was left "
            "unchanged (damage before the tail would lose synced records, so recovery refuses)"
        )


class WriteFailedError(StorageError, OSError):
    """A write or fsync failed earlier (a full disk, an I/O error): the log takes no more writes.

    After a failed fsync the kernel may already have dropped the dirty pages, so retrying could
    report success for data that is gone; the only safe course is to stop, and let recovery read
    what is really on disk."""

    def __init__(self, directory: str, cause: BaseException) -> None:
        self.cause = cause
        text = f"write-ahead log {directory} stopped taking writes after a failed write: {cause}"
        super().__init__(getattr(cause, "errno", None), text)

    def __str__(self) -> str:
        return self.strerror


@dataclass(frozen=True)
class TornTail:
    """What recovery dropped: the bytes of ``path`` from ``offset`` on (``removed``: the whole file)."""

    path: str
    offset: int
    dropped_bytes: int
    removed: bool
    reason: str


@dataclass
class _Segment:
    first_index: int
    path: str
    size: int  # bytes handed to the OS


def segment_name(first_index: int) -> str:
    return f"{first_index:020d}.log"


def encode_record(index: int, generation: int, payload: bytes) -> bytes:
    body = RECORD_HEADER.pack(0, index, generation, len(payload))[4:] + payload
    return struct.pack("<I", zlib.crc32(body)) + body


def check_entries(last_index: int, entries: Iterable[tuple[int, int, bytes]]) -> list[tuple[int, int, bytes]]:
    """Validate a batch to append after ``last_index``; all-or-nothing. Returns it normalised."""
    checked: list[tuple[int, int, bytes]] = []
    expected = last_index + 1
    for position, entry in enumerate(entries):
        try:
            index, generation, payload = entry
        except (TypeError, ValueError):
            raise ValueError(
                f"append: entries[{position}] must be (index, generation, payload), got {entry!r}"
            ) from None
        if type(index) is not int or index != expected:
            raise ValueError(
                f"append: entries[{position}] has index {index!r}, expected index {expected} "
                f"(appends must be contiguous; last index is {expected - 1})"
            )
        if type(generation) is not int or not 0 <= generation <= _MAX_U64:
            raise ValueError(
                f"append: entries[{position}] (index {index}) has generation {generation!r}, "
                "expected an int in [0, 2**64)"
            )
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise ValueError(
                f"append: entries[{position}] (index {index}) has payload of type "
                f"{type(payload).__name__}, expected bytes"
            )
        payload = bytes(payload)
        if len(payload) > _MAX_PAYLOAD:
            raise ValueError(f"append: entries[{position}] (index {index}) payload exceeds 2**32-1 bytes")
        checked.append((index, generation, payload))
        expected += 1
    return checked


def check_truncate_index(index: object) -> int:
    if type(index) is not int or index < 1:
        raise ValueError(f"truncate_from: index must be an int >= 1, got {index!r}")
    return index


def encode_synced_index(index: int) -> bytes:
    """The synced-index file's 16 bytes for ``index``."""
    head = struct.pack("<4sQ", _SYNCED_MAGIC, index)
    return head + struct.pack("<I", zlib.crc32(head))


def decode_synced_index(data: bytes) -> int | None:
    """The index the synced-index file names, or None if it is not a whole, valid one (a torn write)."""
    if len(data) != SYNCED_INDEX.size:
        return None
    magic, index, crc = SYNCED_INDEX.unpack(data)
    if magic != _SYNCED_MAGIC or zlib.crc32(data[:12]) != crc:
        return None
    return index


def fsync_directory(path: str, fs: FileSystem = OS_FILESYSTEM) -> None:
    fs.fsync_directory(path)


def _write_all(fs: FileSystem, fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = fs.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _pread_exact(fs: FileSystem, fd: int, length: int, offset: int, path: str) -> bytes:
    data = fs.pread(fd, length, offset)
    if len(data) != length:
        raise CorruptLogError(path, offset, f"short read: wanted {length} bytes, file ended after {len(data)}")
    return data


class WriteAheadLog:
    """A log of ``(index, generation, payload)`` records in segment files under ``directory``.

    Opening recovers the log (see the module docstring); ``CorruptLogError`` if it is damaged.
    """

    def __init__(self, directory: str | os.PathLike[str], segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 fs: FileSystem = OS_FILESYSTEM) -> None:
        if type(segment_bytes) is not int or segment_bytes < SEGMENT_HEADER.size + RECORD_HEADER.size:
            raise ValueError(
                f"segment_bytes must be an int >= {SEGMENT_HEADER.size + RECORD_HEADER.size}, "
                f"got {segment_bytes!r}"
            )
        self.directory = os.fspath(directory)
        self._fs = fs  # every file system call goes through it (impl.fs: the OS's, or a simulated disk)
        self.segment_bytes = segment_bytes
        self.torn_tail: TornTail | None = None  # what the last recovery dropped, if anything
        self._segments: list[_Segment] = []
        self._firsts: list[int] = []  # first index per segment, for bisect
        # The index -> (segment, offset) map of records on disk: position i is index i + 1.
        self._offsets: list[int] = []
        self._lengths: list[int] = []
        self._generations: list[int] = []  # every record, including pending ones
        self._pending: list[tuple[int, int, bytes]] = []  # appended, not yet flushed
        self._disk_last = 0  # last index on disk that is still in the log
        self._cut: tuple[int, int] | None = None  # (index, byte offset) of an unapplied truncation
        self._write_fd: int | None = None  # the last segment, read-write
        self._write_fd_dirty = False
        self._directory_dirty = False
        self._read_fds: OrderedDict[int, int] = OrderedDict()  # first index -> read-only fd
        self._synced_index_path = os.path.join(self.directory, SYNCED_INDEX_FILE)
        self._synced_index_fd: int | None = None
        self._synced_index: int | None = None  # what the synced-index file was last given
        self._closed = False
        self.failed: WriteFailedError | None = None  # set by the first failed write or fsync
        make_directories(fs, self.directory)
        self._recover()

    # ----------------------------------------------------------------------------------- reads
    @property
    def last_index(self) -> int:
        return len(self._generations)

    def generations(self) -> tuple[int, ...]:
        """Generation of every entry: position k is index k + 1."""
        return tuple(self._generations)

    def entry(self, index: int) -> tuple[int, bytes]:
        """``(generation, payload)`` of the entry at ``index``."""
        self._check_open()
        if type(index) is not int or not 1 <= index <= self.last_index:
            raise IndexError(f"entry: index {index!r} is outside the log [1, {self.last_index}]")
        if index > self._disk_last:
            _, generation, payload = self._pending[index - self._disk_last - 1]
            return generation, payload
        return self._read_range(index, index + 1)[0]

    def entries(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """``(generation, payload)`` for indexes ``start <= index < end`` (like etcd's ``Entries(lo, hi)``)."""
        self._check_open()
        if type(start) is not int or type(end) is not int or not 1 <= start <= end <= self.last_index + 1:
            raise ValueError(
                f"entries: need 1 <= start <= end <= last_index + 1 = {self.last_index + 1}, "
                f"got start={start!r}, end={end!r}"
            )
        result = self._read_range(start, min(end, self._disk_last + 1)) if start <= self._disk_last else []
        first_pending = max(start, self._disk_last + 1)
        for index in range(first_pending, end):
            _, generation, payload = self._pending[index - self._disk_last - 1]
            result.append((generation, payload))
        return result

    def locate(self, index: int) -> tuple[str, int]:
        """``(segment path, byte offset)`` of a record on disk: the seed's index -> offset map."""
        if type(index) is not int or not 1 <= index <= self._disk_last:
            raise IndexError(f"locate: index {index!r} is not on disk (on disk: [1, {self._disk_last}])")
        return self._segments[self._segment_position(index)].path, self._offsets[index - 1]

    def segment_paths(self) -> list[str]:
        """Segment files as the log currently stands on disk (before any unapplied truncation)."""
        return [segment.path for segment in self._segments]

    # ---------------------------------------------------------------------------------- writes
    def append(self, entries: Sequence[tuple[int, int, bytes]]) -> None:
        """Buffer records; they reach the OS on ``flush`` and the disk on ``sync``."""
        self._check_writable()
        checked = check_entries(self.last_index, entries)
        self._pending.extend(checked)
        self._generations.extend(generation for _, generation, _ in checked)

    def truncate_from(self, index: int) -> None:
        """Remove every entry with index >= ``index``; applied on disk at the next flush/sync."""
        self._check_writable()
        check_truncate_index(index)
        if index > self.last_index:
            return
        del self._generations[index - 1 :]
        if index > self._disk_last:
            del self._pending[index - self._disk_last - 1 :]
            return
        self._pending.clear()
        self._cut = (index, self._offsets[index - 1])
        del self._offsets[index - 1 :]
        del self._lengths[index - 1 :]
        self._disk_last = index - 1

    def flush(self) -> None:
        """Apply a pending truncation (fsynced) and write buffered records to the OS, without fsync."""
        self._check_writable()
        try:
            if self._cut is not None:
                self._apply_cut()
            if self._pending:
                self._write_pending()
        except OSError as error:
            self._fail(error)

    def sync(self) -> None:
        """Make every append and truncation so far durable."""
        self.flush()
        try:
            if self._write_fd is not None and self._write_fd_dirty:
                self._fs.fsync(self._write_fd)
            self._write_fd_dirty = False
            if self._directory_dirty:
                self._fs.fsync_directory(self.directory)
                self._directory_dirty = False
            if self._synced_index != self._disk_last:
                # No fsync: a lost write of it leaves an older, lower index, which is still true.
                self._write_synced_index(self._disk_last, durable=False)
        except OSError as error:
            self._fail(error)

    def close(self) -> None:
        """Sync, then release file handles (after a failed write: release only)."""
        if self._closed:
            return
        if self.failed is None:
            try:
                self.sync()
            except WriteFailedError:
                self._release()
                raise
        self._release()

    def crash(self) -> None:
        """Release file handles without syncing or flushing: what a process crash leaves behind."""
        if not self._closed:
            self._release()

    def __enter__(self) -> "WriteAheadLog":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------- internals
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"write-ahead log {self.directory} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.failed is not None:
            raise self.failed

    def _fail(self, error: OSError) -> None:
        """Stop taking writes, and leave on disk only what recovery takes as it is: records of
        the segment that failed are cut back to where this write began (a torn tail otherwise),
        and a segment this write created is removed, so no segment but the last is ever torn."""
        self.failed = WriteFailedError(self.directory, error)
        self._pending.clear()
        raise self.failed from error

    def _release(self) -> None:
        fds = list(self._read_fds.values())
        if self._write_fd is not None:
            fds.append(self._write_fd)
        if self._synced_index_fd is not None:
            fds.append(self._synced_index_fd)
        for fd in fds:
            self._fs.close(fd)
        self._read_fds.clear()
        self._write_fd = None
        self._synced_index_fd = None
        self._pending.clear()
        self._closed = True

    def _segment_position(self, index: int) -> int:
        return bisect.bisect_right(self._firsts, index) - 1

    def _read_fd(self, position: int) -> int:
        if position == len(self._segments) - 1 and self._write_fd is not None:
            return self._write_fd
        first = self._segments[position].first_index
        fd = self._read_fds.get(first)
        if fd is None:
            fd = self._fs.open(self._segments[position].path, os.O_RDONLY)
            self._read_fds[first] = fd
            if len(self._read_fds) > _READ_FDS_CACHED:
                self._fs.close(self._read_fds.popitem(last=False)[1])
        else:
            self._read_fds.move_to_end(first)
        return fd

    def _read_range(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """Read records [start, end) from disk, one pread per segment, re-checking every CRC."""
        result: list[tuple[int, bytes]] = []
        index = start
        while index < end:
            position = self._segment_position(index)
            segment = self._segments[position]
            next_first = self._firsts[position + 1] if position + 1 < len(self._segments) else end
            stop = min(end, next_first)
            begin = self._offsets[index - 1]
            finish = self._offsets[stop - 2] + RECORD_HEADER.size + self._lengths[stop - 2]
            data = _pread_exact(self._fs, self._read_fd(position), finish - begin, begin, segment.path)
            at = 0
            for expected in range(index, stop):
                crc, got_index, generation, length = RECORD_HEADER.unpack_from(data, at)
                body_end = at + RECORD_HEADER.size + length
                if got_index != expected or zlib.crc32(data[at + 4 : body_end]) != crc:
                    raise CorruptLogError(
                        segment.path, begin + at, f"record for index {expected} changed on disk since it was written"
                    )
                result.append((generation, data[at + RECORD_HEADER.size : body_end]))
                at = body_end
            index = stop
        return result

    def _delete_segment(self, segment: _Segment) -> None:
        fd = self._read_fds.pop(segment.first_index, None)
        if fd is not None:
            self._fs.close(fd)
        self._fs.unlink(segment.path)
        self._directory_dirty = True

    def _write_synced_index(self, index: int, durable: bool) -> None:
        if self._synced_index_fd is None:
            self._synced_index_fd = self._fs.open(self._synced_index_path, os.O_RDWR | os.O_CREAT, 0o644)
        self._synced_index = None  # unknown until the write returns
        _write_all(self._fs, self._synced_index_fd, encode_synced_index(index), 0)
        if durable:
            self._fs.fsync(self._synced_index_fd)
        self._synced_index = index

    def _apply_cut(self) -> None:
        assert self._cut is not None
        index, offset = self._cut
        if self._synced_index is None or self._synced_index >= index:
            # Lowered durably before the cut: a synced index above the log's end would make
            # recovery refuse the log as missing fsynced records.
            self._write_synced_index(index - 1, durable=True)
        if self._write_fd is not None:
            self._fs.close(self._write_fd)
            self._write_fd = None
        position = self._segment_position(index)
        keep = position if self._segments[position].first_index == index else position + 1
        for segment in reversed(self._segments[keep:]):
            self._delete_segment(segment)
        del self._segments[keep:]
        del self._firsts[keep:]
        if keep == position + 1:
            segment = self._segments[position]
            fd = self._fs.open(segment.path, os.O_RDWR)
            self._fs.ftruncate(fd, offset)
            self._fs.fsync(fd)
            segment.size = offset
            self._write_fd = fd
        elif self._segments:
            self._write_fd = self._fs.open(self._segments[-1].path, os.O_RDWR)
        if self._directory_dirty:
            self._fs.fsync_directory(self.directory)
            self._directory_dirty = False
        self._write_fd_dirty = False
        self._cut = None

    def _start_segment(self, first_index: int) -> _Segment:
        if self._write_fd is not None:
            # The old segment must be complete on disk before records land in the next one, so a
            # power failure can tear only the last segment (damage elsewhere is then corruption).
            if self._write_fd_dirty:
                self._fs.fsync(self._write_fd)
            fd, self._write_fd = self._write_fd, None
            self._fs.close(fd)
        path = os.path.join(self.directory, segment_name(first_index))
        self._write_fd = self._fs.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self._write_fd_dirty = False
        self._directory_dirty = True
        segment = _Segment(first_index, path, 0)
        self._segments.append(segment)
        self._firsts.append(first_index)
        return segment

    def _write_pending(self) -> None:
        segments_before = len(self._segments)
        size_before = self._segments[-1].size if self._segments else 0
        try:
            self._write_records()
        except OSError:
            self._undo_write(segments_before, size_before)
            raise

    def _undo_write(self, segments_before: int, size_before: int) -> None:
        """Best effort after a failed write: remove the segments it created and cut the segment it
        started in back to its old size. If this fails too, recovery still accepts what is left:
        a torn tail, possibly followed by segments that hold no record."""
        if self._write_fd is not None:
            try:
                self._fs.close(self._write_fd)
            except OSError:
                pass
            self._write_fd = None
        try:
            for segment in reversed(self._segments[segments_before:]):
                self._fs.unlink(segment.path)
            if segments_before:
                segment = self._segments[segments_before - 1]
                fd = self._fs.open(segment.path, os.O_RDWR)
                try:
                    self._fs.ftruncate(fd, size_before)
                finally:
                    self._fs.close(fd)
            self._fs.fsync_directory(self.directory)
        except OSError:
            pass

    def _write_records(self) -> None:
        segment = self._segments[-1] if self._segments else None
        chunk: list[bytes] = []
        chunk_start = segment.size if segment is not None else 0

        def write_chunk() -> None:
            if chunk and self._write_fd is not None:
                _write_all(self._fs, self._write_fd, b"".join(chunk), chunk_start)
                self._write_fd_dirty = True

        if segment is not None and self._write_fd is None:
            self._write_fd = self._fs.open(segment.path, os.O_RDWR)
        for index, generation, payload in self._pending:
            record = encode_record(index, generation, payload)
            if segment is None or (
                segment.size > SEGMENT_HEADER.size and segment.size + len(record) > self.segment_bytes
            ):
                write_chunk()
                segment = self._start_segment(index)
                header = SEGMENT_HEADER.pack(MAGIC, VERSION, _RESERVED, index)
                chunk = [header]
                chunk_start = 0
                segment.size = len(header)
            chunk.append(record)
            self._offsets.append(segment.size)
            self._lengths.append(len(payload))
            segment.size += len(record)
        write_chunk()
        self._disk_last += len(self._pending)
        self._pending.clear()

    def _recover(self) -> None:
        listing = self._fs.listdir(self.directory)
        names = sorted((int(match.group(1)), name) for name in listing if (match := _SEGMENT_NAME.match(name)))
        # The index of the last record known to be fsynced: damage up to it is corruption, after
        # it a torn tail. None: no synced-index file (a log written before it existed).
        floor: int | None = None
        if SYNCED_INDEX_FILE in listing:
            floor = decode_synced_index(self._fs.read_file(self._synced_index_path))
            floor = 0 if floor is None else floor  # torn by a crash: nothing known synced in the last segment

        def synced_damage(path: str, offset: int, index: int, problem: str) -> CorruptLogError:
            return CorruptLogError(
                path, offset, f"{problem}, at record {index}, at or below the synced index {floor} "
                f"({SYNCED_INDEX_FILE}): a record that was fsynced is damaged")
        recordless: list[tuple[int, str]] = []  # segments after a torn tail that hold no record
        expected = 1  # index the next record must carry
        tail_action: tuple[str, int, str] | None = None  # ("cut" | "remove", offset, reason)
        for position, (first_index, name) in enumerate(names):
            path = os.path.join(self.directory, name)
            is_last = position == len(names) - 1
            data = self._fs.read_file(path)
            if first_index != expected:
                what = "the log must start at index 1" if position == 0 else "a segment is missing or misnamed"
                raise CorruptLogError(path, 0, f"segment name says first index {first_index}, expected {expected} ({what})")
            if len(data) < SEGMENT_HEADER.size:
                if not is_last:
                    raise CorruptLogError(path, 0, f"segment header incomplete ({len(data)} bytes) in a segment that is not the last")
                problem = f"segment header incomplete ({len(data)} of {SEGMENT_HEADER.size} bytes)"
                if floor is not None and first_index <= floor:
                    raise synced_damage(path, 0, first_index, problem)
                tail_action = ("remove", 0, problem)
                break
            magic, version, reserved, header_first = SEGMENT_HEADER.unpack_from(data, 0)
            problem = None
            if magic != MAGIC or version != VERSION or reserved != _RESERVED:
                problem = (f"bad segment header (magic {magic!r}, version {version}, reserved {reserved!r}); "
                           f"expected magic {MAGIC!r}, version {VERSION}")
            elif header_first != first_index:
                problem = f"segment header says first index {header_first}, file name says {first_index}"
            if problem is not None:
                # A new, unsynced last segment whose length reached the disk before its header did.
                if is_last and floor is not None and first_index > floor:
                    tail_action = ("remove", 0, problem)
                    break
                raise CorruptLogError(path, 0, problem)
            if not is_last and len(data) == SEGMENT_HEADER.size:
                raise CorruptLogError(path, SEGMENT_HEADER.size, "empty segment that is not the last")
            segment = _Segment(first_index, path, len(data))
            offset = SEGMENT_HEADER.size
            size = len(data)
            view = memoryview(data)
            offsets, lengths, generations = self._offsets, self._lengths, self._generations
            header_size = RECORD_HEADER.size
            unpack = RECORD_HEADER.unpack_from
            crc32 = zlib.crc32
            while offset < size:
                problem = None
                if size - offset < header_size:
                    problem = f"incomplete record header ({size - offset} of {header_size} bytes)"
                else:
                    crc, index, generation, length = unpack(view, offset)
                    end = offset + header_size + length
                    if end > size:
                        problem = f"record length {length} runs past the end of the file ({size} bytes)"
                    elif crc32(view[offset + 4 : end]) != crc:
                        problem = f"CRC mismatch in record (header says index {index})"
                    elif index != expected:
                        if floor is None or expected <= floor:
                            raise CorruptLogError(path, offset, f"record has index {index}, expected {expected}")
                        problem = f"record has index {index}, expected {expected}"
                if problem is not None:
                    later = names[position + 1:]
                    if not is_last and not all(
                            self._fs.getsize(os.path.join(self.directory, n)) <= SEGMENT_HEADER.size for _, n in later):
                        raise CorruptLogError(path, offset, problem + " in a segment that is not the last")
                    # Segments after it that hold no record are what a write that failed (a full
                    # disk) after starting a new segment leaves: nothing valid follows, so this is
                    # a torn tail like any other, and they go with it.
                    recordless = later
                    if floor is None:
                        found = _find_valid_record(view, offset + 1, expected)
                        if found is not None:
                            raise CorruptLogError(
                                path, offset, f"{problem}, followed by a valid record for index {found[1]} at "
                                f"byte offset {found[0]}"
                            )
                    elif expected <= floor:
                        raise synced_damage(path, offset, expected, problem)
                    tail_action = ("cut", offset, problem)
                    segment.size = offset
                    break
                offsets.append(offset)
                lengths.append(length)
                generations.append(generation)
                expected += 1
                offset = end
            self._segments.append(segment)
            self._firsts.append(first_index)
            if tail_action is not None:
                break  # only record-less segments follow a torn tail
        self._disk_last = expected - 1
        if floor is not None and self._disk_last < floor:
            last = self._segments[-1] if self._segments else None
            raise CorruptLogError(
                last.path if last else self._synced_index_path, last.size if last else 0,
                f"the log ends at index {self._disk_last}, but {SYNCED_INDEX_FILE} says index {floor} was "
                "fsynced: synced records are missing")
        for _, name in recordless:
            self._fs.unlink(os.path.join(self.directory, name))
        if recordless:
            names = names[: len(names) - len(recordless)]
        if tail_action is not None:
            self._drop_torn_tail(names, *tail_action)
        # What we recovered may have been only in the page cache (a process crash after a write and
        # before its fsync); make it durable now, since the caller will act on it as its log.
        if self._segments:
            fd = self._fs.open(self._segments[-1].path, os.O_RDONLY)
            try:
                self._fs.fsync(fd)
            finally:
                self._fs.close(fd)
        try:
            self._write_synced_index(self._disk_last, durable=True)
            self._fs.fsync_directory(self.directory)  # the segments', and a new synced-index file's, names
        except BaseException:
            self._release()
            raise

    def _drop_torn_tail(self, names: list[tuple[int, str]], action: str, offset: int, reason: str) -> None:
        path = os.path.join(self.directory, names[-1][1])
        size = self._fs.getsize(path)
        if action == "remove":
            self._fs.unlink(path)
            self._fs.fsync_directory(self.directory)
        else:
            fd = self._fs.open(path, os.O_RDWR)
            try:
                self._fs.ftruncate(fd, offset)
                self._fs.fsync(fd)
            finally:
                self._fs.close(fd)
        self.torn_tail = TornTail(path, offset, size - offset, action == "remove", reason)


def _find_valid_record(view: memoryview, start: int, expected: int) -> tuple[int, int] | None:
    """First ``(offset, index)`` at or after ``start`` where a complete, CRC-valid record begins."""
    size = len(view)
    header_size = RECORD_HEADER.size
    unpack = RECORD_HEADER.unpack_from
    for offset in range(start, size - header_size + 1):
        crc, index, _, length = unpack(view, offset)
        # A record that follows the bad one carries a later index; each needs >= header_size bytes.
        if not expected <= index <= expected + (size - start) // header_size:
            continue
        end = offset + header_size + length
        if end <= size and zlib.crc32(view[offset + 4 : end]) == crc:
            return offset, index
    return None
