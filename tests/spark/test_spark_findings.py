"""The Spark engine checks properties on canonical states; its findings must still be the
rebuilt traces' (the local and simulation engines: tests/checker/test_findings.py)."""

import pytest

from hwm.model.registry import build_model
from hwm.checker.spark_engine import spark_bfs
from hwm.properties.protocol import PRESETS
from tests.findings import RENAMED, RENAMED_SMALL, assert_findings_match_traces, canonical_findings

pytestmark = pytest.mark.spark


def check_renamed(spark, case, directory):
    preset, config = case
    model = build_model(PRESETS[preset].protocol, config)
    report = spark_bfs(model, preset, symmetry=True, spark=spark)
    assert report.violated
    assert_findings_match_traces(model, report, preset, directory)
    # What the engine saw on its canonical states names other servers for some property:
    # the report's sentence is not simply copied from the discovery.
    canonical = canonical_findings(model, report)
    assert any(canonical[n] != report.results[n].finding for n in canonical)


def test_spark_findings_and_saved_traces_name_the_servers_of_their_steps(spark, tmp_path):
    check_renamed(spark, RENAMED_SMALL, tmp_path)


@pytest.mark.deep
def test_spark_findings_and_saved_traces_name_the_servers_of_their_steps_issue_case(spark, tmp_path):
    check_renamed(spark, RENAMED, tmp_path)
