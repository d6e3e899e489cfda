"""hwm's own replica under a variant's rules (docs/variants.md): it asks the same `Rules` object the
model asks (properties/rules.py), so under examples/variants/flexible.py's Flexible (Q1 = N - 1,
Q2 = 2) the implementation agrees with the model step by step, and under FlexibleTooSmall (Q2 = 1)
both break the same way. A vote rule the implementation cannot follow is refused by name."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis.stateful import run_state_machine_as_test

from hwm.bridge.conformance import Divergence, PropertyViolation, conformance_settings, hunt, machine_for
from hwm.bridge.replay import replay_on_impl
from hwm.bridge.simcluster import SimCluster, build_cluster
from hwm.checker.replay import judge, replay_on_model
from hwm.cli import main
from hwm.impl.core import Replica
from hwm.model.state import Config
from hwm.properties.protocol import resolve
from hwm.properties.rules import Rules
from hwm.properties.snapshot import LEADER
from hwm.properties.trace import load

ROOT = Path(__file__).resolve().parents[2]
FLEXIBLE = f"{ROOT}/examples/variants/flexible.py:Flexible"
TOO_SMALL = f"{ROOT}/examples/variants/flexible.py:FlexibleTooSmall"
# Four servers: Q1 = 3 (a majority too) and Q2 = 2 (one short of a majority), so the replication
# quorum is where Flexible and raft differ.
FOUR = Config(servers=4, max_generation=4, max_log=2, max_crashes=1, network="rpc")
FOUR_ASYNC = Config(servers=4, max_generation=3, max_log=2, max_crashes=1, network="async", channel_capacity=1)


def hwm(*args: str):
    return CliRunner().invoke(main, list(args))


def cluster(spec: str, servers: int) -> SimCluster:
    return build_cluster(resolve(spec)[1], Config(servers=servers, max_generation=4, max_log=2, max_crashes=0))


# ------------------------------------------------------------------ the rules the replicas follow
def test_the_replica_commits_on_the_variants_replication_quorum():
    # Under Flexible the leader's entry on two of four servers is committed; under raft it needs three.
    for spec, hwm_after in ((FLEXIBLE, 1), ("raft", 0)):
        sim = cluster(spec, 4)
        assert sim.apply(("elect", 0, (0, 1, 2))) is None
        assert sim.apply(("write", 0)) is None
        assert sim.apply(("replicate", 0, 1)) is None
        assert sim["S1"].hwm == hwm_after, spec
    assert sim["S1"].rules.replication_quorum() == 3 and type(sim["S1"].rules) is Rules


def test_the_replica_elects_on_the_variants_election_quorum():
    # Five servers: Flexible's Q1 is 4, a majority 3. Model and implementation refuse three voters alike.
    sim = cluster(FLEXIBLE, 5)
    refused = sim.apply(("elect", 0, (0, 1, 2)))
    assert refused == "3 voters are not a quorum of 5 (need 4)"
    assert sim["S1"].role != "leader"
    assert sim.apply(("elect", 0, (0, 1, 2, 3))) is None and sim["S1"].role == "leader"
    assert cluster("raft", 5).apply(("elect", 0, (0, 1, 2))) is None


def test_a_learner_neither_votes_nor_counts(tmp_path):
    learner = tmp_path / "learner.py"
    learner.write_text(textwrap.dedent("""
        from hwm.model.variant import Variant

        class Learner(Variant):
            def counts(self, server):
                return server != 3   # S4 stores entries; it does not vote, stand or count
    """))
    sim = cluster(f"{learner}:Learner", 4)
    assert sim.apply(("elect", 3, (1, 2, 3))) == "S4 does not count toward a quorum and cannot vote"
    sim["S4"].campaign()
    assert sim["S4"].role == "follower" and sim["S4"].generation == 0
    assert sim.apply(("elect", 0, (0, 1))) is None  # a majority of the three that count
    assert sim.apply(("write", 0)) is None
    assert sim.apply(("replicate", 0, 3)) is None
    assert sim["S1"].hwm == 0, "the learner's copy does not count toward the HWM"
    assert sim.apply(("replicate", 0, 1)) is None
    assert sim["S1"].hwm == 1


# ------------------------------------------------------------------ the conformance machine
def committed_short_of_a_majority(snapshot) -> bool:
    """A leader's HWM covers an entry that fewer than a majority (3 of 4) store: raft never does this."""
    for leader in snapshot.servers:
        if leader.role == LEADER and leader.hwm:
            entry = leader.log[leader.hwm - 1]
            holders = sum(len(s.log) >= leader.hwm and s.log[leader.hwm - 1] == entry for s in snapshot.servers)
            if holders < 3:
                return True
    return False


@pytest.mark.parametrize("config", [FOUR, FOUR_ASYNC], ids=["rpc", "async"])
def test_the_implementation_under_flexible_agrees_with_the_model_under_flexible(config):
    class Watched(machine_for(FLEXIBLE, config)):
        short = 0  # steps after which the replicas had committed on Q2 = 2 alone

        def _check(self, action, step, value):
            super()._check(action, step, value)
            type(self).short += committed_short_of_a_majority(self.snapshot)

    run_state_machine_as_test(Watched, settings=conformance_settings(max_examples=15, derandomize=True))
    assert Watched.witnessed["write"] and Watched.witnessed["read"] and Watched.witnessed["leader change"]
    assert Watched.short, "no step committed on two of four servers: the run never tried the replication quorum"


def test_a_replica_that_reads_the_flags_alone_diverges_under_flexible(tmp_path):
    # What the replica did before it asked the variant: the flags' majority. The machine must notice.
    class FlagsOnly(Replica):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.rules = Rules(self.protocol, len(self.servers))

    found = hunt(machine_for(FLEXIBLE, FOUR, replica_factory=FlagsOnly, out_dir=tmp_path), budget=50)
    assert isinstance(found.failure, Divergence), found.failure
    assert "the implementation's snapshot differs from the model's" in str(found.failure)


def test_under_flexible_too_small_the_implementation_breaks_as_the_model_does(tmp_path):
    found = hunt(machine_for(TOO_SMALL, FOUR, out_dir=tmp_path), budget=100)
    failure = found.failure
    # A property fails on the implementation's history while its snapshots still equal the model's.
    assert isinstance(failure, PropertyViolation), failure
    trace = load(failure.trace_path)
    assert trace.protocol == TOO_SMALL and trace.expect == "violation"
    for replay in (replay_on_model, replay_on_impl):
        outcome = replay(trace)
        assert outcome.kind == "violation" and judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()
        assert outcome.step == len(trace.steps)


def test_replaying_the_checkers_counterexample_breaks_the_implementation_the_same_way(tmp_path):
    checked = hwm("check", "--protocol", TOO_SMALL, "--servers", "4", "--max-generation", "3",
                  "--max-crashes", "0", "--save", str(tmp_path))
    assert checked.exit_code == 1, checked.output
    saved = tmp_path / "FlexibleTooSmall.ReadNeverTruncated.json"
    result = hwm("replay", str(saved), "--on", "both", "--brief")
    assert result.exit_code == 0, result.output
    verdict = ("violation of ReadNeverTruncated at step 6: S1 removed entry 1@g1, which a client has read; "
               "only 0 of 4 servers still store it (as expected)")
    assert f"{saved} [model]: {verdict}" in result.output
    assert f"{saved} [impl]: {verdict}" in result.output
    # The step narrative counts the variant's quorum, as the model and the replicas do.
    told = hwm("replay", str(saved)).output
    assert "S1's match indexes S1=1, S2=0, S3=0, S4=0 give quorum index 1 (the largest index held by 1 of 4 " \
           "servers)" in told, told
    # Under Flexible the same steps stop where the model stops: S1's lone entry is not committed.
    fixed = hwm("replay", str(saved), "--on", "both", "--brief", "--protocol", FLEXIBLE)
    assert fixed.exit_code == 0, fixed.output
    assert f"{saved} [model]: blocked at step 4: read(S1): S1 has nothing at or below its high-water mark" \
        in fixed.output, fixed.output
    assert (f"{saved} [impl]: blocked at step 4: read(S1): Log entry not available: entry 1 is not yet committed "
            f"(high-water mark 0 on S1)") in fixed.output, fixed.output


# ------------------------------------------------------------------ a rule the implementation cannot follow
VOTER = """
from hwm.model.variant import Variant

class AnyoneVotes(Variant):
    def grants_vote(self, candidate_log, voter_log):
        return True
"""
REFUSAL = ("AnyoneVotes.grants_vote is model-only: the implementation's vote request carries the candidate's "
           "last index and generation, not its log")


def test_a_variants_vote_rule_is_refused_for_the_implementation_by_name(tmp_path):
    path = tmp_path / "voter.py"
    path.write_text(VOTER)
    spec = f"{path}:AnyoneVotes"
    with pytest.raises(ValueError, match=REFUSAL):
        build_cluster(resolve(spec)[1], FOUR)
    node = hwm("node", "--stdio", "--protocol", spec)
    assert node.exit_code == 2 and REFUSAL in node.output, node.output
    checked = hwm("check", "--protocol", spec, "--servers", "3", "--max-generation", "2", "--max-crashes", "0",
                  "--save", str(tmp_path))
    traces = sorted(tmp_path.glob("AnyoneVotes.*.json"))
    assert traces, checked.output
    replayed = hwm("replay", str(traces[0]), "--on", "impl")
    assert replayed.exit_code == 2, replayed.output
    assert replayed.output.strip().count("\n") == 0 and REFUSAL in replayed.output, replayed.output


RAISES = """
from hwm.model.variant import Variant

class Raises(Variant):
    def may_commit(self, index, log, generation):
        if index >= 1:
            raise ValueError("boom")
        return True
"""


@pytest.mark.parametrize("on, where", [("impl", "at step 3 replicate(S1, S2) on the implementation"),
                                       ("both", "at replicate(S1, S2) from state S1 leader")])
def test_a_rule_that_raises_on_the_replicas_is_one_line_naming_it_and_the_step(tmp_path, on, where):
    path = tmp_path / "raises.py"
    path.write_text(RAISES)
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({
        "format": "hwm-trace/1", "protocol": f"{path}:Raises", "expect": "holds", "property": None,
        "config": {"servers": 3, "max_generation": 2, "max_log": 1, "max_crashes": 0, "network": "rpc"},
        "steps": [{"action": "elect", "server": "S1", "voters": ["S1", "S2"]},
                  {"action": "write", "server": "S1", "value": "v1"},
                  {"action": "replicate", "leader": "S1", "follower": "S2"}]}))
    result = hwm("replay", str(trace), "--on", on, "--brief")
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"error: {trace}: {path}:7: Raises.may_commit raised ValueError: boom, ") and where in last
