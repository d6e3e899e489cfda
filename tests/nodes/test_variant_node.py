"""`hwm test --protocol file.py:Name` (docs/variants.md): a node is checked with the variant's properties
(its replication quorum where they count one, its own invariants) and stepped against the variant's
model; a variant named in the node's command resolves from the node's data directory. No node
processes here: docs/tutorial-your-variant.md's section 3 runs them (tests/nodes/test_tutorial_your_variant.py)."""

from __future__ import annotations

import os
from pathlib import Path

from hwm.bridge.maelstrom.cluster import absolute_paths
from hwm.bridge.maelstrom.observe import Observer
from hwm.bridge.maelstrom.validation import ModelSteps
from hwm.properties.catalogue import ALWAYS

ROOT = Path(__file__).resolve().parents[2]
FLEXIBLE = f"{ROOT}/examples/variants/flexible.py:Flexible"
TOO_SMALL = f"{ROOT}/examples/variants/flexible.py:FlexibleTooSmall"
NODES = ["n1", "n2", "n3", "n4"]


def state(role, generation, log=(), hwm=0):
    return {"generation": generation, "role": role, "log": [[i + 1, g] for i, g in enumerate(log)], "hwm": hwm,
            "isr": None}


def commit_on_two(always) -> list[str]:
    """The kinds found when a leader of four counts its entry, stored on two, as committed."""
    observer = Observer(NODES, always=always)
    observer.observe("n1", 1, "settle", state("leader", 1, (1,), hwm=1))
    observer.observe("n2", 1, "settle", state("follower", 1, (1,), hwm=0))
    for node in ("n3", "n4"):
        observer.observe(node, 1, "settle", state("follower", 1))
    return [finding.name for finding in observer.findings]


def test_a_variants_properties_count_its_replication_quorum_on_live_nodes():
    assert commit_on_two(ALWAYS) == ["CommittedOnQuorum"]  # the catalogue's majority: 3 of 4
    assert commit_on_two(ModelSteps("raft", NODES).always()) == ["CommittedOnQuorum"]
    assert commit_on_two(ModelSteps(FLEXIBLE, NODES).always()) == []  # Flexible's Q2: 2 of 4


def test_a_variants_own_invariants_are_checked_on_live_nodes():
    always = ModelSteps(TOO_SMALL, NODES).always()
    assert "LiveLeadersDiffer" in [p.name for p in always]
    observer = Observer(NODES, always=always)
    for node in NODES[:2]:
        observer.observe(node, 1, "settle", state("leader", 1))
    for node in NODES[2:]:
        observer.observe(node, 1, "settle", state("follower", 1))
    assert "LiveLeadersDiffer" in [finding.name for finding in observer.findings]


def test_a_variants_file_in_the_nodes_command_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    command = ["hwm", "node", "--stdio", "--protocol", "examples/variants/flexible.py:Flexible", "host:7000",
               "examples/nodes/log_node.py", "missing.py:Name"]
    assert absolute_paths(command) == ["hwm", "node", "--stdio", "--protocol", FLEXIBLE, "host:7000",
                                       f"{ROOT}/examples/nodes/log_node.py", "missing.py:Name"]
    assert os.path.isabs(absolute_paths(["examples/variants/flexible.py:FlexibleTooSmall"])[0])


def test_a_relative_directory_in_the_nodes_command_is_made_absolute_and_a_bare_word_is_not(tmp_path, monkeypatch):
    """A path with a slash that exists is the node's own (its state directory, say), even when it is
    no file; a bare word is only a path when it names a file (a directory `hwm` beside the run does not
    turn the command's `hwm` into a path)."""
    (tmp_path / "state").mkdir()
    (tmp_path / "hwm").mkdir()
    monkeypatch.chdir(tmp_path)
    assert absolute_paths(["hwm", "./missing", "--dir", "state/", "./state"]) == [
        "hwm", "./missing", "--dir", str(tmp_path.resolve() / "state"), str(tmp_path.resolve() / "state")]
