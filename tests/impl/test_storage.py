"""Replica storage: metadata atomicity, crash semantics, and MemoryStorage against DiskStorage."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwm.impl.storage import (
    CorruptLogError,
    CorruptMetadataError,
    DiskStorage,
    Durable,
    MemoryStorage,
    Storage,
    read_metadata,
)


def disk(tmp_path, segment_bytes: int = 120) -> DiskStorage:
    return DiskStorage(tmp_path / "replica", segment_bytes=segment_bytes)


@pytest.fixture(params=["memory", "disk"])
def storage(request, tmp_path):
    made = MemoryStorage() if request.param == "memory" else disk(tmp_path)
    yield made
    made.crash()


# ------------------------------------------------------------------------------ crash semantics
def test_fresh_storage_loads_empty(storage):
    assert storage.load() == Durable(generation=0, vote=None, hwm=0, log=())
    assert isinstance(storage, Storage)
    assert storage.last_index == 0


def test_synced_appends_survive_a_crash_and_unsynced_ones_do_not(storage):
    storage.load()
    storage.append([(1, 1, b"a"), (2, 1, b"b")])
    storage.sync()
    storage.append([(3, 1, b"c")])
    assert storage.entry(3) == (1, b"c")  # visible before sync
    storage.crash()
    durable = storage.load()
    assert durable.log == ((1, b"a"), (1, b"b"))
    assert storage.last_index == 2


def test_truncations_are_durable_only_after_sync(storage):
    storage.load()
    storage.append([(i, 1, b"x%d" % i) for i in range(1, 6)])
    storage.sync()
    storage.truncate_from(3)
    storage.append([(3, 2, b"new")])
    assert storage.generations() == (1, 1, 2)
    storage.crash()
    assert storage.load().generations() == (1, 1, 1, 1, 1)
    storage.truncate_from(2)
    storage.sync()
    storage.crash()
    assert storage.load().log == ((1, b"x1"),)


def test_close_syncs(storage):
    storage.load()
    storage.append([(1, 3, b"kept")])
    storage.save_metadata(3, "S2", 1)
    storage.close()
    assert storage.load() == Durable(3, "S2", 1, ((3, b"kept"),))


def test_metadata_is_durable_on_return(storage):
    storage.load()
    storage.save_metadata(2, "S1", 0)
    storage.crash()
    durable = storage.load()
    assert (durable.generation, durable.vote, durable.hwm) == (2, "S1", 0)
    storage.save_metadata(3, None, 0)
    storage.crash()
    assert storage.load().vote is None


def test_lifecycle_errors(storage):
    with pytest.raises(RuntimeError, match=r"load\(\) first"):
        storage.append([(1, 1, b"x")])
    with pytest.raises(RuntimeError, match=r"load\(\) first"):
        storage.save_metadata(1, None, 0)
    storage.load()
    with pytest.raises(RuntimeError, match="already open"):
        storage.load()


def test_argument_errors_name_the_argument(storage):
    storage.load()
    with pytest.raises(ValueError, match="expected index 1"):
        storage.append([(2, 1, b"x")])
    with pytest.raises(ValueError, match="index must be an int >= 1"):
        storage.truncate_from(0)
    with pytest.raises(ValueError, match="generation"):
        storage.save_metadata(-1, None, 0)
    with pytest.raises(ValueError, match="vote"):
        storage.save_metadata(1, 7, 0)
    with pytest.raises(ValueError, match="hwm"):
        storage.save_metadata(1, None, True)
    with pytest.raises(IndexError):
        storage.entry(1)


# ------------------------------------------------------------------------------------ metadata
def test_metadata_file_is_checksummed_json(tmp_path):
    storage = disk(tmp_path)
    storage.load()
    storage.save_metadata(4, "S3", 2)
    document = json.loads(open(storage.metadata_path).read())
    assert {k: document[k] for k in ("generation", "vote", "hwm")} == {"generation": 4, "vote": "S3", "hwm": 2}
    assert isinstance(document["crc32"], int)
    storage.crash()


def test_crash_between_temp_write_and_rename_keeps_old_metadata(tmp_path, monkeypatch):
    storage = disk(tmp_path)
    storage.load()
    storage.save_metadata(1, "S1", 0)

    def power_cut(source, destination):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", power_cut)
    with pytest.raises(OSError, match="simulated crash"):
        storage.save_metadata(2, "S2", 5)
    monkeypatch.undo()
    storage.crash()
    assert os.path.exists(storage.metadata_path + ".tmp")  # the new version, never renamed
    durable = storage.load()
    assert (durable.generation, durable.vote, durable.hwm) == (1, "S1", 0)
    storage.save_metadata(2, "S2", 5)  # a later save overwrites the stray temp file
    storage.crash()
    assert storage.load().generation == 2
    storage.crash()


def test_stray_garbage_temp_file_is_ignored(tmp_path):
    storage = disk(tmp_path)
    storage.load()
    storage.save_metadata(7, None, 3)
    storage.crash()
    with open(storage.metadata_path + ".tmp", "wb") as file:
        file.write(b'{"generation": 9, "vo')  # torn temp write
    assert storage.load().generation == 7
    storage.crash()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not valid JSON"),
        (b'{"generation": 1, "vo', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"generation": 1, "vote": null, "hwm": 0}', "fields are"),
        ("tamper-generation", "checksum mismatch"),
        ("tamper-crc", "checksum mismatch"),
        ("negative-hwm", "hwm must be an int >= 0"),
    ],
)
def test_corrupt_metadata_is_a_clear_error(tmp_path, content, reason):
    storage = disk(tmp_path)
    storage.load()
    storage.save_metadata(5, "S1", 2)
    storage.crash()
    if isinstance(content, str):
        document = json.loads(open(storage.metadata_path).read())
        if content == "tamper-generation":
            document["generation"] = 6
        elif content == "tamper-crc":
            document["crc32"] ^= 1
        else:
            from hwm.impl.storage import _metadata_crc  # a well-checksummed but invalid value

            document["hwm"] = -1
            document["crc32"] = _metadata_crc({k: document[k] for k in ("format", "generation", "vote", "hwm")})
        content = json.dumps(document).encode()
    with open(storage.metadata_path, "wb") as file:
        file.write(content)
    with pytest.raises(CorruptMetadataError, match=reason) as raised:
        storage.load()
    assert storage.metadata_path in str(raised.value)
    assert raised.value.path == storage.metadata_path
    with pytest.raises(CorruptMetadataError):
        read_metadata(storage.metadata_path)


# ------------------------------------------------------------------------------- disk specifics
def test_disk_storage_drops_a_torn_tail_and_reports_mid_log_damage(tmp_path):
    storage = disk(tmp_path, segment_bytes=1 << 20)
    storage.load()
    storage.append([(i, 1, b"payload-%d" % i) for i in range(1, 4)])
    storage.sync()
    storage.crash()
    [segment] = [name for name in os.listdir(storage.wal_directory) if name.endswith(".log")]
    path = os.path.join(storage.wal_directory, segment)
    with open(path, "ab") as file:
        file.write(b"\x01\x02\x03")  # a torn fourth record
    assert storage.load().last_index == 3
    storage.crash()
    with open(path, "r+b") as file:
        file.seek(30)
        byte = file.read(1)
        file.seek(30)
        file.write(bytes([byte[0] ^ 0xFF]))  # inside record 1, followed by records 2 and 3
    with pytest.raises(CorruptLogError, match=f"{path} at byte offset 16"):
        storage.load()
    with pytest.raises(RuntimeError):  # still closed: nothing half-open
        storage.entry(1)


def test_disk_storage_keeps_segments_in_a_wal_directory(tmp_path):
    storage = disk(tmp_path, segment_bytes=60)
    storage.load()
    storage.append([(i, 1, b"x" * 10) for i in range(1, 5)])
    storage.save_metadata(1, None, 0)
    storage.close()
    assert sorted(os.listdir(tmp_path / "replica")) == ["LOCK", "metadata.json", "wal"]
    assert len(os.listdir(storage.wal_directory)) == 4 + 1  # the segments and the synced-index file


# ------------------------------------------------------------------------- differential test
index_fraction = st.floats(0, 1.2)
operation = st.one_of(
    st.tuples(
        st.just("append"),
        st.lists(st.tuples(st.integers(0, 4), st.binary(max_size=24)), min_size=1, max_size=5),
    ),
    st.tuples(st.just("truncate_from"), index_fraction),
    st.tuples(st.just("sync")),
    st.tuples(st.just("save_metadata"), st.integers(0, 9), st.sampled_from([None, "S1", "S2"]), st.integers(0, 9)),
    st.tuples(st.just("crash")),
    st.tuples(st.just("close")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(operation, max_size=40))
def test_memory_and_disk_storage_agree(operations):
    """Same operations, same observable state, same recovered state after every crash."""
    directory = tempfile.mkdtemp(prefix="hwm-storage-")
    memory, on_disk = MemoryStorage(), DiskStorage(directory, segment_bytes=90)
    both = (memory, on_disk)
    synced: tuple = ()
    try:
        assert memory.load() == on_disk.load()
        for op in operations:
            if op[0] == "append":
                start = memory.last_index + 1
                batch = [(start + k, generation, data) for k, (generation, data) in enumerate(op[1])]
                for storage in both:
                    storage.append(batch)
            elif op[0] == "truncate_from":
                index = max(1, round(op[1] * memory.last_index))
                for storage in both:
                    storage.truncate_from(index)
            elif op[0] == "sync":
                for storage in both:
                    storage.sync()
                synced = tuple(memory.entries(1, memory.last_index + 1))
            elif op[0] == "save_metadata":
                for storage in both:
                    storage.save_metadata(*op[1:])
            else:
                if op[0] == "close":
                    synced = tuple(memory.entries(1, memory.last_index + 1))
                for storage in both:
                    getattr(storage, op[0])()
                recovered = memory.load()
                assert recovered == on_disk.load()
                assert recovered.log == synced
            assert memory.last_index == on_disk.last_index
            assert memory.generations() == on_disk.generations()
            assert memory.entries(1, memory.last_index + 1) == on_disk.entries(1, on_disk.last_index + 1)
            assert memory.metadata == on_disk.metadata
    finally:
        on_disk.crash()
        shutil.rmtree(directory, ignore_errors=True)
