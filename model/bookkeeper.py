"""BookKeeper: one ledger, its writer, its bookies, and ledger recovery with fencing.

The rules follow Apache BookKeeper's replication protocol (bookkeeper.apache.org, "BookKeeper
protocol"), its Fencing page, and Jack Vanlightly's TLA+ specification of the protocol
(github.com/Vanlightly/bookkeeper-tlaplus, BookKeeperProtocol.tla; "the TLA+ spec" below):

- The ledger has an ensemble of E bookies (`ensemble_size`; default every bookie of the
  configuration, `servers`), a write quorum WQ (`write_quorum`; default E) and an ack quorum AQ
  (`ack_quorum`; default a majority of WQ: E=3, WQ=3, AQ=2 is the smallest configuration where
  AQ < WQ). Entries are striped round-robin (DistributionSchedule): entry e (BookKeeper's e-1)
  goes to its write set, the WQ bookies from position (e-1) mod E of its fragment's ensemble.
- The writer adds entries (`add`) and sends them to a bookie of its current ensemble (`send_add`,
  one whole request and response: every entry of the current fragment in that bookie's write
  sets), piggybacking its last-add-confirmed (LAC). A bookie stores what it receives unless it
  is fenced; a fenced bookie answers with an error and the writer stops (LedgerFencedException).
  The LAC is the highest entry such that it and every entry before it has been stored on AQ
  bookies of its write set; the writer then acknowledges it to its client. When it has nothing
  to add, the writer may still send its LAC (BookKeeper's explicit LAC), so readers can read at
  small bounds.
- A reader reads a bookie's entries up to the LAC that bookie has seen (`read`).
- Ledger recovery (LedgerRecoveryOp): a second client marks the ledger metadata in recovery
  and sends a fencing LAC read to each bookie of the last fragment's ensemble (`fence`: the
  bookie is fenced and reports its LAC). Once E - AQ + 1 of them answered, no ack quorum of
  unfenced bookies remains in any write set (the TLA+ spec's quorum coverage, cohort = the
  ensemble) and recovery reads entries after the highest reported LAC, and never before the last
  fragment's first entry (apache/bookkeeper pull request 2654, issue 2615), from the bookies of
  each entry's write set (`recovery_read`). An entry a bookie has is recovered; an entry that
  WQ - AQ + 1 bookies of its write set report missing does not exist (quorum coverage, cohort =
  the write set; apache/bookkeeper pull request 1077), and recovery closes the ledger before
  it. It first writes the entries it read (those after the highest LAC reported) back to their
  write sets and closes only once an ack quorum of each write set acknowledged them
  (LedgerRecoveryOp's recovery adds): the answer that closes waits until AQ bookies of each such
  write set are up. (Without that wait, on four bookies recovery closed from the one bookie left
  after three crashes, and an entry it recovered was on 3 of 6 servers.) The model writes the
  closed ledger's last fragment to every live bookie of its write sets in the same step.
- `bookkeeper_recovery_reads_fence`: whether a recovery read also fences the bookie it reaches
  (FLAG_DO_FENCING, added by apache/bookkeeper pull request 2616). Without it (issue 2614), a
  bookie whose fencing request was lost answers "no such entry", recovery closes the ledger, and
  then the same bookie accepts the writer's add, completing an ack quorum with a bookie that
  stored the entry before it was fenced: the writer acknowledges an entry the closed ledger does
  not contain.
- Ensemble changes: with spare bookies (`servers` > E), when a write to a bookie of the current
  ensemble fails (it is down and an entry of its write set is pending), the writer replaces it
  (`change_ensemble`) by the first live bookie outside the ensemble, in a new fragment from its
  first unconfirmed entry (LAC + 1) on; the acknowledgements of the replaced bookie for those
  entries no longer count and the pending entries are sent to the replacement. The writer
  records the new fragment in the ledger metadata, a versioned record, with a conditional write
  (the TLA+ spec's ChangeEnsemble: `c.meta_version = meta_version`). Recovery bumps that version
  when it marks the ledger in recovery, so a writer's update after recovery began fails, and the
  writer, holding back its add completions until the update returns (LedgerHandle's
  blockAddCompletions), learns the ledger is in recovery and stops.
  `bookkeeper_block_add_completions` false is apache/bookkeeper issue 1591 ("Deferred failure
  handling can cause data loss"): the writer goes on with its new ensemble and acknowledges the
  entries it writes there, while the metadata, and so recovery and every reader, name the old one.
  The version itself is not a variable: a write that is not the writer's own changes it only
  when recovery starts (the first `fence`), and recovery's own closing write is conditional on
  the version it wrote, which nobody else changes after it (a writer's update then fails), so it
  always succeeds. `ensembles` holds the writer's fragments after the first and `stored` how many
  of them the metadata holds. Recovery's own ensemble changes (while writing back) are not
  modelled: its write back waits for AQ live bookies in each written-back entry's write set.

The state looks like the other models' (`properties.snapshot.ClusterView`): `servers` holds the
bookies S1..Sn, then the writer (S(n+1), the leader of generation 1, whose HWM is its LAC) and
the recovery client (S(n+2), which becomes the leader of generation 2 when it closes the ledger,
its log the closed ledger, its HWM the last entry). Every entry is the writer's, so every entry
has generation 1; a bookie's log has a hole (generation 0) at an entry of other bookies' write
sets (`properties.ledger`). Closing the ledger is a truncation of every bookie to the closed
ledger: what lies beyond the last entry is never read again. A bookie's journal is durable: a
crash keeps its entries, its LAC and its fence.

With the default ensemble (every bookie, WQ = E, AQ = a majority) the catalogue's properties count
copies on a majority of all servers, as for the other systems; otherwise `properties.ledger`
counts them on AQ bookies of each entry's write set. Striping and spare bookies give bookies
places that symmetry would swap: for those ledgers the reduction is the identity (the counts
with and without symmetry are equal).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from hwm.model.actions import Action, BoundHit
from hwm.model.raft import RaftModel
from hwm.model.encoding import _reads, _server_bytes, canonical, encode, fingerprint_bytes
from hwm.model.state import FOLLOWER, LEADER, Config, Server
from hwm.model.zab import read_entries, read_server
from hwm.properties.acked import WITH_ACKED
from hwm.properties.ledger import HOLE, Ledger, ledger_properties
from hwm.properties.protocol import Protocol
from hwm.properties.quorum import majority
from hwm.properties.snapshot import describe_server, server_name

WRITER_GENERATION = 1
RECOVERY_GENERATION = 2


class BookKeeperState(NamedTuple):
    """Bookies, writer and recovery client (see the module docstring), plus bit sets over the
    bookies: `fenced`, `responded` (answered the fencing LAC read), `negatives` (answered "no such
    entry" for the entry recovery is reading); `acked`, the ghost set of acknowledged entries;
    `ensembles`, the writer's fragments after the ledger's first, as (first entry, ensemble), and
    `stored`, how many of them the ledger metadata holds (all, unless a writer that does not block
    its add completions failed to store a change)."""

    servers: tuple[Server, ...]
    reads: frozenset
    crashes: int
    channels: tuple
    fenced: int
    responded: int
    negatives: int
    acked: frozenset
    ensembles: tuple = ()
    stored: int = 0

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
        for j, (first, ensemble) in enumerate(self.ensembles):
            where = "in the ledger metadata" if j < self.stored else "the writer's only (its metadata update failed)"
            lines.append(f"ensemble from entry {first}: {','.join(server_name(b) for b in ensemble)} ({where})")
        return "\n".join(lines)


def _bits(mask: int) -> int:
    return bin(mask).count("1")


class BookKeeperModel(RaftModel):
    """The BookKeeper model. The raft family's flags do not apply (they keep their defaults)."""

    properties = WITH_ACKED
    STATE = BookKeeperState
    # Weakly fair (docs/liveness.md, "Fairness"): the writer keeps sending its entries to each bookie
    # of their write sets (`send_add`: PendingAddOp waits for every write-set response), and a crashed
    # bookie comes back. Recovery, fencing and ensemble changes are a client's choices, not fair.
    FAIR = ("send_add", "restart")

    def __init__(self, protocol: Protocol, config: Config):
        if config.network != "rpc":
            raise ValueError("the BookKeeper model runs on the rpc network only (each step is one whole exchange)")
        super().__init__(protocol, config)
        n = self.n
        ensemble_size = n if protocol.ensemble_size == "all" else protocol.ensemble_size
        write_quorum = ensemble_size if protocol.write_quorum == "ensemble" else protocol.write_quorum
        ack_quorum = majority(write_quorum) if protocol.ack_quorum == "majority" else protocol.ack_quorum
        if ensemble_size > n:
            raise ValueError(f"ensemble_size={ensemble_size} needs at least {ensemble_size} bookies, not servers={n}")
        if write_quorum > ensemble_size:
            raise ValueError(f"write_quorum={write_quorum} is larger than the ensemble (ensemble_size={ensemble_size})")
        if ack_quorum > write_quorum:
            raise ValueError(f"ack_quorum={ack_quorum} is larger than the write quorum (write_quorum={write_quorum})")
        self.ledger = Ledger(n, ensemble_size, write_quorum, ack_quorum)
        self.bookies = range(n)
        self.writer, self.recovery = n, n + 1
        self.ack_quorum = ack_quorum
        self.fencing_needed = ensemble_size - ack_quorum + 1  # E - AQ + 1 fencing responses
        self.missing_needed = write_quorum - ack_quorum + 1  # WQ - AQ + 1 "no such entry" answers
        self.reads_fence = protocol.bookkeeper_recovery_reads_fence
        self.block_add_completions = protocol.bookkeeper_block_add_completions
        # Bookies have places (striping, spares): symmetry is the identity (module docstring).
        self.striped = write_quorum < ensemble_size or ensemble_size < n
        self.symmetric = not self.striped
        self.symmetry_note = ("symmetry reduces nothing: striping and spare bookies give each bookie a place "
                              "(which entries it stores, whether it is in the ensemble)") if self.striped else None
        # Outside the default ledger, copies count on AQ bookies of each entry's write set.
        self.in_ledger_terms = (ensemble_size, write_quorum, ack_quorum) != (n, n, majority(n))
        if self.in_ledger_terms:
            self.properties = ledger_properties(self.ledger)
        self._effects = {name: getattr(self, "effect_" + name) for name in
                         ("add", "send_add", "fence", "recovery_read", "read", "crash", "restart", "change_ensemble")}

    # --------------------------------------------------------- the interface
    def initial_state(self) -> BookKeeperState:
        n = self.n
        bookie = Server(0, FOLLOWER, (), 0, True, ())
        writer = Server(WRITER_GENERATION, LEADER, (), 0, True, (0,) * (n + 2))
        recovery = Server(0, FOLLOWER, (), 0, True, ())
        return BookKeeperState((bookie,) * n + (writer, recovery), frozenset(), 0, (), 0, 0, 0, frozenset())

    def encode(self, s: BookKeeperState, symmetry: bool = True) -> bytes:
        keys, extra = self.server_keys(s), self._extra(s)
        return canonical(s, keys, extra) if symmetry and not self.striped else encode(s, None, keys, extra)

    def server_keys(self, s: BookKeeperState) -> list[bytes]:
        # Only bookies are interchangeable: the kind byte keeps the two clients in their places.
        keys = [bytes((0, s.fenced >> k & 1, s.responded >> k & 1, s.negatives >> k & 1)) + _server_bytes(b)
                for k, b in enumerate(s.servers[: self.n])]
        return keys + [b"\x01" + _server_bytes(s.servers[self.writer]),
                       b"\x02" + _server_bytes(s.servers[self.recovery])]

    def _extra(self, s: BookKeeperState):
        def extra(order) -> bytes:
            data = _reads(s.acked)
            if s.ensembles:  # names bookies: only ever with symmetry off (self.striped)
                flat = [len(s.ensembles), s.stored]
                for first, ensemble in s.ensembles:
                    flat += (first, *ensemble)
                data += bytes(flat)
            return data
        return extra

    def encode_in_order(self, s: BookKeeperState, order) -> bytes:
        return encode(s, order, self.server_keys(s), self._extra(s))

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
        acked = read_entries(it)
        ensembles, stored = (), 0
        count = next(it, None)
        if count is not None:
            stored = next(it)
            size = self.ledger.ensemble_size
            ensembles = tuple((next(it), tuple(next(it) for _ in range(size))) for _ in range(count))
        return BookKeeperState(tuple(servers), reads, crashes, (), fenced, responded, negatives, acked,
                               ensembles, stored)

    # ---------------------------------------------------------------- helpers
    def closed(self, s: BookKeeperState) -> bool:
        return s.servers[self.recovery].role == LEADER

    def recovering(self, s: BookKeeperState) -> bool:
        """Whether recovery has marked the ledger in recovery (with its first fencing LAC read)."""
        return bool(s.responded) or self.closed(s)

    def writer_fragments(self, s: BookKeeperState) -> tuple:
        return self.ledger.fragments(s.ensembles)

    def stored_fragments(self, s: BookKeeperState) -> tuple:
        return self.ledger.fragments(s.ensembles[: s.stored])

    def _bookie(self, s: BookKeeperState, b: int) -> str | None:
        if not 0 <= b < self.n:
            return f"{server_name(b)} is not a bookie"
        if not s.servers[b].alive:
            return f"{server_name(b)} is down"
        return None

    @staticmethod
    def _set(servers: tuple, k: int, server: Server) -> tuple:
        return servers[:k] + (server,) + servers[k + 1:]

    @staticmethod
    def _holds(log: tuple, entry: int) -> bool:
        return len(log) >= entry and log[entry - 1] != HOLE

    @staticmethod
    def _shaped(log: list, hwm: int) -> tuple:
        """A bookie's log without trailing holes, then with holes up to its LAC (one form per content)."""
        while log and log[-1] == HOLE:
            log.pop()
        return tuple(log) + (HOLE,) * (hwm - len(log))

    def _pending(self, s: BookKeeperState, b: int) -> list[int]:
        """The entries of the writer's current fragment in `b`'s write sets that `b` does not store."""
        writer, fragments = s.servers[self.writer], self.writer_fragments(s)
        log = s.servers[b].log
        return [e for e in range(fragments[-1][0], len(writer.log) + 1)
                if b in self.ledger.write_set(fragments, e) and not self._holds(log, e)]

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
        if b not in self.writer_fragments(s)[-1][1]:
            return f"{server_name(b)} is not in the writer's current ensemble"
        if not self._pending(s, b) and s.servers[b].hwm >= writer.hwm:
            return f"{server_name(b)} has every entry and the LAC the writer would send"
        return None

    def effect_send_add(self, s: BookKeeperState, b: int) -> BookKeeperState:
        writer, bookie = s.servers[self.writer], s.servers[b]
        if s.fenced >> b & 1:
            # The bookie refuses the add: the writer learns the ledger is fenced and stops.
            writer = writer._replace(role=FOLLOWER, match=())
            return s._replace(servers=self._set(s.servers, self.writer, writer))
        # The adds carry the writer's LAC; the bookie stores every entry of its write sets it lacks.
        log = list(bookie.log) + [HOLE] * (len(writer.log) - len(bookie.log))
        for e in self._pending(s, b):
            log[e - 1] = WRITER_GENERATION
        hwm = max(bookie.hwm, writer.hwm)
        bookie = Server(WRITER_GENERATION, FOLLOWER, self._shaped(log, hwm), hwm, True, ())
        match = list(writer.match)
        match[b] = len(writer.log)
        lac = self.last_add_confirmed(s, match)
        writer = writer._replace(match=tuple(match), hwm=lac)
        servers = self._set(self._set(s.servers, b, bookie), self.writer, writer)
        acked = s.acked
        if lac > len(s.acked):  # the add callbacks complete in order up to the LAC
            acked = frozenset((i, WRITER_GENERATION) for i in range(1, lac + 1)) | acked
        return s._replace(servers=servers, acked=acked)

    def last_add_confirmed(self, s: BookKeeperState, match: list[int]) -> int:
        """The writer's LAC: from its last one, each next entry that AQ bookies of its write set
        acknowledged (`match[b]`: b acknowledged every entry of its write sets up to there)."""
        writer, fragments, ledger = s.servers[self.writer], self.writer_fragments(s), self.ledger
        lac = writer.hwm
        while lac < len(writer.log) and sum(
                1 for b in ledger.write_set(fragments, lac + 1) if match[b] > lac) >= ledger.ack_quorum:
            lac += 1
        return lac

    def guard_change_ensemble(self, s: BookKeeperState, b: int) -> str | None:
        writer = s.servers[self.writer]
        if writer.role != LEADER:
            return "the writer has been fenced out: the ledger is being recovered"
        if not 0 <= b < self.n:
            return f"{server_name(b)} is not a bookie"
        ensemble = self.writer_fragments(s)[-1][1]
        if b not in ensemble:
            return f"{server_name(b)} is not in the writer's current ensemble"
        if s.servers[b].alive:
            return f"{server_name(b)} is up: no write to it has failed"
        if not [e for e in self._pending(s, b) if e > writer.hwm]:
            return f"the writer has no entry pending on {server_name(b)}: no write to it has failed"
        if self._replacement(s, ensemble) is None:
            return "no live bookie outside the ensemble can replace it"
        return None

    def _replacement(self, s: BookKeeperState, ensemble: tuple) -> int | None:
        # BookKeeper's placement policy picks any; the model takes the first, to stay small.
        return next((k for k in self.bookies if k not in ensemble and s.servers[k].alive), None)

    def effect_change_ensemble(self, s: BookKeeperState, b: int) -> BookKeeperState:
        writer = s.servers[self.writer]
        if self.recovering(s) and self.block_add_completions:
            # The conditional metadata update fails (recovery changed the version); the writer
            # re-reads the metadata, finds the ledger in recovery, and stops.
            writer = writer._replace(role=FOLLOWER, match=())
            return s._replace(servers=self._set(s.servers, self.writer, writer))
        ensemble = self.writer_fragments(s)[-1][1]
        replacement = self._replacement(s, ensemble)
        new = tuple(replacement if k == b else k for k in ensemble)
        first = writer.hwm + 1  # the first unconfirmed entry: the replaced bookie's acks from there do not count
        match = list(writer.match)
        match[b] = min(match[b], writer.hwm)
        match[replacement] = writer.hwm
        ensembles = s.ensembles + ((first, new),)
        # Issue 1591: without blocking add completions, a failed update leaves the change the writer's only.
        stored = s.stored if self.recovering(s) else len(ensembles)
        servers = self._set(s.servers, self.writer, writer._replace(match=tuple(match)))
        return s._replace(servers=servers, ensembles=ensembles, stored=stored)

    # ------------------------------------------------------------ the reader
    def guard_read(self, s: BookKeeperState, r: int) -> str | None:
        if not 0 <= r < self.n:
            return f"{server_name(r)} is not a bookie"
        if not self.striped:
            return super().guard_read(s, r)
        server = s.servers[r]
        if not server.alive:
            return f"{server_name(r)} is down"
        readable = self._readable(server)
        if not readable:
            return f"{server_name(r)} {self.NOTHING_TO_READ}"
        if readable <= s.reads:
            return f"clients have already read everything {server_name(r)} can serve"
        return None

    @staticmethod
    def _readable(server: Server) -> set:
        return {(i + 1, g) for i, g in enumerate(server.log[: server.hwm]) if g != HOLE}

    def effect_read(self, s: BookKeeperState, r: int) -> BookKeeperState:
        if not self.striped:
            return s._replace(reads=super().effect_read(s, r).reads)
        return s._replace(reads=s.reads | self._readable(s.servers[r]))

    # ----------------------------------------------------------- recovery
    def guard_fence(self, s: BookKeeperState, b: int) -> str | None:
        if self.closed(s):
            return "the ledger is closed"
        reason = self._bookie(s, b)
        if reason:
            return reason
        if b not in self.stored_fragments(s)[-1][1]:
            return f"{server_name(b)} is not in the ensemble of the ledger's last fragment"
        if s.responded >> b & 1:
            return f"{server_name(b)} has already answered the fencing LAC read"
        return None

    def effect_fence(self, s: BookKeeperState, b: int) -> BookKeeperState:
        # The bookie is fenced and answers with its LAC; recovery starts after the highest one,
        # and never before the last fragment (the earlier ones are confirmed: pull request 2654).
        bookie, recovery = s.servers[b], s.servers[self.recovery]
        start = max(bookie.hwm, self.stored_fragments(s)[-1][0] - 1)
        known = recovery.log
        if start > len(known):
            known = (WRITER_GENERATION,) * start
        servers = self._set(s.servers, self.recovery, recovery._replace(log=known))
        return s._replace(servers=servers, fenced=s.fenced | 1 << b, responded=s.responded | 1 << b)

    def guard_recovery_read(self, s: BookKeeperState, b: int) -> str | None:
        if self.closed(s):
            return "the ledger is closed"
        if _bits(s.responded) < self.fencing_needed:
            return (f"fencing has not completed: {_bits(s.responded)} of {self.ledger.ensemble_size} bookies "
                    f"answered the fencing LAC read (recovery reads start after {self.fencing_needed})")
        reason = self._bookie(s, b)
        if reason:
            return reason
        index = len(s.servers[self.recovery].log) + 1
        fragments = self.stored_fragments(s)
        if b not in self.ledger.write_set(fragments, index):
            return f"{server_name(b)} is not in the write set of entry {index}"
        if s.negatives >> b & 1:
            return f"{server_name(b)} has already answered that it lacks entry {index}"
        if not self._holds(s.servers[b].log, index) and _bits(s.negatives) + 1 >= self.missing_needed:
            return self._unwritable(s, fragments)  # this answer closes the ledger
        return None

    def recovery_start(self, s: BookKeeperState) -> int:
        """The entry recovery read from: the highest LAC the fencing answers reported, and never
        before the last fragment (a fenced bookie's LAC no longer moves, so the state keeps it)."""
        fragments = self.stored_fragments(s)
        return max([s.servers[k].hwm for k in self.bookies if s.responded >> k & 1] + [fragments[-1][0] - 1])

    def _unwritable(self, s: BookKeeperState, fragments: tuple) -> str | None:
        """Why recovery cannot close the ledger now, or None. It closes only once the entries it read
        (after `recovery_start`) are written back to an ack quorum of each one's write set
        (LedgerRecoveryOp re-adds them and closes on their acknowledgements); a bookie that is down
        cannot acknowledge, and recovery's own ensemble changes are not modelled."""
        for e in range(self.recovery_start(s) + 1, len(s.servers[self.recovery].log) + 1):
            live = sum(1 for k in self.ledger.write_set(fragments, e) if s.servers[k].alive)
            if live < self.ack_quorum:
                return (f"recovery cannot write entry {e} back to an ack quorum: {live} of its write set "
                        f"are up (it needs {self.ack_quorum}; recovery's own ensemble changes are not modelled)")
        return None

    def effect_recovery_read(self, s: BookKeeperState, b: int) -> BookKeeperState:
        recovery, bookie = s.servers[self.recovery], s.servers[b]
        index = len(recovery.log) + 1
        fenced = s.fenced | (1 << b if self.reads_fence else 0)
        if self._holds(bookie.log, index):
            # Found: recovery will write it back; read the next one.
            recovery = recovery._replace(log=recovery.log + (bookie.log[index - 1],))
            return s._replace(servers=self._set(s.servers, self.recovery, recovery), fenced=fenced, negatives=0)
        negatives = s.negatives | 1 << b
        if _bits(negatives) < self.missing_needed:
            return s._replace(fenced=fenced, negatives=negatives)
        # Entry `index` does not exist: close the ledger at index - 1 and write the last fragment's
        # entries back to their write sets; nothing beyond the last entry is part of the ledger any more.
        ledger = recovery.log
        end = len(ledger)
        fragments = self.stored_fragments(s)
        members = {k for _, ensemble in fragments for k in ensemble}
        servers = list(s.servers)
        for k in self.bookies:
            old = servers[k]
            log = list(old.log[:end])
            if old.alive and k in members:
                log += [HOLE] * (end - len(log))
                for e in range(fragments[-1][0], end + 1):  # the last fragment's entries: earlier ones are immutable
                    if k in self.ledger.write_set(fragments, e):
                        log[e - 1] = WRITER_GENERATION
                servers[k] = old._replace(log=self._shaped(log, end), hwm=end)
            else:
                hwm = min(old.hwm, end)
                servers[k] = old._replace(log=self._shaped(log, hwm), hwm=hwm)
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
    def bookie_actions(self) -> tuple[str, ...]:
        """The actions per bookie, in enumeration order (ensemble changes only where spares exist)."""
        names = ("send_add", "fence", "recovery_read", "read", "crash", "restart")
        return names + (("change_ensemble",) if self.ledger.ensemble_size < self.n else ())

    def action_table(self) -> list[Action]:
        return [("add",)] + [(name, b) for name in self.bookie_actions() for b in self.bookies]

    def actions(self, s: BookKeeperState, bounds_hit: set | None = None) -> Iterator[Action]:
        hit = bounds_hit if bounds_hit is not None else set()
        reason = self.guard_add(s)
        if reason is None:
            yield ("add",)
        elif isinstance(reason, BoundHit):
            hit.add(reason.bound)
        for name in self.bookie_actions():
            for b in self.bookies:
                reason = self.why_not(s, (name, b))
                if reason is None:
                    yield (name, b)
                elif isinstance(reason, BoundHit):
                    hit.add(reason.bound)


__all__ = ["BookKeeperModel", "BookKeeperState"]
