"""BookKeeper's recovery writes back before it closes (model/bookkeeper.py, `_unwritable`).

LedgerRecoveryOp re-adds the entries it read after the highest LAC the fencing answers reported and
closes the ledger only once an ack quorum of each one's write set acknowledged them. The model's
closing read waits until that many bookies are up. Without the wait, on four bookies (AQ = 3) three
crashes let recovery close from the one bookie left: an entry it recovered is then on 3 of 6 servers
(CommittedOnQuorum, 10 steps); on three bookies the two clients' copies hid it.
"""

from dataclasses import replace

import pytest

from hwm.checker.run import CheckRequest, run as search
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import BOOKKEEPER, PRESETS
from tests.model.test_bookkeeper_ledger import run as run_steps

S1, S2, S3, S4 = 0, 1, 2, 3

# The shortest counterexample the model had without the wait (hwm check --protocol bookkeeper
# --servers 4 --max-crashes 3 --max-log 1): the last read would close from S1 alone.
BEFORE_THE_CLOSE = [("add",), ("send_add", S1), ("fence", S1), ("fence", S2), ("recovery_read", S1),
                    ("recovery_read", S2), ("crash", S2), ("crash", S3), ("crash", S4)]


def model(servers=4, max_log=1, max_crashes=3, **flags):
    return build_model(replace(BOOKKEEPER, **flags), Config(servers=servers, max_log=max_log, max_crashes=max_crashes))


def run(m, actions):
    return run_steps(m, *actions)


def violated(m, state):
    return sorted(p.name for p in m.properties if p.on == "state" and p.kind == "always" and p.check(state))


def test_recovery_does_not_close_from_fewer_bookies_than_an_ack_quorum():
    m = model()
    s = run(m, BEFORE_THE_CLOSE)
    assert m.why_not(s, ("recovery_read", S1)) == (
        "recovery cannot write entry 1 back to an ack quorum: 1 of its write set are up (it needs 3; "
        "recovery's own ensemble changes are not modelled)")
    # Two bookies back: the close writes entry 1 back to S1, S2 and S3, and the ledger keeps it.
    s = run(m, BEFORE_THE_CLOSE + [("restart", S2), ("restart", S3)])
    s = m.apply(s, ("recovery_read", S1))
    assert m.closed(s) and s.servers[m.recovery].log == (1,)
    assert [b.log for b in s.servers[:4]] == [(1,), (1,), (1,), ()]
    assert violated(m, s) == []


def test_only_the_entries_recovery_read_wait_for_the_write_back():
    # Entry 1 is confirmed (S1 and S2 and S3 hold it, S1 reports LAC 1): nothing is written back, so
    # recovery closes from two live bookies' "no such entry" answers, as BookKeeper does.
    m = model(max_log=2)
    s = run(m, [("add",), ("send_add", S1), ("send_add", S2), ("send_add", S3), ("send_add", S1),
                ("fence", S1), ("fence", S4), ("crash", S2), ("crash", S3)])
    assert s.servers[S1].hwm == 1 and m.recovery_start(s) == 1
    s = run(m, [("add",), ("send_add", S1), ("send_add", S2), ("send_add", S3), ("send_add", S1),
                ("fence", S1), ("fence", S4), ("crash", S2), ("crash", S3), ("recovery_read", S1),
                ("recovery_read", S4)])
    assert m.closed(s) and s.servers[m.recovery].log == (1,)
    assert violated(m, s) == []


def test_the_wait_applies_to_a_striped_ledger_per_write_set():
    # E = 3, WQ = 2, AQ = 2: entry 1's write set is S1, S2; with S2 down recovery cannot close after it.
    m = model(servers=3, max_crashes=1, ensemble_size=3, write_quorum=2, ack_quorum=2)
    s = run(m, [("add",), ("send_add", S1), ("fence", S1), ("fence", S2), ("recovery_read", S1), ("crash", S2)])
    assert m.why_not(s, ("recovery_read", S2)) == "S2 is down"
    assert m.why_not(s, ("recovery_read", S3)).startswith("recovery cannot write entry 1 back to an ack quorum: "
                                                           "1 of its write set are up")


@pytest.mark.deep
def test_the_safe_preset_holds_on_four_bookies_with_three_crashes_to_depth_ten():
    """The counterexample's bounds, cut at its length, on the reference backend (17 s): every state
    within 10 steps keeps every property (4 bookies, one entry, three crashes)."""
    report = search(CheckRequest("bookkeeper", max_depth=10), model=model())
    assert report.depth == 10
    assert {name for name, r in report.results.items() if r.found and r.kind == "always"} == set()


@pytest.mark.deep
def test_the_safe_preset_holds_on_four_bookies_with_three_crashes():
    """`hwm check --protocol bookkeeper --servers 4 --max-crashes 3 --max-log 1` on the compiled backend
    (its counts are pinned in tests/pinned.py; the reference backend's equal them)."""
    report = search(CheckRequest("bookkeeper", successors="fast"), model=model())
    assert report.complete
    assert {name for name, r in report.results.items() if r.found and r.kind == "always"} == set()
