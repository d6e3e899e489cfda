"""What a CI job reads of `hwm check`: no ✓ for an unfinished search, no traceback on an output
path's OS error, JUnit XML and progress lines in logs."""

from dataclasses import replace

from hwm.check import describe_report
from hwm.checker.report import bfs
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS


def _raft(**kwargs):
    return bfs(build_model(PRESETS["raft"].protocol, Config()), "raft", **kwargs)


def test_a_search_cut_by_a_state_limit_or_ctrl_c_shows_no_tick_for_an_always_property():
    cut = _raft(max_states=50)
    assert not cut.complete
    for report in (cut, replace(cut, interrupted=True)):
        text = describe_report(report, protocol=PRESETS["raft"].protocol)
        always = [line for line in text.splitlines() if "ReadNeverTruncated" in line]
        assert always == ["  ? ReadNeverTruncated           not violated in the explored part (the search did "
                          "not finish)"], text
        assert "holds" not in text and "bounded:" not in text


# ------------------------------------------- OS errors on output paths after the search
import errno
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _refuse_writes(monkeypatch, target: str):
    """Make `target` (module.attribute) fail as a full or read-only disk does, naming its path."""
    def refuse(*args, **kwargs):
        path = next((a for a in (*args, *kwargs.values()) if isinstance(a, (str, Path)) and "." in str(a)), "x")
        raise OSError(errno.EROFS, "Read-only file system", str(path))
    monkeypatch.setattr(target, refuse)


def _hwm(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("args, target, shows", [
    (["check", "--protocol", "seed", "--max-generation", 2, "--max-crashes", 0, "--save", "{tmp}"],
     "hwm.properties.trace.Trace.save", "✗ ReadNeverTruncated"),
    (["check", "--max-generation", 1, "--max-crashes", 0, "--jobs", 1, "--save", "{tmp}"],
     "hwm.properties.trace.Trace.save", "bookkeeper-recovery-without-fencing"),
    (["check", "--protocol", "seed", "--max-generation", 2, "--max-crashes", 0, "--save", "{tmp}"],
     "hwm.teach.page.write_trace_page", "saved to"),
    (["replay", ROOT / "counterexamples" / "seed.json", "--html", "{tmp}/seed.html"],
     "hwm.teach.page.write_trace_page", "violation of"),
    (["graph", "--protocol", "raft", "--servers", 2, "--max-generation", 1, "--out", "{tmp}/g.graphml"],
     "hwm.checker.graph.write", "states"),
])
def test_an_os_error_on_an_output_path_is_one_line_after_the_report_and_exits_2(monkeypatch, tmp_path, args,
                                                                                   target, shows):
    _refuse_writes(monkeypatch, target)
    code, out, err = _hwm(*(str(a).format(tmp=tmp_path) for a in args))
    assert code == 2, out + err
    assert shows in out  # the report came out before the write failed
    assert "Traceback" not in out + err
    [line] = err.strip().splitlines()[-1:]
    assert line.startswith("error: cannot write ") and line.endswith(": Read-only file system"), err
