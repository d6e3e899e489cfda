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
