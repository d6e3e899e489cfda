"""`hwm test` on the command line: exit codes, the saved schedule, the error for a broken node."""

import json
import signal

from click.testing import CliRunner

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.hunt import shrink_further
from hwm.bridge.maelstrom.schedule import Schedule
from hwm.cli import main
from tests.nodes.commands import bad_node


def test_a_node_that_breaks_the_protocol_exits_2_and_the_history_so_far_is_saved(tmp_path):
    saved = tmp_path / "broken.json"
    done = CliRunner().invoke(main, ["test", "--workload", "log", "--clock", "virtual", "--schedules", "5",
                                     "--no-shrink", "--save", str(saved), "--", *bad_node("not-json")])
    assert done.exit_code == 2, done.output
    assert "node n" in done.output and "printed a line that is not JSON" in done.output
    assert "'appended it!'" in done.output
    schedule = json.loads(saved.read_text())
    assert schedule["format"] == "hwm-schedule/1" and "not JSON" in schedule["findings"][0]
    assert schedule["history"][-1]["type"] == "log_append" and schedule["history"][-1]["status"] == "pending"


def test_a_finding_exits_1_and_names_the_replay_command(tmp_path):
    saved = tmp_path / "found.json"
    done = CliRunner().invoke(main, ["test", "--workload", "log", "--clock", "virtual", "--schedules", "20",
                                     "--no-shrink", "--save", str(saved), "--json", "--protocol", "raft",
                                     "--", *bad_node("one-index")])
    assert done.exit_code == 1 and not isinstance(done.exception, Exception), (done.output, repr(done.exception))
    report = json.loads(done.output)
    assert report["model_steps"] == 0  # it answers hwm_state with error 10: nothing to step
    assert report["saved"] == str(saved) and report["findings"] and report["first_failure_at"] >= 1
    assert report["findings"][0].split(" ")[0].rstrip(":") in ("AckedNeverLost", "OneValuePerOffset")
    assert json.loads(saved.read_text())["steps"][0] == {"op": "settle", "rounds": 6}


def test_hwm_test_and_replay_leave_the_sigterm_handler_they_found(tmp_path):
    """While nodes run, SIGTERM stops them as Ctrl-C does; after, the caller's handler is back. One left
    behind in a test process was inherited by the tour's forked workers, and terminate() could not stop
    them: the suite hung."""
    saved = tmp_path / "found.json"
    mine = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        done = CliRunner().invoke(main, ["test", "--workload", "log", "--clock", "virtual", "--schedules", "20",
                                         "--no-shrink", "--save", str(saved), "--", *bad_node("one-index")])
        assert done.exit_code == 1, done.output
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        done = CliRunner().invoke(main, ["replay", str(saved), "--", *bad_node("one-index")])
        assert done.exit_code == 1, done.output
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, mine)


def test_a_failing_schedule_shrinks_to_the_steps_that_matter():
    noise = [{"op": "kill", "node": "n2"}, {"op": "restart", "node": "n2"}]
    append = [{"op": "log_append", "node": "n1", "value": 1}, {"op": "log_append", "node": "n3", "value": 2}]
    steps = noise + append[:1] + [{"op": "tick"}] + append[1:] + noise
    failing = run_schedule(bad_node("one-index"), Schedule(workload="log", steps=steps))
    assert "OneValuePerOffset" in {f.name for f in failing.findings}
    # Each kind shrinks on its own: two values at one index need both appends, and nothing else;
    # one append alone is never served back (AckedNeverLost), which never stands in for it.
    shrunk = shrink_further(bad_node("one-index"), failing, seconds=60, kind="OneValuePerOffset")
    assert shrunk.schedule.steps == append and "OneValuePerOffset" in {f.name for f in shrunk.findings}
    lost = shrink_further(bad_node("one-index"), failing, seconds=60, kind="AckedNeverLost")
    assert len(lost.schedule.steps) == 1 and lost.schedule.steps[0]["op"] == "log_append"


def test_bad_options_exit_2():
    done = CliRunner().invoke(main, ["test", "--workload", "bank", "--", "true"])
    assert done.exit_code == 2 and "'bank' is not one of" in done.output


def test_a_schedule_file_naming_no_protocol_is_bad_input(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "hwm-schedule/1", "protocol": "raft-nop", "steps": []}))
    done = CliRunner().invoke(main, ["replay", str(path), "--", "true"])
    assert done.exit_code == 2 and "field 'protocol': not a protocol: unknown protocol 'raft-nop'" in done.output
    assert "did you mean 'raft-noop'?" in done.output


def test_replay_of_a_node_schedule_steps_it_against_the_protocol_given_and_refuses_trace_options(tmp_path):
    from tests.nodes.commands import SCHEDULES, naive_node

    path = str(SCHEDULES / "poll-above-hwm.json")
    node = naive_node("poll-above-hwm")
    stepped = CliRunner().invoke(main, ["replay", path, "--brief", "--protocol", "raft-noop,hwm_durable=true",
                                        "--", *node])
    assert stepped.exit_code == 1, stepped.output
    assert "stepped against raft-noop+hwm_durable=true's model" in stepped.output
    assert "✗ ModelStep (step 3)" in stepped.output
    refused = CliRunner().invoke(main, ["replay", path, "--html", str(tmp_path / "x.html"), "--", *node])
    assert refused.exit_code == 2 and "--html is for traces" in refused.output, refused.output
