"""Crash and disk-full safety of persistence, on real files, at every write point.

For each scenario the Readys a real replica produces are applied with `persist` to a DiskStorage
whose k-th write-like system call fails (see `diskfaults`), for every k: a crash (the process dies
there) or ENOSPC / EIO (the node sees the error and stops: `close()`). Afterwards the directory
must load, a replica must start from it, nothing synced before the failing batch may be lost, and
no entry may be newer than the durable generation.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest

from hwm.impl.core import Replica, persist
from hwm.impl.messages import AppendReply, AppendRequest, VoteReply
from hwm.impl.storage import DataDirectoryInUse, DiskStorage
from hwm.properties.protocol import RAFT
from tests.impl.diskfaults import Crash, faulty_disk

HWM_DURABLE = RAFT.__class__(**{**RAFT.flags(), "hwm_durable": True})
SEGMENT_BYTES = 16 + 2 * (24 + 100)  # two 100-byte records per segment: appends roll over


def _storage(path) -> DiskStorage:
    return DiskStorage(path, segment_bytes=SEGMENT_BYTES)


def _seed(path, generation: int, log: list[tuple[int, bytes]]) -> None:
    storage = _storage(path)
    storage.load()
    storage.save_metadata(generation, None, 0)
    storage.append([(i + 1, g, p) for i, (g, p) in enumerate(log)])
    storage.close()


def _follower_adopts_a_new_generation(path):
    """S2 (generation 1, three entries) hears the leader of generation 3: adopt it, truncate, append."""
    _seed(path, 1, [(1, b"a" * 100), (1, b"b" * 100), (1, b"c" * 100)])
    storage = _storage(path)
    replica = Replica("S2", ["S1", "S3"], RAFT, storage.load())
    storage.close()
    replica.step(AppendRequest(3, "S1", 1, 1, ((3, b"x" * 100), (3, b"y" * 100), (3, b"z" * 100)), 2))
    return RAFT, [replica.ready()]


def _leader_of_a_new_generation_writes(path):
    """S1 campaigns (generation 2), wins, writes five entries, and its HWM (durable) moves."""
    _seed(path, 1, [(1, b"a" * 100)])
    storage = _storage(path)
    replica = Replica("S1", ["S2", "S3"], HWM_DURABLE, storage.load())
    storage.close()
    replica.campaign()
    readys = [replica.ready()]
    replica.step(VoteReply(2, "S2", True))
    for k in range(5):
        replica.propose(bytes([k]) * 100)
    readys.append(replica.ready())
    replica.step(AppendReply(2, "S2", True, 6))
    readys.append(replica.ready())
    return HWM_DURABLE, readys


SCENARIOS = [_follower_adopts_a_new_generation, _leader_of_a_new_generation_writes]


def _run(path, scenario, fail_at, error):
    """Apply the scenario's Readys with call `fail_at` failing; returns (readys applied in full,
    protocol, calls made)."""
    protocol, readys = scenario(path)
    storage = _storage(path)
    storage.load()
    applied = 0
    with faulty_disk(fail_at, error) as disk:
        try:
            for ready in readys:
                persist(ready, storage)
                applied += 1
        except Crash:
            storage.crash()
        except OSError as failure:
            assert isinstance(error, OSError), failure
            storage.close()  # what a node that stops does
        else:
            storage.close()
    return readys, applied, protocol, disk.calls


def _check_recovers(path, protocol, readys, applied):
    storage = _storage(path)
    durable = storage.load()
    storage.close()
    replica = Replica("S9", ["S1", "S2", "S3"], protocol, durable)  # refuses an impossible state
    assert all(g <= durable.generation for g, _ in durable.log)
    # Everything of the batches persisted in full is there.
    for ready in readys[:applied]:
        for entry in ready.entries:
            assert durable.log[entry.index - 1] == (entry.generation, entry.payload)
        if ready.metadata is not None:
            assert durable.generation >= ready.metadata.generation
    return replica


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__.strip("_"))
@pytest.mark.parametrize("error", ["crash", "ENOSPC", "EIO"])
def test_a_failure_at_any_write_leaves_a_directory_a_replica_starts_from(tmp_path, scenario, error):
    raised = Crash() if error == "crash" else OSError(getattr(errno, error), os.strerror(getattr(errno, error)))
    _, _, _, total = _run(tmp_path / "count", scenario, None, None)
    assert total > 10
    for k in range(1, total + 1):
        path = tmp_path / f"at-{k}"
        readys, applied, protocol, _ = _run(path, scenario, k, raised)
        assert applied < len(readys), f"call {k} of {total} failed, yet every batch was persisted"
        _check_recovers(path, protocol, readys, applied)
    # And with no failure, all of it.
    readys, applied, protocol, _ = _run(tmp_path / "clean", scenario, None, None)
    _check_recovers(tmp_path / "clean", protocol, readys, applied)


def test_a_failed_write_stops_the_log_and_close_writes_nothing_more(tmp_path):
    storage = _storage(tmp_path)
    storage.load()
    storage.append([(1, 1, b"a" * 100)])
    storage.sync()
    with faulty_disk(1, OSError(errno.ENOSPC, "No space left on device")):
        storage.append([(2, 1, b"b" * 100), (3, 1, b"c" * 100)])
        with pytest.raises(OSError, match="No space left on device"):
            storage.sync()
    with pytest.raises(OSError, match="stopped taking writes"):
        storage.append([(2, 1, b"b")])
    with pytest.raises(OSError, match="stopped taking writes"):
        storage.save_metadata(1, None, 0)
    storage.close()
    segments = sorted(name for name in os.listdir(tmp_path / "wal") if name.endswith(".log"))
    assert [os.path.getsize(tmp_path / "wal" / name) for name in segments] == [16 + 124]
    durable = _storage(tmp_path).load()
    assert durable.log == ((1, b"a" * 100),)


_HOLD = textwrap.dedent("""
    import sys, time
    from hwm.impl.storage import DiskStorage
    storage = DiskStorage(sys.argv[1], owner="server S1 listening on 127.0.0.1:7001")
    storage.load()
    print("locked", flush=True)
    time.sleep(60)
""")


def test_a_second_user_of_a_data_directory_is_refused_naming_the_holder(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirectoryInUse, match=rf"in use by server S1 listening on 127.0.0.1:7001 \(pid {holder.pid}\)"):
            DiskStorage(tmp_path).load()
    finally:
        holder.kill()
        holder.wait()
    # kill -9 releases the lock: the directory is usable again.
    storage = DiskStorage(tmp_path)
    storage.load()
    storage.close()
