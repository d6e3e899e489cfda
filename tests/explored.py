"""One breadth-first exploration per configuration per test run, shared by the tests that read it."""

from functools import cache

from hwm.model.registry import build_model
from hwm.checker.report import Report
from hwm.checker.engine import CheckOptions, check
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS


@cache
def explore(preset: str, config: Config, symmetry: bool = True) -> Report:
    return check(build_model(PRESETS[preset].protocol, config), CheckOptions(symmetry=symmetry), name=preset)
