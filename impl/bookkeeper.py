"""BookKeeper's replication of one ledger, sans-IO: the bookie, the writer and the recovery client.

The rules are model/bookkeeper.py's (Apache BookKeeper's replication protocol and its Fencing page):

- `Bookie`: one bookie's journal of the ledger, on the replica core's storage (`impl.storage`:
  the entries in the write-ahead log, the LAC as the metadata's HWM, the writer's generation as its
  generation), plus the fence bit and the close it has taken (`BookieStorage`, a small file written
  through `impl.fs`). Everything a request changes is durable before the bookie answers: `ready()`
  hands out a `BookieReady` (a core `Ready` plus the fence and the close) and `persist` writes it.
  A fenced bookie refuses the writer's adds (EFENCED); a fencing LAC read, and under
  `recovery_reads_fence` a recovery read, fence it before it answers.
- `Writer`: adds entries (`add`), sends a bookie every entry of its write sets it lacks with the LAC
  piggybacked (`send_add`; with nothing to add it is the explicit LAC), and advances the LAC to the
  highest entry such that it and every entry before it is stored on an ack quorum of its write set; the entries up
  to the LAC are acknowledged to its client (`ready().acknowledged`). An EFENCED answer stops it
  (LedgerFencedException): it adds and sends nothing more.
- `RecoveryClient` (LedgerRecoveryOp): a fencing LAC read to each bookie of the last fragment's
  ensemble (`fence`); once E - AQ + 1 bookies answered, recovery reads of the entry after the highest
  LAC reported from the bookies of its write set (`recovery_read`): an entry a bookie has is
  recovered, and an entry that WQ - AQ + 1 bookies report missing does not exist (apache/bookkeeper
  pull request 1077): the ledger ends before it. Recovery writes the last fragment's entries back to
  their write sets (`RecoveryAdd`, BookKeeper's recovery adds, which a fenced bookie takes; sent
  again by `recovery_add` to a bookie that did not answer) and counts each bookie's acknowledgement
  once; only when an ack quorum of the write set of every entry it read after the highest LAC
  reported acknowledged (`unconfirmed()` is empty; LedgerRecoveryOp) does it record the ledger's end
  in the ledger's metadata (`ready().closed`; BookKeeper keeps it in ZooKeeper) and send the close
  (`CloseLedger`). Until then the ledger stays open (`waits()` says why). A bookie that was down at
  the close learns of it from the metadata when it restarts (`Bookie(..., closed_at=)`).
- `recovery_reads_fence` is the protocol flag `bookkeeper_recovery_reads_fence`: whether a recovery
  read carries FLAG_DO_FENCING (apache/bookkeeper pull request 2616). Without it (issue 2614) a
  bookie whose fencing read was lost answers "no such entry" and stays unfenced: recovery closes the
  ledger, and the writer's next add to that bookie completes an ack quorum the closed ledger lacks.

The ledger's parameters are the model's: an ensemble of E bookies (default every bookie; the others
are spares), a write quorum WQ (default E) and an ack quorum AQ (default a majority of WQ). Entries
are striped round-robin: entry e goes to its write set, the WQ bookies from position (e-1) mod E of
its fragment's ensemble; a bookie's journal holds a hole (generation 0, no payload) at an entry of
other write sets. The LAC counts AQ bookies of each entry's write set, fencing needs E - AQ + 1
answers from the last fragment's ensemble, and an entry is missing once WQ - AQ + 1 bookies of its
write set say so.

Ensemble changes: `Writer.change_ensemble(failed, replacement)` replaces a bookie whose write failed
in a new fragment from the first unconfirmed entry (LAC + 1), and records it in the ledger metadata
(`LedgerMetadata`, a versioned record) with a conditional write on the version the writer last
wrote. Recovery bumps the version when it marks the ledger in recovery (its first fencing read)
and closes the ledger with a conditional write on its own version. When the writer's update fails,
under `block_add_completions` (the flag `bookkeeper_block_add_completions`, LedgerHandle's
blockAddCompletions) it learns the ledger is in recovery and stops; without it (apache/bookkeeper
issue 1591) it goes on with its new ensemble, which the metadata, and so recovery, never names.

The writer and the recovery client are clients: their state is in memory only. Snapshots have the
model's shape (properties.snapshot.ServerSnapshot): a bookie has generation 0 until it stores an add
of the writer (then the writer's generation), its journal as the log (holes as generation 0, none
trailing, then holes up to its LAC: `shaped`) and its LAC as the HWM; the writer is the leader of its generation with its LAC as
the HWM until it is fenced out; the recovery client is a follower holding what it has recovered
until it closes the ledger, then the leader of the next generation with the closed ledger as log.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

from hwm.impl.core import DurableLike, Entry, Metadata, NotCommitted, Ready, ReplicaError
from hwm.impl.core import persist as persist_log
from hwm.impl.fs import OS_FILESYSTEM, replace_file
from hwm.impl.messages import (
    BK_FENCED,
    BK_MISSING_ENTRIES,
    BK_NO_SUCH_ENTRY,
    BK_OK,
    BOOKKEEPER_SENDER_FIELD,
    AddEntries,
    AddReply,
    BookKeeperMessage,
    CloseLedger,
    ReadEntry,
    ReadEntryReply,
    ReadLac,
    ReadLacReply,
    RecoveryAdd,
    check_server_id,
)
from hwm.impl.storage import Durable
from hwm.impl.wal import StorageError
from hwm.properties.protocol import Protocol
from hwm.properties.quorum import majority
from hwm.properties.snapshot import FOLLOWER, LEADER, ServerSnapshot

__all__ = ["BOOKIE_STATE_FILE", "HOLE", "BadVersion", "Bookie", "BookieDurable", "BookieReady", "BookieStorage",
           "ClientReady", "LedgerFenced", "LedgerMetadata", "LedgerQuorums", "RecoveryClient", "Writer",
           "down_snapshot", "ledger_options", "persist"]

# The file, next to the journal, that holds the fence bit and the close the bookie has taken.
BOOKIE_STATE_FILE = "ledger-state.json"
BOOKIE_STATE_FORMAT = "hwm-bookie/1"
# The generation of the writer's ledger handle, and the one the closed ledger is the history of
# (the model's WRITER_GENERATION and RECOVERY_GENERATION).
WRITER_GENERATION = 1
RECOVERY_GENERATION = 2
# A journal's entry of other bookies' write sets (the model's HOLE): generation 0, no payload.
HOLE = (0, b"")


class LedgerFenced(ReplicaError):
    """The writer was told EFENCED: the ledger is being recovered (LedgerFencedException)."""


@dataclass(frozen=True)
class LedgerQuorums:
    """Ensemble size E, write quorum WQ and ack quorum AQ, the two recovery thresholds they give,
    and round-robin striping (`write_set`)."""

    ensemble: int
    write_quorum: int
    ack_quorum: int

    @classmethod
    def of(cls, ensemble: int, ack_quorum: int | None = None, write_quorum: int | None = None) -> "LedgerQuorums":
        if type(ensemble) is not int or ensemble < 1:
            raise ValueError(f"ensemble: expected an int >= 1, got {ensemble!r}")
        write_quorum = ensemble if write_quorum is None else write_quorum
        if type(write_quorum) is not int or not 1 <= write_quorum <= ensemble:
            raise ValueError(f"write_quorum: expected an int in 1..{ensemble} (the ensemble), got {write_quorum!r}")
        quorums = cls(ensemble, write_quorum, majority(write_quorum) if ack_quorum is None else ack_quorum)
        if type(quorums.ack_quorum) is not int or not 1 <= quorums.ack_quorum <= write_quorum:
            raise ValueError(f"ack_quorum: expected an int in 1..{write_quorum} (the write quorum), "
                             f"got {quorums.ack_quorum!r}")
        return quorums

    @property
    def fencing_needed(self) -> int:
        """E - AQ + 1 fencing answers: no ack quorum of unfenced bookies remains in any write set."""
        return self.ensemble - self.ack_quorum + 1

    @property
    def missing_needed(self) -> int:
        """WQ - AQ + 1 "no such entry" answers from an entry's write set: it cannot have reached an ack quorum."""
        return self.write_quorum - self.ack_quorum + 1

    def write_set(self, fragments: Sequence[tuple[int, tuple[str, ...]]], entry: int) -> tuple[str, ...]:
        """Round-robin striping (DistributionSchedule): entry e goes to the WQ bookies from position
        (e-1) mod E of the ensemble of the last fragment that starts at or before it."""
        ensemble = fragments[0][1]
        for first, members in fragments:
            if first <= entry:
                ensemble = members
        return tuple(ensemble[(entry - 1 + i) % self.ensemble] for i in range(self.write_quorum))


def ledger_options(protocol: Protocol) -> dict:
    """The Writer's and RecoveryClient's `ensemble_size`, `write_quorum` and `ack_quorum` for a
    protocol's ledger (None: the default, every bookie, the ensemble, a majority of WQ)."""
    return {"ensemble_size": None if protocol.ensemble_size == "all" else protocol.ensemble_size,
            "write_quorum": None if protocol.write_quorum == "ensemble" else protocol.write_quorum,
            "ack_quorum": None if protocol.ack_quorum == "majority" else protocol.ack_quorum}


class BadVersion(ReplicaError):
    """A conditional write of the ledger metadata named a version that is no longer current."""


class LedgerMetadata:
    """The ledger's metadata record (BookKeeper keeps it in ZooKeeper): its fragments, whether it is
    in recovery, its end once closed, and a version every write bumps. Writes are conditional on the
    version the writer read or wrote last (`BadVersion` otherwise). In memory: the writer and the
    recovery client of one process share it."""

    def __init__(self, ensemble: Sequence[str]):
        self.version = 1
        self.fragments: tuple[tuple[int, tuple[str, ...]], ...] = ((1, tuple(ensemble)),)
        self.in_recovery = False
        self.closed_at: int | None = None

    def _write(self, expected: int) -> None:
        if expected != self.version:
            raise BadVersion(f"the ledger metadata is at version {self.version}, not {expected}"
                             + (" (the ledger is in recovery)" if self.in_recovery else ""))
        self.version += 1

    def change_ensemble(self, expected: int, first: int, ensemble: Sequence[str]) -> int:
        """A new fragment from entry `first`; returns the new version."""
        self._write(expected)
        self.fragments += ((first, tuple(ensemble)),)
        return self.version

    def mark_in_recovery(self) -> int:
        """Recovery's unconditional mark (it bumps the version any writer's update names)."""
        self.version += 1
        self.in_recovery = True
        return self.version

    def close(self, expected: int, last_entry: int) -> int:
        self._write(expected)
        self.closed_at = last_entry
        return self.version

    def __repr__(self) -> str:
        state = f"closed@{self.closed_at}" if self.closed_at is not None else "in recovery" if self.in_recovery else "open"
        return f"LedgerMetadata(v{self.version} {state} fragments={self.fragments})"


def ledger_layout(bookies: tuple[str, ...], ensemble_size: int | None, ack_quorum: int | None,
                  write_quorum: int | None, metadata: LedgerMetadata | None) -> tuple[LedgerQuorums, LedgerMetadata]:
    """A ledger client's quorums and metadata: the first `ensemble_size` bookies (all by default) as the first
    ensemble unless `metadata` is given (the writer and the recovery client agree on this)."""
    size = len(bookies) if ensemble_size is None else ensemble_size
    if type(size) is not int or not 1 <= size <= len(bookies):
        raise ValueError(f"ensemble_size: expected an int in 1..{len(bookies)} (the bookies), got {size!r}")
    return (LedgerQuorums.of(size, ack_quorum, write_quorum),
            metadata if metadata is not None else LedgerMetadata(bookies[:size]))


# ------------------------------------------------------------------------ the bookie's storage


@dataclass(frozen=True)
class BookieDurable(Durable):
    """What a bookie recovers: its journal (log, LAC as hwm, generation), the fence bit, and the
    end of the closed ledger once it took the close (None: it has not)."""

    fenced: bool = False
    closed_at: int | None = None


class BookieStorage:
    """A storage (MemoryStorage, DiskStorage) plus the bookie's fence bit and close.

    With a `directory` they are the file `ledger-state.json` there, replaced atomically through
    `impl.fs` (durable when `save_state` returns); without one they live in this object, which, like
    MemoryStorage, survives a simulated crash. Everything else is the wrapped storage's."""

    def __init__(self, inner, directory: str | os.PathLike[str] | None = None):
        self.inner = inner
        self._path = os.path.join(directory, BOOKIE_STATE_FILE) if directory is not None else None
        self._fs = getattr(inner, "fs", OS_FILESYSTEM)
        self._state: tuple[bool, int | None] = (False, None)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def load(self) -> BookieDurable:
        durable = self.inner.load()
        fenced, closed_at = self.state
        return BookieDurable(durable.generation, durable.vote, durable.hwm, tuple(durable.log), fenced, closed_at)

    @property
    def state(self) -> tuple[bool, int | None]:
        """(fenced, closed_at) as durable."""
        if self._path is None:
            return self._state
        try:
            raw = self._fs.read_file(self._path)
        except FileNotFoundError:
            return False, None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise StorageError(f"{self._path}: not JSON ({error})") from None
        if not isinstance(data, dict) or data.get("format") != BOOKIE_STATE_FORMAT:
            raise StorageError(f"{self._path}: expected an object with format {BOOKIE_STATE_FORMAT!r}")
        fenced, closed_at = data.get("fenced"), data.get("closed_at")
        if type(fenced) is not bool:
            raise StorageError(f"{self._path}: field fenced: expected true or false, got {fenced!r}")
        if closed_at is not None and (type(closed_at) is not int or closed_at < 0):
            raise StorageError(f"{self._path}: field closed_at: expected null or an int >= 0, got {closed_at!r}")
        return fenced, closed_at

    def save_state(self, fenced: bool, closed_at: int | None) -> None:
        """Durable when it returns."""
        self._state = (fenced, closed_at)
        if self._path is not None:
            text = json.dumps({"format": BOOKIE_STATE_FORMAT, "fenced": fenced, "closed_at": closed_at})
            replace_file(self._fs, self._path, (text + "\n").encode("utf-8"))


@dataclass(frozen=True)
class BookieReady(Ready):
    """A Ready and, when they changed, the fence bit and close to make durable before the answers."""

    state: tuple[bool, int | None] | None = None

    def __bool__(self) -> bool:
        return super().__bool__() or self.state is not None


def persist(ready: Ready, storage) -> None:
    """`impl.core.persist` (journal and LAC), then the fence and close a BookieReady carries."""
    persist_log(ready, storage)
    state = getattr(ready, "state", None)
    if state is not None:
        storage.save_state(*state)


# ------------------------------------------------------------------------ the bookie
class Bookie:
    """One bookie of the ledger's ensemble. Inputs: `step` (the writer's and the recovery client's
    requests) and client reads (`read`); outputs: `ready()`, to persist (`persist`) before its
    answers are sent. `closed_at`: the ledger's end if its metadata says it is closed (a bookie that
    missed the close trims its journal to it when it starts)."""

    def __init__(self, bookie_id: str, clients: Iterable[str], durable: DurableLike, *,
                 closed_at: int | None = None):
        check_server_id(bookie_id, "bookie_id")
        self.bookie_id = self.server_id = bookie_id
        self.clients = tuple(clients)
        self.generation: int = durable.generation
        self._log: list[tuple[int, bytes]] = [(g, p) for g, p in durable.log]
        self.lac: int = min(durable.hwm, len(self._log))
        self.fenced: bool = getattr(durable, "fenced", False)
        self.closed_at: int | None = getattr(durable, "closed_at", None)
        self._stored_last = len(self._log)
        self._dirty_from: int | None = None
        self._metadata_dirty = False
        self._state_dirty = False
        self._outbox: list[tuple[str, BookKeeperMessage]] = []
        if closed_at is not None and self.closed_at is None:
            self.learn_closed(closed_at)

    def learn_closed(self, closed_at: int) -> None:
        """The ledger was closed without this bookie (it was down, or holds no fragment of the
        metadata): what lies beyond its end is not part of it."""
        if self.closed_at is None:
            self._truncate_from(closed_at + 1)
            self._set_lac(min(self.lac, closed_at))
            self.closed_at = closed_at
            self._state_dirty = True

    # ------------------------------------------------------------------ views
    @property
    def last_entry(self) -> int:
        return len(self._log)

    def snapshot(self) -> ServerSnapshot:
        return ServerSnapshot(self.generation, FOLLOWER, shaped(self._log, self.lac), self.lac, True)

    def holds(self, entry: int) -> bool:
        return 1 <= entry <= len(self._log) and self._log[entry - 1] != HOLE

    def read(self, entry: int) -> tuple[int, bytes]:
        """(generation, payload) of an entry at or below the LAC: what a reader may read."""
        if type(entry) is not int or entry < 1:
            raise NotCommitted(f"no entry {entry!r}: entry ids start at 1")
        if entry > min(self.lac, len(self._log)):
            raise NotCommitted(f"entry {entry} is past {self.bookie_id}'s last-add-confirmed {self.lac}")
        if not self.holds(entry):
            raise NotCommitted(f"entry {entry} is not in {self.bookie_id}'s write sets")
        return self._log[entry - 1]

    def describe(self) -> dict:
        return {"bookie": self.bookie_id, "generation": self.generation, "last_entry": len(self._log),
                "lac": self.lac, "fenced": self.fenced, "closed_at": self.closed_at}

    # ------------------------------------------------------------------ input
    def step(self, message: BookKeeperMessage) -> None:
        handler = self._HANDLERS.get(type(message))
        if handler is None:
            raise ReplicaError(f"{self.bookie_id} cannot step a {type(message).__name__}: not a request to a bookie")
        origin = getattr(message, BOOKKEEPER_SENDER_FIELD[type(message)])
        if origin not in self.clients:
            raise ReplicaError(f"{self.bookie_id} got a {type(message).__name__} from {origin!r}, which is not "
                               f"one of the ledger's clients {list(self.clients)}")
        getattr(self, handler)(message)

    def _on_add(self, add: AddEntries) -> None:
        if self.fenced:
            # A fenced bookie takes no add of the writer: recovery has started.
            self._send(add.writer, AddReply(self.bookie_id, BK_FENCED, len(self._log)))
            return
        if add.first_entry > len(self._log) + 1:
            self._send(add.writer, AddReply(self.bookie_id, BK_MISSING_ENTRIES, len(self._log)))
            return
        for entry_id, entry in enumerate(add.entries, start=add.first_entry):
            if entry_id > len(self._log):
                self._log.append(entry)  # a hole too: the journal stays contiguous
                self._mark_dirty(entry_id)
            elif entry != HOLE and self._log[entry_id - 1] == HOLE:  # an entry already there is the same entry
                self._log[entry_id - 1] = entry
                self._mark_dirty(entry_id)
        if add.generation != self.generation:
            self.generation = add.generation
            self._metadata_dirty = True
        self._set_lac(max(self.lac, add.lac))
        self._send(add.writer, AddReply(self.bookie_id, BK_OK, len(self._log)))

    def _fence(self) -> None:
        if not self.fenced:
            self.fenced = True
            self._state_dirty = True

    def _on_read_lac(self, request: ReadLac) -> None:
        if request.fence:
            self._fence()
        journal = tuple(self._log) + (HOLE,) * (self.lac - len(self._log))
        self._send(request.client, ReadLacReply(self.bookie_id, self.lac, journal))

    def _on_read_entry(self, request: ReadEntry) -> None:
        if request.fence:
            self._fence()
        if self.holds(request.entry):
            reply = ReadEntryReply(self.bookie_id, BK_OK, request.entry, (self._log[request.entry - 1],))
        else:
            reply = ReadEntryReply(self.bookie_id, BK_NO_SUCH_ENTRY, request.entry, ())
        self._send(request.client, reply)

    def _write_back(self, ledger: Sequence[tuple[int, bytes]]) -> None:
        """Write recovery's entries of this bookie's write sets (a hole keeps what the bookie has)."""
        for entry_id, entry in enumerate(ledger, start=1):
            if entry_id > len(self._log):
                self._log.append(entry)
                self._mark_dirty(entry_id)
            elif entry != HOLE and self._log[entry_id - 1] == HOLE:  # an entry there is the same entry
                self._log[entry_id - 1] = entry
                self._mark_dirty(entry_id)

    def _on_recovery_add(self, add: RecoveryAdd) -> None:
        # A fenced bookie takes recovery adds. The ledger is not closed yet: nothing is truncated and
        # the LAC stays (recovery's entries are confirmed only once an ack quorum acknowledged them).
        self._write_back(add.entries)
        self._send(add.client, AddReply(self.bookie_id, BK_OK, len(self._log)))  # durable by then

    def _on_close(self, close: CloseLedger) -> None:
        # The closed ledger's entries of this bookie's write sets (those a recovery add did not
        # reach it with); nothing beyond the end stays, and the LAC is the last entry.
        ledger = list(close.entries)
        self._truncate_from(len(ledger) + 1)
        self._write_back(ledger)
        self._set_lac(len(ledger))
        if self.closed_at != len(ledger):
            self.closed_at = len(ledger)
            self._state_dirty = True
        self._send(close.client, AddReply(self.bookie_id, BK_OK, len(self._log)))  # the write-back is durable

    # By name, so that a subclass (a test's planted bug) may override a handler.
    _HANDLERS: dict[type, str] = {
        AddEntries: "_on_add", ReadLac: "_on_read_lac", ReadEntry: "_on_read_entry",
        RecoveryAdd: "_on_recovery_add", CloseLedger: "_on_close",
    }

    # ------------------------------------------------------------------ output
    def has_ready(self) -> bool:
        return bool(self._dirty_from is not None or self._metadata_dirty or self._state_dirty or self._outbox)

    def ready(self) -> BookieReady:
        """Everything since the last call: the journal's changes, the LAC, the fence and close,
        then the answers (send them only once the rest is durable)."""
        truncate_from, entries = None, ()
        if self._dirty_from is not None:
            if self._dirty_from <= self._stored_last:
                truncate_from = self._dirty_from
            entries = tuple(Entry(i, g, p) for i, (g, p) in
                            enumerate(self._log[self._dirty_from - 1:], start=self._dirty_from))
        self._dirty_from = None
        self._stored_last = len(self._log)
        metadata = Metadata(self.generation, None, self.lac) if self._metadata_dirty else None
        state = (self.fenced, self.closed_at) if self._state_dirty else None
        self._metadata_dirty = self._state_dirty = False
        messages, self._outbox = tuple(self._outbox), []
        return BookieReady(truncate_from, entries, metadata, messages, (), state)

    # ------------------------------------------------------------------ helpers
    def _send(self, to: str, message: BookKeeperMessage) -> None:
        self._outbox.append((to, message))

    def _mark_dirty(self, index: int) -> None:
        if self._dirty_from is None or index < self._dirty_from:
            self._dirty_from = index

    def _truncate_from(self, index: int) -> None:
        if index <= len(self._log):
            del self._log[index - 1:]
            self._mark_dirty(index)

    def _set_lac(self, lac: int) -> None:
        if lac != self.lac:
            self.lac = lac
            self._metadata_dirty = True

    def __repr__(self) -> str:
        return (f"Bookie({self.bookie_id} g{self.generation} entries={len(self._log)} lac={self.lac}"
                f"{' fenced' if self.fenced else ''}{'' if self.closed_at is None else f' closed@{self.closed_at}'})")


def shaped(journal: Sequence[tuple[int, bytes]], lac: int) -> tuple[int, ...]:
    """A journal's generations as the model shows a bookie's log: no trailing holes, then holes up to
    the LAC (one form per content)."""
    log = [g for g, _ in journal]
    while log and log[-1] == HOLE[0]:
        log.pop()
    return tuple(log) + (HOLE[0],) * (lac - len(log))


def down_snapshot(durable: BookieDurable, closed_at: int | None = None) -> ServerSnapshot:
    """A crashed bookie as its journal holds it; with the ledger closed while it was down (`closed_at`,
    from the ledger's metadata), as it will be once it restarts: nothing beyond the ledger's end."""
    journal, lac = tuple(durable.log), durable.hwm
    if closed_at is not None and getattr(durable, "closed_at", None) is None:
        journal, lac = journal[:closed_at], min(lac, closed_at)
    return ServerSnapshot(durable.generation, FOLLOWER, shaped(journal, lac), lac, False)


# ------------------------------------------------------------------------ the clients
class ClientReady(NamedTuple):
    """A client's outputs: messages to send, entries newly acknowledged to the writer's client
    (index, generation), and the closed ledger's entries once recovery closed it (else None)."""

    messages: tuple[tuple[str, BookKeeperMessage], ...]
    acknowledged: tuple[tuple[int, int], ...]
    closed: tuple[tuple[int, bytes], ...] | None


class Writer:
    """The ledger's writer (a client of the bookies). Inputs: `add` (a client's entry), `send_add`
    (send a bookie of the current ensemble what it lacks, with the LAC), `change_ensemble` (replace a
    bookie whose write failed), `step` (the bookies' answers); outputs: `ready()`.

    `bookies` are every bookie the writer may use; the first `ensemble_size` (default all) are the
    ledger's first ensemble, the others spares. `metadata`: the ledger's metadata record (a new
    `LedgerMetadata` of the first ensemble if None)."""

    def __init__(self, writer_id: str, bookies: Sequence[str], *, ack_quorum: int | None = None,
                 write_quorum: int | None = None, ensemble_size: int | None = None,
                 metadata: LedgerMetadata | None = None, block_add_completions: bool = True,
                 generation: int = WRITER_GENERATION):
        check_server_id(writer_id, "writer_id")
        self.writer_id = self.server_id = writer_id
        self.bookies = tuple(bookies)
        self.quorums, self.metadata = ledger_layout(self.bookies, ensemble_size, ack_quorum, write_quorum, metadata)
        self.metadata_version = self.metadata.version
        self.fragments: tuple[tuple[int, tuple[str, ...]], ...] = self.metadata.fragments  # the writer's own view
        self.block_add_completions = block_add_completions
        self.generation = generation
        self._log: list[tuple[int, bytes]] = []
        self.lac = 0
        # Each bookie's journal end as it answered: the writer sends from there, and a bookie has
        # stored every entry of its write sets (of the current fragment) up to it.
        self.stored: dict[str, int] = {b: 0 for b in self.bookies}
        self.fenced_out = False
        self._outbox: list[tuple[str, BookKeeperMessage]] = []
        self._acknowledged: list[tuple[int, int]] = []

    @property
    def last_entry(self) -> int:
        return len(self._log)

    @property
    def ensemble(self) -> tuple[str, ...]:
        """The current fragment's ensemble."""
        return self.fragments[-1][1]

    def snapshot(self) -> ServerSnapshot:
        role = FOLLOWER if self.fenced_out else LEADER
        return ServerSnapshot(self.generation, role, tuple(g for g, _ in self._log), self.lac, True)

    def refusal(self) -> str | None:
        """Why the writer adds and sends nothing (None: it does)."""
        if self.fenced_out:
            return "the writer has been fenced out: the ledger is being recovered"
        return None

    def add(self, payload: bytes) -> int:
        """A client's entry, appended to the writer's ledger; returns its entry id."""
        if type(payload) is not bytes:
            raise TypeError(f"add: payload must be bytes, got {type(payload).__name__}")
        if self.fenced_out:
            raise LedgerFenced(self.refusal())
        self._log.append((self.generation, payload))
        return len(self._log)

    def pending(self, bookie: str) -> list[int]:
        """The entries of the current fragment in `bookie`'s write sets past its journal end."""
        first = self.fragments[-1][0]
        return [e for e in range(max(first, self.stored[bookie] + 1), len(self._log) + 1)
                if bookie in self.quorums.write_set(self.fragments, e)]

    def send_add(self, bookie: str) -> None:
        """Send `bookie` the entries of the current fragment in its write sets that it lacks, as far
        as the writer knows (holes for the others, so its journal stays contiguous), and the LAC."""
        if bookie not in self.stored:
            raise ReplicaError(f"{bookie} is not one of the ledger's bookies {list(self.bookies)}")
        if self.fenced_out:
            raise LedgerFenced(self.refusal())
        if bookie not in self.ensemble:
            raise ReplicaError(f"{bookie} is not in the writer's current ensemble {list(self.ensemble)}")
        first = min(self.stored[bookie], len(self._log)) + 1
        mine = set(self.pending(bookie))
        run = tuple(self._log[e - 1] if e in mine else HOLE for e in range(first, len(self._log) + 1))
        self._send(bookie, AddEntries(self.writer_id, self.generation, first, run, self.lac))

    def change_ensemble(self, failed: str, replacement: str) -> None:
        """Replace `failed` (a write to it failed) by `replacement` in a new fragment from the first
        unconfirmed entry, and record it in the ledger metadata (a write conditional on the version
        the writer last wrote). When that write fails, recovery has begun: under
        `block_add_completions` the writer stops; without it (issue 1591) it goes on with its own
        new ensemble."""
        if self.fenced_out:
            raise LedgerFenced(self.refusal())
        if failed not in self.ensemble:
            raise ReplicaError(f"{failed} is not in the writer's current ensemble {list(self.ensemble)}")
        if replacement not in self.stored or replacement in self.ensemble:
            raise ReplicaError(f"{replacement} is not a bookie outside the current ensemble {list(self.ensemble)}")
        first = self.lac + 1
        ensemble = tuple(replacement if b == failed else b for b in self.ensemble)
        try:
            self.metadata_version = self.metadata.change_ensemble(self.metadata_version, first, ensemble)
        except BadVersion:
            if self.block_add_completions:
                self.fenced_out = True  # the add completions held back fail: the ledger is in recovery
                return
        self.fragments += ((first, ensemble),)
        # From the first unconfirmed entry, the replaced bookie's acknowledgements no longer count
        # and the replacement's are yet to come.
        for bookie in (failed, replacement):
            self.stored[bookie] = min(self.stored[bookie], self.lac)

    def step(self, reply: AddReply) -> None:
        if type(reply) is not AddReply:
            raise ReplicaError(f"the writer cannot step a {type(reply).__name__}: not a bookie's answer to an add")
        if reply.bookie not in self.stored:
            raise ReplicaError(f"the writer got an AddReply from {reply.bookie!r}, not one of the ledger's bookies")
        if self.fenced_out:
            return
        if reply.code == BK_FENCED:
            self.fenced_out = True  # LedgerFencedException: the writer stops
            return
        self.stored[reply.bookie] = min(reply.last_entry, len(self._log))
        if reply.code == BK_MISSING_ENTRIES:
            self.send_add(reply.bookie)  # from the end of its journal
            return
        # The add callbacks complete in order up to the LAC: each next entry AQ bookies of its
        # write set stored.
        lac = self.lac
        while lac < len(self._log) and sum(
                1 for b in self.quorums.write_set(self.fragments, lac + 1)
                if self.stored[b] > lac) >= self.quorums.ack_quorum:
            lac += 1
        self._acknowledged += [(index, self._log[index - 1][0]) for index in range(self.lac + 1, lac + 1)]
        self.lac = lac

    def closed_ledger(self) -> None:
        """The writer closes nothing (the recovery client's `closed_ledger` is the closed ledger)."""
        return None

    def has_ready(self) -> bool:
        return bool(self._outbox or self._acknowledged)

    def ready(self) -> ClientReady:
        messages, self._outbox = tuple(self._outbox), []
        acknowledged, self._acknowledged = tuple(self._acknowledged), []
        return ClientReady(messages, acknowledged, None)

    def _send(self, to: str, message: BookKeeperMessage) -> None:
        self._outbox.append((to, message))

    def __repr__(self) -> str:
        return (f"Writer({self.writer_id} entries={len(self._log)} lac={self.lac} ensemble={','.join(self.ensemble)}"
                f"{' fenced out' if self.fenced_out else ''})")


class RecoveryClient:
    """The ledger recovery of a second client (LedgerRecoveryOp). Inputs: `fence` and
    `recovery_read` (send one bookie the request), `step` (the answers); outputs: `ready()`, whose
    `closed` is the closed ledger once recovery closed it. `metadata`: the ledger's metadata record
    (recovery marks it in recovery at its first fencing read, takes the fragments it holds, and
    closes it); None: a record of the first ensemble, which nobody else writes."""

    def __init__(self, client_id: str, bookies: Sequence[str], protocol: Protocol, *, ack_quorum: int | None = None,
                 write_quorum: int | None = None, ensemble_size: int | None = None,
                 metadata: LedgerMetadata | None = None, generation: int = RECOVERY_GENERATION):
        check_server_id(client_id, "client_id")
        if not isinstance(protocol, Protocol) or protocol.system != "bookkeeper":
            raise ValueError(f"protocol: the recovery client follows BookKeeper's rules, not "
                             f"{getattr(protocol, 'system', protocol)!r}")
        self.client_id = self.server_id = client_id
        self.bookies = tuple(bookies)
        self.quorums, self.metadata = ledger_layout(self.bookies, ensemble_size, ack_quorum, write_quorum, metadata)
        self.metadata_version: int | None = None  # the version recovery wrote when it began
        self.fragments = self.metadata.fragments
        self.reads_fence = protocol.bookkeeper_recovery_reads_fence
        self.generation = generation
        self.responded: set[str] = set()  # answered the fencing LAC read
        self.negatives: set[str] = set()  # answered "no such entry" for the entry being read
        self._log: list[tuple[int, bytes] | None] = []  # what recovery knows: up to the highest LAC, then read (None: no answer carried it)
        self._payloads: dict[int, tuple[int, bytes]] = {}  # entries the fencing answers carried
        self.recovery_start = 0  # the highest LAC reported (never before the last fragment): recovery read after it
        # The ledger recovery closes once it found its end, and the bookies that acknowledged its
        # recovery adds; it closes the ledger once an ack quorum of each entry's write set did.
        self.closing: tuple[tuple[int, bytes], ...] | None = None
        self.added: set[str] = set()
        self.closed: tuple[tuple[int, bytes], ...] | None = None
        self._outbox: list[tuple[str, BookKeeperMessage]] = []
        self._closed_out = False  # the close was handed out by ready()

    @property
    def reading(self) -> int:
        """The entry recovery reads next."""
        return len(self._log) + 1

    @property
    def ensemble(self) -> tuple[str, ...]:
        """The ensemble of the ledger's last fragment, as the metadata holds it (until recovery
        begins, as it holds it now)."""
        return (self.fragments if self.metadata_version is not None else self.metadata.fragments)[-1][1]

    def members(self) -> set[str]:
        """Every bookie of a fragment the metadata holds: those the close writes to."""
        return {b for _, ensemble in self.fragments for b in ensemble}

    def snapshot(self) -> ServerSnapshot:
        if self.closed is not None:
            return ServerSnapshot(self.generation, LEADER, tuple(g for g, _ in self.closed), len(self.closed), True)
        return ServerSnapshot(0, FOLLOWER, (WRITER_GENERATION,) * len(self._log), 0, True)

    def _bookie(self, bookie: str) -> None:
        if bookie not in self.bookies:
            raise ReplicaError(f"{bookie} is not one of the ledger's bookies {list(self.bookies)}")
        if self.closed is not None:
            raise ReplicaError("the ledger is closed")

    def _begin(self) -> None:
        """Mark the ledger in recovery (the writer's next metadata update fails) and read its fragments."""
        if self.metadata_version is None:
            self.metadata_version = self.metadata.mark_in_recovery()
            self.fragments = self.metadata.fragments

    def fence(self, bookie: str) -> None:
        """The fencing LAC read of `bookie`, a bookie of the last fragment's ensemble."""
        self._bookie(bookie)
        if bookie not in self.ensemble:
            raise ReplicaError(f"{bookie} is not in the ensemble of the ledger's last fragment {list(self.ensemble)}")
        if bookie in self.responded:
            raise ReplicaError(f"{bookie} has already answered the fencing LAC read")
        self._begin()
        self._send(bookie, ReadLac(self.client_id, True))

    def recovery_read(self, bookie: str) -> None:
        """Read the next entry from `bookie` of its write set (fencing it too under `recovery_reads_fence`)."""
        self._bookie(bookie)
        if self.closing is not None:
            raise ReplicaError(f"recovery found the ledger's end (entry {len(self.closing)}): it reads no more, "
                               f"it waits for its recovery adds")
        needed = self.quorums.fencing_needed
        if len(self.responded) < needed:
            raise ReplicaError(f"fencing has not completed: {len(self.responded)} of {self.quorums.ensemble} bookies "
                               f"answered the fencing LAC read (recovery reads start after {needed})")
        if bookie not in self.quorums.write_set(self.fragments, self.reading):
            raise ReplicaError(f"{bookie} is not in the write set of entry {self.reading}")
        if bookie in self.negatives:
            raise ReplicaError(f"{bookie} has already answered that it lacks entry {self.reading}")
        self._send(bookie, ReadEntry(self.client_id, self.reading, self.reads_fence))

    def step(self, reply: ReadLacReply | ReadEntryReply | AddReply) -> None:
        if type(reply) not in (ReadLacReply, ReadEntryReply, AddReply):
            raise ReplicaError(f"the recovery client cannot step a {type(reply).__name__}")
        if reply.bookie not in self.bookies:
            raise ReplicaError(f"the recovery client got a {type(reply).__name__} from {reply.bookie!r}, "
                               f"not one of the ledger's bookies")
        if self.closed is not None:
            return
        if type(reply) is AddReply:  # a bookie took recovery's adds (recovery sends no other add)
            if self.closing is not None and reply.code == BK_OK and reply.last_entry >= len(self.closing):
                self.added.add(reply.bookie)
                self._close_once_added()
            return
        if type(reply) is ReadLacReply:
            self.responded.add(reply.bookie)
            if self.closing is not None:
                return  # a late fencing answer: recovery has read what it closes with
            for index, entry in enumerate(reply.entries, start=1):
                if entry != HOLE:
                    self._payloads.setdefault(index, entry)
            # Recovery starts after the highest LAC reported, and never before the last fragment
            # (the earlier ones are immutable: apache/bookkeeper pull request 2654).
            start = max(reply.lac, self.fragments[-1][0] - 1)
            self.recovery_start = max(self.recovery_start, start)
            if start > len(self._log):
                self._log += [None] * (start - len(self._log))
            # An entry no fencing answer carried (yet) is an earlier fragment's, which nobody writes
            # back (the bookies of its write set keep it): its payload is not needed. An entry of the
            # last fragment up to an LAC is on AQ bookies of its write set, so on one of the E - AQ + 1
            # that answer, which carries it.
            self._log = [entry if entry is not None else self._payloads.get(index)
                         for index, entry in enumerate(self._log, start=1)]
            return
        if self.closing is not None or reply.entry != self.reading:
            return  # an answer about another entry than the one being read
        if reply.code == BK_OK:
            self._log.append(reply.entries[0])
            self.negatives.clear()
            return
        self.negatives.add(reply.bookie)
        if len(self.negatives) >= self.quorums.missing_needed:
            # The entry does not exist: the ledger ends before it. Recovery writes the entries it
            # read back (its recovery adds, to every bookie of the fragments) and closes the ledger
            # once an ack quorum of each one's write set acknowledged them (LedgerRecoveryOp).
            self.closing = tuple(entry if entry is not None else (WRITER_GENERATION, b"") for entry in self._log)
            if self.unconfirmed():
                for bookie in sorted(self.members(), key=self.bookies.index):
                    self._send(bookie, RecoveryAdd(self.client_id, self.write_back(bookie)))
            self._close_once_added()

    def unconfirmed(self) -> list[int]:
        """The entries recovery read after the highest LAC reported whose recovery adds fewer than
        an ack quorum of their write set acknowledged: the close waits for them."""
        if self.closing is None:
            return []
        return [e for e in range(self.recovery_start + 1, len(self.closing) + 1)
                if len(self.added.intersection(self.quorums.write_set(self.fragments, e))) < self.quorums.ack_quorum]

    def waits(self) -> str | None:
        """Why recovery has found the ledger's end but not closed it (None: it has not found it, or closed it)."""
        if self.closing is None or self.closed is not None:
            return None
        e = self.unconfirmed()[0]
        added = [b for b in self.quorums.write_set(self.fragments, e) if b in self.added]
        return (f"recovery waits to close the ledger at entry {len(self.closing)}: entry {e}'s recovery adds are "
                f"acknowledged by {len(added)} bookie{'' if len(added) == 1 else 's'} of its write set"
                f"{' (' + ', '.join(added) + ')' if added else ''}, not the ack quorum of {self.quorums.ack_quorum}")

    def recovery_add(self, bookie: str) -> None:
        """Send `bookie` recovery's adds again (its earlier ones were lost, or it was down)."""
        self._bookie(bookie)
        if self.closing is None:
            raise ReplicaError("recovery has not found the ledger's end: it has nothing to write back yet")
        if bookie not in self.members():
            raise ReplicaError(f"{bookie} holds no fragment of the ledger")
        self._send(bookie, RecoveryAdd(self.client_id, self.write_back(bookie)))

    def _close_once_added(self) -> None:
        """Close the ledger once its recovery adds are on an ack quorum: in the metadata
        (conditional on recovery's own version, which nobody else changes), then on the bookies."""
        if self.unconfirmed():
            return
        self.closed = self.closing
        self.metadata_version = self.metadata.close(self.metadata_version, len(self.closed))
        for bookie in sorted(self.members(), key=self.bookies.index):
            self._send(bookie, CloseLedger(self.client_id, self.write_back(bookie)))

    def write_back(self, bookie: str) -> tuple[tuple[int, bytes], ...]:
        """The ledger recovery closes as `bookie` is to write it: the last fragment's entries of its
        write sets, holes elsewhere (earlier fragments are immutable)."""
        first = self.fragments[-1][0]
        return tuple(entry if index >= first and bookie in self.quorums.write_set(self.fragments, index) else HOLE
                     for index, entry in enumerate(self.closing, start=1))

    def closed_ledger(self) -> tuple[tuple[int, bytes], ...] | None:
        """The closed ledger's entries, once recovery closed it (None before)."""
        return self.closed

    def has_ready(self) -> bool:
        return bool(self._outbox) or (self.closed is not None and not self._closed_out)

    def ready(self) -> ClientReady:
        messages, self._outbox = tuple(self._outbox), []
        closed = None
        if self.closed is not None and not self._closed_out:
            closed, self._closed_out = self.closed, True
        return ClientReady(messages, (), closed)

    def _send(self, to: str, message: BookKeeperMessage) -> None:
        self._outbox.append((to, message))

    def __repr__(self) -> str:
        state = (f"closed@{len(self.closed)}" if self.closed is not None else
                 f"closing@{len(self.closing)} added={sorted(self.added)}" if self.closing is not None else
                 f"reading {self.reading}")
        return (f"RecoveryClient({self.client_id} {state} responded={sorted(self.responded)} "
                f"negatives={sorted(self.negatives)})")
