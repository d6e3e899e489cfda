"""docs/tutorial-bookkeeper.md shows what its commands print (as tests/teach/test_tutorial.py checks
docs/tutorial.md)."""

from __future__ import annotations

from tests.console import BLOCK, ROOT, commands, run
from tests.teach.test_tutorial import workspace

PAGE = ROOT / "docs" / "tutorial-bookkeeper.md"


def test_the_bookkeeper_tutorial_prints_what_it_shows(tmp_path):
    blocks = BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 4
    with workspace(tmp_path):
        for block in blocks:
            for command, expected in commands(block):
                assert run(command) == expected, f"`{command}` no longer prints what docs/tutorial-bookkeeper.md shows"
