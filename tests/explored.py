"""One breadth-first exploration per configuration per test run, shared by the tests that read it."""

from functools import cache

from hwm.model.registry import build_model
from hwm.checker.report import Report
from hwm.checker.run import CheckRequest, run
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS


@cache
def explore(preset: str, config: Config, symmetry: bool = True) -> Report:
    return run(CheckRequest(preset, symmetry=symmetry), model=build_model(PRESETS[preset].protocol, config))


@cache
def explore_compiled(preset: str, config: Config, symmetry: bool = True) -> Report:
    """`explore`'s report from the compiled backend where it covers the model, else from the reference
    one: for tests of the model's semantics, not of an engine. The engines' reports are equal, traces
    and tie-breaks included (tests/checker/test_engine.py), and the compiled one is 10-30 times faster."""
    model = build_model(PRESETS[preset].protocol, config)
    try:
        from hwm.checker.fast import unsupported
    except ImportError:  # the compiled backend is not installed: the reference backend is the only one
        return explore(preset, config, symmetry)
    if unsupported(model) is not None:
        return explore(preset, config, symmetry)
    return run(CheckRequest(preset, symmetry=symmetry, successors="fast"), model=model)
