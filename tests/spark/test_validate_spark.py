"""`hwm validate DIR --engine spark`: the same table as the local engine (verdicts, first bad
events, model coverage), on a directory of recorded runs, Spark in local[2]."""

import pytest

from hwm.checker.coverage import reachable
from hwm.checker.model_events import random_actions, run_events
from hwm.checker.validate_spark import coverage_table
from hwm.model.actions import from_step
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.events import dumps
from hwm.properties.protocol import resolve
from hwm.properties.trace import load

pytestmark = pytest.mark.spark

BOUNDS = {"servers": 3, "max_generation": 2, "max_log": 1, "max_crashes": 1}


def runs():
    _, raft = resolve("raft")
    model = build_model(raft, Config(**BOUNDS))
    out = [(f"raft-{seed:02}", dumps(*run_events(model, list(random_actions(model, 20, seed))))) for seed in range(6)]
    trace = load("counterexamples/raft-truncate-to-own-hwm.json")
    mutant = build_model(resolve(trace.protocol)[1], Config.from_mapping(trace.config))
    out.append(("mutant", dumps(*run_events(mutant, [from_step(s) for s in trace.steps]))))
    return out


def test_spark_and_local_give_the_same_verdicts_and_coverage(spark):
    space = reachable(resolve("raft")[1], Config(**BOUNDS))
    local = coverage_table(runs(), "raft", BOUNDS, space=space)
    distributed = coverage_table(runs(), "raft", BOUNDS, engine="spark", spark=spark, space=space)
    assert distributed.to_json() == local.to_json()
    verdicts = {r["run"]: r["valid"] for r in local.runs}
    assert verdicts.pop("mutant") is False and all(verdicts.values())
    assert next(r for r in local.runs if r["run"] == "mutant")["event"] == 8  # its restart
    assert 0 < local.states_covered < local.states_reachable == len(space.states)
    assert local.missing_count == local.states_reachable - local.states_covered
