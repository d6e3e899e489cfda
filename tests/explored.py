"""One breadth-first exploration per configuration per test run, shared by the tests that read it."""

from functools import cache

from model.actions import Model
from model.checker import Report
from model.engine import CheckOptions, check
from model.state import Config
from properties.protocol import PRESETS


@cache
def explore(preset: str, config: Config, symmetry: bool = True) -> Report:
    return check(Model(PRESETS[preset].protocol, config), CheckOptions(symmetry=symmetry), name=preset)
