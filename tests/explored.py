"""One breadth-first exploration per configuration per test run, shared by the tests that read it."""

from functools import cache

from model.actions import build_model
from model.checker import Report, bfs
from model.state import Config
from properties.protocol import PRESETS


@cache
def explore(preset: str, config: Config, symmetry: bool = True) -> Report:
    return bfs(build_model(PRESETS[preset].protocol, config), preset, symmetry=symmetry)
