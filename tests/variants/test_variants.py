"""Variants (docs/variants.md): the rules object the flags fill in, a variant's file loaded where a
preset is named, its own properties, and every bad input named by file and line with exit 2."""

from __future__ import annotations

import random
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.rules import Rules
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS, Protocol, resolve
from hwm.properties.quorum import quorum_index

ROOT = Path(__file__).resolve().parents[2]
FLEXIBLE = ROOT / "examples" / "variants" / "flexible.py"
TUTORIAL = ["--servers", "4", "--max-generation", "3", "--max-crashes", "0"]


def hwm(*args: str):
    return CliRunner().invoke(main, list(args))


def write(folder: Path, text: str, name: str = "my_variant.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_the_flags_rules_take_the_quorum_index_of_the_quorum_flag():
    draw = random.Random(37)
    for _ in range(2000):
        n = draw.randint(1, 7)
        match = tuple(draw.randint(0, 5) for _ in range(n))
        for rule in ("majority", "seed-index"):
            assert Rules(Protocol(quorum=rule), n).quorum_index(match) == quorum_index(rule, match)


def test_a_preset_gets_the_flags_rules_and_the_catalogue():
    model = build_model(PRESETS["raft"].protocol, Config())
    assert type(model.rules) is Rules and not hasattr(model, "variant")


def test_flexible_quorums_are_pinned():
    """The tutorial's variants: Q1 + Q2 > N holds, Q1 + Q2 = N fails ReadNeverTruncated."""
    config = Config(servers=4, max_generation=3, max_crashes=0)
    _, safe = resolve(f"{FLEXIBLE}:Flexible")
    report = run(CheckRequest("Flexible"), model=build_model(safe, config))
    assert (report.states, report.transitions) == (1441, 9999)
    assert not report.violated
    _, unsafe = resolve(f"{FLEXIBLE}:FlexibleTooSmall")
    report = run(CheckRequest("FlexibleTooSmall"), model=build_model(unsafe, config))
    assert (report.states, report.transitions) == (717, 5126)
    assert report.results["ReadNeverTruncated"].length == 6
    assert report.results["LeaderCommitsAlone"].found and not report.results["LiveLeadersDiffer"].found


def _doc_blocks() -> list[tuple[list[str], list[str]]]:
    """(command's arguments, the lines the doc shows) of each `$ hwm check` block of docs/variants.md."""
    text = (ROOT / "docs" / "variants.md").read_text()
    blocks = []
    for block in re.findall(r"```\n(\$ hwm check .*?)```", text, re.S):
        command, *shown = block.splitlines()
        blocks.append((command.split()[3:], [line for line in shown if line.strip() and line.strip() != "..."]))
    return blocks


def test_the_docs_commands_print_what_the_docs_show(monkeypatch):
    from hwm.checker.auto_backend import prepare_fast

    monkeypatch.chdir(ROOT)
    prepare_fast()  # the page shows a machine whose compiled kernels are built (hwm check builds them once)
    blocks = _doc_blocks()
    assert len(blocks) == 2
    for args, shown in blocks:
        result = hwm("check", *args)
        printed = result.output.splitlines()
        for line in shown:
            if line.startswith("exit "):
                assert result.exit_code == int(line.split()[1]), result.output
            else:
                assert any(p.startswith(line) for p in printed), (line, result.output)


def test_a_variant_outside_the_checkout_with_its_own_properties(tmp_path, monkeypatch):
    write(tmp_path, '''
        from hwm.model.variant import Variant

        def two_leaders(view):
            """two servers lead the same generation"""
            seen = [s.generation for s in view.servers if s.role == "leader"]
            return "two leaders" if len(seen) != len(set(seen)) else None

        def learner_gets_entry(view):
            """the learner stores an entry"""
            return "S4 stores an entry" if view.servers[3].log else None

        class Learner(Variant):
            """S4 is a learner: it never votes, never leads, and its copy does not count."""
            base = "raft"
            invariants = {"NoTwoLeaders": two_leaders}
            witnesses = {"LearnerGetsEntry": learner_gets_entry}

            def counts(self, server):
                return server != 3
    ''')
    monkeypatch.chdir(tmp_path)
    for successors in ("reference", "fast"):  # counts is a constant rule: the compiled kernels run it too
        result = hwm("check", "--protocol", "my_variant.py:Learner", "--servers", "4", "--max-generation", "2",
                     "--max-crashes", "0", "--successors", successors)
        assert result.exit_code == 0, result.output
        assert "symmetry reduction is off: Learner.counts" in result.output
        assert "explored 4,033 distinct states" in result.output
        assert "✓ NoTwoLeaders" in result.output and "✓ LearnerGetsEntry" in result.output


@pytest.mark.parametrize("source, expected", [
    ("from hwm.model.variant import Variant\nclass V(Variant)\n    pass\n", r"my_variant.py:2: syntax error"),
    ("from hwm.model.variant import Variant\nx = 1\nraise RuntimeError('no config')\n",
     r"my_variant.py:3: importing .* raised RuntimeError: no config"),
    ("from hwm.model.variant import Variant\nclass W(Variant):\n    pass\n", r"my_variant.py: no name 'V'; its variants: W"),
    ("x = 1\nV = 3\n", r"my_variant.py:2: V is a int, not a variant"),
    ("class V:\n    pass\n", r"my_variant.py:1: V is a class, not a variant"),
    ("from hwm.model.variant import Variant\nclass V(Variant):\n    base = 'kafka'\n"
     "    def may_commit(self, index, log, generation):\n        return True\n",
     r"my_variant.py:4: V.may_commit: the kafka system \(base kafka\) asks no may_commit: Kafka's leader"),
    ("from hwm.model.variant import Variant\nclass V(Variant):\n    base = 'raftt'\n",
     r"my_variant.py:2: V.base 'raftt': unknown protocol"),
    ("from hwm.model.variant import Variant\nclass V(Variant):\n    invariants = {'ReadsAgree': len}\n",
     r"V.invariants: ReadsAgree is already a property of the catalogue"),
    ("from hwm.model.variant import Variant\nclass V(Variant):\n    def election_quorum(self):\n        return 5\n",
     r"my_variant.py:3: V.election_quorum is 5, but a quorum of 3 counting servers"),
    ("from hwm.model.variant import Variant\nclass V(Variant):\n    def replication_quorum(self):\n"
     "        return 1 / 0\n", r"my_variant.py:4: V.replication_quorum raised ZeroDivisionError"),
])
def test_bad_input_before_the_search_is_one_line_naming_file_and_line(tmp_path, source, expected):
    path = write(tmp_path, source)
    result = hwm("check", "--protocol", f"{path}:V", "--max-generation", "2")
    assert result.exit_code == 2, result.output
    assert re.search(expected, result.output), result.output
    assert "explored" not in result.output


@pytest.mark.parametrize("body, expected", [
    ("    def may_commit(self, index, log, generation):\n        return 1\n",
     r"my_variant.py:3: V.may_commit returned 1 \(int\), expected bool, at replicate\(S1, S2\) from state S1 leader +g1"),
    ("    def grants_vote(self, candidate_log, voter_log):\n        return candidate_log[5] > 0\n",
     r"my_variant.py:4: V.grants_vote raised IndexError: .*, enumerating the actions of state S1 follower +g0"),
    ("    invariants = {'Boom': lambda view: view.nothing}\n",
     r"my_variant.py:3: invariant Boom raised AttributeError: .* in state S1 follower +g0"),
])
def test_a_hook_failing_during_the_search_keeps_the_partial_report(tmp_path, body, expected):
    path = write(tmp_path, "from hwm.model.variant import Variant\nclass V(Variant):\n" + body)
    result = hwm("check", "--protocol", f"{path}:V", "--max-generation", "2", "--max-crashes", "0")
    assert result.exit_code == 2, result.output
    assert "explored" in result.output and "INTERRUPTED: an error in the variant" in result.output
    assert re.search(r"error: .*" + expected, result.output), result.output


def test_a_variant_from_a_module_on_the_path_and_a_missing_module(tmp_path, monkeypatch):
    write(tmp_path, "from hwm.model.variant import Variant\nclass V(Variant):\n    pass\n", "team_rules.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = hwm("check", "--protocol", "team_rules:V", "--max-generation", "1", "--max-crashes", "0")
    assert result.exit_code == 0, result.output
    result = hwm("check", "--protocol", "no_such_team_module:V")
    assert result.exit_code == 2 and "no module named 'no_such_team_module'" in result.output


def test_workers_resolve_the_variant_again(tmp_path):
    path = write(tmp_path, "from hwm.model.variant import Variant\nclass V(Variant):\n    pass\n")
    one = hwm("check", "--protocol", f"{path}:V", "--max-generation", "2", "--max-crashes", "0", "--json")
    two = hwm("check", "--protocol", f"{path}:V", "--max-generation", "2", "--max-crashes", "0", "--json",
              "--workers", "2")
    assert one.exit_code == two.exit_code == 0
    states = [re.search(r'"distinct_states": (\d+)', r.output).group(1) for r in (one, two)]
    assert states[0] == states[1]
