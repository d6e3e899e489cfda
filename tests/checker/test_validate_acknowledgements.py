"""A recorded raft round trip in two steps (checker/validate.py, `deferred_acknowledgements`, the
validator `hwm validate` judges raft recordings with): the follower's append is one step, the leader
learning its acknowledgement a later one, perhaps after the leader appended more. Exactly that is
accepted: small runs that must pass and must fail at the boundaries, each failing one with the guard
that rejects it, and a recorded hwm cluster run (raft-noop) that the model's atomic round trip
rejected."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker import validate as validate_module
from hwm.checker.recorded import recorded_run_validator
from hwm.checker.validate import Validator
from hwm.cli import main
from hwm.properties.events import FORMAT, load_runs, parse_lines
from hwm.properties.protocol import resolve

NAMES = ("n1", "n2", "n3")
# A recorded run of `hwm cluster --protocol raft-noop`, trimmed: S2 leads generation 1 with its no-op,
# S3 appends it, S2 appends its next entry before S3's acknowledgement arrives, then learns it.
RECORDED = Path(__file__).parent / "recorded_raft_noop"


def e(server, **fields):
    return json.dumps({"server": server, **fields})


def verdict_of(protocol, rows, validator=recorded_run_validator):
    text = json.dumps({"format": FORMAT, "servers": list(NAMES)}) + "\n" + "\n".join(rows) + "\n"
    header, events = parse_lines(text.splitlines())
    return validator(resolve(protocol)[1], header).validate(list(events))


def first_bad(verdict):
    return None if verdict.valid else verdict.discrepancy.number


ELECTED = [e("n1", generation=1, role="leader", append=[[1, 1]])]  # raft-noop: the leader's no-op
ACKED = ELECTED + [e("n2", generation=1, append=[[1, 1]])]  # n2 holds it; its acknowledgement is on its way
# raft-any-generation-commit: an acknowledgement of an older generation's entry would count.
DEPOSED = [e("n1", generation=1, role="leader"), e("n1", append=[[1, 1]]), e("n2", generation=1, append=[[1, 1]]),
           e("n2", generation=2, role="leader"), e("n1", generation=2, role="follower")]

# (case, preset, events, the first event no step explains (None: valid), the model's atomic round trip's)
CASES = [
    ("the leader appends its next entry before the acknowledgement arrives", "raft-noop",
     ACKED + [e("n1", append=[[2, 1]]), e("n1", hwm=1), e("n2", append=[[2, 1]], hwm=1), e("n1", hwm=2)], None, 3),
    ("two entries before the acknowledgement", "raft-noop",
     ACKED + [e("n1", append=[[2, 1]]), e("n1", append=[[3, 1]]), e("n1", hwm=1)], None, 3),
    ("the acknowledgement and the next entry in one event", "raft-noop",
     ACKED + [e("n1", append=[[2, 1]], hwm=1)], None, None),
    ("the model's order: the acknowledgement first", "raft-noop",
     ACKED + [e("n1", hwm=1), e("n1", append=[[2, 1]])], None, None),
    ("both followers acknowledge; either one commits", "raft-noop",
     ACKED + [e("n3", generation=1, append=[[1, 1]]), e("n1", append=[[2, 1]]), e("n1", hwm=1),
              e("n3", append=[[2, 1]], hwm=1), e("n1", hwm=2)], None, 4),
    ("an acknowledgement sent before its follower crashed", "raft-noop",
     ACKED + [e("n1", append=[[2, 1]]), e("n2", crash=True), e("n1", hwm=1)], None, 3),
    ("an acknowledgement lost to a new leadership", "raft-any-generation-commit",
     DEPOSED + [e("n3", generation=2)], None, 5),
    ("the acknowledgement counted in its own generation", "raft-any-generation-commit",
     DEPOSED[:3] + [e("n1", hwm=1)] + DEPOSED[3:] + [e("n3", generation=2)], None, None),
    # Must fail.
    ("the leader's HWM before its follower's append (causality)", "raft-noop",
     ELECTED + [e("n1", hwm=1), e("n2", generation=1, append=[[1, 1]])], 2, 2),
    ("the next entry, then the HWM before the follower's append", "raft-noop",
     ELECTED + [e("n1", append=[[2, 1]]), e("n1", hwm=1), e("n2", generation=1, append=[[1, 1], [2, 1]])], 3, 3),
    ("a leader HWM above the acknowledged index", "raft-noop",
     ACKED + [e("n1", append=[[2, 1]]), e("n1", hwm=2)], 4, 3),
    ("the next entry with an HWM no acknowledgement gives", "raft-noop",
     ACKED + [e("n1", append=[[2, 1]], hwm=2)], 3, 3),
    ("an acknowledgement of an earlier leadership", "raft-any-generation-commit",
     DEPOSED + [e("n1", generation=3, role="leader"), e("n1", hwm=1), e("n3", generation=3)], 7, 5),
]


@pytest.mark.parametrize("case, preset, rows, expected, atomic", CASES, ids=[c[0] for c in CASES])
def test_a_deferred_acknowledgement_is_accepted_exactly(case, preset, rows, expected, atomic):
    verdict = verdict_of(preset, rows)
    assert first_bad(verdict) == expected, verdict.discrepancy and verdict.discrepancy.describe()
    # The old behaviour, the model's whole round trip in one step, for comparison.
    assert first_bad(verdict_of(preset, rows, Validator)) == atomic


def rejected_without(monkeypatch, case: str, name: str, planted) -> bool:
    """Whether the case is still rejected with `name` of Validator replaced by `planted`."""
    _, preset, rows, expected, _ = next(c for c in CASES if c[0] == case)
    with monkeypatch.context() as m:
        m.setattr(Validator, name, planted)
        return first_bad(verdict_of(preset, rows)) is not None


def test_each_guard_has_a_case_that_only_it_rejects(monkeypatch):
    step, acknowledgements = Validator._step, Validator._acknowledgements

    def ack_before_the_followers_change(self, cand, action, after):  # the follower's change not yet logged
        if self.defers and action[0] == validate_module.ACK:
            cand = cand._replace(waits=tuple(w for w in cand.waits if w[0] >= 0))
        return step(self, cand, action, after)
    assert not rejected_without(monkeypatch, "the leader's HWM before its follower's append (causality)", "_step",
                                ack_before_the_followers_change)

    def ack_of_the_whole_log(self, state, l):  # the leader counts more than the follower acknowledged
        for action, after in acknowledgements(self, state, l):
            now = self.model._with_match(state.servers[l], l, action[1], len(state.servers[l].log))
            yield action, after._replace(servers=after.servers[:l] + (now,) + after.servers[l + 1:])
    for case in ("a leader HWM above the acknowledged index", "the next entry with an HWM no acknowledgement gives"):
        assert not rejected_without(monkeypatch, case, "_acknowledgements", ack_of_the_whole_log)

    assert not rejected_without(monkeypatch, "an acknowledgement of an earlier leadership", "_settled",
                                lambda self, state: state)  # replies kept whoever leads
    # As built, each is rejected.
    for case in CASES:
        if case[3] is not None:
            assert first_bad(verdict_of(*case[1:3])) == case[3]


def test_the_recorded_raft_noop_run_is_valid_and_was_a_false_finding():
    [(_, header, events)] = load_runs(sorted(RECORDED.glob("*.jsonl")))
    assert header.protocol == "raft-noop"
    verdict = recorded_run_validator(resolve("raft-noop")[1], header).validate(events)
    assert verdict.valid, verdict.discrepancy.describe()
    # The model's atomic round trip: S2's second entry with its HWM still 0 is explained by no step.
    atomic = Validator(resolve("raft-noop")[1], header).validate(events)
    assert not atomic.valid and atomic.discrepancy.event.server == "S2" and atomic.discrepancy.event.append == ((2, 1),)
    result = CliRunner().invoke(main, ["validate", str(RECORDED)], catch_exceptions=False)
    assert result.exit_code == 0 and "valid: 6 events" in result.output, result.output
