"""`hwm test --protocol file.py:Name` (docs/variants.md): a node is checked with the variant's properties
(its replication quorum where they count one, its own invariants) and stepped against the variant's
model; a relative path in the node's command (a variant's file, a virtual environment's python) resolves
from the node's data directory. One run of node processes here (the virtual environment's python);
docs/tutorial-your-variant.md's section 3 runs the rest (tests/nodes/test_tutorial_your_variant.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hwm.bridge.maelstrom.cluster import absolute_paths, run_schedule
from hwm.bridge.maelstrom.observe import Observer
from hwm.bridge.maelstrom.schedule import Schedule
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


def test_a_virtual_environments_python_in_the_nodes_command_stays_a_link(tmp_path, monkeypatch):
    """`.venv/bin/python` is a link to the interpreter the environment was made from; run through
    the link's target, Python would not find the environment's packages (a node command written
    `.venv/bin/python mynode.py` failed to import what the node needs)."""
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "node.py").write_text("")
    monkeypatch.chdir(tmp_path)
    here = os.path.abspath(".")
    assert absolute_paths(["env/bin/python", "node.py"]) == [f"{here}/env/bin/python", f"{here}/node.py"]


def test_a_node_run_by_a_relative_virtual_environment_python_imports_its_packages(monkeypatch):
    """hwm's own node, run as `.venv/bin/python -m hwm.cli node --stdio` from the checkout (hwm is
    installed in the environment only): it starts and answers, in its data directory."""
    venv_python = Path(sys.prefix) / "bin" / "python"
    if sys.prefix == sys.base_prefix or not venv_python.exists():
        pytest.skip("the tests do not run in a virtual environment")
    monkeypatch.chdir(Path(sys.prefix).parent)
    command = [os.path.relpath(venv_python), "-m", "hwm.cli", "node", "--stdio", "--protocol", "raft"]
    run = run_schedule(command, Schedule(nodes=3, steps=[{"op": "settle", "rounds": 6},
                                                          {"op": "log_append", "node": "n1", "value": 1}]))
    assert run.protocol_error is None, str(run.protocol_error)
    assert run.findings == [] and run.operations() == 1, [str(f) for f in run.findings]
