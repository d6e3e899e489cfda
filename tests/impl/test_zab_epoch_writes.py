"""ZAB's currentEpoch is written once per change: a Ready carries it when it changed since the last
Ready, and not again (a mutant that wrote it on every Ready passed the suite: docs/mutation.md)."""

from __future__ import annotations

from hwm.impl.messages import NewLeader
from hwm.impl.zab import ZabDurable, ZabReplica
from hwm.properties.protocol import PRESETS

ZAB = PRESETS["zab"].protocol


def test_the_current_epoch_rides_on_one_ready_only():
    follower = ZabReplica("S2", ("S1", "S3"), ZAB, ZabDurable(0, None, 0, ()))
    follower.step(NewLeader(1, "S1", ((1, b"a"),), 0))
    assert follower.ready().current_epoch == 1
    follower.step(NewLeader(1, "S1", ((1, b"a"),), 0))  # the same epoch again: nothing new to write
    assert follower.ready().current_epoch is None
