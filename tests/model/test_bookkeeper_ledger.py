"""BookKeeper's ledger parameters and ensemble changes (model/bookkeeper.py, properties/ledger.py).

Each rule on small hand-driven runs, taken from the sources the model cites: BookKeeper's protocol
page (ensemble, write quorum, ack quorum, round-robin striping), Vanlightly's TLA+ specification
(quorum coverage: E - AQ + 1 fencing answers over the ensemble, WQ - AQ + 1 "no such entry" answers
over the entry's write set; ChangeEnsemble's version check) and apache/bookkeeper issue 1591.
"""

import json
from dataclasses import replace

import pytest

from hwm.checker.run import CheckRequest, run as search
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.acked import WITH_ACKED
from hwm.properties.ledger import Ledger
from hwm.properties.protocol import BOOKKEEPER, PRESETS, Protocol, ProtocolError
from hwm.properties.trace import load
from hwm.counterexamples.build import HERE as CATALOGUE

S1, S2, S3 = 0, 1, 2


def model(servers=3, max_log=2, max_crashes=1, **flags):
    return build_model(replace(BOOKKEEPER, **flags), Config(servers=servers, max_log=max_log, max_crashes=max_crashes))


def run(m, *actions):
    state = m.initial_state()
    for action in actions:
        reason = m.why_not(state, action)
        assert reason is None, (action, reason)
        state = m.apply(state, action)
    return state


def props(m, state):
    return {p.name: p.check(state) for p in m.properties if p.on == "state" and p.kind == "always"}


def test_striping_is_round_robin_over_the_fragments_ensemble():
    # DistributionSchedule: BookKeeper's entry e-1 goes to positions (e-1), (e-1)+1, ... mod E.
    ledger = Ledger(bookies=4, ensemble_size=3, write_quorum=2, ack_quorum=2)
    fragments = ledger.fragments(((3, (0, 3, 2)),))  # S4 replaced S2 from entry 3 on
    assert [ledger.write_set(fragments, e) for e in (1, 2, 3, 4, 5)] == [(0, 1), (1, 2), (2, 0), (0, 3), (3, 2)]


def test_the_lac_counts_ack_quorum_bookies_of_each_entrys_write_set():
    m = model(ensemble_size=3, write_quorum=2, ack_quorum=2)
    s = run(m, ("add",), ("add",), ("send_add", S2))
    assert s.servers[S2].log == (1, 1)  # S2 is in the write sets of entries 1 (S1,S2) and 2 (S2,S3)
    s = run(m, ("add",), ("add",), ("send_add", S2), ("send_add", S1))
    assert s.servers[S1].log == (1,) and s.servers[m.writer].hwm == 1  # entry 2 still lacks S3
    s = m.apply(s, ("send_add", S3))
    assert s.servers[S3].log == (0, 1)  # a hole where entry 1 belongs to other bookies
    assert s.servers[m.writer].hwm == 2 and s.acked == {(1, 1), (2, 1)}
    assert not any(props(m, s).values())


def test_recovery_fences_e_minus_aq_plus_one_and_reads_each_entry_from_its_write_set():
    m = model(ensemble_size=3, write_quorum=2, ack_quorum=2)
    assert (m.fencing_needed, m.missing_needed) == (2, 1)
    s = run(m, ("add",), ("send_add", S1), ("fence", S1))
    assert "fencing has not completed: 1 of 3 bookies" in m.why_not(s, ("recovery_read", S1))
    s = m.apply(s, ("fence", S3))
    assert m.why_not(s, ("recovery_read", S3)) == "S3 is not in the write set of entry 1"
    # One "no such entry" of the write set (S1, S2) is enough: AQ = WQ, so entry 1 reached no ack quorum.
    s = m.apply(s, ("recovery_read", S2))
    assert m.closed(s) and s.servers[m.recovery].log == () and s.servers[S1].log == ()


def test_an_ensemble_change_replaces_the_crashed_bookie_from_the_first_unconfirmed_entry():
    m = model(ensemble_size=2)
    s = run(m, ("add",), ("send_add", S1), ("send_add", S2), ("add",), ("send_add", S1))
    assert s.servers[m.writer].hwm == 1
    assert m.why_not(s, ("change_ensemble", S2)) == "S2 is up: no write to it has failed"
    s = run(m, ("add",), ("send_add", S1), ("send_add", S2), ("add",), ("send_add", S1), ("crash", S2),
            ("change_ensemble", S2))
    assert (s.ensembles, s.stored) == (((2, (S1, S3)),), 1)  # in the ledger metadata
    assert m.why_not(m.apply(s, ("restart", S2)), ("send_add", S2)) == "S2 is not in the writer's current ensemble"
    s = m.apply(s, ("send_add", S3))
    assert s.servers[S3].log == (0, 1) and s.servers[m.writer].hwm == 2
    # Recovery now fences and reads the new ensemble, and finds entry 2 there.
    s = run(m, *[("add",), ("send_add", S1), ("send_add", S2), ("add",), ("send_add", S1), ("crash", S2),
                 ("change_ensemble", S2), ("send_add", S3), ("fence", S3)])
    assert m.why_not(m.apply(s, ("restart", S2)), ("fence", S2)) == \
        "S2 is not in the ensemble of the ledger's last fragment"
    s = run(m, *[("add",), ("send_add", S1), ("send_add", S2), ("add",), ("send_add", S1), ("crash", S2),
                 ("change_ensemble", S2), ("send_add", S3), ("fence", S3), ("recovery_read", S1), ("recovery_read", S1)])
    assert m.closed(s) and s.servers[m.recovery].log == (1, 1)
    assert not any(props(m, s).values())


def test_a_writer_that_blocks_add_completions_stops_when_recovery_changed_the_metadata_version():
    steps = [("add",), ("send_add", S1), ("fence", S1), ("crash", S2), ("change_ensemble", S2)]
    fixed = model(ensemble_size=2)
    s = run(fixed, *steps)
    assert s.servers[fixed.writer].role == "follower" and s.ensembles == ()
    assert fixed.why_not(s, ("send_add", S3)).startswith("the writer has been fenced out")
    # Issue 1591: the change stays the writer's own; its acknowledgement is judged by the metadata's ensemble.
    broken = model(ensemble_size=2, bookkeeper_block_add_completions=False)
    s = run(broken, *steps, ("send_add", S3))
    assert (s.ensembles, s.stored) == (((1, (S1, S3)),), 0) and s.acked == {(1, 1)}
    found = props(broken, s)
    assert "stored on only 1 of the 2 bookies the ledger metadata names" in found["AckedWriteNeverLost"]
    # The same bytes with the change in the metadata: S1 and S3 make the ack quorum, nothing is lost.
    assert not any(props(broken, s._replace(stored=1)).values())


def test_a_hole_is_no_entry_for_the_properties_that_walk_logs():
    from hwm.properties.catalogue import log_matching as catalogue_log_matching
    from hwm.properties.ledger import _removed_entries, log_matching
    from hwm.properties.snapshot import ServerSnapshot, Snapshot

    def bookie(*log):
        return ServerSnapshot(1, "follower", log, 0, True)

    # Filling a hole, or dropping a trailing one, removes nothing; dropping an entry does.
    assert list(_removed_entries(bookie(1, 0, 1), bookie(1, 1, 1))) == []
    assert list(_removed_entries(bookie(1, 0, 1), bookie(1,))) == [(3, 1)]
    # Two striped bookies share entry 3 and differ before it only where one has a hole.
    striped = Snapshot((bookie(1, 0, 1), bookie(0, 1, 1)), frozenset())
    ledger = Ledger(bookies=2, ensemble_size=2, write_quorum=1, ack_quorum=1)
    assert catalogue_log_matching(striped) and log_matching(ledger, striped) is None
    assert log_matching(ledger, Snapshot((bookie(1, 0, 1), bookie(2, 1, 1)), frozenset()))


def test_bad_ledger_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="ensemble_size=4 needs at least 4 bookies, not servers=3"):
        model(ensemble_size=4)
    with pytest.raises(ValueError, match=r"write_quorum=3 is larger than the ensemble \(ensemble_size=2\)"):
        model(ensemble_size=2, write_quorum=3)
    with pytest.raises(ValueError, match=r"ack_quorum=3 is larger than the write quorum \(write_quorum=2\)"):
        model(write_quorum=2, ack_quorum=3)
    with pytest.raises(ProtocolError, match="'write_quorum' does not apply to system 'raft'"):
        Protocol(write_quorum=2)
    with pytest.raises(ProtocolError, match="flag 'ack_quorum' cannot be 0"):
        replace(BOOKKEEPER, ack_quorum=0)


def test_the_default_ledger_keeps_the_catalogue_and_symmetry():
    for m in (model(), model(ensemble_size=3, write_quorum=3, ack_quorum=2)):
        assert m.properties is WITH_ACKED and not m.striped
    # Striping gives bookies places: the reduction is the identity, and only there.
    striped = model(ensemble_size=3, write_quorum=2, ack_quorum=2)
    s = run(striped, ("add",), ("send_add", S2))
    assert striped.fingerprint(s, True) == striped.fingerprint(s, False)
    assert striped.decode(striped.encode(s, False)) == s
    plain = model()
    s = run(plain, ("add",), ("send_add", S2))
    assert plain.fingerprint(s, True) != plain.fingerprint(s, False)
    changed = run(model(ensemble_size=2), ("add",), ("send_add", S1), ("crash", S2), ("change_ensemble", S2))
    assert model(ensemble_size=2).decode(model(ensemble_size=2).encode(changed, False)) == changed


def test_hwm_check_says_symmetry_reduces_nothing_for_a_striped_ledger():
    from click.testing import CliRunner
    from hwm.cli import main

    def check(*args):
        return CliRunner().invoke(main, ["check", "--max-log", "0", "--successors", "reference", *args])

    striped = check("--protocol", "bookkeeper-striped")
    assert striped.exit_code == 0, striped.output
    assert "note: bookkeeper-striped: symmetry reduces nothing: striping and spare bookies" in striped.output
    assert "symmetry reduces nothing" not in check("--protocol", "bookkeeper").output
    assert "symmetry reduces nothing" not in check("--protocol", "bookkeeper-striped", "--no-symmetry").output


def test_itf_carries_bookkeepers_clients_and_ledger():
    from hwm.checker.itf_trace import itf_of_trace, trace_of_itf
    from hwm.properties import itf
    trace = load(CATALOGUE / "bookkeeper-unblocked-adds.json")
    doc = itf_of_trace(trace)
    assert doc["vars"][8:] == ["fenced", "responded", "negatives", "acked", "ensembles", "stored"]
    assert [name for name, _ in doc["states"][0]["generation"]["#map"]][-2:] == ["S4", "S5"]  # the two clients
    back = trace_of_itf(itf.parse(json.loads(itf.dumps(doc))))
    assert [s.to_json() for s in back.steps] == [s.to_json() for s in trace.steps]


# Every ledger of 2 to 4 bookies (E, WQ, AQ with AQ <= WQ <= E <= bookies) at one entry and one crash:
# the safe rules hold every always property and reach a read and an acknowledgement; without blocking
# add completions, every ledger with a spare bookie loses an acknowledged write: recovery begins with
# one fencing read (of a bookie that already stored the entry), and the replacement's acknowledgement
# stands in for the crashed bookie's, which the metadata still names.
LEDGERS = [(n, e, w, a) for n in (2, 3, 4) for e in range(1, n + 1) for w in range(1, e + 1) for a in range(1, w + 1)]
# Their distinct states (symmetry on: the identity wherever bookies have places), pinned: (bookies, E, WQ, AQ).
LEDGER_STATES = {
    (2, 1, 1, 1): 124, (2, 2, 1, 1): 228, (2, 2, 2, 1): 348, (2, 2, 2, 2): 434, (3, 1, 1, 1): 145,
    (3, 2, 1, 1): 396, (3, 2, 2, 1): 1430, (3, 2, 2, 2): 1980, (3, 3, 1, 1): 968, (3, 3, 2, 1): 2425,
    (3, 3, 2, 2): 2459, (3, 3, 3, 1): 1030, (3, 3, 3, 2): 2597, (3, 3, 3, 3): 1567, (4, 1, 1, 1): 166,
    (4, 2, 1, 1): 452, (4, 2, 2, 1): 1584, (4, 2, 2, 2): 2184, (4, 3, 1, 1): 1536, (4, 3, 2, 1): 4737,
    (4, 3, 2, 2): 4881, (4, 3, 3, 1): 11694, (4, 3, 3, 2): 30753, (4, 3, 3, 3): 21120, (4, 4, 1, 1): 4352,
    (4, 4, 2, 1): 9882, (4, 4, 2, 2): 8054, (4, 4, 3, 1): 17828, (4, 4, 3, 2): 39274, (4, 4, 3, 3): 21922,
    (4, 4, 4, 1): 2282, (4, 4, 4, 2): 7377, (4, 4, 4, 3): 11302, (4, 4, 4, 4): 3920,
}
UNBLOCKED_STATES = {
    (2, 1, 1, 1): 142, (3, 1, 1, 1): 163, (3, 2, 1, 1): 470, (3, 2, 2, 1): 1834, (3, 2, 2, 2): 2652,
    (4, 1, 1, 1): 184, (4, 2, 1, 1): 526, (4, 2, 2, 1): 1988, (4, 2, 2, 2): 2856, (4, 3, 1, 1): 1834,
    (4, 3, 2, 1): 6114, (4, 3, 2, 2): 6680, (4, 3, 3, 1): 15798, (4, 3, 3, 2): 46338, (4, 3, 3, 3): 29754,
}


@pytest.mark.deep
@pytest.mark.parametrize("n, e, w, a", LEDGERS, ids=lambda v: str(v))
def test_every_small_ledger_is_safe_and_issue_1591_shows_where_it_can(n, e, w, a):
    flags = dict(ensemble_size=e, write_quorum=w, ack_quorum=a)
    safe = search(CheckRequest("ledger"), model=model(servers=n, max_log=1, **flags))
    assert safe.violated == [] and safe.results["EntryRead"].found and safe.results["WriteAcknowledged"].found
    assert safe.states == LEDGER_STATES[n, e, w, a]
    if n > e:
        unblocked = search(CheckRequest("ledger"),
                           model=model(servers=n, max_log=1, bookkeeper_block_add_completions=False, **flags))
        assert "AckedWriteNeverLost" in unblocked.violated, (n, e, w, a, unblocked.violated)
        assert unblocked.states == UNBLOCKED_STATES[n, e, w, a]
    else:
        assert (n, e, w, a) not in UNBLOCKED_STATES  # no spare bookie: no ensemble change, the flag is inert


def test_the_pinned_ledgers_agree_with_the_presets_pins():
    from tests.pinned import PINNED
    # The default ledger of three bookies is E = WQ = 3, AQ = 2; the presets are ledgers of the table.
    for ledger, preset in (((3, 3, 3, 2), "bookkeeper"), ((3, 3, 2, 2), "bookkeeper-striped"),
                           ((3, 2, 2, 2), "bookkeeper-ensemble-change")):
        assert LEDGER_STATES[ledger] == PINNED[preset, 3, 4, 1, 1, "rpc", True]["states"]
    assert UNBLOCKED_STATES[3, 2, 2, 2] == PINNED["bookkeeper-unblocked-adds", 3, 4, 1, 1, "rpc", True]["states"]
    assert LEDGER_STATES[2, 2, 2, 2] == PINNED["bookkeeper", 2, 1, 1, 1, "rpc", True]["states"]


def test_the_presets_are_the_ledgers_they_say():
    assert PRESETS["bookkeeper-striped"].protocol == replace(BOOKKEEPER, ensemble_size=3, write_quorum=2, ack_quorum=2)
    assert PRESETS["bookkeeper-unblocked-adds"].protocol.differences(PRESETS["bookkeeper-ensemble-change"].protocol) \
        == {"bookkeeper_block_add_completions": False}
