"""Liveness on raft's async network: `send` weakly fair, `deliver` strongly fair (a fair-lossy channel),
`drop` unfair (docs/liveness.md, "Fairness"); the SCCs refined for strong fairness on both graphs."""

import numpy as np
import pytest

from hwm.checker import liveness as reference
from hwm.checker.liveness import StateGraph, check_liveness, lasso_verdict
from hwm.checker.liveness_fast import fair_components, refined_components
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS
from hwm.checker.replay import replay_on_model
from hwm.checker.traces import lasso_trace
from tests.checker.test_liveness import hwm
from tests.checker.test_liveness_compiled import assert_agree, both


def async_model(preset, servers, generation, log, crashes, capacity):
    return build_model(PRESETS[preset].protocol, Config(servers, generation, log, crashes, "async", capacity))


def verdicts(report):
    return {p.name: report.results[p.name].verdict for p in report.properties}


def replay(model, actions):
    states = [model.initial_state()]
    for action in actions:
        assert model.why_not(states[-1], action) is None
        states.append(model.apply(states[-1], action))
    return states


def cycle_of(result):
    return [str(s) for s in result.steps[result.stem:]]


@pytest.mark.parametrize("bounds, states", [((2, 2, 1, 1, 1), 811), ((2, 2, 1, 0, 2), 1599)])
def test_raft_holds_on_the_async_network(bounds, states):
    model = async_model("raft", *bounds)
    reference_report, compiled = both(model, "raft")
    assert_agree(model, reference_report, compiled)
    assert compiled.states == states
    assert verdicts(compiled) == {"WrittenEventuallyCommitted": "holds", "FollowersCatchUp": "holds"}
    assert not compiled.unreached  # both obligations open somewhere: neither verdict is vacuous
    assert (compiled.fairness, compiled.strong_fairness) == (("send", "restart"), ("deliver",))
    assert compiled.to_json()["fairness"] == {"weak": ["send", "restart"], "strong": ["deliver"]}


def test_without_strong_fairness_of_deliver_a_run_drops_every_message():
    # Planted: deliver only weakly fair (it is disabled whenever the channel is empty, so it owes nothing).
    model = async_model("raft", 2, 2, 1, 1, 1)
    reference_report, compiled = both(model, "raft", strong=())
    assert_agree(model, reference_report, compiled)
    assert verdicts(compiled) == {"WrittenEventuallyCommitted": "violated", "FollowersCatchUp": "violated"}
    r = compiled.results["WrittenEventuallyCommitted"]
    assert (r.stem, r.cycle) == (2, 2) and cycle_of(r) == ["send(S1, S2)", "drop(S1, S2)"]
    r = compiled.results["FollowersCatchUp"]
    assert (r.stem, r.cycle) == (5, 2) and cycle_of(r) == ["send(S1, S2)", "drop(S1, S2)"]
    # Under the documented fairness that cycle is not fair, and it is gone (test above: both hold).
    prop = next(p for p in compiled.properties if p.name == "FollowersCatchUp")
    finding, why = lasso_verdict(model, replay(model, r.actions), r.actions, r.loop, prop)
    assert finding is None and why == ("the cycle is not fair: deliver(S1, S2) is enabled in some state of the "
                                       "cycle but never taken (strongly fair: deliver)")


def test_a_leader_must_keep_sending():
    # Planted: send not fair. At three servers S1 commits with S3 alone and never sends to S2 again.
    model = async_model("raft", 3, 1, 1, 0, 1)
    reference_report, report = both(model, "raft", fair=("restart",))
    assert_agree(model, reference_report, report)
    assert verdicts(report) == {"WrittenEventuallyCommitted": "holds", "FollowersCatchUp": "violated"}
    r = report.results["FollowersCatchUp"]
    assert (r.stem, r.cycle) == (7, 3) and cycle_of(r) == ["send(S1, S3)", "deliver(S3, S1)", "deliver(S1, S3)"]
    prop = next(p for p in report.properties if p.name == "FollowersCatchUp")
    _, why = lasso_verdict(model, replay(model, r.actions), r.actions, r.loop, prop)
    assert "send(S1, S2) is enabled in every state of the cycle but never taken" in why
    assert not check_liveness(model, "raft", successors="fast").violated


def test_seed_violates_followers_catch_up_on_the_async_network_too():
    # The rpc network's story (docs/liveness.md): the follower acknowledges its own last index, the
    # leader's HWM passes the end of its own log, and the follower can never learn it. No message is
    # dropped: the cycle is one delivered round trip.
    model = async_model("seed", 2, 2, 2, 1, 1)
    reference_report, compiled = both(model, "seed")
    assert_agree(model, reference_report, compiled)
    assert compiled.states == 15612
    assert verdicts(compiled) == {"WrittenEventuallyCommitted": "holds", "FollowersCatchUp": "violated"}
    assert compiled.unreached == ["LeaderHoldsUncommittedEntry"]  # the seed commits as it writes
    r = compiled.results["FollowersCatchUp"]
    assert (r.stem, r.cycle) == (13, 3)
    assert cycle_of(r) == ["send(S1, S2)", "deliver(S1, S2)", "deliver(S2, S1)"]
    assert r.finding.startswith("S2's high-water mark 1 is below the 2 of S1, which leads generation 2")
    leader = replay(model, r.actions)[-1].servers[0]
    assert leader.hwm > len(leader.log)
    # Saved as a trace, it replays as a violation under the async network's fairness.
    trace = lasso_trace(compiled, "seed", "FollowersCatchUp")
    assert "every strongly fair one (deliver) enabled on them" in trace.explanation
    outcome = replay_on_model(trace)
    assert outcome.kind == "violation" and outcome.finding == r.finding


def test_hwm_check_liveness_runs_on_the_async_network():
    code, out = hwm("check", "--protocol", "raft", "--servers", 2, "--max-generation", 2, "--max-log", 1,
                    "--max-crashes", 1, "--network", "async", "--liveness")
    # Exit 1 for the safety check's witness alone: no truncation of an uncommitted entry at 2 servers.
    assert code == 1 and out.count("UNREACHED") == 1 and "UncommittedTruncated         UNREACHED" in out
    assert "liveness: 811 concrete states" in out and "weakly fair: send, restart; strongly fair: deliver" in out
    assert "✓ WrittenEventuallyCommitted   holds" in out and "✓ FollowersCatchUp             holds" in out


@pytest.mark.deep
@pytest.mark.parametrize("preset, bounds", [("raft", (3, 1, 1, 1, 1)), ("seed", (3, 1, 1, 0, 1)),
                                            ("seed", (2, 3, 2, 1, 1))])
def test_async_agrees_deep(preset, bounds):
    model = async_model(preset, *bounds)
    for strong in (None, ()):
        assert_agree(model, *both(model, preset, strong=strong, max_states=100_000))


# ---------------------------------------------------------------- the refinement itself
# A component {0, 1, 2}: cycles 0 <-> 1 and 1 <-> 2, and state 2 enables deliver(S1, S2), which leaves
# the component for state 3. No fair cycle passes through 2, but 0 <-> 1 is fair: the refinement
# removes 2 and finds {0, 1}; dropping the whole component would miss it.
EDGES = {0: [(("send", 0, 1), 1)], 1: [(("send", 0, 1), 0), (("drop", 0, 1), 2)],
         2: [(("send", 0, 1), 1), (("deliver", 0, 1), 3)], 3: [(("send", 0, 1), 3)]}
DELIVER = ("deliver",)


def test_the_reference_refines_a_component_for_strong_fairness():
    graph = StateGraph(None, 10)
    graph.states = list(range(4))
    graph.edges = [EDGES[k] for k in range(4)]
    found = list(reference._strong_components(graph, {0, 1, 2}, DELIVER))
    assert found == [{0, 1}]
    assert reference._shortest_fair_cycle(graph, {0, 1}, 0, (), DELIVER) == [("send", 0, 1), ("send", 0, 1)]
    assert list(reference._strong_components(graph, {0, 1, 2}, ())) == [{0, 1, 2}]


def test_the_compiled_graph_refines_a_component_for_strong_fairness():
    indptr = np.array([0, 1, 3, 5, 6], dtype=np.int64)
    targets = np.array([1, 0, 2, 1, 3, 3], dtype=np.int64)
    strong_bits = np.array([0, 0, 0, 0, 1, 0], dtype=np.int64)  # the edge 2 -> 3 is deliver
    strong_enabled = np.array([0, 0, 1, 0], dtype=np.int64)
    label, work = np.empty(4, dtype=np.int64), np.empty((5, 4), dtype=np.int64)
    member = np.array([True, True, True, False])
    count = refined_components(indptr, targets, member, strong_bits, strong_enabled, label, work)
    none = np.zeros(6, dtype=np.int64)
    fair, _ = fair_components(indptr, targets, none, np.zeros(4, dtype=np.int64), label, count)
    assert sorted(np.flatnonzero((label >= 0) & fair[np.maximum(label, 0)]).tolist()) == [0, 1]
    member = np.array([True, True, True, False])
    count = refined_components(indptr, targets, member, none, np.zeros(4, dtype=np.int64), label, work)
    fair, _ = fair_components(indptr, targets, none, np.zeros(4, dtype=np.int64), label, count)
    assert sorted(np.flatnonzero((label >= 0) & fair[np.maximum(label, 0)]).tolist()) == [0, 1, 2]
