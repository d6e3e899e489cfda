"""The hunt finds the pattern's two rarer mistakes from scratch within a few schedules (fixed seeds,
no shrinking: test_hunt_deep.py shrinks), and what it finds is an ordinary schedule that replays
to the same finding."""

import pytest

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.hunt import hunt
from hwm.bridge.maelstrom.schedule import from_json
from tests.nodes.commands import naive_node

# Either finding shows the mistake: a read entry lost to a new leader (poll-above-hwm), an entry a
# majority stored and the leader counted as committed lost to a restart (truncate-to-own-hwm).
FOUND = {"poll-above-hwm": {"ReadNeverTruncated", "ReadNeverLost"},
         "truncate-to-own-hwm": {"CommittedOnQuorum", "AckedNeverLost"}}


@pytest.mark.parametrize("mistake, seed", [("poll-above-hwm", 7), ("truncate-to-own-hwm", 0)])
def test_a_short_seeded_hunt_catches_each_rarer_mistake_and_its_schedule_replays(mistake, seed):
    report = hunt(naive_node(mistake), workload="log", schedules=8, steps=30, seed=seed, shrink=False)
    assert report.failures, f"{mistake} not caught in {report.schedules} schedules under seed {seed}"
    caught = report.shortest
    assert caught.protocol_error is None, str(caught.protocol_error)
    assert {f.name for f in caught.findings} & FOUND[mistake], [str(f) for f in caught.findings]
    # The aimed rules wrote plain steps: the schedule goes through the file format's checks and replays.
    schedule = from_json(caught.schedule.to_json())
    again = run_schedule(naive_node(mistake), schedule)
    assert {f.name for f in again.findings} & FOUND[mistake], [str(f) for f in again.findings]
