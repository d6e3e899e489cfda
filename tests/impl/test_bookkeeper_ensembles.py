"""BookKeeper's striped ledgers and ensemble changes on the implementation (impl/bookkeeper.py), sans-IO.

Four bookies on disk (S1..S4; the first ensemble is S1, S2, S3 and S4 is a spare), a write quorum
of 2 and an ack quorum of 2: entry e goes to the bookies at positions e-1 and e of the ensemble.
The writer (S5) and the recovery client (S6) share the ledger's metadata record.
"""

from __future__ import annotations

import pytest

from hwm.impl import codec
from hwm.impl.bookkeeper import (
    HOLE,
    BadVersion,
    Bookie,
    BookieStorage,
    LedgerMetadata,
    RecoveryClient,
    Writer,
    persist,
)
from hwm.impl.core import NotCommitted, ReplicaError
from hwm.impl.messages import CloseLedger, RecoveryAdd
from hwm.impl.storage import DiskStorage
from hwm.properties.protocol import BOOKKEEPER

BOOKIES = ("S1", "S2", "S3", "S4")
CLIENTS = ("S5", "S6")


# Recovery's adds and its close go to every bookie of the ledger, not only the one a step asks.
RECOVERY_WRITES = (CloseLedger, RecoveryAdd)


def wire(message):
    return codec.decode_frame(codec.encode(message))


class Ledger:
    def __init__(self, tmp_path, *, block_add_completions=True):
        self.tmp_path = tmp_path
        self.storages = {b: BookieStorage(DiskStorage(tmp_path / b), tmp_path / b) for b in BOOKIES}
        self.bookies = {b: Bookie(b, CLIENTS, self.storages[b].load()) for b in BOOKIES}
        self.metadata = LedgerMetadata(BOOKIES[:3])
        quorums = dict(ensemble_size=3, write_quorum=2, ack_quorum=2, metadata=self.metadata)
        self.writer = Writer("S5", BOOKIES, block_add_completions=block_add_completions, **quorums)
        self.recovery = RecoveryClient("S6", BOOKIES, BOOKKEEPER, **quorums)
        self.acked = []
        self.down = set()

    def exchange(self, client, bookie: str) -> None:
        for _ in range(4):
            out = client.ready()
            self.acked += out.acknowledged
            answers = []
            for to, message in out.messages:
                if to in self.down or (to != bookie and type(message) not in RECOVERY_WRITES):
                    continue
                target = self.bookies[to]
                target.step(wire(message))
                ready = target.ready()
                persist(ready, self.storages[to])
                answers += [a for dest, a in ready.messages if dest == client.server_id]
            if not answers:
                return
            for answer in answers:
                client.step(wire(answer))

    def send_add(self, bookie: str) -> None:
        self.writer.send_add(bookie)
        self.exchange(self.writer, bookie)

    def journal(self, bookie: str) -> list:
        """The bookie's journal as its disk holds it (the bookie restarts from it)."""
        self.storages[bookie].crash()
        self.storages[bookie] = storage = BookieStorage(DiskStorage(self.tmp_path / bookie), self.tmp_path / bookie)
        durable = storage.load()
        self.bookies[bookie] = Bookie(bookie, CLIENTS, durable)
        return [g for g, _ in durable.log]


def test_entries_are_striped_over_their_write_sets_and_the_lac_counts_each_write_set(tmp_path):
    ledger = Ledger(tmp_path)
    for value in (b"a", b"b", b"c"):
        ledger.writer.add(value)
    assert ledger.writer.pending("S1") == [1, 3] and ledger.writer.pending("S2") == [1, 2]
    ledger.send_add("S1")
    ledger.send_add("S2")
    # Entry 1 is on S1 and S2, its write set; entry 2 only on S2 of S2, S3: the LAC stops at 1.
    assert ledger.writer.lac == 1 and ledger.acked == [(1, 1)]
    assert ledger.journal("S1") == [1, 0, 1] and ledger.journal("S2") == [1, 1, 0]  # holes on disk
    ledger.send_add("S3")
    assert ledger.writer.lac == 3
    ledger.send_add("S1")  # the explicit LAC
    bookie = ledger.bookies["S1"]
    assert bookie.snapshot().log == (1, 0, 1) and bookie.read(3) == (1, b"c")
    with pytest.raises(NotCommitted, match="entry 2 is not in S1's write sets"):
        bookie.read(2)
    # Recovery reads wait for E - AQ + 1 = 2 fencing answers.
    with pytest.raises(ReplicaError, match="fencing has not completed"):
        ledger.recovery.recovery_read("S1")
    # A restart recovers the holes from disk.
    ledger.journal("S1")
    assert ledger.bookies["S1"].snapshot() == bookie.snapshot()


def test_an_ensemble_change_replaces_a_failed_bookie_from_the_first_unconfirmed_entry(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.send_add("S1")
    ledger.send_add("S2")
    ledger.writer.add(b"b")  # entry 2: S2, S3
    ledger.send_add("S2")
    ledger.down.add("S3")
    ledger.writer.change_ensemble("S3", "S4")
    assert ledger.writer.ensemble == ("S1", "S2", "S4")
    assert ledger.metadata.fragments == ((1, ("S1", "S2", "S3")), (2, ("S1", "S2", "S4")))
    assert ledger.metadata.version == 2 and ledger.writer.metadata_version == 2
    with pytest.raises(ReplicaError, match="S3 is not in the writer's current ensemble"):
        ledger.writer.send_add("S3")
    ledger.send_add("S4")  # entry 2's write set is now S2, S4
    assert ledger.writer.lac == 2 and ledger.journal("S4") == [0, 1]


def test_recovery_marks_the_metadata_so_a_blocking_writer_stops_at_its_change(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.send_add("S1")
    ledger.recovery.fence("S1")
    ledger.exchange(ledger.recovery, "S1")
    assert ledger.metadata.in_recovery and ledger.metadata.version == 2
    ledger.down.add("S2")
    ledger.writer.change_ensemble("S2", "S4")
    assert ledger.writer.fenced_out and ledger.metadata.fragments == ((1, ("S1", "S2", "S3")),)
    with pytest.raises(BadVersion, match="not 1 \\(the ledger is in recovery\\)"):
        ledger.metadata.change_ensemble(1, 1, ("S1", "S4", "S3"))


def test_without_blocking_the_writer_acknowledges_on_an_ensemble_the_metadata_never_names(tmp_path):
    # apache/bookkeeper issue 1591 with a ledger of E = 3, WQ = AQ = 2.
    ledger = Ledger(tmp_path, block_add_completions=False)
    ledger.writer.add(b"a")
    ledger.send_add("S1")
    ledger.recovery.fence("S1")
    ledger.exchange(ledger.recovery, "S1")
    ledger.down.add("S2")
    ledger.writer.change_ensemble("S2", "S4")
    assert not ledger.writer.fenced_out and ledger.writer.ensemble == ("S1", "S4", "S3")
    ledger.send_add("S4")
    assert ledger.acked == [(1, 1)]  # S1 and S4: an ack quorum of the writer's write set only
    # Recovery reads entry 1 from the write set the metadata names: S2 (back, unfenced) lacks it.
    ledger.recovery.fence("S3")
    ledger.exchange(ledger.recovery, "S3")
    ledger.down.discard("S2")
    ledger.recovery.recovery_read("S2")
    ledger.exchange(ledger.recovery, "S2")
    assert ledger.recovery.closed == () and ledger.metadata.closed_at == 0  # the acknowledged entry is lost


def test_the_close_writes_the_last_fragment_back_to_each_write_set(tmp_path):
    ledger = Ledger(tmp_path)
    for value in (b"a", b"b"):
        ledger.writer.add(value)
    ledger.send_add("S2")  # entries 1 and 2 (S2 is in both write sets)
    for bookie in ("S1", "S2"):
        ledger.recovery.fence(bookie)
        ledger.exchange(ledger.recovery, bookie)
    for bookie in ("S2", "S2"):  # entry 1 found on S2, then entry 2
        ledger.recovery.recovery_read(bookie)
        ledger.exchange(ledger.recovery, bookie)
    assert ledger.recovery.reading == 3
    ledger.recovery.recovery_read("S3")  # WQ - AQ + 1 = 1 "no such entry" of entry 3's write set
    ledger.exchange(ledger.recovery, "S3")
    closed = ledger.recovery.closed
    assert closed == ((1, b"a"), (1, b"b")) and ledger.metadata.closed_at == 2 and ledger.metadata.version == 3
    assert ledger.recovery.write_back("S3") == (HOLE, (1, b"b"))
    # Each bookie now holds its write sets' entries of the closed ledger, with the last as its LAC.
    assert [ledger.journal(b) for b in ("S1", "S2", "S3")] == [[1, 0], [1, 1], [0, 1]]
    assert all(ledger.bookies[b].lac == 2 for b in ("S1", "S2", "S3"))
    assert ledger.journal("S4") == []  # the spare holds no fragment
    with pytest.raises(BadVersion):
        ledger.metadata.close(2, 5)  # a close on a stale version
