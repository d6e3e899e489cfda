"""Spark and the local engine save the same traces, byte for byte but the engine's name, also
under symmetry, where several parents of one level reach the same class: both keep the parent
that comes first in the local engine's order (levels, then discovery order, then action order)."""

import json

import pytest

from hwm.checker.run import CheckRequest, run
from hwm.checker.traces import save_counterexamples
from hwm.model.registry import build_model
from hwm.checker.spark_engine import spark_bfs
from hwm.properties.protocol import PRESETS
from tests.pinned import PINNED, config_of
from tests.spark.test_spark_engine import DRIVER_LEVEL, case_id

pytestmark = pytest.mark.spark

# Pins with symmetry and violations, small enough for the default run (two kinds of model); the
# deep run takes every other symmetric pin up to 30,000 states, the async network's included.
CASES = [
    ("kip101", 2, 2, 1, 1, "rpc", True),
    ("bookkeeper-recovery-without-fencing", 3, 4, 1, 1, "rpc", True),
]
DEEP_CASES = [key for key, pin in PINNED.items()
              if key[6] and not pin.get("deep") and pin["states"] <= 30_000 and key not in CASES]


def saved(report, preset, directory) -> dict[str, dict]:
    """The report's saved counterexamples (file name -> JSON) and every trace's steps."""
    files = {}
    for path in save_counterexamples(report, preset, directory):
        trace = json.loads(path.read_text())
        trace["explanation"] = trace["explanation"].replace(f"({report.engine} engine)", "(engine)")
        files[path.name] = trace
    steps = {name: r.steps for name, r in report.results.items() if r.found}
    return {"files": files, "steps": steps}


def check_same_traces(spark, key, tmp_path, **options) -> dict:
    preset, config, symmetry = config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    local = saved(run(CheckRequest(preset, symmetry=symmetry), model=model), preset, tmp_path / "local")
    options.setdefault("driver_level", DRIVER_LEVEL)
    distributed = saved(spark_bfs(model, preset, symmetry=symmetry, spark=spark, **options), preset,
                        tmp_path / "spark")
    assert distributed["files"] == local["files"]
    assert distributed["steps"] == local["steps"]
    return local


@pytest.mark.parametrize("key", CASES, ids=case_id)
def test_spark_saves_the_local_engines_traces(spark, key, tmp_path):
    # Three partitions and a reliable checkpoint every level: the tie rule must not depend on either.
    local = check_same_traces(spark, key, tmp_path, partitions=3, checkpoint_every=1)
    assert local["files"], "a case without counterexamples cannot compare saved traces"


@pytest.mark.deep
@pytest.mark.parametrize("key", DEEP_CASES, ids=case_id)
def test_spark_saves_the_local_engines_traces_deep(spark, key, tmp_path):
    """Cases without counterexamples compare their witnesses' traces."""
    check_same_traces(spark, key, tmp_path)
