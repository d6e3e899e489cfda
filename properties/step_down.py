"""A leader stepping down when it loses its quorum: the witness that `check_quorum` fires in ZAB's
model (model/zab_partition.py).

ZAB's step-down guards availability, not safety (a leader commits nothing without a quorum), so no
`always` property of the catalogue fails without it; the witness shows that a check with the rule
on reaches the step where it acts, so that a pass is not a vacuous one.
"""

from __future__ import annotations

from hwm.properties.catalogue import Finding, Property
from hwm.properties.snapshot import LEADER, ClusterView, server_name


def leader_steps_down(before: ClusterView, after: ClusterView) -> Finding:
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        # A live leader that is a live follower of the same generation after the step: it gave up
        # leading without hearing of a newer leader (which would have raised its generation).
        if b.alive and b.role == LEADER and a.alive and a.role != LEADER and a.generation == b.generation:
            return f"{server_name(k)}, leader of generation {b.generation}, lost its quorum and stepped down"
    return None


LEADER_STEPS_DOWN = Property("LeaderStepsDown", "sometimes", "step",
                             "a leader that can no longer reach a quorum steps down", leader_steps_down)
