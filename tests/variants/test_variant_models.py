"""Variants at the model level (docs/variants.md, "A model"; model/variant_model.py): fields and
actions of their own, further guards and effects on the base's actions, liveness properties, their
pictures, and every bad input named by file, line, state and action with exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections import deque
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.liveness import FAIR_ACTIONS, check_liveness, liveness_of
from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.model.variant_model import read_value, value_bytes
from hwm.properties.protocol import resolve

ROOT = Path(__file__).resolve().parents[2]
PREVOTE = ROOT / "examples" / "variants" / "prevote.py"
SMALL = Config(servers=4, max_generation=1, max_crashes=0)
SMALL_ARGS = ["--servers", "4", "--max-generation", "1", "--max-crashes", "0"]


def hwm(*args: str):
    return CliRunner().invoke(main, list(args))


def model_of(name: str, config: Config = SMALL):
    _, protocol = resolve(f"{PREVOTE}:{name}")
    return build_model(protocol, config)


def reachable(model) -> list:
    """Every reachable state (no symmetry), breadth first."""
    start = model.initial_state()
    seen, queue, out = {start}, deque([start]), []
    while queue:
        state = queue.popleft()
        out.append(state)
        for _, after in model.successors(state):
            if after not in seen:
                seen.add(after)
                queue.append(after)
    return out


# ------------------------------------------------------------------ pinned
def test_prevote_is_pinned():
    report = run(CheckRequest("PreVote"), model=model_of("PreVote"))
    assert (report.states, report.transitions) == (181, 797)
    assert not report.violated
    assert report.results["FollowerTimesOut"].length == 2
    assert [str(s) for s in report.results["FollowerTimesOut"].steps] == ["elect(S1, {S1,S2,S3})", "timeout(S2)"]
    report = run(CheckRequest("PreVoteWithoutCheckQuorum"), model=model_of("PreVoteWithoutCheckQuorum"))
    assert (report.states, report.transitions) == (117, 636)


@pytest.mark.deep
def test_prevote_at_two_generations_is_pinned():
    config = Config(servers=4, max_generation=2, max_crashes=0)
    report = run(CheckRequest("PreVote"), model=model_of("PreVote", config))
    assert (report.states, report.transitions) == (2640, 15288)
    assert not report.violated
    two = run(CheckRequest("PreVote", workers=2), model=model_of("PreVote", config))
    assert (two.states, two.transitions) == (2640, 15288)
    plain = run(CheckRequest("PreVote", symmetry=False), model=model_of("PreVote", config))
    assert (plain.states, plain.transitions) == (49952, 299748)


def test_the_liveness_of_prevote_is_pinned():
    report = check_liveness(model_of("PreVote"), "PreVote")
    assert (report.states, report.transitions) == (2670, 12564)
    assert report.fairness == ("replicate", "restart", "step_down")
    assert not report.results["UnheardLeaderStepsDown"].found
    witness = report.results["UnheardLeaderStepsDownOpens"]
    assert len(witness.steps) == 2 and witness.finding == "S1 leads generation 1, but only 2 of 4 servers hear from it"


def test_without_check_quorum_a_leader_nobody_hears_leads_for_ever():
    report = check_liveness(model_of("PreVoteWithoutCheckQuorum"), "PreVoteWithoutCheckQuorum")
    assert (report.states, report.transitions) == (1953, 10352)
    lasso = report.results["UnheardLeaderStepsDown"]
    assert lasso.found and (lasso.stem, lasso.cycle) == (3, 6)
    assert [str(s) for s in lasso.steps] == [
        "elect(S1, {S1,S2,S3,S4})", "timeout(S2)", "timeout(S3)", "timeout(S4)", "replicate(S1, S2)", "timeout(S2)",
        "replicate(S1, S3)", "timeout(S3)", "replicate(S1, S4)"]


def test_check_quorum_holds_only_because_its_step_down_is_fair():
    model = model_of("PreVote")
    report = check_liveness(model, "PreVote", fair=FAIR_ACTIONS)
    assert report.results["UnheardLeaderStepsDown"].found
    properties, fair = liveness_of(model)
    assert fair == FAIR_ACTIONS + ("step_down",) and properties[-1].name == "UnheardLeaderStepsDown"


# ---------------------------------------------------- states and fingerprints
def test_fields_enter_the_fingerprint_and_symmetry_permutes_them_with_their_servers():
    model = model_of("PreVote")
    elected = model.apply(model.initial_state(), ("elect", 0, (0, 1, 2)))
    timed_out = model.apply(elected, ("timeout", 1))
    assert timed_out.servers[1].heard is False and elected.servers[1].heard is True
    assert model.fingerprint(elected) != model.fingerprint(timed_out)  # they differ in the field alone
    servers = list(timed_out.servers)
    servers[1], servers[2] = servers[2], servers[1]  # S2 and S3 swapped (the leader's match is all 0)
    swapped = timed_out._replace(servers=tuple(servers))
    assert swapped != timed_out
    assert model.fingerprint(swapped) == model.fingerprint(timed_out)
    assert model.fingerprint(swapped, symmetry=False) != model.fingerprint(timed_out, symmetry=False)


def test_every_reachable_state_decodes_to_itself_and_the_guards_agree_with_the_actions():
    model = model_of("PreVote")
    states = reachable(model)
    assert len(states) == 2670  # the liveness graph's concrete states
    table = model.action_table()
    assert ("timeout", 3) in table and ("step_down", 0) in table
    for state in states:
        assert model.decode(model.encode(state, symmetry=False)) == state
        enabled = set(model.actions(state))
        for action in table:
            assert (model.why_not(state, action) is None) == (action in enabled), (action, state.describe())


def test_fingerprints_are_the_same_in_another_process():
    model = model_of("PreVote")
    state = model.apply(model.apply(model.initial_state(), ("elect", 0, (0, 1, 2))), ("timeout", 2))
    script = (f"from hwm.properties.protocol import resolve; from hwm.model.registry import build_model; "
              f"from hwm.model.state import Config; m = build_model(resolve({str(PREVOTE) + ':PreVote'!r})[1], "
              f"Config(servers=4, max_generation=1, max_crashes=0)); "
              f"s = m.apply(m.apply(m.initial_state(), ('elect', 0, (0, 1, 2))), ('timeout', 2)); "
              f"print(m.fingerprint(s), m.fingerprint(s, symmetry=False))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.split()
    assert out == [str(model.fingerprint(state)), str(model.fingerprint(state, symmetry=False))]


@pytest.mark.parametrize("value", [None, False, True, 0, 255, 256, -1, 2**40, "", "pre-candidate", (),
                                   (1, ("S2", None), True)])
def test_field_values_read_back_as_written(value):
    out: list[int] = []
    value_bytes(value, out)
    assert read_value(iter(out)) == value and type(read_value(iter(out))) is type(value)


def test_field_values_that_differ_encode_differently():
    values = [None, False, True, 0, 1, "", "0", (), (0,), ((),)]
    encoded = []
    for value in values:
        out: list[int] = []
        value_bytes(value, out)
        encoded.append(bytes(out))
    assert len(set(encoded)) == len(values)


# --------------------------------------------------------- the command line
def test_a_lasso_of_a_variant_saves_replays_and_draws_its_field_and_action(tmp_path):
    spec = f"{PREVOTE}:PreVoteWithoutCheckQuorum"
    result = hwm("check", "--protocol", spec, *SMALL_ARGS, "--liveness", "--save", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert "✗ UnheardLeaderStepsDown       violated (lasso 3+6 steps)" in result.output
    trace = tmp_path / "PreVoteWithoutCheckQuorum.UnheardLeaderStepsDown.json"
    steps = json.loads(trace.read_text())["steps"]
    assert steps[1] == {"action": "timeout", "server": "S2"}
    result = hwm("replay", str(trace))
    assert result.exit_code == 0, result.output
    assert "2  timeout(S2)" in result.output and "F1 [] h0 heard=True" in result.output
    assert "     S2 heard True -> False" in result.output
    page = tmp_path / "lasso.html"
    result = hwm("replay", "--html", str(page), str(trace))
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "timeout(S2)" in html and "heard=True" in html and "heard=False" in html
    assert "S2 heard True -&gt; False" in html or "S2 heard True -> False" in html
    # Under check-quorum the same steps are no counterexample: step_down is fair, and never taken.
    result = hwm("replay", "--protocol", f"{PREVOTE}:PreVote", str(trace))
    assert result.exit_code == 0, result.output
    assert "the cycle is not fair: step_down(S1) is enabled in every state of the cycle" in result.output


def test_a_variant_invariant_over_its_field_is_violated_saved_and_replayed(tmp_path):
    path = tmp_path / "timers.py"
    path.write_text(textwrap.dedent(f'''
        import importlib.util
        spec = importlib.util.spec_from_file_location("prevote_example", {str(PREVOTE)!r})
        prevote = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(prevote)

        class Patient(prevote.PreVote):
            invariants = {{"NoTimerFires": prevote.follower_times_out}}
            witnesses = {{}}
    '''))
    result = hwm("check", "--protocol", f"{path}:Patient", *SMALL_ARGS, "--save", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert "✗ NoTimerFires                 violated in 2 steps: S2's timer fired while S1 leads generation 1" in \
        result.output
    result = hwm("replay", str(tmp_path / "Patient.NoTimerFires.json"))
    assert result.exit_code == 0, result.output
    assert "violation of NoTimerFires at step 2" in result.output and "(as expected)" in result.output


# ------------------------------------------------------------- bad input
GOOD = '''\
from hwm.model.variant import Variant
class V(Variant):
    fields = {"heard": False}
    actions = ("timeout",)
    def guard_timeout(self, state, server):
        return None if state.servers[server].role == "follower" else "a leader"
    def effect_timeout(self, state, server):
        return self.with_server(state, server, heard=not state.servers[server].heard)
'''


def variant_file(folder: Path, replace: tuple[str, str] = ("", "")) -> Path:
    old, new = replace
    assert old in GOOD
    path = folder / "my_variant.py"
    path.write_text(GOOD.replace(old, new, 1))
    return path


def test_the_good_one_runs(tmp_path):
    result = hwm("check", "--protocol", f"{variant_file(tmp_path)}:V", "--max-generation", "1", "--max-crashes", "0")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("replace, expected", [
    (('{"heard": False}', '{"heard": []}'),
     r"my_variant.py:2: V.fields\['heard'\]: its initial value \[\] \(list\) is unhashable: a field holds None"),
    (('{"heard": False}', '{"heard": False, "role": 1}'), r"my_variant.py:2: V.fields: role is already a field"),
    (('("timeout",)', '("crash",)'), r"my_variant.py:2: V.actions: crash is already an action of the trace format"),
    (('    def effect_timeout', '    def effect_time_out'), r"my_variant.py:2: V.effect_timeout\(state, server\) is "
                                                            r"missing"),
    (('actions = ("timeout",)', 'actions = ("timeout",)\n    fair = ("step_down",)'),
     r"my_variant.py:2: V.fair: 'step_down' is not one of V.actions"),
    (('class V(Variant):', 'class V(Variant):\n    base = "raft-lease-reads"'),
     r"my_variant.py:2: V adds to the raft model, which has no partitions, check_quorum or lease_reads"),
])
def test_bad_input_before_the_search_is_one_line_naming_file_and_line(tmp_path, replace, expected):
    result = hwm("check", "--protocol", f"{variant_file(tmp_path, replace)}:V", "--max-generation", "1")
    assert result.exit_code == 2, result.output
    assert re.search(expected, result.output), result.output
    assert "explored" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("replace, expected", [
    (("return self.with_server(state, server, heard=not state.servers[server].heard)",
      "return state.servers[9]"),
     r"my_variant.py:8: V.effect_timeout raised IndexError: tuple index out of range, at timeout\(S1\) from state "
     r"S1 follower +g0 log=\[\] hwm=0 heard=False; S2 follower +g0 log=\[\] hwm=0 heard=False"),
    (("return self.with_server(state, server, heard=not state.servers[server].heard)", "return None"),
     r"my_variant.py:7: V.effect_timeout returned NoneType, not a state \(State, as it was given\), at timeout\(S"),
    (("heard=not state.servers[server].heard", "heard=[server]"),
     r"my_variant.py:7: V.effect_timeout set S1's field heard: \[0\] \(list\) is unhashable: .*, at timeout\(S1\)"),
    (("return self.with_server(state, server, heard=not state.servers[server].heard)",
      "return state._replace(servers=tuple(s[:6] for s in state.servers))"),
     r"my_variant.py:7: V.effect_timeout returned S1 as a tuple without the fields heard"),
    (('else "a leader"', 'else 1'),
     r"my_variant.py:5: V.guard_timeout returned 1 \(int\), expected None or the reason \(str\), at timeout\(S1\) "
     r"from state S1 leader +g1"),
    (('    def guard_timeout', '    def after(self, state, action, next_state):\n        return next_state.nothing\n'
                             '    def guard_timeout'),
     r"my_variant.py:6: V.after raised AttributeError: .*, at elect\(S1, \{S1,S2\}\) from state S1 follower +g0"),
    (('    def guard_timeout', '    liveness = {"Boom": lambda view: view.servers[0].nothing}\n    def guard_timeout'),
     r"my_variant.py:5: liveness Boom raised AttributeError: .*, in state S1 follower +g0 log=\[\] hwm=0 heard=False"),
])
def test_bad_answers_during_the_search_name_file_line_state_and_action(tmp_path, replace, expected):
    liveness = "liveness" in replace[1]
    result = hwm("check", "--protocol", f"{variant_file(tmp_path, replace)}:V", "--max-generation", "1",
                 "--max-crashes", "0", *(["--liveness"] if liveness else []))
    assert result.exit_code == 2, result.output
    assert re.search(r"error: .*" + expected, result.output), result.output
    assert "Traceback" not in result.output
    if not liveness:
        assert "INTERRUPTED: an error in the variant" in result.output


def test_pre_vote_refuses_an_election_until_a_quorum_of_timers_fired():
    model = model_of("PreVote", Config(servers=4, max_generation=2, max_crashes=0))
    state = model.apply(model.initial_state(), ("elect", 0, (0, 1, 2)))
    second = ("elect", 3, (1, 2, 3))
    assert model.why_not(state, second) == "S2 heard from a leader since its election timer last fired (pre-vote)"
    assert second not in set(model.actions(state))
    state = model.apply(model.apply(state, ("timeout", 1)), ("timeout", 2))
    assert model.why_not(state, second) is None and second in set(model.actions(state))
    assert model.why_not(state, ("elect", 3, (0, 1, 3))) == "S1 leads generation 1 and refuses the pre-vote"
    # Check-quorum: S1, heard by none of the others now, may step down; the new leader's voters hear from it.
    assert model.why_not(state, ("step_down", 0)) is None
    after = model.apply(state, second)
    assert [s.heard for s in after.servers] == [False, True, True, False]
    assert model.why_not(after, ("step_down", 3)) == "3 servers hear from S4, a quorum"


def test_symmetry_off_for_a_variant_whose_fields_may_name_servers(tmp_path):
    (tmp_path / "off").mkdir()  # a file of its own: a loaded variant is kept by its path
    path = variant_file(tmp_path / "off", ('actions = ("timeout",)', 'actions = ("timeout",)\n    symmetric = False'))
    on = hwm("check", "--protocol", f"{path}:V", "--max-generation", "1", "--max-crashes", "0", "--json")
    off = hwm("check", "--protocol", f"{path}:V", "--max-generation", "1", "--max-crashes", "0", "--no-symmetry",
              "--json")
    assert on.exit_code == off.exit_code == 0, on.output
    assert "symmetry reduction is off: V.symmetric is False" in on.output
    states = [re.search(r'"distinct_states": (\d+)', r.output).group(1) for r in (on, off)]
    assert states[0] == states[1]
    plain = hwm("check", "--protocol", f"{variant_file(tmp_path)}:V", "--max-generation", "1", "--max-crashes", "0",
                "--json")
    assert int(re.search(r'"distinct_states": (\d+)', plain.output).group(1)) < int(states[0])


def test_a_rule_variant_may_add_a_liveness_property_alone(tmp_path):
    (tmp_path / "rules.py").write_text(textwrap.dedent('''
        from hwm.model.variant import Variant

        def leaders(view):
            """a leader eventually stops leading"""
            return {k: f"S{k + 1} leads" for k, s in enumerate(view.servers) if s.alive and s.role == "leader"}

        class Lead(Variant):
            liveness = {"NoLeaderForEver": leaders}
    '''))
    result = hwm("check", "--protocol", f"{tmp_path / 'rules.py'}:Lead", "--max-generation", "1", "--max-crashes", "0",
                 "--liveness")
    assert result.exit_code == 1, result.output
    assert "✗ NoLeaderForEver              violated (lasso 1+2 steps): S1 leads, and stays so forever" in result.output
    assert "elect(S1, {S1,S2,S3}) | cycle: replicate(S1, S2) replicate(S1, S3)" in result.output
    assert "✓ NoLeaderForEverOpens         witnessed in 1 steps: S1 leads" in result.output
