"""The lin-kv workload: how each client operation enters the linearizability check (a table of
small histories that must pass and must fail), the example nodes (forwarding to a leader, or to the
lin-kv service) clean on a few hunted schedules and on schedules that leave writes indeterminate,
each one's planted stale read caught by its saved schedule (and, under -m deep, found and shrunk
from scratch); the tutorial's log node through its log, and its naive sibling's acknowledged write
lost."""

import re
import sys

import pytest

from hwm.bridge.maelstrom.cluster import Limits, run_schedule
from hwm.bridge.maelstrom.hunt import hunt
from hwm.bridge.maelstrom.lin_kv import FINDING, LinKVChecker
from hwm.checker.linearizable import UNDECIDED
from hwm.bridge.maelstrom.schedule import Schedule, ScheduleError, check_step, load
from tests.nodes.commands import ROOT, log_node, naive_node

LIN_KV = ROOT / "examples" / "nodes" / "lin_kv"
SHORT = Limits(final_rounds=10)  # no timers in the node: a few final rounds deliver everything


def forwarding_node(bug: bool = False) -> list[str]:
    return plain_node("forwarding_node", bug)


def plain_node(name: str, bug: bool = False) -> list[str]:
    return [sys.executable, str(LIN_KV / f"{name}.py"), *(["--bug"] if bug else [])]


# ---- the history check: (type, request, status, reply) in the order requests and answers happened

def judged(events) -> list[str]:
    """Run `events` through the checker: ("call", id, type, request) sends a request,
    ("answer", id, status, reply) answers it; an operation never answered stays pending."""
    return [f.name for f in findings_of(events)]


def findings_of(events) -> list:
    checker = LinKVChecker(budget_s=5)
    ops = {}
    for event in events:
        if event[0] == "call":
            _, ident, kind, request = event
            ops[ident] = {"id": ident, "client": "c1", "node": "n1", "step": ident, "type": kind,
                          "request": request, "status": "pending", "reply": None, "reply_step": None}
            checker.on_request(ops[ident])
        else:
            _, ident, status, reply = event
            op = ops[ident]
            op["status"], op["reply"], op["reply_step"] = status, reply, ident
            checker.on_reply(op, ident)
    checker.at_end([])
    return checker.findings


def write(ident, value, key=0):
    return ("call", ident, "write", {"key": key, "value": value})


def read(ident, key=0):
    return ("call", ident, "read", {"key": key})


def cas(ident, source, target, key=0, create=False):
    return ("call", ident, "cas", {"key": key, "from": source, "to": target,
                                   **({"create_if_not_exists": True} if create else {})})


def ok(ident, **reply):
    return ("answer", ident, "ok", reply)


def error(ident, code):
    return ("answer", ident, "fail" if code not in (0, 13) else "info", {"type": "error", "code": code})


CLEAN = {
    "read of a key never written answered 20": [read(1), error(1, 20)],
    "concurrent write and read, the old value": [write(1, 1), ok(1), write(2, 2), read(3), ok(3, value=1), ok(2)],
    "a failed cas (22) changed nothing": [write(1, 1), ok(1), cas(2, 5, 6), error(2, 22), read(3), ok(3, value=1)],
    "a write refused with 11 changed nothing": [write(1, 1), ok(1), write(2, 2), error(2, 11), read(3), ok(3, value=1)],
    "a write that timed out (0) took effect": [write(1, 1), error(1, 0), read(2), ok(2, value=1)],
    "a write never answered took effect": [write(1, 1), read(2), ok(2, value=1)],
    "a write never answered never took effect": [write(1, 1), read(2), error(2, 20)],
    "cas with create on an absent key": [cas(1, 9, 4, create=True), ok(1), read(2), ok(2, value=4)],
    "keys are registers of their own": [write(1, 1, key=0), ok(1), read(2, key=1), error(2, 20)],
}
NOT_LINEARIZABLE = {
    "stale read after an acknowledged write": [write(1, 1), ok(1), write(2, 2), ok(2), read(3), ok(3, value=1)],
    "key does not exist after an acknowledged write": [write(1, 1), ok(1), read(2), error(2, 20)],
    "an unanswered write seen, then unseen": [write(1, 1), read(2), ok(2, value=1), read(3), error(3, 20)],
    "cas succeeded from a value the key did not hold": [write(1, 1), ok(1), cas(2, 7, 8), ok(2)],
    "a write refused with 11 shows up": [write(1, 1), error(1, 11), read(2), ok(2, value=1)],
    "a read answers a list nothing wrote": [write(1, 1), ok(1), read(2), ok(2, value=[1])],
}


@pytest.mark.parametrize("name", CLEAN)
def test_history_passes(name):
    assert judged(CLEAN[name]) == []


@pytest.mark.parametrize("name", NOT_LINEARIZABLE)
def test_history_fails(name):
    assert judged(NOT_LINEARIZABLE[name]) == [FINDING]


def test_a_finding_is_placed_at_the_last_answer_it_needs_not_at_an_operation_never_answered():
    """The step a finding names (where `hwm test` shows it, and where shrinking must keep it) is the
    latest answer among the operations that show it; a write never answered has no answer step."""
    [finding] = findings_of(NOT_LINEARIZABLE["an unanswered write seen, then unseen"])
    assert finding.step == 3
    [finding] = findings_of([write(1, 1), ok(1), write(2, 2), ok(2), read(3), ok(3, value=1)])
    assert finding.step == 3


def test_a_key_not_decided_in_time_is_undecided_not_a_finding():
    checker = LinKVChecker(budget_s=0)
    events = [write(k, k) for k in range(1, 19)] + [x for k in range(19, 37) for x in (read(k), ok(k, value=k - 18))]
    events += [read(40), ok(40, value=99)]
    ops = {}
    for event in events:
        if event[0] == "call":
            ops[event[1]] = {"id": event[1], "client": "c1", "node": "n1", "step": event[1], "type": event[2],
                             "request": event[3], "status": "pending", "reply": None, "reply_step": None}
            checker.on_request(ops[event[1]])
        else:
            ops[event[1]].update(status=event[2], reply=event[3], reply_step=event[1])
            checker.on_reply(ops[event[1]], event[1])
    checker.at_end([])
    assert checker.findings == []
    assert checker.undecided and checker.undecided[0].startswith("key 0: undecided after 0 s")


def test_a_lin_kv_step_is_checked_like_any_other():
    nodes = ["n1", "n2", "n3"]
    check_step({"op": "cas", "node": "n1", "key": 0, "from": 1, "to": 2, "create_if_not_exists": True}, nodes, "lin-kv")
    with pytest.raises(ScheduleError, match="field 'to'"):
        check_step({"op": "cas", "node": "n1", "key": 0, "from": 1}, nodes, "lin-kv", 3)
    with pytest.raises(ScheduleError, match="belongs to the lin-kv workload"):
        check_step({"op": "read", "node": "n1", "key": 0}, nodes, "log", 1)


# ---- the example node ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["forwarding_node", "service_node", "proxy_node"])
def test_the_planted_stale_read_is_caught_by_its_saved_schedule_and_the_correct_node_passes(name):
    schedule = load(LIN_KV / "schedules" / f"{name}.json")
    found = run_schedule(plain_node(name, bug=True), schedule, SHORT)
    assert found.protocol_error is None, str(found.protocol_error)
    assert [f.name for f in found.findings] == [FINDING], [str(f) for f in found.findings]
    correct = run_schedule(plain_node(name), schedule, SHORT)
    assert correct.protocol_error is None and correct.findings == [], [str(f) for f in correct.findings]


# n2's write reaches the leader, which applies it; the answer is lost to a partition, so the write
# is indeterminate; reads at the leader then see it. A cas from a value never held fails with 22.
ANSWER_LOST = [{"op": "write", "node": "n2", "key": 0, "value": 1}, {"op": "deliver", "from": "n2", "to": "n1"},
               {"op": "partition", "groups": [["n2"], ["n1", "n3"]]}, {"op": "deliver_all"},
               {"op": "read", "node": "n1", "key": 0}, {"op": "cas", "node": "n3", "key": 0, "from": 7, "to": 8},
               {"op": "deliver_all"}, {"op": "deliver_all"}, {"op": "read", "node": "n3", "key": 0},
               {"op": "deliver_all"}, {"op": "deliver_all"}]


def test_a_write_whose_answer_is_lost_is_indeterminate_and_not_a_finding():
    result = run_schedule(forwarding_node(), Schedule(workload="lin-kv", steps=ANSWER_LOST), SHORT)
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]
    assert [op["type"] for op in result.unanswered] == ["write"], "the partition no longer loses the answer"
    statuses = {op["id"]: (op["status"], (op["reply"] or {}).get("code")) for op in result.history}
    assert statuses[2] == ("ok", None) and statuses[3] == ("fail", 22)


def test_the_correct_node_is_clean_on_a_few_hunted_schedules():
    report = hunt(forwarding_node(), workload="lin-kv", schedules=3, steps=15, seed=1, limits=SHORT, settle_rounds=2)
    assert report.start_error is None and not report.failures, [str(f) for r in report.failures for f in r.findings]
    assert report.schedules == 3 and report.answered_ok > 0 and not report.undecided


@pytest.mark.deep
def test_the_planted_stale_read_is_found_and_shrunk():
    report = hunt(forwarding_node(bug=True), workload="lin-kv", schedules=30, seed=0, limits=SHORT)
    assert list(report.found) == [FINDING]
    assert len(report.found[FINDING].schedule.steps) <= 3


@pytest.mark.deep
@pytest.mark.parametrize("name", ["forwarding_node", "service_node"])
def test_the_correct_node_is_clean_on_many_schedules(name):
    report = hunt(plain_node(name), workload="lin-kv", schedules=40, seed=2, limits=SHORT)
    assert not report.failures, [str(f) for r in report.failures for f in r.findings]
    assert report.schedules == 40 and report.answered_ok > 0 and not report.undecided


# ---- the tutorial's replicated log serves lin-kv through its log ----------------------------

def test_the_log_nodes_acknowledged_write_lost_is_caught_and_the_correct_log_node_passes():
    # naive_node.py's ack-on-write answers write_ok on the leader's own append; a pause and a
    # partition elect a leader without the entry, and the final reads find the key absent.
    schedule = load(ROOT / "examples" / "nodes" / "schedules" / "lin-kv-ack-on-write.json")
    found = run_schedule(naive_node("ack-on-write"), schedule)
    assert found.protocol_error is None, str(found.protocol_error)
    assert FINDING in {f.name for f in found.findings}, [str(f) for f in found.findings]
    correct = run_schedule(log_node(), schedule)
    assert correct.protocol_error is None and correct.findings == [], [str(f) for f in correct.findings]
    assert any(op["type"] == "write" and op["status"] != "ok" for op in correct.history), \
        "the correct node acknowledged the write it could not commit: the schedule no longer tests this"


@pytest.mark.deep
def test_the_log_node_is_clean_on_lin_kv_schedules():
    report = hunt(log_node(), workload="lin-kv", schedules=30, seed=4)
    assert not report.failures, [str(f) for r in report.failures for f in r.findings]
    assert report.schedules == 30 and report.answered_ok > 0 and not report.undecided


# ---- the command line ------------------------------------------------------------------------

def test_bad_lin_kv_input_is_one_line_exit_2(tmp_path):
    from click.testing import CliRunner
    from hwm.cli import main

    done = CliRunner().invoke(main, ["test", "--workload", "lin-kv", "--linearizable-budget", "0", "--", "true"])
    assert done.exit_code == 2 and "--linearizable-budget" in done.output, done.output
    path = tmp_path / "bad.json"
    path.write_text('{"format": "hwm-schedule/1", "workload": "lin-kv", "steps": [{"op": "cas", "node": "n1", '
                    '"key": 0, "from": 1, "to": "two"}]}')
    done = CliRunner().invoke(main, ["replay", str(path), "--", *forwarding_node()])
    assert done.exit_code == 2 and "step 1, field 'to'" in done.output and "Traceback" not in done.output, done.output


def test_an_undecided_key_is_a_line_of_its_own_and_no_finding(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from hwm.bridge.maelstrom import lin_kv
    from hwm.checker.linearizable import Verdict
    from hwm.cli import main

    monkeypatch.setattr(lin_kv, "check_register",
                        lambda ops, budget_s: Verdict(UNDECIDED, reason=f"undecided after {budget_s:.3g} s (a test)"))
    done = CliRunner().invoke(main, ["test", "--workload", "lin-kv", "--clock", "virtual", "--schedules", "2",
                                     "--steps", "12", "--settle-rounds", "4", "--linearizable-budget", "3",
                                     "--save", str(tmp_path / "s.json"), "--", *forwarding_node(bug=True)])
    assert done.exit_code == 0, done.output
    assert "\nlinearizability: " in done.output and " undecided (no finding; " in done.output, done.output
    assert re.search(r"schedule \d, key \d: undecided after 3 s \(a test\)", done.output), done.output


# ---- a client's request passed on unchanged (Maelstrom's network takes any src it knows) -----

def proxy_node(bug: bool = False) -> list[str]:
    return plain_node("proxy_node", bug)


# The proxy node's election timer runs out 1 s after init; then n2 and n3 pass each request on to
# n1 with the client's src, and n1 answers the client. A cas from a value the key never held.
PROXIED = [{"op": "wait", "ms": 1200}, {"op": "write", "node": "n2", "key": 0, "value": 1}, {"op": "deliver_all"},
           {"op": "cas", "node": "n3", "key": 0, "from": 5, "to": 6}, {"op": "deliver_all"},
           {"op": "read", "node": "n2", "key": 0}, {"op": "deliver_all"}]


def test_a_clients_request_passed_on_unchanged_is_answered_by_the_node_it_reaches():
    result = run_schedule(proxy_node(), Schedule(workload="lin-kv", clock="wall", steps=PROXIED), SHORT)
    assert result.protocol_error is None and result.findings == [], str(result.protocol_error)
    scheduled = [op for op in result.history if op["step"] is not None]  # not the final phase's reads
    statuses = [(op["node"], op["status"], (op["reply"] or {}).get("code")) for op in scheduled]
    assert statuses == [("n2", "ok", None), ("n3", "fail", 22), ("n2", "ok", None)], statuses
    assert scheduled[-1]["reply"]["value"] == 1
    planted = run_schedule(proxy_node(bug=True), Schedule(workload="lin-kv", clock="wall", steps=PROXIED), SHORT)
    assert [f.name for f in planted.findings] == [FINDING], [str(f) for f in planted.findings]


PASS_ON_TO_THE_SERVICE = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    body = msg["body"]
    if body["type"] == "init":
        reply = {"type": "init_ok", "in_reply_to": body["msg_id"]}
        print(json.dumps({"src": body["node_id"], "dest": msg["src"], "body": reply}), flush=True)
    else:  # the client's own request, on to Maelstrom's lin-kv service, which answers the client
        print(json.dumps(dict(msg, dest="lin-kv")), flush=True)
"""


def test_a_clients_request_passed_on_to_the_lin_kv_service_is_answered_by_the_service(tmp_path):
    node = tmp_path / "pass_on.py"
    node.write_text(PASS_ON_TO_THE_SERVICE)
    steps = [{"op": "write", "node": "n1", "key": 0, "value": 4}, {"op": "deliver_all"},
             {"op": "read", "node": "n2", "key": 0}, {"op": "deliver_all"}]
    schedule = Schedule(workload="lin-kv", clock="wall", steps=steps, nodes=2)
    result = run_schedule([sys.executable, str(node)], schedule, SHORT)
    assert result.protocol_error is None and result.findings == [], str(result.protocol_error)
    assert [(op["status"], (op["reply"] or {}).get("value")) for op in result.history
            if op["step"] is not None] == [("ok", None), ("ok", 4)]


def test_the_first_settle_grows_on_the_wall_clock_until_a_node_with_a_slow_timer_serves():
    # Six rounds (about 0.3 s) end before the proxy node's 1 s election timer: nothing succeeds until
    # the first settle has doubled twice. hwm says how far it grew.
    from click.testing import CliRunner
    from hwm.cli import main
    done = CliRunner().invoke(main, ["test", "--workload", "lin-kv", "--schedules", "8", "--steps", "10", "--seed", "0",
                                     "--settle-time", "2", "--", *proxy_node()])
    assert done.exit_code == 0, done.output
    grew = re.search(r"^the first settle grew to (\d+) rounds \(at least [\d.]+ s of the nodes' own timers\) while "
                     r"most schedules served no operation", done.output, re.M)
    served = re.search(r"no finding in 8 schedules of up to 10 steps; (\d+) of the \d+ operations succeeded",
                       done.output)
    assert grew and int(grew[1]) > 6 and served and int(served[1]) > 0, done.output


def test_a_passed_on_request_keeps_its_clients_src_through_a_partition_as_on_maelstroms_network():
    # Maelstrom drops a message by its src, and clients are never cut off: n2's proxied write reaches
    # the leader n1 across the partition, whose answer goes straight to the client.
    steps = [{"op": "wait", "ms": 1200}, {"op": "partition", "groups": [["n2"], ["n1", "n3"]]},
             {"op": "write", "node": "n2", "key": 0, "value": 1}, {"op": "deliver_all"}]
    result = run_schedule(proxy_node(), Schedule(workload="lin-kv", clock="wall", steps=steps), SHORT)
    assert result.protocol_error is None and result.findings == [], str(result.protocol_error)
    assert [op["status"] for op in result.history if op["step"] is not None] == ["ok"]
    assert any("n2→n1 write from c2 (in flight)" in event for events in result.events for event in events)
