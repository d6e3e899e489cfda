"""`hwm validate --engine spark` judges each recorded run with the validator plain `hwm validate` uses
(checker/recorded.py recorded_run_validator): a Kafka recording with the broker's finer steps."""

import pytest

from hwm.checker.recorded import recorded_run_validator
from hwm.checker.validate_spark import coverage_table
from hwm.properties.events import parse_lines
from hwm.properties.protocol import resolve
from tests.checker.test_observed_kafka_real_steps import RECORDED

pytestmark = pytest.mark.spark

BOUNDS = {"servers": 3, "max_generation": 1, "max_log": 1, "max_crashes": 0}
# The recorded Kafka run (a follower learns the HW from a fetch with no entries: the model's own steps
# reject it), and the same with a HW the leader never had (rejected at its line by every validator).
RUNS = [("kafka-recorded", RECORDED),
        ("kafka-wrong-hw", RECORDED.replace('{"server": "n2", "hwm": 1}', '{"server": "n2", "hwm": 2}'))]


def test_spark_judges_a_kafka_recording_as_hwm_validate_does(spark):
    local = coverage_table(RUNS, "kafka", BOUNDS)
    distributed = coverage_table(RUNS, "kafka", BOUNDS, engine="spark", spark=spark)
    assert distributed.to_json() == local.to_json()
    for row in distributed.runs:
        header, events = parse_lines(dict(RUNS)[row["run"]].splitlines())
        verdict = recorded_run_validator(resolve("kafka")[1], header).validate(list(events))
        assert (row["valid"], row["events"]) == (verdict.valid, verdict.events)
    assert [r["valid"] for r in distributed.runs] == [True, False]
