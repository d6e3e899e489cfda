"""The run's bookkeeping. `outcome.events`, the run's story that docs/simulation.md promises (starts, crashes, elections,
acknowledgements and reads with their virtual times), names every read (a mutant that dropped the
read events passed the suite: docs/mutation.md); a machine's first start is no restart; `shrink`
drops the steps a failure does not need (mutants that counted every start as a restart, or whose
shrink never ran, passed it too)."""

from __future__ import annotations

from hwm.bridge.dst import Schedule, Step, run_schedule


def test_the_events_name_the_starts_the_acknowledgements_and_the_reads():
    schedule = Schedule(seed=1, steps=(Step(50, "put", 0), Step(200, "get", 0), Step(100, "get", 1), Step(0, "crash", 2)))
    outcome = run_schedule(schedule)
    assert not outcome.violations and outcome.witnesses["reads"] >= 1, outcome.report(schedule)
    texts = [event.split(" ", 1)[1] for event in outcome.events]
    assert sum(text.startswith("read ") for text in texts) == outcome.witnesses["reads"], texts
    assert any(text.startswith("start S1") for text in texts), texts


def test_the_first_start_of_a_machine_is_no_restart():
    outcome = run_schedule(Schedule(seed=3, steps=(Step(50, "put", 0),)))
    assert not outcome.violations and outcome.witnesses["acknowledged puts"], outcome.report
    assert outcome.witnesses["restarts"] == 0, dict(outcome.witnesses)


def test_shrink_drops_every_step_the_failure_does_not_need_and_simplifies_the_rest():
    from hwm.bridge.dst import shrink

    schedule = Schedule(seed=9, steps=(Step(30, "put", 0, 3), Step(70, "crash", 1, 5), Step(10, "get", 2, 1)))
    shrunk = shrink(schedule, lambda s: any(step.action == "crash" for step in s.steps))
    assert shrunk == Schedule(seed=9, steps=(Step(0, "crash", 1, 0),))
