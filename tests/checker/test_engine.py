"""The one breadth-first engine: agreement on every pin, whatever the worker count or backend.

Agreement means the whole report (counts, depth, bounds, verdicts and the shortest
traces step by step), not only the counts. The Spark engine's agreement is in
tests/spark; the fast backend joins every test here once it exists.
"""

import functools
import importlib
import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hwm.model.registry import build_model
from hwm.checker.backend import BackendUnavailable, ReferenceBackend, make_backend
from hwm.checker.engine import CheckOptions, PropertyTracker, Sampler, Search, VisitedSet, Visitor
from hwm.checker.run import CheckRequest, run
from hwm.properties.protocol import PRESETS, Protocol
from tests.explored import explore
from tests.pinned import PINNED, check_against_pins, config_of

ROOT = Path(__file__).resolve().parents[2]
FAST_PINS = [key for key, expected in PINNED.items() if not expected.get("deep")]
# Two workers on the larger non-deep pins (over 2,200 states) only under -m deep: 1.1-1.6 s each. The
# smaller ones cover every system and both networks, and chunks of 97 still cut their levels.
WORKER_PINS = [pytest.param(key, marks=pytest.mark.deep) if PINNED[key]["states"] > 2_200 else key
               for key in FAST_PINS]
# The fast backend is tested wherever it is installed; then every pin must have a fast path.
BACKENDS = ["reference"] + (["fast"] if importlib.util.find_spec("hwm.checker.fast") is not None else [])
NOT_COMPILED = importlib.import_module("hwm.checker.fast").NOT_COMPILED if "fast" in BACKENDS else {}
NOT_COMPILED_FLAGS = importlib.import_module("hwm.checker.fast").NOT_COMPILED_FLAGS if "fast" in BACKENDS else {}


def outcome(report) -> dict:
    """Everything engines must agree on: the report without its timing and backend name."""
    data = report.to_json()
    for timing_or_name in ("seconds", "setup_seconds", "successors"):
        del data[timing_or_name]
    return data


def model_of(key):
    preset, config, symmetry = config_of(key)
    return build_model(PRESETS[preset].protocol, config), preset, symmetry


@pytest.mark.parametrize("key", WORKER_PINS, ids=lambda k: "-".join(map(str, k)))
def test_two_workers_reproduce_one_worker_on_every_pin(key):
    """Same counts, verdicts and traces; small chunks so every level is cut many times."""
    model, preset, symmetry = model_of(key)
    one = explore(preset, model.config, symmetry)
    two = run(CheckRequest(preset, symmetry=symmetry, workers=2, chunk=97), model=model)
    assert outcome(two) == outcome(one)
    expected = PINNED[key]
    assert (two.states, two.transitions, two.depth) == (expected["states"], expected["transitions"], expected["depth"])


# The reference backend explores the larger default pins (over 3,000 states: each a second or more of
# the reference's search) only under -m deep; the fast backend still meets their counts and lengths by
# default (and tests/checker/test_fast.py compares its successors with the reference's state by state),
# and meets the reference's whole report (traces included) on them under deep. Every system keeps
# pins under 3,000 states that both backends explore by default.
LARGE = 3_000
BACKEND_PINS = [pytest.param(key, backend, marks=pytest.mark.deep)
                if backend == "reference" and PINNED[key]["states"] > LARGE else (key, backend)
                for key in FAST_PINS for backend in BACKENDS]


@pytest.mark.parametrize("key,backend", BACKEND_PINS,
                         ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v)))
def test_every_backend_reproduces_the_pins(key, backend):
    model, preset, symmetry = model_of(key)
    if backend == "reference":
        report = explore(preset, model.config, symmetry)
        # Every counterexample is a real trace: replaying its actions reproduces the finding.
        for result in report.results.values():
            if result.found:
                state = model.initial_state()
                for action in result.actions:
                    assert model.why_not(state, action) is None
                    before, state = state, model.apply(state, action)
                prop = next(p for p in model.properties if p.name == result.name)
                assert (prop.check(before, state) if prop.on == "step" else prop.check(state))
    elif model.protocol.system in NOT_COMPILED or any(  # said plainly, and listed in checker/fast (test_fast)
            getattr(model.protocol, flag) != getattr(Protocol(), flag) for flag in NOT_COMPILED_FLAGS):
        with pytest.raises(BackendUnavailable, match="no compiled"):
            run(CheckRequest(preset, symmetry=symmetry, successors=backend), model=model)
        return
    else:  # any other preset without a fast path fails here (BackendUnavailable), it is not skipped
        report = run(CheckRequest(preset, symmetry=symmetry, successors=backend), model=model)
        if PINNED[key]["states"] <= LARGE:
            assert outcome(report) == outcome(explore(preset, model.config, symmetry))
    check_against_pins(report, PINNED[key])


@pytest.mark.deep
@pytest.mark.skipif("fast" not in BACKENDS, reason="the fast backend is not installed")
@pytest.mark.parametrize("key", [k for k in FAST_PINS if PINNED[k]["states"] > LARGE],
                         ids=lambda k: "-".join(map(str, k)))
def test_fast_backend_reproduces_the_reference_report_on_large_pins(key):
    model, preset, symmetry = model_of(key)
    if model.protocol.system in NOT_COMPILED:
        pytest.skip(f"{model.protocol.system} has no compiled backend")
    report = run(CheckRequest(preset, symmetry=symmetry, successors="fast"), model=model)
    assert outcome(report) == outcome(explore(preset, model.config, symmetry))


LIMITS = ({}, {"max_states": 700}, {"max_depth": 6}, {"max_states": 1})


@functools.lru_cache(maxsize=None)
def one_worker_under(limits: int):
    """kip101's one-worker report under LIMITS[limits], once per process (every case compares with it)."""
    model, preset, _ = model_of(("kip101", 3, 3, 1, 1, "rpc", True))
    return run(CheckRequest(preset, **LIMITS[limits]), model=model)


# Chunks of one on the reference backend (2-3 s each) under -m deep: chunks of 5, 13 and 50 cut its
# levels as well, and the fast backend takes every chunk size by default.
@pytest.mark.parametrize("workers,chunk,backend", [
    pytest.param(w, c, b, marks=pytest.mark.deep) if (b, c) == ("reference", 1) else (w, c, b)
    for w, c in [(1, 1), (1, 5), (2, 1), (2, 13), (3, 50)] for b in BACKENDS])
def test_traces_and_limits_do_not_depend_on_workers_or_chunks(workers, chunk, backend):
    """A violating preset, with and without state and depth limits: the canonical parent wins."""
    model, preset, _ = model_of(("kip101", 3, 3, 1, 1, "rpc", True))
    for k, limits in enumerate(LIMITS):
        base = one_worker_under(k)
        other = run(CheckRequest(preset, workers=workers, chunk=chunk, successors=backend, **limits), model=model)
        assert outcome(other) == outcome(base), limits
    assert base.states == 4 and not base.complete  # max_states=1: the initial state's successors, then stop


def test_state_limit_stops_after_the_state_that_reaches_it():
    model, preset, _ = model_of(("kip101", 3, 3, 1, 1, "rpc", True))
    report = run(CheckRequest(preset, max_states=500), model=model)
    assert 500 <= report.states < 520 and not report.complete and not report.interrupted
    assert run(CheckRequest(preset, max_depth=6), model=model).depth == 6


class Counting(Visitor):
    """Sees every transition once, each new state once, in canonical order."""

    def __init__(self):
        self.transitions = 0
        self.new = 0
        self.depths = []
        self.expected_first = 1

    def in_worker(self, args, backend, frontier, expansion):
        return 0 if expansion is None else len(expansion.parents)

    def on_chunk(self, chunk, result):
        assert result == len(chunk.fingerprints)
        assert chunk.new_first == self.expected_first  # new states are numbered in canonical order
        self.expected_first += len(chunk.new)
        self.transitions += result
        self.new += len(chunk.new)
        self.depths.append(chunk.depth)
        search = chunk.search
        for k in range(len(chunk.new)):  # a new state is one level below its parent
            index = chunk.new_first + k
            parent = int(search.visited.parents[index])
            assert parent == chunk.first + int(chunk.parents[chunk.new[k]])
        assert len(chunk.new_states) == len(chunk.new)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_visitor_sees_every_transition_and_state_in_order(workers):
    model, preset, _ = model_of(("raft", 3, 3, 1, 1, "rpc", True))
    counting, sample = Counting(), Sampler(50)
    report = run(CheckRequest(preset, workers=workers, chunk=64), model=model, visitors=[counting, sample])
    assert counting.transitions == report.transitions == 11323
    assert counting.new == report.states - 1
    assert counting.depths == sorted(counting.depths) and counting.depths[-1] == report.depth
    # The sampler keeps the first states in breadth-first order: their fingerprints are the first indexes'.
    fps = [model.fingerprint(s, True) for s in sample.states]
    search = Search(model, CheckOptions(), [])
    search.run()
    assert fps == [int(f) for f in search.visited.fps[:50]]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_visited_set_is_a_set(compiled):
    """Against Python's set, with many equal low bits (long probe runs), zero, and growth."""
    rng = random.Random(7)
    visited, reference = VisitedSet(capacity=16, compiled=compiled), set()
    assert (visited.kernels is not None) == compiled
    for _ in range(60):
        size = rng.randrange(0, 400)
        keys = [rng.choice([0, rng.getrandbits(64), rng.getrandbits(8) << 56, rng.randrange(32)])
                for _ in range(size)]
        fps = np.array(keys, dtype=np.uint64)
        positions = visited.add(fps, np.zeros(size, dtype=np.int32))
        expected = []
        for k, key in enumerate(keys):
            if key not in reference:
                reference.add(key)
                expected.append(k)
        assert positions.tolist() == expected
        assert len(visited) == len(reference)
        probe = np.array(rng.sample(sorted(reference), min(5, len(reference))) + [rng.getrandbits(64)],
                         dtype=np.uint64)
        assert visited.contains(probe).tolist() == [int(p) in reference for p in probe]


def test_visited_set_and_frontier_are_packed():
    """At most 64 bytes per visited state for the visited set; frontiers are bytes, not objects."""
    model, preset, _ = model_of(("raft", 3, 4, 1, 1, "rpc", True))
    seen = []

    class Frontiers(Visitor):
        def on_chunk(self, chunk, result):
            seen.append(chunk.new_states)

    search = Search(model, CheckOptions(), [Frontiers()], preset)
    search.run()
    assert search.visited.nbytes / len(search.visited) <= 64
    assert all(batch._states is None for batch in seen)  # packed: decoded only while expanded
    assert sum(b.nbytes() for b in seen) / len(search.visited) < 64


class Interrupt(Visitor):
    """Ctrl-C arrives while the search runs (here: once it has seen 1000 states)."""

    def on_chunk(self, chunk, result):
        if len(chunk.search.visited) > 1000:
            raise KeyboardInterrupt


@pytest.mark.parametrize("workers", [1, 2])
def test_interrupt_gives_a_partial_report(workers):
    model, preset, _ = model_of(("raft", 3, 4, 1, 1, "rpc", True))
    report = run(CheckRequest(preset, workers=workers, chunk=100), model=model, visitors=[Interrupt()])
    assert report.interrupted and not report.complete
    assert 1000 < report.states < 6936
    assert report.results["EntryRead"].found  # what was found before the interrupt is kept, with its trace
    assert report.results["EntryRead"].length == 4
    assert report.to_json()["interrupted"] is True


def test_progress_reports_elapsed_time():
    seen = []
    model, preset, _ = model_of(("raft", 2, 2, 1, 1, "rpc", True))
    report = run(CheckRequest(preset), progress=seen.append, model=model)
    last = seen[-1]  # the last report comes when the search ends
    assert set(last) == {"depth", "states", "frontier", "states_per_second", "elapsed", "levels", "expanded"}
    assert last["states"] == report.states == 96 and last["elapsed"] > 0
    assert sum(last["levels"]) == 96 and len(last["levels"]) == report.depth + 1  # the initial state's level too
    assert last["expanded"] == 96
    assert not report.interrupted


def test_options_are_validated():
    for bad in ({"workers": 0}, {"workers": -2}, {"max_states": 0}, {"max_depth": -1}, {"chunk": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            CheckOptions(**bad)
    model, _, _ = model_of(("raft", 2, 2, 1, 1, "rpc", True))
    with pytest.raises(ValueError, match="unknown successor backend 'quick'"):
        make_backend("quick", model, True)
    assert isinstance(make_backend("reference", model, True), ReferenceBackend)


def test_tracker_is_the_first_visitor():
    model, _, _ = model_of(("raft", 2, 2, 1, 1, "rpc", True))
    search = Search(model, CheckOptions(), [])
    assert isinstance(search.visitors[0], PropertyTracker)


def _cli(*args):
    return subprocess.run([sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')", *args],
                          capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=120)


def test_cli_workers():
    small = ["check", "--protocol", "kip101", "--servers", "2", "--max-generation", "2", "--json"]
    one, two = _cli(*small), _cli(*small, "--workers", "2")
    assert one.returncode == two.returncode == 1  # kip101 violates ReadNeverTruncated
    first, second = json.loads(one.stdout), json.loads(two.stdout)
    for data in (first, second):
        del data["seconds"], data["setup_seconds"]
    assert first == second
    for bad in ("0", "-1", "many"):
        result = _cli(*small, "--workers", bad)
        assert result.returncode == 2 and "--workers" in result.stderr
    result = _cli(*small, "--workers", "2", "--engine", "simulation")
    assert result.returncode == 2 and "--workers applies to" in result.stderr


def test_unavailable_backend_says_why(monkeypatch):
    from hwm.checker import backend

    monkeypatch.setitem(backend.BACKENDS, "fast", "hwm.model.no_such_module:FastBackend")
    model, _, _ = model_of(("raft", 2, 2, 1, 1, "rpc", True))
    with pytest.raises(BackendUnavailable, match="fast successor backend cannot be loaded"):
        make_backend("fast", model, True)
