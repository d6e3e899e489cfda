"""docs/tutorial-your-node.md shows what its commands print.

Each ```console block's `$ hwm ...` lines are run in a scratch directory (with a link to examples/)
and what they print is compared with the block under tests/console.py's rules: exactly, except for
durations and rates, and a `...` line that stands for any run of lines. A block right after the
line `<!-- checked under pytest -m deep -->` takes too long for the default run: only `pytest -m deep`
runs it, and the default run checks that its commands are in their repeatable form.
"""

from __future__ import annotations

import shlex

import pytest

from tests.console import ROOT, difference, invoke, marked_commands, run, shown

PAGE = ROOT / "docs" / "tutorial-your-node.md"
FIXED = ("hwm replay examples/nodes/schedules/ack-on-write.json --brief --fixed -- "
         "python3 examples/nodes/log_node.py")


def page_commands(deep: bool) -> list[tuple[str, str]]:
    """(command, expected output) of the page's blocks that run by default, or of those under -m deep."""
    return marked_commands(PAGE.read_text(encoding="utf-8"), deep)


def test_the_tutorial_prints_what_it_shows(scratch):
    shown_here = page_commands(deep=False)
    assert len(shown_here) >= 5 and FIXED in dict(shown_here)
    for command, expected in shown_here:
        status, printed = invoke(command)
        assert status in (0, 1), f"{command} exited {status}: {printed}"
        assert shown(expected, printed), difference(command, expected, printed)
        if command == FIXED:
            assert status == 0, "a replay whose saved finding does not come back, with --fixed, exits 0"


def test_a_replay_whose_saved_finding_does_not_come_back_exits_3(scratch):
    status, printed = invoke(FIXED.replace(" --fixed", ""))
    assert status == 3, printed
    assert "the saved finding did not come back: AckedNeverLost, AckedAtOrBelowHwm; " in printed, printed


def test_every_command_on_the_page_is_in_its_repeatable_form():
    # What the deep run compares, the default run keeps comparable: the virtual clock, and a saved
    # finding at a path the page names rather than at a time stamp.
    every = page_commands(deep=False) + page_commands(deep=True)
    assert page_commands(deep=True), f"no block of {PAGE.name} is left to pytest -m deep"
    for command, expected in every:
        argv = shlex.split(command)
        if argv[1] == "test":
            assert "--clock" in argv and argv[argv.index("--clock") + 1] == "virtual", command
            assert "--save" in argv or "\nsaved " not in "\n" + expected, command


@pytest.mark.parametrize("page, printed, same", [
    ("3 schedules in 36.5 s (0.55 schedules/s, 4.5 operations/s)",
     "3 schedules in 1.0 s (12.00 schedules/s, 40.0 operations/s)", True),
    ("3 schedules in 36.5 s", "4 schedules in 36.5 s", False),          # a count is compared
    ("a 5 s timer", "a 6 s timer", False),                              # a whole number is no duration
    ("step 1\n    ...\nstep 2", "step 1\nstep 2", True),               # `...` may stand for no line
    ("step 1\n    ...\nstep 2", "step 1\n  a\n  b\nstep 2", True),
    ("step 1\n    ...\nstep 2", "step 1\n  a\nstep 3", False),         # what follows it is compared
    ("...\nlast", "first\nlast\nlater", False),                       # the end is the end
    ("a\n...\nb\n...\nc", "a\nb\nx\nb\nc", True),
    ("a", "a\n", True),
    ("a\nb", "a\nb\nc", False),
])
def test_what_a_block_elides_and_what_it_compares(page, printed, same):
    assert shown(page, printed) is same


@pytest.mark.deep
def test_the_tutorial_prints_what_it_shows_in_its_slow_blocks(scratch):
    for command, expected in page_commands(deep=True):
        printed = run(command)
        assert shown(expected, printed), difference(command, expected, printed)
