"""`outcome.events`, the run's story that docs/simulation.md promises (starts, crashes, elections,
acknowledgements and reads with their virtual times), names every read (a mutant that dropped the
read events passed the suite: docs/mutation.md)."""

from __future__ import annotations

from hwm.bridge.dst import Schedule, Step, run_schedule


def test_the_events_name_the_starts_the_acknowledgements_and_the_reads():
    schedule = Schedule(seed=1, steps=(Step(50, "put", 0), Step(200, "get", 0), Step(100, "get", 1), Step(0, "crash", 2)))
    outcome = run_schedule(schedule)
    assert not outcome.violations and outcome.witnesses["reads"] >= 1, outcome.report(schedule)
    texts = [event.split(" ", 1)[1] for event in outcome.events]
    assert sum(text.startswith("read ") for text in texts) == outcome.witnesses["reads"], texts
    assert any(text.startswith("start S1") for text in texts), texts
