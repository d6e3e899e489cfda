"""The example nodes under hwm, with real processes and pipes: each naive mistake is caught by its
short schedule, the correct node passes them and a few Hypothesis schedules, replays repeat. Every
run steps the nodes' observed changes against the model of the preset log_node.py implements."""

import dataclasses
import json

import pytest

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.hunt import hunt, saved_schedule
from hwm.bridge.maelstrom.replay import compare_histories
from hwm.bridge.maelstrom.schedule import load
from tests.nodes.commands import LOG_NODE_PROTOCOL, SCHEDULES, log_node, naive_node

MISTAKES = {"ack-on-write": "AckedNeverLost", "poll-above-hwm": "ReadNeverTruncated",
            "truncate-to-own-hwm": "AckedNeverLost"}
# The step at which the model cannot follow each mistake: the acknowledgement above the HWM, the
# read above it (the history sees that read only when a later one contradicts it), the restart.
MODEL_STEP = {"ack-on-write": 2, "poll-above-hwm": 3, "truncate-to-own-hwm": 6}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_mistake_is_caught_by_its_short_schedule_and_the_correct_node_passes_it(mistake, tmp_path):
    schedule = dataclasses.replace(load(SCHEDULES / f"{mistake}.json"), protocol=LOG_NODE_PROTOCOL)
    assert len(schedule.steps) <= 8  # ack-on-write 4 steps, poll-above-hwm 5, truncate-to-own-hwm 8
    naive = run_schedule(naive_node(mistake), schedule)
    assert naive.protocol_error is None
    assert MISTAKES[mistake] in {f.name for f in naive.findings}, [str(f) for f in naive.findings]
    stepped = [f for f in naive.findings if f.name == "ModelStep"]
    assert [f.step for f in stepped] == [MODEL_STEP[mistake]], [str(f) for f in naive.findings]
    history_steps = [f.step for f in naive.findings if f.name == MISTAKES[mistake]]
    assert all(step is None or step >= MODEL_STEP[mistake] for step in history_steps)
    # The virtual clock and a node that depends only on its inputs: the saved run, exactly.
    comparison = compare_histories(schedule.history, naive.history)
    assert comparison.same, comparison.summary()
    assert naive.observations == schedule.observations
    if mistake == "ack-on-write":
        # Inside the node: its answer right after the acknowledgement shows its HWM still below it.
        early = [f for f in naive.findings if f.name == "AckedAtOrBelowHwm"]
        assert early and early[0].step == 2 and "n1's high-water mark was 1" in early[0].text
    if mistake == "truncate-to-own-hwm":
        # The catalogue on the observed states names the node and the step: n2's restart (step 6)
        # cut its log to its own HWM, under entry 2 that n1 counts as committed.
        committed = [f for f in naive.findings if f.name == "CommittedOnQuorum"]
        assert committed and committed[0].step == 6
        assert "n1 counts entry 2@g1 as committed" in committed[0].text and "restart(n2)" in committed[0].text
        restarted = [o for o in naive.observations if o["node"] == "n2" and o["step"] == 6 and o["alive"]]
        assert restarted[0]["log"] == [[1, 1]] and restarted[0]["hwm"] == 1
    if mistake == "poll-above-hwm":
        # Saved like any finding, and shown again by hwm replay FILE -- CMD.
        from click.testing import CliRunner

        from hwm.cli import main

        saved = saved_schedule(naive, naive_node(mistake), tmp_path / "found.json")
        assert any(f.startswith("ModelStep (step 3): after log_read(n1, 2), n1 served log_read of index 2 "
                                "while it showed leader g1 log=[1,1] hwm=1") for f in json.loads(saved.read_text())["findings"])
        done = CliRunner().invoke(main, ["replay", str(saved), "--", *naive_node(mistake)])
        assert done.exit_code == 1 and "✗ ModelStep (step 3)" in done.output, done.output
        assert "no model state within 2 steps lets a client read 2@g1 from n1" in done.output
    correct = run_schedule(log_node(), schedule)
    assert correct.protocol_error is None and correct.findings == [], [str(f) for f in correct.findings]


def test_one_mistake_alone_is_not_caught_by_another_mistakes_schedule():
    # Each mistake can be switched on alone: the read above the HWM is harmless without the read.
    result = run_schedule(naive_node("poll-above-hwm"), load(SCHEDULES / "ack-on-write.json"))
    assert result.findings == []


def test_the_correct_node_passes_a_fixed_number_of_hypothesis_schedules():
    counted = []  # the report's count as each schedule ends: one more each time
    report = hunt(log_node(), workload="kafka", schedules=2, steps=10, seed=1, protocol=LOG_NODE_PROTOCOL,
                  on_schedule=lambda report, result: counted.append(report.schedules))
    assert report.failures == [] and report.schedules >= 2 and report.operations > 0, \
        [str(f) for r in report.failures for f in r.findings]
    assert counted == list(range(1, report.schedules + 1))


def test_hwm_replay_runs_a_saved_schedule_step_by_step():
    from click.testing import CliRunner

    from hwm.cli import main

    path = str(SCHEDULES / "ack-on-write.json")
    done = CliRunner().invoke(main, ["replay", path, "--", *naive_node("ack-on-write")])
    assert done.exit_code == 1, done.output
    assert "step 2: log_append(n1, 1)" in done.output
    assert "n1→c1 log_append_ok" in done.output  # acknowledged at once: the mistake, in the narration
    assert "AckedNeverLost" in done.output and "history: the same history" in done.output
    assert "the saved finding came back: AckedNeverLost" in done.output
    # Against the correct node the finding does not come back: a replay that proves nothing exits 3,
    # unless the node is meant to be fixed.
    gone = CliRunner().invoke(main, ["replay", path, "--", *log_node()])
    assert gone.exit_code == 3, gone.output
    assert "agree before the first difference" in gone.output  # the fix answers differently
    assert "the saved finding did not come back: AckedNeverLost, AckedAtOrBelowHwm" in gone.output
    fixed = CliRunner().invoke(main, ["replay", path, "--fixed", "--", *log_node()])
    assert fixed.exit_code == 0 and "(as --fixed expects)" in fixed.output, fixed.output
    missing = CliRunner().invoke(main, ["replay", path])
    assert missing.exit_code == 2 and "give the node's command after --" in missing.output
