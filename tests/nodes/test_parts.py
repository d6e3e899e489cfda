"""The harness's parts without processes: services' weak guarantees, the history checks, schedule files."""

import json
import random
import shutil

import pytest

from hwm.bridge.maelstrom.history import HistoryChecker
from hwm.bridge.maelstrom.schedule import FORMAT, ScheduleError, check_step, from_json, load
from hwm.bridge.maelstrom.services import LinKV, LwwKV, SeqKV


def test_lin_kv_reads_the_latest_write_and_answers_cas_with_maelstroms_codes():
    kv = LinKV(random.Random(0))
    assert kv.handle("n1", {"type": "read", "key": "x"})["code"] == 20
    assert kv.handle("n1", {"type": "cas", "key": "x", "from": 1, "to": 2})["code"] == 20
    assert kv.handle("n1", {"type": "cas", "key": "x", "from": 1, "to": 2, "create_if_not_exists": True})["type"] == "cas_ok"
    assert kv.handle("n2", {"type": "cas", "key": "x", "from": 1, "to": 3})["code"] == 22
    assert kv.handle("n2", {"type": "read", "key": "x"}) == {"type": "read_ok", "value": 2}
    assert kv.handle("n2", {"type": "bump", "key": "x"})["code"] == 10


def test_seq_kv_serves_stale_reads_but_never_goes_back_for_one_node():
    kv = SeqKV(random.Random(0))
    for value in range(10):
        kv.handle("n1", {"type": "write", "key": "x", "value": value})
    seen = [kv.handle("n2", {"type": "read", "key": "x"})["value"] for _ in range(30)]
    assert seen[0] < 9  # stale: another node's latest write is not yet visible
    assert seen == sorted(seen)  # but one node's reads never go back
    assert kv.handle("n1", {"type": "read", "key": "x"})["value"] == 9  # a node reads its own writes


def test_lww_kv_loses_one_of_two_writes_to_the_larger_stamp():
    lost = 0
    for seed in range(20):
        kv = LwwKV(random.Random(seed))
        kv.handle("n1", {"type": "write", "key": "x", "value": "first"})
        kv.handle("n2", {"type": "write", "key": "x", "value": "second"})
        kv.merge()
        values = {kv.handle(n, {"type": "read", "key": "x"})["value"] for n in ("n1", "n2")}
        assert len(values) == 1  # replicas converge
        lost += values == {"first"}  # the later write lost to an earlier one with a larger stamp
    assert 0 < lost < 20


def _op(id, kind, request, reply, node="n1"):
    return {"id": id, "client": "c1", "node": node, "step": id, "type": kind, "request": request,
            "status": "ok", "reply": reply}


def test_a_polled_message_missing_from_a_later_poll_that_passes_it_is_a_finding():
    checker = HistoryChecker()
    checker.on_reply(_op(1, "send", {"key": "k", "msg": 7}, {"offset": 2}), 1)
    checker.on_reply(_op(2, "poll", {"offsets": {"k": 0}}, {"msgs": {"k": [[1, 5], [2, 7]]}}), 2)
    assert checker.findings == []
    checker.on_reply(_op(3, "poll", {"offsets": {"k": 1}}, {"msgs": {"k": [[1, 5], [3, 9]]}}, node="n2"), 3)
    names = [f.name for f in checker.findings]
    assert names == ["AckedNeverLost"]
    assert "op 1 c1→n1 send(k, 7) at step 1 acknowledged 7 at offset 2" in checker.findings[0].text
    assert "op 3 c1→n2 poll" in checker.findings[0].text


def test_two_messages_at_one_offset_and_committed_offsets_going_back_are_findings():
    checker = HistoryChecker()
    checker.on_reply(_op(1, "poll", {"offsets": {"k": 0}}, {"msgs": {"k": [[1, 5], [1, 6]]}}), 1)
    checker.on_reply(_op(2, "commit_offsets", {"offsets": {"k": 4}}, {}), 2)
    checker.on_reply(_op(3, "list_committed_offsets", {"keys": ["k"]}, {"offsets": {"k": 3}}), 3)
    names = [f.name for f in checker.findings]
    assert names[0] == "OneValuePerOffset" and names[-1] == "CommittedOffsetsMonotonic"
    assert "says 3" in checker.findings[-1].text and "had committed offset 4" in checker.findings[-1].text


def _failed(id, kind, request, code, node="n1"):
    return {**_op(id, kind, request, {"type": "error", "code": code}, node), "status": "fail"}


def _send(id, msg, offset, node="n1"):
    return _op(id, "send", {"key": "k", "msg": msg}, {"offset": offset}, node)


def _poll(id, start, pairs, node="n2"):
    return _op(id, "poll", {"offsets": {"k": start}}, {"msgs": {"k": [list(p) for p in pairs]}}, node)


# The history checks at their boundaries: offset 0 (the first a Kafka log gives), message 0, a poll that
# starts at an entry or just past it, one that ends just before it, the run's last operation (the
# final reads). Each row: the operations, the final reads (None: none), the findings' names.
@pytest.mark.parametrize("ops, final, found", [
    # an acknowledged send at offset 0 is checked like any other
    ([_send(1, 7, 0), _poll(2, 0, [(0, 8)])], None, ["AckedNeverLost"]),  # contradicted
    ([_send(1, 7, 0), _poll(2, 0, [(1, 9)])], None, ["AckedNeverLost"]),  # a poll from 0 passes it without it
    ([_send(1, 7, 0), _send(2, 8, 0, node="n2")], None, ["OneValuePerOffset"]),
    ([_send(1, 0, 0), _poll(2, 0, [(1, 9)])], None, ["AckedNeverLost"]),  # message 0 too
    ([_send(1, 7, 0)], [_poll(9, 0, [(1, 9)])], ["AckedNeverLost"]),  # the final reads no longer serve it
    ([_send(1, 7, 0), _poll(2, 0, [(0, 7), (1, 9)])], [_poll(9, 0, [(0, 7), (1, 9)])], []),
    ([_send(1, 7, 0), _poll(2, 1, [(1, 9)])], None, []),  # a poll starting past it says nothing of it
    ([_send(1, 7, 0), _poll(2, 0, [])], None, []),  # an empty poll passes nothing
    ([_send(1, 7, 0)], [], []),  # no final read answered: unavailable, not lost
    # a read at offset 0 is a read like any other
    ([_poll(1, 0, [(0, 5)]), _poll(2, 0, [(0, 6)])], None, ["ReadNeverTruncated"]),
    ([_poll(1, 0, [(0, 5)]), _poll(2, 0, [(1, 6)])], None, ["ReadNeverTruncated"]),
    ([_poll(1, 0, [(0, 5)]), _send(2, 5, 0)], None, []),  # the send a read showed, acknowledged after
    ([_poll(1, 0, [(0, 5)]), _send(2, 6, 0)], None, ["ReadNeverTruncated"]),
    # the poll's start and end at an acknowledged offset 2
    ([_send(1, 7, 2), _poll(2, 2, [(3, 9)])], None, ["AckedNeverLost"]),  # starts at it
    ([_send(1, 7, 2), _poll(2, 3, [(3, 9)])], None, []),  # starts just past it
    ([_send(1, 7, 2), _poll(2, 0, [(0, 5), (1, 6)])], None, []),  # ends just before it
    ([_send(1, 7, 2), _poll(2, 0, [(0, 5), (2, 7)])], None, []),  # ends at it, with it
    # the log workload: an index is checked as an offset of one key
    ([_op(1, "log_append", {"value": 7}, {"index": 1}), _op(2, "log_read", {"index": 1}, {"index": 1, "value": 8})],
     None, ["AckedNeverLost"]),
    ([_op(1, "log_append", {"value": 7}, {"index": 1}), _op(2, "log_append", {"value": 8}, {"index": 1})], None,
     ["OneValuePerOffset"]),
    ([_op(1, "log_append", {"value": 7}, {"index": 1}), _op(2, "log_read", {"index": 1}, {"index": 1, "value": 7})],
     None, []),
    ([_op(1, "log_append", {"value": 0}, {"index": 1})], [_op(9, "log_read", {"index": 1}, {"index": 1, "value": 5})],
     ["AckedNeverLost"]),
    # a final log_read refused: 20 says the index is not there to serve (lost), 11 says nothing of it
    ([_op(1, "log_append", {"value": 7}, {"index": 1})], [_failed(9, "log_read", {"index": 1}, 20)],
     ["AckedNeverLost"]),
    ([_op(1, "log_append", {"value": 7}, {"index": 1})], [_failed(9, "log_read", {"index": 1}, 11)], []),
    # the run's last operation: the final reads judge it, whatever node serves it
    ([_send(1, 7, 2)], [_poll(9, 0, [(2, 7)], node="n3")], []),
    ([_send(1, 7, 2)], [_poll(9, 0, [(0, 5), (1, 6)])], ["AckedNeverLost"]),
])
def test_the_history_checks_at_their_boundaries(ops, final, found):
    checker = HistoryChecker()
    for op in ops:
        checker.on_reply(op, op["step"])
    if final is not None:
        checker.at_end(final)
    assert [f.name for f in checker.findings] == found, [str(f) for f in checker.findings]


# Maelstrom lets a consumer commit lower: a listed offset below an earlier floor is a finding only
# when no client sent a commit at or below it after that floor's request (and before the listing's answer).
@pytest.mark.parametrize("ops, found", [
    ([("commit_offsets", 4), ("commit_offsets", 2), ("list_committed_offsets", 3)], False),  # lowered to 2
    ([("commit_offsets", 2), ("commit_offsets", 4), ("list_committed_offsets", 3)], True),  # 2 came first
    ([("commit_offsets", 4), ("commit_offsets", 3), ("list_committed_offsets", 3)], False),  # lowered to exactly it
    ([("commit_offsets", 4), ("commit_offsets", 3), ("list_committed_offsets", 2)], True),  # below the lower commit
    ([("commit_offsets", 4), ("list_committed_offsets", 4)], False),  # the first offset equal: no finding
    ([("list_committed_offsets", 4), ("list_committed_offsets", 3)], True),  # a listing is a floor too
    ([("list_committed_offsets", 4), ("commit_offsets", 0), ("list_committed_offsets", 0)], False),
])
def test_a_listed_committed_offset_may_go_back_only_after_a_client_committed_that_low(ops, found):
    checker = HistoryChecker()
    for k, (kind, offset) in enumerate(ops, 1):
        request = {"offsets": {"k": offset}} if kind == "commit_offsets" else {"keys": ["k"]}
        reply = {} if kind == "commit_offsets" else {"offsets": {"k": offset}}
        checker.on_reply(_op(k, kind, request, reply), k)
    assert bool(checker.findings) == found, [str(f) for f in checker.findings]


# A commit is a floor for a listing only if it was answered before the listing was sent: one still in
# flight when the listing was sent may not have been applied when the listing was read. The checker
# numbers every request and reply in the order the run makes them (on_request, on_reply), not by
# step, so within one step the order of the two calls decides. Each row: (call, op, step) events of a
# commit of offset 4 and a listing that answers 3; whether that is a finding.
@pytest.mark.parametrize("events, found", [
    # the listing was sent while the commit was in flight (answered after it): no finding
    ([("send", "commit", 1), ("send", "list", 2), ("reply", "commit", 3), ("reply", "list", 4)], False),
    # the listing was sent after the commit was answered: a finding
    ([("send", "commit", 1), ("reply", "commit", 2), ("send", "list", 3), ("reply", "list", 4)], True),
    # the commit answered and the listing sent at the same step: answered first, a floor ...
    ([("send", "commit", 1), ("reply", "commit", 2), ("send", "list", 2), ("reply", "list", 3)], True),
    # ... the listing sent first, none
    ([("send", "commit", 1), ("send", "list", 2), ("reply", "commit", 2), ("reply", "list", 3)], False),
    # the listing sent and answered at the step the commit was answered, after it: a floor
    ([("send", "commit", 1), ("reply", "commit", 2), ("send", "list", 2), ("reply", "list", 2)], True),
])
def test_a_commit_is_a_floor_only_for_a_listing_sent_after_it_was_answered(events, found):
    checker = HistoryChecker()
    ops = {"commit": _op(1, "commit_offsets", {"offsets": {"k": 4}}, {}),
           "list": _op(2, "list_committed_offsets", {"keys": ["k"]}, {"offsets": {"k": 3}})}
    for call, name, step in events:
        if call == "send":
            ops[name]["step"] = step
            checker.on_request(ops[name])
        else:
            checker.on_reply(ops[name], step)
    assert bool(checker.findings) == found, [str(f) for f in checker.findings]
    if found:
        assert [f.name for f in checker.findings] == ["CommittedOffsetsMonotonic"]
        assert "had committed offset 4" in checker.findings[0].text and "says 3" in checker.findings[0].text


def test_a_commit_that_definitely_failed_does_not_lower_the_floor():
    checker = HistoryChecker()
    checker.on_reply(_op(1, "commit_offsets", {"offsets": {"k": 4}}, {}), 1)
    failed = dict(_op(2, "commit_offsets", {"offsets": {"k": 1}}, {"type": "error", "code": 11}), status="fail")
    checker.on_request(failed)
    checker.on_reply(_op(3, "list_committed_offsets", {"keys": ["k"]}, {"offsets": {"k": 1}}), 3)
    assert [f.name for f in checker.findings] == ["CommittedOffsetsMonotonic"]


@pytest.mark.parametrize("step, message", [
    ({"op": "fly"}, "step 2, field 'op': unknown op 'fly'"),
    ({"op": "kill", "node": "n7"}, "step 2, field 'node': no node 'n7'; this run has n1, n2, n3"),
    ({"op": "log_append", "node": "n1"}, "step 2, field 'value': log_append needs field 'value'"),
    ({"op": "send", "node": "n1", "key": "k", "msg": 1}, "step 2, field 'op': 'send' belongs to the kafka workload"),
    ({"op": "tick", "node": 5}, "step 2, field 'node': 'node' must be str"),
    # A real server's steps in a node schedule: refused, not skipped (a run without them is another run).
    ({"op": "power_fail", "node": "n1"}, "step 2, field 'op': power_fail is a step of a real server's run"),
    ({"op": "rollback", "node": "n1"}, "step 2, field 'op': rollback is a step of a real server's run"),
    ({"op": "concurrent", "steps": [{"op": "log_read", "node": "n1", "index": 1}]},
     "step 2, field 'op': concurrent is a step of a real server's run"),
])
def test_a_bad_schedule_step_is_named_by_file_step_and_field(tmp_path, step, message):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "hwm-schedule/1", "workload": "log", "nodes": 3,
                                "steps": [{"op": "tick"}, step]}))
    with pytest.raises(ScheduleError) as e:
        load(path)
    assert str(e.value) == f"{path}, {message}" or str(e.value).startswith(f"{path}, {message}")


def test_a_message_a_poll_read_is_one_no_later_poll_or_final_read_may_change_or_drop():
    # A checker that recorded only acknowledged sends, not what polls read, passed the suite
    # (docs/mutation.md): a polled message must stay what it was.
    checker = HistoryChecker()
    checker.on_reply(_op(1, "poll", {"offsets": {"k": 0}}, {"msgs": {"k": [[1, 5]]}}), 1)
    checker.on_reply(_op(2, "poll", {"offsets": {"k": 0}}, {"msgs": {"k": [[1, 6]]}}, node="n2"), 2)
    assert [f.name for f in checker.findings] == ["ReadNeverTruncated"]
    assert "read 5 at offset 1 of key 'k'; op 2 c1→n2 poll({'k': 0}) at step 2 got 6 there" in checker.findings[0].text
    checker = HistoryChecker()
    checker.on_reply(_op(1, "poll", {"offsets": {"k": 0}}, {"msgs": {"k": [[1, 5]]}}), 1)
    checker.at_end([_op(9, "poll", {"offsets": {"k": 0}}, {"msgs": {"k": [[2, 7]]}})])
    assert [f.name for f in checker.findings] == ["ReadNeverTruncated"]
    assert "no node serves it any more" in checker.findings[0].text


def test_a_fresh_hunt_report_is_not_out_of_time_and_has_no_failure():
    # `hwm test` prints "(stopped by --time-limit)" from this flag: a report that started out of time
    # printed it after every hunt, and passed the suite (docs/mutation.md).
    from hwm.bridge.maelstrom.hunt import HuntReport

    report = HuntReport()
    assert report.out_of_time is False and report.shortest is None and report.failures == []


@pytest.mark.parametrize("nodes, refused", [(1, False), (9, False), (0, True), (10, True)])
def test_a_schedule_runs_one_to_nine_nodes(tmp_path, nodes, refused):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "hwm-schedule/1", "workload": "log", "nodes": nodes,
                                "steps": [{"op": "tick"}]}))
    if refused:
        with pytest.raises(ScheduleError, match="nodes must be an integer from 1 to 9"):
            load(path)
    else:
        assert load(path).nodes == nodes


def test_a_replayed_step_is_narrated_with_its_own_events():
    from types import SimpleNamespace

    from hwm.bridge.maelstrom.replay import narrate_step

    lines: list[str] = []
    narrate_step(2, {"op": "tick"}, SimpleNamespace(events=[["of step 1"], ["of step 2"]]), lines.append)
    assert lines[1:] == ["    of step 2"]


def test_a_runs_operations_are_its_history_entries_that_a_schedule_step_made():
    # `hwm test` reports this count; a mutant that counted each twice passed the suite (docs/mutation.md).
    from hwm.bridge.maelstrom.cluster import RunResult
    from hwm.bridge.maelstrom.schedule import Schedule

    result = RunResult(Schedule(), history=[{"step": 1}, {"step": None}, {"step": 3}, {}])
    assert result.operations() == 2 and not result.failed


def test_a_schedule_of_another_format_and_a_cas_whose_create_flag_is_no_bool_are_refused_by_field():
    with pytest.raises(ScheduleError, match='expected "format"'):
        from_json({"format": FORMAT + "-other", "steps": []})
    step = {"op": "cas", "node": "n1", "key": 0, "from": 1, "to": 2}
    check_step(dict(step, create_if_not_exists=False), ["n1", "n2"], "lin-kv")
    with pytest.raises(ScheduleError, match="'create_if_not_exists' must be true or false"):
        check_step(dict(step, create_if_not_exists="yes"), ["n1", "n2"], "lin-kv")


@pytest.mark.parametrize("kind,request_,shown", [
    ("cas", {"key": 0, "from": 1, "to": 2}, "cas(0, 1→2)"),
    ("cas", {"key": 0, "from": 1, "to": 2, "create_if_not_exists": True}, "cas(0, 1→2, create)"),
    ("write", {"key": 3, "value": 7}, "write(3, 7)"),
    ("send", {"key": "k1", "msg": 5}, "send(k1, 5)"),
    ("poll", {"offsets": {"k1": 0}}, "poll({'k1': 0})"),
])
def test_an_operation_is_described_by_its_arguments_and_where_it_ran(kind, request_, shown):
    from hwm.bridge.maelstrom.history import describe_op

    op = {"id": 4, "client": "c2", "node": "n1", "type": kind, "request": request_, "step": 9}
    assert describe_op(op) == f"op 4 c2→n1 {shown} at step 9"
    assert describe_op(dict(op, step=None)).endswith(" at the final reads")


def run_delivering(seconds_each: float, budget: float):
    """A wall-clock run's deliver_all over ten messages in flight, each delivery taking
    `seconds_each`, with `budget` seconds for the round (no node programs: delivery is recorded)."""
    import time

    from hwm.bridge.maelstrom.cluster import Limits, Run
    from hwm.bridge.maelstrom.schedule import Schedule

    run = Run(["true"], Schedule(clock="wall"), Limits(deliver_all_seconds=budget))
    delivered, events = [], []
    run._deliver = lambda msg: (time.sleep(seconds_each), delivered.append(msg["n"]))
    run._event = events.append
    run.in_flight = [{"n": k} for k in range(10)]
    try:
        run._deliver_all()
    finally:
        shutil.rmtree(run.root)  # its nodes' data folders, made when it was built
    run.in_flight.append({"n": "sent since"})
    return delivered, [m["n"] for m in run.in_flight], events


def test_a_wall_clock_deliver_all_delivers_everything_within_its_time():
    delivered, left, events = run_delivering(0.0, budget=5.0)
    assert delivered == list(range(10)) and left == ["sent since"] and events == []


def test_a_wall_clock_deliver_all_past_its_time_leaves_the_rest_in_flight_ahead_of_what_came_since():
    delivered, left, events = run_delivering(0.02, budget=0.05)
    assert 1 <= len(delivered) < 10, delivered
    assert left == list(range(len(delivered), 10)) + ["sent since"]
    assert events == [f"{10 - len(delivered)} messages left in flight after 0.05 s of deliveries"]


@pytest.mark.parametrize("nth,dropped", [(None, 0), (0, 0), (1, 1), (2, 2), (7, 2)])
def test_a_drop_takes_the_nth_oldest_message_between_its_two_nodes(nth, dropped):
    """A schedule's deliver, drop or duplicate names the nth oldest message in flight from one node to
    another (the oldest without nth; the newest where fewer are in flight)."""
    from hwm.bridge.maelstrom.cluster import Run
    from hwm.bridge.maelstrom.schedule import Schedule

    run = Run(["true"], Schedule())
    try:
        events = []
        run._event = events.append
        sent = [{"src": "n1", "dest": "n2", "body": {"type": "hwm_peer", "k": k}} for k in range(3)]
        run.in_flight = [sent[0], {"src": "n2", "dest": "n1", "body": {"type": "hwm_peer"}}, *sent[1:]]
        run.run_step({"op": "drop", "from": "n1", "to": "n2", **({} if nth is None else {"nth": nth})}, 1)
    finally:
        shutil.rmtree(run.root)
    assert sent[dropped] not in run.in_flight and len(run.in_flight) == 3
    assert events == ["dropped n1→n2 hwm_peer"]
