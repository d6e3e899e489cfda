"""The benchmarks stand on the package alone: nothing under bench/ imports the tests (a user runs
`python bench/x.py` from an installed checkout; the tests are not part of what it needs)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def imports_of_tests(source: str) -> list[str]:
    """The `tests` modules a Python source imports (import tests..., from tests... import ...)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "tests":
            found.append(node.module)
    return found


def test_the_check_sees_an_import_of_tests():
    assert imports_of_tests("def f():\n    from tests.pinned import PINNED\n") == ["tests.pinned"]
    assert imports_of_tests("import tests.quality.test_kill_matrix as k\n") == ["tests.quality.test_kill_matrix"]
    assert imports_of_tests("from testsuite import x\nimport bench.cluster\n") == []


def test_no_benchmark_imports_the_tests():
    files = sorted(BENCH.rglob("*.py"))
    assert files, f"no benchmarks found under {BENCH}"
    offenders = {str(path.relative_to(BENCH.parent)): imports_of_tests(path.read_text())
                 for path in files}
    assert {path: names for path, names in offenders.items() if names} == {}
