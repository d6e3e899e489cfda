"""Causality in recorded and observed runs: a server logs a change before the messages that announce it,
so an HWM (or an acknowledgement) logged before the servers it counts logged the entry is a finding at
that event, in `hwm validate` (checker/validate.py) and in `hwm test --protocol`'s stepping
(checker/observed*.py); the same events in causal order are valid."""

import pytest
from click.testing import CliRunner

from hwm.checker.model_events import random_actions, run_events
from hwm.checker.observed import ObservedValidator
from hwm.checker.recorded import recorded_run_validator
from hwm.checker.observed_zab import ObservedZabValidator
from hwm.checker.validate import Validator
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import resolve

NAMES = ("n1", "n2", "n3")
# docs/validation.md's example run.
EXAMPLE = """{"format": "hwm-events/1", "servers": ["n1", "n2", "n3"], "protocol": "raft"}
{"server": "n1", "generation": 7, "role": "leader"}
{"server": "n1", "append": [[1, 7]]}
{"server": "n2", "generation": 7, "append": [[1, 7]]}
{"server": "n1", "hwm": 1}
{"server": "n1", "ack": [[1, 7]]}
{"server": "n1", "read": [[1, 7]]}
{"server": "n3", "crash": true}
{"server": "n3", "restart": true, "hwm": 0}
"""


def validate(path):
    result = CliRunner().invoke(main, ["validate", str(path), "--protocol", "raft"], catch_exceptions=False)
    return result.exit_code, result.output


def test_the_docs_example_is_valid_and_its_hwm_before_the_followers_append_is_not(tmp_path):
    (tmp_path / "run.jsonl").write_text(EXAMPLE)
    assert validate(tmp_path / "run.jsonl") == (0, f"{tmp_path / 'run.jsonl'}: valid: 8 events, "
                                                   "1 model state consistent with the run\n")
    lines = EXAMPLE.splitlines()
    (tmp_path / "run.jsonl").write_text("\n".join(lines[:3] + [lines[4], lines[3]] + lines[5:]) + "\n")
    code, out = validate(tmp_path / "run.jsonl")
    assert code == 1
    assert 'line 4: no model step explains event 3: {"server": "n1", "hwm": 1}' in out
    assert "which only n1 has logged so far" in out
    assert "n1 counts entry 1@g7 as committed" in out  # the run's names, not S1
    # The nearest step never reads like the run: it names the difference, or why it is refused.
    nearest = next(line for line in out.splitlines() if "nearest model step" in line)
    assert "they differ in" in nearest or "refuses" in nearest


def test_an_acknowledgement_before_the_followers_append_is_a_finding_at_that_event(tmp_path):
    lines = EXAMPLE.splitlines()
    # The leader acknowledges entry 1 (and logs no HWM): the HWM it needs comes from n2's append, not yet logged.
    (tmp_path / "run.jsonl").write_text("\n".join(lines[:3] + [lines[5], lines[3], lines[4]]) + "\n")
    code, out = validate(tmp_path / "run.jsonl")
    assert code == 1 and "no model step explains event 3" in out


def early_hwm(events):
    """`events` with the first leader HWM event moved before the first follower event that appended its
    entry; (the events, the 1-based position it now has), or None when the run has no such event."""
    roles = {}
    for i, event in enumerate(events):
        if event.role:
            roles[event.server] = event.role
        if roles.get(event.server) == "leader" and event.hwm:
            h = event.hwm
            holders = [j for j in range(i) if events[j].server != event.server and events[j].append
                       and any(index == h for index, _ in events[j].append)]
            if holders:
                j = holders[0]
                return events[:j] + [event] + events[j:i] + events[i + 1:], j + 1
    return None


# ZAB's walk of seed 1 under -m deep: the observed validator takes 4 s to accept it (up to 720
# explanations kept, 66,000 model steps), where the other seven cases take 0.1-0.6 s.
@pytest.mark.parametrize("preset, observed, seed", [
    pytest.param(p, v, s, marks=pytest.mark.deep) if (p, s) == ("zab", 1) else (p, v, s)
    for s in range(4) for p, v in [("raft", ObservedValidator), ("zab", ObservedZabValidator)]])
def test_a_leader_hwm_moved_before_its_followers_append_is_rejected_there(preset, observed, seed):
    protocol = resolve(preset)[1]
    model = build_model(protocol, Config(servers=3, max_generation=4, max_log=3, max_crashes=1))
    header, events = run_events(model, list(random_actions(model, 40, seed)), NAMES)
    for validator in (Validator, observed, recorded_run_validator):
        verdict = validator(protocol, header).validate(events)
        assert verdict.valid, verdict.discrepancy.describe()
    moved = early_hwm(events)
    if moved is None:
        pytest.skip("this walk commits nothing a follower appended")
    events, position = moved
    for validator in (Validator, observed, recorded_run_validator):
        verdict = validator(protocol, header).validate(events)
        assert not verdict.valid and verdict.discrepancy.number == position, (validator, position)
