"""A variant's rule that raises while something runs it (docs/variants.md, "Bad input"): hwm's own
replica under `hwm node` (TCP and --stdio) and `hwm cluster`, and the model a node is stepped against
under `hwm test --protocol` and `hwm replay SCHEDULE --protocol`. Each stops with one line naming the
variant, the rule and the exception (no traceback), exit 2, after what it had already printed."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.impl.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
HWM = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')"]
COMMIT_ON_TWO = ROOT / "examples" / "variants" / "schedules" / "commit-on-two.json"

# Raft's rules until a leader holds an entry, then its quorum rule raises: a node elects a leader and
# serves nothing (the first write asks it), and a model does the same at its first write.
BOOM = '''from hwm.model.variant import Variant


class Boom(Variant):
    base = "raft"

    def quorum_index(self, match):
        if max(match) >= 1:
            raise ZeroDivisionError("no quorum today")
        return super().quorum_index(match)
'''


@pytest.fixture
def boom(tmp_path) -> Path:
    path = tmp_path / "boom.py"
    path.write_text(BOOM)
    return path


def hook_line(path: Path) -> str:
    """The failure's own words: file and line of the raise, variant and rule, the exception."""
    return re.escape(f"{path}:9: Boom.quorum_index raised ZeroDivisionError: no quorum today")


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text, text


def test_a_stdio_node_whose_rule_raises_stops_with_one_line(boom):
    """The node dies with its one line on stderr, which hwm shows as the end of the node's log."""
    run = subprocess.run(HWM + ["replay", str(COMMIT_ON_TWO), "--brief", "--protocol", "raft", "--"] + HWM
                         + ["node", "--stdio", "--protocol", f"{boom}:Boom"],
                         capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert re.search(r"node n\d: exited with status 2 on its own", out), out
    assert re.search(r"\n\s+error: " + hook_line(boom) + r"\n", out), out
    no_traceback(out)


def start_node(boom: Path, data: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen(HWM + ["node", "--id", "S1", "--listen", f"127.0.0.1:{port}", "--data", str(data),
                                   "--protocol", f"{boom}:Boom", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def put(port: int, servers: int = 1) -> None:
    cluster = ",".join(f"S{k + 1}=127.0.0.1:{port + k}" for k in range(servers))
    subprocess.run(HWM + ["put", "--cluster", cluster, "--timeout", "5", "v"], capture_output=True, text=True,
                   timeout=60)


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_tcp_node_whose_rule_raises_stops_with_one_line(boom, tmp_path):
    (port,) = free_ports(1)
    node = start_node(boom, tmp_path / "S1", port)
    try:
        time.sleep(1.5)  # a cluster of one elects itself
        put(port)  # its entry is the first the rule is asked about
        _, err = node.communicate(timeout=30)
    finally:
        if node.poll() is None:
            node.kill()
            node.communicate()
    assert node.returncode == 2, err
    assert re.fullmatch(r"error: S1 stopped: " + hook_line(boom) + r"\n", err), err


@pytest.mark.parametrize("servers", [1, 2])
def test_a_cluster_whose_rule_raises_says_so_and_exits_2(boom, tmp_path, servers):
    """One server: it exits, and so does the cluster. Two: the leader exits, the other cannot be elected
    alone and runs on until SIGTERM; the cluster then exits 2, naming the server."""
    port = free_ports(1)[0]
    while not all(_free(port + k) for k in range(servers)):
        port = free_ports(1)[0]
    supervisor = subprocess.Popen(HWM + ["cluster", "--servers", str(servers), "--data", str(tmp_path / "data"),
                                         "--base-port", str(port), "--protocol", f"{boom}:Boom", "--quiet"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(2)
        put(port, servers)
        deadline = time.monotonic() + (30 if servers == 1 else 3)
        while supervisor.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # one server: it exits, "every server has exited"
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM)
        out, err = supervisor.communicate(timeout=30)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.communicate()
    no_traceback(err)
    assert re.search(r"^error: S\d stopped: " + hook_line(boom) + "$", err, re.M), err
    assert re.search(r"^hwm cluster: S\d \(pid \d+\) exited with status 2", err, re.M), err
    assert supervisor.returncode == 2, err
    if servers == 2:
        assert re.search(r"^error: S\d exited with status 2 \(bad input: see its line above\)$", err, re.M), err


def test_hwm_test_stepping_against_a_model_whose_rule_raises_is_one_line(boom, tmp_path):
    temporary = tmp_path / "tmp"  # where the run's node folders are made: the error leaves none behind
    temporary.mkdir()
    run = subprocess.run(HWM + ["test", "--workload", "log", "--nodes", "3", "--clock", "virtual", "--schedules", "2",
                                "--protocol", f"{boom}:Boom", "--save", str(tmp_path / "found.json"), "--"] + HWM
                         + ["node", "--stdio", "--protocol", "raft"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TMPDIR": str(temporary)})
    assert run.returncode == 2, run.stdout + run.stderr
    no_traceback(run.stdout + run.stderr)
    # What ran before it, then the error, naming the model's step and state.
    assert re.fullmatch(r"(no schedule ran to its end before it|\d+ schedules? run to the end before it, .*)\n",
                        run.stdout), run.stdout
    assert re.fullmatch(r"error: " + hook_line(boom) + r", at write\(S\d, v1\) from state S1 .*\n", run.stderr), \
        run.stderr
    assert not list(temporary.iterdir()), list(temporary.iterdir())


def test_replaying_a_schedule_against_a_model_whose_rule_raises_is_one_line(boom):
    run = subprocess.run(HWM + ["replay", str(COMMIT_ON_TWO), "--brief", "--protocol", f"{boom}:Boom", "--"] + HWM
                         + ["node", "--stdio", "--protocol", "raft"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    no_traceback(run.stdout + run.stderr)
    assert "stepped against Boom's model" in run.stdout  # the replay's heading is kept
    assert re.fullmatch(r"error: " + re.escape(str(COMMIT_ON_TWO)) + ": " + hook_line(boom)
                        + r", at write\(S\d, v1\) from state S1 .*\n", run.stderr), run.stderr
