"""ZOOKEEPER-3911 with a durable HWM (impl/zab.py): after a truncation, the HWM a follower saves
covers only the log its storage holds, not the leader's entries it keeps in memory."""

from __future__ import annotations

from dataclasses import replace

from hwm.impl.messages import NewLeader
from hwm.impl.zab import ZabReplica
from hwm.properties.protocol import PRESETS
from tests.impl.test_zab import storage_holding

BUG_DURABLE_HWM = replace(PRESETS["zab-ack-before-persist"].protocol, hwm_durable=True)


def test_the_saved_hwm_after_a_truncation_stops_at_the_stored_log():
    # S3 logged 1@g1 2@g1; the leader of epoch 2 has 1@g1 2@g2 3@g2, all committed.
    s3 = ZabReplica("S3", ["S1", "S2"], BUG_DURABLE_HWM, storage_holding((1, 1), current_epoch=1).load())
    s3.step(NewLeader(2, "S1", ((1, b"e1"), (2, b"x"), (2, b"y")), 3))
    ready = s3.ready()
    # TRUNC from 2 is durable at once; 2@g2 and 3@g2 stay in memory (acknowledged before logged).
    assert ready.truncate_from == 2 and ready.entries == ()
    assert s3.high_water_mark == 3 and ready.metadata.hwm == 1  # what a crash keeps: 1@g1
