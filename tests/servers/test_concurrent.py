"""Several clients at once against a real etcd (a `concurrent` step), and the staleness of local reads
measured on a history."""

from __future__ import annotations

import pytest

from hwm.bridge.maelstrom.schedule import Schedule, ScheduleError, check_step, describe
from hwm.bridge.servers import server_named
from hwm.bridge.servers.run import local_read_staleness, run_server_schedule
from tests.servers.conftest import needs_etcd

NODES = ["n1", "n2", "n3"]


def test_a_concurrent_step_holds_requests_of_the_workload_only():
    step = {"op": "concurrent", "steps": [{"op": "log_append", "node": "n1", "value": 1},
                                          {"op": "log_read", "node": "n2", "index": 1, "serializable": True}]}
    assert check_step(step, NODES, "log") is step
    assert describe(step) == "log_append(n1, 1) ‖ log_read(n2, 1)"
    with pytest.raises(ScheduleError, match="requests of the log workload"):
        check_step({"op": "concurrent", "steps": [{"op": "kill", "node": "n1"}]}, NODES, "log", 3)
    with pytest.raises(ScheduleError, match="no node 'n9'"):
        check_step({"op": "concurrent", "steps": [{"op": "log_append", "node": "n9", "value": 1}]}, NODES, "log")
    with pytest.raises(ScheduleError, match="at least one request"):
        check_step({"op": "concurrent", "steps": []}, NODES, "log")


def _op(id_, kind, step, status, request, reply=None):
    return {"id": id_, "type": kind, "step": step, "status": status, "request": request, "reply": reply}


def test_a_local_read_is_stale_when_an_append_there_was_acknowledged_in_an_earlier_step():
    ops = [_op(1, "log_append", 1, "ok", {"value": 1}, {"index": 1}),
           _op(2, "log_read", 2, "fail", {"index": 1, "serializable": True}, {"code": 20}),  # stale
           _op(3, "log_read", 3, "ok", {"index": 1, "serializable": True}, {"index": 1, "value": 1}),
           _op(4, "log_read", 4, "fail", {"index": 1}, {"code": 20}),  # linearizable: not a local read
           _op(5, "log_append", 5, "ok", {"value": 2}, {"index": 2}),
           _op(6, "log_read", 5, "fail", {"index": 2, "serializable": True}, {"code": 20}),  # concurrent: not stale
           _op(7, "log_read", 6, "info", {"index": 2, "serializable": True}, {"code": 11}),  # no answer
           _op(8, "log_read", None, "fail", {"index": 2, "serializable": True}, {"code": 20})]  # the final reads
    assert local_read_staleness(ops) == (3, 1)


@pytest.mark.network
def test_concurrent_appends_and_cas_on_a_real_etcd():
    needs_etcd()
    appends = Schedule(workload="log", nodes=3, clock="wall", server="etcd", steps=[
        {"op": "concurrent", "steps": [{"op": "log_append", "node": n, "value": k} for k, n in enumerate(NODES, 1)]},
        {"op": "log_read", "node": "n1", "index": 3}])
    result = run_server_schedule(server_named("etcd"), appends, prefix="127.0.38")
    assert result.findings == []
    concurrent = [op for op in result.history if op["step"] == 1]
    assert sorted(op["client"] for op in concurrent) == ["c1.1", "c2.2", "c3.3"]
    assert sorted(op["reply"]["index"] for op in concurrent if op["status"] == "ok") == [1, 2, 3]
    # Three clients race one cas from the same value: the register lets exactly one through.
    register = Schedule(workload="lin-kv", nodes=3, clock="wall", server="etcd", steps=[
        {"op": "write", "node": "n1", "key": 0, "value": 1},
        {"op": "concurrent", "steps": [{"op": "cas", "node": n, "key": 0, "from": 1, "to": k}
                                       for k, n in enumerate(NODES, 2)]}])
    result = run_server_schedule(server_named("etcd"), register, prefix="127.0.38")
    assert result.findings == []
    cas = [op for op in result.history if op["step"] == 2]
    assert [op["status"] for op in cas].count("ok") == 1
