"""BookKeeper's ledger in the simulated cluster: every action of model/bookkeeper.py on real bookies.

`BookKeeperSimCluster` is the `SimCluster` (`build_cluster(protocol, config)` builds one for a
bookkeeper protocol) of `impl.bookkeeper`: bookies S1..Sn (each on a `BookieStorage` over a
`MemoryStorage`), the writer S(n+1) and the recovery client S(n+2), the servers of the model's state
in the same places. Every message crosses the wire through the real codec; a message to a bookie
that is down is lost. The model's actions:

- `add`: the writer's client adds an entry (its value, or `e1`, `e2` ...);
- `send_add(b)`: the writer sends bookie b what it lacks with its LAC, and steps the answers (a
  bookie whose journal was cut by a close answers where it ends, and the writer sends from there);
- `fence(b)`: the recovery client's fencing LAC read of b, and b's answer;
- `recovery_read(b)`: the recovery client reads its next entry from b; when the answer ends the
  ledger, its recovery adds go to every live bookie, and once an ack quorum of each entry's write
  set acknowledged them the close goes into the ledger's metadata (`closed_at`, which a bookie that
  was down reads when it restarts) and to every live bookie. With fewer acknowledgements the step
  answers why recovery waits (the model refuses it): the ledger stays open, and a bookie that
  restarts gets the recovery adds again (recovery retries), so the close comes with the restart
  that completes an ack quorum;
- `read(b)`: real client reads of b's entries up to its LAC, each kept in `history`;
- `crash(b)`, `restart(b)`: a bookie's process dies (its journal, LAC and fence are durable) and
  comes back from what its storage recovers;
- `change_ensemble(b)`: the writer replaces b (down, a write to it failed) by the first live bookie
  outside its current ensemble, the model's choice, with a conditional write of the ledger metadata
  the writer and the recovery client share (`impl.bookkeeper.LedgerMetadata`).

The ledger's parameters are the protocol's (`ensemble_size`, `write_quorum`, `ack_quorum`,
`bookkeeper_block_add_completions`). When recovery closes the ledger, a live bookie that no fragment
of the metadata names is told the ledger's end as a bookie that was down is at its restart (the
model's close truncates every bookie to the closed ledger).

`snapshot()` carries what the model's state carries beyond its servers, in the model's own forms:
`acked`, the entries the writer acknowledged; the fenced bookies, those that answered the fencing LAC
read and those that answered "no such entry", as bit sets over the bookies' positions; the writer's
fragments as (first entry, bookie positions). The bookies' names become positions there, once;
`view_of` takes the same fields from a snapshot or a model state (`BookKeeperView`, for the
conformance machine), so a replay's rows on the model and on the implementation hold the same types.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from hwm.bridge.simcluster.cluster import Read, SimCluster
from hwm.bridge.simcluster.network import over_the_wire
from hwm.impl.bookkeeper import (
    Bookie,
    BookieStorage,
    LedgerFenced,
    LedgerMetadata,
    RecoveryClient,
    Writer,
    down_snapshot,
    ledger_options,
    persist,
)
from hwm.impl.core import NotCommitted, Replica, ReplicaError
from hwm.impl.messages import CloseLedger, RecoveryAdd
from hwm.impl.storage import MemoryStorage
from hwm.model.actions import from_step
from hwm.model.state import Config
from hwm.properties.protocol import Protocol
from hwm.properties.snapshot import ServerSnapshot, server_name
from hwm.properties.trace import Step

__all__ = ["BookKeeperSimCluster", "BookKeeperSnapshot", "BookKeeperView", "view_of"]

ACTIONS = ("add", "send_add", "fence", "recovery_read", "read", "crash", "restart", "change_ensemble")


class BookKeeperSnapshot(NamedTuple):
    """A Snapshot with what `model.bookkeeper.BookKeeperState` tracks beyond it, in the same forms:
    the acknowledged entries, the writer's fragments after the first (`ensembles`, bookies by
    position) of which the ledger metadata holds the first `stored` (properties.ledger reads them),
    and bit sets over the bookies (bit k: bookie k): `fenced`, `responded` (answered the fencing LAC
    read), `negatives` (answered "no such entry" for the entry recovery reads). Findings name the
    clients as the model's do."""

    servers: tuple[ServerSnapshot, ...]
    reads: frozenset
    acked: frozenset
    ensembles: tuple = ()
    stored: int = 0
    fenced: int = 0
    responded: int = 0
    negatives: int = 0

    def part(self, k: int) -> str | None:
        n = len(self.servers) - 2
        return None if k < n else "the writer" if k == n else "the recovery client"

    def label(self, k: int) -> str:
        """For a step table, as the model's: bookies by name, then the two clients."""
        n = len(self.servers) - 2
        return server_name(k) + ("" if k < n else " writer" if k == n else " recovery")

    def note(self, k: int) -> str:
        return " fenced" if self.fenced >> k & 1 else ""

    def members(self) -> str:
        return f"{len(self.servers)} servers ({len(self.servers) - 2} bookies, the writer and the recovery client)"


class BookKeeperView(NamedTuple):
    """What the model tracks beyond its servers and reads, in the model state's forms: fenced bookies,
    the bookies that answered the fencing LAC read, those that answered "no such entry" for the entry
    being read (bit sets over the bookies' positions), the acknowledged entries, the writer's
    fragments after the first as (first entry, bookie positions), and how many of them the ledger
    metadata holds."""

    fenced: int
    responded: int
    negatives: int
    acked: frozenset
    ensembles: tuple = ()
    stored: int = 0

    def shown(self, field: str) -> str:
        """A field as a person reads it: bookies by name, entries sorted."""
        value = getattr(self, field)
        if field in ("fenced", "responded", "negatives"):
            return "{" + ",".join(server_name(k) for k in range(value.bit_length()) if value >> k & 1) + "}"
        if field == "ensembles":
            return " ".join(f"{first}:{','.join(map(server_name, bookies))}" for first, bookies in value) or "none"
        return str(sorted(value)) if isinstance(value, frozenset) else str(value)


def view_of(state) -> BookKeeperView:
    """The view of a `model.bookkeeper.BookKeeperState` or of a `BookKeeperSnapshot`: the same fields."""
    return BookKeeperView(state.fenced, state.responded, state.negatives, frozenset(state.acked),
                          tuple(state.ensembles), state.stored)


class BookKeeperSimCluster(SimCluster):
    """Bookies S1..Sn, the writer and the recovery client, on the rpc network."""

    system = "bookkeeper"

    def __init__(self, protocol: Protocol, config: Config, *, replica_factory=None,
                 storages: Mapping[str, MemoryStorage] | None = None, **options):
        """`replica_factory`: the bookie class (a test may pass a broken one); `options` go to the
        writer and the recovery client over the protocol's ledger parameters (ack_quorum,
        write_quorum, ensemble_size)."""
        self._check_protocol(protocol)
        if config.network != "rpc":
            raise ValueError("BookKeeper's bookies run on the rpc network only (network=rpc): each step is one "
                             "whole exchange")
        self.protocol, self.config = protocol, config
        n = config.servers
        self.names = [server_name(k) for k in range(n + 2)]
        self.bookie_names = self.names[:n]
        self.writer_name, self.recovery_name = self.names[n], self.names[n + 1]
        self.bookie_class = Bookie if replica_factory in (None, Replica) else replica_factory
        self.replica_factory = self.bookie_class
        self.storages: dict[str, BookieStorage] = {b: BookieStorage(MemoryStorage()) for b in self.bookie_names}
        self.storages.update(storages or {})
        ledger = ledger_options(protocol)
        ledger.update(options)
        size = len(self.bookie_names) if ledger["ensemble_size"] is None else ledger["ensemble_size"]
        self.metadata = LedgerMetadata(self.bookie_names[:size])
        self.writer = Writer(self.writer_name, self.bookie_names, metadata=self.metadata,
                             block_add_completions=protocol.bookkeeper_block_add_completions, **ledger)
        self.recovery = RecoveryClient(self.recovery_name, self.bookie_names, protocol, metadata=self.metadata,
                                       **ledger)
        self.closed_at: int | None = None  # the ledger's metadata: its end, once closed
        self.replicas: dict[str, Bookie | None] = {}
        self._down: dict = {}
        self.network = None
        self.history: list[Read] = []
        self.acked: set[tuple[int, int]] = set()
        self.rpc_messages = 0
        self.recorder = None
        self._adds = 0
        for name in self.bookie_names:
            self.start(name)

    # ------------------------------------------------------------------ views
    def snapshot(self) -> BookKeeperSnapshot:
        servers = [replica.snapshot() if replica is not None else down_snapshot(self._down[name], self.closed_at)
                   for name, replica in self.replicas.items()]
        servers += [self.writer.snapshot(), self.recovery.snapshot()]
        # The bookies' names become the model's positions here, once.
        ensembles = tuple((first, tuple(self.bookie_names.index(b) for b in ensemble))
                          for first, ensemble in self.writer.fragments[1:])
        fenced = [b for b, r in self.replicas.items() if (r.fenced if r is not None else self._down[b].fenced)]
        return BookKeeperSnapshot(tuple(servers), self.reads, frozenset(self.acked), ensembles,
                                  len(self.metadata.fragments) - 1, self._bits(fenced),
                                  self._bits(self.recovery.responded), self._bits(self.recovery.negatives))

    def _bits(self, bookies) -> int:
        """Bookies by name as the model's bit set over their positions."""
        return sum(1 << self.bookie_names.index(b) for b in set(bookies))

    def bookkeeper_view(self) -> BookKeeperView:
        return view_of(self.snapshot())

    def describe(self):
        for name in self.bookie_names:
            replica = self.replicas[name]
            yield repr(replica) if replica is not None else f"{name} down {self._down[name]}"
        yield repr(self.writer)
        yield repr(self.recovery)

    # ------------------------------------------------------------------ the model's actions
    def apply_step(self, step: Step) -> str | None:
        return self.apply(from_step(step), step.args.get("value"))

    def apply(self, action: tuple, value=None) -> str | None:
        kind, *args = action
        if kind not in ACTIONS:
            return f"{kind} is not an action of BookKeeper's ledger (its actions: {', '.join(ACTIONS)})"
        if kind == "add":
            return self.add(value)
        name = self.names[args[0]]
        if name not in self.replicas:
            return f"{name} is not a bookie"
        return getattr(self, kind)(name)

    def add(self, value: str | int | bytes | None = None) -> str | None:
        self._adds += 1
        if value is None:
            value = f"e{self._adds}"
        try:
            self.writer.add(value if isinstance(value, bytes) else str(value).encode())
        except LedgerFenced as refused:
            return str(refused)
        return None

    def send_add(self, bookie: str) -> str | None:
        if self.replicas[bookie] is None:
            return f"{bookie} is down"
        try:
            self.writer.send_add(bookie)
        except ReplicaError as refused:
            return str(refused)
        self._pump(self.writer, bookie)
        return None

    def fence(self, bookie: str) -> str | None:
        return self._recovery(bookie, self.recovery.fence)

    def recovery_read(self, bookie: str) -> str | None:
        return self._recovery(bookie, self.recovery.recovery_read) or self.recovery.waits()

    def _recovery(self, bookie: str, request) -> str | None:
        if self.replicas[bookie] is None:
            return f"{bookie} is down"
        try:
            request(bookie)
        except ReplicaError as refused:
            return str(refused)
        self._pump(self.recovery, bookie)
        return None

    def read(self, bookie: str) -> str | None:
        """Real reads of entries 1..LAC, each kept in `history`."""
        if self.replicas[bookie] is None:
            return f"{bookie} is down"
        replica = self.replicas[bookie]
        served = []
        refused = f"{bookie} has no entry at or below its last-add-confirmed {replica.lac}"
        for entry in range(1, max(replica.lac, 1) + 1):
            if not replica.holds(entry) and entry <= replica.lac:
                continue  # another write set's entry
            try:
                generation, value = replica.read(entry)
            except NotCommitted as why:
                refused = str(why)
                break
            served.append(Read(bookie, entry, generation, value))
        if not served:
            return refused
        self.history += served
        return None

    def crash(self, bookie: str) -> str | None:
        if self.replicas[bookie] is None:
            return f"{bookie} is already down"
        storage = self.storages[bookie]
        storage.crash()
        self._down[bookie] = storage.load()  # what a restart will recover
        storage.crash()
        self.replicas[bookie] = None
        return None

    def restart(self, bookie: str) -> str | None:
        if self.replicas[bookie] is not None:
            return f"{bookie} is not down"
        self.start(bookie)
        if self.recovery.waits() is not None and bookie in self.recovery.members() \
                and bookie not in self.recovery.added:
            self.recovery.recovery_add(bookie)  # recovery retries the adds the bookie missed
            self._pump(self.recovery, bookie)
        return None

    def change_ensemble(self, bookie: str) -> str | None:
        if self.replicas[bookie] is not None:
            return f"{bookie} is up: no write to it has failed"
        ensemble = self.writer.ensemble
        replacement = next((b for b in self.bookie_names if b not in ensemble and self.replicas[b] is not None), None)
        if replacement is None:
            return "no live bookie outside the ensemble can replace it"
        try:
            self.writer.change_ensemble(bookie, replacement)
        except ReplicaError as refused:
            return str(refused)
        return None

    # ------------------------------------------------------------------ plumbing
    def start(self, name: str) -> Bookie:
        """A bookie from what its storage recovers, told the ledger's end if it is closed."""
        self._down.pop(name, None)
        bookie = self.bookie_class(name, (self.writer_name, self.recovery_name), self.storages[name].load(),
                                   closed_at=self.closed_at)
        self.replicas[name] = bookie
        persist(bookie.ready(), self.storages[name])  # a trim to the closed ledger, if any
        return bookie

    def _pump(self, client, bookie: str) -> None:
        """Deliver `client`'s requests to `bookie` and the answers back until both are quiet;
        recovery's adds and its close go to every live bookie, and the close into the ledger's
        metadata. Anything else is dropped."""
        for _ in range(8):
            out = client.ready()
            for acknowledged in out.acknowledged:
                self.acked.add(acknowledged)
            if out.closed is not None:
                self.closed_at = len(out.closed)
                for name, replica in self.replicas.items():
                    if replica is not None and name not in self.recovery.members():
                        replica.learn_closed(self.closed_at)
                        persist(replica.ready(), self.storages[name])
            answers = []
            for to, message in out.messages:
                target = self.replicas.get(to)
                if target is None or (to != bookie and not isinstance(message, (RecoveryAdd, CloseLedger))):
                    continue  # lost: the bookie is down, or the model's step does not send it
                target.step(self._wire(message))
                ready = target.ready()
                persist(ready, self.storages[to])  # durable before it answers
                answers += [answer for destination, answer in ready.messages if destination == client.server_id]
            if not answers:
                return
            for answer in answers:
                client.step(self._wire(answer))
        raise RuntimeError(f"the exchange between {client.server_id} and {bookie} did not settle")

    def _wire(self, message):
        self.rpc_messages += 1
        return over_the_wire(message)
