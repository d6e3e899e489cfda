"""BookKeeper: one ledger, its writer, its bookies, and ledger recovery with fencing.

The rules follow Apache BookKeeper's replication protocol (bookkeeper.apache.org, "BookKeeper
protocol") and its Fencing page:

- The ensemble is every bookie of the configuration (`servers` = E), the write quorum is the
  ensemble (WQ = E: every entry goes to every bookie) and the ack quorum is a majority of it
  (AQ = floor(E/2)+1; E=3, WQ=3, AQ=2 is the smallest configuration where AQ < WQ).
- The writer adds entries (`add`) and sends them to a bookie (`send_add`, one whole request and
  response), piggybacking its last-add-confirmed (LAC). A bookie stores what it receives unless it
  is fenced; a fenced bookie answers with an error and the writer stops (LedgerFencedException).
  The LAC is the highest entry such that it and every entry before it has been stored on AQ
  bookies; the writer then acknowledges it to its client. When it has nothing to add, the writer
  may still send its LAC (BookKeeper's explicit LAC), so readers can read at small bounds.
- A reader reads a bookie's entries up to the LAC that bookie has seen (`read`).
- Ledger recovery (LedgerRecoveryOp): a second client sends a fencing LAC read to each bookie
  (`fence`: the bookie is fenced and reports its LAC). Once E - AQ + 1 bookies answered, no ack
  quorum of unfenced bookies remains and recovery reads entries after the highest reported LAC
  from the bookies (`recovery_read`). An entry a bookie has is recovered; an entry that WQ - AQ + 1
  bookies report missing does not exist (apache/bookkeeper pull request 1077), and recovery closes
  the ledger before it, writing the recovered entries back to the bookies.
- `bookkeeper_recovery_reads_fence`: whether a recovery read also fences the bookie it reaches
  (FLAG_DO_FENCING, added by apache/bookkeeper pull request 2616). Without it (issue 2614), a
  bookie whose fencing request was lost answers "no such entry", recovery closes the ledger, and
  then the same bookie accepts the writer's add, completing an ack quorum with a bookie that
  stored the entry before it was fenced: the writer acknowledges an entry the closed ledger does
  not contain.

The state looks like the other models' (`properties.snapshot.ClusterView`): `servers` holds the
bookies S1..Sn, then the writer (S(n+1), the leader of generation 1, whose HWM is its LAC) and
the recovery client (S(n+2), which becomes the leader of generation 2 when it closes the ledger,
its log the closed ledger, its HWM the last entry). Every entry is the writer's, so every entry
has generation 1. Closing the ledger is a truncation of every bookie to the closed ledger: what
lies beyond the last entry is never read again. A bookie's journal is durable: a crash keeps its
entries, its LAC and its fence.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from hwm.model.actions import Action, BoundHit
from hwm.model.raft import RaftModel
from hwm.model.encoding import _reads, _server_bytes, canonical, encode, fingerprint_bytes
from hwm.model.state import FOLLOWER, LEADER, Config, Server
from hwm.model.zab import read_entries, read_server
from hwm.properties.acked import WITH_ACKED
from hwm.properties.protocol import Protocol
from hwm.properties.quorum import majority, quorum_index
from hwm.properties.snapshot import describe_server, server_name

WRITER_GENERATION = 1
RECOVERY_GENERATION = 2


class BookKeeperState(NamedTuple):
    """Bookies, writer and recovery client (see the module docstring), plus bit sets over the
    bookies: `fenced`, `responded` (answered the fencing LAC read), `negatives` (answered "no such
    entry" for the entry recovery is reading); `acked`, the ghost set of acknowledged entries."""

    servers: tuple[Server, ...]
    reads: frozenset
    crashes: int
    channels: tuple
    fenced: int
    responded: int
    negatives: int
    acked: frozenset

    def label(self, k: int) -> str:
        """For a step table: bookies by name, then the two clients."""
        n = len(self.servers) - 2
        return server_name(k) + ("" if k < n else " writer" if k == n else " recovery")

    def part(self, k: int) -> str | None:
        """For findings: the two clients are servers of the state, not bookies (None for a bookie)."""
        n = len(self.servers) - 2
        return None if k < n else "the writer" if k == n else "the recovery client"

    def members(self) -> str:
        """For findings: what a count of servers is out of (the clients' copies count, as in the model)."""
        return f"{len(self.servers)} servers ({len(self.servers) - 2} bookies, the writer and the recovery client)"

    def note(self, k: int) -> str:
        return " fenced" if k < len(self.servers) - 2 and self.fenced >> k & 1 else ""

    def describe(self) -> str:
        n = len(self.servers) - 2
        lines = []
        for k, s in enumerate(self.servers[:n]):
            flags = " fenced" if self.fenced >> k & 1 else ""
            lines.append(f"{server_name(k)} bookie {describe_server(s)}{flags}")
        lines.append(f"{server_name(n)} writer {describe_server(self.servers[n])}")
        lines.append(f"{server_name(n + 1)} recovery {describe_server(self.servers[n + 1])}")
        if self.reads:
            lines.append("reads " + " ".join(f"{i}@g{g}" for i, g in sorted(self.reads)))
        return "\n".join(lines)


def _bits(mask: int) -> int:
    return bin(mask).count("1")


class BookKeeperModel(RaftModel):
    """The BookKeeper model. The raft family's flags do not apply (they keep their defaults)."""

    properties = WITH_ACKED

    def __init__(self, protocol: Protocol, config: Config):
        if config.network != "rpc":
            raise ValueError("the BookKeeper model runs on the rpc network only (each step is one whole exchange)")
        super().__init__(protocol, config)
        n = self.n
        self.bookies = range(n)
        self.writer, self.recovery = n, n + 1
        self.ack_quorum = majority(n)
        self.fencing_needed = n - self.ack_quorum + 1  # E - AQ + 1 fencing responses
        self.missing_needed = n - self.ack_quorum + 1  # WQ - AQ + 1 "no such entry" answers
        self.reads_fence = protocol.bookkeeper_recovery_reads_fence
        self._effects = {name: getattr(self, "effect_" + name) for name in
                         ("add", "send_add", "fence", "recovery_read", "read", "crash", "restart")}

    # --------------------------------------------------------- the interface
    def initial_state(self) -> BookKeeperState:
        n = self.n
        bookie = Server(0, FOLLOWER, (), 0, True, ())
        writer = Server(WRITER_GENERATION, LEADER, (), 0, True, (0,) * (n + 2))
        recovery = Server(0, FOLLOWER, (), 0, True, ())
        return BookKeeperState((bookie,) * n + (writer, recovery), frozenset(), 0, (), 0, 0, 0, frozenset())

    def encode(self, s: BookKeeperState, symmetry: bool = True) -> bytes:
        # Only bookies are interchangeable: the kind byte keeps the two clients in their places.
        keys = [bytes((0, s.fenced >> k & 1, s.responded >> k & 1, s.negatives >> k & 1)) + _server_bytes(b)
                for k, b in enumerate(s.servers[: self.n])]
        keys += [b"\x01" + _server_bytes(s.servers[self.writer]), b"\x02" + _server_bytes(s.servers[self.recovery])]

        def acked(order) -> bytes:
            return _reads(s.acked)
        return canonical(s, keys, acked) if symmetry else encode(s, None, keys, acked)

    def fingerprint(self, s: BookKeeperState, symmetry: bool = True) -> int:
        return fingerprint_bytes(self.encode(s, symmetry))

    def decode(self, data: bytes) -> BookKeeperState:
        """The state `encode` wrote (bookies in the encoded order, then the writer and recovery)."""
        it = iter(data)
        total, _, crashes = next(it), next(it), next(it)
        servers, fenced, responded, negatives = [], 0, 0, 0
        for k in range(total):
            kind = next(it)
            if kind == 0:
                fenced |= next(it) << k
                responded |= next(it) << k
                negatives |= next(it) << k
            server = read_server(it)
            if kind == 1 and server.role == LEADER:  # the writer's acknowledgements per server
                server = server._replace(match=tuple(next(it) for _ in range(total)))
            servers.append(server)
        reads = read_entries(it)
        return BookKeeperState(tuple(servers), reads, crashes, (), fenced, responded, negatives, read_entries(it))

    # ---------------------------------------------------------------- helpers
    def closed(self, s: BookKeeperState) -> bool:
        return s.servers[self.recovery].role == LEADER

    def _bookie(self, s: BookKeeperState, b: int) -> str | None:
        if not 0 <= b < self.n:
            return f"{server_name(b)} is not a bookie"
        if not s.servers[b].alive:
            return f"{server_name(b)} is down"
        return None

    @staticmethod
    def _set(servers: tuple, k: int, server: Server) -> tuple:
        return servers[:k] + (server,) + servers[k + 1:]

    # ------------------------------------------------------------ the writer
    def guard_add(self, s: BookKeeperState) -> str | None:
        writer = s.servers[self.writer]
        if writer.role != LEADER:
            return "the writer has been fenced out: the ledger is being recovered"
        if len(writer.log) >= self.config.max_log:
            return BoundHit("max_log", f"the writer's ledger is at max_log {self.config.max_log}")
        return None

    def effect_add(self, s: BookKeeperState) -> BookKeeperState:
        writer = s.servers[self.writer]
        return s._replace(servers=self._set(s.servers, self.writer,
                                            writer._replace(log=writer.log + (WRITER_GENERATION,))))

    def guard_send_add(self, s: BookKeeperState, b: int) -> str | None:
        writer = s.servers[self.writer]
        if writer.role != LEADER:
            return "the writer has been fenced out: the ledger is being recovered"
        reason = self._bookie(s, b)
        if reason:
            return reason
        bookie = s.servers[b]
        if len(bookie.log) >= len(writer.log) and bookie.hwm >= writer.hwm:
            return f"{server_name(b)} has every entry and the LAC the writer would send"
        return None

    def effect_send_add(self, s: BookKeeperState, b: int) -> BookKeeperState:
        writer, bookie = s.servers[self.writer], s.servers[b]
        if s.fenced >> b & 1:
            # The bookie refuses the add: the writer learns the ledger is fenced and stops.
            writer = writer._replace(role=FOLLOWER, match=())
            return s._replace(servers=self._set(s.servers, self.writer, writer))
        # The adds carry the writer's LAC; the bookie stores every entry it lacks.
        bookie = Server(WRITER_GENERATION, FOLLOWER, writer.log, max(bookie.hwm, writer.hwm), True, ())
        match = list(writer.match)
        match[b] = len(writer.log)
        lac = max(writer.hwm, quorum_index("majority", match[: self.n]))
        writer = writer._replace(match=tuple(match), hwm=lac)
        servers = self._set(self._set(s.servers, b, bookie), self.writer, writer)
        acked = s.acked
        if lac > len(s.acked):  # the add callbacks complete in order up to the LAC
            acked = frozenset((i, WRITER_GENERATION) for i in range(1, lac + 1)) | acked
        return s._replace(servers=servers, acked=acked)

    # ------------------------------------------------------------ the reader
    def guard_read(self, s: BookKeeperState, r: int) -> str | None:
        if not 0 <= r < self.n:
            return f"{server_name(r)} is not a bookie"
        return super().guard_read(s, r)

    def effect_read(self, s: BookKeeperState, r: int) -> BookKeeperState:
        return s._replace(reads=super().effect_read(s, r).reads)

    # ----------------------------------------------------------- recovery
    def guard_fence(self, s: BookKeeperState, b: int) -> str | None:
        if self.closed(s):
            return "the ledger is closed"
        reason = self._bookie(s, b)
        if reason:
            return reason
        if s.responded >> b & 1:
            return f"{server_name(b)} has already answered the fencing LAC read"
        return None

    def effect_fence(self, s: BookKeeperState, b: int) -> BookKeeperState:
        # The bookie is fenced and answers with its LAC; recovery starts after the highest one.
        bookie, recovery = s.servers[b], s.servers[self.recovery]
        known = recovery.log
        if bookie.hwm > len(known):
            known = bookie.log[: bookie.hwm]
        servers = self._set(s.servers, self.recovery, recovery._replace(log=known))
        return s._replace(servers=servers, fenced=s.fenced | 1 << b, responded=s.responded | 1 << b)

    def guard_recovery_read(self, s: BookKeeperState, b: int) -> str | None:
        if self.closed(s):
            return "the ledger is closed"
        if _bits(s.responded) < self.fencing_needed:
            return (f"fencing has not completed: {_bits(s.responded)} of {self.n} bookies answered the "
                    f"fencing LAC read (recovery reads start after {self.fencing_needed})")
        reason = self._bookie(s, b)
        if reason:
            return reason
        if s.negatives >> b & 1:
            return f"{server_name(b)} has already answered that it lacks entry {len(s.servers[self.recovery].log) + 1}"
        return None

    def effect_recovery_read(self, s: BookKeeperState, b: int) -> BookKeeperState:
        recovery, bookie = s.servers[self.recovery], s.servers[b]
        index = len(recovery.log) + 1
        fenced = s.fenced | (1 << b if self.reads_fence else 0)
        if len(bookie.log) >= index:
            # Found: recovery will write it back; read the next one.
            recovery = recovery._replace(log=recovery.log + (bookie.log[index - 1],))
            return s._replace(servers=self._set(s.servers, self.recovery, recovery), fenced=fenced, negatives=0)
        negatives = s.negatives | 1 << b
        if _bits(negatives) < self.missing_needed:
            return s._replace(fenced=fenced, negatives=negatives)
        # Entry `index` does not exist: close the ledger at index - 1 and write the recovered
        # entries back; nothing beyond the last entry is part of the ledger any more.
        ledger = recovery.log
        end = len(ledger)
        servers = list(s.servers)
        for k in self.bookies:
            old = servers[k]
            if old.alive:
                servers[k] = old._replace(log=ledger, hwm=end)
            else:
                log = old.log[:end]
                servers[k] = old._replace(log=log, hwm=min(old.hwm, end))
        servers[self.recovery] = Server(RECOVERY_GENERATION, LEADER, ledger, end, True, ())
        return s._replace(servers=tuple(servers), fenced=fenced, negatives=negatives)

    # ------------------------------------------------------ bookie failures
    def guard_crash(self, s: BookKeeperState, c: int) -> str | None:
        return self._bookie(s, c) or super().guard_crash(s, c)

    def effect_crash(self, s: BookKeeperState, c: int) -> BookKeeperState:
        # The journal keeps entries, LAC and fence.
        return s._replace(servers=self._set(s.servers, c, s.servers[c]._replace(alive=False)), crashes=s.crashes + 1)

    def guard_restart(self, s: BookKeeperState, r: int) -> str | None:
        if not 0 <= r < self.n:
            return f"{server_name(r)} is not a bookie"
        return super().guard_restart(s, r)

    def effect_restart(self, s: BookKeeperState, r: int) -> BookKeeperState:
        return s._replace(servers=self._set(s.servers, r, s.servers[r]._replace(alive=True)))

    # ------------------------------------------------------------ enumeration
    def action_table(self) -> list[Action]:
        return [("add",)] + [(name, b) for name in ("send_add", "fence", "recovery_read", "read", "crash", "restart")
                             for b in self.bookies]

    def actions(self, s: BookKeeperState, bounds_hit: set | None = None) -> Iterator[Action]:
        hit = bounds_hit if bounds_hit is not None else set()
        reason = self.guard_add(s)
        if reason is None:
            yield ("add",)
        elif isinstance(reason, BoundHit):
            hit.add(reason.bound)
        for name in ("send_add", "fence", "recovery_read", "read", "crash", "restart"):
            for b in self.bookies:
                reason = self.why_not(s, (name, b))
                if reason is None:
                    yield (name, b)
                elif isinstance(reason, BoundHit):
                    hit.add(reason.bound)


__all__ = ["BookKeeperModel", "BookKeeperState"]
