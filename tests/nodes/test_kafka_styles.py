"""Plain Maelstrom kafka nodes written the ways people write them (examples/nodes/kafka/): each runs
under hwm as it would under Maelstrom, a correct one gives no finding, and each planted bug is
caught by its saved schedule as the kind of finding it is. The hunts that find them from scratch,
and long clean hunts of the correct nodes, are deep (test_kafka_styles_deep.py)."""

import json
import sys

import pytest
from click.testing import CliRunner

from hwm.bridge.maelstrom.cluster import Limits, run_schedule
from hwm.bridge.maelstrom.hunt import saved_kinds
from hwm.bridge.maelstrom.schedule import Schedule, load
from hwm.cli import main
from tests.nodes.commands import ROOT

KAFKA = ROOT / "examples" / "nodes" / "kafka"
STYLES = ("strict_record_node", "no_unknown_handler_node", "forwarding_node", "timer_gossip_node",
          "slow_start_node")


def style(name: str, bug: bool = False) -> list[str]:
    return [sys.executable, str(KAFKA / f"{name}.py"), *(["--bug"] if bug else [])]


def saved(name: str) -> Schedule:
    return load(KAFKA / "schedules" / f"{name}.json")


def kind_of(schedule: Schedule) -> str:
    return saved_kinds(schedule.findings)[0]


# The slow starter takes seconds a run: its schedule runs under -m deep (the default suite's time).
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.deep) if n == "slow_start_node" else n
                                  for n in STYLES])
def test_each_planted_bug_is_caught_by_its_saved_schedule_as_its_own_kind_and_the_correct_node_passes(name):
    schedule = saved(name)
    # A lost message is never served again: a short recovery period says so as well as a long one.
    found = run_schedule(style(name, bug=True), schedule, Limits(settle_seconds=2))
    assert found.protocol_error is None, str(found.protocol_error)
    assert kind_of(schedule) in {f.name for f in found.findings}, [str(f) for f in found.findings]
    correct = run_schedule(style(name), schedule)
    assert correct.protocol_error is None, str(correct.protocol_error)
    assert correct.findings == [], [str(f) for f in correct.findings]


PARTITIONED_OWNER = [{"op": "send", "node": "n1", "key": "k1", "msg": 1}, {"op": "deliver_all"},
                     {"op": "deliver_all"}, {"op": "deliver_all"},
                     {"op": "partition", "groups": [["n3"], ["n1", "n2"]]},
                     {"op": "send", "node": "n1", "key": "k2", "msg": 2}, {"op": "send", "node": "n3", "key": "k1", "msg": 3},
                     {"op": "deliver_all"}, {"op": "deliver_all"}, {"op": "poll", "node": "n2", "offsets": {"k1": 0}},
                     {"op": "heal"}]


@pytest.mark.parametrize("name", [pytest.param("no_unknown_handler_node", marks=pytest.mark.deep), "forwarding_node"])
def test_a_forward_lost_to_a_partition_is_indeterminate_not_a_finding(name):
    # The node forwards to the key's owner and waits; the forward is lost and never retried, so the
    # client is never answered. Maelstrom counts that as :info: availability, not safety.
    result = run_schedule(style(name), Schedule(workload="kafka", clock="wall", steps=PARTITIONED_OWNER),
                          Limits(settle_seconds=1.5))
    assert result.protocol_error is None, str(result.protocol_error)
    assert result.findings == [], [str(f) for f in result.findings]
    assert result.unanswered, "the partition lost no forward: the schedule no longer tests this"
    # With replies required, each unanswered request is a NoReply finding and nothing else is. On the wall
    # clock a loaded machine may deliver the forward before the partition cuts it: the schedule again,
    # up to three times, until one run loses it.
    for _ in range(3):
        required = run_schedule(style(name), Schedule(workload="kafka", clock="wall", steps=PARTITIONED_OWNER),
                                Limits(settle_seconds=1.5, replies_required=True))
        assert sorted(f.name for f in required.findings) == ["NoReply"] * len(required.unanswered), \
            [str(f) for f in required.findings]
        if required.unanswered:
            break
    assert required.unanswered, "three runs with replies required lost no forward"


# n2 and n3 each take a send of k1 (offsets 0 and 1 from lin-kv) and store it alone; polled from 0,
# n2 holds only 0 and n3 a hole at 0: offset 1 is served by nobody until the 5 s gossip.
ONLY_AFTER_GOSSIP = [{"op": "send", "node": "n2", "key": "k1", "msg": 1}, *[{"op": "deliver_all"}] * 4,
                     {"op": "send", "node": "n3", "key": "k1", "msg": 2}, *[{"op": "deliver_all"}] * 4]


def test_a_node_that_replicates_on_a_timer_is_given_the_recovery_period_it_needs():
    schedule = Schedule(workload="kafka", clock="wall", steps=ONLY_AFTER_GOSSIP)
    result = run_schedule(style("timer_gossip_node"), schedule)
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]
    assert result.history[1]["status"] == "ok"
    # A recovery period shorter than the node's timer cannot tell it from a lost write: that is what
    # --settle-time is for, and why the final phase reads again until it is spent.
    hurried = run_schedule(style("timer_gossip_node"), schedule, Limits(settle_seconds=1.5))
    assert {f.name for f in hurried.findings} == {"AckedNeverLost"}, [str(f) for f in hurried.findings]


@pytest.mark.deep  # by default the planted bugs' schedules run these two nodes to their end
def test_init_is_exactly_maelstroms_and_no_message_of_hwms_reaches_a_plain_node():
    # strict_record_node builds InitBody(**body) from a dataclass of Maelstrom's four fields and
    # no_unknown_handler_node exits on a type it has no handler for: both run to the end.
    steps = [{"op": "send", "node": "n2", "key": "k1", "msg": 1}, {"op": "settle", "rounds": 4},
             {"op": "poll", "node": "n1", "offsets": {"k1": 0}}, {"op": "tick"}, {"op": "settle", "rounds": 4}]
    for name in ("strict_record_node", "no_unknown_handler_node"):
        result = run_schedule(style(name), Schedule(workload="kafka", clock="wall", steps=steps))
        assert result.protocol_error is None, f"{name}: {result.protocol_error}"
        assert [op["status"] for op in result.history[:2]] == ["ok", "ok"], (name, result.history[:2])


def test_the_virtual_clock_needs_a_node_that_declares_it_and_says_so_before_any_schedule(tmp_path):
    done = CliRunner().invoke(main, ["test", "--clock", "virtual", "--schedules", "3", "--save",
                                     str(tmp_path / "s.json"), "--", *style("no_unknown_handler_node")])
    assert done.exit_code == 2, done.output
    assert done.output.count("\n") <= 2, done.output  # one error, no shrunk schedule, no replay hint
    assert 'error: the node did not start: node n1: does not follow hwm\'s virtual clock: its init_ok ' \
           'declares no "hwm_tick"' in done.output
    assert not (tmp_path / "s.json").exists()


def test_an_unknown_extension_in_init_ok_is_named(tmp_path):
    node = tmp_path / "node.py"
    node.write_text("import json, sys\n"
                    "for line in sys.stdin:\n"
                    "    m = json.loads(line)\n"
                    "    b = {'type': 'init_ok', 'in_reply_to': m['body']['msg_id'], 'hwm': ['hwm_sate']}\n"
                    "    print(json.dumps({'src': m['dest'], 'dest': m['src'], 'body': b}), flush=True)\n")
    done = CliRunner().invoke(main, ["test", "--schedules", "2", "--", sys.executable, str(node)])
    assert done.exit_code == 2, done.output
    assert "init_ok declares unknown hwm extension 'hwm_sate'; known: hwm_state, hwm_tick, kill, duplicate" \
           in done.output


def test_faults_follow_what_the_node_declares_unless_named(tmp_path):
    report = tmp_path / "r.json"
    plain = CliRunner().invoke(main, ["test", "--schedules", "1", "--steps", "3", "--json", "--save", str(report),
                                      "--", *style("strict_record_node")])
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.output)["faults"] == ["partition", "pause"]
    named = CliRunner().invoke(main, ["test", "--schedules", "1", "--steps", "3", "--json", "--faults", "pause,kill",
                                      "--save", str(report), "--", *style("strict_record_node")])
    assert named.exit_code == 0 and json.loads(named.output)["faults"] == ["kill", "pause"], named.output
    bad = CliRunner().invoke(main, ["test", "--faults", "partition,flood", "--", "true"])
    assert bad.exit_code == 2 and "unknown fault 'flood'" in bad.output
