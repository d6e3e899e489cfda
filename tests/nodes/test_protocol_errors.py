"""A node that breaks the protocol gets an error naming it and the offending line; the history so
far is kept; every process hwm started is gone afterwards, also on Ctrl-C."""

import os
import signal
import subprocess
import sys
import time

import pytest

from hwm.bridge.maelstrom.cluster import Limits, run_schedule
from hwm.bridge.maelstrom.schedule import Schedule
from tests.nodes.commands import ROOT, bad_node, log_node

APPEND = [{"op": "log_append", "node": "n1", "value": 1}]


@pytest.mark.parametrize("mode, words", [
    ("not-json", ["node n1: printed a line that is not JSON", "'appended it!'"]),
    ("unknown-type", ["node n1: answered log_append with unknown type 'log_append_done'", '"log_append_done"']),
    ("exit-at-start", ["exited with status 3 on its own at start-up", "cannot open my config"]),
    ("flood", ["node n1: flooded stdout: more than 1000 lines in one step", '"gossip"']),
    ("trace-message-first", ["node n1: exited with status 1 on its own at step 1",
                             "undefined method `index' for nil:NilClass (NoMethodError)\n    ...\n"]),
    ("unknown-src", ["node n1: sent a message from 'n9', which is no node, client or service of this run",
                     '"n9"']),
])
def test_each_protocol_error_names_the_node_and_the_offending_line(mode, words):
    result = run_schedule(bad_node(mode), Schedule(nodes=2, steps=APPEND), Limits(lines_per_step=1000))
    message = str(result.protocol_error)
    for word in words:
        assert word in message, message
    if mode != "exit-at-start":
        assert result.history[0]["type"] == "log_append"  # the history so far is kept


def test_a_busy_correct_node_answering_many_inputs_in_one_step_is_no_flood():
    # Each delivery is an input, answered (hwm_state's answer at least): a long step of a busy node is
    # many answers, not a flood. On the wall clock a 5-node Kafka cluster's controller node heard some
    # 7,300 heartbeats and fetches in one settle step under load (> 10,000 lines with its answers), and
    # hwm stopped the run as a flood. The flood above is 100,000 lines after one input: still one.
    steps = [{"op": "settle", "rounds": 30}]
    result = run_schedule(log_node(), Schedule(nodes=3, workload="log", clock="virtual", steps=steps),
                          Limits(lines_per_step=20))
    assert result.protocol_error is None, result.protocol_error
    assert sum(1 for o in result.observations if o["node"] == "n1") >= 2


def test_a_wall_clock_deliver_all_stops_after_its_time_and_keeps_the_rest_in_flight():
    # Each delivery waits for the node's answer while the nodes' timers run on: on a loaded machine a
    # round could take longer than the messages it leaves for the next, without end (the same 5-node
    # Kafka run took minutes per round). With no time at all, each round delivers one message.
    steps = [{"op": "settle", "rounds": 3}, {"op": "log_append", "node": "n1", "value": 1}, {"op": "deliver_all"}]
    result = run_schedule(log_node(), Schedule(nodes=3, workload="log", clock="wall", steps=steps),
                          Limits(deliver_all_seconds=0.0))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]
    notes = [event for events in result.events for event in events if "left in flight" in event]
    assert notes and notes[0].endswith("messages left in flight after 0 s of deliveries"), notes


def test_a_node_that_never_answers_init_is_named_after_the_limit():
    began = time.monotonic()
    result = run_schedule(bad_node("no-init"), Schedule(nodes=1, steps=APPEND), Limits(init_seconds=0.5))
    assert "node n1: did not answer init within 0.5 s" in str(result.protocol_error)
    assert time.monotonic() - began < 5


def test_a_request_never_answered_is_indeterminate_not_a_finding_and_not_a_hang():
    # Maelstrom counts a request never answered as indeterminate: an availability figure.
    result = run_schedule(bad_node("hang"), Schedule(nodes=2, steps=APPEND * 2), Limits(final_rounds=2))
    assert not result.findings and [op["id"] for op in result.unanswered] == [1, 2]


def test_with_replies_required_a_request_never_answered_is_a_finding():
    result = run_schedule(bad_node("hang"), Schedule(nodes=2, steps=APPEND * 2),
                          Limits(final_rounds=2, replies_required=True))
    no_reply = [f for f in result.findings if f.name == "NoReply"]
    assert len(no_reply) == 2 and "op 1 c1→n1 log_append(1) at step 1 got no reply" in no_reply[0].text


def test_no_process_survives_a_run_not_even_a_nodes_child(tmp_path, alive):
    result = run_schedule(bad_node("child"), Schedule(nodes=2, steps=APPEND + [{"op": "kill", "node": "n2"}]),
                          data_root=tmp_path)
    assert result.protocol_error is None
    pids = _group_pids(tmp_path)
    assert pids and not any(alive(pid) for pid in pids)


def _group_pids(root):
    """Every process hwm started, as the node's log recorded them (the `sleep` children included)."""
    pids = []
    for log in root.glob("*.log"):
        pids += [int(w) for w in log.read_text().split() if w.isdigit()]
    return pids


def test_ctrl_c_kills_every_node_and_exits_130(tmp_path, alive):
    marker = tmp_path / "pids"
    # A node that records its pid and its child's, so the test can look for them afterwards.
    script = f"sleep 300 & echo $$ $! >> {marker}; exec {sys.executable} {log_node()[1]}"
    temporary = tmp_path / "tmp"  # where the run's node folders are made: none may outlive it
    temporary.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "hwm.cli", "test", "--clock", "virtual", "--schedules", "500",
                             "--save", str(tmp_path / "s.json"), "--", "sh", "-c", script],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temporary)})
    deadline = time.monotonic() + 60
    while not (marker.exists() and len(marker.read_text().split()) >= 6) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    pids = [int(p) for p in marker.read_text().split()]
    assert len(pids) >= 6 and not any(alive(pid) for pid in pids), err
    assert not list(temporary.iterdir()), list(temporary.iterdir())


def test_a_ctrl_c_while_a_run_is_set_up_leaves_no_folder(tmp_path, monkeypatch):
    # The Ctrl-C lands after the run's folder is made, before the run exists to close it.
    import tempfile

    from hwm.bridge.maelstrom import cluster

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(cluster, "NodeProcess", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_schedule(log_node(), Schedule(nodes=2, steps=APPEND))
    assert list(tmp_path.iterdir()) == []


def test_a_run_a_ctrl_c_left_unclosed_is_removed_at_exit(tmp_path, monkeypatch):
    # Wherever the Ctrl-C lands, hwm exits through atexit, which kills the nodes and removes the folders.
    import tempfile

    from hwm.bridge.maelstrom import cluster

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = cluster.Run(log_node(), Schedule(nodes=2, steps=APPEND))
    assert run.root.is_dir() and run.root in cluster._OPEN_ROOTS
    cluster._remove_open_roots()
    assert list(tmp_path.iterdir()) == [] and run.root not in cluster._OPEN_ROOTS


def test_a_ctrl_c_as_a_node_starts_still_leaves_it_to_kill_all(tmp_path, alive, monkeypatch):
    # The Ctrl-C lands right after the fork, before the start is recorded: it must wait for the record,
    # or kill_all (what Ctrl-C runs) would not know the process.
    import queue
    from hwm.bridge.maelstrom import process

    real = subprocess.Popen

    def popen_then_ctrl_c(*args, **kwargs):
        started = real(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        return started

    monkeypatch.setattr(process.subprocess, "Popen", popen_then_ctrl_c)
    node = process.NodeProcess("n1", ["sleep", "300"], tmp_path / "n1", queue.Queue())
    with pytest.raises(KeyboardInterrupt):
        node.start()
    assert node in process._STARTED
    process.kill_all()
    assert not alive(node.proc.pid)


def test_a_node_killed_while_its_reader_reads_ends_its_output_without_an_error(tmp_path):
    # kill() closes the node's stdout while the reader thread may be inside readline(); the closed
    # file raised in that thread and printed a traceback (ValueError from the buffer) mid-run.
    import queue
    import threading
    from types import SimpleNamespace

    from hwm.bridge.maelstrom.process import EOF_LINE, NodeProcess

    out: queue.Queue = queue.Queue()
    node = NodeProcess("n1", [sys.executable, "-c", "pass"], tmp_path, out)
    read, write = os.pipe()
    os.close(write)
    stream = os.fdopen(read, "rb")
    stream.close()  # what kill() leaves to a reader still in its loop
    raised = []
    previous, threading.excepthook = threading.excepthook, lambda args: raised.append(args.exc_value)
    try:
        reader = threading.Thread(target=node._read, args=(SimpleNamespace(stdout=stream), 1))
        reader.start()
        reader.join(5)
    finally:
        threading.excepthook = previous
    assert not raised, raised
    assert out.get(timeout=1) == ("n1", 1, EOF_LINE)
