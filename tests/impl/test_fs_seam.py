"""Every file system call of `impl/` goes through `impl/fs.py`'s `FileSystem`.

The deterministic simulation (`bridge/dst`) faults a file only if its writes reach the simulated
disk, so a raw `open(...)`, `os.write`, `os.replace`... of a data file anywhere else in `impl/` is a
file no crash, torn write or ENOSPC ever touches. This test reads `impl/` with `ast` (no import) and
fails on any such call outside `impl/fs.py`, naming the file, line and call. The few calls that are
not data-file IO are listed below, each with its reason; a new one must be added there, argued.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

IMPL = Path(__file__).resolve().parents[2] / "impl"

# `os` functions that create, write, rename, remove, sync or open a file or directory.
OS_FILE_CALLS = frozenset({
    "open", "write", "pwrite", "writev", "pwritev", "read", "pread", "close", "fsync", "fdatasync",
    "ftruncate", "truncate", "replace", "rename", "renames", "unlink", "remove", "rmdir", "removedirs",
    "mkdir", "makedirs", "link", "symlink", "sendfile", "copy_file_range", "fdopen",
})
# Modules whose every call touches files.
FILE_MODULES = frozenset({"shutil", "tempfile", "io", "fcntl"})
# Methods that write through a pathlib.Path (or any file object's own open).
PATH_WRITE_METHODS = frozenset({"write_text", "write_bytes", "touch", "mkdir", "unlink", "rename",
                                "replace", "rmdir"})

# (file, enclosing function, call) -> why it is allowed. Keep it short: each entry is a file the
# simulated disk cannot fault.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("fs.py", "*", "*"): "the seam itself: the only module that makes the operating system's calls",
    ("stdio.py", "serve", "os.read"): "reads the node's standard input (the harness's messages), not a data file",
    ("bookie_server.py", "_locked", "*"): "a blocking lock on the ledger metadata's directory, which orders the "
                                          "clients of several processes; no data is read or written through it "
                                          "(the record itself is replaced through impl/fs.py)",
}


def _module_aliases(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> module) for `import os as x`, and (name -> 'module.function') for `from os import open`."""
    modules: dict[str, str] = {}
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                functions[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return modules, functions


def raw_file_calls(source: str, filename: str) -> list[tuple[int, str, str]]:
    """(line, enclosing function, call) of every file system call in `source` not made through a FileSystem."""
    tree = ast.parse(source, filename)
    modules, functions = _module_aliases(tree)
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            name = _file_call(node.func, modules, functions)
            if name is not None:
                found.append((node.lineno, function, name))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def _file_call(func: ast.expr, modules: dict[str, str], functions: dict[str, str]) -> str | None:
    if isinstance(func, ast.Name):
        if func.id == "open" and "open" not in functions:
            return "open"  # the builtin
        target = functions.get(func.id)
        if target is not None:
            module, _, name = target.rpartition(".")
            if (module == "os" and name in OS_FILE_CALLS) or module in FILE_MODULES:
                return target
        return None
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and func.value.id in modules:
        module = modules[func.value.id]
        if module == "os" and func.attr in OS_FILE_CALLS or module in FILE_MODULES:
            return f"{module}.{func.attr}"
        return None
    # os.path.x is read-only inspection; a FileSystem's own methods (fs.open, self._fs.write) are the seam.
    if func.attr in PATH_WRITE_METHODS and not _is_filesystem(func.value):
        return f".{func.attr}"
    return None


def _is_filesystem(value: ast.expr) -> bool:
    """`fs`, `self.fs`, `self._fs`, `storage.fs`...: an object of the FileSystem seam (by naming)."""
    name = value.attr if isinstance(value, ast.Attribute) else value.id if isinstance(value, ast.Name) else ""
    return name in ("fs", "_fs") or name.endswith("filesystem") or name.endswith("FILESYSTEM")


def _allowed(filename: str, function: str, call: str) -> bool:
    return any(key in ALLOWED for key in
               ((filename, function, call), (filename, "*", call), (filename, function, "*"), (filename, "*", "*")))


def test_impl_makes_every_file_system_call_through_impl_fs():
    offending = []
    for path in sorted(IMPL.glob("*.py")):
        for line, function, call in raw_file_calls(path.read_text(encoding="utf-8"), str(path)):
            if not _allowed(path.name, function, call):
                offending.append(f"impl/{path.name}:{line}: {call}(...) in {function}()")
    assert not offending, ("file system calls that bypass impl/fs.py (the simulated disk cannot fault them); "
                           "make them through a FileSystem, or add an argued entry to ALLOWED:\n  "
                           + "\n  ".join(offending))


def test_every_allowed_exception_still_exists():
    """A stale allow-list entry would silently allow the next raw call there."""
    calls = {(path.name, function, call) for path in IMPL.glob("*.py")
             for _, function, call in raw_file_calls(path.read_text(encoding="utf-8"), str(path))}
    for filename, function, call in ALLOWED:
        assert any(f == filename and function in ("*", fn) and call in ("*", c) for f, fn, c in calls), \
            f"ALLOWED lists {filename}:{function}:{call}, which impl/ no longer makes: remove the entry"


@pytest.mark.parametrize("snippet, expected", [
    ("def f(p):\n    with open(p, 'w') as f: f.write('x')\n", "open"),
    ("import os\ndef f(p):\n    os.replace(p + '.tmp', p)\n", "os.replace"),
    ("import os as o\ndef f(fd):\n    o.write(fd, b'x')\n", "os.write"),
    ("from os import fsync\ndef f(fd):\n    fsync(fd)\n", "os.fsync"),
    ("import shutil\ndef f(a, b):\n    shutil.copy(a, b)\n", "shutil.copy"),
    ("from pathlib import Path\ndef f(p):\n    Path(p).write_text('x')\n", ".write_text"),
])
def test_the_check_sees_each_kind_of_raw_call(snippet, expected):
    assert [call for _, _, call in raw_file_calls(snippet, "<snippet>")] == [expected]


@pytest.mark.parametrize("snippet", [
    "import os\ndef f(fs, p):\n    fd = fs.open(p, os.O_RDONLY)\n    fs.close(fd)\n",
    "def f(self, p):\n    self._fs.replace(p + '.tmp', p)\n",
    "import os\ndef f(p):\n    return os.path.join(p, 'x'), os.path.abspath(p)\n",
])
def test_calls_through_the_seam_pass(snippet):
    assert raw_file_calls(snippet, "<snippet>") == []
