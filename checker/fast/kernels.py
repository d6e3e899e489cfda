"""The compiled successor function: each model's `actions` and `apply` on packed rows.

A state is one row of bytes (the layout is `checker.fast.layout.Layout`); the
configuration, the system and the protocol flags are the integer vector `P`
(indexes in `checker.fast.fields`), so one compiled kernel serves every system, configuration and
flag and Numba's on-disk cache (`cache=True`) pays the compile cost once per machine.

Every function here transcribes one of `model/actions.py` (the raft family),
`model/zab.py` (`_zab_*`: the rest of a ZabModel effect after the raft one),
`model/bookkeeper.py` (`_bk_*`) or `model/kafka.py` (`_kafka_*`), which stay the
specification: same guards, same effects, same action order (traces depend on
it). tests/checker/test_fast.py checks the successor sets state by state against the
reference on random reachable states of every preset and flag value.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hwm.checker.fast.blake2b import blake2b64
from hwm.checker.fast.fields import *  # noqa: F401,F403 (the row's fields and P's indexes, by name)


@njit(cache=True, inline="always")
def _server(P, k):
    return 1 + k * P[SW]


@njit(cache=True, inline="always")
def _match(P, base, k):
    return base + LOG + P[L] + k


@njit(cache=True, inline="always")
def _extra(P, base, field):
    """Where a server's system extra `field` (DURABLE, SYNCED, EPOCH) lives."""
    return base + LOG + P[L] + P[N] + field


@njit(cache=True, inline="always")
def _entry_slot(P, at, index, generation):
    """The byte of entry (index, generation) in the set of entries that starts at `at`."""
    return at + (index - 1) * (P[G] + 1) + generation


@njit(cache=True, inline="always")
def _read_slot(P, index, generation):
    return _entry_slot(P, P[RB], index, generation)


@njit(cache=True, inline="always")
def _channel(P, a, b):
    return P[CB] + (a * P[N] + b) * P[CW]


@njit(cache=True, inline="always")
def _log_code(P, row, base):
    """checker.fast.rule_tables' code of the log at `base`: sum(log[i] * R**i), R = max_generation + 1."""
    code = np.int64(0)
    scale = np.int64(1)
    for i in range(row[base + LEN]):
        code += np.int64(row[base + LOG + i]) * scale
        scale *= P[G] + 1
    return code


@njit(cache=True, inline="always")
def _logs(P):
    """How many log codes a rule table spans: R**max_log."""
    span = np.int64(1)
    for _ in range(P[L]):
        span *= P[G] + 1
    return span


@njit(cache=True)
def _rule(P, at, key):
    """A variant's rule's answer, from its table (checker.fast.rule_tables) at P[at] + key."""
    answer = P[P[at] + key]
    if answer == RAISED:  # the rule raised on these arguments: the backend asks the reference model
        P[RULE_RAISED] = 1
        return np.int64(0)
    return answer


@njit(cache=True)
def _become_follower(P, row, base, generation):
    row[base + GEN] = generation
    row[base + ROLE] = 0
    for j in range(P[N]):
        row[_match(P, base, j)] = 0
    if P[SYSTEM] == KAFKA:
        row[_extra(P, base, ISR_VIEW)] = 0  # only a leader holds its own copy of the ISR


@njit(cache=True)
def _quorum_index(P, row, base):
    """model.rules.Rules.quorum_index of a leader's match indexes (own slot: the log's end)."""
    n = P[N]
    own = (base - 1) // P[SW]
    length = np.int64(row[base + LEN])
    if P[QUORUM_INDEX_AT]:  # a variant's rule: its answer for these match indexes
        key = np.int64(0)
        scale = np.int64(1)
        for i in range(n):
            key += (length if i == own else np.int64(row[_match(P, base, i)])) * scale
            scale *= P[L] + 1
        return _rule(P, QUORUM_INDEX_AT, key)
    counting = P[COUNTING]
    # The QUORUM_K-th largest index of the counting servers: the largest v held by at least QUORUM_K of them.
    q = np.int64(0)
    for i in range(n):
        if not counting >> i & 1:
            continue
        v = length if i == own else np.int64(row[_match(P, base, i)])
        if v <= q:
            continue
        held = 0
        for j in range(n):
            w = length if j == own else np.int64(row[_match(P, base, j)])
            if w >= v and counting >> j & 1:
                held += 1
        if held >= P[QUORUM_K]:
            q = v
    return q


@njit(cache=True)
def _advance_hwm(P, row, base):
    """Model._advance_hwm: the quorum index of the match indexes, under the commit rule."""
    length = np.int64(row[base + LEN])
    q = _quorum_index(P, row, base)
    if q <= row[base + HWM]:
        return
    if P[MAY_COMMIT_AT]:  # a variant's commit rule
        if not _rule(P, MAY_COMMIT_AT, ((q - 1) * _logs(P) + _log_code(P, row, base)) * (P[G] + 1) + row[base + GEN]):
            return
    elif P[COMMIT_CURRENT] and (q > length or row[base + LOG + q - 1] != row[base + GEN]):
        return  # Raft 5.4.2: only an entry of the leader's own generation is committed by counting
    row[base + HWM] = q


@njit(cache=True)
def _follower_apply(P, row, base, prev, src, start, count, leader_hwm, generation):
    """Model._follower_apply on the follower at `base`: entries are src[start:start+count]; the reply index."""
    prev, start, count = np.int64(prev), np.int64(start), np.int64(count)
    length = np.int64(row[base + LEN])
    if P[APPEND_PREVIOUS]:
        for offset in range(count):
            position = prev + offset
            g = src[start + offset]
            if position < length:
                if row[base + LOG + position] != g:
                    row[base + LOG + position] = g
                    length = position + 1
            else:
                row[base + LOG + length] = g  # log + (g,): position == length here
                length += 1
        acknowledged = prev + count
    else:
        for offset in range(count):
            position = prev + offset
            if position < length and row[base + LOG + position] != src[start + offset]:
                length = position
                break
        for offset in range(count):
            if prev + offset == length:
                row[base + LOG + length] = src[start + offset]
                length += 1
        acknowledged = length
    for position in range(length, P[L]):
        row[base + LOG + position] = 0
    row[base + LEN] = length
    row[base + HWM] = max(np.int64(row[base + HWM]), min(np.int64(leader_hwm), acknowledged))
    row[base + ALIVE] = 1
    _become_follower(P, row, base, generation)
    return acknowledged


@njit(cache=True)
def _with_match(P, row, base, follower, index):
    row[_match(P, base, follower)] = index
    _advance_hwm(P, row, base)


@njit(cache=True)
def _push(P, row, a, b, kind, generation, x, y, hwm, src, start, count):
    """Model._push: enqueue on a->b if there is room (a full channel loses the message)."""
    ch = _channel(P, a, b)
    if row[ch] >= P[CAP]:
        return
    m = ch + 1 + row[ch] * P[MW]
    row[ch] += 1
    row[m] = kind
    row[m + 1] = generation
    row[m + 2] = x
    row[m + 3] = y
    if kind == APPEND:
        row[m + 4] = hwm
        row[m + 5] = count
        for e in range(count):
            row[m + 6 + e] = src[start + e]


@njit(cache=True)
def _pop(P, row, a, b):
    ch = _channel(P, a, b)
    mw = P[MW]
    first = ch + 1
    for p in range(first, first + (P[CAP] - 1) * mw):
        row[p] = row[p + mw]
    for p in range(first + (P[CAP] - 1) * mw, first + P[CAP] * mw):
        row[p] = 0
    row[ch] -= 1


# ----------------------------------------------------------------- effects
@njit(cache=True)
def _elect(P, row, c, voters):
    n = P[N]
    generation = np.int64(0)
    for v in range(n):
        if voters >> v & 1:
            generation = max(generation, np.int64(row[_server(P, v) + GEN]))
    generation += 1
    for v in range(n):
        if voters >> v & 1:
            _become_follower(P, row, _server(P, v), generation)
    base = _server(P, c)
    row[base + ROLE] = 1
    if P[NOOP]:
        row[base + LOG + row[base + LEN]] = generation
        row[base + LEN] += 1
    _advance_hwm(P, row, base)


@njit(cache=True)
def _write(P, row, k):
    # "For each log entry, the leader appends it to its local write ahead log."
    base = _server(P, k)
    row[base + LOG + row[base + LEN]] = row[base + GEN]
    row[base + LEN] += 1
    _advance_hwm(P, row, base)


@njit(cache=True)
def _refuses_append(P, row, base, prev, prev_generation):
    """not Rules.accepts_append: the follower at `base` refuses entries after index prev >= 1 whose
    generation there is prev_generation (Raft's receiver rule 2 under append_check=previous-entry)."""
    if P[ACCEPTS_APPEND_AT]:  # a variant's append check
        key = (_log_code(P, row, base) * P[L] + prev - 1) * (P[G] + 1) + prev_generation
        return not _rule(P, ACCEPTS_APPEND_AT, key)
    return P[APPEND_PREVIOUS] and (row[base + LEN] < prev or row[base + LOG + prev - 1] != prev_generation)


@njit(cache=True)
def _replicate(P, before, row, l, f):
    lb, fb = _server(P, l), _server(P, f)
    if before[fb + GEN] > before[lb + GEN]:
        _become_follower(P, row, lb, before[fb + GEN])  # the reply carries a higher generation
        return
    leader_length = np.int64(before[lb + LEN])
    prev = min(np.int64(before[_match(P, lb, f)]), leader_length)
    # Raft's back-off within one round trip: step back to an entry the follower accepts.
    while prev and _refuses_append(P, before, fb, prev, before[lb + LOG + prev - 1]):
        prev -= 1
    acknowledged = _follower_apply(P, row, fb, prev, before, lb + LOG + prev, leader_length - prev,
                                   before[lb + HWM], before[lb + GEN])
    _with_match(P, row, lb, f, acknowledged)


@njit(cache=True)
def _readable(P, row, base):
    """Model.readable: up to which index the live server at `base` serves a client's read."""
    if P[READABLE_AT]:  # a variant's read rule
        k = (base - 1) // P[SW]
        key = (((k * 2 + (row[base + ROLE] == 1)) * _logs(P) + _log_code(P, row, base)) * (P[L] + 1)
               + row[base + HWM])
        return _rule(P, READABLE_AT, key)
    return min(np.int64(row[base + HWM]), np.int64(row[base + LEN]))


@njit(cache=True)
def _unread(P, row, base):
    """Some entry the server serves (at or below its high-water mark) has not been read (guard_read)."""
    for e in range(_readable(P, row, base)):
        if not row[_read_slot(P, e + 1, row[base + LOG + e])]:
            return True
    return False


@njit(cache=True)
def _read(P, row, k):
    # "Any client can read the log entries only till the high-water mark."
    base = _server(P, k)
    for i in range(_readable(P, row, base)):
        row[_read_slot(P, i + 1, row[base + LOG + i])] = 1


@njit(cache=True)
def _crash(P, row, k):
    base = _server(P, k)
    row[base + ALIVE] = 0
    _become_follower(P, row, base, row[base + GEN])
    if not P[HWM_DURABLE]:
        row[base + HWM] = 0
    row[0] += 1
    if P[ASYNC]:
        n = P[N]
        for a in range(n):
            for b in range(n):
                if a == k or b == k:
                    ch = _channel(P, a, b)
                    for p in range(ch, ch + P[CW]):
                        row[p] = 0


@njit(cache=True)
def _restart_leader_hwm(P, row, r):
    """The HWM of the leader restarting r asks (restart=truncate-to-leader-hwm): the live leader of the
    highest generation (the first one on a tie), if not stale; -1 when none answers."""
    best = -1
    for k in range(P[N]):
        kb = _server(P, k)
        if k != r and row[kb + ALIVE] and row[kb + ROLE] == 1:
            if best < 0 or row[kb + GEN] > row[_server(P, best) + GEN]:
                best = k
    if best >= 0 and row[_server(P, best) + GEN] >= row[_server(P, r) + GEN]:
        return np.int64(row[_server(P, best) + HWM])
    return np.int64(-1)


@njit(cache=True)
def _restart(P, row, r):
    base = _server(P, r)
    row[base + ALIVE] = 1
    length = np.int64(row[base + LEN])
    leader_hwm = _restart_leader_hwm(P, row, r) if P[RESTART] == TRUNCATE_TO_LEADER_HWM else np.int64(-1)
    if P[RESTART_KEEPS_AT]:  # a variant's rule: what the restart keeps
        key = ((_log_code(P, row, base) * (P[L] + 1) + row[base + HWM]) * (P[L] + 2)
               + (P[L] + 1 if leader_hwm < 0 else leader_hwm))
        kept = _rule(P, RESTART_KEEPS_AT, key)
        if kept < length or leader_hwm >= 0:
            length = kept
            row[base + HWM] = min(np.int64(row[base + HWM]), kept)
    elif P[RESTART] == TRUNCATE_TO_OWN_HWM:
        length = min(np.int64(row[base + HWM]), length)
    elif leader_hwm >= 0:
        length = min(leader_hwm, length)
        row[base + HWM] = min(np.int64(row[base + HWM]), length)
    for position in range(length, P[L]):
        row[base + LOG + position] = 0
    row[base + LEN] = length


@njit(cache=True)
def _send(P, row, a, b):
    base = _server(P, a)
    prev = min(np.int64(row[_match(P, base, b)]), np.int64(row[base + LEN]))
    prev_generation = np.int64(row[base + LOG + prev - 1]) if prev else np.int64(0)
    _push(P, row, a, b, APPEND, row[base + GEN], prev, prev_generation, row[base + HWM], row, base + LOG + prev,
          row[base + LEN] - prev)


@njit(cache=True)
def _deliver(P, before, row, a, b):
    m = _channel(P, a, b) + 1  # the head of a->b, read from `before` (row's copy is popped)
    _pop(P, row, a, b)
    rb = _server(P, b)
    kind, generation, x = np.int64(before[m]), np.int64(before[m + 1]), np.int64(before[m + 2])
    if kind == APPEND:
        prev, prev_generation, leader_hwm, count = x, np.int64(before[m + 3]), np.int64(before[m + 4]), \
            np.int64(before[m + 5])
        if generation < row[rb + GEN]:
            _push(P, row, b, a, REPLY, row[rb + GEN], 0, prev, 0, before, 0, 0)
        elif prev and _refuses_append(P, row, rb, prev, prev_generation):
            # Raft receiver rule 2: no entry at prevLogIndex whose generation matches prevLogTerm.
            _become_follower(P, row, rb, generation)
            _push(P, row, b, a, REPLY, generation, 0, prev, 0, before, 0, 0)
        else:
            acknowledged = _follower_apply(P, row, rb, prev, before, m + 6, count, leader_hwm, generation)
            _push(P, row, b, a, REPLY, generation, 1, acknowledged, 0, before, 0, 0)
    else:
        success, index = x, np.int64(before[m + 3])
        if generation > row[rb + GEN]:
            _become_follower(P, row, rb, generation)
        elif row[rb + ROLE] == 1 and generation == row[rb + GEN]:
            if success:
                _with_match(P, row, rb, a, index)
            else:
                # The follower lacks the entry at `index`: back off below it.
                _with_match(P, row, rb, a, min(np.int64(row[_match(P, rb, a)]), max(index - 1, 0)))
        # Otherwise a stale reply to an earlier generation: ignored.

# --------------------------------------------------------- ZAB (model/zab.py)
# Each `_zab_*` finishes the raft effect above it as ZabModel's effect of the same name does.
@njit(cache=True)
def _zab_acknowledge(P, row):
    """ZabModel._with's acknowledgements: every entry under an established live leader's HWM."""
    for k in range(P[N]):
        base = _server(P, k)
        if row[base + ROLE] == 1 and row[base + ALIVE] and row[_extra(P, base, SYNCED)] & ESTABLISHED:
            for i in range(min(row[base + HWM], row[base + LEN])):
                row[_entry_slot(P, P[AB], i + 1, row[base + LOG + i])] = 1


@njit(cache=True)
def _zab_unsync(P, row, k):
    """Server k leaves every leader's synced set, and its own set (if it led) is emptied."""
    for j in range(P[N]):
        at = _extra(P, _server(P, j), SYNCED)
        row[at] = 0 if j == k else row[at] & ~(1 << k)


@njit(cache=True)
def _zab_establish(P, row, l):
    """ZabModel._establish: a quorum acknowledged NEWLEADER; the leader commits its history."""
    base = _server(P, l)
    at = _extra(P, base, SYNCED)
    mask = np.int64(row[at])
    if mask & ESTABLISHED:
        return
    acknowledged = 0
    for k in range(P[N]):  # Q1 of the servers that count (a ZooKeeper observer's acknowledgement does not)
        if ((mask | 1 << l) & P[COUNTING]) >> k & 1:
            acknowledged += 1
    if acknowledged < P[ELECTION_QUORUM]:
        return
    row[base + HWM] = max(np.int64(row[base + HWM]), _quorum_index(P, row, base))
    row[at] = mask | ESTABLISHED
    _zab_acknowledge(P, row)


@njit(cache=True)
def _zab_elect(P, row, c, voters):
    for k in range(P[N]):
        at = _extra(P, _server(P, k), SYNCED)
        row[at] = 0 if voters >> k & 1 else row[at] & ~voters
    base = _server(P, c)
    if P[NOOP]:
        row[_extra(P, base, DURABLE)] = row[base + LEN]  # the leader logs its own entry
    _zab_acknowledge(P, row)
    row[_extra(P, base, EPOCH)] = row[base + GEN]
    _zab_establish(P, row, c)


@njit(cache=True)
def _zab_sync(P, before, row, l, f):
    """ZabModel.effect_sync: one DIFF/TRUNC/SNAP exchange and the ACK of NEWLEADER."""
    lb, fb = _server(P, l), _server(P, f)
    if before[fb + GEN] > before[lb + GEN]:
        _become_follower(P, row, lb, before[fb + GEN])  # the leader is stale and steps down
        row[_extra(P, lb, SYNCED)] = 0
        return
    length = np.int64(before[lb + LEN])
    common = 0
    while common < min(length, np.int64(before[fb + LEN])) and before[lb + LOG + common] == before[fb + LOG + common]:
        common += 1
    durable = min(np.int64(before[_extra(P, fb, DURABLE)]), common) if P[ACK_BEFORE_PERSIST] else length
    for position in range(P[L]):
        row[fb + LOG + position] = before[lb + LOG + position]
    row[fb + LEN] = length
    row[fb + HWM] = max(before[fb + HWM], before[lb + HWM])
    row[fb + ALIVE] = 1
    _become_follower(P, row, fb, before[lb + GEN])
    established = before[_extra(P, lb, SYNCED)] & ESTABLISHED
    row[_match(P, lb, f)] = durable if established else length
    _zab_unsync(P, row, f)
    row[_extra(P, lb, SYNCED)] = before[_extra(P, lb, SYNCED)] | 1 << f
    row[_extra(P, fb, DURABLE)] = durable
    row[_extra(P, fb, EPOCH)] = before[lb + GEN]
    if established:
        _advance_hwm(P, row, lb)
        _zab_acknowledge(P, row)
    _zab_establish(P, row, l)


@njit(cache=True)
def _zab_persist(P, row, k):
    """ZabModel.effect_persist: the follower logs what it holds and ACKs it to its leader."""
    kb = _server(P, k)
    row[_extra(P, kb, DURABLE)] = row[kb + LEN]
    for l in range(P[N]):
        lb = _server(P, l)
        synced = row[_extra(P, lb, SYNCED)]
        if synced >> k & 1 and row[lb + ALIVE] and synced & ESTABLISHED:
            row[_match(P, lb, k)] = row[kb + LEN]
            _advance_hwm(P, row, lb)
            _zab_acknowledge(P, row)
            return


@njit(cache=True)
def _zab_logged(P, row, k):
    """After a write (k the leader) or a replicate (k the follower): k's log is on disk."""
    base = _server(P, k)
    row[_extra(P, base, DURABLE)] = row[base + LEN]
    _zab_acknowledge(P, row)


@njit(cache=True)
def _zab_crash(P, row, c):
    base = _server(P, c)
    length = min(np.int64(row[base + LEN]), np.int64(row[_extra(P, base, DURABLE)]))  # memory is lost
    for position in range(length, P[L]):
        row[base + LOG + position] = 0
    row[base + LEN] = length
    row[base + HWM] = min(np.int64(row[base + HWM]), length)
    _zab_unsync(P, row, c)
    _zab_acknowledge(P, row)


@njit(cache=True)
def _zab_restart(P, row, r):
    base = _server(P, r)
    row[_extra(P, base, DURABLE)] = min(row[_extra(P, base, DURABLE)], row[base + LEN])
    _zab_acknowledge(P, row)


# ------------------------------------------------ BookKeeper (model/bookkeeper.py)
# The ledger's fragments (properties.ledger.Ledger): fragment 0 is the first ensemble, bookies
# 0..E-1; fragment j > 0 is the j-th ensemble change of the row's slots at P[EB] (Layout). The writer
# knows every change (`_bk_changes(P, row, False)`), the ledger metadata the first `stored`
# (`_bk_changes(P, row, True)`).
@njit(cache=True)
def _bits(P, row, field):
    """How many bookies have `field` (FENCED, RESPONDED, NEGATIVES) set."""
    count = 0
    for b in range(P[BOOKIES]):
        count += row[_extra(P, _server(P, b), field)]
    return count


@njit(cache=True, inline="always")
def _bk_changes(P, row, stored):
    """How many ensemble changes the writer (stored False) or the ledger metadata (True) holds."""
    return np.int64(row[P[EB] + 1] if stored else row[P[EB]])


@njit(cache=True, inline="always")
def _bk_slot(P, fragment):
    return P[EB] + 2 + (fragment - 1) * (1 + P[ENSEMBLE_SIZE])


@njit(cache=True, inline="always")
def _bk_first(P, row, fragment):
    """The first entry of `fragment`."""
    return np.int64(1) if fragment == 0 else np.int64(row[_bk_slot(P, fragment)])


@njit(cache=True, inline="always")
def _bk_member(P, row, fragment, position):
    """The bookie at `position` of `fragment`'s ensemble."""
    return np.int64(position) if fragment == 0 else np.int64(row[_bk_slot(P, fragment) + 1 + position])


@njit(cache=True)
def _bk_in_ensemble(P, row, fragment, b):
    for position in range(P[ENSEMBLE_SIZE]):
        if _bk_member(P, row, fragment, position) == b:
            return True
    return False


@njit(cache=True)
def _bk_in_write_set(P, row, changes, entry, b):
    """Ledger.write_set: b is one of the WQ bookies from position (entry - 1) mod E of the ensemble of the
    fragment that holds `entry` (the last of fragments 0..changes starting at or before it)."""
    fragment = 0
    for j in range(1, changes + 1):
        if _bk_first(P, row, j) <= entry:
            fragment = j
    for i in range(P[WRITE_QUORUM]):
        if _bk_member(P, row, fragment, (entry - 1 + i) % P[ENSEMBLE_SIZE]) == b:
            return True
    return False


@njit(cache=True, inline="always")
def _bk_holds(row, base, entry):
    """BookKeeperModel._holds: the log at `base` stores `entry` (not a hole)."""
    return row[base + LEN] >= entry and row[base + LOG + entry - 1] != 0


@njit(cache=True)
def _bk_shape(P, row, base, hwm):
    """BookKeeperModel._shaped: the log without trailing holes, then with holes up to its LAC `hwm`
    (positions past the log are zero already)."""
    length = 0
    for position in range(P[L]):
        if row[base + LOG + position]:
            length = position + 1
    row[base + LEN] = max(length, hwm)
    row[base + HWM] = hwm


@njit(cache=True)
def _bk_pending(P, row, b, after):
    """BookKeeperModel._pending: an entry above `after` of the writer's current fragment in b's write sets
    that b does not store."""
    wb, bb = _server(P, P[BOOKIES]), _server(P, b)
    changes = _bk_changes(P, row, False)
    for e in range(max(_bk_first(P, row, changes), after + 1), np.int64(row[wb + LEN]) + 1):
        if _bk_in_write_set(P, row, changes, e, b) and not _bk_holds(row, bb, e):
            return True
    return False


@njit(cache=True)
def _bk_send_add(P, row, b):
    """BookKeeperModel.effect_send_add."""
    wb, bb = _server(P, P[BOOKIES]), _server(P, b)
    if row[_extra(P, bb, FENCED)]:
        _become_follower(P, row, wb, row[wb + GEN])  # LedgerFencedException: the writer stops
        return
    changes = _bk_changes(P, row, False)
    length = np.int64(row[wb + LEN])
    for e in range(_bk_first(P, row, changes), length + 1):  # every entry of its write sets it lacks
        if _bk_in_write_set(P, row, changes, e, b):
            row[bb + LOG + e - 1] = 1  # WRITER_GENERATION
    _bk_shape(P, row, bb, max(row[bb + HWM], row[wb + HWM]))  # the adds carry the writer's LAC
    row[bb + GEN] = 1
    row[_match(P, wb, b)] = length
    # BookKeeperModel.last_add_confirmed: each next entry that AQ bookies of its write set acknowledged.
    lac = np.int64(row[wb + HWM])
    while lac < length:
        held = 0
        for k in range(P[BOOKIES]):
            if row[_match(P, wb, k)] > lac and _bk_in_write_set(P, row, changes, lac + 1, k):
                held += 1
        if held < P[ACK_QUORUM]:
            break
        lac += 1
    row[wb + HWM] = lac
    for index in range(1, lac + 1):  # the add callbacks complete in order up to the LAC
        row[_entry_slot(P, P[AB], index, 1)] = 1


@njit(cache=True)
def _bk_replacement(P, row, fragment):
    """BookKeeperModel._replacement: the first live bookie outside `fragment`'s ensemble (-1: none)."""
    for k in range(P[BOOKIES]):
        if row[_server(P, k) + ALIVE] and not _bk_in_ensemble(P, row, fragment, k):
            return k
    return -1


@njit(cache=True)
def _bk_change_ensemble(P, row, b):
    """BookKeeperModel.effect_change_ensemble: b replaced in a new fragment from the first unconfirmed
    entry, in the ledger metadata unless recovery has begun."""
    wb = _server(P, P[BOOKIES])
    recovering = _bits(P, row, RESPONDED) > 0 or row[_server(P, P[BOOKIES] + 1) + ROLE] == 1
    if recovering and P[BLOCK_ADDS]:  # the conditional metadata update fails: the writer stops
        _become_follower(P, row, wb, row[wb + GEN])
        return
    changes = _bk_changes(P, row, False)
    replacement = _bk_replacement(P, row, changes)
    lac = row[wb + HWM]
    slot = _bk_slot(P, changes + 1)
    row[slot] = lac + 1
    for position in range(P[ENSEMBLE_SIZE]):
        member = _bk_member(P, row, changes, position)
        row[slot + 1 + position] = replacement if member == b else member
    row[_match(P, wb, b)] = min(row[_match(P, wb, b)], lac)
    row[_match(P, wb, replacement)] = lac
    row[P[EB]] = changes + 1
    if not recovering:  # issue 1591: without blocking, a failed update leaves the change the writer's only
        row[P[EB] + 1] = changes + 1


@njit(cache=True)
def _bk_fence(P, row, b):
    """BookKeeperModel.effect_fence: the bookie is fenced and reports its LAC; recovery starts after the
    highest one, and never before the ledger's last fragment."""
    bb, rb = _server(P, b), _server(P, P[BOOKIES] + 1)
    start = max(np.int64(row[bb + HWM]), _bk_first(P, row, _bk_changes(P, row, True)) - 1)
    if start > row[rb + LEN]:
        for position in range(start):
            row[rb + LOG + position] = 1  # WRITER_GENERATION
        row[rb + LEN] = start
    row[_extra(P, bb, FENCED)] = 1
    row[_extra(P, bb, RESPONDED)] = 1


@njit(cache=True)
def _bk_unwritable(P, row):
    """BookKeeperModel._unwritable: an entry recovery read (after recovery_start) has fewer than AQ
    live bookies in its write set to be written back to."""
    rb, stored = _server(P, P[BOOKIES] + 1), _bk_changes(P, row, True)
    start = _bk_first(P, row, stored) - 1  # BookKeeperModel.recovery_start
    for k in range(P[BOOKIES]):
        kb = _server(P, k)
        if row[_extra(P, kb, RESPONDED)]:
            start = max(start, np.int64(row[kb + HWM]))
    for e in range(start + 1, np.int64(row[rb + LEN]) + 1):
        live = 0
        for k in range(P[BOOKIES]):
            if row[_server(P, k) + ALIVE] and _bk_in_write_set(P, row, stored, e, k):
                live += 1
        if live < P[ACK_QUORUM]:
            return True
    return False


@njit(cache=True)
def _bk_recovery_read(P, row, b):
    """BookKeeperModel.effect_recovery_read: found, missing, or missing on enough bookies to close."""
    bb, rb = _server(P, b), _server(P, P[BOOKIES] + 1)
    index = np.int64(row[rb + LEN]) + 1
    if P[READS_FENCE]:
        row[_extra(P, bb, FENCED)] = 1
    if _bk_holds(row, bb, index):
        row[rb + LOG + index - 1] = row[bb + LOG + index - 1]
        row[rb + LEN] = index
        for k in range(P[BOOKIES]):
            row[_extra(P, _server(P, k), NEGATIVES)] = 0
        return
    row[_extra(P, bb, NEGATIVES)] = 1
    if _bits(P, row, NEGATIVES) < P[WRITE_QUORUM] - P[ACK_QUORUM] + 1:
        return
    # Entry `index` does not exist: the ledger closes before it, and its last fragment's entries are
    # written back to their write sets; nothing beyond the last entry is part of the ledger any more.
    end = index - 1
    stored = _bk_changes(P, row, True)
    first = _bk_first(P, row, stored)
    for k in range(P[BOOKIES]):
        kb = _server(P, k)
        for position in range(end, P[L]):
            row[kb + LOG + position] = 0
        member = False
        for fragment in range(stored + 1):
            member = member or _bk_in_ensemble(P, row, fragment, k)
        if row[kb + ALIVE] and member:
            for e in range(first, end + 1):  # the last fragment's: earlier ones are immutable
                if _bk_in_write_set(P, row, stored, e, k):
                    row[kb + LOG + e - 1] = 1
            _bk_shape(P, row, kb, end)
        else:
            _bk_shape(P, row, kb, min(np.int64(row[kb + HWM]), end))
    row[rb + GEN] = 2  # RECOVERY_GENERATION
    row[rb + ROLE] = 1
    row[rb + HWM] = end
    row[rb + ALIVE] = 1


@njit(cache=True)
def _bk_unread(P, row, base):
    """BookKeeperModel.guard_read: an entry the bookie stores at or below its LAC has not been read (a
    hole is no entry)."""
    for e in range(min(row[base + HWM], row[base + LEN])):
        generation = row[base + LOG + e]
        if generation and not row[_read_slot(P, e + 1, generation)]:
            return True
    return False


@njit(cache=True)
def _bk_read(P, row, k):
    base = _server(P, k)
    for e in range(min(row[base + HWM], row[base + LEN])):
        generation = row[base + LOG + e]
        if generation:
            row[_read_slot(P, e + 1, generation)] = 1


@njit(cache=True)
def _bookkeeper_successors(P, row, i, server_ids, out, parents, actions, hits, t):
    """BookKeeperModel.actions and effects: add, then per bookie send_add, fence, recovery_read,
    read, crash, restart, and change_ensemble where the ensemble has spares."""
    bookies, writer, recovery = P[BOOKIES], _server(P, P[BOOKIES]), _server(P, P[BOOKIES] + 1)
    writing = row[writer + ROLE] == 1
    closed = row[recovery + ROLE] == 1
    changes, stored = _bk_changes(P, row, False), _bk_changes(P, row, True)
    if writing:
        if row[writer + LEN] < P[L]:
            out[t] = row
            out[t][writer + LOG + row[writer + LEN]] = 1  # WRITER_GENERATION
            out[t][writer + LEN] += 1
            t = _emit(t, parents, actions, i, server_ids[ADD_ID, 0])
        else:
            hits[HIT_LOG] = 1
    for b in range(bookies):
        bb = _server(P, b)
        if writing and row[bb + ALIVE] and _bk_in_ensemble(P, row, changes, b) and (
                _bk_pending(P, row, b, 0) or row[bb + HWM] < row[writer + HWM]):
            out[t] = row
            _bk_send_add(P, out[t], b)
            t = _emit(t, parents, actions, i, server_ids[SEND_ADD_ID, b])
    for b in range(bookies):
        bb = _server(P, b)
        if not closed and row[bb + ALIVE] and not row[_extra(P, bb, RESPONDED)] and \
                _bk_in_ensemble(P, row, stored, b):
            out[t] = row
            _bk_fence(P, out[t], b)
            t = _emit(t, parents, actions, i, server_ids[FENCE_ID, b])
    # Recovery reads start once E - AQ + 1 bookies answered the fencing read; the answer that would close
    # the ledger (the WQ - AQ + 1th "no such entry") waits until what recovery read can be written back.
    fenced_out = _bits(P, row, RESPONDED) >= P[ENSEMBLE_SIZE] - P[ACK_QUORUM] + 1
    index = np.int64(row[recovery + LEN]) + 1
    closing = _bits(P, row, NEGATIVES) + 1 >= P[WRITE_QUORUM] - P[ACK_QUORUM] + 1
    unwritable = not closed and fenced_out and closing and _bk_unwritable(P, row)
    for b in range(bookies):
        bb = _server(P, b)
        if not closed and fenced_out and row[bb + ALIVE] and not row[_extra(P, bb, NEGATIVES)] and \
                _bk_in_write_set(P, row, stored, index, b) and not (unwritable and not _bk_holds(row, bb, index)):
            out[t] = row
            _bk_recovery_read(P, out[t], b)
            t = _emit(t, parents, actions, i, server_ids[RECOVERY_READ_ID, b])
    for b in range(bookies):
        bb = _server(P, b)
        if row[bb + ALIVE] and _bk_unread(P, row, bb):
            out[t] = row
            _bk_read(P, out[t], b)
            t = _emit(t, parents, actions, i, server_ids[READ_ID, b])
    for b in range(bookies):  # the journal keeps entries, LAC and fence: a crash only stops the bookie
        if row[_server(P, b) + ALIVE]:
            if row[0] < P[MAX_CRASHES]:
                out[t] = row
                out[t][_server(P, b) + ALIVE] = 0
                out[t][0] += 1
                t = _emit(t, parents, actions, i, server_ids[CRASH_ID, b])
            else:
                hits[HIT_CRASHES] = 1
    for b in range(bookies):
        if not row[_server(P, b) + ALIVE]:
            out[t] = row
            out[t][_server(P, b) + ALIVE] = 1
            t = _emit(t, parents, actions, i, server_ids[RESTART_ID, b])
    if P[ENSEMBLE_SIZE] < bookies:  # a failed write to a bookie of the ensemble, with a spare to take it
        for b in range(bookies):
            if writing and not row[_server(P, b) + ALIVE] and _bk_in_ensemble(P, row, changes, b) and \
                    _bk_pending(P, row, b, row[writer + HWM]) and _bk_replacement(P, row, changes) >= 0:
                out[t] = row
                _bk_change_ensemble(P, out[t], b)
                t = _emit(t, parents, actions, i, server_ids[CHANGE_ENSEMBLE_ID, b])
    return t


# ---------------------------------------------------------- Kafka (model/kafka.py)
@njit(cache=True)
def _kafka_epoch(P, row):
    """KafkaModel.epoch: the controller's latest leader epoch."""
    epoch = np.int64(0)
    for k in range(P[N]):
        epoch = max(epoch, np.int64(row[_server(P, k) + GEN]))
    return epoch


@njit(cache=True)
def _kafka_isr_size(P, row, l):
    """KafkaModel._isr_size: the ISR leader l counts (its own copy), itself included."""
    lb = _server(P, l)
    size = 0
    for k in range(P[N]):
        if k == l or row[_extra(P, lb, ISR_VIEW)] >> k & 1:
            size += 1
    return size


@njit(cache=True)
def _kafka_advance_hwm(P, row, l):
    """KafkaModel._advance_hwm: HW = min LEO over the ISR while the ISR has min.insync.replicas; the producers
    of the leader's own epoch's entries under the new HW are acknowledged."""
    lb = _server(P, l)
    isr = 0
    hwm = np.int64(row[lb + LEN]) if P[COUNTING] >> l & 1 else np.int64(P[L])
    for k in range(P[N]):
        # The leader's own copy of the ISR, of the replicas that count (a variant's counts).
        if (k == l or row[_extra(P, lb, ISR_VIEW)] >> k & 1) and P[COUNTING] >> k & 1:
            isr += 1
            if k != l:
                hwm = min(hwm, np.int64(row[_match(P, lb, k)]))
    if isr < P[MIN_ISR] or hwm <= row[lb + HWM]:
        return
    row[lb + HWM] = hwm
    for i in range(hwm):
        if row[lb + LOG + i] == row[lb + GEN]:
            row[_entry_slot(P, P[AB], i + 1, row[lb + GEN])] = 1


@njit(cache=True)
def _kafka_truncate(P, row, base, length):
    for position in range(length, P[L]):
        row[base + LOG + position] = 0
    row[base + LEN] = length
    _kafka_lower_flushed(P, row, base, length)


@njit(cache=True)
def _kafka_lower_flushed(P, row, base, length):
    """A truncation lowers the flushed length (the recovery point) to `length`; bit 0 is truncating."""
    at = _extra(P, base, TRUNCATING)
    if row[at] >> 1 > length:
        row[at] = (row[at] & 1) | length << 1


@njit(cache=True)
def _kafka_power_failure(P, row, c):
    """KafkaModel._power_failure (after the crash's own changes): the log keeps its flushed prefix, the HW
    is bounded by it, and the controller drops c from the ISR (and its current leader's copy) unless c is
    the last ISR replica."""
    cb = _server(P, c)
    _kafka_truncate(P, row, cb, min(np.int64(row[_extra(P, cb, TRUNCATING)] >> 1), np.int64(row[cb + LEN])))
    row[cb + HWM] = min(row[cb + HWM], row[cb + LEN])
    if not row[_extra(P, cb, IN_ISR)]:
        return
    others = False
    for k in range(P[N]):
        if k != c and row[_extra(P, _server(P, k), IN_ISR)]:
            others = True
    if not others:
        return
    row[_extra(P, cb, IN_ISR)] = 0
    epoch = _kafka_epoch(P, row)
    for k in range(P[N]):
        kb = _server(P, k)
        if row[kb + ALIVE] and row[kb + ROLE] == 1 and row[kb + GEN] == epoch and row[_extra(P, kb, ISR_VIEW)] >> c & 1:
            row[_extra(P, kb, ISR_VIEW)] &= ~(1 << c) & 255
            _kafka_advance_hwm(P, row, k)
            return


@njit(cache=True)
def _kafka_become_follower(P, row, k, epoch, leader):
    """KafkaModel._become_follower: makeFollower on a LeaderAndIsr request (leader: position + 1)."""
    base = _server(P, k)
    if P[TRUNCATION] == OWN_HWM:
        _kafka_truncate(P, row, base, min(row[base + HWM], row[base + LEN]))  # before KIP-101: to the HW
    elif P[TRUNCATION] != LAST_FETCHED_EPOCH:  # KIP-320's first attempt truncates only on a fetch
        row[_extra(P, base, TRUNCATING)] |= 1  # the fetcher starts in its truncating state
    row[base + HWM] = min(row[base + HWM], row[base + LEN])
    _become_follower(P, row, base, epoch)
    row[_extra(P, base, LEADER_OF)] = leader


@njit(cache=True)
def _end_offset_kip101(P, row, base, requested):
    """kafka.end_offset_kip101 of the log at `base` (-1 for None)."""
    length = np.int64(row[base + LEN])
    if length and row[base + LOG + length - 1] == requested:
        return length
    for offset in range(length):
        epoch = row[base + LOG + offset]
        if epoch > requested and (offset == 0 or row[base + LOG + offset - 1] != epoch):
            return np.int64(offset)  # the start of the first epoch after `requested`
    return np.int64(-1)


@njit(cache=True)
def _end_offset_for(P, row, base, requested):
    """kafka.end_offset_for of the log at `base`: (epoch, end offset), epoch -1 for None."""
    return _end_offset_in(P, row, base, requested, np.int64(row[base + LEN]))


@njit(cache=True)
def _end_offset_in(P, row, base, requested, length):
    """_end_offset_for of the first `length` entries of the log at `base`."""
    end = length
    for offset in range(length - 1, -1, -1):
        epoch = np.int64(row[base + LOG + offset])
        if offset == 0 or row[base + LOG + offset - 1] != epoch:  # the start of a run of `epoch`
            if epoch <= requested:
                return epoch, end
            end = np.int64(offset)
    return np.int64(-1), np.int64(0)


@njit(cache=True)
def _truncation_offset(P, row, fb, lb):
    """kafka.truncation_offset for the follower at fb and the leader at lb."""
    length, hwm = np.int64(row[fb + LEN]), np.int64(row[fb + HWM])
    if P[TRUNCATION] == OWN_HWM:
        return min(hwm, length)
    while True:  # the model's recursion: each round asks about a shorter prefix of the follower's log
        if not length:
            return np.int64(0)
        requested = np.int64(row[fb + LOG + length - 1])
        if P[TRUNCATION] == LEADER_EPOCH:
            end = _end_offset_kip101(P, row, lb, requested)
            return min(hwm, length) if end < 0 else min(end, length)  # UNDEFINED: back to the HW
        epoch, end = _end_offset_for(P, row, lb, requested)
        if epoch < 0 and P[TRUNCATION] == LEADER_EPOCH_KIP279:
            return min(hwm, length)  # 2.0 still answered UNDEFINED here
        if epoch >= 0 and epoch != requested:
            own_epoch, own_end = _end_offset_in(P, row, fb, epoch, length)
            if own_epoch >= 0 and own_epoch != epoch:
                length = own_end  # it lacks that epoch too: truncate to its end and ask again
                continue
            end = min(end, own_end)
        return min(end, length)


@njit(cache=True)
def _diverged_at(P, row, fb, lb):
    """kafka.diverged_at: where the follower truncates on LOG_TRUNCATION (-1 for None)."""
    end, leader_length = np.int64(row[fb + LEN]), np.int64(row[lb + LEN])
    if end == 0 or (end <= leader_length and row[lb + LOG + end - 1] == row[fb + LOG + end - 1]):
        return np.int64(-1)
    for k in range(min(end, leader_length) - 1, -1, -1):
        if row[fb + LOG + k] == row[lb + LOG + k]:
            return np.int64(k + 1)
    return np.int64(0)


@njit(cache=True)
def _kafka_receive_leader_and_isr(P, row, v, c, epoch):
    """KafkaModel._receive_leader_and_isr: replica v learns that c leads `epoch`."""
    vb = _server(P, v)
    if row[vb + ROLE] == 0 and row[_extra(P, vb, LEADER_OF)] == c + 1 and (
            P[TRUNCATION] != FENCED_EPOCH or epoch <= row[vb + GEN] + 1):
        row[vb + GEN] = epoch  # makeFollower returns early: the leader is unchanged
    else:
        _kafka_become_follower(P, row, v, epoch, c + 1)


@njit(cache=True)
def _kafka_elect(P, row, c, voters):
    epoch = _kafka_epoch(P, row) + 1
    cb = _server(P, c)
    clean = row[_extra(P, cb, IN_ISR)]
    for k in range(P[N]):  # clean: the new ISR is the live ISR; unclean: the new leader alone
        kb = _server(P, k)
        row[_extra(P, kb, IN_ISR)] = 1 if k == c or (clean and row[_extra(P, kb, IN_ISR)] and row[kb + ALIVE]) else 0
    for v in range(P[N]):
        if v != c and voters >> v & 1:
            _kafka_receive_leader_and_isr(P, row, v, c, epoch)
    row[cb + GEN] = epoch
    row[cb + ROLE] = 1
    for j in range(P[N]):
        row[_match(P, cb, j)] = 0
    row[_extra(P, cb, LEADER_OF)] = c + 1
    row[_extra(P, cb, TRUNCATING)] &= 254
    view = 0  # the LeaderAndIsr request sends the new leader the new ISR
    for k in range(P[N]):
        if row[_extra(P, _server(P, k), IN_ISR)]:
            view |= 1 << k
    row[_extra(P, cb, ISR_VIEW)] = view
    _kafka_advance_hwm(P, row, c)


@njit(cache=True)
def _kafka_replicate(P, row, l, f):
    """KafkaModel.effect_replicate: truncation if pending, out-of-range, then the fetch."""
    lb, fb = _server(P, l), _server(P, f)
    epoch = _kafka_epoch(P, row)
    if row[_extra(P, fb, TRUNCATING)] & 1:
        _kafka_truncate(P, row, fb, _truncation_offset(P, row, fb, lb))
    elif P[TRUNCATION] == LAST_FETCHED_EPOCH:
        diverged = _diverged_at(P, row, fb, lb)
        if diverged >= 0:  # LOG_TRUNCATION: truncate, then fetch again from there
            _kafka_truncate(P, row, fb, diverged)
    length = min(row[fb + LEN], row[lb + LEN])  # OFFSET_OUT_OF_RANGE: truncate to the leader's LEO
    _kafka_lower_flushed(P, row, fb, length)
    for position in range(length, P[L]):  # the fetch from the follower's LEO appends the leader's entries
        row[fb + LOG + position] = row[lb + LOG + position]
    length = row[lb + LEN]
    row[fb + LEN] = length
    row[fb + HWM] = max(min(np.int64(row[fb + HWM]), np.int64(length)), min(np.int64(row[lb + HWM]), np.int64(length)))
    row[_extra(P, fb, TRUNCATING)] &= 254
    row[_match(P, lb, f)] = length
    if not row[_extra(P, fb, IN_ISR)] and length >= row[lb + HWM] and row[lb + GEN] == epoch:
        row[_extra(P, fb, IN_ISR)] = 1  # maybeExpandIsr: caught up to the HW
        row[_extra(P, lb, ISR_VIEW)] |= 1 << f  # the leader keeps its copy of the ISR it wrote
    _kafka_advance_hwm(P, row, l)


@njit(cache=True)
def _kafka_expire_session(P, row, k):
    """PartitionedKafkaModel._expire_session: broker k leaves the controller's ISR unless it is the last
    member, and the leader of the current epoch, if it still counts k, counts the smaller ISR."""
    kb = _server(P, k)
    if not row[_extra(P, kb, IN_ISR)]:
        return
    others = False
    for j in range(P[N]):
        if j != k and row[_extra(P, _server(P, j), IN_ISR)]:
            others = True
    if not others:
        return
    row[_extra(P, kb, IN_ISR)] = 0
    epoch = _kafka_epoch(P, row)
    for j in range(P[N]):
        jb = _server(P, j)
        if j != k and row[jb + ALIVE] and row[jb + ROLE] == 1 and row[jb + GEN] == epoch and \
                row[_extra(P, jb, ISR_VIEW)] >> k & 1:
            row[_extra(P, jb, ISR_VIEW)] &= ~(1 << k) & 255
            _kafka_advance_hwm(P, row, j)
            return


@njit(cache=True)
def _kafka_reregister(P, row, k):
    """PartitionedKafkaModel._reregister: on healing, a fenced broker that led or missed an epoch
    learns the current epoch and its leader from the controller."""
    kb = _server(P, k)
    epoch = _kafka_epoch(P, row)
    if not row[kb + ALIVE] or (row[kb + ROLE] != 1 and row[kb + GEN] == epoch):
        return
    leader = 0
    for j in range(P[N]):
        jb = _server(P, j)
        if j != k and row[jb + ALIVE] and row[jb + ROLE] == 1 and row[jb + GEN] == epoch:
            leader = j + 1
            break
    if row[kb + GEN] == epoch and leader == 0 and row[_extra(P, kb, IN_ISR)]:
        return  # still the controller's leader (the last ISR replica, nobody else elected)
    _kafka_become_follower(P, row, k, epoch, leader)


@njit(cache=True)
def _kafka_partition_successors(P, row, i, server_ids, pair_ids, out, parents, actions, hits, t):
    """PartitionedKafkaModel.actions' last ones: a cut-off leader's own ISR shrinks (without
    controller_fencing) and the heal, or a partition of each broker in turn."""
    n = P[N]
    cut = -1
    for k in range(n):
        if _cut(P, row, k):
            cut = k
    if cut >= 0:
        kb = _server(P, cut)
        if not P[CONTROLLER_FENCING] and row[kb + ALIVE] and row[kb + ROLE] == 1:
            for f in range(n):
                if f != cut and row[_extra(P, kb, ISR_VIEW)] >> f & 1 and (
                        not row[_server(P, f) + ALIVE] or row[_match(P, kb, f)] < row[kb + LEN]):
                    out[t] = row  # the update never reaches the controller: only the leader's own copy shrinks
                    out[t][_extra(P, kb, ISR_VIEW)] &= ~(1 << f) & 255
                    _kafka_advance_hwm(P, out[t], cut)
                    t = _emit(t, parents, actions, i, pair_ids[SHRINK_ISR_KIND, cut, f])
        out[t] = row
        if P[CONTROLLER_FENCING]:
            _kafka_reregister(P, out[t], cut)
        _heal(P, out[t])
        return _emit(t, parents, actions, i, server_ids[HEAL_ID, 0])
    if row[P[PB]] >= P[MAX_PARTITIONS]:
        hits[HIT_PARTITIONS] = 1
        return t
    for k in range(n):
        out[t] = row
        if P[CONTROLLER_FENCING] and row[_server(P, k) + ALIVE]:
            _kafka_expire_session(P, out[t], k)
        for j in range(n):
            out[t][_server(P, j) + P[CUT]] = 1 if j == k else 0
        out[t][P[PB]] += 1
        t = _emit(t, parents, actions, i, server_ids[PARTITION_ID, k])
    return t


@njit(cache=True)
def _kafka_successors(P, row, i, alive, leading, elect_candidates, elect_voters, elect_ids, server_ids, pair_ids,
                      out, parents, actions, hits, t):
    """KafkaModel.actions and effects of one row, from transition t on."""
    n, l = P[N], P[L]
    epoch = _kafka_epoch(P, row)
    live_isr = False
    for k in range(n):
        base = _server(P, k)
        alive[k] = row[base + ALIVE] == 1
        leading[k] = alive[k] and row[base + ROLE] == 1
        live_isr = live_isr or (alive[k] and row[_extra(P, base, IN_ISR)] == 1)
    for e in range(elect_candidates.size):
        c = elect_candidates[e]
        if not alive[c] or leading[c] or not (row[_extra(P, _server(P, c), IN_ISR)] or (P[UNCLEAN] and not live_isr)):
            continue
        voters = elect_voters[e]
        ok = True
        for k in range(n):
            if voters >> k & 1 and not alive[k]:
                ok = False
        if not ok:
            continue
        if epoch + 1 > P[G]:
            hits[HIT_GENERATION] = 1
        elif not (P[PARTITIONED] and _cut_among(P, row, voters)):  # no LeaderAndIsr reaches a cut-off voter
            out[t] = row
            _kafka_elect(P, out[t], c, voters)
            t = _emit(t, parents, actions, i, elect_ids[e])
    for k in range(n):
        base = _server(P, k)
        if not alive[k]:
            if P[PARTITIONED] and _cut(P, row, k):
                continue  # it restarts once the partition heals (it learns the epoch from the controller)
            # The controller sends the current epoch and its live leader, if any.
            leader = 0
            for j in range(n):
                jb = _server(P, j)
                if j != k and alive[j] and row[jb + ROLE] == 1 and row[jb + GEN] == epoch:
                    leader = j + 1
                    break
            out[t] = row
            out[t][base + ALIVE] = 1
            _kafka_become_follower(P, out[t], k, epoch, leader)
            t = _emit(t, parents, actions, i, server_ids[RESTART_ID, k])
            continue
        if leading[k]:
            if row[base + LEN] < l:
                if _kafka_isr_size(P, row, k) >= P[WRITE_MIN_ISR]:  # else NOT_ENOUGH_REPLICAS: no append
                    out[t] = row
                    out[t][base + LOG + row[base + LEN]] = row[base + GEN]
                    out[t][base + LEN] += 1
                    _kafka_advance_hwm(P, out[t], k)
                    t = _emit(t, parents, actions, i, server_ids[WRITE_ID, k])
            else:
                hits[HIT_LOG] = 1
        if _unread(P, row, base):
            out[t] = row
            _read(P, out[t], k)
            t = _emit(t, parents, actions, i, server_ids[READ_ID, k])
        if row[0] < P[MAX_CRASHES]:
            # The log, the epoch, the HW and the ISR stay; the role and the match indexes are lost.
            out[t] = row
            out[t][base + ALIVE] = 0
            _become_follower(P, out[t], base, row[base + GEN])
            out[t][0] += 1
            if P[UNFLUSHED]:  # log_flush=never: the crash is a power failure
                _kafka_power_failure(P, out[t], k)
            t = _emit(t, parents, actions, i, server_ids[CRASH_ID, k])
        else:
            hits[HIT_CRASHES] = 1
    for a in range(n):
        for b in range(n):
            ab = _server(P, a)
            if a != b and leading[a] and row[_extra(P, _server(P, b), IN_ISR)] and row[ab + GEN] == epoch and (
                    not alive[b] or row[_match(P, ab, b)] < row[ab + LEN]) and not (P[PARTITIONED] and _cut(P, row, a)):
                out[t] = row  # maybeShrinkIsr, then maybeIncrementLeaderHW
                out[t][_extra(P, _server(P, b), IN_ISR)] = 0
                out[t][_extra(P, ab, ISR_VIEW)] &= ~(1 << b) & 255
                _kafka_advance_hwm(P, out[t], a)
                t = _emit(t, parents, actions, i, pair_ids[SHRINK_ISR_KIND, a, b])
    for a in range(n):
        for b in range(n):
            fb = _server(P, b)
            if a != b and leading[a] and alive[b] and row[fb + ROLE] == 0 and row[_extra(P, fb, LEADER_OF)] == a + 1 \
                    and not (P[TRUNCATION] == FENCED_EPOCH and row[fb + GEN] != row[_server(P, a) + GEN]) \
                    and not (P[PARTITIONED] and _cut(P, row, a) != _cut(P, row, b)):  # no fetch crosses the cut
                out[t] = row
                _kafka_replicate(P, out[t], a, b)
                t = _emit(t, parents, actions, i, pair_ids[REPLICATE_KIND, a, b])
    if P[LATE_LEADER_AND_ISR]:
        for a in range(n):
            for b in range(n):
                # A late LeaderAndIsr request of the epoch leader a still leads reaches replica b.
                if a != b and leading[a] and alive[b] and row[_server(P, b) + GEN] < row[_server(P, a) + GEN] \
                        and not (P[PARTITIONED] and _cut(P, row, b)):
                    out[t] = row
                    _kafka_receive_leader_and_isr(P, out[t], b, a, row[_server(P, a) + GEN])
                    t = _emit(t, parents, actions, i, pair_ids[LEADER_AND_ISR_KIND, a, b])
    if P[UNFLUSHED]:
        for k in range(n):
            base = _server(P, k)
            if alive[k] and row[_extra(P, base, TRUNCATING)] >> 1 < row[base + LEN]:
                if row[0] >= P[MAX_CRASHES]:  # no power failure left for it to matter to
                    hits[HIT_CRASHES] = 1
                    continue
                out[t] = row  # the OS writes the page cache back: the recovery point is the LEO
                out[t][_extra(P, base, TRUNCATING)] = (row[_extra(P, base, TRUNCATING)] & 1) | row[base + LEN] << 1
                t = _emit(t, parents, actions, i, server_ids[FLUSH_ID, k])
    if P[PARTITIONED]:
        t = _kafka_partition_successors(P, row, i, server_ids, pair_ids, out, parents, actions, hits, t)
    return t


# ------------------------------------------------------------- canonical form
@njit(cache=True)
def _encode_entries(P, row, at, buf, p):
    """A set of (index, generation) entries as model.encoding._reads writes it; the new length."""
    count_at = p
    p += 1
    count = 0
    for index in range(1, P[L] + 1):
        for generation in range(P[G] + 1):
            if row[_entry_slot(P, at, index, generation)]:
                buf[p] = index
                buf[p + 1] = generation
                p += 2
                count += 1
    buf[count_at] = count
    return p


@njit(cache=True, inline="always")
def _kind(P, k):
    """BookKeeperModel.encode's kind byte: 0 a bookie, 1 the writer, 2 the recovery client."""
    return 0 if k < P[BOOKIES] else k - P[BOOKIES] + 1


@njit(cache=True)
def _encode(P, row, order, buf):
    """model.encoding.encode(state, order) into buf (with a ZAB state's keys and extras); the length."""
    n = P[N]
    buf[0] = n
    buf[1] = 2 if P[SYSTEM] == KAFKA else P[ASYNC]  # kafka.encode marks its states with 2
    buf[2] = row[0]
    p = 3
    bookkeeper = P[SYSTEM] == BOOKKEEPER
    for j in range(n):
        base = _server(P, order[j])
        if bookkeeper:  # BookKeeperModel.encode's keys: the kind (bookie, writer, recovery), a bookie's bits
            kind = _kind(P, order[j])
            buf[p] = kind
            p += 1
            if kind == 0:
                for field in range(3):
                    buf[p + field] = row[_extra(P, base, FENCED + field)]
                p += 3
        if P[SYSTEM] == KAFKA:  # kafka._server_bytes: the ISR and truncating bytes come before the length
            for f in range(4):
                buf[p + f] = row[base + f]
            buf[p + 4] = row[_extra(P, base, IN_ISR)]
            buf[p + 5] = row[_extra(P, base, TRUNCATING)]
            buf[p + 6] = row[base + LEN]
            p += 7
        else:
            for f in range(5):
                buf[p + f] = row[base + f]
            p += 5
        for e in range(row[base + LEN]):
            buf[p] = row[base + LOG + e]
            p += 1
        if P[PARTITIONED] and P[SYSTEM] == KAFKA:  # PartitionedKafkaModel._keys: the cut bit closes the key
            buf[p] = row[base + P[CUT]]
            p += 1
        if P[SYSTEM] == KAFKA:  # the leader it fetches from, renamed
            leader = row[_extra(P, base, LEADER_OF)]
            renamed = 0
            for j2 in range(n):
                if leader and order[j2] == leader - 1:
                    renamed = j2 + 1
            buf[p] = renamed
            p += 1
        if P[SYSTEM] == ZAB:  # ZabModel._keys: durable, established, epoch
            buf[p] = row[_extra(P, base, DURABLE)]
            buf[p + 1] = row[_extra(P, base, SYNCED)] >> 7
            buf[p + 2] = row[_extra(P, base, EPOCH)]
            p += 3
        if P[PARTITIONED] and P[SYSTEM] != KAFKA:  # PartitionedRaftModel._keys, PartitionedZabModel._keys: the
            # cut bit closes the key
            buf[p] = row[base + P[CUT]]
            p += 1
        if row[base + ROLE] == 1 and (not bookkeeper or order[j] == P[BOOKIES]):  # the recovery has no match
            for j2 in range(n):
                buf[p] = row[_match(P, base, order[j2])]
                p += 1
            if P[SYSTEM] == KAFKA:  # kafka.encode: the leader's own copy of the ISR, renamed
                for j2 in range(n):
                    buf[p] = row[_extra(P, base, ISR_VIEW)] >> order[j2] & 1
                    p += 1
    p = _encode_entries(P, row, P[RB], buf, p)
    if P[ASYNC]:
        for ja in range(n):
            for jb in range(n):
                ch = _channel(P, order[ja], order[jb])
                buf[p] = row[ch]
                p += 1
                for k in range(row[ch]):
                    m = ch + 1 + k * P[MW]
                    width = 6 + row[m + 5] if row[m] == APPEND else 4
                    for e in range(width):
                        buf[p + e] = row[m + e]
                    p += width
    if P[SYSTEM] == ZAB:  # ZabModel._extra: the synced sets renamed, then acked
        for j in range(n):
            synced = row[_extra(P, _server(P, order[j]), SYNCED)]
            mask = 0
            for j2 in range(n):
                if synced >> order[j2] & 1:
                    mask |= 1 << j2
            buf[p] = mask
            p += 1
    if P[SYSTEM] != RAFT:
        p = _encode_entries(P, row, P[AB], buf, p)
    if bookkeeper and row[P[EB]]:  # BookKeeperModel._extra: the ensemble changes (never under symmetry)
        for j in range(2 + row[P[EB]] * (1 + P[ENSEMBLE_SIZE])):
            buf[p] = row[P[EB] + j]
            p += 1
    if P[PARTITIONED]:  # the partitions made close the encoding
        buf[p] = row[P[PB]]
        p += 1
    return p


@njit(cache=True)
def _key_compare(P, row, a, b):
    """Compare two servers' local parts (encoding._local) as Python compares their bytes."""
    ab, bb = _server(P, a), _server(P, b)
    if P[SYSTEM] == BOOKKEEPER:  # the kind first (only bookies are interchangeable), then a bookie's bits
        ka, kb = _kind(P, a), _kind(P, b)
        if ka != kb:
            return -1 if ka < kb else 1
        for field in range(3):
            x, y = row[_extra(P, ab, field)], row[_extra(P, bb, field)]
            if x != y:
                return -1 if x < y else 1
    if P[SYSTEM] == KAFKA:  # kafka._server_bytes' order: the ISR and truncating bytes before the log
        for f in range(4):
            x, y = row[ab + f], row[bb + f]
            if x != y:
                return -1 if x < y else 1
        for field in (IN_ISR, TRUNCATING):
            x, y = row[_extra(P, ab, field)], row[_extra(P, bb, field)]
            if x != y:
                return -1 if x < y else 1
    for f in range(5 + P[L]):  # unused log slots are zero, and the lengths are compared first
        x, y = row[ab + f], row[bb + f]
        if x != y:
            return -1 if x < y else 1
    if P[SYSTEM] == ZAB:  # then ZabModel._keys' extras: durable, established, epoch
        for field, shift in ((DURABLE, 0), (SYNCED, 7), (EPOCH, 0)):
            x, y = row[_extra(P, ab, field)] >> shift, row[_extra(P, bb, field)] >> shift
            if x != y:
                return -1 if x < y else 1
    if P[PARTITIONED]:  # the cut bit, last of the key
        x, y = row[ab + P[CUT]], row[bb + P[CUT]]
        if x != y:
            return -1 if x < y else 1
    return 0


@njit(cache=True)
def fingerprint_row(P, row, perms, scratch, order, buf, best, h, v, m):
    """model.encoding.fingerprint(state, symmetry) of one packed row."""
    n = P[N]
    for k in range(n):
        order[k] = k
    if not P[SYMMETRY]:
        return blake2b64(buf, _encode(P, row, order, buf), h, v, m)
    # Servers sorted (stably) by their local parts; only ties are permuted.
    for i in range(1, n):
        k = order[i]
        j = i - 1
        while j >= 0 and _key_compare(P, row, order[j], k) > 0:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = k
    ties = False
    for i in range(1, n):
        if _key_compare(P, row, order[i - 1], order[i]) == 0:
            ties = True
            break
    if not ties:
        return blake2b64(buf, _encode(P, row, order, buf), h, v, m)
    length = -1
    for p in range(P[NPERM]):
        perm = perms[p]
        same = True
        for j in range(n):
            if _key_compare(P, row, perm[j], order[j]) != 0:
                same = False
                break
        if not same:
            continue
        size = _encode(P, row, perm, scratch)
        smaller = length < 0
        if not smaller:
            for i in range(size):
                if scratch[i] != best[i]:
                    smaller = scratch[i] < best[i]
                    break
        if smaller:
            length = size
            for i in range(size):
                best[i] = scratch[i]
    return blake2b64(best, length, h, v, m)


# ------------------------------------- partitions (model/partition.py, model/zab_partition.py)
@njit(cache=True, inline="always")
def _cut(P, row, k):
    """Server k's cut bit (1: the partition isolates it)."""
    return row[_server(P, k) + P[CUT]]


@njit(cache=True)
def _cut_among(P, row, servers):
    """Some server of the bit set `servers` is cut off."""
    for k in range(P[N]):
        if servers >> k & 1 and _cut(P, row, k):
            return True
    return False


@njit(cache=True)
def _step_down(P, row):
    """check_quorum (PartitionedRaftModel._step_down, PartitionedZabModel._lose_quorum): every live
    leader that reaches fewer than the model's quorum of live servers (itself included) on its side of
    the cut becomes a follower of its generation; a ZAB leader forgets whom it synchronised."""
    n = P[N]
    for k in range(n):
        base = _server(P, k)
        if row[base + ALIVE] and row[base + ROLE] == 1:
            reached = 0
            for j in range(n):
                if row[_server(P, j) + ALIVE] and _cut(P, row, j) == _cut(P, row, k):
                    reached += 1
            if reached < P[ELECTION_QUORUM]:
                _become_follower(P, row, base, row[base + GEN])
                if P[SYSTEM] == ZAB:
                    row[_extra(P, base, SYNCED)] = 0


@njit(cache=True)
def _hears_leader(P, row, k):
    """PartitionedRaftModel.hears_leader: a live leader other than k on k's side of the cut, of a
    generation k accepts."""
    kb = _server(P, k)
    for j in range(P[N]):
        jb = _server(P, j)
        if j != k and row[jb + ALIVE] and row[jb + ROLE] == 1 and _cut(P, row, j) == _cut(P, row, k) \
                and row[jb + GEN] >= row[kb + GEN]:
            return True
    return False


@njit(cache=True)
def _election_refused(P, row, c, voters):
    """What the cut and the timing rules add to an election's guard (PartitionedRaftModel.
    _election_refusal; PartitionedZabModel.guard_elect has the cut only)."""
    for v in range(P[N]):
        if voters >> v & 1 and _cut(P, row, v) != _cut(P, row, c):
            return True
    if P[SYSTEM] != RAFT:
        return False
    if P[LEASE_READS] and _hears_leader(P, row, c):
        return True  # c's election timer does not fire while it hears from a leader
    if P[CHECK_QUORUM]:
        for v in range(P[N]):
            if v != c and voters >> v & 1:
                vb = _server(P, v)
                if (row[vb + ALIVE] and row[vb + ROLE] == 1) or _hears_leader(P, row, v):
                    return True  # no vote within a leader's lease
    return False


@njit(cache=True)
def _partition(P, row, k):
    """effect_partition: k is cut off from the others; check_quorum's step-down follows."""
    for j in range(P[N]):
        row[_server(P, j) + P[CUT]] = 1 if j == k else 0
    row[P[PB]] += 1
    if P[CHECK_QUORUM]:
        _step_down(P, row)


@njit(cache=True)
def _heal(P, row):
    for j in range(P[N]):
        row[_server(P, j) + P[CUT]] = 0


@njit(cache=True)
def _partition_successors(P, row, i, server_ids, out, parents, actions, hits, t):
    """The partitioned models' last actions: heal a cut network, else cut off each server in turn
    (none, and the bound hit, once max_partitions cuts are made)."""
    whole = True
    for k in range(P[N]):
        if _cut(P, row, k):
            whole = False
    if not whole:
        out[t] = row
        _heal(P, out[t])
        return _emit(t, parents, actions, i, server_ids[HEAL_ID, 0])
    if row[P[PB]] >= P[MAX_PARTITIONS]:
        hits[HIT_PARTITIONS] = 1
        return t
    for k in range(P[N]):
        out[t] = row
        _partition(P, out[t], k)
        t = _emit(t, parents, actions, i, server_ids[PARTITION_ID, k])
    return t


# --------------------------------------------------------------- expansion
@njit(cache=True, inline="always")
def _emit(t, parents, actions, parent, action_id):
    parents[t] = parent
    actions[t] = action_id
    return t + 1


# Who may vote for whom (P[LONGEST_LOG], ZabModel.freshness): anyone, Raft 5.4.1's up-to-date
# rule (last generation, then length), or ZAB's (currentEpoch, then last zxid).
ANY_FRESHNESS, RAFT_FRESHNESS, ZAB_FRESHNESS, VARIANT_VOTE = range(4)


@njit(cache=True)
def _fresh_enough(P, row, c, v, rule):
    """The candidate c's history is at least as up to date as voter v's, under `rule`."""
    if rule == VARIANT_VOTE:  # a variant's vote rule (the candidate's own vote is not asked)
        cb, vb = _server(P, c), _server(P, v)
        return c == v or _rule(P, GRANTS_VOTE_AT, _log_code(P, row, cb) * _logs(P) + _log_code(P, row, vb)) != 0
    if rule == ANY_FRESHNESS:
        return True
    cb, vb = _server(P, c), _server(P, v)
    if rule == ZAB_FRESHNESS and row[_extra(P, cb, EPOCH)] != row[_extra(P, vb, EPOCH)]:
        return row[_extra(P, cb, EPOCH)] > row[_extra(P, vb, EPOCH)]
    c_length, v_length = row[cb + LEN], row[vb + LEN]
    c_last = row[cb + LOG + c_length - 1] if c_length else 0
    v_last = row[vb + LOG + v_length - 1] if v_length else 0
    return c_last > v_last or (c_last == v_last and c_length >= v_length)


@njit(cache=True)
def _elections(P, row, i, rule, emit, alive, leading, elect_candidates, elect_voters, elect_ids, out, parents,
               actions, hits, t):
    """The elect actions (Model.actions' first loop) under `rule`; only bounds are noted unless `emit`."""
    for e in range(elect_candidates.size):
        c = elect_candidates[e]
        if not alive[c] or leading[c]:
            continue
        voters = elect_voters[e]
        ok = True
        top = np.int64(0)
        for k in range(P[N]):
            if voters >> k & 1:
                if not alive[k]:
                    ok = False
                    break
                top = max(top, np.int64(row[_server(P, k) + GEN]))
        # Votes are asked once every voter is up, in the voters' order (Model.guard_elect).
        for k in range(P[N]):
            if ok and voters >> k & 1 and not _fresh_enough(P, row, c, k, rule):
                ok = False
        if not ok:
            continue
        if top + 1 > P[G]:
            hits[HIT_GENERATION] = 1
        elif P[NOOP] and row[_server(P, c) + LEN] >= P[L]:
            hits[HIT_LOG] = 1
        elif emit and not (P[PARTITIONED] and _election_refused(P, row, c, voters)):
            out[t] = row
            _elect(P, out[t], c, voters)
            if P[SYSTEM] == ZAB:
                _zab_elect(P, out[t], c, voters)
            t = _emit(t, parents, actions, i, elect_ids[e])
    return t


@njit(cache=True)
def _raft_successors(P, row, i, alive, leading, established, elect_candidates, elect_voters, elect_ids, server_ids,
                     pair_ids, out, parents, actions, hits, t):
    """Model.actions and effects (ZabModel's when P[SYSTEM] is ZAB) of one row, from transition t on."""
    n, l = P[N], P[L]
    zab = P[SYSTEM] == ZAB
    rule = VARIANT_VOTE if P[GRANTS_VOTE_AT] else RAFT_FRESHNESS if P[LONGEST_LOG] else ANY_FRESHNESS
    for k in range(n):
        base = _server(P, k)
        alive[k] = row[base + ALIVE] == 1
        leading[k] = alive[k] and row[base + ROLE] == 1
        established[k] = not zab or row[_extra(P, base, SYNCED)] & ESTABLISHED
    if P[ZAB_ELECTION]:
        # ZAB's election first; the raft model's loop then runs for its bounds only (as
        # ZabModel.actions runs Model.actions and drops its elect actions).
        t = _elections(P, row, i, ZAB_FRESHNESS, True, alive, leading, elect_candidates, elect_voters, elect_ids,
                       out, parents, actions, hits, t)
    t = _elections(P, row, i, rule, not P[ZAB_ELECTION], alive, leading, elect_candidates, elect_voters,
                   elect_ids, out, parents, actions, hits, t)
    # per server: restart, or write, read, crash
    for k in range(n):
        base = _server(P, k)
        if not alive[k]:
            out[t] = row
            _restart(P, out[t], k)
            if zab:
                _zab_restart(P, out[t], k)
            t = _emit(t, parents, actions, i, server_ids[RESTART_ID, k])
            continue
        length = row[base + LEN]
        if leading[k]:
            if length >= l:
                hits[HIT_LOG] = 1
            elif established[k]:  # a prospective ZAB leader does not write
                out[t] = row
                _write(P, out[t], k)
                if zab:
                    _zab_logged(P, out[t], k)
                t = _emit(t, parents, actions, i, server_ids[WRITE_ID, k])
        if _unread(P, row, base):
            out[t] = row
            _read(P, out[t], k)
            if zab:
                _zab_acknowledge(P, out[t])
            t = _emit(t, parents, actions, i, server_ids[READ_ID, k])
        if row[0] < P[MAX_CRASHES]:
            out[t] = row
            _crash(P, out[t], k)
            if zab:
                _zab_crash(P, out[t], k)
            if P[CHECK_QUORUM]:
                _step_down(P, out[t])
            t = _emit(t, parents, actions, i, server_ids[CRASH_ID, k])
        else:
            hits[HIT_CRASHES] = 1
    # the network
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            if P[ASYNC]:
                ch = _channel(P, a, b)
                if leading[a]:
                    if row[ch] < P[CAP]:
                        out[t] = row
                        _send(P, out[t], a, b)
                        t = _emit(t, parents, actions, i, pair_ids[SEND_KIND, a, b])
                    else:
                        hits[HIT_CAPACITY] = 1
                if row[ch]:
                    if alive[b]:
                        out[t] = row
                        _deliver(P, row, out[t], a, b)
                        t = _emit(t, parents, actions, i, pair_ids[DELIVER_KIND, a, b])
                    out[t] = row
                    _pop(P, out[t], a, b)
                    t = _emit(t, parents, actions, i, pair_ids[DROP_KIND, a, b])
            elif leading[a] and alive[b] and established[a] and (
                    not zab or row[_extra(P, _server(P, a), SYNCED)] >> b & 1) and (
                    not P[PARTITIONED] or _cut(P, row, a) == _cut(P, row, b)):
                out[t] = row
                _replicate(P, row, out[t], a, b)
                if zab:
                    _zab_logged(P, out[t], b)
                t = _emit(t, parents, actions, i, pair_ids[REPLICATE_KIND, a, b])
    if zab:  # ZAB's synchronisation, then persistence
        for a in range(n):
            for b in range(n):
                if a != b and leading[a] and alive[b] and not row[_extra(P, _server(P, a), SYNCED)] >> b & 1 and (
                        not P[PARTITIONED] or _cut(P, row, a) == _cut(P, row, b)):
                    out[t] = row
                    _zab_sync(P, row, out[t], a, b)
                    t = _emit(t, parents, actions, i, pair_ids[SYNC_KIND, a, b])
        if P[ACK_BEFORE_PERSIST]:
            for k in range(n):
                base = _server(P, k)
                if alive[k] and row[_extra(P, base, DURABLE)] < row[base + LEN]:
                    out[t] = row
                    _zab_persist(P, out[t], k)
                    t = _emit(t, parents, actions, i, server_ids[PERSIST_ID, k])
    if P[PARTITIONED]:
        t = _partition_successors(P, row, i, server_ids, out, parents, actions, hits, t)
    return t


@njit(cache=True)
def expand(P, rows, elect_candidates, elect_voters, elect_ids, server_ids, pair_ids, perms, encoding_size,
           out, parents, actions, fps, hits):
    """Every transition out of every row, in the model's action order (Model.actions, ZabModel.actions,
    BookKeeperModel.actions); the number of transitions.

    server_ids[kind, k] for the kinds WRITE_ID..ADD_ID; pair_ids[kind, a, b] for kind replicate, send,
    deliver, drop, sync; -1 for an action the model does not have. `out` must hold rows x the most
    transitions one state can have.
    """
    n = P[N]
    order = np.zeros(n, dtype=np.int64)
    buf = np.zeros(encoding_size, dtype=np.uint8)
    scratch = np.zeros(encoding_size, dtype=np.uint8)
    best = np.zeros(encoding_size, dtype=np.uint8)
    h = np.zeros(8, dtype=np.uint64)
    v = np.zeros(16, dtype=np.uint64)
    m = np.zeros(16, dtype=np.uint64)
    alive = np.zeros(n, dtype=np.bool_)
    leading = np.zeros(n, dtype=np.bool_)
    established = np.zeros(n, dtype=np.bool_)
    t = 0
    for i in range(rows.shape[0]):
        row = rows[i]
        first = t
        if P[SYSTEM] == BOOKKEEPER:
            t = _bookkeeper_successors(P, row, i, server_ids, out, parents, actions, hits, t)
        elif P[SYSTEM] == KAFKA:
            t = _kafka_successors(P, row, i, alive, leading, elect_candidates, elect_voters, elect_ids, server_ids,
                                  pair_ids, out, parents, actions, hits, t)
        else:
            t = _raft_successors(P, row, i, alive, leading, established, elect_candidates, elect_voters, elect_ids,
                                 server_ids, pair_ids, out, parents, actions, hits, t)
        for s in range(first, t):
            fps[s] = fingerprint_row(P, out[s], perms, scratch, order, buf, best, h, v, m)
    return t


@njit(cache=True)
def fingerprints(P, rows, perms, encoding_size, fps):
    n = P[N]
    order = np.zeros(n, dtype=np.int64)
    buf = np.zeros(encoding_size, dtype=np.uint8)
    scratch = np.zeros(encoding_size, dtype=np.uint8)
    best = np.zeros(encoding_size, dtype=np.uint8)
    h = np.zeros(8, dtype=np.uint64)
    v = np.zeros(16, dtype=np.uint64)
    m = np.zeros(16, dtype=np.uint64)
    for i in range(rows.shape[0]):
        fps[i] = fingerprint_row(P, rows[i], perms, scratch, order, buf, best, h, v, m)
