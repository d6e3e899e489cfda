"""Pictures a student reads without the tutorial: the legend, messages that move, the quorum
behind a new HWM, the step where two protocols part, links to a step, labels that never overlap."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.teach.explorer import state
from tests.teach.conftest import console_errors, screenshot
from tests.teach.layout import label_overlaps

CATALOGUE = Path(__file__).resolve().parents[2] / "counterexamples"
FIGURE_8 = CATALOGUE / "raft-any-generation-commit.json"
SVG = "{http://www.w3.org/2000/svg}"


def hwm(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def figure_8(tmp_path_factory):
    """Figure 8 under the broken protocol beside raft: the page and one SVG per step."""
    out = tmp_path_factory.mktemp("figure8")
    hwm("replay", "-q", FIGURE_8, "--html", out / "page.html", "--compare", "raft")
    hwm("replay", "-q", FIGURE_8, "--svg", out / "svg")
    return out


def texts(element) -> str:
    return " ".join(" ".join(t.text or "" for t in element.iter(SVG + "text")).split())


def groups(root, cls: str) -> list:
    return [g for g in root.iter() if cls in (g.get("class") or "").split()]


def test_every_picture_carries_its_legend(figure_8, tmp_path):
    for picture in sorted((figure_8 / "svg").glob("step-*.svg")):
        legend = groups(ET.parse(picture).getroot(), "legend")
        assert len(legend) == 1, picture.name
        text = texts(legend[0])
        for meaning in ("the entry's generation", "R, thick border: read by a client",
                        "high-water mark: clients read up to it", "entry removed from the log",
                        "the quorum behind a new hwm", "message"):
            assert meaning in text, (picture.name, meaning)
        assert "only in memory" not in text  # ZAB's mark, explained where ZAB is drawn
    # Each system's own words: Kafka's HW, ZAB's entries acknowledged before they are on disk.
    hwm("replay", "-q", CATALOGUE / "kafka-truncate-to-hwm.json", "--svg", tmp_path / "kafka")
    assert "high watermark (HW): clients read up to it" in texts(
        groups(ET.parse(tmp_path / "kafka" / "step-00.svg").getroot(), "legend")[0])
    hwm("replay", "-q", CATALOGUE / "zab-ack-before-persist.json", "--svg", tmp_path / "zab")
    assert "acknowledged, only in memory" in texts(
        groups(ET.parse(tmp_path / "zab" / "step-00.svg").getroot(), "legend")[0])


def test_the_quorum_behind_a_new_hwm_is_highlighted(figure_8):
    # Step 7: S1 (generation 3) replicates its old 1@g1 to S3 and, counting replicas, raises its HWM.
    root = ET.parse(figure_8 / "svg" / "step-07.svg").getroot()
    held = [g.get("data-server") for g in groups(root, "server") if groups(g, "quorum-entry")]
    assert held == ["S1", "S3"]
    assert [r.get("data-index") for r in groups(root, "quorum-entry")] == ["1", "1"]
    note = texts(groups(root, "quorum-note")[0])
    assert note.startswith("new hwm 1 on S1: S1 and S3 hold index 1 (2 of 3)")
    assert "give quorum index 1" in note
    # A step that raises no leader's HWM highlights nothing.
    assert not groups(ET.parse(figure_8 / "svg" / "step-06.svg").getroot(), "quorum-entry")


def test_the_messages_of_a_step_are_arrows_between_servers(figure_8):
    root = ET.parse(figure_8 / "svg" / "step-07.svg").getroot()
    messages = [(g.get("data-kind"), g.get("data-from"), g.get("data-to"), g.get("data-order"))
                for g in groups(root, "message")]
    assert messages == [("append", "S1", "S3", "0"), ("reply", "S3", "S1", "1")]
    assert "(1) S1->S3: append 1 entry, hwm 0" in texts(root) and "(2) S3->S1: ack 1" in texts(root)
    election = ET.parse(figure_8 / "svg" / "step-01.svg").getroot()
    assert [(g.get("data-kind"), g.get("data-from"), g.get("data-to")) for g in groups(election, "message")] == [
        ("vote", "S2", "S1")]


ASYNC_PATH = [{"action": "elect", "server": "S1", "voters": ["S1", "S2"]}, {"action": "write", "server": "S1"},
              {"action": "send", "from": "S1", "to": "S2"}, {"action": "send", "from": "S1", "to": "S3"},
              {"action": "deliver", "from": "S1", "to": "S2"}, {"action": "drop", "from": "S1", "to": "S3"},
              {"action": "send", "from": "S1", "to": "S2"}, {"action": "send", "from": "S1", "to": "S3"}]


def test_on_the_async_network_each_message_is_drawn_sent_waiting_delivered_or_lost():
    frames = state({"protocol": "raft", "config": {"network": "async"}, "steps": ASYNC_PATH[:6]})["columns"][0]["frames"]

    def drawn(k):
        root = ET.fromstring(frames[k]["svg"])
        return [(g.get("data-kind"), g.get("data-from"), g.get("data-to"), g.get("data-start"), g.get("data-stop"))
                for g in groups(root, "message")]

    assert drawn(3) == [("send", "S1", "S2", "0.0", "0.5")]  # it stops half way: in its channel
    assert drawn(4) == [("send", "S1", "S3", "0.0", "0.5"), ("in-flight", "S1", "S2", "0.5", "0.5")]
    assert drawn(5) == [("deliver", "S1", "S2", "0.5", "1.0"), ("in-flight", "S1", "S3", "0.5", "0.5"),
                        ("in-flight", "S2", "S1", "0.5", "0.5")]  # S2's reply waits on its way back
    lost = groups(ET.fromstring(frames[6]["svg"]), "lost")
    assert [g.get("data-kind") for g in lost] == ["drop"] and "S1-&gt;S3: lost: append g1 [1@g1] hwm 0" in frames[6]["svg"]


def test_the_step_where_two_protocols_part_is_marked_on_both_columns(figure_8):
    import json
    import re

    text = (figure_8 / "page.html").read_text()
    data = json.loads(re.search(r'id="hwm-data">(.*?)</script>', text, re.S).group(1).replace("<\\/", "</"))
    broken, fixed = data["columns"]
    marked = [[f["number"] for f in column["frames"] if f["departs"]] for column in (broken, fixed)]
    assert marked == [[7], [7]]  # where S1's HWM rises under the broken rule and not under raft's
    assert "S1's high-water mark rises 0 -> 1" in broken["frames"][7]["departs"]
    assert "S1's high-water mark stays 0: entry 1 has generation 1" in fixed["frames"][7]["departs"]
    assert 'class="departs"' in broken["frames"][7]["svg"] and 'class="departs"' in fixed["frames"][7]["svg"]


@pytest.mark.browser
def test_a_link_opens_its_step_and_the_address_follows_the_step(browser, figure_8):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(figure_8.joinpath("page.html").as_uri() + "#step=8")
    body = browser.find_element(By.TAG_NAME, "body")
    assert body.get_attribute("data-step") == "8"
    assert browser.find_element(By.ID, "counter").text == "step 8 / 11"
    assert browser.find_element(By.CSS_SELECTOR, '#steps li[data-step="8"]').get_attribute("class").startswith(
        "current")
    body.send_keys(Keys.ARROW_LEFT)
    assert browser.execute_script("return location.hash") == "#step=7"
    # The step where the protocols part is marked in the list and in both columns.
    assert "departs" in browser.find_element(By.CSS_SELECTOR, '#steps li[data-step="7"]').get_attribute("class")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#columns .column g.departs")) == 2
    assert len(browser.find_elements(By.CSS_SELECTOR, "#columns g.legend")) == 2
    assert all(g.is_displayed() for g in browser.find_elements(By.CSS_SELECTOR, "#columns g.legend"))
    screenshot(browser, "page-figure8-departs")
    browser.get(figure_8.joinpath("page.html").as_uri() + "#step=99")  # past the end: the last step
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-step") == "11"
    assert console_errors(browser) == []


def _dot(browser) -> tuple[str, str]:
    dot = browser.find_element("css selector", "#columns .column g.message circle.message-dot")
    return dot.get_attribute("cx"), dot.get_attribute("cy")


def _wait(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.browser
def test_stepping_forward_moves_the_messages_and_pause_freezes_them(browser, figure_8):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    browser.get(figure_8.joinpath("page.html").as_uri() + "#step=6")
    body = browser.find_element(By.TAG_NAME, "body")
    Select(browser.find_element(By.ID, "speed")).select_by_value("0.25")
    body.send_keys(Keys.ARROW_RIGHT)  # step 7: S1's append travels to S3, then S3's ack back
    assert body.get_attribute("data-step") == "7" and body.get_attribute("data-animating") == "1"
    first = _dot(browser)
    time.sleep(0.25)
    moved = _dot(browser)
    assert moved != first
    play = browser.find_element(By.ID, "play")
    assert play.text.endswith("pause")  # while messages travel, the button pauses them
    play.click()  # pause, mid-way
    assert play.text.endswith("play")
    assert body.get_attribute("data-paused") == "1"
    frozen = _dot(browser)
    time.sleep(0.25)
    assert _dot(browser) == frozen and body.get_attribute("data-animating") == "1"
    screenshot(browser, "page-figure8-message-in-flight")
    # Play: the messages arrive, then the page steps on by itself.
    Select(browser.find_element(By.ID, "speed")).select_by_value("4")
    browser.find_element(By.ID, "play").click()
    assert body.get_attribute("data-playing") == "1"
    _wait(lambda: int(body.get_attribute("data-step")) >= 9)
    browser.find_element(By.ID, "play").click()
    assert body.get_attribute("data-playing") == "0"
    # Stepping back draws the earlier step at once: nothing travels.
    body.send_keys(Keys.ARROW_LEFT)
    assert body.get_attribute("data-animating") == "0"
    assert console_errors(browser) == []


@pytest.mark.browser
def test_no_label_overlaps_another_on_a_two_column_page_nor_in_the_svg_files_with_their_titles(browser, figure_8):
    browser.get(figure_8.joinpath("page.html").as_uri())
    assert label_overlaps(browser) == []
    # The files `--svg` writes carry the trace's title, wrapped to the picture's width (it was cut at 560 px).
    files = sorted((figure_8 / "svg").glob("step-*.svg"))
    titles = [t for t in ET.parse(files[-1]).getroot().iter(SVG + "text") if t.get("class") == "title"]
    assert len(titles) >= 2 and " ".join(t.text for t in titles).startswith("raft-any-generation-commit on the model")
    frames = [{"number": k, "svg": f.read_text()} for k, f in enumerate(files)]
    assert label_overlaps(browser, {"columns": [{"frames": frames}]}) == []


@pytest.fixture(scope="module")
def explorer():
    from hwm.teach.explorer import serve_in_thread

    server, url = serve_in_thread("127.0.0.1", 0)
    yield url
    server.shutdown()
    server.server_close()


@pytest.mark.browser
def test_the_explorer_plays_a_step_taken_and_marks_where_a_switched_flag_parts(browser, explorer):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from tests.teach.test_explorer import click_steps
    from hwm.properties.trace import load

    import json
    from urllib.parse import quote

    steps = load(FIGURE_8).steps
    # A link to the path's first 6 steps (what the explorer puts in its address), then step 7 by hand.
    link = {"protocol": "raft-any-generation-commit", "steps": [s.to_json() for s in steps[:6]]}
    browser.get(explorer + "#" + quote(json.dumps(link)))
    body = browser.find_element(By.TAG_NAME, "body")
    _wait(lambda: body.get_attribute("data-ready") == "1")
    assert body.get_attribute("data-steps") == "6"
    Select(browser.find_element(By.ID, "speed")).select_by_value("0.25")
    click_steps(browser, steps[6:7], lambda k: _wait(lambda: body.get_attribute("data-steps") == "7"))
    # Step 7 was just taken: S1's append to S3 is on its way.
    assert body.get_attribute("data-animating") == "1"
    first = _dot(browser)
    _wait(lambda: _dot(browser) != first, 3)
    # Switch the commit rule: both columns mark step 7, where the fix keeps S1's HWM at 0.
    Select(browser.find_element(By.ID, "flag-commit")).select_by_value("current-generation")
    _wait(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#columns .column g.departs")) == 2)
    assert "departs" in browser.find_element(By.CSS_SELECTOR, '#steps li[data-step="7"]').get_attribute("class")
    # Play from the end starts again at step 0 and walks the path, messages moving.
    Select(browser.find_element(By.ID, "speed")).select_by_value("4")
    browser.find_element(By.ID, "play").click()
    _wait(lambda: int(body.get_attribute("data-view")) >= 2)
    browser.find_element(By.ID, "play").click()
    assert body.get_attribute("data-playing") == "0"
    screenshot(browser, "explorer-figure8-departs")
    # Every picture the explorer drew for this path: no label overlaps another.
    data = browser.execute_script(
        "return fetch('/api/state', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        " body: JSON.stringify(arguments[0])}).then((r) => r.json())",
        {"protocol": "raft-any-generation-commit", "steps": [s.to_json() for s in steps],
         "compare": "raft", "until_blocked": True})
    assert label_overlaps(browser, data) == []
    # And on the async network, where several messages wait in their channels at once.
    assert label_overlaps(browser, state({"protocol": "raft", "config": {"network": "async", "channel_capacity": 2},
                                          "steps": ASYNC_PATH})) == []
    assert console_errors(browser) == []


@pytest.mark.parametrize("trace, step, expected", [
    ("kafka-kip279.json", 3, [("fetch", "S2", "S1"), ("reply", "S1", "S2")]),  # the follower fetches
    ("bookkeeper-recovery-without-fencing.json", 2, [("append", "S4", "S1"), ("reply", "S1", "S4")]),
    ("zab-ack-before-persist.json", 2, [("append", "S1", "S2"), ("reply", "S2", "S1")]),
])
def test_each_system_draws_its_own_messages_and_each_hwm_beside_its_own_server(tmp_path, trace, step, expected):
    hwm("replay", "-q", CATALOGUE / trace, "--svg", tmp_path)
    root = ET.parse(tmp_path / f"step-{step:02d}.svg").getroot()
    assert [(g.get("data-kind"), g.get("data-from"), g.get("data-to")) for g in groups(root, "message")] == expected
    for picture in sorted(tmp_path.glob("step-*.svg")):
        for server in groups(ET.parse(picture).getroot(), "server"):
            name = next(t for t in server.iter(SVG + "text") if t.get("class") == "name")
            label = next(t for t in server.iter(SVG + "text") if t.get("class") == "hwm-label")
            # Kafka's HW and BookKeeper's LAC on their own server's row, not the next one's.
            assert 0 <= float(label.get("y")) - float(name.get("y")) <= 10, (picture.name, server.get("data-server"))
