"""A lasso's open obligations on the implementation are those of the state the cycle starts from
(bridge/replay.py): the catalogue's FollowersCatchUp lasso with its loop moved one step earlier."""

from __future__ import annotations

import json

from hwm.bridge.replay import replay_on_impl
from hwm.counterexamples.build_liveness import HERE as LASSO_DIR
from hwm.properties.trace import parse


def test_an_obligation_opened_by_the_step_before_the_loop_is_open_along_the_cycle():
    # Step 8 raises S1's HWM to 1 past S2's 0: the obligation opens there. With the loop at step 9
    # the replicas' cycle closes and keeps it open, so the implementation's side holds the
    # violation and only the model refuses it (its cluster does not come back to where it was).
    data = json.loads((LASSO_DIR / "seed-followers-catch-up.json").read_text())
    data["loop"] = 9
    outcome = replay_on_impl(parse(data, source="loop-9.json"))
    assert outcome.kind == "holds"
    assert outcome.reason == ("on the model: the loop does not close: after step 11 the cluster is not in the "
                              "state it was in before step 9"), outcome.reason
