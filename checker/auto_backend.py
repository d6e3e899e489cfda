"""`--successors auto`, `hwm check`'s default: the compiled successor backend (`checker.fast`) wherever it
can run the model, else the reference one with the reason.

The two give the same states, verdicts and shortest counterexamples (tests/checker/test_engine.py pins
both), so the choice is one of speed only: the compiled kernels search 10-40x faster and, once built,
load in a millisecond; building them is a one-off cost per machine (`BUILD_ESTIMATE`).
So (`choose`):

- once the kernels are built on this machine (or their build failed and Numba's JIT runs them), a
  check runs them;
- before that, a check builds them (announced, with a progress line) when the reference backend would
  take longer than the build on the whole run (the tour of every preset at the default bounds: about
  120 CPU s predicted, 57-75 measured), and runs the reference backend otherwise, saying so: a small
  check on a fresh machine is not made to wait a minute for a compile it does not need
  (bench/first_run.py, docs/scaling.md);
- the reference backend, with a one-line reason, where the compiled kernels have no form of the
  model, a flag or a bound (`checker.fast.unsupported`); on a Spark cluster, whose executors may be
  other machines that would each build the kernels (`--successors fast` asks for that on purpose);
  and where neither a built module nor Numba is there. Spark on `local[N]` runs its executors on this
  machine, where they load the kernels the driver built or found: it is chosen for as the local engine
  is. The simulation walks the model itself.
"""

from __future__ import annotations

import importlib.util
import os

from hwm.model.actions import Model

# What the kernels' first build costs, measured by bench/first_run.py (docs/scaling.md: 68 CPU s at load
# 7, 89 at load 20 on 2 cores): the one estimate users are told, on stderr as it starts
# (`checker.fast.aot`), in `hwm check --help` and in the README (tests/checker/test_aot.py checks they
# agree), and what `choose` weighs. It lives here, not beside the build, so that the command line's help
# text does not import NumPy: `hwm node` starts without it.
BUILD_CPU_SECONDS = 70
BUILD_ESTIMATE = f"about {BUILD_CPU_SECONDS} CPU seconds, longer in wall time on a busy machine"

__all__ = ["auto_backend", "choose", "fast_kernels_ready", "prepare_fast"]


def auto_backend(model: Model, engine: str = "local", spark_master: str | None = None) -> tuple[str, str | None]:
    """(backend name, why not the compiled one or None) for `model` searched by `engine` (on `spark_master`,
    default `local[*]`, for Spark)."""
    if engine == "simulation":
        return "reference", None  # random walks call the model itself: no successor backend
    if engine == "spark":
        from hwm.checker.spark_session import on_this_machine  # imported when Spark is asked for
        if not on_this_machine(spark_master or "local[*]"):
            return "reference", ("the Spark cluster's executors would each build the compiled kernels "
                                 "(--successors fast asks for it)")
    from hwm.checker.fast import unsupported

    why = unsupported(model)
    if why:
        return "reference", why
    if not fast_kernels_ready() and importlib.util.find_spec("numba") is None:
        return "reference", "Numba is not installed, so the compiled kernels can be neither built nor run"
    return "fast", None


def fast_kernels_ready() -> bool:
    """Whether the kernels need no build: this machine's cache holds their module for these sources, a
    build failed here before (Numba's JIT runs them) or the JIT is asked for (HWM_KERNELS=jit)."""
    from hwm.checker.fast import aot

    if os.environ.get("HWM_KERNELS") == "jit":
        return True
    path = aot.module_path()
    return os.path.exists(path) or os.path.exists(path + ".failed")


def choose(models: dict[str, Model], symmetry: bool, engine: str = "local",
           spark_master: str | None = None) -> tuple[dict[str, str], list[str]]:
    """The backend `--successors auto` runs for each of `models` (by protocol name) in one command (one
    check, or the tour's presets), and one note per reason some run the reference backend, naming them."""
    from hwm.checker.estimate import predicted_seconds, predicted_states

    chosen: dict[str, str] = {}
    why_not: dict[str, list[str]] = {}
    for name, model in models.items():
        chosen[name], why = auto_backend(model, engine, spark_master)
        if why:
            why_not.setdefault(why, []).append(name)
    compiled = [name for name, backend in chosen.items() if backend == "fast"]
    if compiled and not fast_kernels_ready():
        reference_seconds = sum(predicted_seconds(predicted_states(models[n].protocol.system, models[n].config,
                                                                   symmetry), "reference") for n in compiled)
        if reference_seconds < BUILD_CPU_SECONDS:
            why = (f"the compiled kernels are not built on this machine yet, and this check needs less "
                   f"(about {reference_seconds:.0f} CPU s predicted) than their build ({BUILD_ESTIMATE}); "
                   "the tour, larger bounds or --successors fast build them, once")
            for name in compiled:
                chosen[name] = "reference"
            why_not.setdefault(why, []).extend(compiled)
    return chosen, [f"{', '.join(names)} on the reference backend: {why}" for why, names in why_not.items()]


def prepare_fast() -> str:
    """Build (first use on this machine) or load the compiled kernels now, in this process, before any
    search or worker starts: one build, announced once. Returns where they come from."""
    from hwm.checker.fast.aot import kernels

    return kernels().origin
