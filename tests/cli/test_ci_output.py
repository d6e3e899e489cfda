"""What a CI job reads of `hwm check`: no ✓ for an unfinished search, no traceback on an output
path's OS error, JUnit XML and progress lines in logs."""

import errno
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.check import describe_report
from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS


def _raft(**kwargs):
    return run(CheckRequest("raft", **kwargs), model=build_model(PRESETS["raft"].protocol, Config()))


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
ROOT = Path(__file__).resolve().parents[2]


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


def test_a_junit_file_that_cannot_be_written_is_named_as_given_not_its_temporary_file(monkeypatch, tmp_path):
    def refuse(self, target):  # the rename onto the file fails, as on a full or read-only disk
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "replace", refuse)
    junit = tmp_path / "seed.xml"
    code, out, err = _hwm("check", "--protocol", "seed", "--max-generation", 2, "--max-crashes", 0,
                          "--successors", "reference", "--junit", junit)
    assert code == 2 and "✗ ReadNeverTruncated" in out, out + err  # the report came first
    assert err.strip().splitlines()[-1] == f"error: cannot write {junit}: Read-only file system", err
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_a_lasso_that_cannot_be_written_costs_one_line_after_the_liveness_report(monkeypatch, tmp_path):
    # seed's FollowersCatchUp lasso at these bounds (docs/liveness.md); only the lasso's write fails.
    from hwm.properties.trace import Trace
    save = Trace.save

    def refuse_lassos(trace, path, *args, **kwargs):
        if "FollowersCatchUp" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return save(trace, path, *args, **kwargs)

    monkeypatch.setattr(Trace, "save", refuse_lassos)
    code, out, err = _hwm("check", "--protocol", "seed", "--max-generation", 2, "--liveness", "--save", tmp_path)
    assert code == 2, out + err
    lasso = tmp_path / "seed.FollowersCatchUp.json"
    assert "✗ FollowersCatchUp" in out and f"saved to {lasso}" in out  # the report came first
    assert (tmp_path / "seed.ReadNeverTruncated.json").exists()
    assert err.strip().splitlines()[-1] == f"error: cannot write {lasso}: No space left on device", err


class _Searched(Exception):
    """Raised in place of the search: what was printed before it is what a user sees first."""


def test_bounds_that_predict_a_long_run_are_warned_of_before_the_search(monkeypatch):
    def search(*args, **kwargs):
        raise _Searched

    monkeypatch.setattr("hwm.checker.run.run", search)
    monkeypatch.setattr("hwm.checker.run.tour", search)
    bounds = ["--servers", 5, "--max-generation", 10, "--max-log", 5]
    for args in (["--protocol", "raft", *bounds], bounds):
        result = CliRunner().invoke(main, ["check", *map(str, args)])
        assert isinstance(result.exception, _Searched), result.output
        assert "warning: these bounds predict roughly 10^1" in result.stderr and " years of search" in result.stderr
    result = CliRunner().invoke(main, ["check", "--protocol", "raft"])  # the default bounds: no warning
    assert isinstance(result.exception, _Searched) and "warning" not in result.stderr


# ------------------------------------------------------------------------ JUnit XML

# The JUnit XML that CI systems read (Jenkins' junit schema, which GitLab, GitHub actions' reporters
# and Azure follow): the elements and attributes each level must, and may, carry.
SCHEMA = {
    "testsuites": ({"tests", "failures", "errors"}, {"name", "time", "skipped", "disabled"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors"},
                  {"time", "skipped", "disabled", "timestamp", "hostname", "id", "package", "file"},
                  {"testcase", "properties", "system-out", "system-err"}),
    "testcase": ({"name", "classname"}, {"time", "assertions", "status", "file", "line"},
                 {"failure", "error", "skipped", "system-out", "system-err"}),
    "failure": (set(), {"message", "type"}, set()),
    "skipped": (set(), {"message"}, set()),
    "system-out": (set(), set(), set()),
}


def _validate(element, counts=None):
    required, optional, children = SCHEMA[element.tag]
    assert required <= set(element.attrib) <= required | optional, (element.tag, element.attrib)
    for child in element:
        assert child.tag in children, (element.tag, child.tag)
        _validate(child)
    if element.tag == "testcase":
        outcomes = [c.tag for c in element if c.tag in ("failure", "error", "skipped")]
        assert len(outcomes) <= 1 and float(element.get("time")) >= 0
    if element.tag in ("testsuites", "testsuite"):
        cases = element.iter("testcase")
        cases = list(cases)
        assert int(element.get("tests")) == len(cases)
        assert int(element.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(element.get("skipped")) == sum(c.find("skipped") is not None for c in cases)


def test_the_tour_writes_junit_xml_where_a_broken_presets_expected_violation_passes(tmp_path):
    junit = tmp_path / "hwm.xml"
    code, out, _ = _hwm("check", "--max-generation", 1, "--max-crashes", 0, "--jobs", 1, "--save", tmp_path,
                        "--junit", junit)
    assert code == 3, out
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    _validate(root)
    assert root.get("failures") == "0"  # exit 3: nothing mismatched (what is not shown is skipped)
    suites = {s.get("name"): s for s in root}
    assert set(suites) == set(PRESETS)  # every preset runs on the rpc network
    # An expected violation seen passes, carrying its counterexample.
    fencing = suites["bookkeeper-recovery-without-fencing"].find("testcase[@name='ReadNeverTruncated']")
    assert fencing.find("failure") is None and fencing.find("skipped") is None
    shown = fencing.find("system-out").text
    assert shown.startswith("expected violation seen: ReadNeverTruncated violated in ")
    saved = tmp_path / "bookkeeper-recovery-without-fencing.ReadNeverTruncated.json"
    assert f"saved to {saved}" in shown and saved.exists()
    assert "  1. " in shown  # the counterexample's steps, numbered
    # Safe raft holds: no failure; kip101's bug needs a crash: skipped, saying so, never passed.
    assert all(c.find("failure") is None for c in suites["raft"])
    kip101 = suites["kip101"].find("testcase[@name='ReadNeverTruncated']").find("skipped")
    assert "not shown at these bounds (needs max_log>=1, max_crashes>=1)" in kip101.get("message")


def test_an_interrupted_tour_writes_junit_for_what_finished_and_skips_the_rest(monkeypatch, tmp_path):
    from hwm.checker.run import TourInterrupted, runnable_presets

    config = Config(max_generation=2, max_crashes=0)
    finished = [(name, run(CheckRequest(name, successors="fast"), model=build_model(PRESETS[name].protocol, config)))
                for name in ("seed", "raft")]
    unfinished = [name for name in runnable_presets(config) if name not in dict(finished)]

    def interrupted_tour(*args, **kwargs):  # Ctrl-C once seed and raft had finished
        raise TourInterrupted(finished, unfinished)

    monkeypatch.setattr("hwm.checker.run.tour", interrupted_tour)
    junit = tmp_path / "hwm.xml"
    code, out, _ = _hwm("check", "--max-generation", 2, "--max-crashes", 0, "--save", tmp_path, "--junit", junit)
    assert code == 130 and "INTERRUPTED" in out, out
    root = ET.parse(junit).getroot()
    _validate(root)
    suites = {s.get("name"): s for s in root}
    assert list(suites) == ["seed", "raft"] + unfinished
    seed = suites["seed"].find("testcase[@name='ReadNeverTruncated']")
    assert seed.find("failure") is None and "violated in" in seed.find("system-out").text  # as expected
    assert all(c.find("failure") is None and c.find("skipped") is None
               for c in suites["raft"] if c.get("name") in ("ReadNeverTruncated", "LogMatching"))
    for name in unfinished:
        cases = suites[name].findall("testcase")
        assert cases and all(c.find("skipped").get("message") == "not checked: Ctrl-C stopped the tour before "
                             "this preset" for c in cases), name
    assert {c.get("name") for c in suites["zab"]} >= {"ReadNeverTruncated", "AckedWriteNeverLost"}


# ------------------------------------------------------------- progress in CI logs


def test_progress_lines_appear_in_a_log_when_stderr_is_not_a_terminal():
    # A real process whose stderr is a pipe, as in a CI job; raft's search at three generations
    # takes several progress intervals of 0.1 s.
    command = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')", "check",
               "--protocol", "raft", "--max-generation", 3, "--progress-interval", "0.1", "--successors", "reference"]
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("checking raft: ")]
    assert progress, done.stderr
    assert "\r" not in done.stderr  # lines, not a redrawn display
    for line in progress:
        assert "depth " in line and "states/s" in line


def test_progress_never_is_silent_and_always_writes_lines_even_on_a_terminal():
    import io
    from hwm.render import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    info = {"depth": 2, "states": 10, "frontier": 3, "states_per_second": 5}
    for mode, expected in (("never", ""), ("always", "checking raft: ")):
        stream = Terminal()
        Progress("checking raft", stream, mode=mode, interval=0)(info)
        assert stream.getvalue().startswith(expected) and "\r" not in stream.getvalue()


def test_a_mistyped_preset_gets_a_did_you_mean():
    code, out, err = _hwm("check", "--protocol", "kip-101")
    assert code == 2 and "unknown protocol 'kip-101'; did you mean 'kip101'?" in err, err
    code, out, err = _hwm("check", "--protocol", "zzzz")
    assert code == 2 and "did you mean" not in err


def test_the_tour_saves_kafkas_traces_under_the_generation_they_were_found_at():
    from hwm.checker.traces import tour_directories

    directories = tour_directories(Config())
    assert directories["kip101"] == Path("hwm-out/s3-g4-l1-c1-rpc")
    assert directories["kafka-kip279"] == Path("hwm-out/s3-g3-l1-c1-rpc")  # TOUR_BOUNDS: generation <= 3
    assert tour_directories(Config(max_generation=2))["kafka-kip279"] == Path("hwm-out/s3-g2-l1-c1-rpc")


def test_replay_compare_with_another_systems_protocol_names_compare_before_any_replay(tmp_path):
    code, out, err = _hwm("replay", ROOT / "counterexamples" / "seed.json", "--html", tmp_path / "s.html",
                          "--compare", "kafka")
    assert code == 2 and "--compare kafka is a kafka protocol" in err and "--protocol" not in err, err
    assert out == ""  # refused before the replay


def test_hwm_node_with_a_model_only_preset_suggests_hwm_check_not_an_option_it_lacks():
    code, out, err = _hwm("node", "--protocol", "kafka-min-insync-1")
    assert code == 2 and "model-only" in err and "hwm check --protocol" in err and "--on model" not in err, err


def _tour_report(name: str, config: Config, drop: str | None = None):
    report = run(CheckRequest(name, successors="reference"), model=build_model(PRESETS[name].protocol, config))
    if drop is not None:  # plant a mismatch: the search "missed" this violation
        report.results[drop] = replace(report.results[drop], found=False)
    return report


def test_tour_junit_fails_exactly_where_the_tour_finds_a_mismatch():
    from hwm.checker import junit
    from hwm.checker.expectations import judge

    config = Config(max_generation=2, max_crashes=0)
    runs = [("seed", _tour_report("seed", config)), ("raft", _tour_report("raft", config)),
            ("kip101", _tour_report("kip101", config)),  # its bug needs a crash: not shown
            ("raft-any-election", _tour_report("raft-any-election", config, drop="ReadNeverTruncated"))]
    problems = judge(runs).problems
    for name, report in runs:
        suite = junit.tour_suite(name, report)
        _validate(suite)
        failed = {c.get("name") for c in suite if c.find("failure") is not None}
        assert bool(failed) == any(p.startswith(f"{name}:") for p in problems), (name, failed, problems)
        if name == "raft-any-election":
            [case] = [c for c in suite if c.get("name") == "ReadNeverTruncated"]
            assert failed == {"ReadNeverTruncated"}
            assert case.find("failure").get("type") == "expected violation missing"
            assert "needs max_generation>=2" in case.find("failure").get("message")
        if name == "seed":  # every violation expected and seen: all pass
            assert all(c.find("system-out") is not None for c in suite if c.get("name") in PRESETS["seed"].breaks)
        if name == "kip101":
            assert suite.get("failures") == "0" and int(suite.get("skipped")) > 0


def test_a_single_check_junit_still_fails_on_a_violation_as_its_exit_status_does(tmp_path):
    junit = tmp_path / "seed.xml"
    code, out, _ = _hwm("check", "--protocol", "seed", "--max-generation", 2, "--max-crashes", 0,
                        "--successors", "reference", "--junit", junit)
    assert code == 1, out
    root = ET.parse(junit).getroot()
    _validate(root)
    assert root.find(".//testcase[@name='ReadNeverTruncated']/failure") is not None
