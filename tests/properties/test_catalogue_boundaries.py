"""Each catalogue property (properties/catalogue.py) on small snapshots at its boundaries: the first
index, an entry held by exactly a quorum or one server fewer, a high-water mark at the log's end or
one past it, equal and different generations, a removal at or just above a high-water mark, a
leader that is down. Each row: the property, the snapshot before (step properties) and after, and
whether the check reports (a violation for an `always` property, a witness for a `sometimes` one).
"""

from __future__ import annotations

import pytest

from hwm.properties.catalogue import BY_NAME, CATALOGUE, at_quorum
from hwm.properties.snapshot import ServerSnapshot, Snapshot


def s(log="", hwm=0, generation=1, role="follower", alive=True) -> ServerSnapshot:
    """One server: its log as the generations of its entries, "112" for 1@g1 2@g1 3@g2."""
    return ServerSnapshot(generation, role, tuple(int(g) for g in log), hwm, alive)


def leader(log="", hwm=0, generation=1, alive=True) -> ServerSnapshot:
    return s(log, hwm, generation, "leader", alive)


def view(*servers, reads=()) -> Snapshot:
    return Snapshot(tuple(servers), frozenset(reads))


THREE = (s("1"), s("1"), s("1"))

STATE = [
    # HwmWithinLog: at the log's end, one past it, the empty log
    ("HwmWithinLog", view(s("1", 1), s(), s()), False),
    ("HwmWithinLog", view(s("1", 2), s(), s()), True),
    ("HwmWithinLog", view(s("", 1), s(), s()), True),
    # CommittedOnQuorum: the first index on exactly a quorum (2 of 3), on one server fewer
    ("CommittedOnQuorum", view(s("1", 1), s("1"), s()), False),
    ("CommittedOnQuorum", view(s("1", 1), s(), s()), True),
    ("CommittedOnQuorum", view(s("1", 1), s("2"), s("2")), True),  # the same index, another generation
    ("CommittedOnQuorum", view(s("12", 1), s("1"), s()), False),  # entry 2 is not counted as committed
    ("CommittedOnQuorum", view(s("12", 2), s("12"), s("1")), False),  # the last index, on exactly 2
    ("CommittedOnQuorum", view(s("12", 2), s("1"), s("1")), True),
    ("CommittedOnQuorum", view(s("1", 1), s("1", alive=False), s()), False),  # a down server's disk counts
    ("CommittedOnQuorum", view(s("1", 2), s("1"), s()), False),  # a HWM past the log counts the log's entries
    # OneLeaderPerGeneration: equal generations, different ones, a leader that is down
    ("OneLeaderPerGeneration", view(leader(), leader(), s()), True),
    ("OneLeaderPerGeneration", view(leader(), leader(generation=2), s()), False),
    ("OneLeaderPerGeneration", view(leader(), leader(alive=False), s()), False),
    # LogMatching: a shared entry at the first index, a shared later entry over different earlier ones
    ("LogMatching", view(s("1"), s("1"), s("2")), False),
    ("LogMatching", view(s("12"), s("22"), s()), True),
    ("LogMatching", view(s("12"), s("13"), s()), False),  # they differ only at the last index
    ("LogMatching", view(s("112"), s("11"), s()), False),  # a prefix
    ("LogMatching", view(s("1"), s("112"), s()), False),  # the second log longer
    ("LogMatching", view(s("1234"), s("1335"), s()), True),  # the highest shared entry is 3@g3
    # ReadsAgree: two reads of one index (of different generations: reads are a set), of two indexes
    ("ReadsAgree", view(*THREE, reads={(1, 1), (1, 2)}), True),
    ("ReadsAgree", view(*THREE, reads={(1, 1), (2, 1)}), False),
    # EntryRead (sometimes): any read is its witness, none is not
    ("EntryRead", view(*THREE, reads={(1, 1)}), True),
    ("EntryRead", view(*THREE), False),
]


@pytest.mark.parametrize("name, after, found", STATE)
def test_a_state_property_at_its_boundaries(name, after, found):
    assert BY_NAME[name].on == "state"
    assert (BY_NAME[name].check(after) is not None) == found, BY_NAME[name].check(after)


STEP = [
    # HwmNeverTruncated: a removal at the server's own HWM, just above it, at the first index
    ("HwmNeverTruncated", view(s("12", 1), s(), s()), view(s("1", 1), s(), s()), False),
    ("HwmNeverTruncated", view(s("12", 2), s(), s()), view(s("1", 1), s(), s()), True),
    ("HwmNeverTruncated", view(s("1", 1), s(), s()), view(s("", 0), s(), s()), True),
    ("HwmNeverTruncated", view(s("1", 1), s(), s()), view(s("2", 1), s(), s()), True),  # replaced, not shortened
    ("HwmNeverTruncated", view(s("12", 1), s(), s()), view(s("13", 1), s(), s()), False),
    ("HwmNeverTruncated", view(s("11", 1), s(), s()), view(s("1", 1), s(), s()), False),  # 2@g1: index 2 > HWM 1
    # UncommittedTruncated (sometimes): the mirror image, minus read entries
    ("UncommittedTruncated", view(s("12", 1), s(), s()), view(s("1", 1), s(), s()), True),
    ("UncommittedTruncated", view(s("11", 1), s(), s()), view(s("1", 1), s(), s()), True),  # 2@g1 above HWM 1
    ("UncommittedTruncated", view(s("12", 2), s(), s()), view(s("1", 1), s(), s()), False),
    ("UncommittedTruncated", view(s("12", 1), s(), s(), reads={(2, 2)}), view(s("1", 1), s(), s()), False),
    ("UncommittedTruncated", view(s("1"), s(), s()), view(s("1"), s(), s()), False),
    # ReadNeverTruncated: a read entry removed, left on exactly a quorum or on one server fewer
    ("ReadNeverTruncated", view(s("1"), s("1"), s("1"), reads={(1, 1)}), view(s(), s("1"), s("1")), False),
    ("ReadNeverTruncated", view(s("1"), s("1"), s(), reads={(1, 1)}), view(s(), s("1"), s()), True),
    ("ReadNeverTruncated", view(s("12"), s("1"), s(), reads={(1, 1)}), view(s("1"), s("1"), s()), False),
    # ReadNeverLost: a newly elected leader with or without the read entry; one re-elected in a new
    # generation; one that was a leader of the same generation already; one that is down
    ("ReadNeverLost", view(s("1"), s(), s(), reads={(1, 1)}), view(s("1"), leader(generation=2), s()), True),
    ("ReadNeverLost", view(s("1"), s("1"), s(), reads={(1, 1)}), view(s("1"), leader("1", generation=2), s()),
     False),
    ("ReadNeverLost", view(leader(""), s(), s(), reads={(1, 1)}), view(leader(""), s(), s()), False),
    ("ReadNeverLost", view(leader(""), s(), s(), reads={(1, 1)}), view(leader("", generation=2), s(), s()), True),
    ("ReadNeverLost", view(s(), s(), s(), reads={(1, 1)}), view(leader(alive=False), s(), s()), False),
    ("ReadNeverLost", view(leader("", alive=False), s(), s(), reads={(1, 1)}), view(leader(""), s(), s()),
     True),  # a restarted leader is newly elected
    ("ReadNeverLost", view(s("2"), s(), s(), reads={(1, 1)}), view(leader("2", generation=2), s(), s()), True),
    ("ReadNeverLost", view(s("12"), s(), s(), reads={(1, 1)}), view(leader("12", generation=2), s(), s()),
     False),  # it holds the read entry 1@g1 below its last one
    ("ReadNeverLost", view(s(generation=2), s(), s(), reads={(1, 1)}), view(leader(generation=2), s(), s()),
     True),  # a follower of generation 2 elected in it: newly a leader, without the entry
    # LeaderChangeWithUncommitted (sometimes): an older leader holding entries past its HWM
    ("LeaderChangeWithUncommitted", view(leader("1", 0), s(), s()), view(leader("1", 0), leader(generation=2), s()),
     True),
    ("LeaderChangeWithUncommitted", view(leader("1", 1), s(), s()), view(leader("1", 1), leader(generation=2), s()),
     False),
    ("LeaderChangeWithUncommitted", view(leader("1", 0), s(), s()), view(leader("1", 0), leader(), s()),
     False),  # the same generation is no newer leader
    ("LeaderChangeWithUncommitted", view(leader("1", 0), leader(generation=2), s()),
     view(leader("1", 0), leader(generation=2), s()), False),  # no change: it led generation 2 already
    ("LeaderChangeWithUncommitted", view(leader("1", 0), s(), s()),
     view(leader("1", 0), leader(generation=2, alive=False), s()), False),  # down
    ("LeaderChangeWithUncommitted", view(leader("1", 0), s(), s()), view(leader("1", 0), s(generation=2), s()),
     False),  # a follower of a newer generation, no leader yet
    ("LeaderChangeWithUncommitted", view(s("1", 0), s(), s()), view(s("1", 0), leader(generation=2), s()),
     False),  # the server with entries past its HWM was no leader
    ("LeaderChangeWithUncommitted", view(leader("1", 0), s(generation=2), s()),
     view(leader("1", 0), leader(generation=2), s()), True),  # a follower of generation 2 becomes its leader
    ("LeaderChangeWithUncommitted", view(leader("1", 0), s(), s()), view(leader("1", 0, generation=2), s(), s()),
     False),  # the old leader itself, re-elected
    ("LeaderChangeWithUncommitted", view(leader("1", 0, generation=2), leader(), s()),
     view(leader("1", 0, generation=2), leader(generation=3), s()), True),  # a stale leader elected anew
    # CrashAndRejoin (sometimes): down, then up
    ("CrashAndRejoin", view(s(alive=False), s(), s()), view(s(), s(), s()), True),
    ("CrashAndRejoin", view(s(), s(), s()), view(s(alive=False), s(), s()), False),
    ("CrashAndRejoin", view(s(alive=False), s(), s()), view(s(alive=False), s(), s()), False),  # still down
]


@pytest.mark.parametrize("name, before, after, found", STEP)
def test_a_step_property_at_its_boundaries(name, before, after, found):
    assert BY_NAME[name].on == "step"
    finding = BY_NAME[name].check(before, after)
    assert (finding is not None) == found, finding


# A variant's replication quorum (properties.catalogue.at_quorum): the two properties that count a
# quorum count `needed` servers instead of a majority.
@pytest.mark.parametrize("name, needed, before, after, found", [
    ("CommittedOnQuorum", 3, None, view(s("1", 1), s("1"), s()), True),
    ("CommittedOnQuorum", 3, None, view(s("1", 1), s("1"), s("1")), False),
    ("CommittedOnQuorum", 1, None, view(s("1", 1), s(), s()), False),
    ("ReadNeverTruncated", 3, view(s("1"), s("1"), s("1"), reads={(1, 1)}), view(s(), s("1"), s("1")), True),
    ("ReadNeverTruncated", 1, view(s("1"), s("1"), s(), reads={(1, 1)}), view(s(), s("1"), s()), False),
])
def test_a_variants_quorum_is_what_the_quorum_properties_count(name, needed, before, after, found):
    check = next(p for p in at_quorum(CATALOGUE, needed) if p.name == name).check
    finding = check(after) if before is None else check(before, after)
    assert (finding is not None) == found, finding


# What a finding says, one row per property that names an entry or a server.
@pytest.mark.parametrize("name, before, after, text", [
    ("HwmNeverTruncated", view(s("11", 2), s(), s()), view(s("1", 1), s(), s()),
     "S1 removed entry 2@g1, at or below its own high-water mark 2"),
    ("UncommittedTruncated", view(s("11", 1), s(), s()), view(s("1", 1), s(), s()), "S1 truncated uncommitted entry 2@g1"),
    ("ReadNeverTruncated", view(s("11"), s("11"), s(), reads={(2, 1)}), view(s("1"), s("11"), s()),
     "S1 removed entry 2@g1, which a client has read; only 1 of 3 servers still store it"),
    ("LeaderChangeWithUncommitted", view(leader("11", 1), s(), s()), view(leader("11", 1), leader(generation=2), s()),
     "S2 became leader of generation 2 while S1 held uncommitted entries 2..2"),
    ("LogMatching", None, view(s("1234"), s("1335"), s()), "S1 and S2 share entry 3@g3 but their logs differ before it"),
    ("CommittedOnQuorum", None, view(s("12", 2), s("1"), s()),
     "S1 counts entry 2@g2 as committed (hwm=2) but only 1 of 3 servers store it"),
])
def test_a_finding_names_the_entry_and_the_servers(name, before, after, text):
    check = BY_NAME[name].check
    assert (check(after) if before is None else check(before, after)) == text


def test_every_property_has_rows_that_report_and_rows_that_do_not():
    # Every property a trace may name (properties.acked.ALL_BY_NAME: the catalogue's, and acked.py's,
    # leases.py's and step_down.py's, whose rows are in test_catalogue_boundaries_systems.py; its
    # own test does the same for the ledger's restatements), so that a new one without rows fails here.
    from hwm.properties.acked import ALL_BY_NAME
    from tests.properties import test_catalogue_boundaries_systems as systems

    assert {p.name for p in CATALOGUE} <= set(ALL_BY_NAME)
    rows = ([(name, found) for name, _, found in STATE + systems.STATE]
            + [(name, found) for name, _, _, found in STEP + systems.STEP])
    assert {(name, found) for name in ALL_BY_NAME for found in (True, False)} == set(rows)
