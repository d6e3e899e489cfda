"""Hypothesis settings profiles for the whole suite.

- `ci` (the default run): derandomized, so a run is reproducible and a failure is seen by everyone;
  no deadline (the machine is shared); bounded example counts.
- `deep` (`pytest -m deep`, or HYPOTHESIS_PROFILE=deep with any selection): many random examples.

A test that sets its own max_examples keeps it; the conformance machines inherit the profile's.
`--hypothesis-profile NAME` or HYPOTHESIS_PROFILE=NAME picks a profile explicitly.
"""

from __future__ import annotations

import compileall
import os
import sys
import threading
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=100, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=2000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])


ROOT = Path(__file__).resolve().parent.parent


def _compile_the_sources_once() -> None:
    """The suite starts some hundreds of Python processes (nodes, the command line, clients). Where the
    environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, `python -B`), each of them compiled the
    project's modules from source again: about 0.35 CPU s for `hwm node`'s, a minute or two of the run's
    CPU in all. Compiled here once, before the workers start, they are read by every process (which
    still writes nothing itself)."""
    with open(ROOT / "pyproject.toml", "rb") as project:
        folders = sorted(set(tomllib.load(project)["tool"]["setuptools"]["package-dir"].values()))
    for folder in folders:
        compileall.compile_dir(ROOT / folder, quiet=2, workers=0)


def pytest_configure(config):
    if sys.flags.dont_write_bytecode and not hasattr(config, "workerinput"):
        _compile_the_sources_once()
    # The Ctrl-C tests need Ctrl-C to reach the processes they start. A suite started in the background
    # by a shell without job control (`cmd &` in a script) inherits SIGINT ignored, and so would they.
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    chosen = config.getoption("hypothesis_profile", None) or os.environ.get("HYPOTHESIS_PROFILE")
    if not chosen:
        marks = config.option.markexpr or ""
        chosen = "deep" if "deep" in marks and "not deep" not in marks else "ci"
    settings.load_profile(chosen)
    if settings.get_profile(chosen).derandomize:  # the same examples whichever tests ran before in a worker
        from hwm.bridge.conformance.hunting import same_draws_in_every_process
        same_draws_in_every_process()


# Which tests share a worker under pytest-xdist (`--dist loadgroup`): by default a file's tests stay
# together (their module fixtures start once); these groups join files that share costly state in
# one process: the Spark session, the browser, and the compiled kernels with the memoised searches
# (tests/explored.py) that the engine, backend and catalogue tests all compare against; and the
# node programs of tests/nodes, whose timed process checks would otherwise share the cores with each other;
# and the real servers of tests/servers, whose runs clean up what a killed run left on the machine (its
# folders, processes and nftables table), so that two at once would clean up each other's.
_GROUPS = {"tests/spark/": "spark", "tests/teach/": "browser", "tests/nodes/": "nodes", "tests/servers/": "servers",
           "tests/checker/test_engine.py": "explored", "tests/checker/test_fast.py": "explored",
           "tests/properties/test_catalogue.py": "explored"}


# tryfirst: xdist's own hook turns the marker into the node id's "@group" suffix, so the marker must
# be there before that hook runs (without it no test was grouped at all).
# The longest groups go to the workers first (longest-first scheduling): started last, the
# crash/restart simulation's 40 s ran alone at the end of the run. The groups are named here by
# their measured length on a quiet two-core machine, longest first; the rest follow in collection
# order. xdist's own reordering (by the number of tests in a group) is off (pyproject.toml's
# --no-loadscope-reorder): it put this 50 s single-test file last.
_LONGEST_FIRST = ("nodes", "explored", "spark", "tests/sim/test_dst.py", "browser", "tests/checker/test_aot.py",
                  "tests/proofs/test_proofs.py", "servers")


def pytest_xdist_auto_num_workers(config):
    """`-n auto`'s worker count: one more than the cores this process may use. A good part of the suite
    waits (on node and server processes, the browser, the JVM, the wall clock); with one worker per
    core those waits left the cores idle. Measured on a shared 2-core machine (tests/nodes, impl, teach
    and cli, 916 tests): 342 s with two workers, 219 s with three, 231 s with four, the same CPU time."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    groups = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        groups[item] = next((g for prefix, g in _GROUPS.items() if path.startswith(prefix)), path)
        item.add_marker(pytest.mark.xdist_group(groups[item]))

    def rank(item) -> int:
        return next((k for k, name in enumerate(_LONGEST_FIRST) if groups[item] == name), len(_LONGEST_FIRST))
    items.sort(key=rank)  # stable: the order within each file is kept


def _signal_masks() -> dict[str, int]:
    """This thread's ignored and blocked signals as the kernel has them (a library can change them
    without Python's signal module knowing); empty where /proc is missing."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/status") as status:
            return {line[:6]: int(line[7:], 16) for line in status if line.startswith(("SigIgn:", "SigBlk:"))}
    except OSError:
        return {}


@pytest.fixture(autouse=True)
def _signal_handlers_kept():
    """A test leaves SIGTERM's handler, and whether the kernel ignores or blocks SIGINT and SIGTERM, as it
    found them: what is left behind in a worker process is inherited by the processes later tests start
    (a SIGTERM handler made forked workers outlive terminate(), and the suite hung). SIGINT's Python
    handler is not watched: the Spark session's and asyncio's own come and go outside the tests."""
    import signal

    bits = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    before, masks = signal.getsignal(signal.SIGTERM), _signal_masks()
    yield
    after = signal.getsignal(signal.SIGTERM)
    changed = [f"SIGTERM's handler ({before} -> {after})"] if after is not before else []
    changed += [f"{name} {masks[name] & bits:#x} -> {now & bits:#x}" for name, now in _signal_masks().items()
                if name in masks and (now ^ masks[name]) & bits]
    signal.signal(signal.SIGTERM, before)
    assert not changed, f"the test changed {'; '.join(changed)}"
