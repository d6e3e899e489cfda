"""The z3 proofs (`hwm prove`): quorum arithmetic, the inductive invariant, bounded model checking.

Default run (about half a minute of CPU): the quorum proofs up to N=15, raft's
inductive invariant at N=3 and L=2 (and its safe variants), a reachable CTI for three
broken presets, BMC = breadth-first lengths for every broken preset but
raft-any-generation-commit (11 steps deep), the encoding against `model/actions.py` on
sampled states, and the command's exit codes. `pytest -m deep` adds the other broken
presets' CTIs, raft-any-generation-commit's BMC, every property's BMC length, N=4 and
N=5 induction and a larger conformance sample.
"""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from hwm.prove_cli import prove
from model.actions import Model
from model.checker import bfs
from model.engine import CheckOptions, Sampler, check
from model.proofs import Plan, expected_broken, run
from model.proofs_bmc import bmc, replay
from model.proofs_induction import Explorer, check_induction, induction_proofs, shape, no_commits
from model.proofs_quorum import quorum_proofs, seed_index_counterexample
from model.proofs_symbolic import Encoding
from model.state import Config, initial_state
from properties import quorum
from properties.protocol import MUTANTS, PRESETS

BROKEN = [name for name, p in PRESETS.items() if p.broken and name != "raft-seed-quorum"]
SAFE = [name for name, p in PRESETS.items() if not p.broken]


# ------------------------------------------------------------------ quorum
def test_quorum_proofs_up_to_15():
    proofs = quorum_proofs(15)
    assert [p.name for p in proofs if not p.ok] == []
    seed = proofs[-1]
    assert sorted(int(n) for n in seed.data["counterexamples"]) == list(range(2, 16, 2))


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
    check(Model(protocol, config), CheckOptions(symmetry=False, max_states=limit, properties=()), [sampler])
    assert len(sampler.states) == limit  # these bounds reach more: the sample is spread over `limit`
    return random.Random(seed).sample(sampler.states, min(count, len(sampler.states)))


def _conformance(name, count):
    protocol = PRESETS[name].protocol
    bounded = Config(max_generation=3, max_log=2, max_crashes=1)
    states = _sample(protocol, bounded, count)
    bmc_encoding = Encoding(protocol, 3, 2, max_generation=3, max_crashes=1, bitvectors=True)
    assert bmc_encoding.disagreements(Model(protocol, bounded), states) == []
    # The induction encoding bounds only the log: compare with a model whose other bounds never bite.
    roomy = Model(protocol, Config(max_generation=99, max_log=2, max_crashes=99))
    single_reads = [s for s in states if len({i for i, _ in s.reads}) == len(s.reads)]
    assert Encoding(protocol, 3, 2).disagreements(roomy, single_reads) == []


@pytest.mark.parametrize("name", ["raft", "seed"])
def test_encoding_agrees_with_the_model(name):
    _conformance(name, 60)


@pytest.mark.deep
@pytest.mark.parametrize("name", list(PRESETS))
def test_encoding_agrees_with_the_model_deep(name):
    _conformance(name, 400)


# --------------------------------------------------------------- induction
@pytest.mark.parametrize("name", SAFE + ["raft-seed-quorum"])
def test_safe_protocols_are_inductive_at_3_servers_log_2(name):
    result = check_induction(PRESETS[name].protocol, servers=3, max_log=2, name=name)
    assert result.init_failed == [] and result.safety_failed == []
    assert [c.describe() for c in result.ctis] == []


def _reachable_cti(name, servers=3):
    proof = induction_proofs(name, PRESETS[name].protocol, broken=True, servers=servers, max_log=2)
    assert proof.ok, proof.detail
    assert proof.data["reachable"] is True
    assert "reachable: a real bug" in proof.detail
    return proof


@pytest.mark.parametrize("name", ["seed", "raft-any-generation-commit", "raft-truncate-to-own-hwm"])
def test_broken_presets_fail_with_a_reachable_cti(name):
    proof = _reachable_cti(name)
    # The CTI is printed as pre-state, action, post-state, one line per server.
    assert "before:" in proof.detail and "after:" in proof.detail and "S1 " in proof.detail


@pytest.mark.deep
@pytest.mark.parametrize("name", ["kip101", "raft-any-election", "raft-generation-mismatch",
                                  "raft-truncate-to-leader-hwm"])
def test_broken_presets_fail_with_a_reachable_cti_deep(name):
    _reachable_cti(name)


@pytest.mark.deep
def test_seed_quorum_fails_at_four_servers_with_a_reachable_cti():
    _reachable_cti("raft-seed-quorum", servers=4)


@pytest.mark.deep
def test_raft_is_inductive_at_four_servers():
    assert check_induction(PRESETS["raft"].protocol, servers=4, max_log=2).ok


def test_raft_at_five_servers_truncates_a_read_entry():
    """Why the invariant stops at N=4: with 5 servers raft really violates ReadNeverTruncated.

    A stale leader (S3, generation 2) overwrites a committed, read entry on a lagging
    follower (S5, generation 1): allowed by Raft (S5 gets it back, ReadNeverLost holds),
    but a read entry was removed.
    """
    a, b, c, d, e = range(5)
    actions = [("elect", a, (a, b, e)), ("write", a), ("replicate", a, e), ("elect", c, (b, c, d)), ("write", c),
               ("replicate", a, b), ("elect", a, (a, b, d)), ("write", a), ("replicate", a, b),
               ("replicate", a, d), ("read", a), ("replicate", c, e)]
    replay(PRESETS["raft"].protocol, Config(servers=5, max_generation=3, max_log=2, max_crashes=0), actions,
           "ReadNeverTruncated")


@pytest.mark.deep
def test_raft_is_not_inductive_at_five_servers():
    result = check_induction(PRESETS["raft"].protocol, servers=5, max_log=2)
    assert result.ctis and any("ReadNeverTruncated" in f for f in result.safety_failed)


def test_explorer_shapes_rename_generations_in_order():
    config = Config(max_log=2, max_generation=3)
    explorer = Explorer(PRESETS["raft"].protocol, config, max_states=50)
    init = initial_state(config)
    assert explorer.find({shape(init, no_commits(2))}) is not None
    assert explorer.path(explorer.find({shape(init, no_commits(2))})) == []


# --------------------------------------------------------------------- BMC
def _bmc_matches_bfs(name, depth=12):
    protocol, config = PRESETS[name].protocol, Config()
    report = bfs(Model(protocol, config), name)
    expected = report.results["ReadNeverTruncated"].length
    found = bmc(protocol, config, ("ReadNeverTruncated",), max_depth=depth)["ReadNeverTruncated"]
    assert found.length == expected, (name, found.steps, report.results["ReadNeverTruncated"].steps)
    # Printed in the explorer's step notation.
    assert found.steps[0].startswith("elect(S1, {S1,") or found.steps[0].startswith("crash(S1")


@pytest.mark.parametrize("name", [name for name in BROKEN if name != "raft-any-generation-commit"])
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
    report = bfs(Model(protocol, config), name)
    depth = 9
    found = bmc(protocol, config, tuple(r for r in report.results if report.results[r].kind == "always"),
                max_depth=depth)
    for prop, result in found.items():
        theirs = report.results[prop].length
        assert result.length == (theirs if theirs is not None and theirs <= depth else None), prop


@pytest.mark.deep
def test_bmc_seed_quorum_at_four_servers():
    protocol, config = PRESETS["raft-seed-quorum"].protocol, Config(servers=4)
    expected = bfs(Model(protocol, config), "raft-seed-quorum").results["CommittedOnQuorum"].length
    assert bmc(protocol, config, ("CommittedOnQuorum",), max_depth=6)["CommittedOnQuorum"].length == expected


def test_bmc_raft_finds_nothing_within_a_few_steps():
    assert bmc(PRESETS["raft"].protocol, Config(), ("ReadNeverTruncated",), max_depth=6)[
        "ReadNeverTruncated"].length is None


# ------------------------------------------------------ plan and command
def test_expectations_follow_the_catalogue():
    assert not expected_broken(PRESETS["raft"].protocol, 3)
    assert all(expected_broken(PRESETS[name].protocol, 3) for name in BROKEN)
    assert not expected_broken(PRESETS["raft-seed-quorum"].protocol, 3)
    assert expected_broken(PRESETS["raft-seed-quorum"].protocol, 4)
    assert expected_broken(PRESETS["raft-seed-quorum"].protocol, 2)
    assert set(MUTANTS) - {"raft-seed-quorum"} <= set(BROKEN) | set(SAFE)


def test_run_a_small_plan():
    proofs = run(Plan("kip101", PRESETS["kip101"].protocol, ("bmc",), depth=8))
    assert [p.ok for p in proofs] == [True]
    assert proofs[0].data["results"]["ReadNeverTruncated"]["length"] == 6


def _invoke(*args):
    return CliRunner().invoke(prove, list(args))


def test_prove_command_exit_codes():
    ok = _invoke("--part", "quorum", "--max-n", "6")
    assert ok.exit_code == 0, ok.output
    assert ok.output.splitlines()[0].startswith("✓")
    # A broken preset whose counterexample is not found within the depth: exit 1.
    short = _invoke("--protocol", "kip101", "--part", "bmc", "--depth", "3", "--no-explorer")
    assert short.exit_code == 1, short.output
    assert short.output.splitlines()[0].startswith("✗")
    # Not a preset, so expected safe; BMC finds a violation: exit 1.
    unsafe = _invoke("--protocol", "raft,restart=truncate-to-own-hwm,hwm_durable=true,noop_on_election=true",
                     "--part", "bmc", "--depth", "7", "--no-explorer")
    assert unsafe.exit_code == 1, unsafe.output
    # raft-seed-quorum is broken exactly at even N (the quorum proof), two servers included.
    even = _invoke("--protocol", "raft-seed-quorum", "--servers", "2", "--part", "bmc", "--depth", "4")
    assert even.exit_code == 0, even.output
    assert _invoke("--protocol", "nope").exit_code == 2
    assert _invoke("--part", "everything").exit_code == 2
    assert _invoke("--servers", "0").exit_code == 2


def test_prove_command_json():
    result = _invoke("--protocol", "raft-truncate-to-own-hwm", "--part", "bmc", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    bmc_proof = data["proofs"][0]
    assert data["ok"] and bmc_proof["part"] == "bmc"
    assert bmc_proof["results"]["ReadNeverTruncated"]["length"] == 6
