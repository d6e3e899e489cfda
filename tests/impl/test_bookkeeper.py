"""BookKeeper's bookie, writer and recovery client (impl/bookkeeper.py), sans-IO, on real storage.

Each test drives the three parts by hand, through the real codec, with the bookies persisting to a
`DiskStorage` in a temporary directory (or a `MemoryStorage`) before their answers are handed on.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hwm.impl import codec
from hwm.impl.bookkeeper import (
    BOOKIE_STATE_FILE,
    Bookie,
    BookieStorage,
    LedgerFenced,
    LedgerQuorums,
    RecoveryClient,
    Writer,
    persist,
)
from hwm.impl.core import NotCommitted, ReplicaError
from hwm.impl.messages import BK_FENCED, AddEntries, AddReply, CloseLedger, ReadEntry, ReadLac, RecoveryAdd
from hwm.impl.storage import DiskStorage, MemoryStorage
from hwm.impl.wal import StorageError
from hwm.properties.protocol import BOOKKEEPER, RAFT

BOOKIES = ("S1", "S2", "S3")
CLIENTS = ("S4", "S5")
WITHOUT_FENCING_READS = replace(BOOKKEEPER, bookkeeper_recovery_reads_fence=False)


# Recovery's adds and its close go to every bookie of the ledger, not only the one a step asks.
RECOVERY_WRITES = (CloseLedger, RecoveryAdd)


def wire(message):
    return codec.decode_frame(codec.encode(message))


class Ledger:
    """Three bookies on disk, a writer and a recovery client; `exchange` runs one request and its answers."""

    def __init__(self, tmp_path, protocol=BOOKKEEPER):
        self.tmp_path = tmp_path
        self.storages = {b: BookieStorage(DiskStorage(tmp_path / b), tmp_path / b) for b in BOOKIES}
        self.bookies = {b: Bookie(b, CLIENTS, self.storages[b].load()) for b in BOOKIES}
        self.writer = Writer("S4", BOOKIES)
        self.recovery = RecoveryClient("S5", BOOKIES, protocol)
        self.acked = []
        self.closes = []  # each closed ledger a client's ready() handed out

    def exchange(self, client, bookie: str | None = None) -> None:
        for _ in range(4):
            out = client.ready()
            self.acked += out.acknowledged
            if out.closed is not None:
                self.closes.append(out.closed)
            answers = []
            for to, message in out.messages:
                if to in self.bookies and (bookie is None or to == bookie or type(message) in RECOVERY_WRITES):
                    target = self.bookies[to]
                    target.step(wire(message))
                    ready = target.ready()
                    persist(ready, self.storages[to])
                    answers += [a for dest, a in ready.messages if dest == client.server_id]
            if not answers:
                return
            for answer in answers:
                client.step(wire(answer))

    def restart(self, bookie: str, closed_at=None) -> Bookie:
        self.storages[bookie].crash()  # what was not synced is lost
        self.storages[bookie] = storage = BookieStorage(DiskStorage(self.tmp_path / bookie), self.tmp_path / bookie)
        self.bookies[bookie] = Bookie(bookie, CLIENTS, storage.load(), closed_at=closed_at)
        persist(self.bookies[bookie].ready(), storage)
        return self.bookies[bookie]

    def send_add(self, bookie: str) -> None:
        self.writer.send_add(bookie)
        self.exchange(self.writer, bookie)


def test_the_lac_is_the_highest_entry_on_an_ack_quorum_and_every_entry_up_to_it_is_acknowledged(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.writer.add(b"b")
    ledger.send_add("S1")
    assert ledger.writer.lac == 0 and ledger.acked == []  # one bookie of an ack quorum of two
    ledger.send_add("S2")
    assert ledger.writer.lac == 2 and ledger.acked == [(1, 1), (2, 1)]
    # The LAC reaches the bookies piggybacked on the next add (here the explicit LAC: nothing to add).
    assert ledger.bookies["S1"].lac == 0
    ledger.send_add("S1")
    assert ledger.bookies["S1"].lac == 2 and ledger.bookies["S1"].read(2) == (1, b"b")
    with pytest.raises(NotCommitted, match="entry 1 is past S2's last-add-confirmed 0"):
        ledger.bookies["S2"].read(1)


def test_a_bookie_journal_entries_lac_and_fence_survive_a_restart_from_disk(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.send_add("S1")
    ledger.send_add("S2")
    ledger.send_add("S1")
    ledger.recovery.fence("S1")
    ledger.exchange(ledger.recovery, "S1")
    bookie = ledger.restart("S1")
    assert (bookie.generation, bookie.last_entry, bookie.lac, bookie.fenced) == (1, 1, 1, True)
    assert bookie.read(1) == (1, b"a")
    assert (tmp_path / "S1" / BOOKIE_STATE_FILE).exists()


def test_a_fenced_bookie_refuses_the_writer_which_stops(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.recovery.fence("S2")
    ledger.exchange(ledger.recovery, "S2")
    ledger.send_add("S2")
    assert ledger.bookies["S2"].last_entry == 0 and ledger.writer.fenced_out
    assert ledger.writer.snapshot().role == "follower"
    with pytest.raises(LedgerFenced, match="fenced out"):
        ledger.writer.add(b"b")
    with pytest.raises(LedgerFenced):
        ledger.writer.send_add("S1")


def test_recovery_reads_wait_for_e_minus_aq_plus_one_fencing_answers(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.recovery.fence("S1")
    ledger.exchange(ledger.recovery, "S1")
    with pytest.raises(ReplicaError, match=r"fencing has not completed: 1 of 3 bookies .* after 2\)"):
        ledger.recovery.recovery_read("S1")
    with pytest.raises(ReplicaError, match="S1 has already answered the fencing LAC read"):
        ledger.recovery.fence("S1")


@pytest.mark.parametrize("protocol, fenced", [(BOOKKEEPER, True), (WITHOUT_FENCING_READS, False)],
                         ids=["reads-fence", "issue-2614"])
def test_a_recovery_read_fences_the_bookie_only_under_the_flag(tmp_path, protocol, fenced):
    ledger = Ledger(tmp_path, protocol)
    for bookie in ("S1", "S2"):
        ledger.recovery.fence(bookie)
        ledger.exchange(ledger.recovery, bookie)
    ledger.recovery.recovery_read("S3")
    assert ledger.recovery.ready().messages == (("S3", ReadEntry("S5", 1, fenced)),)
    ledger.bookies["S3"].step(ReadEntry("S5", 1, fenced))
    assert ledger.bookies["S3"].fenced is fenced


def run_issue_2614(ledger: Ledger) -> None:
    """The saved counterexample's steps, by hand."""
    ledger.writer.add(b"a")
    ledger.send_add("S1")
    for bookie in ("S1", "S2"):
        ledger.recovery.fence(bookie)
        ledger.exchange(ledger.recovery, bookie)
    for bookie in ("S2", "S3"):
        ledger.recovery.recovery_read(bookie)
        ledger.exchange(ledger.recovery, bookie)
    ledger.send_add("S3")


def test_issue_2614_the_writer_acknowledges_an_entry_the_closed_ledger_lacks(tmp_path):
    ledger = Ledger(tmp_path, WITHOUT_FENCING_READS)
    run_issue_2614(ledger)
    assert ledger.recovery.closed == ()  # WQ - AQ + 1 = 2 bookies had no entry 1: closed empty
    assert ledger.acked == [(1, 1)]  # S1's earlier copy and S3's late one are an ack quorum


def test_with_fencing_reads_the_late_add_is_refused_and_nothing_is_acknowledged(tmp_path):
    ledger = Ledger(tmp_path)
    run_issue_2614(ledger)
    assert ledger.recovery.closed == () and ledger.acked == [] and ledger.writer.fenced_out


def test_the_close_writes_the_ledger_back_and_a_bookie_down_at_the_close_trims_itself_when_it_restarts(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.writer.add(b"b")
    ledger.send_add("S1")
    ledger.send_add("S3")  # entries 1 and 2 on S1 and S3: acknowledged, LAC 2 on the writer
    ledger.writer.add(b"c")
    ledger.send_add("S3")  # entry 3 on S3 only, LAC 2 piggybacked
    down = ledger.bookies.pop("S3")
    for bookie in ("S1", "S2"):
        ledger.recovery.fence(bookie)
        ledger.exchange(ledger.recovery, bookie)
    # Both LACs are 0: entries 1 and 2 are found on S1, then entry 3 is missing on S1 and S2.
    for bookie in ("S1", "S1", "S1", "S2"):
        ledger.recovery.recovery_read(bookie)
        ledger.exchange(ledger.recovery, bookie)
    assert ledger.recovery.closed == ((1, b"a"), (1, b"b"))
    assert ledger.recovery.snapshot() == (2, "leader", (1, 1), 2, True)
    assert [(b.last_entry, b.lac, b.closed_at) for b in ledger.bookies.values()] == [(2, 2, 2), (2, 2, 2)]
    assert ledger.bookies["S2"].read(2) == (1, b"b")  # written back to the bookie that never had it
    assert (down.last_entry, down.lac) == (3, 2)
    ledger.bookies["S3"] = down
    restarted = ledger.restart("S3", closed_at=2)
    assert (restarted.last_entry, restarted.lac, restarted.closed_at) == (2, 2, 2)
    assert (ledger.restart("S3").last_entry, ledger.bookies["S3"].closed_at) == (2, 2)  # the trim is durable


def test_recovery_closes_once_an_ack_quorum_acknowledged_its_recovery_adds_and_counts_no_silent_bookie(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.send_add("S1")  # entry 1 on S1 only: not acknowledged
    recovery = ledger.recovery
    for bookie in ("S1", "S2"):
        recovery.fence(bookie)
        ledger.exchange(recovery, bookie)
    for bookie in ("S1", "S1"):  # entry 1 found on S1, then S1 lacks entry 2
        recovery.recovery_read(bookie)
        ledger.exchange(recovery, bookie)
    recovery.recovery_read("S2")  # S2 lacks entry 2 too: the ledger ends at entry 1
    ledger.bookies["S2"].step(wire(recovery.ready().messages[0][1]))
    recovery.step(wire(ledger.bookies["S2"].ready().messages[0][1]))
    adds = recovery.ready().messages
    assert [(to, type(message).__name__) for to, message in adds] == [(b, "RecoveryAdd") for b in BOOKIES]
    assert recovery.closed is None and recovery.metadata.closed_at is None
    # S1 acknowledges (twice: it counts once); S2 and S3 do not answer. The ledger stays open.
    for _ in range(2):
        ledger.bookies["S1"].step(wire(adds[0][1]))
        recovery.step(wire(ledger.bookies["S1"].ready().messages[0][1]))
    assert recovery.closed is None and recovery.metadata.closed_at is None
    assert recovery.waits() == ("recovery waits to close the ledger at entry 1: entry 1's recovery adds are "
                                "acknowledged by 1 bookie of its write set (S1), not the ack quorum of 2")
    assert ledger.bookies["S1"].lac == 0  # a recovery add neither moves the LAC nor closes the bookie
    with pytest.raises(ReplicaError, match="recovery found the ledger's end \\(entry 1\\): it reads no more"):
        recovery.recovery_read("S3")
    # Recovery asks S3 again; its acknowledgement completes the ack quorum: the close follows.
    recovery.recovery_add("S3")
    ledger.exchange(recovery, "S3")
    assert recovery.closed == ((1, b"a"),) and recovery.metadata.closed_at == 1
    assert ledger.closes == [((1, b"a"),)] and recovery.ready().closed is None  # handed out once
    assert [(b.last_entry, b.lac, b.closed_at) for b in ledger.bookies.values()] == [(1, 1, 1)] * 3


def test_an_add_past_the_journal_end_is_answered_with_the_end_and_the_writer_sends_from_there(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.writer.add(b"a")
    ledger.writer.add(b"b")
    bookie = ledger.bookies["S1"]
    bookie.step(AddEntries("S4", 1, 2, ((1, b"b"),), 0))
    assert bookie.ready().messages == (("S4", AddReply("S1", 1, 0)),)  # EMISSINGENTRIES, the journal ends at 0
    ledger.writer.stored["S1"] = 1  # as if the writer believed S1 had entry 1 (a close cut it)
    ledger.send_add("S1")
    assert bookie.last_entry == 2 and ledger.writer.stored["S1"] == 2


def test_a_bookie_answers_only_after_its_state_is_in_the_ready_to_persist():
    bookie = Bookie("S1", CLIENTS, BookieStorage(MemoryStorage()).load())
    bookie.step(ReadLac("S5", True))
    ready = bookie.ready()
    assert ready.state == (True, None) and ready.messages[0][1].lac == 0
    bookie.step(AddEntries("S4", 1, 1, ((1, b"a"),), 0))
    ready = bookie.ready()
    assert ready.messages == (("S4", AddReply("S1", BK_FENCED, 0)),) and not ready.entries


@pytest.mark.parametrize("late, lac", [
    ((3, 3), 3),  # a later add carries a higher LAC: the bookie takes it
    ((3, 2), 2),  # entry 3 resent with the same LAC
    ((2, 1), 2),  # a late add (resent, or delivered out of order) carries an older LAC: the bookie keeps 2
    ((1, 0), 2),  # down to the first add's LAC 0
])
def test_a_bookies_lac_never_moves_backwards(late, lac):
    # A reader asking this bookie's LAC must not see entries it was told are confirmed go unconfirmed.
    bookie = Bookie("S1", CLIENTS, BookieStorage(MemoryStorage()).load())
    for entry in (1, 2, 3):
        bookie.step(AddEntries("S4", 1, entry, ((1, bytes([96 + entry])),), entry - 1))
    assert bookie.lac == 2
    entry, carried = late
    bookie.step(AddEntries("S4", 1, entry, ((1, bytes([96 + entry])),), carried))
    assert bookie.lac == lac
    bookie.ready()
    bookie.step(ReadLac("S5", False))
    assert bookie.ready().messages[0][1].lac == lac


def test_bad_input_is_refused_naming_what_was_wrong(tmp_path):
    bookie = Bookie("S1", CLIENTS, BookieStorage(MemoryStorage()).load())
    with pytest.raises(ReplicaError, match=r"S1 got a ReadLac from 'S9', which is not one of the ledger's clients"):
        bookie.step(ReadLac("S9", True))
    with pytest.raises(ReplicaError, match="S1 cannot step a AddReply: not a request to a bookie"):
        bookie.step(AddReply("S2", 0, 0))
    with pytest.raises(ValueError, match=r"write_quorum: expected an int in 1..2 \(the ensemble\), got 3"):
        Writer("S4", BOOKIES, ensemble_size=2, write_quorum=3)
    with pytest.raises(ValueError, match=r"ensemble_size: expected an int in 1..3 \(the bookies\), got 4"):
        Writer("S4", BOOKIES, ensemble_size=4)
    with pytest.raises(ValueError, match=r"ack_quorum: expected an int in 1..3 \(the write quorum\), got 4"):
        Writer("S4", BOOKIES, ack_quorum=4)
    with pytest.raises(ValueError, match="the recovery client follows BookKeeper's rules, not 'raft'"):
        RecoveryClient("S5", BOOKIES, RAFT)
    (tmp_path / BOOKIE_STATE_FILE).write_text('{"format": "hwm-bookie/1", "fenced": "yes", "closed_at": null}')
    with pytest.raises(StorageError, match=rf"{BOOKIE_STATE_FILE}: field fenced: expected true or false, got 'yes'"):
        BookieStorage(MemoryStorage(), tmp_path).load()


def test_the_quorum_thresholds_follow_the_ack_quorum():
    assert LedgerQuorums.of(3) == LedgerQuorums(3, 3, 2)
    assert (LedgerQuorums.of(5, ack_quorum=2).fencing_needed, LedgerQuorums.of(5, ack_quorum=2).missing_needed) == (4, 4)
    assert LedgerQuorums.of(3, write_quorum=2) == LedgerQuorums(3, 2, 2)  # AQ: a majority of WQ
    striped = LedgerQuorums.of(3, ack_quorum=2, write_quorum=2)
    fragments = ((1, ("S1", "S2", "S3")), (3, ("S1", "S4", "S3")))
    assert [striped.write_set(fragments, e) for e in (1, 2, 3, 4)] == [
        ("S1", "S2"), ("S2", "S3"), ("S3", "S1"), ("S1", "S4")]


def test_the_recovery_client_ignores_an_add_answer_that_comes_before_it_writes_anything_back():
    """An AddReply is recovery's only while it writes back what it closes with; one before that (a
    bookie's answer to the writer, misrouted, or a stale one) changes nothing."""
    recovery = RecoveryClient("S5", BOOKIES, BOOKKEEPER)
    recovery.ready()
    recovery.step(AddReply(BOOKIES[0], 0, 1))
    assert recovery.closed is None and recovery.closing is None and not recovery.added
