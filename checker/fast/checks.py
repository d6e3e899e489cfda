"""Which compiled equivalent (`checker.fast.properties`) stands for which property of the catalogue,
and the checks that run them on a batch: the Python side, which imports no Numba (the
equivalents may come from the module compiled ahead of time, `checker.fast.aot`).
"""

from __future__ import annotations

import hashlib
import inspect
from functools import cache, partial
from typing import Sequence

import numpy as np

from hwm.checker.backend import Backend
from hwm.checker.fast.fields import ACK_QUORUM, BOOKIES, ENSEMBLE_SIZE, MAJORITY, NEEDED, WRITE_QUORUM
from hwm.properties.ledger import Ledger

# Each compiled equivalent, keyed by the property's name and the digest of the source it
# was written from (source_digest): {name: {digest: code}}. A property may have several
# versions (ReadNeverTruncated read literally, and refined to "fewer than a quorum"; a finding's
# wording changed, the logic not: the servers named by their part, BookKeeper's clients).
STATE_CODES = {
    "ReadsAgree": {"337243c8d24e1f1a": 0},
    "HwmWithinLog": {"ec4cd1e9e8d3d628": 1},
    "CommittedOnQuorum": {"ad8623486d63fb54": 2, "44c79cea193429d5": 2, "42d442bccb82b99a": 2,
                          "7ae6f1b0693d8831": 2,  # `needed`: a variant's quorum (Python only; None: a majority)
                          "7e372a25caaf3884": 9},  # properties.ledger's (BookKeeper's ledger parameters)
    "OneLeaderPerGeneration": {"e33af864b183e1df": 3},
    "LogMatching": {"c4358c5d7c87adff": 4, "48cc819f838021c4": 11},
    "EntryRead": {"da87b43187b13b16": 5},
    # properties.acked, on the rows of a model with the `acked` ghost (none in the raft model's)
    "AckedWriteNeverLost": {"beba27ce82b65b2f": 6, "d6770d77147595c2": 6, "2c059f74add22ca4": 10},
    "WriteAcknowledged": {"1a07dbc30384d119": 7},
    "LeaseReadNeverStale": {"a852e6da9ee859bb": 8},  # properties.leases, under lease_reads
}
STEP_CODES = {
    "ReadNeverTruncated": {"c473d70605200f94": 0, "e9411c0e08fbc852": 5, "fed81e85dc919462": 5,
                           "37ca6704939f62d9": 5,  # `needed`, as CommittedOnQuorum's
                           "d94a00cac0edca56": 10},  # properties.ledger's
    "ReadNeverLost": {"0c51de25de896e16": 1, "45148cdfa97ce104": 1},
    "UncommittedTruncated": {"59d0302fada9d050": 2, "46eb78481799d7f8": 12},
    "LeaderChangeWithUncommitted": {"57c9bf766b65d821": 3, "db3d03f554660fcb": 3},
    "CrashAndRejoin": {"a40a1153af6c6a3c": 4},
    "HwmNeverTruncated": {"50b1433a6e12557a": 6, "f7b83a54351d2bc1": 11},
    "AcknowledgedWriteKept": {"fb87a2b08fb44ed5": 7},  # properties.acked, Kafka's catalogue
    "LeaseHolderPartitioned": {"294126592c6b8856": 8},  # properties.leases, under lease_reads
    "LeaderStepsDown": {"11912471a2c3b5a1": 9},  # properties.step_down, ZAB under check_quorum
}
STATE_CODE_COUNT = 12
STEP_CODE_COUNT = 13


def compiled_code(prop) -> int | None:
    """The compiled equivalent of `prop` as its source stands now (None when there is none)."""
    codes = (STATE_CODES if prop.on == "state" else STEP_CODES).get(prop.name, {})
    check = prop.check
    if isinstance(check, partial):  # counting a variant's quorum (catalogue.at_quorum): P[NEEDED] is `needed`
        if ledger_of(prop) is None and (check.args or set(check.keywords) != {"needed"}):
            return None
        check = check.func
    if not inspect.isfunction(check):  # a callable object, such as a variant's own property
        return None
    return codes.get(source_digest(check))


def ledger_of(prop) -> Ledger | None:
    """The ledger a property of properties.ledger counts copies in (`partial(check, ledger)`), else None.
    The compiled forms count in the row's ledger (P[BOOKIES], P[ENSEMBLE_SIZE], P[WRITE_QUORUM],
    P[ACK_QUORUM]), so one stands for the property only when the two are equal."""
    check = prop.check
    if isinstance(check, partial) and len(check.args) == 1 and not check.keywords and \
            isinstance(check.args[0], Ledger):
        return check.args[0]
    return None


def needed_of(prop, P) -> int | None:
    """How many servers a property that counts a quorum (its check takes `needed`) requires to hold an
    entry: its `needed`, by default a majority (P[MAJORITY]); None for any other property. The compiled
    forms count P[NEEDED], so one stands for the property only when the two are equal."""
    check = prop.check
    function = check.func if isinstance(check, partial) else check
    if not inspect.isfunction(function) or "needed" not in inspect.signature(function).parameters:
        return None
    return (check.keywords.get("needed") if isinstance(check, partial) else None) or int(P[MAJORITY])


@cache
def source_digest(check) -> str:
    """The source of a property's check and of the catalogue helpers it calls, hashed (once per function
    and process: reading the sources again cost every search about 0.1 CPU s)."""
    parts = [inspect.getsource(check)]
    for name in check.__code__.co_names:
        helper = check.__globals__.get(name)
        if inspect.isfunction(helper) and helper.__module__ == check.__module__:
            parts.append(inspect.getsource(helper))
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


class CompiledProperties:
    """Property checks of one layout: compiled where an up-to-date equivalent exists, else Python."""

    def __init__(self, layout, kernels):
        self.layout = layout
        self.kernels = kernels  # first_states and first_steps (checker.fast.aot.kernels)
        self._codes: dict[str, int | None] = {}

    def code(self, prop) -> int | None:
        """The compiled equivalent of `prop`, when one was written from its current source (and counts
        the quorum the property counts)."""
        if prop.name not in self._codes:
            code = compiled_code(prop)
            P = self.layout.params
            ledger = ledger_of(prop)
            if ledger is not None and tuple(ledger) != tuple(P[[BOOKIES, ENSEMBLE_SIZE, WRITE_QUORUM, ACK_QUORUM]]):
                code = None
            self._codes[prop.name] = code if needed_of(prop, P) in (None, P[NEEDED]) else None
        return self._codes[prop.name]

    def warm(self, initial: np.ndarray, warm) -> None:
        P = self.layout.params
        codes = np.arange(STATE_CODE_COUNT, dtype=np.int64)
        warm("state properties", lambda: self.kernels.first_states(P, initial, codes,
                                                                   np.full(codes.size, -1, dtype=np.int64)))
        codes = np.arange(STEP_CODE_COUNT, dtype=np.int64)
        parents = np.zeros(1, dtype=np.int64)
        warm("step properties", lambda: self.kernels.first_steps(P, initial, initial, parents, codes,
                                                                 np.full(codes.size, -1, dtype=np.int64)))

    def _split(self, props: Sequence) -> tuple[list, np.ndarray, list]:
        fast = [p for p in props if self.code(p) is not None]
        codes = np.array([self.code(p) for p in fast], dtype=np.int64)
        return fast, codes, [p for p in props if self.code(p) is None]

    def check_states(self, backend, batch: np.ndarray, props: Sequence) -> dict[str, tuple[int, str]]:
        fast, codes, slow = self._split(props)
        found = Backend.check_states(backend, batch, slow) if slow else {}
        if fast:
            first = np.full(codes.size, -1, dtype=np.int64)
            self.kernels.first_states(self.layout.params, np.ascontiguousarray(batch), codes, first)
            for p, position in zip(fast, first.tolist()):
                if position >= 0:
                    state = self.layout.unpack(batch[position])
                    found[p.name] = (position, self._confirm(p, p.check(state), state))
        return found

    def check_steps(self, backend, frontier: np.ndarray, expansion, props: Sequence) -> dict[str, tuple[int, str]]:
        fast, codes, slow = self._split(props)
        found = Backend.check_steps(backend, frontier, expansion, slow) if slow else {}
        if fast:
            first = np.full(codes.size, -1, dtype=np.int64)
            self.kernels.first_steps(self.layout.params, np.ascontiguousarray(frontier),
                        np.ascontiguousarray(expansion.successors), expansion.parents, codes, first)
            for p, t in zip(fast, first.tolist()):
                if t >= 0:
                    before = self.layout.unpack(frontier[expansion.parents[t]])
                    after = self.layout.unpack(expansion.successors[t])
                    found[p.name] = (t, self._confirm(p, p.check(before, after), after))
        return found

    @staticmethod
    def _confirm(prop, finding, state) -> str:
        if not finding:
            raise RuntimeError(f"the compiled {prop.name} disagrees with the catalogue on\n{state.describe()}")
        return finding
