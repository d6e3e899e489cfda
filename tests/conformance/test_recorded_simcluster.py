"""Recorded runs of the simulated cluster (`build_cluster(..., record=FILE)`), validated against the model:
raft's runs are raft behaviours; a planted bug (a follower that truncates its log to its own HWM
on restart) fails validation at a restart."""

import pytest

from hwm.bridge.simcluster import build_cluster
from hwm.checker.model_events import random_actions
from hwm.checker.validate import validate
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.events import load
from hwm.properties.protocol import resolve

CONFIG = Config(servers=3, max_generation=5, max_log=3, max_crashes=2)
RAFT = resolve("raft")[1]


def recorded(protocol, seed, path):
    """The recording of a random walk of `protocol`'s model, run on the simulated cluster."""
    cluster = build_cluster(protocol, CONFIG, record=str(path))
    for action in random_actions(build_model(protocol, CONFIG), 40, seed):
        cluster.apply(action)
    cluster.recorder.close()
    return load(path)


@pytest.mark.parametrize("seed", range(4))
def test_recorded_runs_of_the_simulated_raft_cluster_are_raft_behaviours(tmp_path, seed):
    header, events = recorded(RAFT, seed, tmp_path / "run.jsonl")
    assert any(e.crash for e in events) or any(e.read for e in events)
    verdict = validate(RAFT, header, events)
    assert verdict.valid, verdict.discrepancy.describe()


def test_a_cluster_that_truncates_to_its_own_hwm_is_caught_at_a_restart(tmp_path):
    mutant = resolve("raft-truncate-to-own-hwm")[1]
    caught = []
    for seed in range(12):
        header, events = recorded(mutant, seed, tmp_path / f"run{seed}.jsonl")
        verdict = validate(RAFT, header, events)
        if not verdict.valid:
            caught.append(verdict.discrepancy.event)
        assert validate(mutant, header, events).valid
    assert caught and all(event.restart for event in caught)
