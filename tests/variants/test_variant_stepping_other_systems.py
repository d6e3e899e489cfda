"""A node stepped against a ZAB variant that adds fields and actions (examples/variants/zab_read_only.py,
docs/variants.md "On the implementation"): hwm's own ZAB node has no read-only mode, and everything it
shows is a behaviour of ZAB's model, so stepping it against ReadOnlyMode (`hwm test --protocol`, `hwm
replay SCHEDULE --protocol ... -- CMD`) and validating a recorded run (`hwm validate --protocol`) give
ZAB's own verdicts: clean where ZAB's are, the same finding at the same step where not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.schedule import Schedule
from hwm.cli import main
from tests.nodes.commands import own_node
from tests.nodes.test_own_node_zab import RESYNC_THEN_KILL

READ_ONLY = Path(__file__).resolve().parents[2] / "examples" / "variants" / "zab_read_only.py"


def hwm(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def test_hwms_zab_node_stepped_against_the_read_only_variant_is_clean_and_its_planted_bug_found():
    """The stepping's finer steps (an ACK counted after the follower's change) build ZAB's servers: each
    keeps the variant's field, where it raised TypeError (VariantServer missing 'read_only')."""
    spec = f"{READ_ONLY}:ReadOnlyMode"
    clean = run_schedule(own_node("zab"), Schedule(workload="log", clock="virtual", steps=RESYNC_THEN_KILL,
                                                    protocol=spec))
    assert clean.protocol_error is None and clean.findings == [], [str(f) for f in clean.findings]
    # ZOOKEEPER-3911 planted in the node: the restart loses the DIFF's entry, under the variant as under zab.
    planted = run_schedule(own_node("zab-ack-before-persist"), Schedule(
        workload="log", clock="virtual", steps=RESYNC_THEN_KILL, protocol=spec))
    found = {f.name: f for f in planted.findings}
    assert found["ModelStep"].step == 9, [str(f) for f in planted.findings]
    assert found["ModelStep"].text.startswith("after restart(n3), n3 showed follower g1 log=[] hwm=0: no step of "
                                              "ReadOnlyMode's model makes this"), found["ModelStep"].text


def test_hwm_test_steps_hwms_zab_node_against_the_variant_as_against_zab():
    """Two Hypothesis schedules: the same observed changes stepped against either model, no finding."""
    printed = {}
    for protocol, name in (("zab", "zab"), (f"{READ_ONLY}:ReadOnlyMode", "ReadOnlyMode")):
        result = hwm("test", "--workload", "log", "--nodes", "3", "--clock", "virtual", "--protocol", protocol,
                     "--schedules", "2", "--steps", "20", "--seed", "3", "--", *own_node("zab"))
        assert result.exit_code == 0, result.output
        stepped, verdict = result.output.splitlines()[-2:]
        assert stepped.endswith(f"observed changes stepped against the model of {name}"), result.output
        assert verdict.startswith("no finding in 2 schedules of up to 20 steps"), result.output
        printed[name] = (stepped.split()[0], verdict)
    assert printed["zab"] == printed["ReadOnlyMode"]  # the virtual clock: the same runs, stepped alike


def test_hwm_replay_of_a_schedule_against_the_read_only_variant(tmp_path):
    schedule = tmp_path / "resync.json"
    schedule.write_text(json.dumps({"format": "hwm-schedule/1", "workload": "log", "nodes": 3, "clock": "virtual",
                                    "protocol": "zab", "steps": RESYNC_THEN_KILL}))
    result = hwm("replay", schedule, "--brief", "--protocol", f"{READ_ONLY}:ReadOnlyFromLog", "--",
                 *own_node("zab"))
    assert result.exit_code == 0, result.output
    assert "stepped against ReadOnlyFromLog's model" in result.output, result.output


# A recorded ZAB run (hwm-events/1): n1 leads epoch 1 with n2 and n3, and logs entry 1, which n2 logs too.
HEADER = {"format": "hwm-events/1", "servers": ["n1", "n2", "n3"], "protocol": "zab"}
PROPOSED = [{"server": "n1", "generation": 1, "role": "leader"}, {"server": "n2", "generation": 1},
            {"server": "n3", "generation": 1}, {"server": "n1", "log": [[1, 1]]}, {"server": "n2", "log": [[1, 1]]}]
RUNS = {  # each run: its verdict under zab (None: valid; else the event no model step explains)
    "committed-read": (PROPOSED + [{"server": "n1", "hwm": 1}, {"server": "n1", "read": [[1, 1]]}], None),
    "lone-commit": (PROPOSED[:4] + [{"server": "n1", "hwm": 1}], 5),
}


@pytest.mark.parametrize("variant", ["ReadOnlyMode", "ReadOnlyFromLog"])
def test_hwm_validate_judges_a_recorded_zab_run_with_the_variants_model(tmp_path, variant):
    for name, (events, _) in RUNS.items():
        (tmp_path / f"{name}.jsonl").write_text("\n".join(json.dumps(line) for line in [HEADER, *events]) + "\n")
    files = sorted(tmp_path.glob("*.jsonl"))
    verdicts = {}
    for protocol in ("zab", f"{READ_ONLY}:{variant}"):
        result = hwm("validate", "--json", "--protocol", protocol, *files)
        assert result.exit_code == 1, result.output
        verdicts[protocol] = {Path(v["run"]).stem: (v["valid"], v.get("event")) for v in
                              map(json.loads, result.output.splitlines())}
    assert verdicts["zab"] == verdicts[f"{READ_ONLY}:{variant}"] == {
        name: (event is None, event) for name, (_, event) in RUNS.items()}


def test_a_read_the_variants_own_read_action_serves_is_explained_by_it(tmp_path):
    """n1 commits entry 1, and n2 reads it from its log while n2's HWM is still 0: no ZAB read serves
    it, nor ReadOnlyMode's (a read-only server serves up to its HWM), but ReadOnlyFromLog's read-only
    server serves its whole log; the validator asks the variant's own read action (`read_only_read`)
    as it asks `readable`."""
    run = tmp_path / "read-only-log-read.jsonl"
    events = PROPOSED + [{"server": "n1", "hwm": 1}, {"server": "n2", "read": [[1, 1]]}]
    run.write_text("\n".join(json.dumps(line) for line in [HEADER, *events]) + "\n")
    verdicts = {}
    for protocol in ("zab", f"{READ_ONLY}:ReadOnlyMode", f"{READ_ONLY}:ReadOnlyFromLog"):
        result = hwm("validate", "--json", "--protocol", protocol, run)
        [verdict] = map(json.loads, result.output.splitlines())
        verdicts[protocol.rsplit(":", 1)[-1]] = (verdict["valid"], verdict.get("event"))
    assert verdicts == {"zab": (False, 7), "ReadOnlyMode": (False, 7), "ReadOnlyFromLog": (True, None)}
