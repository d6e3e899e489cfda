"""The z3 proofs (`hwm prove`): quorum arithmetic, the inductive invariant, bounded model checking.

Default run (about half a minute of CPU): the quorum proofs up to N=15, raft's
inductive invariant at N=3 and L=2 (and its safe variants), a reachable CTI for three
broken presets, BMC = breadth-first lengths for every broken preset but
raft-any-generation-commit (11 steps deep), the encoding against `model/actions.py` on
sampled states, and the command's exit codes. `pytest -m deep` adds the other broken
presets' CTIs, raft-any-generation-commit's BMC, every property's BMC length, N=4
induction and a larger conformance sample (N=5: tests/proofs/test_raft_induction.py).
"""

from __future__ import annotations

import random

import pytest
import z3

from hwm.model.raft import RaftModel
from hwm.checker.engine import Sampler
from hwm.checker.run import CheckRequest, run as search
from hwm.proofs.encodings import partitioned
from hwm.proofs.plan import Plan, expected_broken, run, unencoded
from hwm.proofs.bmc import bmc
from hwm.proofs.induction import Explorer, check_induction, induction_proofs, shape, no_commits
from hwm.proofs.progress import Ledger
from hwm.proofs.quorum import quorum_proofs, seed_index_counterexample
from hwm.proofs.symbolic import ALWAYS_CHECKED, Encoding
from hwm.model.state import FOLLOWER, LEADER, Config, Server, State, initial_state
from hwm.properties import quorum
from hwm.properties.catalogue import violations
from hwm.properties.protocol import MUTANTS, PRESETS, presets_of

# The raft presets whose model is the rpc network's, with an invariant: the lease presets partition
# (tests/proofs/test_raft_partitions.py), the other systems have their own tests.
RAFT_PRESETS = [name for name in presets_of("raft")
                if unencoded(PRESETS[name].protocol) is None and partitioned(PRESETS[name].protocol) is None]
BROKEN = [name for name in RAFT_PRESETS if PRESETS[name].broken and name != "raft-seed-quorum"]
SAFE = [name for name in RAFT_PRESETS if not PRESETS[name].broken]


# ------------------------------------------------------------------ quorum
# Up to 11 by default (2.4 s of z3); 15, `hwm prove`'s default --max-n, under -m deep (5 s).
@pytest.mark.parametrize("max_n", [11, pytest.param(15, marks=pytest.mark.deep)])
def test_quorum_proofs_up_to(max_n):
    proofs = quorum_proofs(max_n)
    assert [p.name for p in proofs if not p.ok] == []
    seed = proofs[-1]
    assert sorted(int(n) for n in seed.data["counterexamples"]) == list(range(2, max_n + 1, 2))


def test_seed_index_smallest_even_counterexample_agrees_with_the_code():
    assert seed_index_counterexample(2) == [0, 1]
    assert seed_index_counterexample(4) == [0, 0, 1, 1]
    for n in (1, 3, 5, 15):
        assert seed_index_counterexample(n) is None
    cex = seed_index_counterexample(2)
    picked = quorum.quorum_index("seed-index", cex)
    assert picked == 1 and quorum.holders(cex, picked) == 1 < quorum.majority(2)
    assert quorum.quorum_index("majority", cex) == 0


# --------------------------------------------------- encoding = the model
def _sample(protocol, config, count, seed=0, limit=6000):
    """`count` states spread over the first `limit` reachable ones (breadth-first, no symmetry)."""
    sampler = Sampler(limit)
    search(CheckRequest("model", symmetry=False, max_states=limit, properties=()), model=RaftModel(protocol, config),
           visitors=[sampler])
    assert len(sampler.states) == limit  # these bounds reach more: the sample is spread over `limit`
    return random.Random(seed).sample(sampler.states, min(count, len(sampler.states)))


def _conformance(name, count):
    protocol = PRESETS[name].protocol
    bounded = Config(max_generation=3, max_log=2, max_crashes=1)
    states = _sample(protocol, bounded, count)
    bmc_encoding = Encoding(protocol, 3, 2, max_generation=3, max_crashes=1, bitvectors=True)
    assert bmc_encoding.disagreements(RaftModel(protocol, bounded), states) == []
    # The induction encoding bounds only the log: compare with a model whose other bounds never bite.
    roomy = RaftModel(protocol, Config(max_generation=99, max_log=2, max_crashes=99))
    single_reads = [s for s in states if len({i for i, _ in s.reads}) == len(s.reads)]
    assert Encoding(protocol, 3, 2).disagreements(roomy, single_reads) == []


@pytest.mark.parametrize("name", ["raft"])  # the other presets (seed included) in the deep test below
def test_encoding_agrees_with_the_model(name):
    _conformance(name, 60)


@pytest.mark.deep
@pytest.mark.parametrize("name", RAFT_PRESETS)
def test_encoding_agrees_with_the_model_deep(name):
    _conformance(name, 400)


# ------------------------------------------- property encodings = the catalogue
def _server(generation, log=(), hwm=0, leader=False, alive=True, match=(0, 0, 0)):
    return Server(generation, LEADER if leader else FOLLOWER, tuple(log), hwm, alive, match if leader else ())


def _cluster(*servers, reads=(), crashes=0):
    return State(tuple(servers), frozenset(reads), crashes, ())


# Hand-built pairs (before, after) that make the properties no reachable state of a preset
# violates fire, and the quorum boundary of ReadNeverTruncated from both sides.
HAND_BUILT = [
    # Two live leaders of generation 2 (OneLeaderPerGeneration), then one of them down (holds).
    (None, _cluster(_server(2, [1], leader=True, match=(0, 1, 0)), _server(2, [1], leader=True), _server(1, [1]))),
    (None, _cluster(_server(2, [1], leader=True), _server(2, [1], leader=True, alive=False), _server(1))),
    # Both logs hold 2@g2 at index 2 but differ at index 1 (LogMatching), then agree (holds).
    (None, _cluster(_server(2, [1, 2]), _server(2, [2, 2]), _server(2))),
    (None, _cluster(_server(2, [1, 2]), _server(2, [1, 3]), _server(3, [1, 3]))),
    # Two entries read at index 1 (ReadsAgree); a HWM past the end of a log (HwmWithinLog).
    (None, _cluster(_server(2, [2], hwm=1), _server(2, [2], hwm=1), _server(1, [1], hwm=1), reads={(1, 1), (1, 2)})),
    (None, _cluster(_server(1, [1], hwm=2), _server(1, [1]), _server(1))),
    # S3 becomes leader of generation 2 without the read entry 1@g1 (ReadNeverLost).
    (_cluster(_server(1, [1], hwm=1), _server(1, [1], hwm=1), _server(1), reads={(1, 1)}),
     _cluster(_server(2, [1], hwm=1), _server(2, [1], hwm=1), _server(2, leader=True), reads={(1, 1)})),
    # A read entry on all three; S3 (HWM 0) drops it: two of three still hold it (holds) ...
    (_cluster(_server(1, [1], hwm=1), _server(1, [1], hwm=1), _server(1, [1]), reads={(1, 1)}),
     _cluster(_server(1, [1], hwm=1), _server(1, [1], hwm=1), _server(2, [2]), reads={(1, 1)})),
    # ... S2 (HWM 1) drops it as well: one of three (ReadNeverTruncated, HwmNeverTruncated).
    (_cluster(_server(1, [1], hwm=1), _server(1, [1], hwm=1), _server(2, [2]), reads={(1, 1)}),
     _cluster(_server(1, [1], hwm=1), _server(2, [2], hwm=0), _server(2, [2]), reads={(1, 1)})),
    # A down server's log still counts: S3 is down holding it when S2 drops it (holds).
    (_cluster(_server(1, [1], hwm=1), _server(1, [1]), _server(1, [1], alive=False), reads={(1, 1)}),
     _cluster(_server(1, [1], hwm=1), _server(2, []), _server(1, [1], alive=False), reads={(1, 1)})),
]


def _encoded_verdicts(enc, pairs):
    """For each (before, after): the names of the always properties z3's encoding calls violated."""
    s, t = enc.fresh("before"), enc.fresh("after")
    formulas = {name: enc.violation(name, s, t) for name in ALWAYS_CHECKED}
    variables = enc.variables(s) + enc.variables(t)
    solver, out = z3.Solver(), []
    for before, after in pairs:
        solver.push()
        solver.add([v == x for v, x in zip(variables, enc.values(before) + enc.values(after))])
        assert solver.check() == z3.sat
        m = solver.model()
        out.append({name for name, f in formulas.items() if z3.is_true(m.eval(f, model_completion=True))})
        solver.pop()
    return out


def _catalogue_verdicts(pairs):
    return [set(violations(before, after)) & set(ALWAYS_CHECKED) for before, after in pairs]


def _sampled_pairs(name, count):
    protocol = PRESETS[name].protocol
    config = Config(max_generation=3, max_log=2, max_crashes=1)
    model = RaftModel(protocol, config)
    return [(state, succ) for state in _sample(protocol, config, count) for _, succ in model.successors(state)]


def _encodings_agree_with_the_catalogue(names, count):
    hand_built = [(before or after, after) for before, after in HAND_BUILT]
    pairs = [pair for name in names for pair in _sampled_pairs(name, count)] + hand_built
    expected = _catalogue_verdicts(pairs)
    # The property encodings do not depend on the protocol's flags: one encoding judges every sample.
    bounded = Encoding(PRESETS["raft"].protocol, 3, 2, max_generation=3, max_crashes=1, bitvectors=True)
    assert _encoded_verdicts(bounded, pairs) == expected
    single_reads = [(b, a) for b, a in pairs if len({i for i, _ in a.reads}) == len(a.reads)]
    assert _encoded_verdicts(Encoding(PRESETS["raft"].protocol, 3, 2), single_reads) == _catalogue_verdicts(single_reads)
    return expected


def test_property_encodings_agree_with_the_catalogue():
    """Each always property's z3 encoding (bounded, and unbounded as induction uses it) says what
    the catalogue says, on steps sampled from the explorer and on hand-built states."""
    expected = _encodings_agree_with_the_catalogue(["seed", "raft-any-generation-commit"], 15)
    # The sample is not vacuous: every always property is violated somewhere and holds somewhere.
    fired = set().union(*expected)
    assert fired == set(ALWAYS_CHECKED), set(ALWAYS_CHECKED) - fired
    assert any(not e for e in expected)


@pytest.mark.deep
def test_property_encodings_agree_with_the_catalogue_deep():
    _encodings_agree_with_the_catalogue(list(PRESETS), 200)


# --------------------------------------------------------------- induction
def _inductive(name):
    result = check_induction(PRESETS[name].protocol, servers=3, max_log=2, name=name)
    assert result.init_failed == [] and result.safety_failed == []
    assert [c.describe() for c in result.ctis] == []


def test_raft_is_inductive_at_3_servers_log_2():
    _inductive("raft")


def test_a_long_obligation_is_said_to_be_still_running():
    lines = []
    ledger = Ledger(report=lines.append)
    with ledger.obligation("bmc", "bmc raft: ReadNeverTruncated at depth 9"):
        ledger.heartbeat(60)  # a line was just written: nothing to add
        ledger._last_line -= 61
        ledger.heartbeat(60)
    ledger.heartbeat(0)  # nothing runs: nothing to say
    assert len(lines) == 3 and "bmc raft: ReadNeverTruncated at depth 9: still running (" in lines[1]
    assert "ReadNeverTruncated at depth 9: holds in " in lines[2]


def test_each_induction_obligation_is_recorded_with_its_cti():
    # One action keeps it short: IndInit, IndNext of that action, then Inv ⇒ each state property.
    ledger = Ledger()
    result = check_induction(PRESETS["raft-truncate-to-own-hwm"].protocol, name="own-hwm", actions=[("restart", 0)],
                             ledger=ledger)
    names = [o.name.removeprefix("induction own-hwm: ") for o in ledger.obligations]
    assert names == ["IndInit", "IndNext restart(S1)", "Inv ⇒ ReadsAgree", "Inv ⇒ HwmWithinLog",
                     "Inv ⇒ CommittedOnQuorum", "Inv ⇒ OneLeaderPerGeneration", "Inv ⇒ LogMatching"]
    verdicts = {o.name.removeprefix("induction own-hwm: "): o.verdict for o in ledger.obligations}
    assert verdicts == {**dict.fromkeys(names, "holds"), "IndNext restart(S1)": "fails"}
    restart = ledger.obligations[1]
    assert restart.cti == result.ctis[0].describe()
    assert restart.cti.startswith("counterexample to induction: restart(S1) breaks ")
    assert restart.to_json()["cti"] == restart.cti and restart.seconds > 0


# The safe variants differ from raft by one flag each; the explorer checks them in the default run
# (tests/properties/test_mutant_table.py), the invariant under -m deep.
@pytest.mark.deep
@pytest.mark.parametrize("name", [name for name in SAFE if name != "raft"] + ["raft-seed-quorum"])
def test_safe_variants_are_inductive_at_3_servers_log_2(name):
    _inductive(name)


def _reachable_cti(name, servers=3):
    proof = induction_proofs(name, PRESETS[name].protocol, broken=True, servers=servers, max_log=2)
    assert proof.ok, proof.detail
    assert proof.data["reachable"] is True
    assert "reachable: a real bug" in proof.detail
    return proof


@pytest.mark.parametrize("name", ["raft-truncate-to-own-hwm"])
def test_broken_presets_fail_with_a_reachable_cti(name):
    proof = _reachable_cti(name)
    # The CTI is printed as pre-state, action, post-state, one line per server.
    assert "before:" in proof.detail and "after:" in proof.detail and "S1 " in proof.detail


@pytest.mark.deep
@pytest.mark.parametrize("name", ["seed", "raft-any-generation-commit", "kip101", "raft-any-election",
                                  "raft-generation-mismatch", "raft-truncate-to-leader-hwm"])
def test_broken_presets_fail_with_a_reachable_cti_deep(name):
    _reachable_cti(name)


@pytest.mark.deep
def test_seed_quorum_fails_at_four_servers_with_a_reachable_cti():
    _reachable_cti("raft-seed-quorum", servers=4)


@pytest.mark.deep
def test_raft_is_inductive_at_four_servers():
    assert check_induction(PRESETS["raft"].protocol, servers=4, max_log=2).ok


# The configuration of the 12-step trace below: raft at 5 servers (tests/pinned.py pins its space).
FIVE_SERVERS = Config(servers=5, max_generation=3, max_log=2, max_crashes=0)


def test_raft_at_five_servers_drops_a_lagging_copy_of_a_read_entry_and_loses_nothing():
    """A stale leader (S3, generation 2) overwrites a read entry on a lagging follower (S5,
    generation 1, HWM 0) while three of five servers still hold it. Read literally ("no server
    ever removes an entry a client has read") this is a violation; the refined
    ReadNeverTruncated (a removal counts when it leaves the entry on fewer than a quorum) and
    HwmNeverTruncated (S5 never counted the entry as committed) both hold, at every step."""
    a, b, c, d, e = range(5)
    actions = [("elect", a, (a, b, e)), ("write", a), ("replicate", a, e), ("elect", c, (b, c, d)), ("write", c),
               ("replicate", a, b), ("elect", a, (a, b, d)), ("write", a), ("replicate", a, b),
               ("replicate", a, d), ("read", a), ("replicate", c, e)]
    model = RaftModel(PRESETS["raft"].protocol, FIVE_SERVERS)
    states = [initial_state(FIVE_SERVERS)]
    for action in actions:
        assert model.why_not(states[-1], action) is None, action
        states.append(model.apply(states[-1], action))
    before, after = states[-2], states[-1]
    # The literal reading fires on the last step: S5 lost 1@g1, which a client has read ...
    assert (1, 1) in before.reads and before.servers[e].log[:1] == (1,) and after.servers[e].log[:1] == (2,)
    assert before.servers[e].hwm == 0
    # ... but three servers still store it, and no property of the catalogue is violated anywhere.
    assert sum(1 for s in after.servers if s.log[:1] == (1,)) == 3
    for b_state, a_state in zip(states, states[1:]):
        assert violations(b_state, a_state) == {}


# Raft's invariant at five servers, and each conjunct on explored states: tests/proofs/test_raft_induction.py.


def test_explorer_shapes_rename_generations_in_order():
    config = Config(max_log=2, max_generation=3)
    explorer = Explorer(PRESETS["raft"].protocol, config, max_states=50)
    init = initial_state(config)
    assert explorer.find({shape(init, no_commits(2))}) is not None
    assert explorer.path(explorer.find({shape(init, no_commits(2))})) == []


# --------------------------------------------------------------------- BMC
def _bmc_matches_bfs(name, depth=12):
    protocol, config = PRESETS[name].protocol, Config()
    report = search(CheckRequest(name), model=RaftModel(protocol, config))
    expected = report.results["ReadNeverTruncated"].length
    found = bmc(protocol, config, ("ReadNeverTruncated",), max_depth=depth)["ReadNeverTruncated"]
    assert found.length == expected, (name, found.steps, report.results["ReadNeverTruncated"].steps)
    # Printed in the explorer's step notation.
    assert found.steps[0].startswith("elect(S1, {S1,") or found.steps[0].startswith("crash(S1")


# The default run unrolls the cheaper half (seconds each); the deep test below takes every broken preset.
BMC_DEEP_ONLY = {"raft-any-generation-commit", "seed", "raft-generation-mismatch", "raft-truncate-to-leader-hwm",
                 "raft-any-election"}  # the last: 4 s of z3


@pytest.mark.parametrize("name", [name for name in BROKEN if name not in BMC_DEEP_ONLY])
def test_bmc_shortest_violation_equals_bfs(name):
    _bmc_matches_bfs(name)


@pytest.mark.deep
@pytest.mark.parametrize("name", BROKEN)
def test_bmc_shortest_violation_equals_bfs_deep(name):
    _bmc_matches_bfs(name)


@pytest.mark.deep
@pytest.mark.parametrize("name", BROKEN)
def test_bmc_every_property_equals_bfs(name):
    protocol, config = PRESETS[name].protocol, Config()
    report = search(CheckRequest(name), model=RaftModel(protocol, config))
    depth = 9
    found = bmc(protocol, config, tuple(r for r in report.results if report.results[r].kind == "always"),
                max_depth=depth)
    for prop, result in found.items():
        theirs = report.results[prop].length
        assert result.length == (theirs if theirs is not None and theirs <= depth else None), prop


@pytest.mark.deep
def test_bmc_seed_quorum_at_four_servers():
    protocol, config = PRESETS["raft-seed-quorum"].protocol, Config(servers=4)
    explored = search(CheckRequest("raft-seed-quorum"), model=RaftModel(protocol, config))
    expected = explored.results["CommittedOnQuorum"].length
    assert bmc(protocol, config, ("CommittedOnQuorum",), max_depth=6)["CommittedOnQuorum"].length == expected


def test_bmc_raft_finds_nothing_within_a_few_steps():
    assert bmc(PRESETS["raft"].protocol, Config(), ("ReadNeverTruncated",), max_depth=6)[
        "ReadNeverTruncated"].length is None


# ------------------------------------------------------ plan
def test_expectations_follow_the_catalogue():
    assert not expected_broken(PRESETS["raft"].protocol, 3)
    assert all(expected_broken(PRESETS[name].protocol, 3) for name in BROKEN)
    assert not expected_broken(PRESETS["raft-seed-quorum"].protocol, 3)
    assert expected_broken(PRESETS["raft-seed-quorum"].protocol, 4)
    assert expected_broken(PRESETS["raft-seed-quorum"].protocol, 2)
    assert set(MUTANTS) - {"raft-seed-quorum", "raft-lease-reads-without-check-quorum"} <= set(BROKEN) | set(SAFE)


def test_every_preset_is_encoded_and_the_lease_presets_partition():
    for name in ("raft-lease-reads", "raft-lease-reads-without-check-quorum"):
        assert unencoded(PRESETS[name].protocol) is None and partitioned(PRESETS[name].protocol) is not None
    # Every system is encoded now, BookKeeper's ledgers and Kafka's and ZAB's partitioned presets too.
    assert unencoded(PRESETS["kafka"].protocol) is None and unencoded(PRESETS["bookkeeper"].protocol) is None
    assert unencoded(PRESETS["kafka-without-controller-fencing"].protocol) is None
    assert unencoded(PRESETS["zab-step-down"].protocol) is None
    assert unencoded(PRESETS["bookkeeper-striped"].protocol) is None


def test_run_a_small_plan():
    proofs = run(Plan("kip101", PRESETS["kip101"].protocol, ("bmc",), depth=8))
    assert [p.ok for p in proofs] == [True]
    assert proofs[0].data["results"]["ReadNeverTruncated"]["length"] == 6
