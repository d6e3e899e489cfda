"""The layout's boundaries, read from the code's own imports: the specification never imports how it
is explored, the implementation never imports the model, nothing imports the command line, and an
install without the test extra runs `hwm`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The repository's folders and the names they install under (pyproject.toml's package-dir).
PACKAGES = {"model": "hwm.model", "checker": "hwm.checker", "proofs": "hwm.proofs", "impl": "hwm.impl",
            "properties": "hwm.properties", "bridge": "hwm.bridge", "counterexamples": "hwm.counterexamples",
            "teach": "hwm.teach"}
# What each library may import of the project (besides itself).
ALLOWED = {
    "properties": set(),
    "model": {"properties"},
    "impl": {"properties"},
    "checker": {"model", "properties"},
    "proofs": {"model", "checker", "properties"},
    "bridge": {"model", "checker", "impl", "properties"},
    "counterexamples": {"model", "checker", "bridge", "properties"},
    "teach": {"model", "checker", "bridge", "properties"},
}
LIBRARY_OF = {name: folder for folder, name in PACKAGES.items()}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every absolute module `path` imports, with its line: `from a.b import c` gives a.b and a.b.c."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def project_part(module: str) -> str | None:
    """Which part of the project `module` is: a library folder, `cli` (the command line in hwm/), or None."""
    for name, folder in LIBRARY_OF.items():
        if module == name or module.startswith(name + "."):
            return folder
    if module == "hwm" or module.startswith("hwm."):
        return "cli"
    return None


def sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_a_library_imports_only_the_libraries_below_it(folder):
    wrong = []
    for path in sources(folder):
        for line, module in imported_modules(path):
            part = project_part(module)
            if part is not None and part != folder and part not in ALLOWED[folder]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({part})")
    assert not wrong, "\n".join(wrong)


def test_nothing_outside_the_command_line_imports_it():
    wrong = []
    for folder in [*ALLOWED, "bench"]:
        for path in sources(folder):
            for line, module in imported_modules(path):
                if project_part(module) == "cli":
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


# What the other tests may take from the command line: the commands they run and the renderer whose
# output they read; library names come from the libraries (tests/cli and tests/teach test hwm/ itself).
CLI_FOR_TESTS = ("hwm.cli", "hwm.prove_cli", "hwm.render")


def test_tests_take_library_names_from_the_libraries():
    wrong = []
    for path in sorted(ROOT.joinpath("tests").rglob("*.py")):
        if path.parent.name in ("cli", "teach"):
            continue
        for line, module in imported_modules(path):
            if project_part(module) == "cli" and module != "hwm" and not module.startswith(CLI_FOR_TESTS):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_every_import_of_the_project_goes_through_the_hwm_namespace():
    # `import model` would find the folder only from a checkout, and would load a second copy of it.
    wrong = []
    for path in [*ROOT.joinpath("hwm").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py"),
                 *(p for folder in [*ALLOWED, "bench"] for p in sources(folder))]:
        for line, module in imported_modules(path):
            if module.split(".")[0] in PACKAGES:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


# Run in a fresh interpreter in which pytest and Selenium cannot be imported, as after
# `pip install hwm` without the test extra (Hypothesis is a plain dependency: `hwm test` needs it).
WITHOUT_TEST_EXTRA = r'''
import importlib, pkgutil, sys
class NoTestExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest", "selenium"):
            raise ImportError(f"{name} is a test-only dependency")
sys.meta_path.insert(0, NoTestExtra())
import hwm
PACKAGES = %r
test_only = ("hwm.bridge.conformance",)  # the Hypothesis machine: the tests' and benchmarks' alone
skipped = ("hwm.checker.spark_engine",)  # PySpark is an optional extra of its own
names = []
for top in ["hwm", *PACKAGES]:
    package = importlib.import_module(top)
    names += [info.name for info in pkgutil.walk_packages(package.__path__, top + ".")]
assert len(names) > 60, names  # every library was walked, not only hwm/
for name in names:
    if not name.startswith(test_only + skipped):
        importlib.import_module(name)
from click.testing import CliRunner
from hwm.cli import main
for command in [[], *([name] for name in main.commands)]:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, (command, result.output)
print("imported and ran --help without the test extra")
'''


def test_hwm_imports_and_runs_without_the_test_extra():
    script = WITHOUT_TEST_EXTRA.replace("%r", repr(sorted(PACKAGES.values())))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "without the test extra" in done.stdout


def test_the_install_owns_only_hwm():
    # Every package the distribution installs is `hwm` or below it (pyproject.toml).
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert all(p == "hwm" or p.startswith("hwm.") for p in settings["packages"]), settings["packages"]
    assert {folder for name, folder in settings["package-dir"].items() if name != "hwm"} == set(PACKAGES)
    for folder in PACKAGES:
        for init in (ROOT / folder).rglob("__init__.py"):
            package = PACKAGES[folder] + "".join("." + part for part in init.parent.relative_to(ROOT / folder).parts)
            assert package in settings["packages"], f"{init.relative_to(ROOT)} is not installed: add {package}"
