"""docs/tutorial-your-variant.md shows what its commands print, and its code is the examples' code.

Each ```console block's `$ hwm ...` lines are run in a scratch directory (with a link to examples/)
and what they print is compared with the block under tests/console.py's rules: exactly, except for
durations and rates, and a `...` line that stands for any run of lines. Each ```python block's lines
are lines of examples/variants/. After a deliberate change, `python -m
tests.variants.test_tutorial_your_variant --update` writes what the commands print into the page.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from tests.console import BLOCK, ROOT, commands, difference, invoke, rewritten, shown, workspace

PAGE = ROOT / "docs" / "tutorial-your-variant.md"
PYTHON = re.compile(r"```python\n(.*?)```", re.S)


def test_the_tutorial_prints_what_it_shows(tmp_path):
    # Sections 1 and 2; section 3's commands start node processes (tests/nodes/test_tutorial_your_variant_node.py).
    models = PAGE.read_text(encoding="utf-8").split("\n## 3.")[0]
    pairs = [pair for block in BLOCK.findall(models) for pair in commands(block)]
    assert len(pairs) == 7
    with workspace(tmp_path, links=("examples",)):
        for command, expected in pairs:
            status, printed = invoke(command)
            assert status in (0, 1), f"{command} exited {status}: {printed}"
            assert shown(expected, printed), difference(command, expected, printed)
        html = (tmp_path / "hwm-out" / "prevote" / "PreVoteWithoutCheckQuorum.UnheardLeaderStepsDown.html").read_text()
        assert "timeout(S2)" in html and "heard=True" in html  # the page --save writes beside the trace


def test_the_tutorial_code_is_the_examples_code():
    examples = "\n".join(path.read_text() for path in (ROOT / "examples" / "variants").glob("*.py")).splitlines()
    blocks = PYTHON.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 5
    for block in blocks:
        for line in block.splitlines():
            assert not line.strip() or line in examples, f"docs/tutorial-your-variant.md shows {line!r}, which is " \
                                                         "not a line of examples/variants/"


def test_the_last_section_is_left_for_the_node_that_implements_a_variant():
    text = PAGE.read_text(encoding="utf-8")
    headings = re.findall(r"^## (\d+)\.", text, re.M)
    assert headings[:2] == ["1", "2"]


def update() -> None:
    """Rewrite the outputs of sections 1 and 2 (section 3's are tests/nodes/test_tutorial_your_variant_node.py's)."""
    models, marker, rest = PAGE.read_text(encoding="utf-8").partition("\n## 3.")
    with tempfile.TemporaryDirectory() as tmp, workspace(Path(tmp), links=("examples",)):
        models = rewritten(models)
    PAGE.write_text(models + marker + rest, encoding="utf-8")


if __name__ == "__main__" and "--update" in sys.argv:
    update()
