"""The Spark engine's executor side (`checker.spark_levels`) without Spark: the levels' records routed
between partitions in this process, as `partitionBy` routes them, must give the local engine's counts
and first discoveries whatever the number of partitions."""

import numpy as np
import pytest

from hwm.checker.backend import make_backend
from hwm.checker.engine import CheckOptions, Search
from hwm.checker.spark_levels import Candidates, Level, LevelKeys, Summary, Visited, advance, as_rows
from hwm.model.registry import build_model
from hwm.properties.protocol import PRESETS
from tests.pinned import config_of


def search(model, symmetry: bool, successors: str, partitions: int, count_states: bool = False):
    """(states, transitions, depth, {name: (level, key, target, source)}, summaries) of a routed search."""
    backend = make_backend(successors, model, symmetry)
    props = {p.name: p for p in model.properties}
    init = backend.initial()
    init_fp = int(backend.fingerprints(init)[0])
    inbox = {p: [Visited.empty()] for p in range(partitions)}
    inbox[init_fp % partitions].append(Candidates(as_rows(backend, init), np.array([init_fp], np.uint64),
                                                  np.zeros(1, np.uint64), np.zeros(1, np.int64),
                                                  np.zeros(1, np.int64)))
    unfound = set(props)
    found, summaries = {}, []
    states = transitions = depth = level = 0
    while True:
        spec = Level(level, partitions, tuple(n for n in unfound if props[n].on == "state"),
                     tuple(n for n in unfound if props[n].on == "step"), True, count_states)
        outbox = {p: [] for p in range(partitions)}
        done = []
        for p in range(partitions):
            out, summary = advance(p, inbox[p], backend, props, spec)
            for dest, record in out:
                outbox[dest].append(record)
            done.append(summary)
        summaries += done
        inbox = outbox
        best = {}
        for s in done:
            for name, key, step, target, source, finding in s.discoveries:
                if name not in best or (key, step) < best[name][0]:
                    best[name] = ((key, step), level, target, source)
        for name, (_, at, target, source) in best.items():
            found[name] = (at, target, source)
            unfound.discard(name)
        new = sum(s.new for s in done)
        transitions += sum(s.transitions for s in done)
        if not new:
            return states, transitions, depth, found, summaries
        states, depth, level = states + new, level, level + 1


CASES = [("kip101", 2, 2, 1, 1, "rpc", True), ("kip101", 2, 2, 1, 1, "rpc", False),
         ("raft", 3, 1, 1, 1, "async", True)]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("key", CASES, ids=lambda k: "-".join(map(str, k)))
def test_routed_levels_equal_the_local_engine(key, partitions):
    preset, config, symmetry = config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    local = Search(model, CheckOptions(symmetry=symmetry, successors="fast"))
    report = local.run()
    states, transitions, depth, found, _ = search(model, symmetry, "fast", partitions)
    assert (states, transitions, depth) == (report.states, report.transitions, report.depth)
    # Each property's first discovery in the local engine's order: the same target and source states.
    assert {name: (target, source) for name, (_, target, source) in found.items()} == {
        name: (d.target, d.before) for name, d in local.tracker.found.items()}


def test_the_executors_build_no_state_object_per_state():
    """With the compiled backend a level's task builds no model state, at most one per discovery to word
    its finding; the reference backend builds them all (which shows the counter counts)."""
    preset, config, symmetry = config_of(("raft", 3, 1, 1, 1, "async", True))
    model = build_model(PRESETS[preset].protocol, config)
    states, *_, summaries = search(model, symmetry, "fast", 2, count_states=True)
    discoveries = sum(len(s.discoveries) for s in summaries)
    assert sum(s.states_built for s in summaries) <= 2 * discoveries < states / 10
    preset, config, symmetry = config_of(("kip101", 2, 2, 1, 1, "rpc", True))
    states, *_, summaries = search(build_model(PRESETS[preset].protocol, config), symmetry, "reference", 2,
                                   count_states=True)
    assert sum(s.states_built for s in summaries) >= states


def test_a_partition_without_its_visited_set_is_an_error():
    model = build_model(PRESETS["raft"].protocol, config_of(("raft", 3, 1, 1, 1, "async", True))[1])
    backend = make_backend("fast", model, True)
    with pytest.raises(RuntimeError, match="partition 1 of level 3 got no visited set"):
        advance(1, [LevelKeys(0, np.zeros(0, np.int64))], backend, {}, Level(3, 2, (), (), True))
    assert Summary._fields[0] == "partition"
