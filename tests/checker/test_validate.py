"""Trace validation (`hwm validate`): recorded runs against the model, partial logs, bad input."""

import json
from pathlib import Path
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hwm.checker.model_events import random_actions, run_events
from hwm.checker.validate import Validator, bind, validate
from hwm.cli import main
from hwm.model.actions import from_step
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.events import FORMAT, EventError, Header, dumps, from_observation, load, parse_lines
from hwm.properties.protocol import resolve
from hwm.properties.trace import load as load_trace

RAFT = resolve("raft")[1]
NAMES = ("n1", "n2", "n3")


def hwm(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def write_run(path, header, events):
    path.write_text(dumps(header, events))
    return path


def header(**fields):
    return json.dumps({"format": FORMAT, "servers": list(NAMES), **fields})


def lines(*rows):
    return "\n".join(rows) + "\n"


def mutant_run(trace_file, logged=None):
    """The events a mutant's counterexample would record, from the mutant's own model."""
    trace = load_trace(trace_file)
    _, protocol = resolve(trace.protocol)
    model = build_model(protocol, Config.from_mapping(trace.config))
    options = {} if logged is None else {"logged": frozenset(logged)}
    return run_events(model, [from_step(s) for s in trace.steps], NAMES, **options)


# ------------------------------------------------------------------ valid runs
@pytest.mark.parametrize("seed", range(6))
def test_random_runs_of_the_raft_model_are_valid(seed):
    model = build_model(RAFT, Config(servers=3, max_generation=5, max_log=3, max_crashes=2))
    head, events = run_events(model, list(random_actions(model, 50, seed)), NAMES)
    verdict = validate(RAFT, head, events)
    assert verdict.valid, verdict.discrepancy.describe()
    assert verdict.events == len(events) > 10


def test_generations_are_compared_by_order_not_by_number(tmp_path):
    # A real system skips generations (failed elections): 3 and 7 stand for the model's 1 and 2.
    run = lines(header(), '{"server": "n1", "generation": 3, "role": "leader"}',
                '{"server": "n1", "append": [[1, 3]]}', '{"server": "n2", "generation": 3, "append": [[1, 3]]}',
                '{"server": "n1", "hwm": 1}', '{"server": "n2", "generation": 7, "role": "leader"}',
                '{"server": "n3", "generation": 7, "append": [[1, 3]]}')
    (tmp_path / "run.jsonl").write_text(run)
    code, out = hwm("validate", tmp_path / "run.jsonl", "--protocol", "raft")
    assert code == 0, out
    assert bind(((0, 0), (3, 1)), 7, 2) == ((0, 0), (3, 1), (7, 2))
    assert bind(((0, 0), (3, 1)), 2, 2) is None  # 2 < 3 in the run but 2 > 1 in the model


def test_a_leader_of_a_generation_older_than_its_log_is_invalid(tmp_path):
    run = lines(header(), '{"server": "n1", "generation": 3, "role": "leader"}',
                '{"server": "n1", "append": [[1, 5]]}')
    (tmp_path / "run.jsonl").write_text(run)
    code, out = hwm("validate", tmp_path / "run.jsonl", "--protocol", "raft")
    assert code == 1
    assert "line 3: no model step explains event 2" in out
    assert "nearest model step: write(n1)" in out


def test_a_leader_hwm_that_no_follower_has_logged_is_invalid_at_that_event(tmp_path):
    run = lines(header(), '{"server": "n1", "generation": 1, "role": "leader"}',
                '{"server": "n1", "append": [[1, 1]]}', '{"server": "n1", "hwm": 1}')
    (tmp_path / "run.jsonl").write_text(run)
    code, out = hwm("validate", tmp_path / "run.jsonl", "--protocol", "raft")
    assert code == 1
    assert "line 4: no model step explains event 3" in out
    assert "which only n1 has logged so far" in out
    # Logged after the HWM, the follower's append is still too late: a consequence never precedes its cause.
    (tmp_path / "run.jsonl").write_text(run + '{"server": "n3", "generation": 1, "append": [[1, 1]]}\n')
    assert hwm("validate", tmp_path / "run.jsonl", "--protocol", "raft")[0] == 1
    # Logged before it, the follower's append explains it.
    head, elected, appended, high = run.splitlines()
    (tmp_path / "run.jsonl").write_text(lines(head, elected, appended,
                                              '{"server": "n3", "generation": 1, "append": [[1, 1]]}', high))
    assert hwm("validate", tmp_path / "run.jsonl", "--protocol", "raft")[0] == 0


# ---------------------------------------------------------------- invalid runs
@pytest.mark.parametrize("bug, event, broken", [
    ("kip101", 8, "ReadNeverTruncated"),  # S2 truncates to its own HWM on restart, losing a read entry
    ("raft-truncate-to-own-hwm", 8, "ReadNeverTruncated"),
    # Figure 8's older-generation commit: n3's append is logged before it (the follower logs first), so
    # two of three servers store the entry; the run leaves raft's commit rule, no catalogue property yet.
    ("raft-any-generation-commit", 11, None),
    ("raft-any-election", 6, None),  # a leader elected with a shorter log
])
def test_a_mutant_run_fails_at_the_event_where_it_leaves_raft(bug, event, broken):
    head, events = mutant_run(f"counterexamples/{bug}.json")
    verdict = validate(RAFT, head, events)
    assert not verdict.valid
    assert verdict.discrepancy.number == event
    if broken:
        assert broken in verdict.discrepancy.properties
    # The run is a behaviour of the mutant itself.
    _, mutant = resolve(bug)
    assert validate(mutant, head, events).valid


def test_partial_logs_leave_unlogged_variables_free():
    # Figure 8 shows in the HWM and the read below it: with neither logged, the run is one raft
    # allows; with the reads logged, the read raft could not serve gives it away even without the
    # HWM; and a log-only recording still catches truncate-to-own-hwm's lost entry.
    head, events = mutant_run("counterexamples/raft-any-generation-commit.json",
                              logged=("generation", "role", "log"))
    assert "hwm" not in head.logged and all(e.hwm is None and e.read is None for e in events)
    assert validate(RAFT, head, events).valid
    head, events = mutant_run("counterexamples/raft-any-generation-commit.json",
                              logged=("generation", "role", "log", "reads"))
    verdict = validate(RAFT, head, events)
    assert not verdict.valid and verdict.discrepancy.event.read == ((1, 1),)
    assert "lets a client read 1@g1 from n1" in verdict.discrepancy.reason
    head, events = mutant_run("counterexamples/raft-truncate-to-own-hwm.json", logged=("log",))
    verdict = validate(RAFT, head, events)
    assert not verdict.valid and verdict.discrepancy.event.restart
    assert verdict.discrepancy.properties == {}  # partial logs: the properties cannot be judged


def test_a_harness_feeds_node_observations_one_at_a_time():
    head = Header(NAMES, frozenset(("generation", "role", "log", "hwm")))
    validator = Validator(RAFT, head)
    observations = [
        {"node": "n1", "generation": 2, "role": "leader", "log": [], "hwm": 0},
        {"node": "n1", "generation": 2, "role": "leader", "log": [[1, 2]], "hwm": 0},
        {"node": "n2", "generation": 2, "role": "follower", "log": [[1, 2]], "hwm": 0},
        {"node": "n1", "generation": 2, "role": "leader", "log": [[1, 2]], "hwm": 1},
        {"node": "n1", "generation": 2, "role": "leader", "log": [[1, 2]], "hwm": 1},  # nothing changed
    ]
    for observation in observations:
        assert validator.feed(from_observation(observation, head)) is None
    bad = validator.feed(from_observation({"node": "n3", "generation": 2, "role": "follower", "log": [[1, 1]],
                                           "hwm": 0}, head))
    assert bad is not None and bad.number == 6 and "n3" in bad.reason
    assert validator.feed(from_observation(observations[0], head)) is bad  # it stays failed


# ------------------------------------------------------------------- bad input
@pytest.mark.parametrize("text, message", [
    ("", "empty: a recorded run starts with its header line"),
    ('{"format": "hwm-trace/1"}\n', "line 1, field 'format': format must be 'hwm-events/1'"),
    (lines(header(), '{"server": "n1", "hwm": 1'), "line 2: broken JSON"),
    (lines(header(), '{"server": "n1", "hwm": 1, "colour": 3}'), "line 2, field 'colour': unknown event field"),
    (lines(header(), '{"server": "n4", "hwm": 1}'), "line 2, field 'server': server 'n4' is not declared"),
    (lines(header(), '', '{"server": "n1"}'), "line 3: an event records at least one of"),
    (lines(header(), '{"server": "n1", "role": "boss"}'), "line 2, field 'role': role is leader or follower"),
    (lines(header(), '{"server": "n1", "append": [[2, 1], [4, 1]]}'), "field 'append': append must hold consecutive"),
    (lines(header(), '{"server": "n1", "hwm": -1}'), "field 'hwm': hwm is an integer >= 0"),
    (lines(header(logged=["log"]), '{"server": "n1", "hwm": 1}'), "field 'hwm': the header's logged list leaves out hwm"),
    (lines(header(), '{"server": "n1", "crash": true, "hwm": 0}'), "field 'crash': a crash is an event of its own"),
    (lines(json.dumps({"format": FORMAT, "servers": ["a", "a"]})), "line 1, field 'servers'"),
])
def test_bad_input_exits_2_naming_the_line_and_field(tmp_path, text, message):
    path = tmp_path / "run.jsonl"
    path.write_text(text)
    with pytest.raises(EventError) as caught:
        load(path)
    assert message in str(caught.value)
    code, out = hwm("validate", path, "--protocol", "raft")
    assert code == 2 and message in out


def test_a_directory_of_runs_with_one_bad_run_exits_1_as_a_process(tmp_path):
    model = build_model(RAFT, Config(servers=3, max_generation=4, max_log=2, max_crashes=1))
    for seed in range(2):
        write_run(tmp_path / f"ok{seed}.jsonl", *run_events(model, list(random_actions(model, 30, seed)), NAMES))
    write_run(tmp_path / "kip101.jsonl", *mutant_run("counterexamples/kip101.json"))
    done = subprocess.run([sys.executable, "-m", "hwm.cli", "validate", str(tmp_path), "--protocol", "raft"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "2 of 3 runs valid" in done.stdout
    assert "kip101.jsonl, line 9: no model step explains event 8" in done.stdout.replace(": line", ", line")
    assert "the run breaks ReadNeverTruncated" in done.stdout
    _, events = parse_lines((tmp_path / "ok0.jsonl").read_text().splitlines())
    assert list(events)


def test_the_documented_tiny_node_records_valid_runs_and_the_validator_finds_its_mistake(tmp_path):
    # docs/validation.md's instrumented node, run as written: a leader and a follower in parts.
    text = Path("docs/validation.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(example, scope)
    node = scope["RecordedNode"]
    servers = ["n1", "n2", "n3"]
    leader, follower = (node(n, servers, str(tmp_path / f"{n}.jsonl")) for n in ("n1", "n2"))
    node("n3", servers, str(tmp_path / "n3.jsonl"))
    leader.become_leader(4)
    leader.log.append(4)
    leader.emit({"append": [[1, 4]]})
    follower.accept_append(4, 0, [4], 0)
    leader.hwm = 1
    leader.emit({"hwm": 1})
    follower.accept_append(4, 1, [], 1)
    code, out = hwm("validate", tmp_path, "--protocol", "raft")
    assert code == 0, out
    # A follower that claims an HWM beyond what the leader sent is caught.
    follower.hwm = 2
    follower.emit({"hwm": 2})
    code, out = hwm("validate", tmp_path, "--protocol", "raft")
    assert code == 1 and '"server": "n2", "hwm": 2' in out


def test_a_candidates_unnamed_generation_is_free_until_the_run_names_it(tmp_path):
    # n2 and n3 campaign (null: the model has no candidates), n3 then leads generation 9.
    run = lines(header(), '{"server": "n2", "generation": null}', '{"server": "n3", "generation": null}',
                '{"server": "n3", "generation": 9, "role": "leader"}', '{"server": "n3", "append": [[1, 9]]}',
                '{"server": "n2", "generation": 9, "append": [[1, 9]]}', '{"server": "n3", "hwm": 1}')
    (tmp_path / "run.jsonl").write_text(run)
    code, out = hwm("validate", tmp_path / "run.jsonl", "--protocol", "raft")
    assert code == 0, out
    # Named, a follower's generation cannot go back below the leader it followed.
    (tmp_path / "run.jsonl").write_text(run + '{"server": "n2", "generation": 2}\n')
    code, out = hwm("validate", tmp_path / "run.jsonl", "--protocol", "raft")
    assert code == 1 and "line 8: no model step explains event 7" in out


def test_a_bound_on_explanations_keeps_those_with_the_fewest_changes_not_yet_shown():
    # A run of raft's model (so valid) stepped with at most two explanations kept: keeping the first
    # ones found dropped every explanation that could end the run with each change shown (seed 14).
    model = build_model(RAFT, Config(servers=3, max_generation=4, max_log=3, max_crashes=2))
    header_, events = run_events(model, list(random_actions(model, 40, 14)), NAMES)
    verdict = Validator(RAFT, header_, max_candidates=2).validate(events)
    assert verdict.valid, verdict.discrepancy.describe()
    assert verdict.capped > 0
