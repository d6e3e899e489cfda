"""What hwm sees inside a node: observations after each change, the catalogue on them, restarts."""

import sys
from pathlib import Path

from bridge.maelstrom.cluster import run_schedule
from bridge.maelstrom.schedule import Schedule
from tests.nodes.commands import bad_node, log_node

SETTLE = {"op": "settle", "rounds": 6}
APPEND = {"op": "log_append", "node": "n1", "value": 1}


def test_a_planted_lie_in_hwm_state_is_reported_at_the_change_that_shows_it():
    plant = [sys.executable, str(Path(__file__).parent / "plant_node.py")]
    steps = [SETTLE, {"op": "log_read", "node": "n2", "index": 1}, APPEND, {"op": "deliver_all"}]
    result = run_schedule(plant, Schedule(workload="log", steps=steps))
    found = {f.name: f for f in result.findings}
    assert found["CommittedOnQuorum"].step == 3  # the append: the leader claims hwm 2 at once
    assert "n1 counts entry 2@g1 as committed (hwm=2) but only 1 of 3 servers store it" in found["CommittedOnQuorum"].text
    assert "log_append(n1, 1), seen at n1" in found["CommittedOnQuorum"].text
    honest = run_schedule(log_node(), Schedule(workload="log", steps=steps))
    assert honest.findings == []


def test_a_restarted_node_finds_its_data_directory_as_it_left_it(tmp_path):
    steps = [SETTLE, APPEND, SETTLE, {"op": "kill", "node": "n2"}, {"op": "restart", "node": "n2"}]
    result = run_schedule(log_node(), Schedule(workload="log", steps=steps), data_root=tmp_path)
    assert result.findings == []
    n2 = [o for o in result.observations if o["node"] == "n2"]
    killed = next(k for k, o in enumerate(n2) if not o["alive"])
    assert n2[killed]["step"] == 4 and n2[killed + 1]["step"] == 5
    assert n2[killed + 1]["log"] == [[1, 1], [2, 1]]  # read back from state.json after SIGKILL
    assert (tmp_path / "n2" / "state.json").exists() and "recovered generation 1, 2 entries" in \
        (tmp_path / "n2.log").read_text()


def test_services_answer_a_node_that_keeps_its_log_in_lin_kv():
    result = run_schedule(bad_node("kv"), Schedule(nodes=2, workload="log",
                                                  steps=[APPEND, {"op": "log_append", "node": "n2", "value": 2}]))
    assert result.protocol_error is None, result.protocol_error
    assert [op["reply"].get("index") for op in result.history[:2]] == [1, 2]
