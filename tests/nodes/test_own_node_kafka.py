"""hwm's own Kafka broker (`hwm node --stdio --protocol kafka`, the controller in the first node), each
change it shows stepped against Kafka's model (checker/observed_kafka.py): planted divergences are
reported as `ModelStep` at the step where they happen, where the history checks see nothing; the
correct broker passes schedules of both workloads; a broken preset's broker is a behaviour of its
own preset's model and not of the fixed one's."""

import dataclasses
import sys
from pathlib import Path

import pytest

from hwm.bridge.maelstrom.cluster import Limits, run_schedule
from hwm.bridge.maelstrom.hunt import hunt
from hwm.bridge.maelstrom.schedule import Schedule, load
from tests.nodes.commands import SCHEDULES, own_node

PLANT = Path(__file__).parent / "plant_kafka_node.py"


def planted(plant: str) -> list[str]:
    return [sys.executable, str(PLANT), plant, "node", "--stdio", "--protocol", "kafka"]


# n1 (the controller's node) is elected; the followers fetch n1's entry: a partition keeps n3's fetch
# from n1, whose ISR still holds n3.
ONE_FOLLOWER_FETCHES = [{"op": "settle", "rounds": 6}, {"op": "partition", "groups": [["n1", "n2"], ["n3"]]},
                        {"op": "log_append", "node": "n1", "value": 1}, {"op": "deliver_all"}, {"op": "deliver_all"},
                        {"op": "heal"}, {"op": "settle", "rounds": 4}]
# An entry committed on all three; n2 is killed and restarted on its data directory.
RESTART_A_FOLLOWER = [{"op": "settle", "rounds": 6}, {"op": "log_append", "node": "n1", "value": 1},
                      {"op": "settle", "rounds": 2}, {"op": "kill", "node": "n2"}, {"op": "restart", "node": "n2"},
                      {"op": "settle", "rounds": 2}]


def schedule(steps, protocol="kafka", workload="log") -> Schedule:
    return Schedule(workload=workload, clock="virtual", steps=steps, protocol=protocol)


def test_a_leader_whose_hw_passes_the_isrs_smallest_log_end_offset_is_no_behaviour_of_kafkas_model():
    # Two rounds of the final phase suffice (the finding is at step 5): the default run's budget.
    result = run_schedule(planted("hw-past-isr"), schedule(ONE_FOLLOWER_FETCHES), Limits(final_rounds=2))
    found = {f.name: f for f in result.findings}
    assert set(found) == {"ModelStep"} and found["ModelStep"].step == 5, [str(f) for f in result.findings]
    assert found["ModelStep"].text.startswith("after deliver_all(), n1 showed leader g1 log=[1] hwm=1 isr=n1,n2,n3: "
                                              "no step of kafka's model makes this"), found["ModelStep"].text


@pytest.mark.deep
def test_the_history_checks_see_nothing_of_the_hw_past_the_isr():
    result = run_schedule(planted("hw-past-isr"), schedule(ONE_FOLLOWER_FETCHES, protocol=None))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]


@pytest.mark.deep
def test_a_broker_that_forgets_its_epoch_on_restart_is_no_behaviour_of_kafkas_model():
    result = run_schedule(planted("forget-epoch"), schedule(RESTART_A_FOLLOWER))
    found = {f.name: f for f in result.findings}
    assert set(found) == {"ModelStep"} and found["ModelStep"].step == 5, [str(f) for f in result.findings]
    text = found["ModelStep"].text
    assert text.startswith("after restart(n2), n2 showed follower g0 log=[1] hwm=0: no step of kafka's model"), text
    assert "nearest model step: restart(n2), giving follower g1 log=[1] hwm=0" in text
    unstepped = run_schedule(planted("forget-epoch"), schedule(RESTART_A_FOLLOWER, protocol=None))
    assert unstepped.findings == [], [str(f) for f in unstepped.findings]


@pytest.mark.deep
def test_a_poll_served_above_the_hw_is_checked_against_the_brokers_next_state():
    steps = [{"op": "settle", "rounds": 6}, {"op": "send", "node": "n1", "key": "k1", "msg": 1},
             {"op": "poll", "node": "n1", "offsets": {"k1": 1}}, {"op": "settle", "rounds": 2}]
    result = run_schedule(planted("poll-above-hwm"), schedule(steps, workload="kafka"))
    found = {f.name: f for f in result.findings}
    assert found["ModelStep"].step == 3, [str(f) for f in result.findings]
    assert "n1 served a poll of offset 1 while it showed leader g1 log=[1] hwm=0" in found["ModelStep"].text


@pytest.mark.deep
def test_a_broker_that_truncates_to_its_own_hw_is_a_behaviour_of_its_own_preset_only():
    # The follower n2 holds n1's entry above its HW (the HW moves on its next fetch) when it is killed;
    # restarted, it becomes a follower again: before KIP-101 it truncates to its own HW.
    steps = [{"op": "settle", "rounds": 6}, {"op": "log_append", "node": "n1", "value": 1}, {"op": "deliver_all"},
             {"op": "kill", "node": "n2"}, {"op": "restart", "node": "n2"}, {"op": "settle", "rounds": 2}]
    own = run_schedule(own_node("kafka-truncate-to-hwm"), schedule(steps, protocol="kafka-truncate-to-hwm"))
    assert own.protocol_error is None and own.findings == [], [str(f) for f in own.findings]
    fixed = run_schedule(own_node("kafka-truncate-to-hwm"), schedule(steps))
    found = {f.name: f for f in fixed.findings}
    assert set(found) == {"ModelStep"} and found["ModelStep"].step == 6, [str(f) for f in fixed.findings]
    assert "n2 showed follower g1 log=[] hwm=0" in found["ModelStep"].text
    correct = run_schedule(own_node("kafka"), schedule(steps))
    assert correct.protocol_error is None and correct.findings == [], [str(f) for f in correct.findings]


@pytest.mark.deep
@pytest.mark.parametrize("mistake", ["ack-on-write", "poll-above-hwm", "truncate-to-own-hwm"])
def test_hwms_own_kafka_node_passes_each_naive_mistakes_schedule(mistake):
    result = run_schedule(own_node("kafka"), dataclasses.replace(load(SCHEDULES / f"{mistake}.json"), protocol="kafka"))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]


@pytest.mark.deep
@pytest.mark.parametrize("workload", ["log", "kafka"])
def test_hwms_own_kafka_node_passes_a_fixed_number_of_hypothesis_schedules(workload):
    report = hunt(own_node("kafka"), workload=workload, schedules=4, steps=16, seed=1, protocol="kafka")
    assert report.failures == [] and report.schedules == 4, [str(f) for r in report.failures for f in r.findings]
