"""Every path of every command, given one it cannot use (under /proc, under a regular file, a file where
a directory is wanted, a directory where a file is wanted): exit 2, one line naming the path, no
traceback, and no work started (docs/design.md, "Verdicts"). The paths are found in the command tree,
so an option added later is walked too."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.params import OutputDir, OutputFile

ROOT = Path(__file__).resolve().parents[2]


class _WorkStarted(Exception):
    """Raised in place of a command's long work (serving, starting servers, hunting): a path that
    reaches it was not refused first."""


# What each command needs besides the path under test to reach its work: (options, arguments). A
# command with a path that is missing here fails the walk, so a new command cannot be forgotten.
RUN = [sys.executable, "-c", "import sys; sys.stdin.read()"]
BASE: dict[str, tuple[list[str], list[str]]] = {
    "check": (["--protocol", "raft", "--servers", "2", "--max-generation", "1", "--max-crashes", "0",
               "--successors", "reference"], []),
    "graph": (["--protocol", "raft", "--servers", "2", "--max-generation", "1"], []),
    "replay": ([], [str(ROOT / "counterexamples" / "seed.json")]),
    "explore": (["--port", "0"], ["--", *RUN]),
    "cluster": (["--data", "{tmp}/data"], []),
    "node": (["--id", "S1", "--listen", "127.0.0.1:0", "--data", "{tmp}/data"], []),
    "controller": (["--listen", "127.0.0.1:0", "--brokers", "S1=127.0.0.1:1", "--data", "{tmp}/data"], []),
    "put": (["--data", "{tmp}/data", "--timeout", "0.1"], ["v"]),
    "get": (["--data", "{tmp}/data", "--timeout", "0.1"], ["1"]),
    "status": (["--data", "{tmp}/data", "--timeout", "0.1"], []),
    "validate": (["--protocol", "raft"], ["{tmp}/run.jsonl"]),
    "test": (["--schedules", "1", "--steps", "1"], ["--", *RUN]),
}
# A path option that applies only with another option.
WITH = {("node", "--ledger"): ["--protocol", "bookkeeper"]}
# Where each command's work starts.
WORK = ["hwm.cluster_cli._serve_until_stopped", "hwm.cluster_cli._port_free", "hwm.cluster_cli.Client",
        "hwm.teach.explorer.serve_until_ctrl_c", "hwm.teach.node_explorer.serve_from_command_line",
        "hwm.stdio_cli.run_stdio_node"]


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(main)
    return {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}


def _wants(param: click.Parameter) -> str | None:
    """'dir', 'file' or 'either' for a path parameter; None for any other."""
    kind = param.type
    if isinstance(kind, OutputDir):
        return "dir"
    if isinstance(kind, OutputFile):
        return "file"
    if isinstance(kind, click.Path):
        return "dir" if not kind.file_okay else "file" if not kind.dir_okay else "either"
    return None


def _bad_paths(param: click.Parameter) -> list[str]:
    suffixes = getattr(param.type, "suffixes", ()) or (".json",)
    wants = _wants(param)
    name = "hwm-walk" + ("" if wants == "dir" else suffixes[0])
    # /proc exists and refuses new files, even to root (whom os.access lets write anywhere).
    paths = [f"/proc/{name}", f"{{tmp}}/file/{name}"]
    if wants == "dir":
        paths.append("{tmp}/file")  # a file where a directory is wanted
    elif wants == "file":
        paths.append(f"{{tmp}}/dir{suffixes[0]}")  # a directory where a file is wanted
    return paths


def _walk() -> list[tuple[str, str, str]]:
    cases = []
    for name, command in _commands().items():
        for param in command.params:
            if _wants(param) is None:
                continue
            flag = param.opts[0] if isinstance(param, click.Option) else param.name
            cases += [(name, flag, bad) for bad in _bad_paths(param)]
    return cases


CASES = _walk()


def test_the_walk_finds_the_paths_named_in_the_issue():
    walked = {(command, flag) for command, flag, _ in CASES}
    assert {("check", "--save"), ("check", "--junit"), ("check", "--spark-dir"), ("graph", "--out"),
            ("replay", "--html"), ("replay", "--svg"), ("replay", "--itf"), ("replay", "files"),
            ("explore", "--save-dir"), ("cluster", "--data"), ("cluster", "--record"), ("node", "--data"),
            ("node", "--record"), ("controller", "--data"), ("validate", "--table"), ("validate", "paths"),
            ("test", "--save")} <= walked


def _args(command: str, flag: str, bad: str) -> list[str]:
    assert command in BASE, f"hwm {command} has a path ({flag}): give BASE the arguments it needs to run"
    options, arguments = BASE[command]
    options = list(options)
    if flag.startswith("--"):
        if flag in options:  # the base's value gives way to the one under test
            at = options.index(flag)
            del options[at:at + 2]
        options += WITH.get((command, flag), []) + [flag, bad]
    else:
        arguments = [bad]
    return [command, *options, *arguments]


@pytest.mark.parametrize("command, flag, bad", CASES)
def test_a_path_that_cannot_be_used_is_one_line_naming_it_and_exit_2(monkeypatch, tmp_path, command, flag, bad):
    (tmp_path / "file").write_text("")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "dir.xml").mkdir()
    (tmp_path / "dir.dot").mkdir()
    (tmp_path / "run.jsonl").write_text('{"format": "hwm-events/1", "servers": ["n1"], "protocol": "raft"}\n')

    def started(*args, **kwargs):
        raise _WorkStarted

    for target in WORK:
        monkeypatch.setattr(target, started)
    monkeypatch.chdir(tmp_path)
    bad = bad.format(tmp=tmp_path)
    args = [a.format(tmp=tmp_path) for a in _args(command, flag, bad)]
    result = CliRunner().invoke(main, args)
    shown = f"hwm {' '.join(args)}\n{result.output}"
    assert not isinstance(result.exception, _WorkStarted), f"the work started before {bad} was refused\n{shown}"
    assert result.exit_code == 2, shown
    assert "Traceback" not in result.output, shown
    naming = [line for line in result.stderr.splitlines() if bad in line or bad.rstrip("/") in line]
    assert len(naming) == 1 and naming[0].lower().startswith("error"), shown


def test_hwm_cluster_that_cannot_write_its_cluster_file_says_so_in_one_line_before_any_server(monkeypatch, tmp_path):
    import errno

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    def started(*args, **kwargs):
        raise _WorkStarted

    monkeypatch.setattr("hwm.cluster_cli._port_free", lambda host, port: True)
    monkeypatch.setattr("hwm.cluster_cli.subprocess.Popen", started)
    monkeypatch.setattr(Path, "write_text", full)
    result = CliRunner().invoke(main, ["cluster", "--data", str(tmp_path / "data")])
    assert not isinstance(result.exception, _WorkStarted) and result.exit_code == 2, result.output
    assert result.stderr.strip() == f"error: cannot write {tmp_path / 'data' / 'cluster.json'}: No space left on device"
