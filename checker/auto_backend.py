"""`--successors auto`, `hwm check`'s default: the compiled successor backend (`checker.fast`) wherever it
can run the model, else the reference one with the reason.

The two give the same states, verdicts and shortest counterexamples (tests/checker/test_engine.py pins
both), so the choice is one of speed only: the compiled kernels search 10-40x faster and, once built,
load in a millisecond. Their first use on a machine builds them (`checker.fast.aot`, an estimate and a
progress line on stderr); even the tour, whose presets are small, is no slower on that first run than
the reference backend, and every later run is many times faster (docs/scaling.md, bench/first_run.py).

The reference backend is chosen instead, with a one-line reason, when:
- the compiled kernels have no form of the model, a flag or a bound (`checker.fast.unsupported`);
- the engine is Spark: its executors may be other machines, each of which would build the kernels
  (`--successors fast` asks for that on purpose); the simulation walks the model itself;
- neither a built module nor Numba (which builds it, or runs the kernels under its JIT) is there.
"""

from __future__ import annotations

import importlib.util
import os

from hwm.model.actions import Model

__all__ = ["auto_backend", "fast_kernels_ready", "prepare_fast"]


def auto_backend(model: Model, engine: str = "local") -> tuple[str, str | None]:
    """(backend name, why not the compiled one or None) for `model` searched by `engine`."""
    if engine == "simulation":
        return "reference", None  # random walks call the model itself: no successor backend
    if engine == "spark":
        return "reference", ("the Spark engine's executors would each build the compiled kernels "
                             "(--successors fast asks for it)")
    from hwm.checker.fast import unsupported

    why = unsupported(model)
    if why:
        return "reference", why
    if not fast_kernels_ready() and importlib.util.find_spec("numba") is None:
        return "reference", "Numba is not installed, so the compiled kernels can be neither built nor run"
    return "fast", None


def fast_kernels_ready() -> bool:
    """Whether this machine's cache holds the kernels' module for these sources (nothing to build)."""
    from hwm.checker.fast import aot

    return os.environ.get("HWM_KERNELS") != "jit" and os.path.exists(aot.module_path())


def prepare_fast() -> str:
    """Build (first use on this machine) or load the compiled kernels now, in this process, before any
    search or worker starts: one build, announced once. Returns where they come from."""
    from hwm.checker.fast.aot import kernels

    return kernels().origin
