"""`hwm explore -- CMD`: a student steps the example node program (real processes, real pipes)
in a real browser, goes back, branches, saves the path, and `hwm replay` runs the file again."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.teach.node_explorer import BadRequest, NodeSession, serve_in_thread
from tests.teach.conftest import console_errors, screenshot

ROOT = Path(__file__).resolve().parents[2]
NODE = [sys.executable, str(ROOT / "examples" / "nodes" / "log_node.py")]


def _wait(condition, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def session(tmp_path):
    session = NodeSession(NODE, save_dir=tmp_path / "saved")
    yield session
    session.close()


def test_bad_steps_names_and_jumps_are_refused_with_the_reason(session):
    with pytest.raises(BadRequest, match="unknown op 'fly'"):
        session.take({"op": "fly"})
    with pytest.raises(BadRequest, match="no node 'n9'"):
        session.take({"op": "kill", "node": "n9"})
    with pytest.raises(BadRequest, match=r"'to' must be a step number 0\.\.0, not 3"):
        session.back(3)
    with pytest.raises(BadRequest, match="letters, digits"):
        session.save("../outside.json")
    assert session.steps == []  # nothing refused was taken


def test_a_node_program_that_does_not_start_is_bad_input(tmp_path, monkeypatch):
    temporary = tmp_path / "tmp"  # where the nodes' folders are made: none outlives the refusal
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    result = CliRunner().invoke(main, ["explore", "--save-dir", str(tmp_path), "--", sys.executable, "-c",
                                       "import sys; sys.exit(3)"])
    assert result.exit_code == 2
    assert "did not start" in result.output and "exit" in result.output
    assert not list(temporary.iterdir())


@pytest.mark.browser
def test_a_student_steps_the_example_node_goes_back_branches_and_saves_a_replayable_file(
        browser, session, tmp_path):
    from selenium.webdriver.common.by import By

    server, url = serve_in_thread(session)
    try:
        browser.get(url)
        body = browser.find_element(By.TAG_NAME, "body")
        _wait(lambda: body.get_attribute("data-ready") == "1")

        def steps() -> int:
            return int(body.get_attribute("data-steps"))

        def take(op: str, **fields) -> None:
            """Click the offered button for this step (found in the page: one round trip, not one per button)."""
            before = steps()
            clicked = browser.execute_script(
                "const [op, fields] = arguments;"
                "for (const b of document.querySelectorAll('#offered button.action')) {"
                "  const s = JSON.parse(b.dataset.step);"
                "  if (s.op === op && Object.entries(fields).every(([k, v]) => s[k] === v)) { b.click(); return true; }"
                "}"
                "return false;", op, fields)
            assert clicked, f"{op} {fields} is not offered"
            _wait(lambda: browser.execute_script(
                "return document.body.dataset.busy === '0' && Number(document.body.dataset.steps) === arguments[0]",
                before + 1))

        def role(node: str) -> str:
            return browser.find_element(By.CSS_SELECTOR, f'#picture g.server[data-server="{node}"]').get_attribute(
                "data-role")

        # Partitions are offered under their own heading, not under crashes and restarts.
        heading = lambda group: browser.find_element(  # noqa: E731
            By.CSS_SELECTOR, f'#offered div[data-group="{group}"] .meta').text
        assert heading("partitions") == "Partition or heal the network"
        assert heading("faults") == "Crash or restart a node"
        assert not browser.find_elements(By.CSS_SELECTOR, '#offered div[data-group="faults"] '
                                                          'button[data-step*="partition"]')
        # The virtual clock: n1 times out first and asks for votes (a candidate, drawn as one); deliver
        # until it leads.
        for _ in range(3):
            take("tick")
        assert role("n1") == "candidate"
        while role("n1") != "leader":
            assert int(body.get_attribute("data-in-flight")) > 0, "n1 never became leader"
            take("deliver_all")
        take("log_append", node="n1")
        assert "pending" in browser.find_element(By.ID, "history").text
        # n1's two appends to n3 (its no-op's, then the client's entry) are lost; n2's copies and
        # replies make a majority: n1's HWM rises and the client is told.
        for _ in range(2):
            take("drop", **{"from": "n1", "to": "n3"})
        lost = browser.find_elements(By.CSS_SELECTOR, '#picture g.message.lost[data-kind="drop"]')
        assert [(g.get_attribute("data-from"), g.get_attribute("data-to")) for g in lost] == [("n1", "n3")]
        for _ in range(2):
            take("deliver", **{"from": "n1", "to": "n2"})
        moving = browser.find_elements(By.CSS_SELECTOR, '#picture g.message[data-kind="deliver"]')
        assert [(g.get_attribute("data-from"), g.get_attribute("data-to")) for g in moving] == [("n1", "n2")]
        for _ in range(2):
            take("deliver", **{"from": "n2", "to": "n1"})
        _wait(lambda: "log_append_ok" in browser.find_element(By.ID, "history").text)
        hwm = browser.find_element(By.CSS_SELECTOR, '#picture g.server[data-server="n1"] text.hwm-label').text
        assert hwm == "hwm 2"  # its no-op and the client's entry
        at_commit = steps()
        # Crash n2 (SIGKILL) and restart it: its log is on disk.
        take("kill", node="n2")
        assert role("n2") == "down"
        take("restart", node="n2")
        screenshot(browser, "node-explorer-example-node")
        # Back in time to just after the commit, then another branch: a client reads entry 2 from n1.
        browser.find_element(By.CSS_SELECTOR, f'#steps li[data-step="{at_commit}"]').click()
        _wait(lambda: steps() == at_commit and body.get_attribute("data-busy") == "0")
        assert role("n2") == "follower"
        take("log_read", node="n1", index=2)
        _wait(lambda: "log_read_ok" in browser.find_element(By.ID, "history").text)
        assert body.get_attribute("data-findings") == "0"
        # Save the path; the file is a schedule of exactly the steps the page shows.
        name = browser.find_element(By.ID, "name")
        name.clear()
        name.send_keys("branch.json")
        browser.find_element(By.ID, "save").click()
        _wait(lambda: body.get_attribute("data-saved"))
        saved = Path(body.get_attribute("data-saved"))
        assert saved == tmp_path / "saved" / "branch.json"
        data = json.loads(saved.read_text())
        assert data["format"] == "hwm-schedule/1" and len(data["steps"]) == at_commit + 1
        assert data["steps"][-1] == {"op": "log_read", "node": "n1", "index": 2}
        assert "hwm replay " + str(saved) + " -- " in browser.find_element(By.ID, "saved").text
        assert console_errors(browser) == []
    finally:
        server.shutdown()
        server.server_close()
    # `hwm replay FILE -- CMD` runs the saved path again: the same history, no finding.
    result = CliRunner().invoke(main, ["replay", "--brief", str(saved), "--", *NODE])
    assert result.exit_code == 0, result.output
    assert f"{saved}: no finding" in result.output and f"{at_commit + 1} steps" in result.output


def test_hwm_explore_of_a_node_serves_on_loopback_and_ctrl_c_kills_every_node(tmp_path):
    import os
    import signal
    import subprocess
    import urllib.request

    process = subprocess.Popen([sys.executable, "-m", "hwm.cli", "explore", "--port", "0", "--save-dir",
                                str(tmp_path), "--", *NODE], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert "hwm explorer of" in line and "http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url + "api/node", timeout=30) as response:
            view = json.load(response)
        pids = [n["pid"] for n in view["nodes"]]
        assert len(pids) == 3 and all(pids)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0 and "stopped" in out and "Traceback" not in err

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    _wait(lambda: all(gone(pid) for pid in pids), 10)


def test_a_failing_schedule_opens_at_its_end_with_the_broken_property_on_the_picture(tmp_path):
    naive = [sys.executable, str(ROOT / "examples" / "nodes" / "naive_node.py"), "--mistakes", "poll-above-hwm"]
    session = NodeSession(naive, save_dir=tmp_path)
    try:
        session.open_schedule(ROOT / "examples" / "nodes" / "schedules" / "poll-above-hwm.json")
        view = session.view()
        assert len(view["steps"]) == 5
        assert any(f.startswith("ReadNeverLost (step 5)") for f in view["findings"])
        assert "VIOLATION" in view["svg"] and "ReadNeverLost violated" in view["svg"]
        # Going back one step: the property holds again there.
        session.back(4)
        view = session.view()
        assert not view["findings"] and "VIOLATION" not in view["svg"]
    finally:
        session.close()
    from hwm.bridge.maelstrom.schedule import ScheduleError

    with pytest.raises(ScheduleError, match="poll-above-hwm.json.*field 'workload'"):
        other = NodeSession(NODE, workload="kafka", save_dir=tmp_path)
        try:
            other.open_schedule(ROOT / "examples" / "nodes" / "schedules" / "poll-above-hwm.json")
        finally:
            other.close()


def _page_groups() -> dict[str, str]:
    """The headings node.js gives each group of steps (its GROUPS)."""
    import re
    text = (ROOT / "teach" / "static" / "node.js").read_text()
    block = re.search(r"const GROUPS = \{(.*?)\};", text, re.S).group(1)
    return dict(re.findall(r'(\w+): "([^"]+)"', block))


def test_a_partition_is_offered_under_its_own_heading_and_healed(session):
    offered = lambda group: [o["label"] for o in session.view()["offered"] if o["group"] == group]  # noqa: E731
    assert "partition(n3 | the others)" in offered("partitions") and "heal() the partition" not in offered("partitions")
    assert not any("partition" in f for f in offered("faults"))  # not under "Crash or restart a node"
    session.take({"op": "partition", "groups": [["n3"]]})
    assert "heal() the partition" in offered("partitions")
    assert not any(f.startswith("partition") for f in offered("partitions"))
    session.take({"op": "heal"})
    assert "partition(n3 | the others)" in offered("partitions")
    headings = _page_groups()
    assert {o["group"] for o in session.view()["offered"]} <= set(headings)  # every group is shown
    assert "partition" in headings["partitions"].lower() and "partition" not in headings["faults"].lower()


def test_a_candidate_is_drawn_as_a_candidate_not_a_follower(session):
    # The example node campaigns after three ticks of its own (n1); its vote requests are in flight.
    for _ in range(3):
        session.take({"op": "tick", "node": "n1"})
    view = session.view()
    assert [n["role"] for n in view["nodes"] if n["node"] == "n1"] == ["candidate"]
    assert 'data-server="n1" data-role="candidate"' in view["svg"] and ">candidate g1<" in view["svg"]
    assert 'data-server="n2" data-role="follower"' in view["svg"]


PASS_ON_TO_N1 = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    body = msg["body"]
    if body["type"] == "init":
        me, count = body["node_id"], 0
        reply = {"type": "init_ok", "in_reply_to": body["msg_id"], "hwm": ["hwm_tick"]}
        print(json.dumps({"src": me, "dest": msg["src"], "body": reply}), flush=True)
    elif body["type"] == "log_append" and me != "n1":  # the client's own message, passed on to n1
        print(json.dumps(dict(msg, dest="n1")), flush=True)
    elif body["type"] == "log_append":  # n1 answers the client, whoever passed the request on
        count += 1
        reply = {"type": "log_append_ok", "index": count, "in_reply_to": body["msg_id"]}
        print(json.dumps({"src": me, "dest": msg["src"], "body": reply}), flush=True)
"""


def test_a_request_a_node_passed_on_is_offered_from_that_node_and_answered(tmp_path):
    # The message keeps the client's src; the explorer lists and delivers it from the node whose
    # link carries it (a "deliver from c2" step would be refused: c2 is no node).
    node = tmp_path / "pass_on.py"
    node.write_text(PASS_ON_TO_N1)
    session = NodeSession([sys.executable, str(node)], save_dir=tmp_path / "saved")
    try:
        session.take({"op": "log_append", "node": "n2", "value": 7})
        [waiting] = session.view()["in_flight"]
        assert (waiting["from"], waiting["to"], waiting["type"]) == ("n2", "n1", "log_append"), waiting
        session.take({"op": "deliver", "from": "n2", "to": "n1"})
        assert session.moved[:2] == ("n2", "n1")
        [op] = session.view()["history"]
        assert op["status"] == "ok" and session.view()["in_flight"] == [], op
    finally:
        session.close()
