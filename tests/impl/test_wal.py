"""The write-ahead log: layout, roll-over, truncation by index, torn-tail recovery, corruption reports.

Crash model used here (see ``impl.wal``): ``S`` is the log at the last ``sync``, ``W`` the log last
handed to the OS (``flush``/``sync``). A process crash recovers ``W``. A power failure may tear the
unsynced bytes at the end of the last segment, modelled by cutting that file at any offset at or past
its durable size, or by flipping a byte of the final record when that record is unsynced; recovery
then returns the records that lie wholly before the damage, which always include every synced record
not truncated since (the durable floor). The same damage to a record the synced-index file names as
fsynced is corruption, and refused. (tests/sim/test_reordering_disk.py tears the unsynced pages out
of order on a simulated disk.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zlib

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hwm.impl.wal import (
    RECORD_HEADER,
    SEGMENT_HEADER,
    SYNCED_INDEX_FILE,
    CorruptLogError,
    WriteAheadLog,
    encode_record,
    encode_synced_index,
    segment_name,
)

HEADER = SEGMENT_HEADER.size


def payload(index: int) -> bytes:
    return f"value-{index}".encode()


def entries(start: int, end: int, generation: int = 1) -> list[tuple[int, int, bytes]]:
    return [(index, generation, payload(index)) for index in range(start, end)]


def files(directory: str) -> dict[str, bytes]:
    result = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as file:
            result[name] = file.read()
    return result


def segment_files(directory: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".log"))


def parse_segment(path: str) -> list[tuple[int, int, int]]:
    """``(index, offset, end)`` of every complete record, by the documented layout (not the WAL's code)."""
    with open(path, "rb") as file:
        data = file.read()
    records = []
    offset = HEADER
    while offset + RECORD_HEADER.size <= len(data):
        _, index, _, length = RECORD_HEADER.unpack_from(data, offset)
        end = offset + RECORD_HEADER.size + length
        if end > len(data):
            break
        records.append((index, offset, end))
        offset = end
    return records


def flip_byte(path: str, offset: int, mask: int = 0xFF) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        value = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([value ^ mask]))


def cut_file(path: str, size: int) -> None:
    with open(path, "r+b") as file:
        file.truncate(size)


def written_log(directory: str, count: int, segment_bytes: int = 1 << 20, synced: int | None = None) -> None:
    """`count` records, the first `synced` of them (all by default) fsynced and the rest only handed
    to the OS, then a process crash: what a power failure may tear is the records after `synced`."""
    synced = count if synced is None else synced
    wal = WriteAheadLog(directory, segment_bytes)
    wal.append(entries(1, synced + 1))
    wal.sync()
    wal.append(entries(synced + 1, count + 1))
    wal.flush()
    wal.crash()


# ------------------------------------------------------------------------------------- basics
def test_records_survive_close_and_reopen(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        wal.append([(1, 1, b"a"), (2, 1, b""), (3, 2, bytes(range(256)))])
        assert wal.entry(2) == (1, b"")  # readable before sync
        wal.sync()
        assert wal.last_index == 3
    wal = WriteAheadLog(tmp_path)
    assert wal.last_index == 3
    assert wal.generations() == (1, 1, 2)
    assert wal.entries(1, 4) == [(1, b"a"), (1, b""), (2, bytes(range(256)))]
    assert wal.entries(2, 2) == []
    assert wal.torn_tail is None
    wal.close()


def test_layout_matches_the_documented_format(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        wal.append([(1, 7, b"xyz")])
    [name] = segment_files(tmp_path)
    assert name == "00000000000000000001.log"
    data = (tmp_path / name).read_bytes()
    assert SEGMENT_HEADER.unpack_from(data, 0) == (b"HWMW", 1, b"\0\0\0", 1)
    crc, index, generation, length = RECORD_HEADER.unpack_from(data, HEADER)
    assert (index, generation, length) == (1, 7, 3)
    assert data[HEADER + RECORD_HEADER.size :] == b"xyz"
    assert crc == zlib.crc32(data[HEADER + 4 :])
    assert data[HEADER:] == encode_record(1, 7, b"xyz")


def test_append_must_be_contiguous_and_is_all_or_nothing(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        wal.append(entries(1, 3))
        with pytest.raises(ValueError, match="expected index 3"):
            wal.append([(4, 1, b"gap")])
        with pytest.raises(ValueError, match="expected index 3"):
            wal.append([(2, 1, b"again")])
        with pytest.raises(ValueError, match=r"entries\[1\].*expected index 4"):
            wal.append([(3, 1, b"ok"), (5, 1, b"gap")])
        with pytest.raises(ValueError, match="payload"):
            wal.append([(3, 1, "not bytes")])
        with pytest.raises(ValueError, match="generation"):
            wal.append([(3, -1, b"x")])
        assert wal.last_index == 2


def test_entry_answers_indexes_of_the_log_and_refuses_any_other_value(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        wal.append(entries(1, 3))
        assert wal.entry(1)[0] == wal.entry(2)[0] == 1
        for bad in (0, 3, -1, True, 1.0, "1"):  # a bool is no index, though True == 1
            with pytest.raises(IndexError, match=r"entry: index .* is outside the log \[1, 2\]"):
                wal.entry(bad)


def test_truncate_from_validates_and_ignores_past_the_end(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        wal.append(entries(1, 4))
        for bad in (0, -1, "2"):
            with pytest.raises(ValueError, match="index must be an int >= 1"):
                wal.truncate_from(bad)
        wal.truncate_from(4)
        wal.truncate_from(100)
        assert wal.last_index == 3
        wal.truncate_from(2)
        assert wal.generations() == (1,)
        with pytest.raises(IndexError):
            wal.entry(2)
        wal.append([(2, 5, b"new")])
    with WriteAheadLog(tmp_path) as wal:
        assert wal.entries(1, 3) == [(1, payload(1)), (5, b"new")]


# ---------------------------------------------------------------------- segments and truncation
RECORD_SIZE = RECORD_HEADER.size + len(payload(1))  # payloads "value-1".."value-9" are 7 bytes


def test_segments_roll_over_and_are_named_by_first_index(tmp_path):
    segment_bytes = HEADER + 2 * RECORD_SIZE  # two records per segment
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        wal.append(entries(1, 6))
        wal.sync()
        assert segment_files(tmp_path) == [segment_name(i) for i in (1, 3, 5)]
        wal.append([(6, 1, b"x" * 500)])  # bigger than a segment: fits alone in a new one
        wal.append([(7, 1, b"y")])
    assert segment_files(tmp_path) == [segment_name(i) for i in (1, 3, 5, 6, 7)]
    for name in segment_files(tmp_path):
        first = int(name.removesuffix(".log"))
        records = parse_segment(str(tmp_path / name))
        assert records[0][0] == first
        assert os.path.getsize(tmp_path / name) <= segment_bytes or len(records) == 1
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.last_index == 7
        assert wal.entry(6) == (1, b"x" * 500)


@pytest.mark.parametrize(
    ("cut", "remaining"),
    [(5, [1, 3]), (4, [1, 3]), (3, [1]), (2, [1]), (1, [])],
    ids=["first-of-segment", "middle-of-segment", "first-of-second", "inside-first", "everything"],
)
def test_truncation_across_segments_removes_later_files(tmp_path, cut, remaining):
    segment_bytes = HEADER + 2 * RECORD_SIZE
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        wal.append(entries(1, 8))
        wal.sync()
        assert segment_files(tmp_path) == [segment_name(i) for i in (1, 3, 5, 7)]
        path, offset = wal.locate(cut)
        wal.truncate_from(cut)
        assert wal.last_index == cut - 1
        wal.sync()
        assert segment_files(tmp_path) == [segment_name(i) for i in remaining]
        if os.path.basename(path) != segment_name(cut):  # not first of its segment: file is cut
            assert os.path.getsize(path) == offset  # at the record's offset, as in the seed
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.entries(1, cut) == [(1, payload(i)) for i in range(1, cut)]
        wal.append(entries(cut, 9, generation=2))
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.generations() == (1,) * (cut - 1) + (2,) * (9 - cut)


def test_unsynced_truncation_and_appends_vanish_in_a_process_crash(tmp_path):
    wal = WriteAheadLog(tmp_path, HEADER + 2 * RECORD_SIZE)
    wal.append(entries(1, 6))
    wal.sync()
    before = files(tmp_path)
    wal.truncate_from(2)
    wal.append(entries(2, 4, generation=3))
    assert wal.generations() == (1, 3, 3)
    assert wal.entries(1, 4)[1:] == [(3, payload(2)), (3, payload(3))]
    wal.crash()
    assert files(tmp_path) == before  # nothing reached the OS before sync/flush
    with WriteAheadLog(tmp_path) as wal:
        assert wal.generations() == (1,) * 5


def test_truncation_then_append_in_one_sync(tmp_path):
    segment_bytes = HEADER + 2 * RECORD_SIZE
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        wal.append(entries(1, 8))
        wal.sync()
        wal.truncate_from(4)
        wal.truncate_from(6)  # past the end now: no-op
        wal.truncate_from(2)
        wal.append(entries(2, 5, generation=4))
        wal.sync()
        assert segment_files(tmp_path) == [segment_name(1), segment_name(3)]
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.generations() == (1, 4, 4, 4)


# -------------------------------------------------------------------------------- torn tails
def test_a_torn_final_record_is_dropped_at_every_cut_point(tmp_path):
    written_log(tmp_path / "origin", 3, synced=2)
    [name] = segment_files(tmp_path / "origin")
    records = parse_segment(str(tmp_path / "origin" / name))
    _, start, end = records[-1]
    for size in range(start + 1, end):
        directory = tmp_path / f"cut-{size}"
        shutil.copytree(tmp_path / "origin", directory)
        cut_file(str(directory / name), size)
        wal = WriteAheadLog(directory)
        assert wal.generations() == (1, 1)
        assert wal.torn_tail is not None and wal.torn_tail.offset == start
        assert wal.torn_tail.dropped_bytes == size - start
        wal.close()
        assert os.path.getsize(directory / name) == start
        with WriteAheadLog(directory) as again:  # idempotent
            assert again.torn_tail is None and again.last_index == 2


@pytest.mark.parametrize("where", ["crc", "index", "length", "payload"])
def test_a_damaged_final_record_is_a_torn_tail(tmp_path, where):
    written_log(tmp_path, 3, synced=2)
    [name] = segment_files(tmp_path)
    path = str(tmp_path / name)
    _, start, end = parse_segment(path)[-1]
    offset = {"crc": start, "index": start + 4, "length": start + 20, "payload": end - 1}[where]
    flip_byte(path, offset, 0x01)
    with WriteAheadLog(tmp_path) as wal:
        assert wal.last_index == 2
        assert wal.torn_tail is not None and wal.torn_tail.offset == start
    assert os.path.getsize(path) == start


def test_trailing_zeros_are_a_torn_tail(tmp_path):
    written_log(tmp_path, 2)
    [name] = segment_files(tmp_path)
    size = os.path.getsize(tmp_path / name)
    with open(tmp_path / name, "ab") as file:
        file.write(bytes(100))
    with WriteAheadLog(tmp_path) as wal:
        assert wal.last_index == 2
    assert os.path.getsize(tmp_path / name) == size


@pytest.mark.parametrize("header_bytes", [0, 1, HEADER - 1])
def test_a_new_segment_with_a_torn_header_is_removed(tmp_path, header_bytes):
    segment_bytes = HEADER + 2 * RECORD_SIZE
    written_log(tmp_path, 3, segment_bytes, synced=2)
    cut_file(str(tmp_path / segment_name(3)), header_bytes)
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.last_index == 2
        assert wal.torn_tail is not None and wal.torn_tail.removed
        wal.append(entries(3, 4))
    assert segment_files(tmp_path) == [segment_name(1), segment_name(3)]


def test_a_header_only_last_segment_is_kept_and_reused(tmp_path):
    segment_bytes = HEADER + 2 * RECORD_SIZE
    written_log(tmp_path, 3, segment_bytes, synced=2)
    cut_file(str(tmp_path / segment_name(3)), HEADER)
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.last_index == 2 and wal.torn_tail is None
        wal.append(entries(3, 5))
    assert [r[0] for r in parse_segment(str(tmp_path / segment_name(3)))] == [3, 4]


# ---------------------------------------------------------------------------- corruption
def _three_segments(directory) -> int:
    segment_bytes = HEADER + 3 * RECORD_SIZE
    written_log(directory, 9, segment_bytes)  # segments 1, 4, 7
    assert segment_files(directory) == [segment_name(i) for i in (1, 4, 7)]
    return segment_bytes


def _record_offset(directory, segment_first: int, index: int) -> int:
    for got, offset, _ in parse_segment(str(directory / segment_name(segment_first))):
        if got == index:
            return offset
    raise AssertionError(index)


def _damage(directory, kind: str) -> tuple[str, int]:
    """Damage the log; return (segment file, byte offset) the error must name."""
    if kind == "flip-before-valid-record":  # last segment, a valid record follows
        offset = _record_offset(directory, 7, 8)
        flip_byte(str(directory / segment_name(7)), offset + RECORD_HEADER.size + 2)
        return segment_name(7), offset
    if kind == "flip-length-before-valid-record":
        offset = _record_offset(directory, 7, 7)
        flip_byte(str(directory / segment_name(7)), offset + 20, 0x40)
        return segment_name(7), offset
    if kind == "flip-tail-of-earlier-segment":  # the final record of a segment that is not the last
        offset = _record_offset(directory, 4, 6)
        flip_byte(str(directory / segment_name(4)), offset + RECORD_HEADER.size)
        return segment_name(4), offset
    if kind == "flip-first-segment":
        offset = _record_offset(directory, 1, 2)
        flip_byte(str(directory / segment_name(1)), offset + 9)
        return segment_name(1), offset
    if kind == "cut-earlier-segment":
        offset = _record_offset(directory, 4, 6)
        cut_file(str(directory / segment_name(4)), offset + 5)
        return segment_name(4), offset
    if kind == "bad-magic":
        flip_byte(str(directory / segment_name(4)), 1)
        return segment_name(4), 0
    if kind == "bad-magic-last-segment":
        flip_byte(str(directory / segment_name(7)), 0)
        return segment_name(7), 0
    if kind == "missing-segment":
        os.unlink(directory / segment_name(4))
        return segment_name(7), 0
    if kind == "missing-first-segment":
        os.unlink(directory / segment_name(1))
        return segment_name(4), 0
    if kind == "cut-synced-last-record":  # the last segment ends cleanly, before the synced index
        offset = _record_offset(directory, 7, 9)
        cut_file(str(directory / segment_name(7)), offset)
        return segment_name(7), offset
    if kind == "missing-last-segment":
        os.unlink(directory / segment_name(7))
        return segment_name(4), os.path.getsize(directory / segment_name(4))
    if kind == "flip-synced-final-record":  # nothing valid after it: only the synced index tells
        offset = _record_offset(directory, 7, 9)
        flip_byte(str(directory / segment_name(7)), offset + RECORD_HEADER.size + 1)
        return segment_name(7), offset
    if kind == "bad-header-synced-last-segment":
        flip_byte(str(directory / segment_name(7)), 5)  # the format version
        return segment_name(7), 0
    if kind == "index-discontinuity":  # a well-formed record with the wrong index
        offset = _record_offset(directory, 7, 8)
        path = directory / segment_name(7)
        data = bytearray(path.read_bytes())
        record = encode_record(10, 1, payload(8))
        data[offset : offset + len(record)] = record
        path.write_bytes(bytes(data))
        return segment_name(7), offset
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "flip-before-valid-record",
        "flip-length-before-valid-record",
        "flip-tail-of-earlier-segment",
        "flip-first-segment",
        "cut-earlier-segment",
        "bad-magic",
        "bad-magic-last-segment",
        "missing-segment",
        "missing-first-segment",
        "index-discontinuity",
        "cut-synced-last-record",
        "missing-last-segment",
        "flip-synced-final-record",
        "bad-header-synced-last-segment",
    ],
)
def test_damage_before_the_tail_is_reported_and_nothing_is_rewritten(tmp_path, kind):
    segment_bytes = _three_segments(tmp_path)
    name, offset = _damage(tmp_path, kind)
    before = files(tmp_path)
    with pytest.raises(CorruptLogError) as raised:
        WriteAheadLog(tmp_path, segment_bytes)
    error = raised.value
    assert error.path == str(tmp_path / name)
    assert error.offset == offset
    assert str(tmp_path / name) in str(error) and f"byte offset {offset}" in str(error)
    assert files(tmp_path) == before  # byte for byte
    with pytest.raises(CorruptLogError):  # and it says so every time
        WriteAheadLog(tmp_path, segment_bytes)


def test_reads_recheck_the_crc(tmp_path):
    written_log(tmp_path, 3)
    wal = WriteAheadLog(tmp_path)
    [name] = segment_files(tmp_path)
    _, offset = wal.locate(2)
    flip_byte(str(tmp_path / name), offset + RECORD_HEADER.size)
    assert wal.entry(1) == (1, payload(1))
    with pytest.raises(CorruptLogError, match=f"byte offset {offset}"):
        wal.entry(2)
    wal.crash()


def test_closed_log_refuses_use(tmp_path):
    wal = WriteAheadLog(tmp_path)
    wal.close()
    with pytest.raises(RuntimeError, match="closed"):
        wal.append(entries(1, 2))


# ------------------------------------------------------------------- crash state machine
SEGMENT_BYTES = 100  # one to three records per segment
payloads = st.binary(max_size=40)


class WalCrashMachine(RuleBasedStateMachine):
    """Appends, truncations, flushes and syncs, then crashes that tear the unsynced tail.

    Model: ``logical`` (what reads see), ``written`` (W: handed to the OS), ``synced`` (S), and
    ``floor``, the length of the prefix that is durable (len(S), lowered by a truncation that reached
    the disk since the last sync).
    """

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="hwm-wal-")
        self.wal = WriteAheadLog(self.directory, SEGMENT_BYTES)
        self.logical: list[tuple[int, bytes]] = []
        self.written: list[tuple[int, bytes]] = []
        self.synced: list[tuple[int, bytes]] = []
        self.floor = 0
        self.cut_pending: int | None = None  # lowest unapplied truncation of written records

    def teardown(self) -> None:
        self.wal.crash()
        shutil.rmtree(self.directory, ignore_errors=True)

    @rule(batch=st.lists(st.tuples(st.integers(0, 3), payloads), min_size=1, max_size=4))
    def append(self, batch):
        start = len(self.logical) + 1
        self.wal.append([(start + k, generation, data) for k, (generation, data) in enumerate(batch)])
        self.logical.extend(batch)

    @rule(data=st.data())
    def truncate_from(self, data):
        index = data.draw(st.integers(1, len(self.logical) + 2), label="index")
        self.wal.truncate_from(index)
        if index <= len(self.logical):
            if index <= len(self.written):
                self.cut_pending = min(self.cut_pending or index, index)
            del self.logical[index - 1 :]

    def _flushed(self) -> None:
        if self.cut_pending is not None:
            self.floor = min(self.floor, self.cut_pending - 1)
            self.cut_pending = None
        self.written = list(self.logical)

    @rule()
    def flush(self):
        self.wal.flush()
        self._flushed()

    @rule()
    def sync(self):
        self.wal.sync()
        self._flushed()
        self.synced = list(self.logical)
        self.floor = len(self.synced)

    @rule()
    def close_and_reopen(self):
        self.wal.close()
        self._reopen(list(self.logical), torn=False)

    def _check_promise(self, recovered) -> None:
        """Every durable record survives; nothing that was never written appears."""
        assert self.floor <= len(recovered) <= len(self.written)
        assert recovered[: self.floor] == self.synced[: self.floor]
        assert recovered == self.written[: len(recovered)]

    @rule(data=st.data(), damage=st.sampled_from(["none", "cut", "flip"]))
    def crash(self, data, damage):
        self._crash(data, damage)

    @precondition(lambda self: self.logical != self.synced)
    @rule(data=st.data(), damage=st.sampled_from(["cut", "flip"]))
    def power_failure_during_sync(self, data, damage):
        """Records were written but the fsync did not finish: the unsynced tail may be torn."""
        self.wal.flush()
        self._flushed()
        self._crash(data, damage)

    def _crash(self, data, damage):
        self.wal.crash()
        expected, torn = self.written, False
        names = segment_files(self.directory)
        if names and damage != "none":
            path = os.path.join(self.directory, names[-1])
            first = int(names[-1].removesuffix(".log"))
            records = parse_segment(path)
            assert [index for index, _, _ in records] == list(range(first, len(self.written) + 1))
            ends = {index: end for index, _, end in records}
            durable_size = ends.get(self.floor, 0)  # records up to the floor must survive
            if damage == "cut":
                size = data.draw(st.integers(durable_size, os.path.getsize(path)), label="cut at")
                cut_file(path, size)
                kept = [index for index, _, end in records if end <= size] if size >= HEADER else []
                expected = self.written[: kept[-1] if kept else first - 1]
                torn = size not in {HEADER, *ends.values()}
            elif records and records[-1][0] > self.floor:  # flip inside the final, unsynced record
                _, start, end = records[-1]
                offset = data.draw(st.integers(start, end - 1), label="flip at")
                flip_byte(path, offset, data.draw(st.integers(1, 255), label="mask"))
                expected, torn = self.written[:-1], True
        self._check_promise(expected)
        event(f"crash: damage={damage}, torn={torn}, lost unsynced={len(expected) < len(self.written)}")
        self._reopen(list(expected), torn)

    def _reopen(self, expected, torn: bool) -> None:
        self.wal = WriteAheadLog(self.directory, SEGMENT_BYTES)
        assert (self.wal.torn_tail is not None) == torn, self.wal.torn_tail
        assert self.wal.entries(1, self.wal.last_index + 1) == expected
        self.logical, self.written, self.synced = list(expected), list(expected), list(expected)
        self.floor = len(expected)
        self.cut_pending = None

    @invariant()
    def reads_match_the_model(self):
        assert self.wal.last_index == len(self.logical)
        assert self.wal.generations() == tuple(generation for generation, _ in self.logical)
        assert self.wal.entries(1, len(self.logical) + 1) == self.logical


WalCrashMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_wal_crash_recovery = WalCrashMachine.TestCase


def test_a_torn_record_followed_only_by_record_less_segments_is_a_torn_tail(tmp_path):
    """What a write that failed on a full disk after starting a new segment leaves: the torn end
    of one segment, then a new segment with a header (or less) and no record. Nothing valid
    follows the damage, so recovery cuts it and removes the empty segments."""
    segment_bytes = HEADER + 2 * RECORD_SIZE
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        wal.append(entries(1, 3))
    first = str(tmp_path / segment_name(1))
    with open(first, "ab") as file:
        file.write(encode_record(3, 1, payload(3))[:10])  # torn
    with open(tmp_path / segment_name(3), "wb") as file:
        file.write(SEGMENT_HEADER.pack(b"HWMW", 1, b"\0\0\0", 3))
    with open(tmp_path / segment_name(4), "wb") as file:
        file.write(b"HW")
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.last_index == 2 and wal.torn_tail is not None
        wal.append(entries(3, 5))
    assert segment_files(str(tmp_path)) == [segment_name(1), segment_name(3)]
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.entries(1, 5) == [(1, payload(i)) for i in range(1, 5)]


# ------------------------------------------------------------- the synced index decides
def test_the_synced_index_file_names_the_last_fsynced_record(tmp_path):
    wal = WriteAheadLog(tmp_path)
    assert (tmp_path / SYNCED_INDEX_FILE).read_bytes() == encode_synced_index(0)
    wal.append(entries(1, 4))
    wal.flush()
    assert (tmp_path / SYNCED_INDEX_FILE).read_bytes() == encode_synced_index(0)  # handed to the OS only
    wal.sync()
    assert (tmp_path / SYNCED_INDEX_FILE).read_bytes() == encode_synced_index(3)
    wal.truncate_from(2)
    wal.flush()  # lowered, durably, before the cut
    assert (tmp_path / SYNCED_INDEX_FILE).read_bytes() == encode_synced_index(1)
    wal.close()


def test_damage_after_the_synced_index_is_a_torn_tail_even_before_a_valid_record(tmp_path):
    """What a power failure that writes pages back out of order leaves: an unsynced record lost
    (zeros, or a flipped byte) while a later one reached the disk."""
    written_log(tmp_path, 6, synced=3)
    [name] = segment_files(tmp_path)
    offset = _record_offset(tmp_path, 1, 4)
    flip_byte(str(tmp_path / name), offset + RECORD_HEADER.size + 1)
    with WriteAheadLog(tmp_path) as wal:
        assert wal.entries(1, wal.last_index + 1) == [(1, payload(i)) for i in range(1, 4)]
        assert wal.torn_tail is not None and wal.torn_tail.offset == offset and "CRC" in wal.torn_tail.reason
    assert (tmp_path / SYNCED_INDEX_FILE).read_bytes() == encode_synced_index(3)


def test_a_new_unsynced_segment_with_a_zeroed_header_is_removed(tmp_path):
    segment_bytes = HEADER + 2 * RECORD_SIZE
    written_log(tmp_path, 5, segment_bytes, synced=2)  # segments 1 (synced), 3 and 5 (not)
    path = tmp_path / segment_name(5)
    path.write_bytes(bytes(HEADER) + path.read_bytes()[HEADER:])  # its length survived, its header did not
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.last_index == 4 and wal.torn_tail is not None and wal.torn_tail.removed
    assert segment_files(tmp_path) == [segment_name(1), segment_name(3)]


def test_without_the_synced_index_file_a_valid_record_after_damage_is_refused(tmp_path):
    """A log written before the file existed: the prefix rule (nothing valid after a torn tail)."""
    written_log(tmp_path, 6, synced=3)
    os.unlink(tmp_path / SYNCED_INDEX_FILE)
    [name] = segment_files(tmp_path)
    offset = _record_offset(tmp_path, 1, 4)
    flip_byte(str(tmp_path / name), offset + RECORD_HEADER.size + 1)
    with pytest.raises(CorruptLogError, match="followed by a valid record for index 5"):
        WriteAheadLog(tmp_path)
    flip_byte(str(tmp_path / name), offset + RECORD_HEADER.size + 1)  # undone: damage the last record only
    flip_byte(str(tmp_path / name), _record_offset(tmp_path, 1, 6) + RECORD_HEADER.size)
    with WriteAheadLog(tmp_path) as wal:
        assert wal.last_index == 5 and wal.torn_tail is not None
    assert (tmp_path / SYNCED_INDEX_FILE).read_bytes() == encode_synced_index(5)  # and it has the file now


@pytest.mark.parametrize("content", [b"", b"HWMS\x03", encode_synced_index(6)[:-1] + b"?"])
def test_a_synced_index_file_torn_by_a_crash_forgives_only_the_last_segment(tmp_path, content):
    segment_bytes = HEADER + 3 * RECORD_SIZE
    written_log(tmp_path, 6, segment_bytes, synced=5)  # segments 1 and 4
    (tmp_path / SYNCED_INDEX_FILE).write_bytes(content)
    flip_byte(str(tmp_path / segment_name(4)), _record_offset(tmp_path, 4, 5) + RECORD_HEADER.size)
    with WriteAheadLog(tmp_path, segment_bytes) as wal:
        assert wal.last_index == 4
    flip_byte(str(tmp_path / segment_name(1)), _record_offset(tmp_path, 1, 2) + RECORD_HEADER.size)
    (tmp_path / SYNCED_INDEX_FILE).write_bytes(content)
    with pytest.raises(CorruptLogError, match="not the last"):  # the first segment was fsynced at roll-over
        WriteAheadLog(tmp_path, segment_bytes)


@pytest.mark.parametrize("seed", range(8))
def test_segments_a_synced_truncation_deleted_stay_deleted_after_a_power_failure(seed):
    """A truncation that only deletes whole segments (the new entry fits in the segment it cut) must
    make the deletions durable at its sync: else a power failure brings the deleted segments back,
    and with them the entries the truncation removed. The simulated disk loses a random part of the
    directory operations not yet fsynced."""
    import random

    from hwm.bridge.dst.disk import SimDisk

    disk = SimDisk(random.Random(seed), ("/data",))
    wal = WriteAheadLog("/data/log", HEADER + 2 * RECORD_SIZE, fs=disk)
    wal.append(entries(1, 8))
    wal.sync()
    wal.truncate_from(2)  # keeps segment 1 with entry 1; deletes segments 3, 5 and 7
    wal.append(entries(2, 3, generation=2))  # fits in segment 1: no segment is created
    wal.sync()
    disk.crash(power_loss=True)
    recovered = WriteAheadLog("/data/log", HEADER + 2 * RECORD_SIZE, fs=disk)
    assert recovered.generations() == (1, 2)
    assert [p.rsplit("/", 1)[1] for p in recovered.segment_paths()] == [segment_name(1)]
