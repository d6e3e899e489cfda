"""validation.py's ModelSteps fed by hand: observations of a raft run, no node processes.

What a finding says, and which voters a leader's first observation names (a voter is named only
with the generation it showed)."""

from __future__ import annotations

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
