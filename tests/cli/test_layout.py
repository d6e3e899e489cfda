"""The layout's boundaries, read from the code's own imports: the specification never imports how it
is explored, the implementation never imports the model, no library imports the command line, a
package's opening holds no code, no package's modules import each other in a circle, the command line
re-exports nothing, and an install without the test extra runs `hwm`."""

from __future__ import annotations

import ast
import functools
import re
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


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    """`path`'s syntax tree, parsed once per process: every test here walks the same files."""
    return ast.parse(path.read_text(), str(path))


@functools.lru_cache(maxsize=None)
def nodes_of(path: Path) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(parsed(path)))


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every absolute module `path` imports, with its line: `from a.b import c` gives a.b and a.b.c."""
    found = []
    for node in nodes_of(path):
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


# The command line's modules (hwm/*.py): what a library must not name, in an import or in a string a
# dynamic import would take ("hwm.render", "hwm.cli:main").
COMMAND_LINE = tuple(sorted(f"hwm.{path.stem}" for path in (ROOT / "hwm").glob("*.py") if path.stem != "__init__"))
NAMES_THE_COMMAND_LINE = re.compile(r"\b(%s)\b" % "|".join(re.escape(name) for name in COMMAND_LINE))


def test_every_library_says_what_it_may_import():
    # A library folder pyproject.toml installs (PACKAGES, checked against it below) is under these rules.
    assert set(ALLOWED) == set(PACKAGES)


def test_library_code_never_imports_the_command_line():
    # Every library, and the example nodes; the benchmarks may run `hwm` as a user does (a process) but
    # not import it.
    wrong = []
    for folder in [*PACKAGES, "examples", "bench"]:
        for path in sources(folder):
            for line, module in imported_modules(path):
                if project_part(module) == "cli":
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
            if folder == "bench":
                continue
            for node in nodes_of(path):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    named = NAMES_THE_COMMAND_LINE.search(node.value)
                    if named:
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} names {named.group(1)}")
    assert not wrong, "\n".join(wrong)


# A package's opening (`__init__.py`) says what the package is and re-exports at most: a docstring,
# imports and `__all__`. At most one screen (60 lines): the longest opening that is all docstring and
# re-exports, bridge/dst's (what a simulated run checks, then ten names), takes 53; a reader opening the
# folder reads what it is at once, and anything longer belongs in docs/ or in the module it describes.
OPENING_LINES = 60
# Openings that still hold code, each to move into a named module; the list only shrinks (empty now).
OPENINGS_WITH_CODE: dict[str, str] = {}


def opening_code(path: Path) -> list[str]:
    """What an opening holds beyond its docstring, imports and `__all__`, as `line: kind`."""
    body = parsed(path).body
    return [f"{node.lineno}: {type(node).__name__}" for k, node in enumerate(body)
            if not (isinstance(node, (ast.Import, ast.ImportFrom))
                    or (k == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
                    or (isinstance(node, (ast.Assign, ast.AnnAssign))
                        and [getattr(t, "id", None) for t in getattr(node, "targets", [getattr(node, "target", None)])]
                        == ["__all__"]))]


def openings() -> list[Path]:
    return sorted(path for folder in [*PACKAGES, "hwm"] for path in (ROOT / folder).rglob("__init__.py"))


def test_a_package_opening_says_what_the_package_is_and_re_exports_at_most():
    wrong = []
    for path in openings():
        name = str(path.relative_to(ROOT))
        code, lines = opening_code(path), len(path.read_text().splitlines())
        if lines > OPENING_LINES and name not in OPENINGS_WITH_CODE:
            wrong.append(f"{name}: {lines} lines (at most {OPENING_LINES})")
        if code and name not in OPENINGS_WITH_CODE:
            wrong.append(f"{name} holds code: {', '.join(code)}")
        if not code and name in OPENINGS_WITH_CODE:
            wrong.append(f"{name} holds no code any more: take it off OPENINGS_WITH_CODE")
    assert not wrong, "\n".join(wrong)


def module_names() -> dict[str, Path]:
    """Every module of the libraries and the command line by its installed name (a package: its opening)."""
    found = {}
    for folder, package in [*PACKAGES.items(), ("hwm", "hwm")]:
        for path in sources(folder):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            found[".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path
    return found


def package_of(module: str, modules: dict[str, Path]) -> str:
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def imports_inside_packages() -> dict[str, set[str]]:
    """module -> the modules of its own package it imports (an opening counts as its package's), by any
    import: at the top or inside a function, where a lazy import hides a circle rather than breaking it.
    `from p import name` imports the module p.name where there is one, else p's opening."""
    modules = module_names()
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        for _, imported in imported_modules(path):
            if imported in modules and imported != module:
                if package_of(imported, modules) == package_of(module, modules):
                    edges.setdefault(module, set()).add(imported)
        # `from p import name` gave p and p.name: p's opening is imported only where name is not a module.
        for node in nodes_of(path):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                if all(f"{node.module}.{alias.name}" in modules for alias in node.names):
                    edges.get(module, set()).discard(node.module)
    return edges


def circles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """The modules of each import circle (networkx's elementary cycles), as sets."""
    import networkx as nx

    graph = nx.DiGraph([(a, b) for a, targets in edges.items() for b in targets])
    return {frozenset(cycle) for cycle in nx.simple_cycles(graph)}


def test_no_import_circle_inside_a_package():
    # A concept two modules share lives in a module below both (a lazy import inside a function counts:
    # it hides a circle, it does not break one).
    found = circles(imports_inside_packages())
    assert not found, "import circles:\n" + "\n".join(sorted(" -> ".join(sorted(circle)) for circle in found))


def test_the_command_line_re_exports_nothing():
    # A name a command-line module imports from the project is one it uses: callers take library names
    # from the libraries, never through hwm/ (an import for its effect alone, `import hwm.model.variant`,
    # binds no name).
    wrong = []
    for path in sources("hwm"):
        tree = parsed(path)
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.level == 0 and project_part(node.module or "") is not None:
                wrong += [f"{path.relative_to(ROOT)}:{node.lineno} re-exports {node.module}.{alias.name}"
                          for alias in node.names if (alias.asname or alias.name) not in used]
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


def test_the_node_and_test_commands_start_without_the_checkers_libraries():
    # `hwm test` and a Maelstrom harness start hwm's node many times: NumPy and networkx (the compiled
    # backend, liveness graphs), z3 and Spark are imported by the commands that use them, not by every
    # start (0.42 CPU s for an `hwm node` that imported them, 0.25 s without).
    script = ("import sys, hwm.cli, hwm.cluster_cli, hwm.nodes_cli, hwm.stdio_cli\n"
              "print(sorted(m for m in ('numpy', 'networkx', 'numba', 'z3', 'pyspark') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
