"""validation.py's ModelSteps fed by hand: observations of a raft run, no node processes.

What a finding says, and which voters a leader's first observation names (a voter is named only
with the generation it showed)."""

from __future__ import annotations

import pytest

from hwm.bridge.maelstrom.validation import ModelSteps


def seen(step, node, role, generation, log=(), hwm=0):
    return {"step": step, "cause": f"deliver#{step}", "node": node, "alive": True, "generation": generation,
            "role": role, "log": [list(entry) for entry in log], "hwm": hwm}


def test_a_finding_names_the_step_and_the_whole_state_the_node_showed():
    steps = ModelSteps("raft", ["n1", "n2", "n3"])
    finding = steps.observed(seen(1, "n1", "follower", 0, hwm=5))
    assert finding is not None and finding.step == 1
    assert "after deliver#1, n1 showed follower g0 log=[] hwm=5: no step of raft's model" in finding.text


def test_a_stale_leaders_change_names_no_voter_of_a_later_generation():
    steps = ModelSteps("raft", ["n1", "n2", "n3"])
    run = [seen(1, "n1", "candidate", 1), seen(2, "n2", "follower", 1), seen(3, "n1", "leader", 1),
           seen(4, "n3", "follower", 1),
           # n2 wins generation 2 with n3's vote; n1 has not heard of it and still leads 1.
           seen(5, "n2", "candidate", 2), seen(6, "n3", "follower", 2), seen(7, "n2", "leader", 2),
           # n3 stands for 3 and n2 votes for it: n2 shows generation 3, which no one has led.
           seen(8, "n3", "candidate", 3), seen(9, "n2", "follower", 3),
           # The stale leader n1 appends: n2 is not a voter of generation 1, it showed 3.
           seen(10, "n1", "leader", 1, log=[(1, 1)])]
    for observation in run:
        finding = steps.observed(observation)
        assert finding is None, finding.text
    assert steps.finish() is None


# n1 leads generation 1 and holds entry 1@g1, as does n2; n1 shows HWM 1 or not yet.
ELECTED_ONE_ENTRY = [seen(1, "n1", "candidate", 1), seen(2, "n2", "follower", 1), seen(3, "n1", "leader", 1),
                     seen(4, "n3", "follower", 1), seen(5, "n1", "leader", 1, log=[(1, 1)]),
                     seen(6, "n2", "follower", 1, log=[(1, 1)])]


@pytest.mark.parametrize("hwm, kind, index, found", [
    (1, "ack", 1, False),  # the first index, at the HWM
    (0, "ack", 1, True),  # the first index, above the HWM
    (1, "ack", 2, True),  # past the log
    (1, "read", 1, False),
    (0, "read", 1, True),
])
def test_an_acknowledgement_or_a_read_is_checked_against_the_nodes_hwm_right_after_it(hwm, kind, index, found):
    steps = ModelSteps("raft", ["n1", "n2", "n3"])
    shown = seen(7, "n1", "leader", 1, log=[(1, 1)], hwm=hwm)
    for observation in ELECTED_ONE_ENTRY + [shown]:
        finding = steps.observed(observation)
        assert finding is None, finding.text
    finding = steps.client("n1", kind, index, shown, 8, "deliver#8")
    assert (finding is not None) == found, finding and finding.text
    if found:
        what = "acknowledged log_append at index" if kind == "ack" else "served log_read of index"
        assert f"after deliver#8, n1 {what} {index} while it showed leader g1 log=[1] hwm={hwm}" in finding.text
