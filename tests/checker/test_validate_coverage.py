"""Model coverage of recorded runs (checker/coverage.py): what the runs' explanations visit of the
reachable states at given bounds, and what no run reached."""

import json

from click.testing import CliRunner

from hwm.checker.coverage import reachable
from hwm.checker.model_events import run_events
from hwm.checker.validate_spark import coverage_table
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.events import dumps
from hwm.properties.protocol import resolve

RAFT = resolve("raft")[1]
TINY = {"servers": 2, "max_generation": 1, "max_log": 1, "max_crashes": 0}


def every_path(model, state, depth):
    """Every action sequence of `depth` steps or fewer from `state`."""
    yield []
    if depth:
        for action, after in model.successors(state):
            for rest in every_path(model, after, depth - 1):
                yield [action] + rest


def test_runs_along_every_path_cover_every_reachable_state_and_transition():
    space = reachable(RAFT, Config(**TINY))
    model = build_model(RAFT, Config(**TINY))
    runs = [(f"path{k:03}", dumps(*run_events(model, path)))
            for k, path in enumerate(every_path(model, model.initial_state(), 6))]
    full = coverage_table(runs, "raft", TINY, space=space)
    assert full.states_covered == full.states_reachable == len(space.states) > 5
    assert all(c == r for c, r in full.transitions_covered.values())
    assert full.missing_count == 0
    # One run that only elects a leader leaves the rest of the model uncovered, and says which.
    one = coverage_table(runs[:1] + [("elect", dumps(*run_events(model, [("elect", 0, (0, 1))])))], "raft", TINY,
                         space=space)
    assert one.states_covered == 2 and one.missing_count == len(space.states) - 2
    assert one.transitions_covered["elect"][0] == 1 and one.transitions_covered["write"][0] == 0


def test_hwm_validate_coverage_writes_the_table(tmp_path):
    model = build_model(RAFT, Config(**TINY))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.jsonl").write_text(dumps(*run_events(model, [("elect", 0, (0, 1)), ("write", 0)])))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "runs"), "--protocol", "raft", "--coverage",
                                       "--max-generation", "1", "--max-crashes", "0",
                                       "--table", str(tmp_path / "table.json")])
    assert result.exit_code == 0, result.output
    assert "model coverage: 3 of" in result.output and "never reached:" in result.output
    table = json.loads((tmp_path / "table.json").read_text())
    assert table["runs"][0]["valid"] and table["states"]["covered"] == 3


def test_the_coverage_table_judges_each_run_as_hwm_validate_does(tmp_path):
    # A Kafka recording (a follower learns the HW from a fetch with no entries) and a raft-noop one (the
    # leader appends before the acknowledgement arrives): the model's own steps reject both, hwm validate
    # accepts both (checker/recorded.py recorded_run_validator), and so does the table.
    from tests.checker.test_observed_kafka_real_steps import RECORDED as KAFKA_RUN
    from tests.checker.test_validate_acknowledgements import RECORDED as RAFT_NOOP_RUN

    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "run.jsonl").write_text(KAFKA_RUN)
    for path, protocol in ((tmp_path / "kafka", "kafka"), (RAFT_NOOP_RUN, "raft-noop")):
        plain = CliRunner().invoke(main, ["validate", str(path), "--protocol", protocol])
        assert plain.exit_code == 0, plain.output
        result = CliRunner().invoke(main, ["validate", str(path), "--protocol", protocol, "--coverage",
                                           "--max-generation", "1", "--max-log", "1", "--max-crashes", "0",
                                           "--table", str(tmp_path / f"{protocol}.json")])
        assert result.exit_code == 0, result.output
        [row] = json.loads((tmp_path / f"{protocol}.json").read_text())["runs"]
        assert row["valid"] and row["events"] == (11 if protocol == "kafka" else 6)
