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
            raise ValueError(f"operation {self.id!r} completed at {self.completed} before it was invoked at {self.invoked}")

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


def _search(ops: list[Op], initial, deadline: float, counter: list[int]):
    """One order of linearizing `ops` (a list of Ops), or None when there is none. Raises _OutOfTime."""
    # Indeterminate reads tell nothing; an indeterminate write or cas answers at infinity.
    ops = [op for op in ops if not (op.completed is None and op.f == "read")]
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
                       reason=f"undecided after {budget_s:g} s ({counter[0]:,} search steps, {len(ops)} operations)")
    if order is not None:
        return Verdict(OK, seconds=time.monotonic() - began, explored=counter[0], linearization=tuple(order))
    witness = list(ops)
    # Reads first (the common explanation is a few writes and the read that contradicts them),
    # then writes, the latest first.
    candidates = [op for op in reversed(witness) if op.f == "read"] + [op for op in reversed(witness) if op.f != "read"]
    try:
        for op in candidates:
            if not _removable(op, witness):
                continue
            smaller = [other for other in witness if other is not op]
            if _search(smaller, initial, deadline, counter) is None:
                witness = smaller
    except _OutOfTime:
        pass  # what is left is still a non-linearizable sub-history
    return Verdict(VIOLATION, witness=tuple(witness), seconds=time.monotonic() - began, explored=counter[0])
