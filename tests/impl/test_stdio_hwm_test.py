"""hwm's own node (`hwm node --stdio`) under `hwm test`'s harness, with ZAB's and Kafka's presets.

The raft preset's runs are in tests/nodes/test_own_node.py. Here: one schedule per preset, written
to catch the pattern's classic mistakes in the node (a leader that acknowledges its own write, a
node that serves reads above its high-water mark: plant either in impl/stdio.py and the ZAB
schedule fails), and, under `deep`, `hwm test` on the command line for 20 schedules per preset and
workload."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.schedule import Schedule
from hwm.cli import main


def own_node(protocol: str) -> list[str]:
    return [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--protocol", protocol]


def test_an_isolated_zab_leader_neither_acknowledges_nor_serves_its_unreplicated_write():
    # After 10 rounds n1 leads (its election timeout is the shortest: seeded from the node id). Its
    # write cannot reach a quorum once it is alone: answered error 0 when it steps down, and not
    # readable; the final phase heals and reads everything back.
    steps = [{"op": "settle", "rounds": 10}, {"op": "log_append", "node": "n1", "value": 1},
             {"op": "partition", "groups": [["n1"], ["n2", "n3"]]}, {"op": "log_read", "node": "n1", "index": 1},
             {"op": "settle", "rounds": 8}]
    result = run_schedule(own_node("zab"), Schedule(workload="log", clock="virtual", steps=steps, protocol="zab"))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]
    append, read = result.history[:2]
    assert append["type"] == "log_append" and append["status"] == "info", append  # accepted by the leader
    assert read["type"] == "log_read" and read["status"] == "fail", read


def test_the_kafka_workload_through_a_restart_on_kafkas_preset():
    steps = [{"op": "settle", "rounds": 12}, {"op": "send", "node": "n1", "key": "k1", "msg": 1},
             {"op": "send", "node": "n1", "key": "k2", "msg": 2}, {"op": "settle", "rounds": 4},
             {"op": "poll", "node": "n2", "offsets": {"k1": 0, "k2": 0}},
             {"op": "commit_offsets", "node": "n1", "offsets": {"k1": 1}},
             {"op": "kill", "node": "n2"}, {"op": "restart", "node": "n2"}, {"op": "settle", "rounds": 6},
             {"op": "poll", "node": "n2", "offsets": {"k1": 0}},
             {"op": "list_committed_offsets", "node": "n3", "keys": ["k1"]}]
    result = run_schedule(own_node("kafka"), Schedule(workload="kafka", clock="virtual", steps=steps,
                                                      protocol="kafka"))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]
    assert [op["status"] for op in result.history[:2]] == ["ok", "ok"], result.history[:2]  # n1 leads


@pytest.mark.deep
@pytest.mark.parametrize("protocol", ["raft", "zab", "kafka"])
@pytest.mark.parametrize("workload", ["log", "kafka"])
def test_hwm_test_passes_the_own_node_for_20_schedules(tmp_path, protocol, workload):
    done = CliRunner().invoke(main, [
        "test", "--workload", workload, "--clock", "virtual", "--schedules", "20", "--steps", "20", "--seed", "7",
        "--protocol", protocol, "--save", str(tmp_path / "found.json"), "--json", "--", *own_node(protocol)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["findings"] == [] and report["protocol_error"] is None, report
    assert report["schedules"] >= 20 and report["operations"] > 0, report  # Hypothesis may run a few more
