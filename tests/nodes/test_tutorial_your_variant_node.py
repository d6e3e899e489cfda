"""docs/tutorial-your-variant.md, section 3, shows what its commands print: hwm's own node under a
variant's rules (`hwm node --stdio --protocol examples/variants/flexible.py:Flexible`) is clean when
stepped against the variant's model and a ModelStep finding against raft's.

Its ```console blocks are compared as tests/nodes/test_tutorial_your_node.py compares that page's
(tests/console.py's rules); the block after `<!-- checked under pytest -m deep -->`, a hunt of three
schedules, runs under `pytest -m deep` only, and the default run replays the schedule that tells the
two models apart, against each."""

from __future__ import annotations

import shlex

import pytest

from tests.console import ROOT, difference, invoke, marked_commands, run, shown

PAGE = ROOT / "docs" / "tutorial-your-variant.md"
NODE = "hwm node --stdio --protocol examples/variants/flexible.py:Flexible"


def section_commands(deep: bool) -> list[tuple[str, str]]:
    """(command, expected output) of section 3's blocks that run by default, or of those under -m deep."""
    return marked_commands(PAGE.read_text(encoding="utf-8").split("\n## 3.", 1)[1], deep)


def test_the_node_is_clean_against_its_variant_and_a_model_step_against_raft(scratch):
    replays = section_commands(deep=False)
    assert [shlex.split(command)[shlex.split(command).index("--protocol") + 1] for command, _ in replays] == [
        "examples/variants/flexible.py:Flexible", "raft"]
    for (command, expected), status in zip(replays, (0, 1)):
        assert command.endswith(f"-- {NODE}"), command
        code, printed = invoke(command)
        assert code == status, f"{command} exited {code}: {printed}"
        assert shown(expected, printed), difference(command, expected, printed)
    assert "✗ ModelStep (step 4): after settle(4), n1 showed leader g1 log=[1] hwm=1: no step of raft's model" \
        in replays[1][1]


def test_the_slow_block_is_in_its_repeatable_form():
    (command, _), = section_commands(deep=True)
    argv = shlex.split(command)
    assert argv[1] == "test" and argv[argv.index("--clock") + 1] == "virtual" and command.endswith(f"-- {NODE}")
    assert argv[argv.index("--protocol") + 1] == "examples/variants/flexible.py:Flexible"


@pytest.mark.deep
def test_the_hunt_against_the_variants_model_prints_what_the_page_shows(scratch):
    for command, expected in section_commands(deep=True):
        printed = run(command)
        assert shown(expected, printed), difference(command, expected, printed)
