"""Compiled equivalents of the catalogue's properties, on packed rows.

The Python functions of `properties/catalogue.py` are the specification. A
compiled equivalent says only WHERE a property is first found (the first state
of a batch, or the first transition of an expansion); the finding itself, the
sentence in the report, is then computed by the Python property on that one
state or step, and a disagreement stops the search with an error instead of
giving a wrong verdict. Compiling every property (rather than a cheap pre-filter
in front of the Python checks) keeps the per-transition cost flat: step
properties are evaluated on every transition, over two million at the bounds of
the benchmark.

Each equivalent is used only while the catalogue's source of that property (and
of the catalogue helpers it calls) is the one it was written from (the digests
in `checker.fast.checks`, which picks the equivalents and runs them); when a
property changes or a new one appears, it is checked in Python, correctly but
slowly, and tests/checker/test_fast.py fails naming it until its compiled form is updated.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hwm.checker.fast.kernels import AB, ACK_QUORUM, ALIVE, BOOKIES, GEN, HWM, LEN, LOG, MAJORITY, N, NEEDED, \
    PARTITIONED, RAFT, RB, ROLE, SYSTEM, G, L, _bk_changes, _bk_in_write_set, _cut, _entry_slot, _read_slot, _server

# ------------------------------------------------------------------ states
@njit(cache=True)
def _any_read(P, row):
    for index in range(1, P[L] + 1):
        for generation in range(P[G] + 1):
            if row[_read_slot(P, index, generation)]:
                return True
    return False


@njit(cache=True)
def _holders(P, row, index, generation):
    """How many servers' logs hold entry (index, generation)."""
    holders = 0
    for o in range(P[N]):
        if _holds_entry(P, row, _server(P, o), index, generation):
            holders += 1
    return holders


@njit(cache=True)
def _new_leader_lacks(P, before, after, at):
    """A server that became leader in this step lacks an entry of the set that starts at `at` in
    `before` (the entries read, or acknowledged)."""
    for k in range(P[N]):
        base = _server(P, k)
        if not _newly_elected(before, after, base):
            continue
        for index in range(1, P[L] + 1):
            for generation in range(P[G] + 1):
                if before[_entry_slot(P, at, index, generation)] and not _holds_entry(P, after, base, index, generation):
                    return True
    return False


@njit(cache=True)
def _any_acked(P, row):
    if P[SYSTEM] == RAFT:
        return False
    for index in range(1, P[L] + 1):
        for generation in range(P[G] + 1):
            if row[_entry_slot(P, P[AB], index, generation)]:
                return True
    return False


@njit(cache=True)
def _holds_entry(P, row, base, index, generation):
    return row[base + LEN] >= index and row[base + LOG + index - 1] == generation


@njit(cache=True)
def _holds_lease(row, base):
    """properties.leases.holds_lease: a live leader with an entry of its own generation at or below its HWM."""
    if not (row[base + ALIVE] and row[base + ROLE] == 1):
        return False
    for i in range(min(row[base + HWM], row[base + LEN])):
        if row[base + LOG + i] == row[base + GEN]:
            return True
    return False


@njit(cache=True)
def _ledger_copies(P, row, index, generation):
    """properties.ledger.copies: how many bookies of the write set the ledger metadata names for entry
    (index, generation) store it."""
    stored = _bk_changes(P, row, True)
    copies = 0
    for k in range(P[BOOKIES]):
        if _bk_in_write_set(P, row, stored, index, k) and _holds_entry(P, row, _server(P, k), index, generation):
            copies += 1
    return copies


@njit(cache=True)
def _removed_entry(before, after, base, position):
    """properties.ledger._removed_entries: before's entry at `position` is gone from after's, and is no hole."""
    return before[base + LOG + position] != 0 and _removed_at(before, after, base, position)


@njit(cache=True)
def state_found(P, row, code):
    """True where the state property of compiled `code` (checker.fast.checks.STATE_CODES) reports a finding."""
    n = P[N]
    if code == 0:  # ReadsAgree: two generations read at one index
        for index in range(1, P[L] + 1):
            seen = 0
            for generation in range(P[G] + 1):
                seen += row[_read_slot(P, index, generation)]
            if seen > 1:
                return True
        return False
    if code == 1:  # HwmWithinLog
        for k in range(n):
            base = _server(P, k)
            if row[base + HWM] > row[base + LEN]:
                return True
        return False
    if code == 2:  # CommittedOnQuorum: every entry at or below a hwm on NEEDED servers (a majority of all)
        for k in range(n):
            base = _server(P, k)
            for index in range(1, min(row[base + HWM], row[base + LEN]) + 1):
                if _holders(P, row, index, row[base + LOG + index - 1]) < P[NEEDED]:
                    return True
        return False
    if code == 3:  # OneLeaderPerGeneration
        for a in range(n):
            ab = _server(P, a)
            if not (row[ab + ALIVE] and row[ab + ROLE] == 1):
                continue
            for b in range(a + 1, n):
                bb = _server(P, b)
                if row[bb + ALIVE] and row[bb + ROLE] == 1 and row[bb + GEN] == row[ab + GEN]:
                    return True
        return False
    if code == 4:  # LogMatching: below the highest common entry the logs agree
        for a in range(n):
            ab = _server(P, a)
            for b in range(a + 1, n):
                bb = _server(P, b)
                common = min(row[ab + LEN], row[bb + LEN])
                for position in range(common - 1, -1, -1):
                    if row[ab + LOG + position] == row[bb + LOG + position]:
                        for p in range(position):
                            if row[ab + LOG + p] != row[bb + LOG + p]:
                                return True
                        break
        return False
    if code == 5:  # EntryRead
        return _any_read(P, row)
    if code == 6:  # AckedWriteNeverLost: an acknowledged entry on fewer than a majority
        if not _any_acked(P, row):
            return False
        for index in range(1, P[L] + 1):
            for generation in range(P[G] + 1):
                if row[_entry_slot(P, P[AB], index, generation)] and _holders(P, row, index, generation) < P[MAJORITY]:
                    return True
        return False
    if code == 7:  # WriteAcknowledged
        return _any_acked(P, row)
    if code == 8:  # LeaseReadNeverStale: a lease holder lacks, at or below its hwm, an entry a client read
        if not _any_read(P, row):
            return False
        for k in range(n):
            base = _server(P, k)
            if not _holds_lease(row, base):
                continue
            for index in range(1, P[L] + 1):
                for generation in range(P[G] + 1):
                    if row[_read_slot(P, index, generation)] and (
                            index > row[base + HWM] or row[base + LEN] < index
                            or row[base + LOG + index - 1] != generation):
                        return True
        return False
    # properties.ledger, BookKeeper's properties in its ledger's terms: copies counted on AQ bookies of an
    # entry's write set, holes (generation 0) are no entries.
    if code == 9:  # CommittedOnQuorum: every entry at or below a hwm on AQ bookies of its write set
        for k in range(n):
            base = _server(P, k)
            for index in range(1, min(row[base + HWM], row[base + LEN]) + 1):
                generation = row[base + LOG + index - 1]
                if generation and _ledger_copies(P, row, index, generation) < P[ACK_QUORUM]:
                    return True
        return False
    if code == 10:  # AckedWriteNeverLost: an acknowledged entry on fewer than AQ bookies of its write set
        for index in range(1, P[L] + 1):
            for generation in range(P[G] + 1):
                if row[_entry_slot(P, P[AB], index, generation)] and \
                        _ledger_copies(P, row, index, generation) < P[ACK_QUORUM]:
                    return True
        return False
    if code == 11:  # LogMatching over the entries both logs hold (holes skipped)
        for a in range(n):
            ab = _server(P, a)
            for b in range(a + 1, n):
                bb = _server(P, b)
                for position in range(min(row[ab + LEN], row[bb + LEN]) - 1, -1, -1):
                    x, y = row[ab + LOG + position], row[bb + LOG + position]
                    if x and y and x == y:  # the highest entry both hold
                        for p in range(position):
                            x, y = row[ab + LOG + p], row[bb + LOG + p]
                            if x and y and x != y:
                                return True
                        break
        return False
    return False


# ------------------------------------------------------------------- steps
@njit(cache=True)
def _removed_at(before, after, base, position):
    """True when before's log entry at `position` is gone from after's (catalogue._removed)."""
    return position >= after[base + LEN] or after[base + LOG + position] != before[base + LOG + position]


@njit(cache=True)
def _newly_elected(before, after, base):
    return after[base + ROLE] == 1 and after[base + ALIVE] and (
        before[base + ROLE] != 1 or before[base + GEN] != after[base + GEN] or not before[base + ALIVE])


@njit(cache=True)
def step_found(P, before, after, code):
    """True where the step property of compiled `code` (checker.fast.checks.STEP_CODES) reports a finding."""
    n = P[N]
    if code == 0:  # ReadNeverTruncated: a removed entry was read
        if not _any_read(P, before):
            return False
        for k in range(n):
            base = _server(P, k)
            for position in range(before[base + LEN]):
                if _removed_at(before, after, base, position) and \
                        before[_read_slot(P, position + 1, before[base + LOG + position])]:
                    return True
        return False
    if code == 1:  # ReadNeverLost: a newly elected leader lacks a read entry
        return _any_read(P, before) and _new_leader_lacks(P, before, after, P[RB])
    if code == 2:  # UncommittedTruncated: a removed entry above the hwm that nobody read
        for k in range(n):
            base = _server(P, k)
            for position in range(before[base + LEN]):
                if _removed_at(before, after, base, position) and position + 1 > before[base + HWM] and \
                        not before[_read_slot(P, position + 1, before[base + LOG + position])]:
                    return True
        return False
    if code == 3:  # LeaderChangeWithUncommitted
        for k in range(n):
            base = _server(P, k)
            if not (after[base + ROLE] == 1 and after[base + ALIVE] and
                    (before[base + ROLE] != 1 or before[base + GEN] != after[base + GEN])):
                continue
            for j in range(n):
                jb = _server(P, j)
                if j != k and before[jb + ROLE] == 1 and before[jb + LEN] > before[jb + HWM] and \
                        after[base + GEN] > before[jb + GEN]:
                    return True
        return False
    if code == 4:  # CrashAndRejoin
        for k in range(n):
            base = _server(P, k)
            if not before[base + ALIVE] and after[base + ALIVE]:
                return True
        return False
    if code == 5:  # ReadNeverTruncated, refined: a removal leaves a read entry on fewer than NEEDED servers
        if not _any_read(P, before):
            return False
        for k in range(n):
            base = _server(P, k)
            for position in range(before[base + LEN]):
                generation = before[base + LOG + position]
                if _removed_at(before, after, base, position) and before[_read_slot(P, position + 1, generation)]:
                    left = 0
                    for o in range(n):  # every server's log, down or not: logs are on disk
                        if _holds_entry(P, after, _server(P, o), position + 1, generation):
                            left += 1
                    if left < P[NEEDED]:
                        return True
        return False
    if code == 7:  # AcknowledgedWriteKept: a newly elected leader lacks an acknowledged entry
        return _any_acked(P, before) and _new_leader_lacks(P, before, after, P[AB])
    if code == 6:  # HwmNeverTruncated: a removed entry at or below the server's own hwm
        for k in range(n):
            base = _server(P, k)
            for position in range(before[base + LEN]):
                if _removed_at(before, after, base, position) and position + 1 <= before[base + HWM]:
                    return True
        return False
    if code == 8:  # LeaseHolderPartitioned: the cut changes and leaves a lease holder short of a majority
        if not P[PARTITIONED]:
            return False  # a state without a cut
        changed = False
        for k in range(n):
            if _cut(P, before, k) != _cut(P, after, k):
                changed = True
        if not changed:
            return False
        for k in range(n):
            if _holds_lease(before, _server(P, k)):
                side = 0
                for j in range(n):
                    if after[_server(P, j) + ALIVE] and _cut(P, after, j) == _cut(P, after, k):
                        side += 1
                if side < P[MAJORITY]:
                    return True
        return False
    if code == 9:  # LeaderStepsDown: a live leader is a live follower of the same generation after the step
        for k in range(n):
            base = _server(P, k)
            if before[base + ALIVE] and before[base + ROLE] == 1 and after[base + ALIVE] and \
                    after[base + ROLE] != 1 and after[base + GEN] == before[base + GEN]:
                return True
        return False
    # properties.ledger's step properties: a hole filled or dropped is no entry removed.
    if code == 10:  # ReadNeverTruncated: a removal leaves a read entry on fewer than AQ bookies of its write set
        if not _any_read(P, before):
            return False
        for k in range(n):
            base = _server(P, k)
            for position in range(before[base + LEN]):
                generation = before[base + LOG + position]
                if _removed_entry(before, after, base, position) and before[_read_slot(P, position + 1, generation)] \
                        and _ledger_copies(P, after, position + 1, generation) < P[ACK_QUORUM]:
                    return True
        return False
    if code == 11 or code == 12:  # HwmNeverTruncated (at or below the hwm), UncommittedTruncated (above, unread)
        for k in range(n):
            base = _server(P, k)
            for position in range(before[base + LEN]):
                if not _removed_entry(before, after, base, position):
                    continue
                if code == 11 and position + 1 <= before[base + HWM]:
                    return True
                if code == 12 and position + 1 > before[base + HWM] and \
                        not before[_read_slot(P, position + 1, before[base + LOG + position])]:
                    return True
        return False
    return False


@njit(cache=True)
def first_states(P, rows, codes, first):
    """first[j]: the first row where state property codes[j] is found (-1 if none)."""
    left = codes.size
    for i in range(rows.shape[0]):
        for j in range(codes.size):
            if first[j] < 0 and state_found(P, rows[i], codes[j]):
                first[j] = i
                left -= 1
        if left == 0:
            return


@njit(cache=True)
def first_steps(P, before, after, parents, codes, first):
    """first[j]: the first transition where step property codes[j] is found (-1 if none)."""
    left = codes.size
    for t in range(after.shape[0]):
        for j in range(codes.size):
            if first[j] < 0 and step_found(P, before[parents[t]], after[t], codes[j]):
                first[j] = t
                left -= 1
        if left == 0:
            return
