"""bench/mutation.py covers every module of impl/ and bridge/ and checker's observed-state validators:
a new module without a test subset, or a subset naming a test file that moved, would silently leave
it out of the mutation score. Its operators make the one change each names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.mutation import TARGETS, _points, mutate, stratified_sample

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_of_impl_and_bridge_is_a_target_and_its_tests_exist():
    modules = {str(p.relative_to(ROOT)) for folder in ("impl", "bridge") for p in (ROOT / folder).rglob("*.py")}
    modules |= {str(p.relative_to(ROOT)) for p in (ROOT / "checker").glob("observed*.py")}
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


@pytest.mark.parametrize("source, operator, mutants", [
    ("ok = a and b and c\n", "drop operand", ["ok = b and c", "ok = a and c", "ok = a and b"]),
    ("if role != 1 or pending is not None:\n    pass\n", "drop operand",
     ["if pending is not None:", "if role != 1:"]),
    ("if offset is not None:\n    pass\n", "truthiness", ["if offset:"]),
    ("if offset is None:\n    pass\n", "truthiness", ["if not offset:"]),
    ("lac = max(lac, add.lac)\n", "max/min -> one argument", ["lac = lac", "lac = add.lac"]),
    ("write(index, durable=True)\n", "durable -> plain", ["write(index, durable=False)"]),
    ("write(index, durable=False, flag=True)\n", "True/False", ["write(index, durable=True, flag=True)",
                                                                 "write(index, durable=False, flag=False)"]),
])
def test_each_operator_makes_the_one_change_it_names(source, operator, mutants):
    points = _points(ast.parse(source))
    numbers = [n for n, (_, op) in enumerate(points) if op == operator]
    assert [mutate(source, n)[0].splitlines()[0] for n in numbers] == mutants
