"""A bookie's `read` refuses an entry id that is not a positive int by name (impl/bookkeeper.py)."""

from __future__ import annotations

import pytest

from hwm.impl.bookkeeper import Bookie, BookieStorage
from hwm.impl.core import NotCommitted
from hwm.impl.storage import MemoryStorage


@pytest.mark.parametrize("entry", ["1", None, 1.0])
def test_a_read_of_an_entry_id_that_is_not_an_int_is_refused_as_not_committed(entry):
    bookie = Bookie("S1", ("S4", "S5"), BookieStorage(MemoryStorage()).load())
    # Refused before any comparison: "1" < 1 would raise TypeError, 1.0 would index the journal.
    with pytest.raises(NotCommitted, match="entry ids start at 1"):
        bookie.read(entry)
