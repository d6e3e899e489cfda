"""The session table (impl.sessions): latest request per client, LRU eviction decided by the log."""

from __future__ import annotations

import random

import pytest

from hwm.impl.sessions import REGISTRATION, Sessions


def apply_all(sessions: Sessions, entries) -> Sessions:
    for ids in entries:
        sessions.apply(sessions.applied + 1, ids)
    return sessions


def test_only_the_latest_request_of_each_client_and_its_index_are_kept():
    table = apply_all(Sessions(10), [("a", REGISTRATION), ("a", 1), None, ("b", REGISTRATION), ("a", 2), ("b", 1)])
    assert dict(table.latest) == {"a": (2, 5), "b": (1, 6)}
    # A registration of a client that has a session changes nothing but its recency; an older
    # request applied late (a duplicate) does not move the latest back.
    apply_all(table, [("a", REGISTRATION), ("a", 1)])
    assert dict(table.latest) == {"a": (2, 5), "b": (1, 6)} and list(table.latest) == ["b", "a"]


def test_the_least_recently_used_session_is_evicted_and_use_means_an_applied_entry():
    table = apply_all(Sessions(2), [("a", 0), ("b", 0), ("a", 1), ("c", 0)])
    assert list(table.latest) == ["a", "c"] and table.evicted == 1  # b was used least recently
    apply_all(table, [("a", 2), ("d", 0)])
    assert list(table.latest) == ["a", "d"] and table.evicted == 2


def test_every_replica_that_applies_the_same_log_holds_the_same_table():
    rng = random.Random(7)
    log = [None if rng.random() < 0.1 else (f"c{rng.randrange(40)}", rng.randrange(4)) for _ in range(2000)]
    tables = [list(apply_all(Sessions(16), log).latest.items()) for _ in range(3)]
    assert tables[0] == tables[1] == tables[2] and len(tables[0]) == 16


def test_the_table_stays_within_its_bound_under_many_clients():
    table = Sessions(100)
    for k in range(10_000):
        table.apply(2 * k + 1, (f"client {k}", REGISTRATION))
        table.apply(2 * k + 2, (f"client {k}", 1))
        assert len(table) <= 100
    assert len(table) == 100 and table.evicted == 9_900


def test_entries_are_applied_in_order_and_the_limit_is_checked():
    table = Sessions(3)
    table.apply(1, None)
    with pytest.raises(ValueError, match="entry 3 applied after entry 1"):
        table.apply(3, ("a", 1))
    for limit in (0, -1, 2.5, "3", True):  # an int of at least 1, and a bool is none
        with pytest.raises(ValueError, match="max_sessions"):
            Sessions(limit)
