"""hwm graph --out FILE.dot|.svg: state graphs a person can open."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from click.testing import CliRunner

from hwm.cli import main

SMALL = ["--protocol", "raft-truncate-to-own-hwm", "--servers", "2", "--max-generation", "1", "--max-log", "1",
         "--max-crashes", "1", "--no-symmetry"]
SVG = "{http://www.w3.org/2000/svg}"


def graph(*args):
    result = CliRunner().invoke(main, ["graph", *SMALL, *map(str, args)])
    summary = dict(re.findall(r"^(\w[\w ]*?)\s{2,}([\d,]+)$", result.output, re.M))
    return result.exit_code, result.output, {k: int(v.replace(",", "")) for k, v in summary.items()}


def test_dot_labels_states_as_the_step_table_and_colours_violating_steps(tmp_path):
    code, output, summary = graph("--out", tmp_path / "g.dot")
    assert code == 0, output
    text = (tmp_path / "g.dot").read_text()
    nodes = re.findall(r"^  s\d+ \[label=", text, re.M)
    edges = re.findall(r"^  s\d+ -> s\d+ \[(.*)\];$", text, re.M)
    assert len(nodes) == summary["states"] and len(edges) == summary["transitions"]
    assert summary["violating steps"] > 0
    assert sum('color="#b00020"' in e for e in edges) == summary["violating steps"]
    assert all('label="restart(' in e for e in edges if "ReadNeverTruncated" in e)  # the rejoin truncates
    assert r'label="S1 F0 [] h0\lS2 F0 [] h0\l", penwidth=2.5' in text  # the initial state, bold
    assert r"S1 L1 [1] h1 match S2=1" in text


def test_svg_is_laid_out_without_graphviz(tmp_path):
    code, output, summary = graph("--out", tmp_path / "g.svg")
    assert code == 0, output
    root = ET.parse(tmp_path / "g.svg").getroot()
    groups = list(root.iter(SVG + "g"))
    states = [g for g in groups if "state" in g.get("class", "").split()]
    bad_edges = [g for g in groups if {"edge", "violating"} <= set(g.get("class", "").split())]
    assert len(states) == summary["states"]
    assert len(bad_edges) == summary["violating steps"]
    assert sum("violating" in g.get("class") for g in states) == summary["violating states"]


def test_bad_out_and_too_large_graphs_are_refused(tmp_path, monkeypatch):
    code, output, _ = graph("--out", tmp_path / "g.png")
    assert code == 2 and "must end in .dot, .svg, .graphml, .gexf, .json" in output
    code, output, _ = graph("--out", tmp_path / "missing" / "g.svg")
    assert code == 2 and "does not exist" in output
    monkeypatch.setattr("hwm.teach.graph_render.MAX_DRAWN", 10)
    code, output, _ = graph("--out", tmp_path / "g.svg")
    # Refused once the search passes what can be drawn, not after the whole space: exit 2, no summary.
    assert code == 2 and "more than 10 states are too many to draw" in output
    assert "distinct" not in output and "states  " not in output
    assert not (tmp_path / "g.svg").exists()


def test_other_systems_label_their_states_with_their_own_state(tmp_path):
    def labels(*args):
        result = CliRunner().invoke(main, ["graph", *map(str, args), "--max-crashes", "0", "--out", tmp_path / "g.dot"])
        assert result.exit_code in (0, 1), result.output
        return (tmp_path / "g.dot").read_text()

    kafka = labels("--protocol", "kafka-kip101", "--servers", 2, "--max-generation", 2, "--max-log", 1)
    assert "(ISR {S1,S2}; epochs empty)" in kafka and "(in ISR, fetches S1, truncating; epochs empty)" in kafka
    zab = labels("--protocol", "zab-ack-before-persist", "--servers", 2, "--max-generation", 2, "--max-log", 1)
    assert "(prospective; NEWLEADER acks none; currentEpoch 1)" in zab
    assert "(established; NEWLEADER acks S2; currentEpoch 1)" in zab
    bk = labels("--protocol", "bookkeeper-recovery-without-fencing", "--servers", 3, "--max-log", 1)
    assert "S4 writer L1 [] h0 match S1=0 S2=0 S3=0\\l" in bk and "S1 F0 [] h0 (fenced)" in bk
    assert "acked 1@g1" in bk


def test_svg_layers_states_by_breadth_first_depth_and_orders_layers_to_cross_few_edges(tmp_path):
    from hwm.teach.graph_render import crossings, layers
    from hwm.model.registry import build_model
    from hwm.checker.graph import state_graph
    from hwm.model.state import Config
    from hwm.properties.protocol import resolve

    code, output, summary = graph("--out", tmp_path / "g.svg")
    root = ET.parse(tmp_path / "g.svg").getroot()
    tops = {}
    for g in root.iter(SVG + "g"):
        if "state" in g.get("class", "").split():
            tops.setdefault(int(g.get("data-depth")), set()).add(float(g.find(SVG + "rect").get("y")))
    assert all(len(ys) == 1 for ys in tops.values())  # one row per depth
    rows = [tops[d].pop() for d in sorted(tops)]
    assert rows == sorted(rows) and len(set(rows)) == len(rows) and sorted(tops) == list(range(len(rows)))
    # A 41-state graph: in fingerprint order its layers cross far more often.
    _, protocol = resolve("raft-seed-quorum")
    config = Config.from_mapping({"servers": 2, "max_generation": 2, "max_log": 1, "max_crashes": 0})
    g = state_graph(build_model(protocol, config), symmetry=False)
    naive = {}
    for n in sorted(g.nodes):
        naive.setdefault(g.nodes[n]["depth"], []).append(n)
    assert crossings(g, layers(g)) < crossings(g, naive) / 2
