"""hwm's own ZAB node (`hwm node --stdio --protocol zab`), each change it shows stepped against ZAB's model
(checker/observed_zab.py): a node with ZOOKEEPER-3911 is no behaviour of the fixed preset's model,
and is one of its own preset's; the correct node passes the same schedule, the naive mistakes'
schedules and a short hunt (`deep`)."""

import dataclasses

import pytest

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.hunt import hunt
from hwm.bridge.maelstrom.schedule import Schedule, load
from tests.nodes.commands import SCHEDULES, own_node


# n1 leads; n3, cut off, is dropped from n1's synchronised followers (ZooKeeper's syncLimit) while
# n1 commits an entry with n2; healed, n3 gets the entry in a NEWLEADER (a DIFF) and ACKs it; n3 is
# killed two rounds later and restarted.
RESYNC_THEN_KILL = [{"op": "settle", "rounds": 10}, {"op": "partition", "groups": [["n1", "n2"], ["n3"]]},
                    {"op": "settle", "rounds": 8}, {"op": "log_append", "node": "n1", "value": 1},
                    {"op": "settle", "rounds": 2}, {"op": "heal"}, {"op": "settle", "rounds": 2},
                    {"op": "kill", "node": "n3"}, {"op": "restart", "node": "n3"}, {"op": "settle", "rounds": 1}]


def test_a_follower_that_acks_newleader_before_logging_it_is_no_behaviour_of_zabs_model():
    # ZOOKEEPER-3911 planted in the node: the DIFF's entry was only in memory, the restart lost it.
    result = run_schedule(own_node("zab-ack-before-persist"),
                          Schedule(workload="log", clock="virtual", steps=RESYNC_THEN_KILL, protocol="zab"))
    found = {f.name: f for f in result.findings}
    assert found["ModelStep"].step == 9, [str(f) for f in result.findings]
    text = found["ModelStep"].text
    assert text.startswith("after restart(n3), n3 showed follower g1 log=[] hwm=0: no step of zab's model makes "
                           "this"), text
    assert "nearest model step: restart(n3), giving follower g1 log=[1] hwm=0" in text


@pytest.mark.deep
def test_the_same_node_is_a_behaviour_of_its_own_presets_model_and_the_fixed_node_passes():
    mutant = run_schedule(own_node("zab-ack-before-persist"), Schedule(
        workload="log", clock="virtual", steps=RESYNC_THEN_KILL, protocol="zab-ack-before-persist"))
    assert "ModelStep" not in {f.name for f in mutant.findings}, [str(f) for f in mutant.findings]
    fixed = run_schedule(own_node("zab"), Schedule(workload="log", clock="virtual", steps=RESYNC_THEN_KILL,
                                                    protocol="zab"))
    assert fixed.protocol_error is None and fixed.findings == [], [str(f) for f in fixed.findings]


@pytest.mark.deep
@pytest.mark.parametrize("mistake", ["ack-on-write", "poll-above-hwm", "truncate-to-own-hwm"])
def test_hwms_own_zab_node_passes_each_naive_mistakes_schedule(mistake):
    result = run_schedule(own_node("zab"), dataclasses.replace(load(SCHEDULES / f"{mistake}.json"), protocol="zab"))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]


@pytest.mark.deep
def test_hwms_own_zab_node_passes_a_fixed_number_of_hypothesis_schedules():
    report = hunt(own_node("zab"), workload="kafka", schedules=3, steps=12, seed=1, protocol="zab")
    assert report.failures == [] and report.schedules == 3, [str(f) for r in report.failures for f in r.findings]
