"""observe.py's AckedAtOrBelowHwm fed by hand: an acknowledgement is judged on the node's next answer
of the same incarnation, never on one after a kill (raft's HWM is volatile: a restart shows 0)."""

from __future__ import annotations

from hwm.bridge.maelstrom.observe import Observer

NODES = ["n1", "n2", "n3"]


def state(role, generation, log=(), hwm=0):
    return {"generation": generation, "role": role, "log": [[i + 1, g] for i, g in enumerate(log)], "hwm": hwm,
            "isr": None}


def leading_two_entries(hwm: int) -> Observer:
    """n2 leads generation 1 with two entries and shows HWM `hwm`; then it acknowledges index 2."""
    observer = Observer(NODES)
    observer.observe("n1", 1, "settle", state("follower", 1, (1, 1), hwm=1))
    observer.observe("n3", 1, "settle", state("follower", 1, (1, 1), hwm=1))
    observer.observe("n2", 1, "settle", state("leader", 1, (1, 1), hwm=hwm))
    observer.acknowledge("n2", 2, "op 3 c2→n2 log_append(2)")
    return observer


def test_an_acknowledgement_is_not_judged_on_the_answer_of_a_later_incarnation():
    # bench/false_findings_nodes.py's raft row, wall clock, seed 1: n2 showed HWM 2, acknowledged index
    # 2, and was killed before its next answer; back in the final phase it shows HWM 0 (not durable).
    observer = leading_two_entries(hwm=2)
    observer.observe("n2", 17, "kill(n2)", None, alive=False)
    observer.observe("n2", None, "the final phase", state("follower", 1, (1, 1), hwm=0))
    assert observer.findings == [], [str(f) for f in observer.findings]


def test_an_acknowledgement_above_the_hwm_of_the_next_answer_is_still_a_finding():
    # The same incarnation's next answer: its HWM below the index it acknowledged.
    observer = leading_two_entries(hwm=1)
    observer.observe("n2", 2, "deliver(n1→n2)", state("leader", 1, (1, 1), hwm=1))
    assert [f.name for f in observer.findings] == ["AckedAtOrBelowHwm"]
    assert "was acknowledged at index 2, but n2's high-water mark was 1" in observer.findings[0].text
    # A kill after that answer takes nothing back.
    observer.observe("n2", 3, "kill(n2)", None, alive=False)
    assert [f.name for f in observer.findings] == ["AckedAtOrBelowHwm"]
