"""The long runs against a real etcd (-m deep): the stock configuration is clean under kill, pause and
partition, and the planted rollback (a majority's data directories restored from start-up copies
while they are down) is found, shrunk, and comes back on replay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hwm.bridge.maelstrom.schedule import load
from hwm.bridge.servers import server_named
from hwm.bridge.servers.hunt import hunt_server
from hwm.bridge.servers.run import run_server_schedule
from tests.servers.conftest import needs_etcd, needs_partitions

pytestmark = [pytest.mark.deep, pytest.mark.network]
ROLLBACK = Path(__file__).resolve().parents[2] / "examples" / "servers" / "etcd-rollback.json"


def test_the_stock_configuration_is_clean():
    needs_etcd()
    needs_partitions()
    report = hunt_server(server_named("etcd"), schedules=10, steps=20, seed=3, prefix="127.0.31")
    assert report.schedules == 10
    assert not report.failures, [str(f) for r in report.failures for f in r.findings]
    assert report.answered_ok > 0


def test_the_planted_rollback_loses_an_acknowledged_append():
    needs_etcd()
    schedule = load(ROLLBACK)
    result = run_server_schedule(server_named("etcd"), schedule, prefix="127.0.32")
    names = {f.name for f in result.findings}
    # n2 and n3 elect a leader without n1's appends: its next append takes an acknowledged offset,
    # and n1, back in the final phase, gives up its own.
    assert names == {"OneValuePerOffset", "AckedNeverLost"}, [str(f) for f in result.findings]
    assert any(str(f).startswith("OneValuePerOffset (step 11): ") and "c2→n2 log_append(3) at step 11 got 3 there"
               in str(f) for f in result.findings)


def test_zookeeper_loses_them_too_and_its_status_shows_the_rollback():
    import os

    from hwm.bridge.servers.zookeeper import JAR
    if not os.path.exists(JAR):
        pytest.skip("zookeeper is not installed")
    pytest.importorskip("kazoo")
    schedule = load(ROLLBACK.with_name("zookeeper-rollback.json"))
    result = run_server_schedule(server_named("zookeeper"), schedule, prefix="127.0.35")
    names = {f.name for f in result.findings}
    assert "AckedNeverLost" in names and names <= {"AckedNeverLost", "OneValuePerOffset", "HwmNeverTruncated"}, names
    schedule.steps = [s for s in schedule.steps if s["op"] != "rollback"]
    assert run_server_schedule(server_named("zookeeper"), schedule, prefix="127.0.35").findings == []


def test_the_same_schedule_without_the_rollback_is_clean():
    needs_etcd()
    schedule = load(ROLLBACK)
    schedule.steps = [s for s in schedule.steps if s["op"] != "rollback"]
    result = run_server_schedule(server_named("etcd"), schedule, prefix="127.0.33")
    assert result.findings == []


def test_hwm_test_finds_the_planted_rollback_and_hwm_replay_brings_it_back(tmp_path):
    needs_etcd()
    needs_partitions()
    saved = tmp_path / "found.json"
    done = subprocess.run([sys.executable, "-m", "hwm.cli", "test", "--server", "etcd", "--loopback", "127.0.34",
                           "--faults", "kill,pause,partition,rollback", "--schedules", "40", "--steps", "20",
                           "--save", str(saved), "--json"], capture_output=True, text=True, timeout=1500)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert set(report["found"]) <= {"AckedNeverLost", "ReadNeverTruncated", "OneValuePerOffset", "HwmNeverTruncated"}
    replayed = subprocess.run([sys.executable, "-m", "hwm.cli", "replay", str(saved)], capture_output=True, text=True,
                              timeout=300)
    assert replayed.returncode in (0, 1), replayed.stderr
