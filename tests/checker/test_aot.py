"""The kernels compiled ahead of time (checker/fast/aot.py): what a `--successors fast` process runs.

The module is built from the same functions as Numba's JIT kernels, and every fast search of
tests/checker/test_fast.py and tests/checker/test_engine.py runs it (it is what a user gets); here: a fast
process loads it without importing Numba and reproduces a pin; its functions refuse
arguments of the wrong type instead of crashing; its name follows the kernel sources; a failed
build falls back to Numba's JIT and says so (the JIT's searches, a minute of Numba's compiling, and
building into an empty cache directory are under -m deep; the default run builds the user's cache once).
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from hwm.checker.auto_backend import BUILD_CPU_SECONDS, BUILD_ESTIMATE
from hwm.checker.fast import aot
from hwm.checker.run import CheckRequest, run
from tests.pinned import PINNED, config_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = ("raft", 3, 4, 1, 1, "rpc", True)  # bench/tla/HwmRaftSym.cfg

SEARCH = """
import json, sys
from hwm.checker.run import CheckRequest, run
from tests.pinned import config_of
preset, config, symmetry = config_of({key!r})
report = run(CheckRequest(preset, config, symmetry=symmetry, successors="fast"))
from hwm.checker.fast.aot import kernels
print(json.dumps({{"states": report.states, "transitions": report.transitions, "origin": kernels().origin,
                  "numba": "numba" in sys.modules}}))
"""


def fast_search(env: dict | None = None) -> tuple[dict, str]:
    """A fast search of the pinned HwmRaftSym configuration in a fresh process: its figures, its stderr."""
    done = subprocess.run([sys.executable, "-c", SEARCH.format(key=KEY)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT, **(env or {})}, timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_fast_search_runs_the_compiled_module_without_importing_numba():
    found, _ = fast_search()
    assert found["origin"].startswith("compiled ahead of time"), found["origin"]
    assert not found["numba"]
    assert (found["states"], found["transitions"]) == (PINNED[KEY]["states"], PINNED[KEY]["transitions"])


def test_the_modules_functions_refuse_wrong_arguments():
    compiled = aot.kernels()
    assert compiled.ahead_of_time, compiled.origin
    P, rows = np.zeros(31, dtype=np.int64), np.zeros((1, 8), dtype=np.uint8)
    codes, first = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    compiled.first_states(P, rows, codes, first)  # right: runs
    with pytest.raises(TypeError, match="argument 0 must be a C-contiguous 1-D int64 array, not a 1-D int32"):
        compiled.first_states(P.astype(np.int32), rows, codes, first)
    with pytest.raises(TypeError, match=r"argument 1 .* not a 2-D uint8 array \(strided\)"):
        compiled.first_states(P, np.zeros((1, 16), dtype=np.uint8)[:, ::2], codes, first)
    with pytest.raises(TypeError, match="takes 4 arguments, not 3"):
        compiled.first_states(P, rows, codes)
    with pytest.raises(TypeError):
        compiled.fingerprints(P, rows, np.zeros((1, 3), dtype=np.int64), 2.5, np.zeros(1, dtype=np.uint64))


def test_the_modules_name_follows_the_kernel_sources(tmp_path, monkeypatch):
    for name in aot.SOURCES:
        shutil.copy(os.path.join(aot.HERE, name), tmp_path / name)
    monkeypatch.setattr(aot, "HERE", str(tmp_path))
    key = aot.source_key()
    assert key == aot.source_key()
    kernels = tmp_path / "kernels.py"
    source = kernels.read_text()
    kernels.write_text(source + "\n# one more line\n")
    assert aot.source_key() != key  # an older cache holds no module of this name: it is built again
    kernels.write_text(source)
    assert aot.source_key() == key
    monkeypatch.setenv("HWM_CACHE_DIR", str(tmp_path / "cache"))
    assert aot.module_path().startswith(str(tmp_path / "cache" / "kernels" / f"hwm_kernels_{key}"))


def test_a_failed_build_runs_numbas_jit_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HWM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(aot.sys, "executable", "/bin/false")  # the build's child fails at once
    compiled = aot.kernels()
    assert not compiled.ahead_of_time and "the build failed" in compiled.origin
    failed = aot.module_path() + ".failed"
    assert os.path.exists(failed)
    assert "running them under Numba's JIT instead" in capsys.readouterr().err
    assert all(hasattr(getattr(compiled, name), "py_func") for name in aot.ENTRY_POINTS)  # Numba's dispatchers
    # A failure is remembered, not retried by every process, until its file is deleted.
    aot._LOADED.clear()
    monkeypatch.setattr(aot.subprocess, "Popen", lambda *a, **k: pytest.fail("built again"))
    assert not aot.kernels().ahead_of_time
    os.remove(failed)
    aot._LOADED.clear()
    with pytest.raises(pytest.fail.Exception, match="built again"):
        aot.kernels()
    aot._LOADED.clear()


# The JIT's kernels compiled in a test process take Numba a minute of CPU (the module's build, once per
# machine, is what users and the rest of the suite run): searches on them are under -m deep.
@pytest.mark.deep
def test_the_jits_kernels_give_the_pinned_report_where_the_build_fails(tmp_path, monkeypatch, capsys):
    from hwm.model.registry import build_model
    from hwm.properties.protocol import PRESETS

    monkeypatch.setenv("HWM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(aot.sys, "executable", "/bin/false")
    aot._LOADED.clear()
    try:
        assert not aot.kernels().ahead_of_time
        preset, config, symmetry = config_of(KEY)
        model = build_model(PRESETS[preset].protocol, config)
        report = run(CheckRequest("model", symmetry=symmetry, successors="fast"), model=model)
        assert (report.states, report.transitions) == (PINNED[KEY]["states"], PINNED[KEY]["transitions"])
    finally:
        aot._LOADED.clear()


@pytest.mark.deep
def test_hwm_check_runs_the_jit_where_the_build_fails_and_by_default_after_it_with_the_same_counts(
        tmp_path, monkeypatch):
    """A machine without a C compiler: the first check that builds the kernels (--successors fast here;
    the tour by default) says the build failed and runs the same kernels under Numba's JIT; every later
    `hwm check` (the compiled backend by default) runs the JIT too. Same counts as the pin. The JIT's
    kernels are compiled in this process by the test above, when run with it (under -m deep)."""
    from click.testing import CliRunner

    from hwm.cli import main

    monkeypatch.setenv("HWM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(aot.sys, "executable", "/bin/false")  # the build's child fails at once, as cc would
    pinned = PINNED[("raft", 2, 2, 1, 1, "rpc", True)]
    for successors in (["--successors", "fast"], []):
        aot._LOADED.clear()
        try:
            result = CliRunner().invoke(main, ["check", "--protocol", "raft", "--servers", "2", "--max-generation",
                                               "2", "--json", *successors], catch_exceptions=False)
        finally:
            aot._LOADED.clear()
        assert result.exit_code == 0, result.output
        assert "running them under Numba's JIT instead (same results" in result.stderr, successors
        report = json.loads(result.stdout)
        assert report["successors"] == "fast"
        assert (report["distinct_states"], report["transitions"]) == (pinned["states"], pinned["transitions"])


def test_a_cache_that_cannot_be_written_runs_numbas_jit_and_says_so(tmp_path, monkeypatch, capsys):
    (tmp_path / "hwm").write_text("a file where the cache directory would be")
    monkeypatch.setenv("HWM_CACHE_DIR", str(tmp_path / "hwm"))
    compiled = aot.kernels()
    assert not compiled.ahead_of_time and "cannot write" in compiled.origin
    assert "cannot write" in capsys.readouterr().err
    aot._LOADED.clear()


def test_an_unknown_kernels_choice_is_refused(monkeypatch):
    monkeypatch.setenv("HWM_KERNELS", "fast")
    with pytest.raises(ValueError, match="HWM_KERNELS must be aot or jit, not 'fast'"):
        aot.kernels()


@pytest.mark.deep
def test_an_empty_cache_builds_the_module_on_first_use(tmp_path):
    found, stderr = fast_search({"HWM_CACHE_DIR": str(tmp_path)})
    assert "compiling the fast backend's kernels" in stderr
    assert found["origin"].startswith(f"compiled ahead of time ({tmp_path}")
    assert not found["numba"]  # the build ran in a child process
    assert (found["states"], found["transitions"]) == (PINNED[KEY]["states"], PINNED[KEY]["transitions"])
    again, stderr = fast_search({"HWM_CACHE_DIR": str(tmp_path)})
    assert "compiling" not in stderr and again == found


def test_users_are_told_one_build_estimate_in_the_readme_the_help_and_on_stderr(tmp_path, monkeypatch, capsys):
    from click.testing import CliRunner

    from hwm.cli import main

    readme = " ".join(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().split())
    help_text = " ".join(CliRunner().invoke(main, ["check", "--help"]).output.split())
    assert f"about {BUILD_CPU_SECONDS} CPU seconds" in readme
    assert BUILD_ESTIMATE in help_text
    for other in ("about 20 s", "about a minute", "about 30 CPU s", "about 35 CPU s"):
        assert other not in readme and other not in help_text, other
    monkeypatch.setenv("HWM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(aot.sys, "executable", "/bin/false")  # the build starts, and fails at once
    aot._build_once(aot.module_path(), aot.module_path() + ".failed")
    assert f"(once for this version of their sources: {BUILD_ESTIMATE})" in capsys.readouterr().err


def test_the_build_writes_progress_lines_while_it_runs_off_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(aot, "BUILD_PROGRESS_SECONDS", 0.1)
    returncode, output = aot._run_with_progress([sys.executable, "-c", "import time; time.sleep(0.45); print('built')"],
                                                dict(os.environ))
    assert (returncode, output.strip()) == (0, "built")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2 and all(line.startswith("hwm: compiling the fast backend's kernels: ") and
                                   line.endswith(f" s ({BUILD_ESTIMATE})") for line in lines), lines
