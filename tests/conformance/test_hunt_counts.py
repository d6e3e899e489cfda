"""`hunt` counts the test cases it started (Hypothesis starts more than the examples it keeps) from zero, and is derandomized unless given a seed (the same
machine and budget give the same hunt), where a seed turns derandomizing and the example database
off. Mutants that started the count at one, or that hunted at random without a seed, passed the
suite (docs/mutation.md)."""

from __future__ import annotations

import hwm.bridge.conformance.hunting as hunting
from hwm.bridge.conformance import hunt, machine_for


def test_a_hunt_counts_every_test_case_it_started_from_zero():
    started = []

    class Counted(machine_for("raft")):
        def __init__(self):
            started.append(1)
            super().__init__()

    assert Counted.runs == 0
    found = hunt(Counted, 1)
    assert found.failure is None and found.examples is None
    assert Counted.runs == len(started) >= 1


def test_a_hunt_is_derandomized_unless_a_seed_is_given(monkeypatch):
    seen = []
    monkeypatch.setattr(hunting, "run_state_machine_as_test", lambda machine, settings: seen.append(settings))
    hunt(machine_for("raft"), 1)
    hunt(machine_for("raft"), 1, seed=7)
    assert seen[0].derandomize is True
    assert seen[1].derandomize is False and seen[1].database is None
