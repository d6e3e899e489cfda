"""`entry(index)` of both storages answers 1..last and refuses 0 and last + 1 with the range, and
`entries(start, end)` any range within the log and no bound that is not an index: a MemoryStorage that
refused entry 1 passed the suite, which reads its entries in ranges, and so did a range check that took
a float or a bool (docs/mutation.md)."""

from __future__ import annotations

import pytest

from hwm.impl.storage import DiskStorage, MemoryStorage


@pytest.fixture(params=["memory", "disk"])
def storage(request, tmp_path):
    """Each storage, loaded, holding 1@g1, 2@g1, 3@g2."""
    made = MemoryStorage() if request.param == "memory" else DiskStorage(str(tmp_path / "S1"), owner="server S1")
    made.load()
    made.append([(1, 1, b"a"), (2, 1, b"b"), (3, 2, b"c")])
    yield made
    made.close()


def test_entry_answers_the_first_and_the_last_and_refuses_outside_them(storage):
    assert storage.entry(1) == (1, b"a") and storage.entry(3) == (2, b"c")
    for index in (0, 4):
        with pytest.raises(IndexError, match=r"outside the log \[1, 3\]"):
            storage.entry(index)


def test_entries_answer_any_range_within_the_log_and_refuse_a_bound_that_is_no_index(storage):
    assert storage.entries(1, 4) == [(1, b"a"), (1, b"b"), (2, b"c")] and storage.entries(4, 4) == []
    for start, end in ((0, 2), (3, 2), (1, 5), (1.0, 2), (1, 2.0), (True, 2)):
        with pytest.raises(ValueError, match=r"entries: need 1 <= start <= end <= last_index \+ 1 = 4"):
            storage.entries(start, end)
