"""The properties outside the catalogue, on small states of the models that check them, at their
boundaries (the catalogue's own rows: test_catalogue_boundaries.py).

- properties/acked.py: AckedWriteNeverLost and WriteAcknowledged on Kafka's and ZAB's states (their
  `acked` ghost), AcknowledgedWriteKept on Kafka's steps: an acknowledged entry on exactly a quorum
  or one server fewer, at another generation, on a down server; a leader newly elected, re-elected,
  restarted, or leading already.
- properties/leases.py: LeaseReadNeverStale and LeaseHolderPartitioned on the partitioned Raft
  model's states: a lease (an entry of its own generation at or below the HWM) or just not one, a
  read at the HWM or one past it, a partition leaving exactly a majority on the leader's side or
  one server fewer.
- properties/step_down.py: LeaderStepsDown on the partitioned ZAB model's steps.
- properties/ledger.py: the six properties BookKeeper's model checks in a ledger's own terms, on a
  striped ledger (E=3, WQ=2, AQ=2: entry 1 on S1,S2, entry 2 on S2,S3, entry 3 on S3,S1), on
  WQ=3, AQ=2, and on four bookies after an ensemble change: copies on exactly AQ bookies of the
  write set or one fewer, copies outside the write set, the writer's and recovery client's copies,
  holes, the first entry and the one that wraps around the ensemble.

Each row: the property, the state before (step properties) and after, and whether the check
reports (a violation for an `always` property, a witness for a `sometimes` one).
"""

from __future__ import annotations

import pytest

from hwm.model.bookkeeper import BookKeeperState
from hwm.model.kafka import NO_LEADER, KafkaServer, KafkaState
from hwm.model.partition import PartitionState
from hwm.model.state import FOLLOWER, LEADER, Server, State
from hwm.model.zab import ZabState
from hwm.model.zab_partition import ZabPartitionState
from hwm.properties.acked import ALL_BY_NAME, WITH_ACKED
from hwm.properties.ledger import Ledger, ledger_properties


def _log(text: str) -> tuple[int, ...]:
    """A log as the generations of its entries: "112" for 1@g1 2@g1 3@g2; "0" is a bookie's hole."""
    return tuple(int(g) for g in text)


def _entries(pairs) -> frozenset:
    return frozenset(pairs)


# ------------------------------------------------------------------ Kafka (acked.py)
def kafka(log="", hwm=0, generation=1, role=FOLLOWER, alive=True, leader=1) -> KafkaServer:
    """One replica of three, in the ISR, fetching from S`leader` (a leader fetches from nobody)."""
    if role == LEADER:
        return KafkaServer(generation, LEADER, _log(log), hwm, alive, (0, 0, 0), True, NO_LEADER, False,
                           (True, True, True))
    return KafkaServer(generation, FOLLOWER, _log(log), hwm, alive, (), True, leader, False)


def kleader(log="", hwm=0, generation=1, alive=True) -> KafkaServer:
    return kafka(log, hwm, generation, LEADER, alive)


def kstate(*servers, acked=(), reads=()) -> KafkaState:
    return KafkaState(tuple(servers), _entries(reads), 0, (), _entries(acked))


# ------------------------------------------------------------------ Raft, ZAB (leases.py, step_down.py)
def raft(log="", hwm=0, generation=1, role=FOLLOWER, alive=True) -> Server:
    return Server(generation, role, _log(log), hwm, alive, ())


def rleader(log="", hwm=0, generation=1, alive=True) -> Server:
    return raft(log, hwm, generation, LEADER, alive)


def cut_off(*servers, cut=None, reads=(), partitions=None) -> PartitionState:
    """The partitioned Raft model's state; `cut` the positions isolated (none: the network is whole)."""
    bits = tuple(k in (cut or ()) for k in range(len(servers)))
    return PartitionState(tuple(servers), _entries(reads), 0, (), bits, int(any(bits)) if partitions is None else partitions)


def zab(*servers, acked=()) -> ZabState:
    n = len(servers)
    durable = tuple(len(s.log) for s in servers)
    return ZabState(tuple(servers), frozenset(), 0, (), (0,) * n, durable, tuple(s.generation for s in servers),
                    _entries(acked))


def zab_cut(*servers, cut=()) -> ZabPartitionState:
    n = len(servers)
    bits = tuple(k in cut for k in range(n))
    return ZabPartitionState(*zab(*servers), bits, 1)


THREE = (raft("1", 1), raft("1", 1), raft("1", 1))
LEASE = rleader("1", 1)  # an entry of its own generation at its HWM: it holds a lease
NO_LEASE = rleader("1", 0)  # the same entry just above its HWM: no lease yet


STATE = [
    # AckedWriteNeverLost: the first entry on exactly a quorum (2 of 3), on one replica fewer
    ("AckedWriteNeverLost", kstate(kleader("1", 1), kafka("1", 1), kafka(""), acked={(1, 1)}), False),
    ("AckedWriteNeverLost", kstate(kleader("1", 1), kafka(""), kafka(""), acked={(1, 1)}), True),
    ("AckedWriteNeverLost", kstate(kleader("", 0), kafka(""), kafka("")), False),  # nothing acknowledged
    ("AckedWriteNeverLost", kstate(kleader("2", 1, 2), kafka("2", 1, 2, leader=1), kafka("1", 1), acked={(1, 1)}),
     True),  # an unclean election: index 1 is held, at another generation
    ("AckedWriteNeverLost", kstate(kleader("1", 1), kafka("1", 1, alive=False), kafka(""), acked={(1, 1)}),
     False),  # a down replica's disk counts
    ("AckedWriteNeverLost", kstate(kleader("11", 2), kafka("11", 2), kafka("1", 1), acked={(1, 1), (2, 1)}),
     False),  # the last entry at the end of exactly two logs
    ("AckedWriteNeverLost", kstate(kleader("11", 2), kafka("1", 1), kafka("1", 1), acked={(1, 1), (2, 1)}), True),
    ("AckedWriteNeverLost", zab(rleader("1", 1), raft("1"), raft("1"), raft(), raft(), acked={(1, 1)}),
     False),  # ZAB, five servers: 3 of 5
    ("AckedWriteNeverLost", zab(rleader("1", 1), raft("1"), raft(), raft(), raft(), acked={(1, 1)}), True),
    # WriteAcknowledged (sometimes): any acknowledgement, none, a read that is no acknowledgement,
    # a state that keeps no `acked` ghost at all
    ("WriteAcknowledged", kstate(kleader("1", 1), kafka("1"), kafka(""), acked={(1, 1)}), True),
    ("WriteAcknowledged", kstate(kleader("1", 1), kafka("1"), kafka(""), reads={(1, 1)}), False),
    ("WriteAcknowledged", State(THREE, frozenset({(1, 1)}), 0, ()), False),
    ("WriteAcknowledged", zab(rleader("1", 1), raft("1"), raft(), acked={(1, 1)}), True),
    # LeaseReadNeverStale: a new leader of generation 2 with a lease; the read of 2@g1 it does not hold
    ("LeaseReadNeverStale", cut_off(rleader("12", 2, 2), raft("12", 2, 2), raft("1"), reads={(1, 1)}), False),
    ("LeaseReadNeverStale", cut_off(rleader("12", 2, 2), raft("11"), raft("1"), reads={(2, 1)}), True),
    ("LeaseReadNeverStale", cut_off(rleader("12", 1, 2), raft("11"), raft("1"), reads={(2, 1)}),
     False),  # its own entry 2@g2 just above its HWM: no lease, it serves no read from one
    # S1, leader of generation 2 cut off, keeps its lease while S2 leads generation 3: a read at S1's
    # HWM, and one past it (S1 holds 3@g2 but has not committed it)
    ("LeaseReadNeverStale", cut_off(rleader("122", 2, 2), rleader("1223", 4, 3), raft("1223", 4, 3), cut=(0,),
                                    reads={(2, 2)}), False),
    ("LeaseReadNeverStale", cut_off(rleader("122", 2, 2), rleader("1223", 4, 3), raft("1223", 4, 3), cut=(0,),
                                    reads={(3, 2)}), True),
    ("LeaseReadNeverStale", cut_off(rleader("12", 2, 2, alive=False), raft("11"), raft("1"), reads={(2, 1)}),
     False),  # down
    ("LeaseReadNeverStale", cut_off(raft("12", 2, 2), raft("11"), raft("1"), reads={(2, 1)}), False),  # a follower
    ("LeaseReadNeverStale", cut_off(rleader("12", 2, 2), raft("11"), raft("1")), False),  # nothing read
    # a deposed leader of generation 1, cut off, whose lease outlives a newer leader's committed 1@g2
    ("LeaseReadNeverStale", cut_off(LEASE, rleader("2", 1, 2), raft("2", 1, 2), cut=(0,), reads={(1, 2)}), True),
    ("LeaseReadNeverStale", cut_off(NO_LEASE, rleader("2", 1, 2), raft("2", 1, 2), cut=(0,), reads={(1, 2)}), False),
]


@pytest.mark.parametrize("name, after, found", STATE)
def test_a_state_property_at_its_boundaries(name, after, found):
    prop = ALL_BY_NAME[name]
    assert prop.on == "state"
    assert (prop.check(after) is not None) == found, prop.check(after)


K_ACKED = {(1, 1)}

STEP = [
    # AcknowledgedWriteKept: a follower elected leader of generation 2 with or without the acknowledged entry
    ("AcknowledgedWriteKept", kstate(kleader("1", 1), kafka("1", 1), kafka(""), acked=K_ACKED),
     kstate(kleader("1", 1), kleader("1", 1, 2), kafka("", leader=2), acked=K_ACKED), False),
    ("AcknowledgedWriteKept", kstate(kleader("1", 1), kafka("1", 1), kafka(""), acked=K_ACKED),
     kstate(kleader("1", 1), kafka("1", 1, 2, leader=3), kleader("", 0, 2), acked=K_ACKED), True),
    ("AcknowledgedWriteKept", kstate(kleader("1", 1), kafka("1", 1), kafka("2", 0, 2), acked=K_ACKED),
     kstate(kleader("1", 1), kafka("1", 1), kleader("2", 0, 3), acked=K_ACKED), True),  # index 1, another generation
    ("AcknowledgedWriteKept", kstate(kleader("11", 2), kafka("11", 2), kafka("1", 1), acked={(1, 1), (2, 1)}),
     kstate(kleader("11", 2), kafka("11", 2, 2, leader=3), kleader("1", 1, 2), acked={(1, 1), (2, 1)}),
     True),  # it holds the first acknowledged entry only
    ("AcknowledgedWriteKept", kstate(kleader("1", 0), kafka("1", 0), kafka("")),
     kstate(kleader("1", 0), kafka("1", 0, 2, leader=3), kleader("", 0, 2), acked=K_ACKED),
     False),  # acknowledged only after the step: the election came first
    ("AcknowledgedWriteKept", kstate(kleader("1", 1), kafka("1", 1), kafka(""), acked=K_ACKED),
     kstate(kleader("1", 1), kafka("1", 1), kafka(""), acked=K_ACKED), False),  # no election
    ("AcknowledgedWriteKept", kstate(kleader("", 0), kafka("1", 1), kafka("1", 1), acked=K_ACKED),
     kstate(kleader("", 0), kafka("1", 1), kafka("1", 1), acked=K_ACKED), False),  # it was leading already
    ("AcknowledgedWriteKept", kstate(kleader("", 0), kafka("1", 1), kafka("1", 1), acked=K_ACKED),
     kstate(kleader("", 0, 2), kafka("1", 1, 2), kafka("1", 1, 2), acked=K_ACKED), True),  # re-elected in generation 2
    ("AcknowledgedWriteKept", kstate(kleader("", 0, alive=False), kafka("1", 1), kafka("1", 1), acked=K_ACKED),
     kstate(kleader("", 0), kafka("1", 1), kafka("1", 1), acked=K_ACKED), True),  # restarted: newly leading
    ("AcknowledgedWriteKept", kstate(kleader("1", 1), kafka("1", 1), kafka(""), acked=K_ACKED),
     kstate(kleader("1", 1), kafka("1", 1), kleader("", 0, 2, alive=False), acked=K_ACKED), False),  # down
    ("AcknowledgedWriteKept", kstate(kleader("1", 1), kafka("1", 1, 2), kafka("", 0, 2), acked=K_ACKED),
     kstate(kleader("1", 1), kafka("1", 1, 2, leader=3), kleader("", 0, 2), acked=K_ACKED),
     True),  # a follower of generation 2 becomes its leader
    # LeaseHolderPartitioned (sometimes): S1 holds a lease; a cut isolates it, or leaves exactly a
    # majority on its side, or one server fewer (a down one)
    ("LeaseHolderPartitioned", cut_off(LEASE, *THREE[1:]), cut_off(LEASE, *THREE[1:], cut=(0,)), True),
    ("LeaseHolderPartitioned", cut_off(LEASE, *THREE[1:]), cut_off(LEASE, *THREE[1:], cut=(2,)), False),
    ("LeaseHolderPartitioned", cut_off(LEASE, raft("1", 1, alive=False), raft("1", 1)),
     cut_off(LEASE, raft("1", 1, alive=False), raft("1", 1), cut=(2,)), True),
    ("LeaseHolderPartitioned", cut_off(NO_LEASE, *THREE[1:]), cut_off(NO_LEASE, *THREE[1:], cut=(0,)),
     False),  # its entry is just above its HWM: no lease
    ("LeaseHolderPartitioned", cut_off(NO_LEASE, *THREE[1:]), cut_off(LEASE, *THREE[1:], cut=(0,)),
     False),  # the lease is new after the step: it held none when cut off
    ("LeaseHolderPartitioned", cut_off(LEASE, *THREE[1:], cut=(0,)), cut_off(LEASE, *THREE[1:], cut=(0,)),
     False),  # the same cut: no partition in this step
    ("LeaseHolderPartitioned", cut_off(LEASE, *THREE[1:], cut=(0,)), cut_off(LEASE, *THREE[1:], partitions=1),
     False),  # a heal
    ("LeaseHolderPartitioned", State((LEASE,) + THREE[1:], frozenset(), 0, ()),
     State((LEASE,) + THREE[1:], frozenset(), 0, ()), False),  # a model without partitions
    # five servers: S5 cut off, with one or two of S2..S4 down (3 of 5 on S1's side, or 2)
    ("LeaseHolderPartitioned", cut_off(LEASE, raft("1", 1, alive=False), raft("1"), raft("1"), raft()),
     cut_off(LEASE, raft("1", 1, alive=False), raft("1"), raft("1"), raft(), cut=(4,)), False),
    ("LeaseHolderPartitioned", cut_off(LEASE, raft("1", 1, alive=False), raft("1", alive=False), raft("1"), raft()),
     cut_off(LEASE, raft("1", 1, alive=False), raft("1", alive=False), raft("1"), raft(), cut=(4,)), True),
    # LeaderStepsDown (sometimes): a ZAB leader cut off becomes a follower of its own generation
    ("LeaderStepsDown", zab_cut(rleader("1", 1), raft("1", 1), raft("1", 1)),
     zab_cut(raft("1", 1), raft("1", 1), raft("1", 1), cut=(0,)), True),
    ("LeaderStepsDown", zab_cut(rleader("1", 1), raft("1", 1), raft("1", 1)),
     zab_cut(raft("1", 1, 2), rleader("1", 1, 2), raft("1", 1, 2)), False),  # it heard of generation 2
    ("LeaderStepsDown", zab_cut(rleader("1", 1), raft("1", 1), raft("1", 1)),
     zab_cut(rleader("1", 1, alive=False), raft("1", 1), raft("1", 1)), False),  # a crash, not a step down
    ("LeaderStepsDown", zab_cut(rleader("1", 1), raft("1", 1), raft("1", 1)),
     zab_cut(raft("1", 1, alive=False), raft("1", 1), raft("1", 1)), False),  # down as a follower
    ("LeaderStepsDown", zab_cut(rleader("1", 1, alive=False), raft("1", 1), raft("1", 1)),
     zab_cut(raft("1", 1), raft("1", 1), raft("1", 1)), False),  # a restart: it was no live leader
    ("LeaderStepsDown", zab_cut(rleader("1", 1), raft("1", 1), raft("1", 1)),
     zab_cut(rleader("1", 1), raft("1", 1), raft("1", 1), cut=(0,)), False),  # still leading
    ("LeaderStepsDown", zab_cut(raft("1", 1, 2), rleader("12", 1, 2), raft("12", 1, 2)),
     zab_cut(raft("1", 1, 2), raft("12", 1, 2), raft("12", 1, 2), cut=(1,)), True),  # S2, the second server
]


@pytest.mark.parametrize("name, before, after, found", STEP)
def test_a_step_property_at_its_boundaries(name, before, after, found):
    prop = ALL_BY_NAME[name]
    assert prop.on == "step"
    finding = prop.check(before, after)
    assert (finding is not None) == found, finding


# ------------------------------------------------------------------ BookKeeper (ledger.py)
STRIPED = Ledger(bookies=3, ensemble_size=3, write_quorum=2, ack_quorum=2)  # 1: S1,S2  2: S2,S3  3: S3,S1
WIDE = Ledger(bookies=3, ensemble_size=3, write_quorum=3, ack_quorum=2)  # every entry on S1,S2,S3; AQ of 3
SPARE = Ledger(bookies=4, ensemble_size=3, write_quorum=2, ack_quorum=2)  # S4 a spare bookie
S2_REPLACED = ((2, (0, 3, 2)),)  # S4 replaced S2 from entry 2 on: 2: S4,S3  3: S3,S1


def bookie(log="", lac=0, alive=True) -> Server:
    """A bookie as the model keeps one: generation 1 once the writer reached it, holes as 0, its LAC as HWM."""
    return Server(1 if log or lac else 0, FOLLOWER, _log(log), lac, alive, ())


def ledger(*bookies, written="", lac=0, closed=None, reads=(), acked=(), ensembles=(), stored=None) -> BookKeeperState:
    """Bookies S1..Sn, then the writer (its log every entry it added, its HWM its LAC) and the
    recovery client (the leader of generation 2 with the closed ledger, once `closed` says one)."""
    n = len(bookies)
    writer = Server(1, LEADER, _log(written), lac, True, (0,) * (n + 2))
    recovery = (Server(0, FOLLOWER, (), 0, True, ()) if closed is None
                else Server(2, LEADER, _log(closed), len(closed), True, ()))
    return BookKeeperState(tuple(bookies) + (writer, recovery), _entries(reads), 0, (), 0, 0, 0, _entries(acked),
                           ensembles, len(ensembles) if stored is None else stored)


LEDGER_STATE = [
    # CommittedOnQuorum: entry 1 on exactly AQ=2 of its write set, on one bookie fewer, on a bookie outside it
    ("CommittedOnQuorum", STRIPED, ledger(bookie("1"), bookie("1"), bookie(), written="1", lac=1), False),
    ("CommittedOnQuorum", STRIPED, ledger(bookie("1"), bookie(), bookie(), written="1", lac=1), True),
    ("CommittedOnQuorum", STRIPED, ledger(bookie("1"), bookie(), bookie("1"), written="1", lac=1),
     True),  # S3 is outside entry 1's write set
    ("CommittedOnQuorum", STRIPED, ledger(bookie("1"), bookie(), bookie(), written="1", lac=0),
     False),  # nobody counts it as committed yet
    ("CommittedOnQuorum", STRIPED, ledger(bookie("1", 1), bookie("1", alive=False), bookie(), written="1", lac=1),
     False),  # a down bookie's journal counts
    ("CommittedOnQuorum", STRIPED, ledger(bookie("1", 1), bookie("11", 1), bookie("01", 2), written="11", lac=2),
     False),  # S3's hole at entry 1, below its LAC, is no entry
    ("CommittedOnQuorum", STRIPED, ledger(bookie("101", 3), bookie("11", 2), bookie("011", 3), written="111", lac=3),
     False),  # entry 3 wraps around the ensemble: S3,S1
    ("CommittedOnQuorum", STRIPED, ledger(bookie("10", 2), bookie("11", 2), bookie("011", 3), written="111", lac=3),
     True),
    ("CommittedOnQuorum", WIDE, ledger(bookie("1"), bookie(), bookie("1"), written="1", lac=1), False),  # 2 of WQ=3
    ("CommittedOnQuorum", WIDE, ledger(bookie("1"), bookie(), bookie(), written="1", lac=1), True),
    # an ensemble change the metadata holds (S4 for S2 from entry 2), or the writer's only (issue 1591)
    ("CommittedOnQuorum", SPARE, ledger(bookie("1", 1), bookie("1", 1), bookie("01", 1), bookie("01", 1),
                                         written="11", lac=2, ensembles=S2_REPLACED), False),
    ("CommittedOnQuorum", SPARE, ledger(bookie("1", 1), bookie("1", 1), bookie("01", 1), bookie("01", 1),
                                         written="11", lac=2, ensembles=S2_REPLACED, stored=0), True),
    # AckedWriteNeverLost: the same counts for an acknowledged entry
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("1"), bookie("1"), bookie(), written="1", lac=1, acked={(1, 1)}),
     False),
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("1"), bookie(), bookie(), written="1", lac=1, acked={(1, 1)}), True),
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("1"), bookie(), bookie(), written="1"), False),  # nothing acked
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("1"), bookie(), bookie("1"), written="1", lac=1, acked={(1, 1)}),
     True),  # S3 is outside the write set
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("1"), bookie(), bookie(), written="1", lac=1, closed="1",
                                            acked={(1, 1)}),
     True),  # the writer's and the recovery client's copies are no bookie's (3 of 5 servers hold it)
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("1"), bookie("11"), bookie("01"), written="11", lac=2,
                                            acked={(1, 1), (2, 1)}), False),
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("1"), bookie("11"), bookie(), written="11", lac=2,
                                            acked={(1, 1), (2, 1)}), True),  # the second entry on S2 only
    ("AckedWriteNeverLost", STRIPED, ledger(bookie("101"), bookie("11"), bookie("011"), written="111", lac=3,
                                            acked={(1, 1), (2, 1), (3, 1)}), False),
    ("AckedWriteNeverLost", WIDE, ledger(bookie("1"), bookie("1", alive=False), bookie(), written="1", lac=1,
                                         acked={(1, 1)}), False),  # 2 of WQ=3, one of them down
    ("AckedWriteNeverLost", SPARE, ledger(bookie("1", 1), bookie("1", 1), bookie("01", 1), bookie("01", 1),
                                          written="11", lac=2, acked={(1, 1), (2, 1)}, ensembles=S2_REPLACED), False),
    ("AckedWriteNeverLost", SPARE, ledger(bookie("1", 1), bookie("1", 1), bookie("01", 1), bookie("01", 1),
                                          written="11", lac=2, acked={(1, 1), (2, 1)}, ensembles=S2_REPLACED,
                                          stored=0), True),  # issue 1591: the metadata names S2,S3 for entry 2
    # LogMatching: holes are no disagreement. The model writes generation 1 only; the rows with a
    # generation 2 entry state the check itself.
    ("LogMatching", STRIPED, ledger(bookie("101"), bookie("11"), bookie("011"), written="111"), False),
    ("LogMatching", STRIPED, ledger(bookie("11"), bookie("21"), bookie()), True),
    ("LogMatching", STRIPED, ledger(bookie("001"), bookie("211"), bookie()), False),  # the only entry both hold is 3@g1
    ("LogMatching", STRIPED, ledger(bookie("201"), bookie("111"), bookie()),
     True),  # they share 3@g1 and differ at the first index, over S1's hole
    ("LogMatching", STRIPED, ledger(bookie("12"), bookie("11"), bookie(), written="11"),
     False),  # they differ only at the last index
    ("LogMatching", STRIPED, ledger(bookie("2"), bookie(), bookie(), written="1"), False),  # the first index only
]


@pytest.mark.parametrize("name, shape, after, found", LEDGER_STATE)
def test_a_ledger_state_property_at_its_boundaries(name, shape, after, found):
    prop = {p.name: p for p in ledger_properties(shape)}[name]
    assert prop.on == "state"
    assert (prop.check(after) is not None) == found, prop.check(after)


LEDGER_STEP = [
    # HwmNeverTruncated: a removal just above a bookie's LAC, at it, at the first index; holes
    ("HwmNeverTruncated", STRIPED, ledger(bookie("11", 1), bookie(), bookie()),
     ledger(bookie("1", 1), bookie(), bookie()), False),
    ("HwmNeverTruncated", STRIPED, ledger(bookie("11", 2), bookie(), bookie()),
     ledger(bookie("1", 2), bookie(), bookie()), True),
    ("HwmNeverTruncated", STRIPED, ledger(bookie("1", 1), bookie(), bookie()),
     ledger(bookie("", 0), bookie(), bookie()), True),
    ("HwmNeverTruncated", STRIPED, ledger(bookie(), bookie(), bookie("01", 1)),
     ledger(bookie(), bookie(), bookie("0", 1)), False),  # entry 2 above S3's LAC 1; its hole at 1 stays
    ("HwmNeverTruncated", STRIPED, ledger(bookie("100", 3), bookie(), bookie()),
     ledger(bookie("101", 3), bookie(), bookie()), False),  # a hole at S1's LAC filled
    ("HwmNeverTruncated", STRIPED, ledger(bookie(), bookie(), bookie("01", 1)),
     ledger(bookie(), bookie(), bookie("", 0)), False),  # a hole at S3's LAC dropped (with 2@g1 above it)
    # ReadNeverTruncated: a read entry removed, leaving AQ bookies of its write set or one fewer
    ("ReadNeverTruncated", STRIPED, ledger(bookie("1"), bookie("1"), bookie(), written="1", reads={(1, 1)}),
     ledger(bookie(), bookie("1"), bookie(), written="1"), True),  # the writer's copy is no bookie's
    ("ReadNeverTruncated", STRIPED, ledger(bookie("1"), bookie("1"), bookie("1"), reads={(1, 1)}),
     ledger(bookie("1"), bookie("1"), bookie()), False),  # S3's copy was outside the write set
    ("ReadNeverTruncated", WIDE, ledger(bookie("1"), bookie("1"), bookie("1"), reads={(1, 1)}),
     ledger(bookie(), bookie("1"), bookie("1")), False),  # exactly AQ=2 of WQ=3 left
    ("ReadNeverTruncated", WIDE, ledger(bookie("1"), bookie("1"), bookie(), reads={(1, 1)}),
     ledger(bookie(), bookie("1"), bookie()), True),
    ("ReadNeverTruncated", STRIPED, ledger(bookie("1"), bookie("11"), bookie("01"), reads={(1, 1)}),
     ledger(bookie("1"), bookie("1"), bookie("01")), False),  # the removed entry 2 was not read
    ("ReadNeverTruncated", STRIPED, ledger(bookie("1"), bookie("1"), bookie()),
     ledger(bookie(), bookie("1"), bookie()), False),  # nothing read
    # UncommittedTruncated (sometimes): the mirror image, minus read entries and holes
    ("UncommittedTruncated", STRIPED, ledger(bookie("1"), bookie("11", 1), bookie()),
     ledger(bookie("1"), bookie("1", 1), bookie()), True),
    ("UncommittedTruncated", STRIPED, ledger(bookie("1"), bookie("11", 2), bookie()),
     ledger(bookie("1"), bookie("1", 2), bookie()), False),
    ("UncommittedTruncated", STRIPED, ledger(bookie("1"), bookie("11", 1), bookie(), reads={(2, 1)}),
     ledger(bookie("1"), bookie("1", 1), bookie()), False),
    ("UncommittedTruncated", STRIPED, ledger(bookie(), bookie(), bookie("01", 1)),
     ledger(bookie(), bookie(), bookie("0", 1), closed="1"), True),  # closed at entry 1 while S3 holds entry 2
    ("UncommittedTruncated", STRIPED, ledger(bookie("101", 1), bookie(), bookie()),
     ledger(bookie("111", 1), bookie(), bookie()), False),  # a hole above the LAC filled
    ("UncommittedTruncated", STRIPED, ledger(bookie("1"), bookie(), bookie()),
     ledger(bookie("1"), bookie(), bookie()), False),
]


@pytest.mark.parametrize("name, shape, before, after, found", LEDGER_STEP)
def test_a_ledger_step_property_at_its_boundaries(name, shape, before, after, found):
    prop = {p.name: p for p in ledger_properties(shape)}[name]
    assert prop.on == "step"
    finding = prop.check(before, after)
    assert (finding is not None) == found, finding


def test_every_ledger_property_has_rows_that_report_and_rows_that_do_not():
    # The properties BookKeeper's model checks in a ledger's terms: those ledger_properties replaces.
    catalogue = {p.name: p.check for p in WITH_ACKED}
    restated = {p.name for p in ledger_properties(STRIPED) if p.check is not catalogue[p.name]}
    assert len(restated) == 6
    rows = [(name, found) for name, _, _, found in LEDGER_STATE] + [(name, found) for name, _, _, _, found in LEDGER_STEP]
    assert {(name, found) for name in restated for found in (True, False)} == set(rows)
