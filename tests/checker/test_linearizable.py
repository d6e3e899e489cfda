"""checker/linearizable: tables of small register histories at the boundaries that must pass and
must fail, and a property test against a brute-force search over every order of tiny histories."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, strategies as st

from hwm.checker.linearizable import ABSENT, OK, UNDECIDED, VIOLATION, Op, check_register


def r(value, invoked, completed):
    return Op("read", value, invoked, completed)


def w(value, invoked, completed=None):
    return Op("write", value, invoked, completed)


def cas(source, target, invoked, completed=None, create=False):
    return Op("cas", (source, target), invoked, completed, create=create)


LINEARIZABLE = {
    "empty": [],
    "read of an absent key": [r(ABSENT, 0, 1)],
    "write then read": [w(1, 0, 1), r(1, 2, 3)],
    "a read concurrent with a write sees the old value": [w(1, 0, 1), w(2, 2, 5), r(1, 3, 4)],
    "a read concurrent with a write sees the new value": [w(1, 0, 1), w(2, 2, 5), r(2, 3, 4)],
    "a read concurrent with a write sees absent": [w(1, 2, 5), r(ABSENT, 3, 4)],
    "two concurrent reads see the write in either order": [w(1, 0, 1), w(2, 2, 9), r(2, 3, 4), r(2, 5, 6)],
    "answer and call at the same time count as concurrent": [w(1, 0, 2), r(ABSENT, 2, 3)],
    "cas succeeds": [w(1, 0, 1), cas(1, 2, 2, 3), r(2, 4, 5)],
    "cas with create on an absent key": [cas(7, 2, 0, 1, create=True), r(2, 2, 3)],
    "indeterminate write that later shows up": [w(1, 0, None), r(1, 5, 6)],
    "indeterminate write that never shows up": [w(1, 0, None), r(ABSENT, 5, 6), r(ABSENT, 7, 8)],
    "indeterminate write shows up late, after other reads": [w(1, 0, None), r(ABSENT, 5, 6), r(1, 7, 8)],
    "indeterminate cas that took effect": [w(1, 0, 1), cas(1, 2, 2, None), r(2, 9, 10)],
    "an indeterminate read says nothing": [w(1, 0, 1), r(5, 2, None)],
    "write, overwrite, read the newest": [w(1, 0, 1), w(2, 2, 3), r(2, 4, 5)],
}

NOT_LINEARIZABLE = {
    "stale read after a completed write": [w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)],
    "read absent after a completed write": [w(1, 0, 1), r(ABSENT, 2, 3)],
    "read of a value never written": [r(3, 0, 1)],
    "cas succeeds from a value the key never held": [w(1, 0, 1), cas(2, 3, 2, 3)],
    "cas without create succeeds on an absent key": [cas(7, 2, 0, 1)],
    "indeterminate write seen, then unseen": [w(1, 0, None), r(1, 2, 3), r(ABSENT, 4, 5)],
    "a read before the indeterminate write was invoked sees it": [r(1, 0, 1), w(1, 2, None)],
    "two reads disagree on the order of two writes": [w(1, 0, 9), w(2, 0, 9), r(1, 1, 2), r(2, 3, 4), r(1, 5, 6)],
    "read after a successful cas sees the old value": [w(1, 0, 1), cas(1, 2, 2, 3), r(1, 4, 5)],
}


@pytest.mark.parametrize("name", LINEARIZABLE)
def test_linearizable(name):
    verdict = check_register(LINEARIZABLE[name], budget_s=5)
    assert verdict.status == OK, name
    assert brute_force(LINEARIZABLE[name])


@pytest.mark.parametrize("name", NOT_LINEARIZABLE)
def test_not_linearizable(name):
    history = NOT_LINEARIZABLE[name]
    verdict = check_register(history, budget_s=5)
    assert verdict.status == VIOLATION, name
    assert not brute_force(history)
    assert set(verdict.witness) <= set(history)
    assert not brute_force(list(verdict.witness)), "the witness is itself not linearizable"


def test_witness_keeps_the_writes_the_stale_read_contradicts():
    unrelated = [w(10, 20, 21), r(10, 22, 23), r(10, 24, 25)]
    history = [w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)] + unrelated
    verdict = check_register(history, budget_s=5)
    assert verdict.status == VIOLATION
    assert list(verdict.witness) == [w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)]


def test_witness_keeps_a_write_whose_value_a_kept_operation_observes():
    # Without w(1) the read of 1 alone would be a different, misleading explanation.
    history = [w(1, 0, 1), r(1, 2, 3), w(2, 4, 5), r(1, 6, 7)]
    verdict = check_register(history, budget_s=5)
    assert verdict.status == VIOLATION
    assert w(1, 0, 1) in verdict.witness and r(1, 6, 7) in verdict.witness


def test_undecided_is_reported_not_guessed():
    history = [w(k, 0, None) for k in range(18)] + [r(k, 1 + 2 * k, 2 + 2 * k) for k in range(18)] + [r(99, 100, 101)]
    verdict = check_register(history, budget_s=0.05)
    assert verdict.status == UNDECIDED
    assert "undecided after 0.05 s" in verdict.reason


def test_bad_operation_is_one_clear_error():
    with pytest.raises(ValueError, match="read, write or cas"):
        Op("append", 1, 0, 1)
    with pytest.raises(ValueError, match="before it was invoked"):
        Op("write", 1, 5, 1)


# ---- against a brute-force search ------------------------------------------------------------

def brute_force(history, initial=ABSENT) -> bool:
    """Every subset of the indeterminate operations, every order: one respecting real time and the register."""
    completed = [op for op in history if op.completed is not None]
    maybe = [op for op in history if op.completed is None]
    for taken in itertools.product([False, True], repeat=len(maybe)):
        ops = completed + [op for op, t in zip(maybe, taken) if t]
        for order in itertools.permutations(ops):
            if any(later.completed is not None and later.completed < earlier.invoked
                   for k, earlier in enumerate(order) for later in order[k + 1:]):
                continue
            state, fits = initial, True
            for op in order:
                allowed, state = op.step(state)
                if not allowed:
                    fits = False
                    break
            if fits:
                return True
    return False


values = st.sampled_from([ABSENT, 1, 2])


@st.composite
def tiny_histories(draw):
    ops = []
    for _ in range(draw(st.integers(0, 5))):
        invoked = draw(st.integers(0, 6))
        completed = draw(st.one_of(st.none(), st.integers(invoked, 8)))
        f = draw(st.sampled_from(["read", "write", "cas"]))
        if f == "read":
            ops.append(Op("read", draw(values), invoked, completed if completed is not None else invoked + 1))
        elif f == "write":
            ops.append(Op("write", draw(st.sampled_from([1, 2])), invoked, completed))
        else:
            ops.append(Op("cas", (draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2]))), invoked, completed,
                          create=draw(st.booleans())))
    return ops


@given(tiny_histories())
def test_agrees_with_brute_force(history):
    verdict = check_register(history, budget_s=5)
    assert verdict.status == (OK if brute_force(history) else VIOLATION)
    if verdict.status == VIOLATION:
        assert not brute_force(list(verdict.witness))


def simulated_register(n, clients, rng, lost=0.1):
    """`n` operations of `clients` on a real register, each taking effect at a random moment of its
    interval (linearizable by construction); a tenth of the writes and cas are left unanswered."""
    free, events = [0.0] * clients, []
    for k in range(n):
        client = rng.randrange(clients)
        start = free[client] + rng.random()
        end = start + rng.random() * 3
        free[client] = end
        events.append((rng.uniform(start, end), k, rng.choice(["read", "write", "write", "cas"]), start, end))
    state, ops = ABSENT, []
    for _, k, f, start, end in sorted(events):
        answered = None if f != "read" and rng.random() < lost else end
        if f == "read":
            ops.append(Op("read", state, start, end))
        elif f == "write" or rng.random() < 0.7:
            ops.append(Op(f, k + 1 if f == "write" else (state, k + 1), start, answered))
            state = k + 1
    return ops


def test_a_long_history_is_decided_and_a_stale_read_in_it_is_shown_alone_with_its_writes():
    import random
    history = simulated_register(200, 4, random.Random(1))
    assert check_register(history, budget_s=5).status == OK
    end = max(op.completed or op.invoked for op in history)
    earlier = next(op for op in reversed(history) if op.f == "write" and op.completed is not None)
    stale = [w("new", end + 1, end + 2), r(earlier.value, end + 3, end + 4)]
    verdict = check_register(history + stale, budget_s=5)
    assert verdict.status == VIOLATION
    assert set(verdict.witness) == {earlier, *stale}, verdict.witness
