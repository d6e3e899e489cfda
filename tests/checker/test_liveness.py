"""Liveness: the eventually properties under fairness, their lassos, the trace format's loop
field, lasso replay and the command line."""

import json

import pytest
from click.testing import CliRunner

from hwm.counterexamples.build_liveness import CATALOGUE as LASSOS, HERE as LASSO_DIR
from hwm.cli import main
from hwm.checker.traces import lasso_trace
from hwm.checker.replay import judge, replay_on_model
from hwm.bridge.replay import replay_on_impl
from hwm.model.raft import RaftModel
from hwm.model.registry import build_model
from hwm.checker.liveness import LivenessRefused, check_liveness, lasso_verdict
from hwm.checker.run import CheckRequest, run
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS
from hwm.properties.trace import TraceError, load, parse
from tests.pinned import DEEP_LIVENESS, PINNED_LIVENESS

def liveness_of(key, **options):
    preset, *bounds = key
    model = build_model(PRESETS[preset].protocol, Config(*bounds))
    return model, check_liveness(model, preset, max_states=60_000, **options)


def lasso_shape(report, name):
    r = report.results[name]
    return (r.stem, r.cycle) if r.found else None


def assert_pinned(key, expected):
    model, report = liveness_of(key)
    assert report.states == expected["states"]
    for name in ("WrittenEventuallyCommitted", "FollowersCatchUp"):
        assert lasso_shape(report, name) == expected[name], name
    # Every obligation opens somewhere (no verdict is vacuous) unless pinned otherwise.
    assert report.unreached == expected.get("unreached", [])
    for name in report.violated:  # every lasso is real: enabled steps, a closed, fair cycle
        r = report.results[name]
        states = [model.initial_state()]
        for action in r.actions:
            assert model.why_not(states[-1], action) is None
            states.append(model.apply(states[-1], action))
        finding, why = lasso_verdict(model, states, r.actions, r.loop, _prop(name))
        assert finding == r.finding, why


def _prop(name):
    from hwm.properties.liveness import LIVENESS_BY_NAME
    return LIVENESS_BY_NAME[name]


@pytest.mark.parametrize("key", PINNED_LIVENESS, ids=lambda k: "-".join(map(str, k)))
def test_pinned_lassos_and_raft_holds(key):
    assert_pinned(key, PINNED_LIVENESS[key])


@pytest.mark.deep
@pytest.mark.parametrize("key", DEEP_LIVENESS, ids=lambda k: "-".join(map(str, k)))
def test_pinned_lassos_and_raft_holds_deep(key):
    assert_pinned(key, DEEP_LIVENESS[key])


# ---------------------------------------------------------------- the checker can fail
class NeverCounts(RaftModel):
    """A leader that never counts acknowledgements: its HWM never moves (planted bug)."""

    def _advance_hwm(self, leader, position):
        return leader


def test_a_leader_that_never_commits_violates_written_eventually_committed():
    model = NeverCounts(PRESETS["raft"].protocol, Config(3, 2, 1, 1))
    report = check_liveness(model, "never-counts")
    r = report.results["WrittenEventuallyCommitted"]
    assert r.found and "S1 leads generation 1 with its entry 1@g1 above its high-water mark 0" in r.finding
    # elect, write, then replicate to both followers; the cycle takes both round trips again.
    assert [str(s) for s in r.steps[:2]] == ["elect(S1, {S1,S2})", "write(S1, v1)"]
    assert (r.stem, r.cycle) == (4, 2)


def test_verdicts_depend_on_fairness():
    # Without fair replication, raft's leader may simply never replicate.
    _, unfair = liveness_of(("raft", 3, 2, 1, 1), fair=("restart",))
    assert "WrittenEventuallyCommitted" in unfair.violated
    assert "FollowersCatchUp" in unfair.violated
    _, fair = liveness_of(("raft", 3, 2, 1, 1))
    assert not fair.violated


def test_unreached_witness_is_reported():
    # max_log 0: no entry is ever written, so WrittenEventuallyCommitted holds vacuously.
    _, report = liveness_of(("raft", 3, 2, 0, 0))
    assert "LeaderHoldsUncommittedEntry" in report.unreached and not report.ok


def test_partitions_and_large_graphs_are_refused_with_a_reason():
    model = build_model(PRESETS["raft"].protocol, Config(3, 2, 1, 1, max_partitions=1))
    with pytest.raises(LivenessRefused, match="not checked with partitions.*heal is not a fair action"):
        check_liveness(model, "raft")
    model = build_model(PRESETS["raft"].protocol, Config(3, 2, 1, 1))
    with pytest.raises(LivenessRefused, match="more than 100 states \\(the liveness state limit\\)"):
        check_liveness(model, "raft", max_states=100)


# ---------------------------------------------------------------- the catalogue and replay
@pytest.mark.parametrize("stem", LASSOS)
def test_catalogue_lasso_is_the_checkers_shortest_and_replays(stem):
    preset, prop, overrides, _, _ = LASSOS[stem]
    trace = load(LASSO_DIR / f"{stem}.json")
    report = check_liveness(build_model(PRESETS[preset].protocol, Config(**overrides)), preset)
    shortest = lasso_trace(report, preset, prop)
    assert (trace.loop, [s.to_json() for s in trace.steps]) == (shortest.loop, [s.to_json() for s in shortest.steps])
    outcome = replay_on_model(trace)
    assert judge(trace, outcome, overridden=False) == (0, outcome.summary() + " (as expected)")
    assert outcome.kind == "violation" and outcome.finding == report.results[prop].finding
    # The fix: under raft the scenario is blocked (a vote is refused) or its cycle shows nothing.
    assert replay_on_model(trace, "raft").kind in ("blocked", "holds")


def _lasso_json(**changes):
    data = json.loads((LASSO_DIR / "seed-followers-catch-up.json").read_text())
    data.update(changes)
    return data


def test_a_lasso_that_does_not_close_or_is_unfair_is_not_a_violation():
    # Cut the cycle's last step: the loop at step 10 is replicate(S1, S2) alone, a self-loop
    # that closes, but replicate(S1, S3) stays enabled and is never taken.
    data = _lasso_json()
    data["steps"] = data["steps"][:-1]
    outcome = replay_on_model(parse(data, source="unfair.json"))
    assert outcome.kind == "holds" and "not fair: replicate(S1, S3) is enabled in every state" in outcome.reason
    trace = parse(data, source="unfair.json")
    assert judge(trace, outcome, overridden=False)[0] == 1
    # Start the cycle at step 5: after step 11 the cluster is not where it was before step 5.
    outcome = replay_on_model(parse(_lasso_json(loop=5), source="open.json"))
    assert outcome.kind == "holds" and "the loop does not close" in outcome.reason


@pytest.mark.parametrize("change, message", [
    ({"loop": 0}, "loop is the number of the step that starts the cycle, 1..11, not 0"),
    ({"loop": 12}, "1..11, not 12"),
    ({"loop": True}, "not True"),
    ({"loop": "10"}, "not '10'"),
    ({"property": "ReadNeverTruncated"}, "loop marks the cycle of an eventually property's lasso"),
])
def test_bad_loop_fields_are_named(change, message):
    with pytest.raises(TraceError, match="lasso.json, field 'loop'") as e:
        parse(_lasso_json(**change), source="lasso.json")
    assert message in str(e.value)


@pytest.mark.parametrize("expect", ["violation", "holds", "blocked"])
def test_an_eventually_property_needs_a_loop(expect):
    data = _lasso_json(expect=expect)
    del data["loop"]
    with pytest.raises(TraceError, match="field 'loop': FollowersCatchUp is an eventually property"):
        parse(data, source="lasso.json")


def test_loop_survives_a_save_and_load(tmp_path):
    trace = load(LASSO_DIR / "seed-followers-catch-up.json")
    again = load(trace.save(tmp_path / "again.json"))
    assert again.loop == trace.loop == 10 and "loop" not in again.extra


@pytest.mark.parametrize("stem", LASSOS)
def test_catalogue_lasso_replays_on_the_implementation(stem):
    from hwm.properties.snapshot import snapshot_of

    trace = load(LASSO_DIR / f"{stem}.json")
    outcome, model = replay_on_impl(trace), replay_on_model(trace)
    assert judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()
    assert (outcome.kind, outcome.property, outcome.finding) == (model.kind, model.property, model.finding)
    assert [snapshot_of(v) for _, v in outcome.rows] == [snapshot_of(v) for _, v in model.rows]
    # A loop that does not close on the replicas is no violation there either.
    open_loop = parse(_lasso_json(loop=5), source="open.json")
    assert "the loop does not close" in replay_on_impl(open_loop).reason


# ---------------------------------------------------------------- command line
def hwm(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    # A JSON report is read from stdout alone: progress lines (a slow run's) go to stderr.
    return result.exit_code, result.stdout if "--json" in args else result.output


BOUNDS = ["--servers", 3, "--max-generation", 2, "--max-log", 1, "--max-crashes", 1]


def test_check_liveness_reports_rows_and_saves_a_replayable_lasso(tmp_path):
    code, out = hwm("check", "--protocol", "seed", *BOUNDS, "--liveness", "--save", tmp_path)
    assert code == 1
    assert "FollowersCatchUp             violated (lasso 9+2 steps): S2's high-water mark 0" in out
    assert "WrittenEventuallyCommitted   holds" in out
    assert "without symmetry reduction" in out
    saved = tmp_path / "seed.FollowersCatchUp.json"
    assert load(saved).loop == 10
    code, out = hwm("replay", "--on", "both", saved)
    assert code == 0 and "a lasso of 9 + 2 steps" in out and "<- the cycle starts" in out
    assert "[impl]: violation of FollowersCatchUp" in out


def test_check_liveness_raft_holds_and_json_carries_the_rows():
    code, out = hwm("check", "--protocol", "raft", *BOUNDS, "--liveness", "--json")
    assert code == 0
    body = json.loads(out)["liveness"]
    assert body["symmetry"] is False and body["fairness"] == {"weak": ["replicate", "restart"]}
    assert {n: p["verdict"] for n, p in body["properties"].items()} == {
        "WrittenEventuallyCommitted": "holds", "FollowersCatchUp": "holds",
        "LeaderHoldsUncommittedEntry": "reached", "FollowerBehind": "reached"}


def test_check_liveness_usage_errors():
    code, out = hwm("check", "--protocol", "raft", *BOUNDS, "--max-partitions", 1, "--liveness")
    assert code == 2 and "not checked with partitions" in out
    code, out = hwm("check", "--protocol", "raft", *BOUNDS, "--liveness", "--liveness-max-states", 50)
    assert code == 2 and "more than 50 states (the liveness state limit)" in out
    code, out = hwm("check", "--liveness")
    assert code == 2 and "--liveness checks one protocol" in out


def test_graph_liveness():
    code, out = hwm("graph", "--protocol", "seed", *BOUNDS, "--liveness")
    assert code == 0 and "FollowersCatchUp             violated (lasso 9+2 steps)" in out


def _brute_force_shortest(model, prop_name, limit):
    """The fewest steps of any fair lasso violating the property, found by trying every walk
    (stem: any breadth-first shortest path; cycle: every walk of at most `limit` steps that
    keeps an obligation open), judged by `lasso_verdict` alone; None if none within `limit`."""
    from hwm.checker.liveness import StateGraph

    prop = _prop(prop_name)
    graph = StateGraph(model, 10_000)
    distance = {0: 0}
    for k in range(1, len(graph.states)):
        distance[k] = distance[graph.parent[k][0]] + 1
    best = None
    for start in range(len(graph.states)):
        if distance[start] >= limit or not prop.obligations(graph.states[start]):
            continue
        stem = graph.path_to(start)
        stem_states = [model.initial_state()]
        for action in stem:
            stem_states.append(model.apply(stem_states[-1], action))

        def walk(k, actions, states, open_):
            nonlocal best
            total = len(stem) + len(actions)
            if actions and k == start and (best is None or total < best):
                finding, _ = lasso_verdict(model, stem_states + states, stem + actions, len(stem) + 1, prop)
                if finding:
                    best = total
            if total + 1 > (best - 1 if best is not None else limit):
                return  # one more step could not beat the best (or the limit)
            for action, j in graph.edges[k]:
                still = open_ & set(prop.obligations(graph.states[j]))
                if still:
                    walk(j, actions + [action], states + [graph.states[j]], still)

        walk(start, [], [], set(prop.obligations(graph.states[start])))
    return best


def test_the_shortest_lasso_is_shortest_by_brute_force():
    model = NeverCounts(PRESETS["raft"].protocol, Config(3, 2, 1, 1))
    report = check_liveness(model, "never-counts")
    r = report.results["WrittenEventuallyCommitted"]
    assert _brute_force_shortest(model, "WrittenEventuallyCommitted", len(r.steps)) == len(r.steps) == 6


def test_the_seed_lasso_is_shortest_by_brute_force():
    model = build_model(PRESETS["seed"].protocol, Config(2, 3, 2, 1))
    assert _brute_force_shortest(model, "FollowersCatchUp", 9) == 9


@pytest.mark.parametrize("key", [("kip101", 2, 2, 1, 1), ("raft", 3, 1, 1, 1), ("seed", 3, 2, 1, 1)],
                         ids=lambda k: "-".join(map(str, k)))
def test_the_liveness_graph_is_the_local_engines_state_space_without_symmetry(key):

    model, report = liveness_of(key)
    local = run(CheckRequest(key[0], symmetry=False), model=model)
    assert (report.states, report.transitions) == (local.states, local.transitions)


def test_a_lasso_with_partitions_is_refused_naming_the_field():
    data = _lasso_json(config={"servers": 3, "max_generation": 2, "max_log": 1, "max_crashes": 1,
                               "max_partitions": 1})
    data["steps"] = data["steps"][:2]  # elect and write exist with partitions too
    data["loop"] = 2
    for replay in (replay_on_model, replay_on_impl):
        with pytest.raises(TraceError, match="cut.json, field 'config.max_partitions': liveness is not checked with"):
            replay(parse(data, source="cut.json"))


def test_the_liveness_graph_is_a_visitor_of_the_one_search():
    """State numbers and breadth-first parents are the engine's own (its visited set without symmetry)."""
    from hwm.checker.engine import CheckOptions, Search
    from hwm.checker.liveness import StateGraph

    model = build_model(PRESETS["seed"].protocol, Config(2, 2, 1, 1))
    graph = StateGraph(None, 10_000)
    search = Search(model, CheckOptions(symmetry=False, properties=()), [graph])
    search.run()
    count = len(search.visited)
    assert len(graph.states) == count and len(graph.edges) == count and count > 50
    assert [model.fingerprint(s, False) for s in graph.states] == search.visited.fps[:count].tolist()
    assert [p[0] if p else -1 for p in graph.parent] == search.visited.parents[:count].tolist()
    assert graph.transitions == search.transitions
    for k, out in enumerate(graph.edges):  # every edge is the model's own step, in its action order
        assert [(a, graph.states[j]) for a, j in out] == list(model.successors(graph.states[k]))
    alone = StateGraph(model, 10_000)
    assert (alone.states, alone.edges, alone.parent) == (graph.states, graph.edges, graph.parent)
