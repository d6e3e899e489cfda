"""What hwm sees inside a node: observations after each change, the catalogue on them, restarts."""

import sys
from pathlib import Path

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.schedule import Schedule
from tests.nodes.commands import LOG_NODE_PROTOCOL, bad_node, log_node

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


RESTART = [SETTLE, APPEND, SETTLE, {"op": "kill", "node": "n2"}, {"op": "restart", "node": "n2"}]


def test_a_restarted_node_finds_its_data_directory_as_it_left_it(tmp_path):
    # Every change stepped against the model of the preset the node implements, the restart included.
    result = run_schedule(log_node(), Schedule(workload="log", steps=RESTART, protocol=LOG_NODE_PROTOCOL),
                          data_root=tmp_path)
    assert result.findings == [], [str(f) for f in result.findings]
    steps = RESTART
    n2 = [o for o in result.observations if o["node"] == "n2"]
    killed = next(k for k, o in enumerate(n2) if not o["alive"])
    assert n2[killed]["step"] == 4 and n2[killed + 1]["step"] == 5
    assert n2[killed + 1]["log"] == [[1, 1], [2, 1]]  # read back from state.json after SIGKILL
    assert (tmp_path / "n2" / "state.json").exists() and "recovered generation 1, 2 entries" in \
        (tmp_path / "n2.log").read_text()


def test_services_answer_a_node_that_keeps_its_log_in_lin_kv():
    result = run_schedule(bad_node("kv"), Schedule(nodes=2, workload="log",
                                                  steps=[APPEND, *[{"op": "deliver_all"}] * 4,
                                                         {"op": "log_append", "node": "n2", "value": 2}]))
    assert result.protocol_error is None, result.protocol_error
    assert [op["reply"].get("index") for op in result.history[:2]] == [1, 2]


def test_a_node_that_forgets_its_generation_on_restart_is_no_behaviour_of_the_model():
    forgetful = [sys.executable, str(Path(__file__).parent / "forgetful_node.py")]
    result = run_schedule(forgetful, Schedule(workload="log", steps=RESTART, protocol=LOG_NODE_PROTOCOL))
    assert result.protocol_error is None, result.protocol_error
    # Only the model sees it, at the restart: the catalogue and the client history find nothing.
    assert [(f.name, f.step) for f in result.findings] == [("ModelStep", 5)], [str(f) for f in result.findings]
    text = result.findings[0].text
    assert text.startswith("after restart(n2), n2 showed follower g0 log=[1,1] hwm=2: no step of "
                           "raft-noop+hwm_durable=true's model makes this"), text
    assert "nearest model step: restart(n2), giving follower g1 log=[1,1] hwm=2" in text
    assert "possible just before: n1 leader g1 log=[1,1] hwm=2, n2 down g1 log=[1,1] hwm=2" in text
