"""The picture of a trace: the HTML page in a real browser, and the SVG files."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main
from tests.teach.conftest import console_errors, screenshot

CATALOGUE = Path(__file__).resolve().parents[2] / "counterexamples"
FIGURE_8 = CATALOGUE / "raft-any-generation-commit.json"


def hwm(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def figure_8_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "figure8.html"
    code, output = hwm("replay", "-q", FIGURE_8, "--html", out, "--compare", "raft")
    assert code == 0, output
    return out


def test_page_is_self_contained(figure_8_page):
    text = figure_8_page.read_text()
    # The only URL is the SVG namespace, which is a name, not a fetch.
    assert set(re.findall(r"https?://[^\s\"'<>\\]+", text)) == {"http://www.w3.org/2000/svg"}
    assert "<script src" not in text and "<link" not in text


@pytest.mark.browser
def test_page_steps_forward_and_back_and_shows_every_server_and_the_hwm(browser, figure_8_page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(figure_8_page.as_uri())
    body = browser.find_element(By.TAG_NAME, "body")
    assert body.get_attribute("data-step") == "0"
    columns = browser.find_elements(By.CSS_SELECTOR, "#columns .column")
    assert len(columns) == 2  # the buggy protocol and raft, side by side
    for column in columns:
        names = [g.get_attribute("data-server") for g in column.find_elements(By.CSS_SELECTOR, "g.server")]
        assert names == ["S1", "S2", "S3"]
        assert column.find_elements(By.CSS_SELECTOR, "polyline.hwm-line")
    body.send_keys(Keys.ARROW_RIGHT)
    body.send_keys(Keys.ARROW_RIGHT)
    assert body.get_attribute("data-step") == "2"
    assert browser.find_element(By.ID, "counter").text == "step 2 / 11"
    body.send_keys(Keys.ARROW_LEFT)
    assert body.get_attribute("data-step") == "1"
    body.send_keys(Keys.END)
    first = browser.find_elements(By.CSS_SELECTOR, "#columns .column")[0]
    assert "violating" in first.get_attribute("class")
    # S1's read entry 1@g1 is truncated at the last step: drawn as removed, and the reason says so.
    removed = first.find_elements(By.CSS_SELECTOR, 'g.server[data-server="S1"] g.truncated')
    assert [(r.get_attribute("data-index"), r.get_attribute("data-generation")) for r in removed] == [("1", "1")]
    assert "S1 truncates 1@g1" in first.text and "ReadNeverTruncated violated" in first.text
    second = browser.find_elements(By.CSS_SELECTOR, "#columns .column")[1]
    assert "blocked" in second.get_attribute("class") and "S1 has nothing at or below" in second.text
    screenshot(browser, "page-figure8-violation")
    browser.find_element(By.ID, "first").click()
    assert body.get_attribute("data-step") == "0"
    browser.find_element(By.ID, "jump").click()
    assert body.get_attribute("data-step") == "11"  # the violation the trace is about
    browser.find_element(By.CSS_SELECTOR, '#steps li[data-step="7"]').click()
    assert body.get_attribute("data-step") == "7"
    hwm_line = browser.find_element(By.CSS_SELECTOR, "polyline.hwm-line")
    assert hwm_line.is_displayed()
    screenshot(browser, "page-figure8-step7")
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert console_errors(browser) == []


def test_svg_per_step(tmp_path):
    code, output = hwm("replay", "-q", CATALOGUE / "seed.json", "--svg", tmp_path / "svg")
    assert code == 0, output
    files = sorted((tmp_path / "svg").glob("step-*.svg"))
    assert [f.name for f in files] == [f"step-{k:02d}.svg" for k in range(8)]
    ns = {"s": "http://www.w3.org/2000/svg"}
    last = ET.parse(files[-1]).getroot()
    servers = last.findall(".//s:g[@class='server']", ns)
    assert [g.get("data-server") for g in servers] == ["S1", "S2", "S3"]
    assert last.findall(".//s:g[@class='truncated']", ns)
    text = " ".join(" ".join(t.text or "" for t in last.iter("{http://www.w3.org/2000/svg}text")).split())
    assert "ReadNeverTruncated violated" in text and "truncates its log to it" in text
    # Written values are drawn in the boxes.
    third = ET.parse(files[3]).getroot()
    assert "v1" in [t.text for t in third.iter("{http://www.w3.org/2000/svg}text")]


@pytest.mark.parametrize("args, message", [
    (["--html", "{tmp}/no/such/dir/x.html"], "does not exist"),
    (["--compare", "raft"], "give --html too"),
    (["--svg", "{file}"], "exists and is not a directory"),
])
def test_bad_picture_options_are_usage_errors(tmp_path, args, message):
    (tmp_path / "file").write_text("")
    args = [a.format(tmp=tmp_path, file=tmp_path / "file") for a in args]
    code, output = hwm("replay", CATALOGUE / "seed.json", *args)
    assert code == 2 and message in output
    code, output = hwm("replay", CATALOGUE / "seed.json", CATALOGUE / "kip101.json", "--html", tmp_path / "x.html")
    assert code == 2 and "exactly one FILE" in output


def test_check_save_writes_the_page_beside_each_trace(tmp_path):
    code, output = hwm("check", "--protocol", "raft-seed-quorum", "--servers", 2, "--save", tmp_path)
    assert code == 1, output
    trace = tmp_path / "raft-seed-quorum.CommittedOnQuorum.json"
    page = trace.with_suffix(".html")
    assert trace.exists() and page.exists()
    assert "only 1 of 2 servers hold index 1" in page.read_text()


def test_page_of_the_model_and_the_implementation(tmp_path):
    out = tmp_path / "both.html"
    code, output = hwm("replay", "-q", "--on", "both", CATALOGUE / "kip101.json", "--html", out)
    assert code == 0, output
    text = out.read_text()
    assert "kip101 on the model: violation" in text and "kip101 on the impl: violation" in text


LASSO = CATALOGUE / "liveness" / "seed-followers-catch-up.json"


def test_a_lassos_svgs_mark_the_stem_the_cycle_and_the_state_it_returns_to(tmp_path):
    code, output = hwm("replay", "-q", LASSO, "--svg", tmp_path / "svg")
    assert code == 0, output
    ns = {"s": "http://www.w3.org/2000/svg"}

    def badge(k):
        root = ET.parse(tmp_path / "svg" / f"step-{k:02d}.svg").getroot()
        found = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("data-loop")]
        return [(g.get("class"), " ".join(t.text for t in g.iter("{http://www.w3.org/2000/svg}text"))) for g in found]

    assert badge(1) == [("stem", "stem (the cycle starts at step 10)")]
    assert badge(9) == [("cycle-home", "\u21bb the cycle returns to this state")]
    assert badge(10) == [("cycle", "\u21bb cycle 1/2 (steps 10..11)")]
    assert badge(11) == [("cycle", "\u21bb cycle 2/2 (steps 10..11)")]
    last = ET.parse(tmp_path / "svg" / "step-11.svg").getroot()
    text = " ".join(" ".join(t.text or "" for t in last.iter("{http://www.w3.org/2000/svg}text")).split())
    assert "the cycle repeats from step 10" in text and "FollowersCatchUp violated" in text
    # A trace that is no lasso has no badge.
    hwm("replay", "-q", FIGURE_8, "--svg", tmp_path / "plain")
    assert "data-loop" not in (tmp_path / "plain" / "step-05.svg").read_text()


@pytest.mark.browser
def test_a_lassos_page_marks_the_cycle_and_its_slider_wraps(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    out = tmp_path / "lasso.html"
    code, output = hwm("replay", "-q", LASSO, "--html", out)
    assert code == 0, output
    browser.get(out.as_uri())
    body = browser.find_element(By.TAG_NAME, "body")
    bar = browser.find_element(By.ID, "cycle")
    assert bar.is_displayed() and "steps 10..11, that repeats for ever" in bar.text
    cycle = [li.get_attribute("data-step") for li in browser.find_elements(By.CSS_SELECTOR, "#steps li.cycle")]
    assert cycle == ["10", "11"]
    assert browser.find_element(By.CSS_SELECTOR, "#steps li.loop-start").get_attribute("data-step") == "10"
    body.send_keys(Keys.END)
    assert body.get_attribute("data-step") == "11" and body.get_attribute("data-cycle") == "1"
    assert browser.find_element(By.ID, "counter").text == "step 11 / 11 (cycle 2 of 2)"
    column = browser.find_element(By.CSS_SELECTOR, "#columns .column")
    assert "FollowersCatchUp violated" in column.text and "the cycle repeats from step 10" in column.text
    screenshot(browser, "page-lasso-cycle")
    body.send_keys(Keys.ARROW_RIGHT)  # past the last step: back to the cycle's first step
    assert body.get_attribute("data-step") == "10"
    browser.find_element(By.ID, "forward").click()
    browser.find_element(By.ID, "forward").click()
    assert body.get_attribute("data-step") == "10"
    body.send_keys(Keys.HOME)
    assert body.get_attribute("data-cycle") == "0" and "(stem)" in browser.find_element(By.ID, "counter").text
    body.send_keys("c")
    assert body.get_attribute("data-step") == "10"
    assert console_errors(browser) == []


def test_check_save_with_liveness_writes_each_lassos_page(tmp_path):
    code, output = hwm("check", "--protocol", "seed", "--servers", 3, "--max-generation", 2, "--max-log", 1,
                       "--max-crashes", 1, "--liveness", "--save", tmp_path)
    assert code == 1, output
    page = (tmp_path / "seed.FollowersCatchUp.html").read_text()
    assert '"cycle": true' in page and "the cycle repeats from step" in page
