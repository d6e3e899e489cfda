"""Every command that takes a protocol takes a variant (docs/variants.md, "Commands"), each run here on a
variant written in a folder outside the checkout: hwm check (--save, --itf, --liveness), hwm replay of
what it saved (and a variant's file that changed or went away since), hwm graph, hwm
validate, and hwm prove's refusal (hwm explore's: tests/teach/test_variants_taught.py)."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.cli import main

ROOT = Path(__file__).resolve().parents[2]
RECORDED_RAFT_NOOP = ROOT / "tests" / "checker" / "recorded_raft_noop"
SMALL = ["--max-generation", "2", "--max-crashes", "0"]

# An invariant of its own that the first read breaks, under a replication quorum of every server: its
# shortest counterexample replicates to both followers before the read (5 steps; raft's would take 4).
WATCHED = '''
    from hwm.model.variant import Variant


    def nothing_read(view):
        """no client has read an entry"""
        return f"a client read entry {min(view.reads)[0]}" if view.reads else None


    class Watched(Variant):
        base = "raft"
        invariants = {"NothingRead": nothing_read}

        def replication_quorum(self):
            return self.servers
'''


def hwm(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def watched(tmp_path) -> Path:
    path = tmp_path / "rules" / "watched.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(WATCHED))
    return path


@pytest.fixture
def flexible(tmp_path) -> Path:
    path = tmp_path / "flexible.py"
    shutil.copy(ROOT / "examples" / "variants" / "flexible.py", path)
    return path


def error_line(result) -> str:
    """The one line a refused command prints (exit 2): no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output.strip().splitlines()[-1]


def test_check_saves_a_variants_counterexample_that_replay_loads_again(watched, tmp_path, monkeypatch):
    monkeypatch.chdir(watched.parent)  # named relative to here; the trace names it by its absolute path
    out = tmp_path / "out"
    result = hwm("check", "--protocol", "watched.py:Watched", *SMALL, "--save", out, "--itf")
    assert result.exit_code == 1, result.output
    assert "✗ NothingRead                  violated in 5 steps: a client read entry 1" in result.output
    assert "explored 101 distinct states, 387 transitions" in result.output
    saved = json.loads((out / "Watched.NothingRead.json").read_text())
    assert saved["protocol"] == f"{watched}:Watched" and len(saved["variant_sha256"]) == 64
    monkeypatch.chdir(tmp_path)
    for name in ("Watched.NothingRead.json", "Watched.NothingRead.itf.json"):
        result = hwm("replay", out / name, "-q")
        assert result.exit_code == 0, result.output
        assert "violation of NothingRead at step 5: a client read entry 1 (as expected)" in result.output

    watched.write_text(watched.read_text().replace("self.servers", "2"))  # edited since: a majority again
    for name in ("Watched.NothingRead.json", "Watched.NothingRead.itf.json"):
        line = error_line(hwm("replay", out / name, "-q"))
        assert re.fullmatch(rf"error: .*{name}, field 'protocol': {watched} changed since this trace was saved "
                            rf"\(sha256 \w{{12}} then, \w{{12}} now\): replay it under the variant as it is now with "
                            rf"--protocol {watched}:Watched", line), line
    again = hwm("replay", out / "Watched.NothingRead.json", "-q", "--protocol", f"{watched}:Watched")
    assert again.exit_code == 1 and "violation of NothingRead at step 5" in again.output  # the steps still read

    watched.unlink()
    line = error_line(hwm("replay", out / "Watched.NothingRead.json"))
    assert line.endswith(f"field 'protocol': {watched}: no such file"), line


def test_liveness_and_graph_of_a_variant(flexible):
    """Q2 = 1 (FlexibleTooSmall) makes a smaller graph than raft's at the same bounds: its leader commits
    alone, so no state has a leader holding an entry above its HWM."""
    result = hwm("check", "--protocol", f"{flexible}:FlexibleTooSmall", *SMALL, "--liveness")
    assert result.exit_code == 1, result.output  # ReadNeverTruncated, as in docs/variants.md
    assert "liveness: 481 concrete states, 2,010 transitions" in result.output
    assert "! LeaderHoldsUncommittedEntry  UNREACHED" in result.output
    assert "✓ LeaderCommitsAlone           witnessed in 2 steps" in result.output
    graphs = {spec: hwm("graph", "--protocol", spec, *SMALL) for spec in (f"{flexible}:FlexibleTooSmall", "raft")}
    assert all(r.exit_code == 0 for r in graphs.values()), graphs
    numbers = {spec: re.findall(r"^(states|transitions|violating states) +(\d+)", r.output, re.M)
               for spec, r in graphs.items()}
    assert numbers == {f"{flexible}:FlexibleTooSmall": [("states", "89"), ("transitions", "273"),
                                                        ("violating states", "6")],
                       "raft": [("states", "131"), ("transitions", "393"), ("violating states", "0")]}


def test_validate_judges_a_recorded_run_with_the_variants_rules(tmp_path):
    """hwm's own raft-noop cluster: its leader took HWM 1 once one follower stored the no-op. A variant
    of raft-noop that commits on every server (Q2 = N) has no step to it; one whose Q2 is still two does."""
    path = tmp_path / "all_copies.py"
    path.write_text(textwrap.dedent('''
        from hwm.model.variant import Variant

        class AllCopies(Variant):
            base = "raft-noop"

            def replication_quorum(self):
                return self.servers

        class TwoCopies(AllCopies):
            def replication_quorum(self):
                return 2
    '''))
    refused = hwm("validate", RECORDED_RAFT_NOOP, "--protocol", f"{path}:AllCopies")
    assert refused.exit_code == 1, refused.output
    assert re.search(r"S2.jsonl: no model step explains event 6: .*\"hwm\": 1", refused.output), refused.output
    accepted = hwm("validate", RECORDED_RAFT_NOOP, "--protocol", f"{path}:TwoCopies")
    assert accepted.exit_code == 0 and "valid: 6 events" in accepted.output, accepted.output


def test_prove_refuses_a_variant_by_its_hooks(flexible):
    line = error_line(hwm("prove", "--protocol", f"{flexible}:FlexibleTooSmall"))
    assert line == (f"Error: hwm prove cannot check FlexibleTooSmall: FlexibleTooSmall is a variant, and the z3 "
                    f"encoding has the flags' rules only, not its election_quorum, replication_quorum (check it "
                    f"with hwm check --protocol {flexible}:FlexibleTooSmall)")


def test_what_a_variant_with_its_own_fields_and_actions_cannot_do_is_one_line(tmp_path):
    """PreVote (examples/variants/prevote.py) adds a field and actions: ITF carries them, and hwm's own
    replicas have no such field or action (hwm replay --on impl refuses it before the first step)."""
    shutil.copy(ROOT / "examples" / "variants" / "prevote.py", tmp_path / "prevote.py")
    trace = tmp_path / "timeout.json"
    trace.write_text(json.dumps({
        "format": "hwm-trace/1", "protocol": f"{tmp_path / 'prevote.py'}:PreVote", "expect": "holds",
        "config": {"servers": 3, "max_generation": 2, "max_log": 1, "max_crashes": 0, "network": "rpc"},
        "steps": [{"action": "elect", "server": "S1", "voters": ["S1", "S2"]},
                  {"action": "timeout", "server": "S2"}]}))
    assert hwm("replay", trace, "-q").exit_code == 0
    # ITF carries its field after the raft model's variables, and its action's name: the file replays.
    written = hwm("replay", trace, "-q", "--itf", tmp_path / "out.itf.json")
    assert written.exit_code == 0, written.output
    doc = json.loads((tmp_path / "out.itf.json").read_text())
    assert doc["vars"][8:] == ["heard"] and doc["states"][2]["#meta"]["action"] == "timeout(S2)"
    assert doc["states"][1]["heard"] == {"#map": [["S1", False], ["S2", True], ["S3", False]]}, doc["states"][1]
    assert doc["states"][2]["heard"]["#map"][1] == ["S2", False]
    again = hwm("replay", tmp_path / "out.itf.json", "-q")
    assert again.exit_code == 0 and "[model]: holds (as expected)" in again.output, again.output
    line = error_line(hwm("replay", trace, "-q", "--on", "impl"))
    assert line == (f"error: {trace}, field 'protocol': PreVote adds fields (heard) and actions (timeout, step_down) "
                    f"to the raft model, which hwm's own replicas do not have; use the model (--on model)"), line


def test_the_tour_checks_a_variant_with_its_own_invariants(watched, flexible, tmp_path, monkeypatch):
    """hwm check --variant: every preset, then each variant, at its base preset's tour bounds, expected to
    hold as a safe preset; a variant's own invariant gets a column of its own."""
    monkeypatch.chdir(watched.parent)
    out = tmp_path / "tour"
    result = hwm("check", "--variant", "watched.py:Watched", "--variant", f"{flexible}:Flexible", "--servers", "3",
                 "--max-generation", "1", "--max-crashes", "0", "--jobs", "1", "--progress", "never", "--save", out)
    assert result.exit_code == 1, result.output
    rows = {line.split()[0]: line.split() for line in result.output.splitlines()
            if line.split() and line.split()[0] in ("preset", "raft", "Watched", "Flexible")}
    column = rows["preset"].index("NothingRead")
    assert rows["Watched"][1] == "13" and rows["Watched"][column] == "✗5"  # every server must store an entry
    assert rows["Flexible"][1] == rows["raft"][1] == "17" and rows["Flexible"][column] == "-"  # Q1 = Q2 = 2 of 3
    assert "NOT AS EXPECTED:\n  Watched: unexpectedly violates NothingRead (a variant in the tour is expected to " \
           "hold)\n" in result.output
    assert "Flexible:" not in result.output.split("NOT AS EXPECTED:")[1]
    saved = json.loads((out / "Watched.NothingRead.json").read_text())
    assert saved["protocol"] == f"{watched}:Watched"


def test_a_variant_takes_its_base_presets_tour_bounds(tmp_path):
    from hwm.checker.verdict import tour_config
    from hwm.model.state import Config

    path = tmp_path / "noop.py"
    path.write_text("from hwm.model.variant import Variant\nclass Noop(Variant):\n    base = 'raft-noop'\n")
    assert tour_config(f"{path}:Noop", Config()) == tour_config("raft-noop", Config()) != Config()  # a log slot more


@pytest.mark.parametrize("args, expected", [
    (["--variant", "raft"], "Error: --variant raft: the tour checks every preset already; --variant takes a "
                            "variant's name (file.py:Name), without flags"),
    (["--variant", "{flexible}:Flexible", "--protocol", "raft"],
     "Error: --variant adds a variant to the tour; to check one alone, give it as --protocol"),
])
def test_what_the_tours_variant_option_refuses(flexible, args, expected):
    assert error_line(hwm("check", *[a.format(flexible=flexible) for a in args])) == expected


def test_every_commands_protocol_option_takes_a_variant(flexible, monkeypatch):
    """One parameter type reads every command's --protocol (hwm/params.py): a variant's file, named from
    where the command runs, becomes the absolute spec every process and saved trace use."""
    import click

    from hwm.properties.protocol import Protocol, resolve

    monkeypatch.chdir(flexible.parent)
    ctx = click.Context(main)
    commands = {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}
    options = {name: param for name, command in commands.items() for param in command.params
               if isinstance(param, click.Option) and "--protocol" in param.opts}
    assert {"check", "graph", "replay", "explore", "validate", "prove", "test", "node", "cluster"} <= set(options)
    for name, option in options.items():
        value = option.process_value(click.Context(commands[name]), "flexible.py:Flexible")
        protocol = value if isinstance(value, Protocol) else resolve(value)[1]  # hwm controller resolves it
        assert type(protocol).spec == f"{flexible}:Flexible", name


def test_hwm_test_steps_a_nodes_changes_against_the_variants_rules(tmp_path):
    """hwm test --protocol V steps each observed change against V's model (bridge/maelstrom/validation.py's
    ModelSteps): a leader of three that takes HWM 1 with its entry on two servers is a step of raft's
    model, and none of a variant's whose Q2 is every server, until the third holds it too."""
    from hwm.bridge.maelstrom.validation import ModelSteps

    path = tmp_path / "all_copies.py"
    path.write_text("from hwm.model.variant import Variant\nclass AllCopies(Variant):\n"
                    "    def replication_quorum(self):\n        return self.servers\n")

    def seen(step, node, role, generation, log=(), hwm=0):
        return {"step": step, "cause": f"deliver#{step}", "node": node, "alive": True, "generation": generation,
                "role": role, "log": [list(entry) for entry in log], "hwm": hwm}

    elected = [seen(1, "n1", "candidate", 1), seen(2, "n2", "follower", 1), seen(3, "n1", "leader", 1),
               seen(4, "n3", "follower", 1), seen(5, "n1", "leader", 1, log=[(1, 1)]),
               seen(6, "n2", "follower", 1, log=[(1, 1)])]

    def findings(spec, run):
        steps = ModelSteps(spec, ["n1", "n2", "n3"])
        return [f.text for f in map(steps.observed, run) if f is not None]

    on_two = elected + [seen(7, "n1", "leader", 1, log=[(1, 1)], hwm=1)]
    assert findings("raft", on_two) == []
    [finding] = findings(f"{path}:AllCopies", on_two)
    assert "after deliver#7, n1 showed leader g1 log=[1] hwm=1: no step of AllCopies's model" in finding, finding
    on_three = elected + [seen(7, "n3", "follower", 1, log=[(1, 1)]),
                          seen(8, "n1", "leader", 1, log=[(1, 1)], hwm=1)]
    assert findings(f"{path}:AllCopies", on_three) == []


BAD_HOOK = "from hwm.model.variant import Variant\nclass V(Variant):\n" \
           "    def may_commit(self, index, log, generation):\n        return 1\n"
HOOK_FAILED = r"{path}:3: V.may_commit returned 1 \(int\), expected bool, at replicate\(S\d, S\d\) from state"


@pytest.mark.parametrize("command, prefix", [
    (["graph", "--max-generation", "2", "--max-crashes", "0"], "error: "),
    (["validate", RECORDED_RAFT_NOOP], "hwm validate: "),
])
def test_a_hook_that_fails_in_another_command_is_one_line(tmp_path, command, prefix):
    """As in hwm check (test_variants.py): never a traceback, never a graph or verdict of part of the states."""
    path = tmp_path / "bad.py"
    path.write_text(BAD_HOOK)
    result = hwm(command[0], "--protocol", f"{path}:V", *command[1:])
    line = error_line(result)
    assert re.fullmatch(re.escape(prefix) + HOOK_FAILED.format(path=re.escape(str(path))) + ".*", line), line
    assert "states" not in result.output.split(line)[0]  # no summary of the part it explored
