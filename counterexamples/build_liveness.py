"""Rebuild the liveness catalogue: the checker's shortest lasso per entry, explained.

    python -m counterexamples.build_liveness     # rewrites counterexamples/liveness/*.json

A lasso violates an `eventually` property: its steps from `loop` on repeat forever.
`tests/checker/test_liveness.py` checks that every file still equals what the checker finds.
"""

from __future__ import annotations

from pathlib import Path

from hwm.checker.traces import lasso_trace
from hwm.model.registry import build_model
from hwm.checker.liveness import check_liveness
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS

HERE = Path(__file__).parent / "liveness"

# file stem -> (preset, property, config, title, explanation)
CATALOGUE = {
    "seed-followers-catch-up": (
        "seed", "FollowersCatchUp", {"servers": 3, "max_generation": 2, "max_log": 1, "max_crashes": 1},
        "The seed's follower acknowledges entries it was never sent, and a follower's HWM never catches up",
        "S3 leads generation 1, writes entry 1 and replicates it to S2 only. S1 then wins generation 2 with "
        "S2's vote, with an empty log. The seed's follower answers an append with "
        "'wal.getLastLogIndex()', its own last index, whatever the leader sent: S2 acknowledges index 1, "
        "which S1 never had (step 5), and S1 records it. S2 crashes and, rejoining, truncates its log to "
        "S1's high-water mark, 0. S3 then acknowledges its own stale entry 1 too (step 8): S1 counts index 1 "
        "on two servers and raises its HWM to 1, past the end of its own empty log. From then on S1 keeps replicating to both followers "
        "(the cycle: steps 10 and 11, each a whole append round trip that changes nothing) and S2, which "
        "stores nothing, learns at most the HWM of what it stores, 0: S2's HWM stays below its leader's "
        "forever, although replication is fair and no one crashes or is elected any more. Raft's follower "
        "acknowledges prev_index + the entries it was sent, so a leader's HWM never passes its own log "
        "and every live follower catches up.",
    ),
}


def build(stem: str) -> Path:
    preset, prop, overrides, title, explanation = CATALOGUE[stem]
    report = check_liveness(build_model(PRESETS[preset].protocol, Config(**overrides)), preset)
    trace = lasso_trace(report, preset, prop)
    trace.title = title
    trace.explanation = explanation
    return trace.save(HERE / f"{stem}.json")


def main() -> None:
    for stem in CATALOGUE:
        print(build(stem))


if __name__ == "__main__":
    main()
