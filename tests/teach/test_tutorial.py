"""docs/tutorial.md shows what its commands print and the pictures they draw.

Every ```console block holds `$ hwm ...` lines, each followed by its output (tests/console.py). The
test runs each command (in a scratch copy of the traces, so the checkout is not
written) and compares its output with the block, then compares every picture the
tutorial shows (`docs/tutorial/X`) with the one the commands drew (`hwm-out/tutorial/X`: the
commands write pictures to the output folder, never into the repository). After a deliberate change,
`python -m tests.teach.test_tutorial --update` rewrites the outputs and pictures.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from tests.console import BLOCK, ROOT, commands, rewritten, run, workspace as _workspace

TUTORIAL = ROOT / "docs" / "tutorial.md"
PICTURE = re.compile(r"!\[[^\]]*\]\((tutorial/[^)]+)\)")


def workspace(tmp: Path):
    """A scratch directory with the traces the tutorial names, as the current directory."""
    return _workspace(tmp, copies=("counterexamples", "counterexamples/liveness", "docs/tutorial"))


def test_tutorial_commands_print_what_the_tutorial_shows(tmp_path):
    text = TUTORIAL.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) >= 6
    with workspace(tmp_path):
        for block in blocks:
            for command, expected in commands(block):
                assert run(command) == expected, (f"`{command}` no longer prints what docs/tutorial.md shows; after a "
                                                  "deliberate change: python -m tests.teach.test_tutorial --update")
        assert not sorted((tmp_path / "docs").rglob("*.svg")), "a tutorial command wrote a picture into docs/"
        pictures = PICTURE.findall(text)
        assert len(pictures) >= 5
        for picture in pictures:
            drawn = tmp_path / "hwm-out" / picture
            assert drawn.exists(), f"no command in the tutorial draws {picture}"
            assert drawn.read_text() == (ROOT / "docs" / picture).read_text(), (
                f"docs/{picture} is out of date: python -m tests.teach.test_tutorial --update")


def update(tmp: Path) -> None:
    text = TUTORIAL.read_text(encoding="utf-8")
    with workspace(tmp):
        text = rewritten(text)
        for picture in PICTURE.findall(text):
            target = ROOT / "docs" / picture
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(tmp / "hwm-out" / picture, target)
    TUTORIAL.write_text(text, encoding="utf-8")


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        update(Path(scratch))
    print(f"rewrote {TUTORIAL} and its pictures (a new step picture needs `git add -f`: .gitignore hides "
          "the step pictures the tutorial does not show)")
