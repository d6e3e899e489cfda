"""Running a conformance machine: its Hypothesis settings, and a hunt for its first failure within a
budget of examples."""

from __future__ import annotations

import time
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

from hwm.bridge.conformance.machine import STEPS, ConformanceFailure, ConformanceMachine


def same_draws_in_every_process() -> bool:
    """A derandomized hunt draws the same examples whatever else the process loaded: Hypothesis (6.131
    on) draws one value in twenty from the constants of the project's modules loaded so far, so a
    hunt's examples, and whether it found a planted bug, changed with the tests that ran before it in
    a worker (xdist's split, -n 0, a selection). Its pool of local constants is kept empty for the
    whole process (a private hook; absent from another version, nothing is changed). The test suite
    does this under its derandomized profile (tests/conftest.py), bench/conformance.py too. Whether
    the hook was there."""
    from hypothesis.internal.conjecture import providers
    if not (callable(getattr(providers, "_get_local_constants", None)) and hasattr(providers, "_local_constants")):
        return False
    providers._get_local_constants = lambda: providers._local_constants  # never filled
    return True


def conformance_settings(**overrides) -> settings:
    """Settings for a conformance run: the loaded profile's example count unless overridden."""
    options = dict(stateful_step_count=STEPS, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    options.update(overrides)
    return settings(**options)


@dataclass
class Hunt:
    """The outcome of running a conformance machine until it fails or its budget is spent."""

    failure: ConformanceFailure | None
    examples: int | None  # examples run until the first failure (None: not found)
    seconds: float | None  # seconds until the first failure
    total_seconds: float  # including shrinking
    steps: int  # steps run in all


def hunt(machine: type[ConformanceMachine], budget: int, *, shrink: bool = False, seed: int | None = None,
         **overrides) -> Hunt:
    """Run `machine` for at most `budget` examples; the first failure ends the hunt (shrunk when
    `shrink`). Derandomized unless a `seed` is given: either way the same machine, budget and seed
    give the same hunt."""
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    if seed is None:
        overrides.setdefault("derandomize", True)
    else:
        machine = hypothesis_seed(seed)(machine)
        overrides.update(derandomize=False, database=None)
    started = time.perf_counter()
    failure = None
    try:
        run_state_machine_as_test(machine, settings=conformance_settings(
            max_examples=budget, phases=phases, report_multiple_bugs=False, **overrides))
    except ConformanceFailure as found:
        failure = found
    total = time.perf_counter() - started
    examples, seconds = machine.first_failure if machine.first_failure else (None, None)
    return Hunt(failure, examples, seconds, total, machine.steps_run)
