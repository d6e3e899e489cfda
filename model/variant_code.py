"""A variant's code is the user's: where a function of it is defined and where it raised, what its
docstring says it checks, a state as its errors print it, and `VariantError`, the one-line error that
names the file and line of a variant that cannot be loaded or built (a hook that fails during a search is
`properties.rules.HookError`). `model.variant` and `model.variant_model` both speak of the user's code
through these."""

from __future__ import annotations

import inspect
import traceback
from typing import Any, Callable

from hwm.properties.flags import ProtocolError
from hwm.properties.snapshot import describe_server

__all__ = ["VariantError", "defined_at", "raised_at", "hook_failure", "state_text", "meaning_of"]


class VariantError(ProtocolError):
    """A variant that cannot be loaded or built: one line naming file, line and what is wrong."""


def defined_at(obj: Any) -> str:
    """`file:line` of a function or class, as far as Python knows it."""
    code = getattr(obj, "__code__", None)
    if code is not None:
        return f"{code.co_filename}:{code.co_firstlineno}"
    try:
        return f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
    except (OSError, TypeError):
        return f"{getattr(inspect.getmodule(obj), '__file__', '?')}"


def hook_failure(cls: type, hook: str, error: BaseException) -> str:
    """What a variant's `hook` raising `error` says: the line of the user's file that raised, and the error."""
    frames = traceback.extract_tb(error.__traceback__)
    function = getattr(cls, hook)
    file = function.__code__.co_filename if hasattr(function, "__code__") else None
    mine = [f for f in frames if f.filename == file] or frames
    where = f"{mine[-1].filename}:{mine[-1].lineno}" if mine else defined_at(function)
    return f"{where}: {cls.__name__}.{hook} raised {type(error).__name__}: {error}"


def raised_at(error: BaseException, function: Callable) -> str:
    """`file:line` where the user's `function` raised `error` (the innermost frame below hwm's call)."""
    frames = traceback.extract_tb(error.__traceback__)[1:] or traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else defined_at(function)


def state_text(state) -> str:
    """A model state as a variant's errors print it: each server's generation, role, log and HWM."""
    return "; ".join(f"S{k + 1} {describe_server(s)}" for k, s in enumerate(state.servers))


def meaning_of(check: Callable, default: str) -> str:
    """What a variant's property function says it checks: its docstring's first line, else `default`."""
    doc = inspect.getdoc(check)
    return doc.strip().splitlines()[0] if doc else default
