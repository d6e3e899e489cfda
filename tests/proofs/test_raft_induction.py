"""Raft's inductive invariant (proofs/induction.py, `RAFT_INVARIANT`) at five servers, and each conjunct
on states the explorer reaches.

With five servers a leader may count an index committed from acknowledgements of servers that have
since moved to a later generation (a quorum of three: the leader, one server still in its generation,
one that moved on). Two things follow, both needed for IndNext at N = 5: the commit record keeps the
lowest generation that counted an index (a stale leader may count it after a later one did), and
`LaterGenerationsHoldWhatALeaderMayCommit` says that what such a leader may still commit is held by
every later leader, every log ending in a later generation and every acknowledgement that moved on.

The default run checks the `replicate` step that failed before, the conjunct's need, the stale commit
on a reachable 8-step path and sampled reachable states at three and five servers; `-m deep` every action
at five servers (logs of two and three entries) and every reachable state at the bounds below.
"""

from __future__ import annotations

import random

import pytest

from hwm.checker.engine import CheckOptions, Sampler, Search
from hwm.model.raft import RaftModel
from hwm.model.state import Config, initial_state
from hwm.proofs.induction import (LATER_HOLDERS, RAFT_INVARIANT, Conjunct, ConjunctEvaluator, GhostModel,
                                  advance_commit_record, advance_ghost, check_induction, induction_encoding,
                                  later_generations_hold_what_a_leader_may_commit, may_commit, no_commits)
from hwm.proofs.symbolic import action_name
from hwm.properties.catalogue import violations
from hwm.properties.protocol import PRESETS

RAFT = PRESETS["raft"].protocol
S1, S2, S3, S4, S5 = range(5)
NEW = "LaterGenerationsHoldWhatALeaderMayCommit"


def _result_ok(result):
    return (result.init_failed, [c.describe() for c in result.ctis], result.safety_failed, result.undecided)


def test_at_five_servers_a_stale_leaders_replicate_keeps_the_invariant():
    # The action whose CTI z3 showed first at N = 5 (each of the 20 replicate actions failed alike).
    result = check_induction(RAFT, servers=5, max_log=2, actions=[("replicate", S3, S5)])
    assert _result_ok(result) == ([], [], [], [])


def test_without_the_new_conjunct_replicate_breaks_at_five_servers():
    rest = tuple(c for c in RAFT_INVARIANT if c.name != NEW)
    result = check_induction(RAFT, servers=5, max_log=2, conjuncts=rest, actions=[("replicate", S3, S5)])
    assert len(result.ctis) == 1
    assert {"CommitsOnQuorum", "LeadersAfterCommitAreLater"} & set(result.ctis[0].failed)
    # At four servers a quorum that counts a commit leaves too few servers for a later generation:
    # the rest is inductive there (and at three), the new conjunct follows from it.
    assert _result_ok(check_induction(RAFT, servers=4, max_log=2, conjuncts=rest,
                                      actions=[("replicate", S3, S4)])) == ([], [], [], [])


# Without one kind of server among those that must hold what a leader may commit, a step of this kind
# breaks the invariant at five servers (the full check without each: 200-350 s at load 5; here the
# actions of that kind alone).
@pytest.mark.deep
@pytest.mark.parametrize("dropped, kind", [("leader", "write"), ("log", "elect"), ("acknowledged", "elect")])
def test_each_kind_of_holder_is_needed_at_five_servers(dropped, kind):
    holders = tuple(h for h in LATER_HOLDERS if h != dropped)
    weaker = tuple(Conjunct(c.name, c.meaning, later_generations_hold_what_a_leader_may_commit(holders))
                   if c.name == NEW else c for c in RAFT_INVARIANT)
    enc = induction_encoding(RAFT, 5, 2)
    actions = [a for a in enc.actions if a[0] == kind]
    result = check_induction(RAFT, servers=5, max_log=2, conjuncts=weaker, actions=actions)
    assert result.ctis, f"without {dropped!r} every {kind} keeps the invariant"
    assert all(NEW in c.failed for c in result.ctis), [action_name(c.action) for c in result.ctis]


@pytest.mark.deep  # about 50 s of wall clock each at load 1 to 2 (30 s and 50 s of CPU)
@pytest.mark.parametrize("max_log", [2, 3])
def test_raft_is_inductive_at_five_servers(max_log):
    result = check_induction(RAFT, servers=5, max_log=max_log)
    assert _result_ok(result) == ([], [], [], [])
    # elect: each candidate with 11 quorums containing it; write, read, crash, restart per server; 20 pairs.
    assert len(result.per_action_seconds) == 55 + 4 * 5 + 20


@pytest.mark.deep  # about 75 s of wall clock at load 1.5
def test_raft_is_inductive_at_six_servers():
    # The same 20 conjuncts: nothing at six servers needs more than five did.
    result = check_induction(RAFT, servers=6, max_log=2)
    assert _result_ok(result) == ([], [], [], [])
    # elect: each candidate with the 16 quorums of four or more containing it; four per server; 30 pairs.
    assert len(result.per_action_seconds) == 6 * 16 + 4 * 6 + 30


# S3 leads generation 1 with S4's acknowledgement; S4 moves on to lead generation 2 and commits
# index 1 with S1 and S2; then S5 acknowledges S3, and S3 (with S4's old acknowledgement) counts
# index 1 too, in generation 1. Five servers, generation <= 2, logs <= 2, no crash.
STALE_COMMIT = [("elect", S3, (S3, S4, S5)), ("write", S3), ("replicate", S3, S4), ("elect", S4, (S1, S2, S4)),
                ("write", S4), ("replicate", S4, S1), ("replicate", S4, S2), ("replicate", S3, S5)]
FIVE = Config(servers=5, max_generation=2, max_log=2, max_crashes=0)


def test_a_stale_leader_counts_an_index_after_a_later_generation_did():
    model = RaftModel(RAFT, FIVE)
    evaluator = ConjunctEvaluator(induction_encoding(RAFT, 5, 2), RAFT_INVARIANT)
    enc, s = evaluator.enc, evaluator.s
    state, lowest, first = initial_state(FIVE), no_commits(2), no_commits(2)
    live = []
    for action in STALE_COMMIT:
        assert model.why_not(state, action) is None, action
        after = model.apply(state, action)
        assert violations(state, after) == {}
        lowest, first = advance_commit_record(lowest, state, after), advance_ghost(first, state, after)
        state = after
        assert evaluator.failed((state, lowest)) == [], action
        # Whether S3 may still commit index 1 while a later generation exists (the new conjunct's case).
        evaluator.solver.push()
        evaluator.solver.add([v == x for v, x in zip(evaluator.variables, enc.values((state, lowest)))])
        evaluator.solver.add(may_commit(enc, s, S3, 0), s.gen[S4] > s.gen[S3])
        live.append(str(evaluator.solver.check()) == "sat")
        evaluator.solver.pop()
    assert live == [False, False, False, True, True, True, True, True]
    s3 = state.servers[S3]
    assert (s3.role, s3.generation, s3.hwm) == ("leader", 1, 1)
    assert lowest[0] == ((1, 1), (2, 2))  # index 1 counted by generations 2 and 1: the lowest kept
    # Recorded by the first leader's generation, the last state breaks HwmIsCommitted (S3's
    # generation is below the record's): the old record was not an invariant at five servers.
    assert first[0] == ((1, 2), (2, 2))
    assert evaluator.failed((state, first)) == ["HwmIsCommitted"]


def test_the_invariant_holds_where_a_stale_leader_replaces_a_lagging_copy_of_a_read_entry():
    # tests/proofs/test_proofs.py's 12-step path: S3 (generation 2) replaces S5's copy of the committed,
    # read entry 1@g1; S1, S2 and S4, of generation 3, still hold it. Generation 2 could never commit:
    # the invariant holds at every state along it.
    config = Config(servers=5, max_generation=3, max_log=2, max_crashes=0)
    path = [("elect", S1, (S1, S2, S5)), ("write", S1), ("replicate", S1, S5), ("elect", S3, (S2, S3, S4)),
            ("write", S3), ("replicate", S1, S2), ("elect", S1, (S1, S2, S4)), ("write", S1),
            ("replicate", S1, S2), ("replicate", S1, S4), ("read", S1), ("replicate", S3, S5)]
    model = RaftModel(RAFT, config)
    evaluator = ConjunctEvaluator(induction_encoding(RAFT, 5, 2), RAFT_INVARIANT)
    state, ghost = initial_state(config), no_commits(2)
    for action in path:
        after = model.apply(state, action)
        state, ghost = after, advance_commit_record(ghost, state, after)
        assert evaluator.failed((state, ghost)) == [], action
    assert state.servers[S5].log == (2,) and ghost[0][0] == (1, 3)


def _explored(config: Config, limit: int) -> list:
    """Nodes (state, commit record) in breadth-first order, up to renaming servers, at most `limit`."""
    sampler = Sampler(limit)
    options = CheckOptions(successors="objects", properties=(), max_states=limit)
    Search(GhostModel(RaftModel(RAFT, config)), options, [sampler], name="explorer").run()
    return sampler.states


def _failed_on(nodes, servers: int) -> dict:
    evaluator = ConjunctEvaluator(induction_encoding(RAFT, servers, 2), RAFT_INVARIANT)
    return {name: node for node in nodes for name in evaluator.failed(node)}


def _stale_commits(nodes) -> int:
    """Nodes where a leader with a HWM has a server of a later generation beside it."""
    return sum(1 for state, _ in nodes
               if any(l.role == "leader" and l.hwm and any(s.generation > l.generation for s in state.servers)
                      for l in state.servers))


def test_every_conjunct_holds_on_sampled_reachable_states():
    three = _explored(Config(servers=3, max_generation=3, max_log=2, max_crashes=1), 20_000)
    five = _explored(FIVE, 30_000)
    assert len(five) == 21_226  # every state at these bounds
    sample = random.Random(3).sample(three, 300) + random.Random(5).sample(five, 500)
    assert any(state.reads for state, _ in sample) and any(ghost[0][1][0] for _, ghost in sample)
    assert _stale_commits(five) > 0
    assert _failed_on(sample[:300], 3) == {} and _failed_on(sample[300:], 5) == {}


@pytest.mark.deep
@pytest.mark.parametrize("config, count", [
    (Config(servers=3, max_generation=3, max_log=2, max_crashes=1), 24_709),
    (Config(servers=4, max_generation=2, max_log=2, max_crashes=1), 18_423),
    (FIVE, 21_226),
])
def test_every_conjunct_holds_on_every_reachable_state(config, count):
    nodes = _explored(config, 10 ** 6)
    assert len(nodes) == count  # with the commit record, up to renaming servers
    assert _failed_on(nodes, config.servers) == {}
