"""The command line contract: exit statuses, reports, saved traces and replay."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.run import ENGINES, CheckRequest, run
from hwm.checker.verdict import tour_config, witness_needs
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.model.variant import resolve
from hwm.properties.catalogue import CATALOGUE, SOMETIMES
from hwm.properties.protocol import PRESETS
from hwm.properties.trace import load
from tests.pinned import PINNED

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def hwm(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    # A JSON report is read from stdout alone: progress lines (a slow run's) go to stderr.
    return result.exit_code, result.stdout if "--json" in args else result.output


def test_tour_matches_the_catalogue_and_saves_every_shortest_counterexample(tmp_path):
    code, out = hwm("check", "--save", tmp_path / "out", "--junit", tmp_path / "tour.xml")
    assert code == 0, out
    for name in PRESETS:
        assert name in out
    # The JUnit file means what exit 0 means: every expected violation seen is a passing case.
    import xml.etree.ElementTree as ET
    root = ET.parse(tmp_path / "tour.xml").getroot()
    seen = int(out.split(" of ")[-2].split("(")[-1])  # "(N of N expected violations seen)"
    assert root.get("failures") == "0" and int(root.get("tests")) > seen > 0
    assert sum(c.find("system-out") is not None for c in root.iter("testcase")) == seen
    assert "raft-noop (log ≤ 2)" in out and "THIN" not in out
    assert "every preset behaves as the catalogue expects" in out
    saved = sorted(p.name for p in (tmp_path / "out").glob("*.json"))
    expected = sorted(f"{name}.{prop}.json" for name, p in PRESETS.items() for prop in p.breaks)
    assert saved == expected
    assert sorted(p.name for p in (tmp_path / "out").glob("*.html")) == [e[:-5] + ".html" for e in expected]
    figure_8 = load(tmp_path / "out" / "raft-any-generation-commit.ReadNeverTruncated.json")
    assert len(figure_8.steps) == PINNED[("raft-any-generation-commit", 3, 4, 1, 1, "rpc", True)]["lengths"]["ReadNeverTruncated"]


def test_tour_reports_a_preset_that_misbehaves(monkeypatch, tmp_path):
    # A catalogue that wrongly calls a broken preset safe must make the tour fail.
    from dataclasses import replace
    import hwm.properties.protocol as protocol
    # Two presets are enough to show it (the whole tour runs in the test above).
    broken = {name: protocol.PRESETS[name] for name in ("raft", "kip101")}
    broken["kip101"] = replace(broken["kip101"], broken=False, breaks=frozenset())
    for module in ("hwm.checker.run", "hwm.checker.verdict", "hwm.checker.expectations", "hwm.check"):
        monkeypatch.setattr(f"{module}.PRESETS", broken)
    monkeypatch.setattr("hwm.cli.PRESETS", broken)
    code, out = hwm("check", "--jobs", 1, "--save", tmp_path, "--junit", tmp_path / "tour.xml")
    assert code == 1
    assert "kip101: unexpectedly violates" in out
    import xml.etree.ElementTree as ET  # the JUnit file fails where the tour does: kip101's cases
    suites = {s.get("name"): s for s in ET.parse(tmp_path / "tour.xml").getroot()}
    assert suites["raft"].get("failures") == "0" and int(suites["kip101"].get("failures")) > 0


def test_check_one_safe_preset():
    code, out = hwm("check", "--protocol", "raft")
    assert code == 0
    assert "✓ ReadNeverTruncated" in out and "6,936 distinct states" in out
    assert "bounded: exploration was cut by max_crashes, max_generation, max_log" in out


def test_check_a_broken_preset_prints_and_saves_its_counterexample(tmp_path):
    code, out = hwm("check", "--protocol", "raft-any-generation-commit", "--save", tmp_path)
    assert code == 1
    assert "✗ ReadNeverTruncated" in out and "violated in 11 steps" in out
    path = tmp_path / "raft-any-generation-commit.ReadNeverTruncated.json"
    assert load(path).expect == "violation"
    code, out = hwm("replay", path)
    assert code == 0, out
    assert "violation of ReadNeverTruncated at step 11" in out


def test_flags_on_the_command_line_and_json():
    code, out = hwm("check", "--protocol", "raft,commit=any-generation", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["protocol"] == "raft+commit=any-generation"
    assert report["distinct_states"] == PINNED[("raft-any-generation-commit", 3, 4, 1, 1, "rpc", True)]["states"]
    assert report["properties"]["ReadNeverTruncated"]["length"] == 11


def test_a_witness_the_bounds_rule_out_is_reported_and_does_not_fail():
    code, out = hwm("check", "--protocol", "raft", "--max-crashes", 0)
    assert code == 0, out
    assert "CrashAndRejoin               impossible at these bounds (needs max_crashes >= 1)" in out
    assert "UNREACHED" not in out
    code, out = hwm("check", "--protocol", "raft", "--max-crashes", 0, "--json")
    assert json.loads(out)["impossible_witnesses"] == {"CrashAndRejoin": "max_crashes >= 1"}


def test_a_possible_witness_left_unreached_fails_the_check(monkeypatch):
    # Plant a witness check that never fires: the bounds allow a crash and rejoin, so unreached is a failure.
    from dataclasses import replace
    planted = tuple(replace(p, check=lambda before, after: None) if p.name == "CrashAndRejoin" else p
                    for p in CATALOGUE)
    local = ENGINES["local"]
    monkeypatch.setitem(ENGINES, "local", lambda model, name, request, progress: local(
        model, name, replace(request, properties=planted), progress))
    code, out = hwm("check", "--protocol", "raft")
    assert code == 1, out
    assert "CrashAndRejoin               UNREACHED" in out


def test_the_tour_does_not_fail_when_the_bounds_rule_a_witness_out(tmp_path, monkeypatch):
    # No crash rules out CrashAndRejoin (not a failure) and the crash-loses-a-read bugs: those are
    # named as not shown, exit 3, never counted as caught. One safe and one broken preset of each
    # system show it (the whole tour runs in the first test of this file).
    import hwm.properties.protocol as protocol
    chosen = {name: protocol.PRESETS[name] for name in ("raft", "kip101", "raft-truncate-to-own-hwm", "zab",
                                                          "bookkeeper", "kafka", "kafka-kip101")}
    for module in ("hwm.checker.run", "hwm.checker.verdict", "hwm.checker.expectations", "hwm.check", "hwm.cli"):
        monkeypatch.setattr(f"{module}.PRESETS", chosen)
    code, out = hwm("check", "--max-crashes", 0, "--save", tmp_path)
    assert code == 3, out
    assert "NOT AS EXPECTED" not in out and out.count("(1 impossible)") == len(chosen)
    assert "kip101: not shown at these bounds" in out and "every preset behaves" not in out


def test_a_thin_check_says_so_and_the_tour_gives_raft_noop_room_for_client_entries():
    code, out = hwm("check", "--protocol", "raft-noop")
    assert "THIN: no client entry is ever written: needs max_log >= 2" in out
    code, out = hwm("check", "--protocol", "raft-noop", "--max-log", 2)
    assert code == 0 and "THIN" not in out
    assert tour_config("raft-noop", Config()) == Config(max_log=2)
    assert tour_config("raft", Config()) == Config()


# Small bounds on which every witness the bounds call impossible must indeed be unreached (the
# claim is conservative: an impossible witness never fails a check, so it must never be wrong).
SMALL = [Config(servers, generation, log, crashes, network)
         for servers in (1, 2, 3) for generation in (1, 2, 3) for log in (0, 1) for crashes in (0, 1)
         for network in ("rpc", "async") if (servers, generation) != (3, 3) and (network == "rpc" or servers < 3)]


@pytest.mark.parametrize("preset", ["raft", "raft-any-election", "raft-truncate-to-own-hwm", "seed"])
def test_witnesses_called_impossible_are_never_reached(preset):
    protocol, called_impossible = PRESETS[preset].protocol, 0
    for config in SMALL:
        report = run(CheckRequest(preset), model=build_model(protocol, config))
        for p in SOMETIMES:
            needs = witness_needs(p.name, protocol, config)
            assert not (needs and report.results[p.name].found), (p.name, config.describe(), needs)
            called_impossible += bool(needs)
    assert called_impossible > 10


# On two servers a raft or ZAB voter refuses a candidate lacking an entry it holds, and both votes are
# needed: the witnesses this rules out are called impossible there, and stay unreached at larger bounds.
TWO_SERVERS = Config(2, 5, 2, 2)


@pytest.mark.parametrize("preset, impossible", [
    ("seed", {"LeaderChangeWithUncommitted"}), ("raft", {"UncommittedTruncated"}),
    ("raft-durable-hwm", {"UncommittedTruncated"}), ("raft-noop", {"UncommittedTruncated", "LeaderChangeWithUncommitted"}),
    ("zab", {"UncommittedTruncated", "LeaderChangeWithUncommitted"}),
    # A follower that acknowledges before it persists loses entries in a crash, and any server may win an
    # election: both witnesses are reached on two servers.
    ("zab-ack-before-persist", set()), ("raft-any-election", set())])
def test_two_servers_rule_out_exactly_the_witnesses_no_run_of_two_reaches(preset, impossible):
    protocol = PRESETS[preset].protocol
    called = {p.name for p in SOMETIMES if witness_needs(p.name, protocol, TWO_SERVERS)}
    assert called == impossible
    report = run(CheckRequest(preset, successors="auto"), model=build_model(protocol, TWO_SERVERS))
    assert {p.name for p in SOMETIMES if not report.results[p.name].found} == impossible
    # A variant's hooks may change the votes and commits the argument rests on: not called impossible.
    variant = resolve(f"{EXAMPLES / 'variants' / 'flexible.py'}:Flexible")[1]  # raft's rules, but a variant's
    assert not any(witness_needs(name, variant, TWO_SERVERS) for name in impossible)


def test_no_symmetry_explores_more():
    code, out = hwm("check", "--protocol", "raft", "--servers", 4, "--max-generation", 2, "--max-crashes", 0,
                    "--no-symmetry", "--json")
    assert json.loads(out)["distinct_states"] == PINNED[("raft", 4, 2, 1, 0, "rpc", False)]["states"]
    assert PINNED[("raft", 4, 2, 1, 0, "rpc", False)]["states"] > PINNED[("raft", 4, 2, 1, 0, "rpc", True)]["states"]


@pytest.mark.parametrize("args, message", [
    (["check", "--servers", 0], "--servers"),
    (["check", "--protocol", "nope"], "unknown protocol 'nope'"),
    (["check", "--protocol", "raft,commit=maybe"], "flag 'commit' cannot be 'maybe'"),
    (["check", "--protocol", "raft,colour=blue"], "unknown flag 'colour'"),
    (["check", "--network", "carrier-pigeon"], "--network"),
    (["replay"], "Missing argument"),
])
def test_bad_arguments_exit_2(args, message):
    code, out = hwm(*args)
    assert code == 2
    assert message in out


# ------------------------------------------------------------------- replay
TRACE = {
    "format": "hwm-trace/1", "title": "t", "explanation": "e", "protocol": "raft-truncate-to-own-hwm",
    "config": {"servers": 3, "max_generation": 4, "max_log": 1, "network": "rpc"},
    "property": "ReadNeverTruncated", "expect": "violation",
    "steps": [{"action": "elect", "server": "S1", "voters": ["S1", "S2"]},
              {"action": "write", "server": "S1", "value": "a"},
              {"action": "replicate", "leader": "S1", "follower": "S2"},
              {"action": "read", "server": "S1"},
              {"action": "crash", "server": "S1"},
              {"action": "restart", "server": "S1"}],
}


def write(tmp_path, data, name="t.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_replay_reproduces_and_prints_the_table(tmp_path):
    code, out = hwm("replay", write(tmp_path, TRACE))
    assert code == 0
    assert "L1 [1] h1" in out and "x1 [1] h0" in out  # S1 leads, then is down with its volatile HWM lost
    assert "^ ReadNeverTruncated: S1 removed entry 1@g1" in out


def test_replay_under_raft_holds_and_exits_0(tmp_path):
    code, out = hwm("replay", "--protocol", "raft", write(tmp_path, TRACE))
    assert code == 0 and "holds" in out


def test_replay_with_another_protocol_exits_1_on_violation(tmp_path):
    trace = dict(TRACE, protocol="raft")
    code, out = hwm("replay", "--protocol", "raft-truncate-to-own-hwm", write(tmp_path, trace))
    assert code == 1 and "violation" in out


def test_replay_outcome_that_differs_exits_1(tmp_path):
    code, out = hwm("replay", write(tmp_path, dict(TRACE, expect="holds")))
    assert code == 1 and "(expected holds)" in out


def test_replay_expect_blocked(tmp_path):
    steps = [{"action": "elect", "server": "S1", "voters": ["S1", "S2"]}, {"action": "write", "server": "S1"},
             {"action": "replicate", "leader": "S1", "follower": "S2"},
             {"action": "elect", "server": "S3", "voters": ["S2", "S3"]}]
    trace = dict(TRACE, protocol="raft", expect="blocked", property=None, steps=steps)
    code, out = hwm("replay", write(tmp_path, trace))
    assert code == 0
    assert "S2 refuses the vote: its log is more up to date" in out


@pytest.mark.parametrize("mutate, where", [
    (lambda t: "{ not json", "broken JSON at line 1"),
    (lambda t: dict(t, format="hwm-trace/9"), "field 'format'"),
    (lambda t: dict(t, steps=t["steps"][:3] + [{"action": "teleport", "server": "S1"}]), "step 4, field 'action'"),
    (lambda t: dict(t, steps=[{"action": "elect", "server": "S9", "voters": ["S1"]}]), "step 1, field 'server': no server S9"),
    (lambda t: dict(t, steps=[{"action": "write", "server": "S1"}]), "step 1, field 'action': write(S1): S1 is not a leader"),
    (lambda t: dict(t, steps=[{"action": "replicate", "leader": "S1"}]), "step 1, field 'follower'"),
    (lambda t: dict(t, steps=[{"action": "send", "from": "S1", "to": "S2"}]), "belongs to the async network"),
    (lambda t: dict(t, config={"servers": "three"}), "field 'config.servers'"),
    (lambda t: dict(t, property="Nonsense"), "field 'property'"),
    (lambda t: dict(t, protocol="paxos"), "field 'protocol'"),
])
def test_replay_rejects_invalid_traces_naming_file_step_and_field(tmp_path, mutate, where):
    path = write(tmp_path, mutate(dict(TRACE)))
    result = CliRunner().invoke(main, ["replay", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.output and where in result.output
    assert "Traceback" not in result.output


def test_graph_summary_and_export(tmp_path):
    out = tmp_path / "g.graphml"
    code, text = hwm("graph", "--protocol", "raft-any-generation-commit", "--max-crashes", 0, "--out", out)
    assert code == 0, text
    assert "states             1,111" in text  # the same classes breadth-first search counts (hwm check)
    assert "violating states   24" in text and out.stat().st_size > 0
    import networkx as nx
    g = nx.read_graphml(out)
    assert g.number_of_nodes() == 1111
    code, text = hwm("graph", "--max-states", 10)
    assert code == 2 and "more than 10 states" in text  # the bounds are refused: bad input


# ------------------------------------------------------------- output paths
# Bounds whose search would run for hours: a bad output path must be refused before it starts.
HUGE = ["--servers", 9, "--max-generation", 99, "--max-log", 9]


@pytest.mark.parametrize("args, message", [
    (["graph", *HUGE, "--out", "{tmp}/missing/g.graphml"], "directory {tmp}/missing does not exist"),
    (["graph", *HUGE, "--out", "{tmp}/g.txt"], "must end in .dot, .svg, .graphml, .gexf, .json"),
    (["graph", *HUGE, "--out", "{tmp}"], "must end in"),
    (["check", "--protocol", "raft", *HUGE, "--save", "/dev/null/x"], "/dev/null is not a directory"),
    (["check", *HUGE, "--save", "{tmp}/file"], "{tmp}/file exists and is not a directory"),
])
def test_bad_output_paths_exit_2_before_any_search(tmp_path, args, message):
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(main, [str(a).format(tmp=tmp_path) for a in args])
    assert result.exit_code == 2, result.output
    assert message.format(tmp=tmp_path) in result.output and "Traceback" not in result.output


def test_the_tour_refuses_an_unwritable_default_directory(tmp_path, monkeypatch):
    (tmp_path / "hwm-out").write_text("")  # a file where the tour's directory should go
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", *map(str, HUGE)])
    assert result.exit_code == 2 and "give --save DIR" in result.output, result.output


def test_the_tour_saves_each_run_under_its_bounds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # One tour: its three runs' bounds differ (the partition presets' partition, the lease presets'
    # second entry), so each lands in its own folder; a second tour would only repeat the naming.
    code, out = hwm("check", "--max-crashes", 0, "--max-generation", 2)
    assert code == 3, out  # two generations show some bugs, not all: not a pass
    # The bounds the user left alone keep each preset's own: the partition presets' partition
    # (and the lease presets' second entry) show their bugs, as at the default bounds.
    shown = out.split("NOT SHOWN")[1]
    assert "raft-lease-reads-without-check-quorum" not in shown and "controller-fencing" not in shown, out
    assert sorted(p.name for p in (tmp_path / "hwm-out").iterdir()) == [
        "s3-g2-l1-c0-rpc", "s3-g2-l1-c0-rpc-p1", "s3-g2-l2-c0-rpc-p1"]
    assert "hwm-out/s3-g2-l1-c0-rpc/" in out


def test_a_bound_the_user_gives_is_theirs_and_the_others_keep_each_presets_tour_value():
    given = frozenset({"max_generation"})
    lease = "raft-lease-reads-without-check-quorum"
    assert tour_config(lease, Config(max_generation=2), given) == Config(max_generation=2, max_log=2, max_crashes=0,
                                                                         max_partitions=1)
    assert tour_config(lease, Config(max_partitions=0), frozenset({"max_partitions"})).max_partitions == 0
    assert tour_config("kafka", Config(max_generation=4), given).max_generation == 4  # typed: the user's
    assert tour_config("kafka", Config(max_log=2), frozenset({"max_log"})) == Config(max_generation=3, max_log=2)
    assert tour_config("kafka", Config()) == Config(max_generation=3)  # nothing typed: the tour's own
    assert tour_config("kafka", Config(max_log=2)) == Config(max_log=2)  # a Config alone: every bound chosen


# ------------------------------------------------------------------- Ctrl-C
def deep_enough(progress: bytes, depth: int = 8) -> bool:
    import re
    return any(int(d) >= depth for d in re.findall(rb"depth (\d+)", progress))


def test_ctrl_c_prints_the_partial_report_and_exits_130():
    """A real SIGINT to a real `hwm check` whose search would take minutes: once the progress line
    shows the search running (stderr is a terminal, so it is drawn), Ctrl-C stops it."""
    import os, pty, select, signal, subprocess, sys, time
    master, slave = pty.openpty()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    command = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')", "check",
               "--protocol", "raft", "--servers", "4", "--max-generation", "4", "--max-log", "2",
               "--successors", "reference"]  # minutes of search, whether or not the compiled kernels are built
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave, cwd=root, text=True,
                               env=dict(os.environ, PYTHONPATH=root))
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 120
    try:
        # Stop it once the search is past the depth where EntryRead shows (a loaded machine may
        # draw the first progress line before it).
        while not deep_enough(seen) and time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                seen += os.read(master, 4096)
        assert deep_enough(seen), seen
        assert b" s  depth " in seen  # the elapsed time leads the progress line
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    assert process.returncode == 130, out
    assert "INTERRUPTED: Ctrl-C stopped the search" in out and "Aborted" not in out
    explored = int(out.split("explored ")[1].split(" distinct")[0].replace(",", ""))
    assert explored > 0
    assert "✓ EntryRead" in out  # what the explored part showed is reported
    # ...and nothing it did not finish checking is called held, nor the stop called a bound's cut.
    assert "? ReadNeverTruncated" in out and "✓ ReadNeverTruncated" not in out and "bounded:" not in out


# One process under -m deep (7 CPU s of the reference backend before the first row): the default run
# interrupts the tour with its workers, where Ctrl-C must reach every process of the group.
@pytest.mark.parametrize("jobs", [pytest.param(1, marks=pytest.mark.deep), 2])
def test_ctrl_c_during_the_tour_reports_the_presets_that_finished_and_exits_130(jobs):
    """Ctrl-C at a terminal reaches the whole foreground process group (the tour and its workers):
    once one preset has finished, the tour stops, prints its row, and names the presets it did not check."""
    import os, signal, subprocess, sys, time
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    command = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')", "check",
               "--jobs", str(jobs), "--successors", "reference"]  # a tour long enough to interrupt
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root, text=True,
                               env=dict(os.environ, PYTHONPATH=root), start_new_session=True)
    try:
        seen, deadline = "", time.monotonic() + 120
        while "tour: 1/" not in seen and time.monotonic() < deadline:  # stderr is a pipe: one line per preset
            seen += process.stderr.readline()
        assert "tour: 1/" in seen, seen
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, out + err
    finished = seen.split("tour: 1/")[1].split(" ")[1].rstrip(":")
    assert "INTERRUPTED: Ctrl-C stopped the tour" in out and "Traceback" not in err and "Aborted" not in err
    assert f"{finished} " in out.split("INTERRUPTED")[0]  # its row is in the partial table
    assert "not checked: " in out and "raft" in out.split("not checked: ")[1]


def _hwm_process(*args):
    import os, subprocess, sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.Popen([sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root, text=True,
                            env=dict(os.environ, PYTHONPATH=root), start_new_session=True)


def _terminate_once(process, shown: str) -> tuple[str, str, str]:
    """SIGTERM to the process alone (as `kill PID` or a CI runner's cancel sends it) once stderr shows
    `shown`; what it had written before, and its stdout and stderr after."""
    import os, signal, time
    try:
        seen, deadline = "", time.monotonic() + 120
        while shown not in seen and time.monotonic() < deadline:
            seen += process.stderr.readline()
        assert shown in seen, seen
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return seen, out, err


def test_sigterm_ends_a_check_as_ctrl_c_does_with_the_partial_report_and_exit_130():
    process = _hwm_process("check", "--protocol", "raft", "--servers", "4", "--max-generation", "4", "--max-log", "2",
                           "--successors", "reference", "--progress", "always", "--progress-interval", "0.2")
    _, out, err = _terminate_once(process, "depth ")
    assert process.returncode == 130, out + err
    assert "INTERRUPTED: SIGTERM stopped the search" in out and "Traceback" not in err
    assert "? ReadNeverTruncated" in out and "✓ ReadNeverTruncated" not in out


def test_sigterm_ends_the_tour_with_the_rows_that_finished_and_exit_130():
    process = _hwm_process("check", "--jobs", "2", "--successors", "reference")
    seen, out, err = _terminate_once(process, "tour: 1/")
    assert process.returncode == 130, out + err
    finished = seen.split("tour: 1/")[1].split(" ")[1].rstrip(":")
    assert "INTERRUPTED: SIGTERM stopped the tour" in out and "Traceback" not in err
    assert f"{finished} " in out.split("INTERRUPTED")[0]  # its row is in the partial table


def test_the_progress_line_shows_elapsed_time_rate_and_growth():
    import io
    from hwm.render import Progress
    progress = Progress("checking raft", stream=io.StringIO(), enabled=True)
    first = progress.line({"depth": 3, "states": 1000, "frontier": 400, "states_per_second": 2000, "elapsed": 0.5})
    second = progress.line({"depth": 4, "states": 4000, "frontier": 900, "states_per_second": 2000, "elapsed": 2.0})
    assert first == "checking raft: 0 s  depth 3  states 1,000  frontier 400  2,000 states/s"
    assert second == "checking raft: 2 s  depth 4  states 4,000  frontier 900  2,000 states/s  +2,000 new/s"
    assert progress.line({"depth": 9, "states": 4100, "states_per_second": 30, "elapsed": 125.0}).startswith(
        "checking raft: 2 min 05 s  depth 9  states 4,100  30 states/s  +1 new/s")


# ------------------------------------------------------- successor backends
def test_successors_reference_and_fast_give_the_same_verdicts_and_lengths():
    """The truncate-to-own-hwm pin (violations and witnesses) on both backends; set-up apart from search."""
    reports = {}
    for successors in ("reference", "fast"):
        code, out = hwm("check", "--protocol", "raft-truncate-to-own-hwm", "--servers", 2, "--max-generation", 1,
                        "--network", "async", "--successors", successors, "--json")
        assert code == 1
        reports[successors] = report = json.loads(out)
        assert report["successors"] == successors and report["setup_seconds"] >= 0
    pin = PINNED[("raft-truncate-to-own-hwm", 2, 1, 1, 1, "async", True)]
    for report in reports.values():
        assert report["distinct_states"] == pin["states"] and report["transitions"] == pin["transitions"]
        assert {n: p["length"] for n, p in report["properties"].items() if p["length"]} == pin["lengths"]
    strip = lambda r: {k: v for k, v in r.items() if k not in ("seconds", "setup_seconds", "successors")}
    assert strip(reports["fast"]) == strip(reports["reference"])
    code, out = hwm("check", "--protocol", "raft", "--servers", 2, "--max-generation", 2, "--successors", "fast")
    assert "successors fast" in out and "set-up " in out and "before the search" in out


@pytest.mark.parametrize("args, message", [
    (["--successors", "compiled"], "'compiled' is not one of 'auto', 'reference', 'fast'"),
    (["--protocol", "raft", "--servers", 8, "--successors", "fast"],
     "--successors fast: raft: the fast backend handles up to 7 servers, not 8; use --successors reference"),
    (["--servers", 8, "--successors", "fast"], "--successors fast: seed: the fast backend handles up to 7 servers"),
    (["--protocol", "raft", "--engine", "simulation", "--successors", "fast"], "the simulation walks the model"),
])
def test_successors_that_cannot_run_exit_2_naming_why(args, message):
    code, out = hwm("check", *args)
    assert code == 2
    assert message in out
