"""The lin-kv workload on a real etcd: each key's history is checked for linearizability
(bridge/maelstrom/lin_kv.py). Linearizable reads across a partition are clean; a serializable read
from the member cut off serves its stale copy, and the check says no register answers so; a linearizable read there gets no answer."""

from __future__ import annotations

import pytest

from hwm.bridge.maelstrom.schedule import Schedule
from hwm.bridge.servers import server_named
from hwm.bridge.servers.run import run_server_schedule
from tests.servers.conftest import needs_etcd, needs_partitions

pytestmark = pytest.mark.network


def stale_read_schedule(serializable: bool) -> Schedule:
    read = {"op": "read", "node": "n1", "key": 0, **({"serializable": True} if serializable else {})}
    return Schedule(workload="lin-kv", nodes=3, clock="wall", server="etcd", steps=[
        {"op": "write", "node": "n1", "key": 0, "value": 1},
        {"op": "wait", "ms": 300},  # n1 applies it too
        {"op": "partition", "groups": [["n1"], ["n2", "n3"]]},
        {"op": "wait", "ms": 2500},  # the majority's side elects a leader if n1 led
        {"op": "write", "node": "n2", "key": 0, "value": 2},
        read])


def test_a_serializable_read_from_the_cut_off_member_is_not_linearizable():
    needs_etcd()
    needs_partitions()
    result = run_server_schedule(server_named("etcd"), stale_read_schedule(serializable=True), prefix="127.0.26")
    write = next(op for op in result.history if op["type"] == "write" and op["request"]["value"] == 2)
    assert write["status"] == "ok", write
    assert [f.name for f in result.findings] == ["Linearizable"], [str(f) for f in result.findings]
    assert "key 0" in str(result.findings[0]) and "read 1" in str(result.findings[0])


def test_the_linearizable_read_there_gets_no_answer_and_the_history_is_clean():
    needs_etcd()
    needs_partitions()
    result = run_server_schedule(server_named("etcd"), stale_read_schedule(serializable=False), prefix="127.0.27")
    read = result.history[2]
    assert (read["type"], read["status"]) == ("read", "info"), read  # no quorum for n1: no answer, not a stale one
    assert result.findings == []
