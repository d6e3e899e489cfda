"""Linearizability of one register's history: Wing & Gong's search with Lowe's memoisation.

A history is a list of `Op`s on one register (one key of a key-value store; check each key on its
own, a register per key, as Knossos's `independent` does). An operation either completed (`completed`
is the time its answer came) or is indeterminate (`completed` None: a timeout, Maelstrom's error 11,
no answer at all): it may or may not have taken effect, at any moment after it was invoked. The
history is linearizable when every completed operation, and any subset of the indeterminate ones,
can be put in one order that respects real time (an operation answered before another was invoked
comes first) and in which each operation does what a single register would do.

The caller leaves out the operations that definitely failed (Maelstrom's 22, precondition failed,
and any other definite error: they did not change the register), except a read answered 20 (key
does not exist), which is a read of `ABSENT`.

The search (Wing & Gong 1993; Lowe 2017, as porcupine and Knossos's `wgl` do it): walk the calls
and answers in time order; at a call, try to linearize that operation now (the register allows it),
remove it and start again from the first event; at an answer of an operation not yet linearized,
backtrack. A pair (operations linearized, register value) seen before is not searched again. The
search is exponential at worst; `check_register` stops after `budget_s` seconds and says it could
not decide, never guessing.

A violation comes with a witness: a sub-history that is itself not linearizable, made smaller by
removing operations whose removal cannot make a linearizable history unlinearizable (a read; a
write or cas whose value no remaining operation observes), so the witness holds whatever the
removed operations did. Values must be hashable (Maelstrom's are numbers).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


class _Absent:
    """The value of a key that has not been written."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self):
        return "ABSENT"


ABSENT = _Absent()

OK, VIOLATION, UNDECIDED = "ok", "violation", "undecided"


@dataclass(frozen=True)
class Op:
    """One operation on the register.

    `f` is "read", "write" or "cas". `value`: for a read the value it returned (`ABSENT`: the key did
    not exist); for a write the value written; for a cas the pair (from, to). `create`: a cas with
    create_if_not_exists, which also succeeds on an absent key. `invoked` and `completed` are times
    on one clock; `completed` None: indeterminate. `id`: the caller's handle, returned in witnesses.
    """

    f: str
    value: Any
    invoked: float
    completed: float | None = None
    create: bool = False
    id: Any = None

    def __post_init__(self):
        if self.f not in ("read", "write", "cas"):
            raise ValueError(f"Op.f must be read, write or cas, not {self.f!r}")
        if self.f == "cas" and not (isinstance(self.value, tuple) and len(self.value) == 2):
            raise ValueError(f"a cas's value must be the pair (from, to), not {self.value!r}")
        if self.completed is not None and self.completed < self.invoked:
            raise ValueError(f"operation {self.id!r} completed at {self.completed} "
                             f"before it was invoked at {self.invoked}")

    def step(self, state):
        """(allowed, next state) of this operation on a register holding `state`."""
        if self.f == "read":
            return state == self.value, state
        if self.f == "write":
            return True, self.value
        source, target = self.value
        return (state == source or (self.create and state is ABSENT)), target

    def writes(self):
        return self.value if self.f == "write" else self.value[1] if self.f == "cas" else ABSENT

    def observes(self):
        """The values this operation sees the register hold (a read's, a cas's from)."""
        if self.f == "read":
            return {self.value}
        if self.f == "cas":
            return {self.value[0]} | ({ABSENT} if self.create else set())
        return set()


@dataclass
class Verdict:
    """`status`: OK, VIOLATION or UNDECIDED. `witness`: for a violation, a non-linearizable
    sub-history (in invocation order). `seconds`: time spent. `reason`: why undecided."""

    status: str
    witness: tuple[Op, ...] = ()
    seconds: float = 0.0
    reason: str = ""
    explored: int = 0  # search steps taken
    linearization: tuple[Op, ...] = field(default=(), repr=False)  # for OK: one order that works

    @property
    def ok(self) -> bool:
        return self.status == OK


class _OutOfTime(Exception):
    pass


class _Event:
    __slots__ = ("op", "index", "is_call", "match", "prev", "next")

    def __init__(self, op, index, is_call):
        self.op, self.index, self.is_call = op, index, is_call
        self.match = self.prev = self.next = None


def _without_silent_indeterminate(ops: list[Op]) -> list[Op]:
    """`ops` less the indeterminate operations that cannot matter: reads, and writes or cas whose
    value no other operation observes (a history is linearizable with them exactly when it is
    without them: they may never have taken effect, and `_removable` says the converse). Each
    would double the orders to search, for nothing."""
    ops = [op for op in ops if not (op.completed is None and op.f == "read")]
    seen = Counter(value for op in ops for value in op.observes())
    dropped, waiting = set(), [k for k, op in enumerate(ops) if op.completed is None]
    while waiting:
        k = waiting.pop()
        op = ops[k]
        if k in dropped or seen[op.writes()] - (op.writes() in op.observes()) > 0:
            continue
        dropped.add(k)
        seen.subtract(op.observes())  # a cas's from: the write of it may be silent now
        waiting.extend(j for j, other in enumerate(ops)
                       if j not in dropped and other.completed is None and other.writes() in op.observes())
    return [op for k, op in enumerate(ops) if k not in dropped]


def _search(ops: list[Op], initial, deadline: float, counter: list[int]):
    """One order of linearizing `ops` (a list of Ops), or None when there is none. Raises _OutOfTime."""
    # An indeterminate write or cas answers at infinity.
    ops = _without_silent_indeterminate(ops)
    if not ops:
        return []
    events = []
    for k, op in enumerate(ops):
        call, answer = _Event(op, k, True), _Event(op, k, False)
        call.match, answer.match = answer, call
        # At equal times a call sorts before an answer: such operations count as concurrent.
        events.append(((op.invoked, 0), call))
        events.append(((float("inf") if op.completed is None else op.completed, 1), answer))
    events.sort(key=lambda e: e[0])
    head = _Event(None, -1, False)
    previous = head
    for _, event in events:
        previous.next, event.prev = event, previous
        previous = event

    def lift(call):
        call.prev.next = call.next
        call.next.prev = call.prev
        answer = call.match
        answer.prev.next = answer.next
        if answer.next is not None:
            answer.next.prev = answer.prev

    def unlift(call):
        answer = call.match
        answer.prev.next = answer
        if answer.next is not None:
            answer.next.prev = answer
        call.prev.next = call
        call.next.prev = call

    cache = set()
    stack = []  # (call event, state before it)
    linearized, state = 0, initial
    entry = head.next
    while head.next is not None:
        counter[0] += 1
        if counter[0] % 1024 == 0 and time.monotonic() > deadline:
            raise _OutOfTime()
        if entry.is_call:
            allowed, after = entry.op.step(state)
            if allowed:
                marked = linearized | (1 << entry.index)
                if (marked, after) not in cache:
                    cache.add((marked, after))
                    stack.append((entry, state))
                    linearized, state = marked, after
                    lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        elif entry.op.completed is None:
            # Every completed operation is linearized (its answer came earlier): the indeterminate
            # ones left may never have taken effect.
            break
        else:
            if not stack:
                return None
            entry, state = stack.pop()
            linearized &= ~(1 << entry.index)
            unlift(entry)
            entry = entry.next
    return [call.op for call, _ in stack]


def _removable(op: Op, ops: list[Op]) -> bool:
    """Whether removing `op` keeps any linearizable history linearizable: a read, or a write or cas
    whose value no other operation observes. (In a linearization, the operations between such a
    write and the next change of value observe nothing, so they fit without it as well.)"""
    if op.f == "read":
        return True
    written = op.writes()
    return not any(written in other.observes() for other in ops if other is not op)


def _without(ops: list[Op], chosen: list[Op]) -> list[Op] | None:
    """`ops` without `chosen`, when some order of removing them one at a time removes only
    `_removable` operations each time; else None."""
    left, pending = list(ops), list(chosen)
    while pending:
        op = next((op for op in pending if _removable(op, left)), None)
        if op is None:
            return None
        pending.remove(op)
        left.remove(op)
    return left


def check_register(history, budget_s: float = 10.0, initial=ABSENT) -> Verdict:
    """Whether `history` (Ops on one register starting at `initial`) is linearizable: OK,
    VIOLATION with a small non-linearizable sub-history as witness, or UNDECIDED when the search
    (and for a violation, the witness's shrinking, which stops early and keeps what it has) did not
    finish within `budget_s` seconds."""
    began = time.monotonic()
    deadline = began + budget_s
    counter = [0]
    ops = sorted(history, key=lambda op: op.invoked)
    try:
        order = _search(ops, initial, deadline, counter)
    except _OutOfTime:
        return Verdict(UNDECIDED, seconds=time.monotonic() - began, explored=counter[0],
                       reason=f"undecided after {budget_s:.3g} s ({counter[0]:,} search steps, {len(ops)} operations)")
    if order is not None:
        return Verdict(OK, seconds=time.monotonic() - began, explored=counter[0], linearization=tuple(order))
    witness = list(ops)
    # Chunks of operations, halved down to one at a time (Zeller's ddmin): a violation is mostly a few
    # operations close in time, and each try is a whole search.
    chunk = len(witness) // 2
    try:
        while chunk >= 1:
            start, removed = 0, False
            while start < len(witness):
                chosen = witness[start:start + chunk]
                smaller = _without(witness, chosen)
                if smaller is not None and _search(smaller, initial, deadline, counter) is None:
                    witness, removed = smaller, True
                else:
                    start += chunk
            if not removed:
                chunk //= 2
    except _OutOfTime:
        pass  # what is left is still a non-linearizable sub-history
    return Verdict(VIOLATION, witness=tuple(witness), seconds=time.monotonic() - began, explored=counter[0])
