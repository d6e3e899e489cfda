"""A vote is durable before the reply that grants it is sent.

Raft's "at most one vote per generation" holds across a crash only if the vote reaches the disk
first. The case the other tests miss: the voter already holds the generation durably, so granting
changes the vote alone (no new generation rides along to carry it to the disk). Real `DiskStorage`
under `impl.core.persist`, as the runtime runs it; the voter crashes right after its reply.
"""

from __future__ import annotations

import pytest

from hwm.impl.core import Replica, persist
from hwm.impl.messages import VoteReply, VoteRequest
from hwm.impl.storage import DiskStorage
from hwm.properties.protocol import RAFT


def _restart(directory):
    storage = DiskStorage(directory)
    durable = storage.load()
    return storage, Replica("S3", ("S1", "S2"), RAFT, durable, rng_seed=1)


@pytest.mark.parametrize("hwm", [0, 2])
def test_a_vote_granted_in_a_generation_already_held_survives_a_restart(tmp_path, hwm):
    storage = DiskStorage(tmp_path)
    storage.load()
    storage.append([(1, 1, b"a"), (2, 1, b"b")])
    storage.sync()
    storage.save_metadata(2, None, hwm)  # generation 2 is durable, no vote in it yet
    storage.close()

    storage, voter = _restart(tmp_path)
    voter.step(VoteRequest(2, "S1", 2, 1))
    ready = voter.ready()
    persist(ready, storage)  # the runtime persists, then sends
    assert ready.messages == (("S1", VoteReply(2, "S3", True)),)
    storage.crash()  # right after the reply went out: nothing more is synced

    storage, voter = _restart(tmp_path)
    assert storage.metadata.vote == "S1", "the granted vote was not on disk when the reply went out"
    voter.step(VoteRequest(2, "S2", 2, 1))
    assert voter.ready().messages == (("S2", VoteReply(2, "S3", False)),), "two votes in generation 2"
    storage.close()
