"""Each system's model names its weakly fair actions (`Model.FAIR`): the liveness check of ZAB, Kafka
and BookKeeper runs under their own fairness, not raft's (docs/liveness.md, "Fairness")."""

import json

import pytest
from click.testing import CliRunner

from hwm.checker.liveness import FAIR_ACTIONS, check_liveness, lasso_verdict, liveness_of
from hwm.cli import main
from hwm.model.actions import to_step
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.liveness import LIVENESS_BY_NAME
from hwm.properties.protocol import PRESETS

BOUNDS = Config(3, 2, 1, 1)


def model_of(preset):
    return build_model(PRESETS[preset].protocol, BOUNDS)


def steps_of(result):
    cycle = [str(s) for s in result.steps[result.stem:]]
    return " ".join(str(s) for s in result.steps[:result.stem]) + " | cycle: " + " ".join(cycle)


def verdict(model, text, loop, name, fair=None):
    """`lasso_verdict` of a lasso written as its steps, replayed from the initial state."""
    named = {str(to_step(a, "v1" if a[0] == "write" else None)): a for a in model.action_table()}
    actions = [named[part.strip() + ")"] for part in text.rstrip(")").split("),")]
    states = [model.initial_state()]
    for action in actions:
        assert model.why_not(states[-1], action) is None, action
        states.append(model.apply(states[-1], action))
    return lasso_verdict(model, states, actions, loop, LIVENESS_BY_NAME[name], fair)


@pytest.mark.parametrize("preset, fair", [
    ("raft", ("replicate", "restart")),
    ("seed", ("replicate", "restart")),
    ("zab", ("replicate", "restart", "sync", "persist")),
    ("kafka", ("replicate", "shrink_isr", "restart", "leader_and_isr", "flush")),
    ("bookkeeper", ("send_add", "restart")),
])
def test_each_system_names_its_own_fair_actions(preset, fair):
    model = model_of(preset)
    assert liveness_of(model)[1] == fair
    assert set(fair) <= {a[0] for a in model.action_table()} | {"persist", "leader_and_isr", "flush"}


def test_zab_holds_under_its_fairness_and_not_under_raft_s():
    model = model_of("zab")
    report = check_liveness(model, "zab")
    assert (report.states, report.violated, report.unreached) == (6322, [], [])
    assert report.fairness == ("replicate", "restart", "sync", "persist")
    raft_fair = check_liveness(model, "zab", fair=FAIR_ACTIONS)
    assert steps_of(raft_fair.results["WrittenEventuallyCommitted"]) == (
        "elect(S1, {S1,S2}) sync(S1, S2) elect(S2, {S2,S3}) write(S1, v1) sync(S2, S3) | cycle: replicate(S2, S3)")
    assert steps_of(raft_fair.results["FollowersCatchUp"]) == (
        "elect(S1, {S1,S2}) sync(S1, S3) write(S1, v1) replicate(S1, S3) replicate(S1, S3) | cycle: replicate(S1, S3)")


def test_zab_needs_sync_to_be_fair():
    # Dropping sync alone brings both violations back.
    model = model_of("zab")
    without_sync = check_liveness(model, "zab", fair=("replicate", "restart", "persist"))
    assert set(without_sync.violated) == {"WrittenEventuallyCommitted", "FollowersCatchUp"}
    # The stale leader S1 (generation 1) would learn of generation 2 from S2 (or S3) and step down: the
    # lasso starves sync(S1, S2), enabled in every state of its cycle.
    finding, why = verdict(model, "elect(S1, {S1,S2}), sync(S1, S2), elect(S2, {S2,S3}), write(S1, v1), "
                                  "sync(S2, S3), replicate(S2, S3)", 6, "WrittenEventuallyCommitted")
    assert finding is None and "not fair: sync(S1, S2) is enabled in every state of the cycle" in why
    finding, _ = verdict(model, "elect(S1, {S1,S2}), sync(S1, S2), elect(S2, {S2,S3}), write(S1, v1), "
                                "sync(S2, S3), replicate(S2, S3)", 6, "WrittenEventuallyCommitted", FAIR_ACTIONS)
    assert finding.startswith("S1 leads generation 1 with its entry 1@g1 above its high-water mark 0")


def test_zab_ack_before_persist_holds_too():
    # Its follower's broadcast-phase ACK persists first (effect_replicate), so at these bounds no verdict
    # depends on persist's fairness; a real SyncRequestProcessor flushes all the same.
    model = model_of("zab-ack-before-persist")
    report = check_liveness(model, "zab-ack-before-persist")
    assert (report.states, report.violated, report.unreached) == (12446, [], [])
    assert check_liveness(model, "zab-ack-before-persist", fair=FAIR_ACTIONS).violated


def test_kafka_pinned_lassos_are_a_missed_leader_and_isr_request():
    model = model_of("kafka")
    report = check_liveness(model, "kafka")
    assert report.states == 30145
    assert steps_of(report.results["WrittenEventuallyCommitted"]) == (
        "elect(S1, {S1}) elect(S2, {S2,S3}) write(S1, v1) replicate(S2, S3) | cycle: replicate(S2, S3)")
    assert steps_of(report.results["FollowersCatchUp"]) == (
        "elect(S1, {S1,S3}) write(S1, v1) shrink_isr(S1, S2) replicate(S1, S3) replicate(S1, S3) "
        "| cycle: replicate(S1, S3)")
    # Where late LeaderAndIsr requests are actions (and fair), the same steps are no violation: the
    # controller's request reaches S2 (or the deposed S1) at last.
    late = model_of("kafka-kip320-first-try")
    finding, why = verdict(late, "elect(S1, {S1,S3}), write(S1, v1), shrink_isr(S1, S2), replicate(S1, S3), "
                                 "replicate(S1, S3), replicate(S1, S3)", 6, "FollowersCatchUp")
    assert finding is None and "not fair: leader_and_isr(S1, S2) is enabled" in why
    finding, why = verdict(late, "elect(S1, {S1}), elect(S2, {S2,S3}), write(S1, v1), replicate(S2, S3), "
                                 "replicate(S2, S3)", 5, "WrittenEventuallyCommitted")
    assert finding is None and "not fair: leader_and_isr(S2, S1) is enabled" in why


def test_kafka_with_late_requests_still_lacks_a_fair_failover():
    # Late LeaderAndIsr requests (fair): what remains is epoch 2's leader crashing before anyone else heard
    # of epoch 2, with no election after it (elections are not fair; docs/liveness.md, "Results").
    report = check_liveness(model_of("kafka-kip320-first-try"), "kafka-kip320-first-try")
    assert report.states == 22481
    assert steps_of(report.results["WrittenEventuallyCommitted"]) == (
        "elect(S1, {S1,S2}) elect(S3, {S3}) write(S1, v1) crash(S3) restart(S3) replicate(S1, S2) "
        "| cycle: replicate(S1, S2)")
    r = report.results["FollowersCatchUp"]
    assert (r.stem, r.cycle) == (8, 1) and [str(s) for s in r.steps[4:6]] == ["elect(S2, {S2})", "crash(S2)"]


def test_kafka_needs_isr_shrink_to_be_fair():
    # A follower that never fetches (S3: the LeaderAndIsr request missed it) keeps the HW at 0 unless the
    # leader removes it from the ISR: under raft's fairness the shortest lasso starves shrink_isr.
    model = model_of("kafka")
    raft_fair = check_liveness(model, "kafka", fair=FAIR_ACTIONS)
    assert steps_of(raft_fair.results["WrittenEventuallyCommitted"]) == (
        "elect(S1, {S1,S2}) write(S1, v1) replicate(S1, S2) | cycle: replicate(S1, S2)")
    finding, why = verdict(model, "elect(S1, {S1,S2}), write(S1, v1), replicate(S1, S2), replicate(S1, S2)", 4,
                           "WrittenEventuallyCommitted")
    assert finding is None and "not fair: shrink_isr(S1, S3) is enabled in every state of the cycle" in why
    without_shrink = tuple(a for a in model.FAIR if a != "shrink_isr")
    again = check_liveness(model, "kafka", fair=without_shrink).results["WrittenEventuallyCommitted"]
    assert (again.stem, again.cycle) == (3, 1)


def test_bookkeeper_has_no_cycle_that_keeps_an_obligation_open():
    # Its verdicts do not depend on fairness at these bounds: every run ends in a terminal state.
    model = model_of("bookkeeper")
    assert not check_liveness(model, "bookkeeper", fair=()).violated
    report = check_liveness(model, "bookkeeper")
    assert (report.states, report.violated, report.fairness) == (13794, [], ("send_add", "restart"))


def test_the_report_names_the_system_s_fairness():
    result = CliRunner().invoke(main, ["check", "--protocol", "zab", "--max-generation", "2", "--liveness"],
                                catch_exceptions=False)
    assert result.exit_code == 0
    assert "weakly fair: replicate, restart, sync, persist;" in result.output
    result = CliRunner().invoke(main, ["check", "--protocol", "kafka", "--max-generation", "2", "--max-crashes", "1",
                                       "--liveness", "--json"], catch_exceptions=False)
    body = json.loads(result.stdout)["liveness"]
    assert body["fairness"] == {"weak": ["replicate", "shrink_isr", "restart", "leader_and_isr", "flush"]}


# ---------------------------------------------------------------- variants of the other systems
VARIANTS = '''
from hwm.model.variant import Variant
from hwm.properties.liveness import followers_behind


def lonely(view):
    return {k: f"S{k + 1} is lonely" for k, s in enumerate(view.servers) if s.alive and s.lonely}


class ZabLonely(Variant):
    base = "zab"
    fields = {"lonely": False}
    actions = ("sulk", "cheer")
    fair = ("cheer",)
    liveness = {"Lonely": lonely}

    def guard_sulk(self, state, server):
        return None if state.servers[server].alive and not state.servers[server].lonely else "no"

    def effect_sulk(self, state, server):
        return self.with_server(state, server, lonely=True)

    def guard_cheer(self, state, server):
        return None if state.servers[server].lonely else "not lonely"

    def effect_cheer(self, state, server):
        return self.with_server(state, server, lonely=False)


class KafkaBehind(Variant):
    base = "kafka"
    fields = {"heard": False}
    liveness = {"Behind": followers_behind}
'''


def variant_model(tmp_path, name, config):
    from hwm.properties.protocol import resolve

    path = tmp_path / "variants.py"
    path.write_text(VARIANTS)
    return build_model(resolve(f"{path}:{name}")[1], config)


def test_a_zab_variant_s_fair_actions_come_after_zab_s(tmp_path):
    model = variant_model(tmp_path, "ZabLonely", Config(3, 1, 1, 0))
    report = check_liveness(model, "ZabLonely")
    assert report.fairness == ("replicate", "restart", "sync", "persist", "cheer")
    assert report.states == 1040 and not report.violated and not report.unreached
    # Its own fair action is what keeps Lonely; ZAB's are what keep the documented properties.
    unfair = check_liveness(model, "ZabLonely", fair=("replicate", "restart", "sync", "persist"))
    assert unfair.violated == ["Lonely"]
    assert check_liveness(model, "ZabLonely", fair=FAIR_ACTIONS + ("cheer",)).violated == ["FollowersCatchUp"]


def test_a_kafka_variant_s_liveness_property_is_checked_under_kafka_s_fairness(tmp_path):
    # No crash: the lasso the property shares with FollowersCatchUp needs none, and the graph is Kafka's
    # own at these bounds (3,517 states, as `check_liveness` of the preset counts them).
    model = variant_model(tmp_path, "KafkaBehind", Config(3, 2, 1, 0))
    report = check_liveness(model, "KafkaBehind")
    assert report.fairness == model_of("kafka").FAIR and report.states == 3517
    assert steps_of(report.results["Behind"]) == steps_of(report.results["FollowersCatchUp"])
