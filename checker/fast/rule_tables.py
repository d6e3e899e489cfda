"""A variant's rules asked of every state (`properties.rules.PER_STATE_HOOKS`), as tables of answers the
compiled kernels look up.

The kernels are compiled once per machine from hwm's own source, so they cannot call a user's Python in
the middle of a search. But each of these rules answers from a few small values: logs of at most
`max_log` entries, each a generation up to `max_generation`, indexes up to `max_log`, a server's
position. Within a check's bounds each rule is a function over a finite domain, so it is asked once for
every argument before the search, and the kernels read the answer (`kernels._rule`). A rule must answer
from its arguments alone, which docs/variants.md asks of every rule: the reference backend assumes it
too, since it reaches each state once.

Layout: the tables follow P's fields (`fields.PARAMS`), and P[<HOOK>_AT] is where each starts (0: the
built-in rule). A log is its code: sum(log[i] * R**i), with R = max_generation + 1, so logs of
different lengths differ (every generation is at least 1) and a table over logs has R**max_log slots.
Keys, as the kernels compute them (L = max_log, n servers):

| rule | key |
| --- | --- |
| `quorum_index(match)` | sum(match[k] * (L + 1)**k) |
| `may_commit(index, log, generation)` | ((index - 1) * R**L + code(log)) * R + generation |
| `grants_vote(candidate_log, voter_log)` | code(candidate_log) * R**L + code(voter_log) |
| `accepts_append(log, prev_index, prev_generation)` | (code(log) * L + prev_index - 1) * R + prev_generation |
| `restart_keeps(log, hwm, leader_hwm)` | (code(log) * (L + 1) + hwm) * (L + 2) + (L + 1 if leader_hwm is None else leader_hwm) |
| `readable(server, leading, log, hwm)` | ((server * 2 + leading) * R**L + code(log)) * (L + 1) + hwm |

An answer is an int (a bool as 0 or 1). Where the rule raised or answered wrongly (`model.variant`'s
checks), the entry is `fields.RAISED`: such arguments may never occur in a reachable state, and when one
does the kernel says so (`fields.RULE_RAISED`) and the backend asks the reference model, which
raises the rule's own error there, as the reference backend would.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from hwm.checker.fast import fields as K
from hwm.model.rules import PER_STATE_HOOKS, overridden

# Above this many entries in all, a variant stays on the reference backend (8 MiB of tables).
MAX_ENTRIES = 1 << 20
HOOK_AT = {"quorum_index": K.QUORUM_INDEX_AT, "may_commit": K.MAY_COMMIT_AT, "grants_vote": K.GRANTS_VOTE_AT,
           "accepts_append": K.ACCEPTS_APPEND_AT, "restart_keeps": K.RESTART_KEEPS_AT, "readable": K.READABLE_AT}


class TooLarge(ValueError):
    """The tables would not fit under MAX_ENTRIES, or a rule answers what a packed row cannot hold."""


def sizes(hooks, n: int, max_log: int, max_generation: int) -> dict[str, int]:
    """Each table's number of entries."""
    L, R = max_log, max_generation + 1
    logs = R ** L
    every = {"quorum_index": (L + 1) ** n, "may_commit": L * logs * R, "grants_vote": logs * logs,
             "accepts_append": logs * L * R, "restart_keeps": logs * (L + 1) * (L + 2),
             "readable": n * 2 * logs * (L + 1)}
    return {hook: every[hook] for hook in hooks}


def _logs(max_log: int, max_generation: int):
    """Every log of at most max_log entries of generations 1..max_generation, with its code."""
    R = max_generation + 1
    for length in range(max_log + 1):
        for log in product(range(1, max_generation + 1), repeat=length):
            yield sum(g * R ** i for i, g in enumerate(log)), log


def _answer(rule, args) -> int:
    try:
        return int(rule(*args))
    except Exception:  # noqa: BLE001 - the variant's checked rule (HookError) or its own failure
        return K.RAISED


def tabulate(rules, hooks, n: int, max_log: int, max_generation: int) -> list[tuple[str, np.ndarray]]:
    """The table of each of `hooks` (rules of `rules`, a variant's checked rules object), in order."""
    total = sum(sizes(hooks, n, max_log, max_generation).values())
    if total > MAX_ENTRIES:
        raise TooLarge(f"its rules' tables would hold {total:,} answers at these bounds (at most {MAX_ENTRIES:,})")
    L, R = max_log, max_generation + 1
    logs = list(_logs(max_log, max_generation))
    span = R ** L
    built = []
    for hook, size in sizes(hooks, n, max_log, max_generation).items():
        table = np.zeros(size, dtype=np.int64)
        rule = getattr(rules, hook)
        if hook == "quorum_index":
            for key, digits in enumerate(product(range(L + 1), repeat=n)):
                match = tuple(reversed(digits))  # product varies the last digit fastest: server 0's is the lowest
                table[key] = answer = _answer(rule, (match,))
                if answer != K.RAISED and not 0 <= answer <= L:
                    raise TooLarge(f"its quorum_index answers {answer} for match indexes {match}, outside "
                                   f"0..max_log {L}, which a packed state cannot hold")
        elif hook == "may_commit":
            for index in range(1, L + 1):
                for code, log in logs:
                    for generation in range(R):
                        table[((index - 1) * span + code) * R + generation] = _answer(rule, (index, log, generation))
        elif hook == "grants_vote":
            for candidate_code, candidate in logs:
                for voter_code, voter in logs:
                    table[candidate_code * span + voter_code] = _answer(rule, (candidate, voter))
        elif hook == "accepts_append":
            for code, log in logs:
                for prev in range(1, L + 1):
                    for prev_generation in range(R):
                        table[(code * L + prev - 1) * R + prev_generation] = _answer(rule, (log, prev, prev_generation))
        elif hook == "restart_keeps":
            for code, log in logs:
                for hwm in range(L + 1):
                    for leader_hwm in range(L + 2):
                        table[(code * (L + 1) + hwm) * (L + 2) + leader_hwm] = _answer(
                            rule, (log, hwm, None if leader_hwm == L + 1 else leader_hwm))
        elif hook == "readable":
            for server in range(n):
                for leading in (False, True):
                    for code, log in logs:
                        for hwm in range(L + 1):
                            table[((server * 2 + leading) * span + code) * (L + 1) + hwm] = _answer(
                                rule, (server, leading, log, hwm))
        built.append((hook, table))
    return built


def with_tables(P: np.ndarray, built: list[tuple[str, np.ndarray]]) -> np.ndarray:
    """P followed by the tables, each one's start in its field."""
    P = P.copy()
    parts, at = [P], len(P)
    for hook, table in built:
        P[HOOK_AT[hook]] = at
        parts.append(table)
        at += len(table)
    return np.concatenate(parts)


def hooks_of(model) -> tuple[str, ...]:
    """The rules asked of every state that `model`'s variant overrides (none for a preset)."""
    if getattr(model, "variant", None) is None:
        return ()
    return tuple(hook for hook in overridden(model.rules) if hook in PER_STATE_HOOKS)


def of_model(model) -> list[tuple[str, np.ndarray]]:
    """The tables of `model`'s variant's rules asked of every state, built once per model (TooLarge when
    they cannot be)."""
    built = model.__dict__.get("_rule_tables")
    if built is None:
        config = model.config
        built = tabulate(model.rules, hooks_of(model), config.servers, config.max_log, config.max_generation)
        model._rule_tables = built
    return built
