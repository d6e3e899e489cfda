"""The pages that show what hwm prints: their ```console blocks, run and compared.

A ```console block holds `$ hwm ...` lines, each followed by what it prints. `commands` splits a
block into (command, expected output) pairs, `workspace` gives the commands a scratch current
directory (so the checkout is not written), `run` runs one command in-process and returns what it
printed, and `shown` compares that with the page:

- exactly, line for line (trailing spaces aside), except for
- a duration or a rate (`in 36.5 s`, `0.55 schedules/s`, `4.5 operations/s`, `1,278 states/s`): any number
  matches, and
- a line that is only `...` (indented or not): it stands for any run of lines, none included.

tests/teach/test_tutorial.py and test_tutorial_bookkeeper.py compare with `==` (their commands print
no time and their pages elide nothing); tests/nodes/test_tutorial_your_node.py uses `shown`.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import shutil
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from hwm.cli import main

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```console\n(.*?)```", re.S)
# A block right after this line takes too long for the default run: only `pytest -m deep` compares it.
DEEP = "<!-- checked under pytest -m deep -->"
MARKED_BLOCK = re.compile(r"(" + re.escape(DEEP) + r"\n)?```console\n(.*?)```", re.S)
# What a run cannot print the same twice: its duration and its rates (hwm test's summary line, hwm check's
# search speed).
TIMING = re.compile(r"(?<![\w.])(?:\d+\.\d+ (schedules/s|operations/s|s)|\d[\d,]* (states/s))\b")
ELISION = "..."


def commands(block: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of one console block."""
    pairs: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
        else:
            raise ValueError(f"a console block starts with a `$ ` command, not {line!r}")
    return [(command, "\n".join(out)) for command, out in pairs]


def marked_commands(text: str, deep: bool) -> list[tuple[str, str]]:
    """(command, expected output) of `text`'s blocks that run by default, or of those under -m deep."""
    return [pair for marker, block in MARKED_BLOCK.findall(text) if bool(marker) == deep for pair in commands(block)]


@contextmanager
def workspace(tmp: Path, copies: tuple[str, ...] = (), links: tuple[str, ...] = ()):
    """`tmp` as the current directory, with a copy of the *.json files of each folder in `copies`
    and a link to each folder (or file) in `links` (read, never written, by the commands), all at
    their paths in the checkout, and an empty `hwm-out/`."""
    for folder in copies:
        (tmp / folder).mkdir(parents=True, exist_ok=True)
        for trace in (ROOT / folder).glob("*.json"):
            shutil.copy(trace, tmp / folder / trace.name)
    for path in links:
        (tmp / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path).symlink_to(ROOT / path)
    (tmp / "hwm-out").mkdir(exist_ok=True)
    old = os.getcwd()
    os.chdir(tmp)
    try:
        yield tmp
    finally:
        os.chdir(old)


def invoke(command: str) -> tuple[int, str]:
    """Run one `hwm ...` command line in-process: its exit status and what it printed (trailing
    spaces and the final newline stripped)."""
    argv = shlex.split(command)
    assert argv[0] == "hwm", f"the page runs hwm commands only, not {command!r}"
    result = CliRunner().invoke(main, argv[1:], prog_name="hwm")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, "\n".join(line.rstrip() for line in result.output.rstrip("\n").splitlines())


def run(command: str) -> str:
    """What `command` prints; it must exit 0 or 1 (a page shows no usage errors)."""
    status, output = invoke(command)
    assert status in (0, 1), f"{command} exited {status}: {output}"
    return output


def rewritten(text: str) -> str:
    """`text` (a page) with each console block's outputs replaced by what its commands print now: what a
    page's test writes after a deliberate change (`--update`), run in the caller's workspace."""
    def regenerate(match: re.Match) -> str:
        return "```console\n" + "\n".join(f"$ {command}\n{run(command)}" for command, _ in commands(match.group(1))) \
            + "\n```"
    return BLOCK.sub(regenerate, text)


def _untimed(line: str) -> str:
    return TIMING.sub(lambda m: f"<t> {m.group(1) or m.group(2)}", line)


def shown(expected: str, printed: str) -> bool:
    """Whether `printed` is what a page shows as `expected`, under the rules of this module's
    docstring."""
    want = [None if line.strip() == ELISION else _untimed(line) for line in expected.splitlines()]
    got = [_untimed(line) for line in printed.splitlines()]
    # Wildcard matching with `...` as the star, over lines: on a mismatch, let the last `...` seen
    # take one more line and try again from there (linear in lines for each `...`).
    i = j = 0
    star, taken = -1, 0
    while j < len(got):
        if i < len(want) and want[i] is not None and want[i] == got[j]:
            i, j = i + 1, j + 1
        elif i < len(want) and want[i] is None:
            star, taken = i, j
            i += 1
        elif star >= 0:
            taken += 1
            i, j = star + 1, taken
        else:
            return False
    return all(line is None for line in want[i:])


def difference(command: str, expected: str, printed: str) -> str:
    """A message for a failed `shown`: the first line of the page's block that the command no longer
    prints where the block shows it, then the block against what the command printed."""
    lines = expected.splitlines()
    first = next((n for n in range(len(lines)) if not shown("\n".join(lines[:n + 1] + [ELISION]), printed)),
                 len(lines))
    where = (f"line {first + 1} of the block, {lines[first]!r}" if first < len(lines)
             else "the block ends before the output does")
    diff = difflib.unified_diff([_untimed(line) for line in lines], [_untimed(line) for line in printed.splitlines()],
                                "shown on the page", "printed", lineterm="")
    return (f"`{command}` no longer prints what the page shows: {where} (`...` lines elide any lines, <t> is a "
            "time):\n" + "\n".join(diff))
