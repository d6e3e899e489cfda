"""BookKeeper's replication of one ledger, sans-IO: the bookie, the writer and the recovery client.

The rules are model/bookkeeper.py's (Apache BookKeeper's replication protocol and its Fencing page):

- `Bookie`: one bookie's journal of the ledger, on the replica core's storage (`impl.storage`:
  the entries in the write-ahead log, the LAC as the metadata's HWM, the writer's generation as its
  generation), plus the fence bit and the close it has taken (`BookieStorage`, a small file written
  through `impl.fs`). Everything a request changes is durable before the bookie answers: `ready()`
  hands out a `BookieReady` (a core `Ready` plus the fence and the close) and `persist` writes it.
  A fenced bookie refuses the writer's adds (EFENCED); a fencing LAC read, and under
  `recovery_reads_fence` a recovery read, fence it before it answers.
- `Writer`: adds entries (`add`), sends a bookie every entry it lacks with the LAC piggybacked
  (`send_add`; with nothing to add it is the explicit LAC), and advances the LAC to the highest
  entry such that it and every entry before it is stored on an ack quorum of bookies; the entries up
  to the LAC are acknowledged to its client (`ready().acknowledged`). An EFENCED answer stops it
  (LedgerFencedException): it adds and sends nothing more.
- `RecoveryClient` (LedgerRecoveryOp): a fencing LAC read to each bookie (`fence`); once
  E - AQ + 1 bookies answered, recovery reads of the entry after the highest LAC reported
  (`recovery_read`): an entry a bookie has is recovered, and an entry that WQ - AQ + 1 bookies report
  missing does not exist (apache/bookkeeper pull request 1077): the ledger is closed before it. The
  close writes the recovered entries back to every bookie (`CloseLedger`) and records the ledger's
  end in the ledger's metadata (`ready().closed`; BookKeeper keeps it in ZooKeeper). A bookie that
  was down at the close learns of it from the metadata when it restarts (`Bookie(..., closed_at=)`).
- `recovery_reads_fence` is the protocol flag `bookkeeper_recovery_reads_fence`: whether a recovery
  read carries FLAG_DO_FENCING (apache/bookkeeper pull request 2616). Without it (issue 2614) a
  bookie whose fencing read was lost answers "no such entry" and stays unfenced: recovery closes the
  ledger, and the writer's next add to that bookie completes an ack quorum the closed ledger lacks.

The ensemble is every bookie and the write quorum the ensemble (WQ = E); the ack quorum is a
parameter (default: a majority, the model's). The writer and the recovery client are clients: their
state is in memory only. Snapshots have the model's shape (properties.snapshot.ServerSnapshot): a
bookie has generation 0 until it stores an add of the writer (then the writer's generation), its
journal as the log and its LAC as the HWM; the writer is the leader of its generation with its LAC as
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
    check_server_id,
)
from hwm.impl.storage import Durable
from hwm.impl.wal import StorageError
from hwm.properties.protocol import Protocol
from hwm.properties.quorum import majority
from hwm.properties.snapshot import FOLLOWER, LEADER, ServerSnapshot

__all__ = ["BOOKIE_STATE_FILE", "Bookie", "BookieDurable", "BookieReady", "BookieStorage", "ClientReady",
           "LedgerFenced", "LedgerQuorums", "RecoveryClient", "Writer", "down_snapshot", "persist"]

# The file, next to the journal, that holds the fence bit and the close the bookie has taken.
BOOKIE_STATE_FILE = "ledger-state.json"
BOOKIE_STATE_FORMAT = "hwm-bookie/1"
# The generation of the writer's ledger handle, and the one the closed ledger is the history of
# (the model's WRITER_GENERATION and RECOVERY_GENERATION).
WRITER_GENERATION = 1
RECOVERY_GENERATION = 2


class LedgerFenced(ReplicaError):
    """The writer was told EFENCED: the ledger is being recovered (LedgerFencedException)."""


@dataclass(frozen=True)
class LedgerQuorums:
    """Ensemble size E, write quorum WQ and ack quorum AQ, and the two recovery thresholds they give.

    Every entry goes to the whole ensemble today (WQ = E); AQ may be any of 1..WQ."""

    ensemble: int
    write_quorum: int
    ack_quorum: int

    @classmethod
    def of(cls, ensemble: int, ack_quorum: int | None = None, write_quorum: int | None = None) -> "LedgerQuorums":
        write_quorum = ensemble if write_quorum is None else write_quorum
        quorums = cls(ensemble, write_quorum, majority(ensemble) if ack_quorum is None else ack_quorum)
        if type(ensemble) is not int or ensemble < 1:
            raise ValueError(f"ensemble: expected an int >= 1, got {ensemble!r}")
        if write_quorum != ensemble:
            raise ValueError(f"write_quorum {write_quorum}: the implementation writes every entry to the whole "
                             f"ensemble (write quorum = ensemble = {ensemble})")
        if type(quorums.ack_quorum) is not int or not 1 <= quorums.ack_quorum <= write_quorum:
            raise ValueError(f"ack_quorum: expected an int in 1..{write_quorum} (the write quorum), "
                             f"got {quorums.ack_quorum!r}")
        return quorums

    @property
    def fencing_needed(self) -> int:
        """E - AQ + 1 fencing answers: no ack quorum of unfenced bookies remains."""
        return self.ensemble - self.ack_quorum + 1

    @property
    def missing_needed(self) -> int:
        """WQ - AQ + 1 "no such entry" answers: the entry cannot have reached an ack quorum."""
        return self.write_quorum - self.ack_quorum + 1

    def confirmed(self, stored: Iterable[int]) -> int:
        """The highest entry stored (with every entry before it) on AQ bookies, from each bookie's
        contiguous journal end as the writer knows it."""
        ends = sorted(stored, reverse=True)
        return ends[self.ack_quorum - 1] if len(ends) >= self.ack_quorum else 0


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
            # The ledger was closed while we were down: what lies beyond its end is not part of it.
            self._truncate_from(closed_at + 1)
            self._set_lac(min(self.lac, closed_at))
            self.closed_at = closed_at
            self._state_dirty = True

    # ------------------------------------------------------------------ views
    @property
    def last_entry(self) -> int:
        return len(self._log)

    def snapshot(self) -> ServerSnapshot:
        return ServerSnapshot(self.generation, FOLLOWER, tuple(g for g, _ in self._log), self.lac, True)

    def read(self, entry: int) -> tuple[int, bytes]:
        """(generation, payload) of an entry at or below the LAC: what a reader may read."""
        if type(entry) is not int or entry < 1:
            raise NotCommitted(f"no entry {entry!r}: entry ids start at 1")
        if entry > min(self.lac, len(self._log)):
            raise NotCommitted(f"entry {entry} is past {self.bookie_id}'s last-add-confirmed {self.lac}")
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
            if entry_id > len(self._log):  # an entry already in the journal is the same entry
                self._log.append(entry)
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
        lac = min(self.lac, len(self._log))
        self._send(request.client, ReadLacReply(self.bookie_id, lac, tuple(self._log[:lac])))

    def _on_read_entry(self, request: ReadEntry) -> None:
        if request.fence:
            self._fence()
        if request.entry <= len(self._log):
            reply = ReadEntryReply(self.bookie_id, BK_OK, request.entry, (self._log[request.entry - 1],))
        else:
            reply = ReadEntryReply(self.bookie_id, BK_NO_SUCH_ENTRY, request.entry, ())
        self._send(request.client, reply)

    def _on_close(self, close: CloseLedger) -> None:
        # The recovery adds write the closed ledger's entries (a fenced bookie takes them); the
        # bookie keeps nothing beyond its end, and its LAC is the last entry.
        ledger = list(close.entries)
        common = 0
        while common < min(len(ledger), len(self._log)) and self._log[common] == ledger[common]:
            common += 1
        self._truncate_from(common + 1)
        for entry_id in range(common + 1, len(ledger) + 1):
            self._log.append(ledger[entry_id - 1])
            self._mark_dirty(entry_id)
        self._set_lac(len(ledger))
        if self.closed_at != len(ledger):
            self.closed_at = len(ledger)
            self._state_dirty = True
        self._send(close.client, AddReply(self.bookie_id, BK_OK, len(self._log)))  # the write-back is durable

    # By name, so that a subclass (a test's planted bug) may override a handler.
    _HANDLERS: dict[type, str] = {
        AddEntries: "_on_add", ReadLac: "_on_read_lac", ReadEntry: "_on_read_entry", CloseLedger: "_on_close",
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


def down_snapshot(durable: BookieDurable, closed_at: int | None = None) -> ServerSnapshot:
    """A crashed bookie as its journal holds it; with the ledger closed while it was down (`closed_at`,
    from the ledger's metadata), as it will be once it restarts: nothing beyond the ledger's end."""
    log = tuple(g for g, _ in durable.log)
    lac = durable.hwm
    if closed_at is not None and getattr(durable, "closed_at", None) is None:
        log, lac = log[:closed_at], min(lac, closed_at)
    return ServerSnapshot(durable.generation, FOLLOWER, log, lac, False)


# ------------------------------------------------------------------------ the clients
class ClientReady(NamedTuple):
    """A client's outputs: messages to send, entries newly acknowledged to the writer's client
    (index, generation), and the closed ledger's entries once recovery closed it (else None)."""

    messages: tuple[tuple[str, BookKeeperMessage], ...]
    acknowledged: tuple[tuple[int, int], ...]
    closed: tuple[tuple[int, bytes], ...] | None


class Writer:
    """The ledger's writer (a client of the bookies). Inputs: `add` (a client's entry), `send_add`
    (send a bookie what it lacks, with the LAC), `step` (the bookies' answers); outputs: `ready()`."""

    def __init__(self, writer_id: str, bookies: Sequence[str], *, ack_quorum: int | None = None,
                 write_quorum: int | None = None, generation: int = WRITER_GENERATION):
        check_server_id(writer_id, "writer_id")
        self.writer_id = self.server_id = writer_id
        self.bookies = tuple(bookies)
        self.quorums = LedgerQuorums.of(len(self.bookies), ack_quorum, write_quorum)
        self.generation = generation
        self._log: list[tuple[int, bytes]] = []
        self.lac = 0
        self.stored: dict[str, int] = {b: 0 for b in self.bookies}  # each bookie's journal end, as answered
        self.fenced_out = False
        self._outbox: list[tuple[str, BookKeeperMessage]] = []
        self._acknowledged: list[tuple[int, int]] = []

    @property
    def last_entry(self) -> int:
        return len(self._log)

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

    def send_add(self, bookie: str) -> None:
        """Send `bookie` every entry it lacks, as far as the writer knows, and the LAC."""
        if bookie not in self.stored:
            raise ReplicaError(f"{bookie} is not a bookie of the ledger's ensemble {list(self.bookies)}")
        if self.fenced_out:
            raise LedgerFenced(self.refusal())
        first = min(self.stored[bookie], len(self._log)) + 1
        self._send(bookie, AddEntries(self.writer_id, self.generation, first, tuple(self._log[first - 1:]), self.lac))

    def step(self, reply: AddReply) -> None:
        if type(reply) is not AddReply:
            raise ReplicaError(f"the writer cannot step a {type(reply).__name__}: not a bookie's answer to an add")
        if reply.bookie not in self.stored:
            raise ReplicaError(f"the writer got an AddReply from {reply.bookie!r}, not a bookie of the ensemble")
        if self.fenced_out:
            return
        if reply.code == BK_FENCED:
            self.fenced_out = True  # LedgerFencedException: the writer stops
            return
        self.stored[reply.bookie] = min(reply.last_entry, len(self._log))
        if reply.code == BK_MISSING_ENTRIES:
            self.send_add(reply.bookie)  # from the end of its journal
            return
        # The add callbacks complete in order up to the LAC.
        lac = max(self.lac, self.quorums.confirmed(self.stored.values()))
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
        return f"Writer({self.writer_id} entries={len(self._log)} lac={self.lac}{' fenced out' if self.fenced_out else ''})"


class RecoveryClient:
    """The ledger recovery of a second client (LedgerRecoveryOp). Inputs: `fence` and
    `recovery_read` (send one bookie the request), `step` (the answers); outputs: `ready()`, whose
    `closed` is the closed ledger once recovery closed it."""

    def __init__(self, client_id: str, bookies: Sequence[str], protocol: Protocol, *, ack_quorum: int | None = None,
                 write_quorum: int | None = None, generation: int = RECOVERY_GENERATION):
        check_server_id(client_id, "client_id")
        if not isinstance(protocol, Protocol) or protocol.system != "bookkeeper":
            raise ValueError(f"protocol: the recovery client follows BookKeeper's rules, not "
                             f"{getattr(protocol, 'system', protocol)!r}")
        self.client_id = self.server_id = client_id
        self.bookies = tuple(bookies)
        self.quorums = LedgerQuorums.of(len(self.bookies), ack_quorum, write_quorum)
        self.reads_fence = protocol.bookkeeper_recovery_reads_fence
        self.generation = generation
        self.responded: set[str] = set()  # answered the fencing LAC read
        self.negatives: set[str] = set()  # answered "no such entry" for the entry being read
        self._log: list[tuple[int, bytes]] = []  # what recovery knows: up to the highest LAC, then read
        self.closed: tuple[tuple[int, bytes], ...] | None = None
        self._outbox: list[tuple[str, BookKeeperMessage]] = []
        self._closed_out = False  # the close was handed out by ready()

    @property
    def reading(self) -> int:
        """The entry recovery reads next."""
        return len(self._log) + 1

    def snapshot(self) -> ServerSnapshot:
        if self.closed is not None:
            return ServerSnapshot(self.generation, LEADER, tuple(g for g, _ in self.closed), len(self.closed), True)
        return ServerSnapshot(0, FOLLOWER, tuple(g for g, _ in self._log), 0, True)

    def _bookie(self, bookie: str) -> None:
        if bookie not in self.bookies:
            raise ReplicaError(f"{bookie} is not a bookie of the ledger's ensemble {list(self.bookies)}")
        if self.closed is not None:
            raise ReplicaError("the ledger is closed")

    def fence(self, bookie: str) -> None:
        """The fencing LAC read of `bookie`."""
        self._bookie(bookie)
        if bookie in self.responded:
            raise ReplicaError(f"{bookie} has already answered the fencing LAC read")
        self._send(bookie, ReadLac(self.client_id, True))

    def recovery_read(self, bookie: str) -> None:
        """Read the next entry from `bookie` (fencing it too under `recovery_reads_fence`)."""
        self._bookie(bookie)
        needed = self.quorums.fencing_needed
        if len(self.responded) < needed:
            raise ReplicaError(f"fencing has not completed: {len(self.responded)} of {len(self.bookies)} bookies "
                               f"answered the fencing LAC read (recovery reads start after {needed})")
        if bookie in self.negatives:
            raise ReplicaError(f"{bookie} has already answered that it lacks entry {self.reading}")
        self._send(bookie, ReadEntry(self.client_id, self.reading, self.reads_fence))

    def step(self, reply: ReadLacReply | ReadEntryReply | AddReply) -> None:
        if type(reply) not in (ReadLacReply, ReadEntryReply, AddReply):
            raise ReplicaError(f"the recovery client cannot step a {type(reply).__name__}")
        if reply.bookie not in self.bookies:
            raise ReplicaError(f"the recovery client got a {type(reply).__name__} from {reply.bookie!r}, "
                               f"not a bookie of the ensemble")
        if self.closed is not None or type(reply) is AddReply:  # (AddReply: a bookie took the write-back)
            return
        if type(reply) is ReadLacReply:
            self.responded.add(reply.bookie)
            if reply.lac > len(self._log):  # recovery starts after the highest LAC reported
                self._log = list(reply.entries)
            return
        if reply.entry != self.reading:
            return  # an answer about another entry than the one being read
        if reply.code == BK_OK:
            self._log.append(reply.entries[0])
            self.negatives.clear()
            return
        self.negatives.add(reply.bookie)
        if len(self.negatives) >= self.quorums.missing_needed:
            # The entry does not exist: close the ledger before it and write it back.
            self.closed = tuple(self._log)
            for bookie in self.bookies:
                self._send(bookie, CloseLedger(self.client_id, self.closed))

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
        state = f"closed@{len(self.closed)}" if self.closed is not None else f"reading {self.reading}"
        return (f"RecoveryClient({self.client_id} {state} responded={sorted(self.responded)} "
                f"negatives={sorted(self.negatives)})")
