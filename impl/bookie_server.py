"""BookKeeper over TCP: a bookie process, the ledger's metadata file, and the writer's and the
recovery client's connections to the bookies.

- `BookieServer`: one `impl.bookkeeper.Bookie` on a `DiskStorage` (its data directory, locked) behind
  an asyncio TCP listener. Clients connect to bookies, never the other way round, and bookies never
  talk to each other (BookKeeper's client-bookie protocol): each request frame is stepped, the
  bookie's `Ready` is made durable (in a worker thread), and only then are the answers written back on
  the connection the request came on. One request at a time, so a fence and an add never race.
  Malformed input (garbage, another protocol's message, a sender that is not one of the ledger's
  clients) gets an `ErrorReply` naming it and the connection is closed; nothing of it reaches the
  journal. A storage failure stops the bookie (fail-stop).
- The ledger's metadata (BookKeeper keeps it in ZooKeeper) is the file `LEDGER_FILE` of the
  cluster's data directory (`LedgerMetadataFile`): `{"format": "hwm-ledger/1", "version": V,
  "fragments": [[FIRST, [BOOKIE, ...]], ...], "in_recovery": B, "closed_at": N or null}`, every write
  conditional on the version and made under an exclusive lock on the directory, so a writer and a
  recovery client in two processes share it; a bookie reads `closed_at` when it starts (a bookie down
  at the close trims its journal to it).
- `LedgerClient`: blocking sockets to every bookie, driving a `Writer` (`add`: the entry is sent to
  the bookies of the current ensemble, and acknowledged once an ack quorum of its write set stored
  it; a bookie that cannot be reached is replaced by a spare, an ensemble change recorded in the
  metadata file) or a `RecoveryClient` (`recover`: fencing LAC reads to the last fragment's ensemble,
  recovery reads from each entry's write set until the ledger's end, recovery adds of the entries
  read to the ledger's bookies, asked again while any does not answer, until an ack quorum of each
  entry's write set acknowledged them; only then the close, into the metadata file and to the
  bookies).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Mapping

from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.bookkeeper import (
    BadVersion,
    Bookie,
    BookieStorage,
    LedgerMetadata,
    RecoveryClient,
    Writer,
    ledger_options,
    persist,
)
from hwm.impl.client import Address, format_address
from hwm.impl.core import ReplicaError
from hwm.impl.fs import OS_FILESYSTEM, replace_file
from hwm.impl.storage import DiskStorage, StorageError
from hwm.properties.protocol import Protocol

__all__ = ["LEDGER_FILE", "WRITER", "RECOVERY", "BookieServer", "LedgerClient", "LedgerError", "LedgerMetadataFile",
           "read_ledger"]

log = logging.getLogger("hwm.bookie")

LEDGER_FILE = "ledger.json"
LEDGER_FORMAT = "hwm-ledger/1"
# The ledger's two clients, by the ids their messages carry.
WRITER, RECOVERY = "writer", "recovery"
# Recovery's adds: rounds over the bookies that have not acknowledged them, and the pause between.
RECOVERY_ADD_ROUNDS = 5
RECOVERY_ADD_PAUSE = 0.1
REQUESTS = (m.AddEntries, m.ReadLac, m.ReadEntry, m.RecoveryAdd, m.CloseLedger)


class LedgerError(Exception):
    """The ledger's client could not do it (no ack quorum reachable, fenced, a bookie that refuses)."""


def _load_ledger(path: str) -> dict | None:
    """The metadata file's record, its fields checked (None: no file)."""
    try:
        raw = OS_FILESYSTEM.read_file(path)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StorageError(f"{path}: not JSON ({error})") from None
    if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT:
        raise StorageError(f"{path}: expected an object with format {LEDGER_FORMAT!r}")
    closed_at = data.get("closed_at")
    if closed_at is not None and (type(closed_at) is not int or closed_at < 0):
        raise StorageError(f"{path}: field closed_at: expected an int >= 0, got {closed_at!r}")
    version = data.setdefault("version", 1)
    if type(version) is not int or version < 1:
        raise StorageError(f"{path}: field version: expected an int >= 1, got {version!r}")
    fragments = data.get("fragments", [])
    if not isinstance(fragments, list) or not all(
            isinstance(f, list) and len(f) == 2 and type(f[0]) is int and f[0] >= 1 and isinstance(f[1], list)
            and all(isinstance(b, str) for b in f[1]) for f in fragments):
        raise StorageError(f"{path}: field fragments: expected [[first entry, [bookie, ...]], ...], got {fragments!r}")
    if type(data.setdefault("in_recovery", False)) is not bool:
        raise StorageError(f"{path}: field in_recovery: expected true or false, got {data['in_recovery']!r}")
    return data


def read_ledger(path: str | os.PathLike[str]) -> int | None:
    """The closed ledger's end from the metadata file (None: no file, or the ledger is open)."""
    data = _load_ledger(str(path))
    return None if data is None else data.get("closed_at")


class LedgerMetadataFile(LedgerMetadata):
    """`impl.bookkeeper.LedgerMetadata` kept in the metadata file, for clients in several processes:
    every read is the file's, and every write a read, a version check and an atomic replace under an
    exclusive lock on the file's directory. A record without fragments is the first `ensemble`."""

    def __init__(self, path: str | os.PathLike[str], ensemble):
        self.path = str(path)
        self._first = [1, list(ensemble)]

    @contextmanager
    def _locked(self):
        fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released with the descriptor (or the process)
            yield
        finally:
            os.close(fd)

    def _record(self) -> dict:
        data = _load_ledger(self.path) or {"format": LEDGER_FORMAT, "version": 1, "in_recovery": False,
                                           "closed_at": None}
        if not data.get("fragments"):
            data["fragments"] = [self._first]
        return data

    @property
    def version(self) -> int:
        return self._record()["version"]

    @property
    def fragments(self) -> tuple:
        return tuple((first, tuple(ensemble)) for first, ensemble in self._record()["fragments"])

    @property
    def in_recovery(self) -> bool:
        return self._record()["in_recovery"]

    @property
    def closed_at(self) -> int | None:
        return self._record().get("closed_at")

    def _update(self, expected: int | None, change) -> int:
        with self._locked():
            data = self._record()
            if expected is not None and expected != data["version"]:
                raise BadVersion(f"{self.path}: the ledger metadata is at version {data['version']}, not {expected}"
                                 + (" (the ledger is in recovery)" if data["in_recovery"] else ""))
            change(data)
            data["version"] += 1
            replace_file(OS_FILESYSTEM, self.path, (json.dumps(data) + "\n").encode("utf-8"))
            return data["version"]

    def change_ensemble(self, expected: int, first: int, ensemble) -> int:
        return self._update(expected, lambda data: data["fragments"].append([first, list(ensemble)]))

    def mark_in_recovery(self) -> int:
        return self._update(None, lambda data: data.update(in_recovery=True))

    def close(self, expected: int, last_entry: int) -> int:
        return self._update(expected, lambda data: data.update(closed_at=last_entry))


# --------------------------------------------------------------------------- the bookie process
@dataclass
class BookieServer:
    """One bookie: `await start()`, then serve until `await stop()` (or a storage failure)."""

    bookie_id: str
    listen: Address
    data_dir: str
    ledger_file: str | None = None
    storage: DiskStorage | None = None  # the journal's storage (default: a DiskStorage on data_dir)

    def __post_init__(self) -> None:
        m.check_server_id(self.bookie_id, "bookie id")
        self.failure: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._lock = asyncio.Lock()
        self._stopped = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        closed_at = read_ledger(self.ledger_file) if self.ledger_file else None
        inner = self.storage if self.storage is not None else DiskStorage(self.data_dir, owner=f"bookie {self.bookie_id}")
        self.storage = BookieStorage(inner, self.data_dir)
        self.bookie = Bookie(self.bookie_id, (WRITER, RECOVERY), self.storage.load(), closed_at=closed_at)
        persist(self.bookie.ready(), self.storage)  # a trim to the closed ledger, if any
        self._server = await asyncio.start_server(self._serve, *self.listen)
        log.info("%s: bookie listening on %s, %s", self.bookie_id, format_address(self.listen), self.bookie)

    async def stopped(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            await self._server.wait_closed()
        async with self._lock:  # no persist in flight
            self.storage.close()
            self._stopped.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        frames = codec.FrameReader()
        try:
            while not self._stopped.is_set():
                data = await reader.read(65536)
                if not data:
                    break
                try:
                    messages = [codec.decode(payload) for payload in frames.feed(data)]
                except codec.CodecError as error:
                    self._refuse(writer, f"bad frame: {error}")
                    break
                refused = False
                for message in messages:
                    answers = await self._handle(message)
                    if isinstance(answers, str):
                        self._refuse(writer, answers)
                        refused = True
                        break
                    for answer in answers:
                        writer.write(codec.encode(answer))
                if refused:
                    break
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _handle(self, message) -> list | str:
        """The answers to one request, once what it changed is durable; or why it is refused."""
        if not isinstance(message, REQUESTS):
            return (f"a bookie does not accept {type(message).__name__}; requests are "
                    f"{', '.join(cls.__name__ for cls in REQUESTS)}")
        async with self._lock:
            if self.failure is not None:
                return f"{self.bookie_id} has stopped: {self.failure}"
            try:
                self.bookie.step(message)
            except ReplicaError as error:
                return str(error)
            ready = self.bookie.ready()
            try:
                await asyncio.to_thread(persist, ready, self.storage)
            except (StorageError, OSError) as error:
                # Fail-stop: a bookie that cannot make its journal durable answers nothing more.
                self.failure = f"storage failure: {error}"
                log.error("%s: %s", self.bookie_id, self.failure)
                asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.stop()))
                return self.failure
            return [answer for _, answer in ready.messages]

    def _refuse(self, writer: asyncio.StreamWriter, text: str) -> None:
        log.info("%s: refused a connection: %s", self.bookie_id, text)
        try:
            writer.write(codec.encode(m.ErrorReply(text[:4000])))
        except (OSError, codec.CodecError):
            pass


# --------------------------------------------------------------------------- the ledger's clients
class LedgerClient:
    """The writer or the recovery client of one ledger, over blocking sockets to every bookie."""

    def __init__(self, bookies: Mapping[str, Address], protocol: Protocol, *, ledger_file: str | None = None,
                 timeout: float = 2.0, ack_quorum: int | None = None):
        self.addresses = dict(bookies)
        self.ledger_file = ledger_file
        self.timeout = timeout
        # The protocol's ledger (ensemble size, write quorum, ack quorum); `ack_quorum` overrides its AQ.
        ledger = ledger_options(protocol)
        if ack_quorum is not None:
            ledger["ack_quorum"] = ack_quorum
        bookies = list(self.addresses)
        first = bookies[:ledger["ensemble_size"] or len(bookies)]
        # The metadata file when there is one (shared with other processes), else this client's own.
        self.metadata = LedgerMetadataFile(ledger_file, first) if ledger_file else LedgerMetadata(first)
        self.writer = Writer(WRITER, bookies, metadata=self.metadata,
                             block_add_completions=protocol.bookkeeper_block_add_completions, **ledger)
        self.recovery = RecoveryClient(RECOVERY, bookies, protocol, metadata=self.metadata, **ledger)
        self.acknowledged: list[tuple[int, int]] = []
        self._sockets: dict[str, socket.socket] = {}
        self._frames: dict[str, codec.FrameReader] = {}

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()

    def __enter__(self) -> "LedgerClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ one exchange with one bookie
    def _connection(self, bookie: str) -> socket.socket:
        if bookie not in self._sockets:
            sock = socket.create_connection(self.addresses[bookie], timeout=self.timeout)
            self._sockets[bookie], self._frames[bookie] = sock, codec.FrameReader()
        return self._sockets[bookie]

    def _exchange(self, bookie: str, request) -> object:
        """Send one request, return its answer; OSError (the connection is dropped) if the bookie is
        unreachable or silent; LedgerError if it refuses."""
        try:
            sock = self._connection(bookie)
            sock.sendall(codec.encode(request))
            while True:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionResetError(f"{bookie} closed the connection")
                payloads = self._frames[bookie].feed(data)
                if payloads:  # one request, one answer: nothing else is in flight on it
                    answer = codec.decode(payloads[0])
                    break
        except (OSError, codec.CodecError) as error:
            self._sockets.pop(bookie, socket.socket()).close()
            raise OSError(f"{bookie} at {format_address(self.addresses[bookie])}: {error}") from None
        if isinstance(answer, m.ErrorReply):
            self._sockets.pop(bookie).close()  # the bookie closes the connection after an ErrorReply
            raise LedgerError(f"{bookie} refused: {answer.text}")
        return answer

    def _run(self, client, bookie: str) -> None:
        """Hand `client`'s requests for `bookie` over, and step the answers, until it sends nothing more."""
        for _ in range(8):
            if client.closed_ledger() is not None:
                return  # the close goes to every bookie (`recover`)
            out = client.ready()
            self.acknowledged += out.acknowledged
            requests = [message for to, message in out.messages if to == bookie]
            if not requests:
                return
            for request in requests:
                client.step(self._exchange(bookie, request))

    # ------------------------------------------------------------------ the writer
    def add(self, value: bytes) -> int:
        """Add `value` and send it to the bookies of the current ensemble; its entry id once
        acknowledged (the LAC covers it), else LedgerError saying why. A bookie that cannot be reached
        and owes an unconfirmed entry is replaced by a spare bookie (an ensemble change), if any."""
        writer = self.writer
        entry = writer.add(value)
        unreachable: dict[str, str] = {}
        tried: set[str] = set()
        while [b for b in writer.ensemble if b not in tried]:
            bookie = next(b for b in writer.ensemble if b not in tried)
            tried.add(bookie)
            try:
                writer.send_add(bookie)
                self._run(writer, bookie)
            except OSError as error:
                writer.ready()  # the request is lost with the connection
                unreachable[bookie] = str(error)
                spare = next((b for b in self.addresses if b not in writer.ensemble and b not in unreachable), None)
                if spare is not None and [e for e in writer.pending(bookie) if e > writer.lac]:
                    writer.change_ensemble(bookie, spare)
                    if writer.fenced_out:
                        raise LedgerError(f"entry {entry} not acknowledged: replacing {bookie} by {spare} failed, "
                                          f"the ledger is being recovered; the writer stops") from None
            if writer.fenced_out:
                raise LedgerError(f"entry {entry} not acknowledged: {bookie} is fenced (the ledger is being "
                                  f"recovered); the writer stops")
        if self.writer.lac < entry:
            raise LedgerError(f"entry {entry} not acknowledged: stored on fewer than an ack quorum of "
                              f"{self.writer.quorums.ack_quorum} bookies; unreachable: "
                              f"{'; '.join(unreachable.values())}")
        return entry

    # ------------------------------------------------------------------ recovery
    def recover(self, rounds: int = RECOVERY_ADD_ROUNDS) -> tuple[tuple[int, bytes], ...]:
        """Fence every bookie reachable, read until the ledger's end, write the entries read back
        (recovery adds) until an ack quorum of each entry's write set acknowledged them, then close
        the ledger in the metadata file and on the bookies; the closed ledger's entries, or
        LedgerError. A bookie that does not answer a recovery add is asked again, `rounds` times
        at most, and never counted: without an ack quorum the ledger stays open (a later call
        goes on from there)."""
        recovery = self.recovery
        for bookie in recovery.ensemble:
            if bookie in recovery.responded or recovery.closing is not None:
                continue
            try:
                recovery.fence(bookie)
                self._run(recovery, bookie)
            except OSError:
                recovery.ready()
        if len(recovery.responded) < recovery.quorums.fencing_needed:
            raise LedgerError(f"{len(recovery.responded)} bookies answered the fencing read; recovery needs "
                              f"{recovery.quorums.fencing_needed}")
        while recovery.closing is None:
            progress = False
            for bookie in recovery.quorums.write_set(recovery.fragments, recovery.reading):
                if recovery.closing is not None:
                    break
                if bookie in recovery.negatives:
                    continue
                try:
                    recovery.recovery_read(bookie)
                    self._run(recovery, bookie)
                    progress = True
                except OSError:
                    recovery.ready()
            if not progress:
                raise LedgerError(f"recovery could not decide entry {recovery.reading}: too few bookies answered")
        unreachable: dict[str, str] = {}
        for attempt in range(rounds):
            if recovery.closed is not None:
                break
            if attempt:
                time.sleep(RECOVERY_ADD_PAUSE)
            for bookie in sorted(recovery.members() - recovery.added, key=recovery.bookies.index):
                if recovery.closed is not None:
                    break
                try:
                    recovery.recovery_add(bookie)
                    self._run(recovery, bookie)
                except OSError as error:
                    recovery.ready()  # lost with the connection: asked again next round
                    unreachable[bookie] = str(error)
        if recovery.closed is None:
            raise LedgerError(f"{recovery.waits()}; the ledger stays open; unreachable: "
                              f"{'; '.join(unreachable.values())}")
        out = recovery.ready()
        for to, message in out.messages:  # the close, to every bookie reachable
            try:
                self._exchange(to, message)
            except OSError:
                pass  # a bookie down now trims its journal from the metadata when it restarts
        return out.closed  # (the close is in the metadata already: RecoveryClient wrote it)
