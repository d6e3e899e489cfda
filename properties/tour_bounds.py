"""The bounds of the tour (`hwm check` with no protocol, at the default bounds): what it lowers for a
system's presets and for single presets whose space is large at the default bounds."""

from __future__ import annotations

from typing import Any

# Bounds the tour (`hwm check` with no protocol, at the default bounds) lowers for a
# system's presets. Kafka's model has more per-replica state than raft's (ISR
# membership, the followed leader, the truncating state) and an election needs no
# quorum of voters, so at max_generation 4 it takes several times raft's time; every
# Kafka bug of the catalogue shows at max_generation 3.
TOUR_BOUNDS: dict[str, dict[str, Any]] = {"kafka": {"max_generation": 3}}

# Bounds the tour sets for one preset, over its system's TOUR_BOUNDS (at the default bounds only;
# other bounds are the user's).
# - The lease presets: a partition and a second entry, which at generation <= 2 and no crash cost
#   about a thousand states each.
# - kafka-without-controller-fencing and zab-step-down: a partition (below).
# - kafka-unflushed: its flushed lengths make its space at max_generation 3 four times kafka's
#   (118,753 states against 30,240); every property its `breaks` names shows with one leader epoch
#   already (880 states), and its saved traces show the rest (a re-elected last ISR replica, a
#   divergence) on two replicas.
PRESET_TOUR_BOUNDS: dict[str, dict[str, Any]] = {
    **{name: {"max_generation": 2, "max_log": 2, "max_crashes": 0, "max_partitions": 1}
       for name in ("raft-lease-reads", "raft-lease-reads-without-check-quorum")},
    "kafka-unflushed": {"max_generation": 1},
    # A partition, a second epoch and one entry show every property the fencing-less preset breaks
    # (4,917 states); the step-down preset at the same bounds shows its witness (1,075 states).
    **{name: {"max_generation": 2, "max_log": 1, "max_crashes": 0, "max_partitions": 1}
       for name in ("kafka-without-controller-fencing", "zab-step-down")},
}
