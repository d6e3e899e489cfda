"""The kernels compiled ahead of time: one extension module that loads without importing Numba.

Numba's JIT compiles the kernels (`checker.fast.kernels`, `checker.fast.properties`,
`checker.fast.probing`) on first use and caches the machine code, but a process
that runs them must still import Numba and LLVM, about 0.2 CPU s before the
first state: more than a small search takes. So on first use the same Python
functions are compiled ahead of time by Numba's AOT compiler (`numba.pycc`, with
the C compiler Python's extensions are built with) into an extension module in a
cache directory, and later processes load that module alone.

- The module's name holds a hash of the kernel sources (the files in `SOURCES`),
  of the Python and NumPy versions and of the platform, so a change to any
  kernel, or an upgrade, builds a new module instead of loading a stale one;
  old modules stay until the cache is cleared.
- The cache directory is `$HWM_CACHE_DIR/kernels`, else
  `$XDG_CACHE_HOME/hwm/kernels`, else `~/.cache/hwm/kernels`. Deleting it is
  always safe: the next `--successors fast` run builds the module again.
- The build runs in a child process, once per machine and source version (a
  lock file keeps concurrent processes from building twice), announced with
  its estimate (`BUILD_ESTIMATE`) and a progress line on stderr, and is reported
  as a one-off cost (`checker.fast.compile_seconds()`), like Numba's compiles.
- When the build fails (no C compiler, say), the reason is kept next to where
  the module would be (`<module>.failed`), printed, and the kernels run under
  Numba's JIT instead: the same functions, so the same results, only a slower
  start. Deleting that file tries the build again.
- `HWM_KERNELS=jit` skips the module and runs Numba's JIT (what tests use to
  check both paths).

The module's functions do not check their arguments (a wrong dtype would crash
the process), so each is wrapped in a check of every array's dtype, dimensions
and layout against `ENTRY_POINTS`, the one place where the signatures live.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import operator
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager

import numpy as np

from hwm.checker.auto_backend import BUILD_ESTIMATE

# The kernels a caller runs: name -> (module, result, arguments); an argument is (dtype, dimensions),
# 0 dimensions for an integer. Arrays are C-contiguous.
ENTRY_POINTS = {
    "expand": ("hwm.checker.fast.kernels", "int64",
               (("int64", 1), ("uint8", 2), ("int64", 1), ("int64", 1), ("int32", 1), ("int32", 2), ("int32", 3),
                ("int64", 2), ("int64", 0), ("uint8", 2), ("int64", 1), ("int32", 1), ("uint64", 1), ("int64", 1))),
    "fingerprints": ("hwm.checker.fast.kernels", "void",
                     (("int64", 1), ("uint8", 2), ("int64", 2), ("int64", 0), ("uint64", 1))),
    "first_states": ("hwm.checker.fast.properties", "void", (("int64", 1), ("uint8", 2), ("int64", 1), ("int64", 1))),
    "first_steps": ("hwm.checker.fast.properties", "void",
                    (("int64", 1), ("uint8", 2), ("uint8", 2), ("int64", 1), ("int64", 1), ("int64", 1))),
    "contains": ("hwm.checker.fast.probing", "void", (("uint64", 1), ("uint64", 1), ("bool", 1))),
    "place": ("hwm.checker.fast.probing", "int64", (("uint64", 1), ("uint64", 1))),
}
# Every source the module is compiled from (this file holds the signatures): a change to one is a new module.
SOURCES = ("aot.py", "fields.py", "blake2b.py", "kernels.py", "properties.py", "probing.py")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the directory that holds the `model` package

BUILD_PROGRESS_SECONDS = 10.0  # between the build's progress lines off a terminal (a CI log)

_LOADED: dict = {}  # this process's Kernels, by (HWM_KERNELS, cache directory)


class Kernels:
    """The entry points, by name, and where they come from (`origin`, for reports)."""

    def __init__(self, functions: dict, origin: str, ahead_of_time: bool, provisional: bool = False):
        self.__dict__.update(functions)
        self.origin = origin
        self.ahead_of_time = ahead_of_time
        self.provisional = provisional  # Numba's JIT only because no build was asked for yet


def cache_dir() -> str:
    base = os.environ.get("HWM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "hwm")
    return os.path.join(base, "kernels")


def source_key() -> str:
    """The hash the module's name holds: the kernel sources, the interpreter, NumPy and the platform."""
    digest = hashlib.sha256()
    # Through the loader: the package may be imported from a zip (Spark's executors), whose loader knows only
    # its own spelling of the archive's path, the one it gave this module (not `HERE`'s abspath).
    where = HERE if os.path.isdir(HERE) else os.path.dirname(__spec__.origin)
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + __spec__.loader.get_data(os.path.join(where, name)) + b"\0")
    digest.update(f"{sys.implementation.cache_tag} {np.__version__} {sys.platform} "
                  f"{importlib.machinery.EXTENSION_SUFFIXES[0]}".encode())
    return digest.hexdigest()[:16]


def module_path() -> str:
    return os.path.join(cache_dir(), f"hwm_kernels_{source_key()}{importlib.machinery.EXTENSION_SUFFIXES[0]}")


def kernels(build: bool = True) -> Kernels:
    """The kernels: from the module compiled ahead of time (built now if `build` and there is none
    yet), else Numba's JIT. Loaded once per process."""
    where = (os.environ.get("HWM_KERNELS"), cache_dir())
    if where not in _LOADED or (build and _LOADED[where].provisional):
        _LOADED[where] = _load(build)
    return _LOADED[where]


def _load(build: bool) -> Kernels:
    wanted = os.environ.get("HWM_KERNELS") or "aot"
    if wanted not in ("aot", "jit"):
        raise ValueError(f"HWM_KERNELS must be aot or jit, not {wanted!r}")
    if wanted == "jit":
        return _jit("HWM_KERNELS=jit")
    path = module_path()
    failed = path + ".failed"
    if not os.path.exists(path):
        if not build:
            return _jit("no module built yet", provisional=True)
        try:
            unbuilt = None if os.path.exists(failed) else _build_once(path, failed)
        except OSError as error:  # the cache directory cannot be written
            unbuilt = f"cannot write {os.path.dirname(path)}: {error}"
        if unbuilt:  # not a verdict on the sources: the next process tries again
            print(f"hwm: no compiled kernels ({unbuilt}); running them under Numba's JIT instead (same results, "
                  f"slower start).", file=sys.stderr)
            return _jit(unbuilt)
        if os.path.exists(failed):
            with open(failed) as reason:
                why = reason.read().strip().splitlines() or ["no reason given"]
            print(f"hwm: no compiled kernels ({why[-1]}); running them under Numba's JIT instead (same results, "
                  f"slower start). Delete {failed} to try the build again.", file=sys.stderr)
            return _jit(f"the build failed, see {failed}")
    try:
        module = _import(path)
    except ImportError as error:
        print(f"hwm: could not load the compiled kernels {path} ({error}); running them under Numba's JIT "
              f"instead. Delete the file to build it again.", file=sys.stderr)
        return _jit(f"{path} did not load")
    functions = {name: _checked(name, getattr(module, name), arguments)
                 for name, (_, _, arguments) in ENTRY_POINTS.items()}
    return Kernels(functions, f"compiled ahead of time ({path})", True)


def _jit(why: str, provisional: bool = False) -> Kernels:
    functions = {name: getattr(importlib.import_module(module), name) for name, (module, _, _) in ENTRY_POINTS.items()}
    return Kernels(functions, f"Numba's JIT ({why})", False, provisional)


def _import(path: str):
    name = os.path.basename(path).split(".")[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise ImportError(f"not an extension module: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _checked(name: str, function, arguments):
    """`function` after a check of its arguments against their signature (the module does none)."""
    expected = [(np.dtype(np.bool_ if dtype == "bool" else dtype), dimensions) for dtype, dimensions in arguments]
    integers = [k for k, (_, dimensions) in enumerate(arguments) if dimensions == 0]

    def call(*values):
        if len(values) != len(expected):
            raise TypeError(f"{name} takes {len(expected)} arguments, not {len(values)}")
        for k, (value, (dtype, dimensions)) in enumerate(zip(values, expected)):
            if dimensions and not (isinstance(value, np.ndarray) and value.dtype == dtype
                                   and value.ndim == dimensions and value.flags.c_contiguous):
                got = (f"a {value.ndim}-D {value.dtype} array{'' if value.flags.c_contiguous else ' (strided)'}"
                       if isinstance(value, np.ndarray) else type(value).__name__)
                raise TypeError(f"{name}: argument {k} must be a C-contiguous {dimensions}-D {dtype} array, "
                                f"not {got}")
        if integers:
            values = list(values)
            for k in integers:
                values[k] = operator.index(values[k])
        return function(*values)

    call.__name__ = call.__qualname__ = name
    return call


@contextmanager
def exclusive(lock_path: str):
    """Hold the machine-wide lock named by file `lock_path` (created if missing), so that of the
    processes that compile the kernels at once one does and the others wait and load its work.
    Where there are no advisory locks, at worst two processes compile the same kernels."""
    with open(lock_path, "a") as lock:
        try:
            import fcntl
            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:
            pass
        yield


def _build_once(path: str, failed: str) -> str | None:
    """Build the module in a child process unless another process built it meanwhile (lock file). A
    failed build leaves its reason in `failed`; a build cut short by a signal returns why, leaving none."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    with exclusive(path + ".lock"):
        if os.path.exists(path) or os.path.exists(failed):
            return None
        print(f"hwm: compiling the fast backend's kernels into {path} (once for this version of their "
              f"sources: {BUILD_ESTIMATE})", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "hwm.checker.fast.aot", directory, os.path.basename(path).split(".")[0]]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
        try:
            returncode, output = _run_with_progress(command, env)
        except OSError as error:
            reason = str(error)
        else:
            if returncode == 0 and os.path.exists(path):
                return None
            if returncode < 0:  # killed (out of memory, say)
                return f"the build was killed by signal {-returncode}"
            reason = output.strip() or f"exit status {returncode}"
        with open(failed, "w") as out:
            out.write(f"{' '.join(command)}\n{reason}\n")
    return None


def _run_with_progress(command: list[str], env: dict) -> tuple[int, str]:
    """Run the build's child, telling stderr how long it has run (redrawn each second on a terminal, a
    line every BUILD_PROGRESS_SECONDS off one), so a first use is not a silent minute. Ctrl-C stops it."""
    import time

    tty = sys.stderr.isatty()
    every = 1.0 if tty else BUILD_PROGRESS_SECONDS
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as output:  # a file, not a pipe: a chatty compiler cannot block
        child = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT, text=True)
        try:
            while True:
                try:
                    returncode = child.wait(timeout=every)
                    break
                except subprocess.TimeoutExpired:
                    line = (f"hwm: compiling the fast backend's kernels: {time.monotonic() - started:.0f} s "
                            f"({BUILD_ESTIMATE})")
                    sys.stderr.write(f"\r{line}" if tty else line + "\n")
                    sys.stderr.flush()
        finally:
            if child.poll() is None:  # interrupted: no half-built module is left running
                child.kill()
                child.wait()
            if tty:
                sys.stderr.write("\r" + " " * 110 + "\r")
                sys.stderr.flush()
        output.seek(0)
        return returncode, output.read()


def signature(result: str, arguments) -> str:
    """Numba's spelling of an entry point's signature, e.g. `void(int64[::1], uint8[:, ::1], int64)`."""
    types = [("bool_" if dtype == "bool" else dtype)
             + (f"[{', '.join([':'] * (dimensions - 1) + ['::1'])}]" if dimensions else "")
             for dtype, dimensions in arguments]
    return f"{result}({', '.join(types)})"


def build(directory: str, name: str) -> None:
    """Compile every entry point into extension module `name` in `directory` (Numba's pycc)."""
    from numba.pycc import CC

    work = tempfile.mkdtemp(prefix=f".{name}-", dir=directory)
    try:
        compiler = CC(name, source_module=__name__)
        compiler.output_dir = work
        for function, (module, result, arguments) in ENTRY_POINTS.items():
            compiler.export(function, signature(result, arguments))(
                getattr(importlib.import_module(module), function).py_func)
        compiler.compile()
        # Whole or not at all: a process that finds the file may load it.
        os.replace(os.path.join(work, compiler.output_file), os.path.join(directory, compiler.output_file))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    build(*sys.argv[1:])
