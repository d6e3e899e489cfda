"""Kafka, ZAB and BookKeeper traces explained and drawn in each system's own words and state."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.checker.replay import replay_on_model
from hwm.teach.explain import frames_of_outcome
from hwm.properties.trace import load
from tests.teach.layout import label_overlaps
from tests.teach.conftest import console_errors, screenshot

CATALOGUE = Path(__file__).resolve().parents[2] / "counterexamples"
SVG = "{http://www.w3.org/2000/svg}"
# What the generic before/after difference prints for a step no module has words for.
GENERIC = re.compile(r"^S\d+ (alive|role|generation|log|hwm) .* -> |^nothing visible changed$")


def frames(name: str):
    trace = load(CATALOGUE / f"{name}.json")
    return frames_of_outcome(trace, replay_on_model(trace))


def lines(name: str) -> dict[int, list[str]]:
    return {f.number: f.lines for f in frames(name)}


@pytest.mark.parametrize("path", sorted(CATALOGUE.glob("kafka-*.json")) + sorted(CATALOGUE.glob("zab-*.json"))
                         + sorted(CATALOGUE.glob("bookkeeper-*.json")), ids=lambda p: p.stem)
def test_every_step_of_every_catalogue_trace_is_explained_in_the_systems_words(path):
    for frame in frames(path.stem)[1:]:
        assert frame.lines, f"{path.stem} step {frame.number} has no explanation"
        generic = [line for line in frame.lines if GENERIC.search(line)]
        assert not generic, f"{path.stem} step {frame.number} {frame.label}: {generic}"


def test_kafka_steps_say_the_hw_rule_and_the_truncations():
    before_kip101 = lines("kafka-truncate-to-hwm")
    assert "HW = min LEO over ISR {S1,S2} (S1=1, S2=1) = 1" in before_kip101[3]
    assert "S1's HW rises 0 -> 1" in before_kip101[3]
    assert ('S2 becomes a follower of S1 in epoch 1 and truncates its log to its own HW 0 (pre-KIP-101): removes '
            '1@g1 "v1"') in before_kip101[6]
    assert "S1 missed the LeaderAndIsr request: it still leads epoch 1" in before_kip101[7]
    kip101 = lines("kafka-kip101")
    assert kip101[7][0] == ("S2 asks S1 where epoch 2 ends (OffsetsForLeaderEpoch, KIP-101); S1's epoch cache is "
                            "1@0 3@1 (epoch@start offset): it answers the start offset of its first epoch after 2, 1")
    kip279 = lines("kafka-kip279")
    assert kip279[6][0].startswith("S3 removes S2 from the ISR: it has fetched only up to offset 0, behind S3's LEO 1")
    assert "S2 has caught up to S1's HW 1: S1 adds it back to the ISR {S1,S2,S3}" in kip279[11]
    unclean = lines("kafka-unclean-election")
    assert unclean[9][0].startswith("no replica of the ISR {S2} is alive: the controller elects S3, outside the ISR")


def test_zab_steps_say_newleader_and_what_is_on_disk():
    zab = lines("zab-ack-before-persist")
    assert "S1 is a prospective leader" in zab[1][-1]
    assert ("S1 holds NEWLEADER acknowledgements from {S1,S2} (2 of 3, a quorum is 2): S1 is established and commits "
            "its whole history at once") in zab[2]
    assert any("ZOOKEEPER-3911" in line and "only 0 of its 1 entries are on disk" in line for line in zab[4])
    assert 'clients are told 1@g1 "v1" committed' in zab[6]
    assert 'S3 loses 1@g1 "v1": acknowledged, but only in memory' in zab[7]


def test_bookkeeper_steps_say_fencing_lac_and_the_closed_ledger():
    bk = lines("bookkeeper-recovery-without-fencing")
    assert bk[3][0].startswith("recovery sends S1 a fencing LAC read: S1 is fenced")
    assert any("BookKeeper issue 2614" in line for line in bk[6])
    assert any("recovery closes the ledger with last entry 0" in line for line in bk[6])
    assert any("LAC = the last entry stored, with all before it, on an ack quorum of 2 of 3 bookies = 1" in line
               for line in bk[7])
    assert "the writer's LAC rises 0 -> 1: its client is told entries up to 1 are written" in bk[7]
    assert "AckedWriteNeverLost" in frames("bookkeeper-recovery-without-fencing")[7].violations


def svg_texts(path: Path, server: str) -> list[str]:
    root = ET.parse(path).getroot()
    row = next(g for g in root.iter(SVG + "g") if g.get("data-server") == server)
    return [t.text for t in row.iter(SVG + "text")]


def test_each_systems_pictures_show_its_own_state(tmp_path):
    def draw(name):
        result = CliRunner().invoke(main, ["replay", "-q", str(CATALOGUE / f"{name}.json"), "--svg",
                                           str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        return tmp_path / name

    kafka = draw("kafka-kip101")
    leader = svg_texts(kafka / "step-07.svg", "S1")
    assert "leader epoch 3" in leader and "ISR {S1,S2}" in leader and "epochs 1@0 3@1" in leader
    assert "HW 2" in leader and "LEO S2=2" in leader
    assert "in ISR, fetches S1" in svg_texts(kafka / "step-07.svg", "S2")
    assert "in ISR, fetches S1, truncating" in svg_texts(kafka / "step-06.svg", "S2")
    zab = draw("zab-ack-before-persist")
    s3 = svg_texts(zab / "step-06.svg", "S3")
    assert "leader g2 established" in s3 and "NEWLEADER acks S1" in s3 and "on disk 0 of 1" in s3
    root = ET.parse(zab / "step-06.svg").getroot()
    memory = [g for g in root.iter(SVG + "g") if "memory-only" in (g.get("class") or "")]
    assert [g.get("data-index") for g in memory] == ["1"]
    assert "leader g1 prospective" in svg_texts(zab / "step-01.svg", "S1")
    bk = draw("bookkeeper-recovery-without-fencing")
    assert svg_texts(bk / "step-07.svg", "S1")[:3] == ["S1", "bookie", "fenced"]
    assert "not fenced" in svg_texts(bk / "step-07.svg", "S3")
    writer = svg_texts(bk / "step-07.svg", "S4")
    assert "writer" in writer and "LAC 1" in writer and "stored S1=1 S2=0 S3=1" in writer
    assert "ledger closed at 0" in svg_texts(bk / "step-07.svg", "S5")
    # The raft family's pictures keep their words.
    raft = draw("seed")
    assert "hwm 0" in svg_texts(raft / "step-01.svg", "S1")


@pytest.mark.browser
def test_a_kafka_trace_page_shows_the_isr_the_hw_rule_and_the_fix_side_by_side(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    out = tmp_path / "kip101.html"
    result = CliRunner().invoke(main, ["replay", "-q", str(CATALOGUE / "kafka-kip101.json"), "--html", str(out),
                                       "--compare", "kafka-kip279"])
    assert result.exit_code == 0, result.output
    browser.get(out.as_uri())
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.END)
    assert body.get_attribute("data-step") == "7"
    buggy, fixed = browser.find_elements(By.CSS_SELECTOR, "#columns .column")
    assert "violating" in buggy.get_attribute("class")
    assert "S1's epoch cache is 1@0 3@1 (epoch@start offset): it answers the start offset of its first epoch" in buggy.text
    assert "HW = min LEO over ISR {S1,S2} (S1=2, S2=2) = 2" in buggy.text
    assert "LogMatching violated" in buggy.text
    # Under KIP-279 the leader names the epoch it answered for, and S2 truncates to 0 first.
    assert "it answers epoch 1, end offset 1 (KIP-279" in fixed.text and "S2 removes 1@g2" in fixed.text
    assert "violating" not in fixed.get_attribute("class")
    notes = [t.text for t in buggy.find_elements(By.CSS_SELECTOR, 'g.server[data-server="S1"] text.system-note')]
    assert notes == ["ISR {S1,S2}", "epochs 1@0 3@1"]
    screenshot(browser, "page-kafka-kip101-vs-kip279")
    assert console_errors(browser) == []


@pytest.mark.parametrize("path", sorted(CATALOGUE.glob("*.json")) + sorted(CATALOGUE.glob("liveness/*.json")),
                         ids=lambda p: p.stem)
def test_every_catalogue_trace_draws_a_page_and_well_formed_svgs(tmp_path, path):
    result = CliRunner().invoke(main, ["replay", "-q", str(path), "--html", str(tmp_path / "p.html"),
                                       "--svg", str(tmp_path / "svg")])
    assert result.exit_code == 0, result.output
    pictures = sorted((tmp_path / "svg").glob("step-*.svg"))
    assert len(pictures) == len(load(path).steps) + 1
    for picture in pictures:
        ET.parse(picture)  # well-formed: every name and value escaped
    assert "<script src" not in (tmp_path / "p.html").read_text()


@pytest.mark.browser
def test_every_catalogue_page_steps_to_its_end_in_a_browser_without_errors(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    for path in sorted(CATALOGUE.glob("*.json")) + sorted(CATALOGUE.glob("liveness/*.json")):
        out = tmp_path / f"{path.stem}.html"
        result = CliRunner().invoke(main, ["replay", "-q", str(path), "--html", str(out)])
        assert result.exit_code == 0, result.output
        browser.get(out.as_uri())
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.END)
        trace = load(path)
        assert body.get_attribute("data-step") == str(len(trace.steps)), path.stem
        column = browser.find_element(By.CSS_SELECTOR, "#columns .column")
        assert "violating" in column.get_attribute("class"), path.stem  # every catalogue trace is a bug's
        servers = len(replay_on_model(trace).rows[0][1].servers)
        assert len(column.find_elements(By.CSS_SELECTOR, "g.server")) == servers, path.stem
        # Measured, not judged by eye: at every step, no label overlaps another or leaves the picture.
        assert label_overlaps(browser) == [], path.stem
        assert console_errors(browser) == [], path.stem
