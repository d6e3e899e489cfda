"""The explorer: its JSON API over real HTTP on 127.0.0.1, and its page in a real browser."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hwm.teach.explorer import serve_in_thread
from hwm.properties.trace import load
from tests.teach.conftest import console_errors, screenshot

ROOT = Path(__file__).resolve().parents[2]
FIGURE_8 = ROOT / "counterexamples" / "raft-any-generation-commit.json"


@pytest.fixture(scope="module")
def explorer():
    server, url = serve_in_thread("127.0.0.1", 0)
    yield url
    server.shutdown()
    server.server_close()


def call(url, route, body=None, raw: bytes | None = None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url + route.lstrip("/"), data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def steps_of(path):
    return [s.to_json() for s in load(path).steps]


def click_steps(browser, steps, reached) -> None:
    """Click each step's one enabled action button, in order; `reached(number)` waits for the page."""
    from selenium.webdriver.common.by import By

    for number, step in enumerate(steps, 1):
        wanted = {k: v for k, v in step.to_json().items() if k != "value"}
        buttons = [b for b in browser.find_elements(By.CSS_SELECTOR, "#enabled button.action")
                   if {k: v for k, v in json.loads(b.get_attribute("data-step")).items() if k != "value"} == wanted]
        assert len(buttons) == 1, f"step {number} {step} is not offered"
        buttons[0].click()
        reached(number)


def test_state_explains_the_path_and_offers_the_enabled_steps(explorer):
    code, data = call(explorer, "/api/state", {"protocol": "raft", "steps": steps_of(FIGURE_8)[:1]})
    assert code == 200
    frames = data["columns"][0]["frames"]
    assert [f["label"] for f in frames] == ["(initial)", "elect(S1, {S1,S2})"]
    assert "S1 wins generation 1" in frames[1]["lines"][0] and "<svg" in frames[1]["svg"]
    labels = [e["label"] for e in data["enabled"]]
    assert "write(S1, v1)" in labels and "write(S2, v1)" not in labels
    assert {"label": "write(S2, v1)", "reason": "S2 is not a leader"} in data["refused"]


def test_the_same_steps_under_the_fix_show_where_it_blocks(explorer):
    code, data = call(explorer, "/api/state", {"protocol": "raft-any-generation-commit", "steps": steps_of(FIGURE_8),
                                               "compare": {"preset": "raft-any-generation-commit",
                                                           "flags": {"commit": "current-generation"}}})
    assert code == 200
    buggy, fixed = data["columns"]
    assert "ReadNeverTruncated" in buggy["frames"][-1]["violations"]
    assert fixed["heading"].endswith("blocked at step 8")
    assert fixed["frames"][-1]["blocked"] == "S1 has nothing at or below its high-water mark"


@pytest.mark.parametrize("body, message", [
    ({"protocol": "raft", "steps": [{"action": "teleport", "server": "S1"}]}, "unknown action 'teleport'"),
    ({"protocol": "raft", "steps": [{"action": "write", "server": "S1"}]},
     "step 1 write(S1, v1) is not enabled under raft: S1 is not a leader"),
    ({"protocol": "raft", "config": {"servers": 0}}, "config servers must be 1..9, not 0"),
    ({"protocol": "raft", "config": {"max_log": "two"}}, "config max_log must be 0..99"),
    ({"protocol": "raft", "config": {"lanes": 2}}, "unknown configuration key 'lanes'"),
    ({"protocol": "paxos"}, "unknown protocol 'paxos'"),
    ({"protocol": "raft", "compare": "paxos"}, "compare: unknown protocol 'paxos'"),
    ({"protocol": "raft", "steps": [{"action": "send", "from": "S1", "to": "S2"}]}, "belongs to the async network"),
    ({"protocol": "raft", "steps": "elect"}, "steps must be a list"),
    ([1, 2], "the request body is a JSON object"),
])
def test_bad_requests_get_400_with_a_message_and_the_server_keeps_serving(explorer, body, message):
    code, data = call(explorer, "/api/state", body)
    assert code == 400 and message in data["error"], data
    code, data = call(explorer, "/api/state", {"protocol": "raft"})
    assert code == 200 and data["enabled"]


def test_malformed_bodies_and_unknown_paths(explorer):
    code, data = call(explorer, "/api/state", raw=b"{ not json")
    assert code == 400 and "not JSON" in data["error"]
    code, data = call(explorer, "/api/teleport", {})
    assert code == 404 and "no API /api/teleport" in data["error"]
    code, data = call(explorer, "/static/../../etc/passwd")
    assert code == 404
    with urllib.request.urlopen(explorer, timeout=10) as response:
        assert b"hwm explorer" in response.read()


def test_search_finds_the_catalogues_shortest_counterexample(explorer):
    code, data = call(explorer, "/api/search", {"protocol": "raft-any-generation-commit"})
    assert code == 200 and data["complete"]
    found = {r["property"]: r for r in data["results"]}
    assert found["ReadNeverTruncated"]["length"] == len(load(FIGURE_8).steps)
    assert found["EntryRead"]["found"] and found["EntryRead"]["kind"] == "sometimes"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hwm_explore_binds_to_loopback_prints_the_url_and_stops_on_ctrl_c():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')",
                                "explore", "--port", str(port), "--protocol", "seed"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        line = process.stdout.readline()
        assert line.startswith(f"hwm explorer at http://127.0.0.1:{port}/?protocol=seed"), line
        code, data = call(f"http://127.0.0.1:{port}/", "/api/presets")
        assert code == 200 and "seed" in data["presets"]
        # The listening socket's local address, from the kernel's table (hex IP:port, 0100007F is 127.0.0.1).
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
        local = [row.split()[1] for row in table if row.split()[3] == "0A" and row.split()[1].endswith(f":{port:04X}")]
        assert local == [f"0100007F:{port:04X}"]
    finally:
        process.send_signal(2)  # Ctrl-C
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0 and "stopped" in out and "Traceback" not in err


def test_make_server_binds_loopback_by_default_and_the_host_given():
    from hwm.teach.explorer import make_server

    for host, expected in ((None, "127.0.0.1"), ("0.0.0.0", "0.0.0.0")):
        server = make_server(port=0) if host is None else make_server(host, 0)
        try:
            assert server.server_address[0] == expected
        finally:
            server.server_close()


@pytest.mark.browser
def test_clicking_actions_reproduces_a_catalogue_trace_and_reaches_its_violation(browser, explorer):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    trace = load(FIGURE_8)
    browser.get(explorer + "?protocol=" + trace.protocol)
    wait = WebDriverWait(browser, 20)
    body = browser.find_element(By.TAG_NAME, "body")
    wait.until(lambda d: body.get_attribute("data-ready") == "1")

    def at(k):
        wait.until(lambda d: body.get_attribute("data-steps") == str(k))

    click_steps(browser, trace.steps, at)
    column = browser.find_element(By.CSS_SELECTOR, "#columns .column")
    assert "violating" in column.get_attribute("class")
    assert "ReadNeverTruncated violated: S1 removed entry 1@g1" in column.text
    names = [g.get_attribute("data-server") for g in column.find_elements(By.CSS_SELECTOR, "g.server")]
    assert names == ["S1", "S2", "S3"] and column.find_elements(By.CSS_SELECTOR, "polyline.hwm-line")
    screenshot(browser, "explorer-figure8-violation")
    # Switch the commit flag mid-trace: the explored protocol becomes the fix, the protocol as it was
    # stays beside it, and the fix blocks the read at step 8.
    Select(browser.find_element(By.ID, "flag-commit")).select_by_value("current-generation")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#columns .column")) == 2)
    fixed, buggy = browser.find_elements(By.CSS_SELECTOR, "#columns .column")
    assert fixed.find_element(By.TAG_NAME, "h2").text == \
        "raft-any-generation-commit+commit=current-generation: blocked at step 8"
    assert buggy.find_element(By.TAG_NAME, "h2").text == "raft-any-generation-commit: every step enabled"
    assert "S1 has nothing at or below its high-water mark" in fixed.text
    # Both columns show step 8, where the fix blocks the bug, not the path's end (step 11).
    wait.until(lambda d: body.get_attribute("data-view") == "8")
    assert body.get_attribute("data-steps") == str(len(trace.steps))
    # The steps offered now follow the fix, from the last state it reaches (after step 7).
    assert body.get_attribute("data-reachable") == "7"
    offered = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#enabled button.action")]
    assert offered and "read(S1)" not in offered
    assert "a client reads from S1 every entry at or below its high-water mark 1" in buggy.text
    notice = browser.find_element(By.ID, "notice").text
    assert "step 8 read(S1) is not enabled" in notice and "breaks ReadNeverLost at step 10" in notice
    assert "fix-blocked" in browser.find_element(By.CSS_SELECTOR, '#steps li[data-step="8"]').get_attribute("class")
    screenshot(browser, "explorer-figure8-fix-side-by-side")
    # The view slider walks both columns along the same steps without changing the path.
    browser.execute_script("const v = document.getElementById('view'); v.value = '11';"
                           "v.dispatchEvent(new Event('input'));")
    assert body.get_attribute("data-view") == "11"
    assert "ReadNeverTruncated violated" in browser.find_elements(By.CSS_SELECTOR, "#columns .column")[1].text
    body.send_keys("\ue012")  # left arrow: back one step
    at(len(trace.steps) - 1)
    browser.find_element(By.ID, "reset").click()
    at(0)
    Select(browser.find_element(By.ID, "flag-commit")).select_by_value("")  # back to the preset as it is
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#columns .column")) == 1)
    # Jump to the shortest counterexample found by the search.
    browser.find_element(By.ID, "search").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#found button[data-property="ReadNeverTruncated"]'))
    browser.find_element(By.CSS_SELECTOR, '#found button[data-property="ReadNeverTruncated"]').click()
    at(len(trace.steps))
    assert "ReadNeverTruncated violated" in browser.find_element(By.CSS_SELECTOR, "#columns .column").text
    assert console_errors(browser) == []
    # A step that is not enabled, sent by hand, is refused with the reason and the page keeps working.
    message = browser.execute_async_script("""
        const done = arguments[0];
        fetch('/api/state', {method: 'POST', body: JSON.stringify({protocol: 'raft',
              steps: [{action: 'read', server: 'S1'}]})}).then(r => r.json()).then(d => done(d.error));""")
    assert "S1 has nothing at or below its high-water mark" in message
    assert [e for e in console_errors(browser) if "400 (Bad Request)" not in e] == []
    browser.find_element(By.ID, "back").click()
    at(len(trace.steps) - 1)
    Select(browser.find_element(By.ID, "flag-commit")).select_by_value("current-generation")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#columns .column")) == 2)
    # The address holds the whole state: opening it again (a link sent to a class) shows the same page.
    link = browser.current_url
    browser.get("about:blank")
    browser.get(link)
    body = browser.find_element(By.TAG_NAME, "body")
    wait.until(lambda d: body.get_attribute("data-ready") == "1")
    at(len(trace.steps) - 1)
    columns = browser.find_elements(By.CSS_SELECTOR, "#columns .column")
    assert len(columns) == 2 and "blocked at step 8" in columns[0].text
    assert console_errors(browser) == []


def test_async_network_paths_show_the_messages_in_flight(explorer):
    steps = [{"action": "elect", "server": "S1", "voters": ["S1", "S2"]}, {"action": "write", "server": "S1"},
             {"action": "send", "from": "S1", "to": "S2"}]
    code, data = call(explorer, "/api/state", {"protocol": "raft", "config": {"network": "async"}, "steps": steps})
    assert code == 200, data
    last = data["columns"][0]["frames"][-1]
    assert last["in_flight"] == ['S1->S2: append g1 after 0@g0 [1@g1 "v1"] hwm 0']
    assert "in flight: S1-&gt;S2" in last["svg"]
    assert {"step": {"action": "deliver", "from": "S1", "to": "S2"}, "label": "deliver(S1, S2)"} in data["enabled"]


@pytest.mark.browser
def test_hwm_explore_with_flags_opens_the_preset_and_the_change_side_by_side(browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')",
                                "explore", "--port", str(port), "--protocol", "raft,commit=any-generation"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        url = process.stdout.readline().split()[3]
        browser.get(url)
        body = browser.find_element(By.TAG_NAME, "body")
        WebDriverWait(browser, 20).until(lambda d: body.get_attribute("data-ready") == "1")
        headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#columns .column h2")]
        assert headings == ["raft+commit=any-generation", "raft: every step enabled"]
        assert console_errors(browser) == []
    finally:
        process.send_signal(2)
        process.communicate(timeout=20)


def test_hwm_explore_on_a_busy_port_is_a_usage_error(explorer):
    from click.testing import CliRunner

    from hwm.cli import main

    port = explorer.rsplit(":", 1)[1].strip("/")
    result = CliRunner().invoke(main, ["explore", "--port", port])
    assert result.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in result.output


KIP101 = ROOT / "counterexamples" / "kafka-kip101.json"


def test_a_path_the_protocol_forbids_ends_its_column_when_the_page_asks(explorer):
    body = {"protocol": {"preset": "raft-any-generation-commit", "flags": {"commit": "current-generation"}},
            "steps": steps_of(FIGURE_8), "compare": "raft-any-generation-commit"}
    code, data = call(explorer, "/api/state", body)
    assert code == 400 and "step 8 read(S1) is not enabled" in data["error"]
    code, data = call(explorer, "/api/state", {**body, "until_blocked": True})
    assert code == 200, data
    fixed, buggy = data["columns"]
    assert fixed["heading"] == "raft-any-generation-commit+commit=current-generation: blocked at step 8"
    assert len(fixed["frames"]) == 9 and fixed["frames"][-1]["blocked"] == "S1 has nothing at or below its high-water mark"
    assert len(buggy["frames"]) == 12 and data["reachable"] == 7
    assert data["divergence"]["step"] == 8 and "breaks ReadNeverLost at step 10" in data["divergence"]["text"]
    assert "read(S1)" not in [e["label"] for e in data["enabled"]]


def test_the_api_names_where_a_switched_flag_parts_from_the_path(explorer):
    trace = load(KIP101)
    code, data = call(explorer, "/api/state", {"protocol": "kafka-kip101", "config": trace.config,
                                               "steps": steps_of(KIP101),
                                               "compare": {"preset": "kafka-kip101",
                                                           "flags": {"follower_truncation": "leader-epoch-kip279"}}})
    assert code == 200, data
    assert data["divergence"] == {
        "step": 7, "kind": "avoided", "differs": 7,
        "text": "under kafka-kip101, step 7 replicate(S1, S2) breaks CommittedOnQuorum, LogMatching; under "
                "kafka-kip101+follower_truncation=leader-epoch-kip279 it does not (the two protocols part at step 7: "
                "compare the reasons there)"}
    code, data = call(explorer, "/api/state", {"protocol": "raft-any-generation-commit", "steps": steps_of(FIGURE_8),
                                               "compare": {"preset": "raft-any-generation-commit",
                                                           "flags": {"commit": "current-generation"}}})
    assert data["divergence"]["step"] == 8 and data["divergence"]["kind"] == "blocked"
    code, data = call(explorer, "/api/state", {"protocol": "raft", "steps": steps_of(FIGURE_8)[:2], "compare": "raft"})
    assert data["divergence"] is None


def test_each_system_offers_its_own_flags_and_refuses_its_own_actions(explorer):
    code, meta = call(explorer, "/api/presets")
    assert meta["presets"]["kafka-kip101"]["system"] == "kafka"
    assert meta["presets"]["kafka-kip101"]["switchable"] == ["follower_truncation", "unclean_election",
                                                           "late_leader_and_isr", "min_insync_replicas", "log_flush",
                                                           "controller_fencing"]
    assert "commit" in meta["presets"]["raft"]["switchable"] and "system" not in meta["presets"]["raft"]["switchable"]
    code, data = call(explorer, "/api/state", {"protocol": "kafka", "steps": [
        {"action": "elect", "server": "S1", "voters": ["S1", "S2", "S3"]}, {"action": "write", "server": "S1"}]})
    refused = {r["label"]: r["reason"] for r in data["refused"]}
    assert refused["shrink_isr(S2, S1)"] == "S2 is not a leader"
    assert "replicate(S2, S1)" in refused
    code, data = call(explorer, "/api/state", {"protocol": "bookkeeper"})
    labels = {r["label"].split("(")[0] for r in data["refused"]}
    assert "write" not in labels and {"send_add", "recovery_read"} <= labels


@pytest.mark.browser
def test_the_explorer_on_a_kafka_preset_reaches_kip101_and_shows_the_fix_side_by_side(browser, explorer):
    from urllib.parse import quote

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    trace = load(KIP101)
    # A link with the preset and the trace's bounds, and no step yet.
    link = explorer + "#" + quote(json.dumps({"protocol": "kafka-kip101", "config": trace.config, "steps": []}))
    browser.get(link)
    wait = WebDriverWait(browser, 20)
    body = browser.find_element(By.TAG_NAME, "body")
    wait.until(lambda d: body.get_attribute("data-ready") == "1")
    # Only Kafka's flags and Kafka's presets are offered.
    assert browser.find_element(By.ID, "flag-follower_truncation").is_displayed()
    assert not browser.find_element(By.ID, "flag-commit").is_displayed()
    offered = [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "compare")).options
               if o.get_attribute("hidden") is None]
    assert offered == ["", "kafka-truncate-to-hwm", "kafka-kip101", "kafka-kip279", "kafka", "kafka-unclean-election",
                       "kafka-kip320-first-try", "kafka-min-insync-1", "kafka-unflushed",
                       "kafka-without-controller-fencing"]
    click_steps(browser, trace.steps, lambda number: wait.until(lambda d: body.get_attribute("data-steps") == str(number)))
    column = browser.find_element(By.CSS_SELECTOR, "#columns .column")
    assert "violating" in column.get_attribute("class") and "LogMatching violated" in column.text
    assert "HW = min LEO over ISR {S1,S2} (S1=2, S2=2) = 2" in column.text
    notes = [t.text for t in column.find_elements(By.CSS_SELECTOR, 'g.server[data-server="S1"] text.system-note')]
    assert notes == ["ISR {S1,S2}", "epochs 1@0 3@1"]
    # Switch KIP-279 on: the same steps side by side, and where the fix parts from the bug.
    Select(browser.find_element(By.ID, "flag-follower_truncation")).select_by_value("leader-epoch-kip279")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#columns .column")) == 2)
    wait.until(lambda d: body.get_attribute("data-divergence") == "7")
    fixed, buggy = browser.find_elements(By.CSS_SELECTOR, "#columns .column")
    assert "violating" not in fixed.get_attribute("class") and "violating" in buggy.get_attribute("class")
    assert "it answers epoch 1, end offset 1 (KIP-279" in fixed.text and "S2 removes 1@g2" in fixed.text
    assert "under kafka-kip101+follower_truncation=leader-epoch-kip279 it does not" in \
        browser.find_element(By.ID, "notice").text
    screenshot(browser, "explorer-kafka-kip101-vs-kip279")
    assert console_errors(browser) == []


LASSO = ROOT / "counterexamples" / "liveness" / "seed-followers-catch-up.json"


def test_the_catalogue_offers_saved_traces_with_their_bounds_and_a_lasso_keeps_its_cycle(explorer):
    code, data = call(explorer, "/api/catalogue")
    assert code == 200
    by_file = {t["file"]: t for t in data["traces"]}
    assert by_file["kafka-kip101.json"]["config"]["servers"] == 2
    assert by_file["kafka-kip101.json"]["steps"] == steps_of(KIP101)
    lasso = by_file["liveness/seed-followers-catch-up.json"]
    assert lasso["loop"] == 10 and lasso["protocol"] == "seed"
    code, state = call(explorer, "/api/state", {k: lasso[k] for k in ("protocol", "config", "steps", "loop")})
    assert code == 200, state
    frames = state["columns"][0]["frames"]
    assert [f["number"] for f in frames if f["cycle"]] == [10, 11]
    assert 'class="cycle"' in frames[11]["svg"] and "the cycle repeats from step 10" in frames[11]["lines"][-1]
    assert frames[11]["violations"]["FollowersCatchUp"].startswith("S2's high-water mark 0 is below the 1 of S1")
    # The same steps with the cycle starting at step 9 do not close: no liveness finding.
    code, state = call(explorer, "/api/state", {**{k: lasso[k] for k in ("protocol", "config", "steps")}, "loop": 9})
    assert "FollowersCatchUp" not in state["columns"][0]["frames"][11]["violations"]
    code, state = call(explorer, "/api/state", {**{k: lasso[k] for k in ("protocol", "config", "steps")}, "loop": 12})
    assert code == 400 and "loop must be a step number 1..11" in state["error"]


@pytest.mark.browser
def test_loading_a_saved_lasso_in_the_explorer_marks_its_cycle(browser, explorer):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(explorer + "?protocol=seed")
    wait = WebDriverWait(browser, 20)
    body = browser.find_element(By.TAG_NAME, "body")
    wait.until(lambda d: body.get_attribute("data-ready") == "1")
    choices = Select(browser.find_element(By.ID, "saved"))
    lasso = next(o for o in choices.options if "(lasso)" in o.text)
    assert lasso.text.startswith("liveness/seed-followers-catch-up.json (lasso): FollowersCatchUp")
    choices.select_by_value(lasso.get_attribute("value"))
    wait.until(lambda d: body.get_attribute("data-steps") == "11")
    assert browser.find_element(By.ID, "bound-max_log").get_attribute("value") == "1"
    cycle = [li.get_attribute("data-step") for li in browser.find_elements(By.CSS_SELECTOR, "#steps li.cycle")]
    assert cycle == ["10", "11"]
    column = browser.find_element(By.CSS_SELECTOR, "#columns .column")
    assert column.find_elements(By.CSS_SELECTOR, "g.cycle") and "the cycle repeats from step 10" in column.text
    screenshot(browser, "explorer-lasso")
    # Going back leaves the lasso: a path of 10 steps is no cycle.
    browser.find_element(By.ID, "back").click()
    wait.until(lambda d: body.get_attribute("data-steps") == "10")
    assert not browser.find_elements(By.CSS_SELECTOR, "#steps li.cycle")
    assert console_errors(browser) == []
