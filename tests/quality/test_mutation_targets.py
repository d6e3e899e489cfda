"""bench/mutation.py covers every module of impl/ and bridge/: a new module without a test subset,
or a subset naming a test file that moved, would silently leave it out of the mutation score."""

from __future__ import annotations

import ast
from pathlib import Path

from bench.mutation import TARGETS, _points, stratified_sample

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_of_impl_and_bridge_is_a_target_and_its_tests_exist():
    modules = {str(p.relative_to(ROOT)) for folder in ("impl", "bridge") for p in (ROOT / folder).rglob("*.py")}
    assert modules == set(TARGETS), f"missing: {sorted(modules - set(TARGETS))}, gone: {sorted(set(TARGETS) - modules)}"
    for module, target in TARGETS.items():
        if target.sample == 0:  # only a module with nothing to mutate goes unsampled
            assert not _points(ast.parse((ROOT / module).read_text())), f"{module} has mutation points"
        for argument in target.tests:
            if argument.startswith("tests/"):
                assert (ROOT / argument.split("::")[0]).exists(), f"{module}: {argument} does not exist"


def test_the_sample_is_stratified_by_operator_and_depends_on_the_module_alone():
    points = _points(ast.parse((ROOT / "impl/core.py").read_text()))
    operators = {operator for _, operator in points}
    sample = stratified_sample(points, len(operators) + 5, 0, "impl/core.py")
    assert len(set(sample)) == len(operators) + 5
    assert {points[n][1] for n in sample} == operators  # every operator once at least
    assert sample == stratified_sample(points, len(operators) + 5, 0, "impl/core.py")
    assert sample != stratified_sample(points, len(operators) + 5, 1, "impl/core.py")
