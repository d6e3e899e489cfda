"""The rules of a server's own steps as hooks (properties/rules.py, docs/variants.md): the append check
(`accepts_append`), what a restart keeps (`restart_keeps`) and who serves a read (`readable`). The flags'
rules, asked as a variant's hooks, explore exactly the presets' states; examples/variants/server_rules.py's
variants change what they should, on the model and on hwm's own replica alike, and run on the reference
backend with a note."""

from __future__ import annotations

import json

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.bridge.replay import replay_on_impl
from hwm.bridge.simcluster import build_cluster
from hwm.checker.fast.backend import unsupported
from hwm.checker.replay import replay_on_model
from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.impl.core import Replica
from hwm.impl.messages import AppendRequest
from hwm.impl.storage import Durable
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import Protocol, resolve
from hwm.properties.rules import HOOKS, PER_STATE_HOOKS, SYSTEM_HOOKS, Rules
from hwm.properties.trace import load

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "variants" / "server_rules.py"
SMALL = Config(servers=3, max_generation=2, max_log=1, max_crashes=1)
SMALL_ASYNC = Config(servers=2, max_generation=1, max_log=1, max_crashes=1, network="async", channel_capacity=1)
NEW = ("accepts_append", "restart_keeps", "readable")


def hwm(*args: str):
    return CliRunner().invoke(main, list(args))


def explore(spec: str, config: Config = SMALL):
    name, protocol = resolve(spec)
    return run(CheckRequest(name, successors="reference"), model=build_model(protocol, config))


def shortest(report) -> dict[str, int]:
    return {name: len(r.actions) for name, r in report.results.items() if r.found}


def same_rules(tmp_path: Path, base: str) -> str:
    """A variant of `base` whose three hooks answer what the flags' rules answer, through super()."""
    path = tmp_path / f"same_{base.replace('-', '_')}.py"
    path.write_text(textwrap.dedent(f"""
        from hwm.model.variant import Variant

        class Same(Variant):
            base = {base!r}

            def accepts_append(self, log, prev_index, prev_generation):
                return super().accepts_append(log, prev_index, prev_generation)

            def restart_keeps(self, log, hwm, leader_hwm):
                return super().restart_keeps(log, hwm, leader_hwm)

            def readable(self, server, leading, log, hwm):
                return super().readable(server, leading, log, hwm)
    """))
    return f"{path}:Same"


def test_the_three_hooks_are_raft_rules_asked_of_every_state():
    assert HOOKS[-3:] == NEW and set(NEW) <= set(PER_STATE_HOOKS) and set(NEW) <= set(SYSTEM_HOOKS["raft"])
    for system in ("zab", "kafka", "bookkeeper"):
        assert not set(NEW) & set(SYSTEM_HOOKS[system])


# Each restart rule, each append check, and the async network's refusals: the flags' rules said as hooks.
@pytest.mark.parametrize("base,config", [
    ("raft", SMALL), ("seed", SMALL), ("kip101", SMALL), ("raft-truncate-to-leader-hwm", SMALL),
    ("raft-generation-mismatch", SMALL), ("raft-truncate-to-own-hwm", SMALL_ASYNC), ("raft-truncate-to-leader-hwm", SMALL_ASYNC)])
def test_the_flags_rules_asked_as_hooks_explore_the_presets_states(tmp_path, base, config):
    preset, variant = explore(base, config), explore(same_rules(tmp_path, base), config)
    assert (variant.states, variant.transitions, variant.depth) == (preset.states, preset.transitions, preset.depth)
    assert shortest(variant) == shortest(preset)


# ------------------------------------------------------------------ what a restart keeps
def test_a_restart_to_the_own_hwm_is_kip101():
    """TruncateToOwnHwm (raft with a durable HWM, its restart_keeps the own HWM) explores kip101's states
    and finds its counterexamples; its base alone holds."""
    variant, kip101 = explore(f"{RULES}:TruncateToOwnHwm"), explore("kip101")
    assert (variant.states, variant.transitions) == (kip101.states, kip101.transitions) == (759, 2815)
    assert shortest(variant) == shortest(kip101)
    found = variant.results["ReadNeverTruncated"]
    assert [str(a) for a in found.actions] == [str(a) for a in kip101.results["ReadNeverTruncated"].actions]
    assert len(found.actions) == 6
    assert not explore("raft-durable-hwm").violated


# ------------------------------------------------------------------ the append check
def test_a_follower_without_the_append_check_acknowledges_what_its_restart_lost():
    unchecked, checked = explore(f"{RULES}:TruncateUnchecked"), explore(f"{RULES}:TruncateToOwnHwm")
    assert shortest(checked).get("HwmWithinLog", 99) > 6
    found = unchecked.results["HwmWithinLog"]
    assert found.found and len(found.actions) == 6
    assert "S2 has high-water mark 1 but only 0 entries" in found.finding


# ------------------------------------------------------------------ who serves a read
def test_follower_reads_of_the_whole_log_read_an_entry_a_new_leader_overwrites():
    report = explore(f"{RULES}:FollowerReadsUnchecked")
    found = report.results["ReadNeverTruncated"]
    assert found.found and len(found.actions) == 7, found
    assert "S1 removed entry 1@g1, which a client has read" in found.finding


def test_leader_reads_alone_hold_with_fewer_reads():
    leader, raft = explore(f"{RULES}:LeaderReads"), explore("raft")
    assert not leader.violated and leader.states == raft.states and leader.transitions < raft.transitions


# ------------------------------------------------------------------ engines and the implementation
def test_a_variant_overriding_one_runs_on_the_compiled_backend_with_the_same_verdicts():
    """The rules' answers are tables the kernels look up (checker.fast.rule_tables)."""
    for name in ("TruncateUnchecked", "LeaderReads"):
        assert unsupported(build_model(resolve(f"{RULES}:{name}")[1], SMALL)) is None
    runs = [hwm("check", "--protocol", f"{RULES}:FollowerReadsUnchecked", "--successors", successors,
                "--max-generation", "2", "--max-crashes", "0", "--json") for successors in ("fast", "reference")]
    assert [run.exit_code for run in runs] == [1, 1], runs[0].output
    fast, reference = (json.loads(run.output) for run in runs)
    assert fast["successors"] == "fast" and fast["distinct_states"] == reference["distinct_states"] == 145
    assert fast["properties"] == reference["properties"]
    assert fast["properties"]["ReadNeverTruncated"]["length"] == 7


@pytest.mark.parametrize("name,prop,steps", [("TruncateToOwnHwm", "ReadNeverTruncated", 6),
                                             ("TruncateUnchecked", "HwmWithinLog", 6),
                                             ("FollowerReadsUnchecked", "ReadNeverTruncated", 7)])
def test_the_implementation_breaks_at_the_models_step(tmp_path, name, prop, steps):
    """hwm's own replica asks the same hooks: the counterexample breaks it at the same step."""
    spec = f"{RULES}:{name}"
    checked = hwm("check", "--protocol", spec, "--servers", "3", "--max-generation", "2", "--max-log", "1",
                  "--max-crashes", "1", "--successors", "reference", "--save", str(tmp_path))
    assert checked.exit_code == 1, checked.output
    trace = load(tmp_path / f"{name}.{prop}.json")
    for replay in (replay_on_model, replay_on_impl):
        outcome = replay(trace)
        assert (outcome.kind, outcome.step) == ("violation", steps), (replay.__name__, outcome.summary())


def test_the_replica_serves_reads_and_restarts_by_the_variants_rules():
    config = Config(servers=3, max_generation=2, max_log=1, max_crashes=1)
    for name, follower_reads in (("LeaderReads", False), ("FollowerReadsUnchecked", True)):
        sim = build_cluster(resolve(f"{RULES}:{name}")[1], config)
        for action in (("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1)):
            assert sim.apply(action) is None
        assert sim["S2"].hwm == 0 and sim["S2"].readable() == (1 if follower_reads else 0)
        refused = sim.apply(("read", 1))
        assert (refused is None) == follower_reads, refused
        assert sim.apply(("read", 0)) is None  # the leader serves up to its HWM under both
    sim = build_cluster(resolve(f"{RULES}:TruncateToOwnHwm")[1], config)
    for action in (("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1), ("crash", 1), ("restart", 1)):
        assert sim.apply(action) is None, action
    assert sim["S2"].log_generations() == () and sim["S1"].hwm == 1


INDEX_ONLY = """
from hwm.model.variant import Variant

class IndexOnly(Variant):
    def accepts_append(self, log, prev_index, prev_generation):
        return len(log) >= prev_index
"""


def test_the_append_check_compares_the_previous_entrys_generation(tmp_path):
    """The raft model's leader sends from the match index it learned, so there the generation half of the
    check never refuses; the replica's leader probes from its next index, and its follower asks the hook."""
    raft, seed = Rules(Protocol(), 3), Rules(Protocol(append_check="generation-mismatch"), 3)
    assert raft.accepts_append((1, 1), 2, 1) and not raft.accepts_append((1, 1), 2, 2)
    assert not raft.accepts_append((1,), 2, 1) and seed.accepts_append((), 2, 1)
    path = tmp_path / "index_only.py"
    path.write_text(INDEX_ONLY)
    for protocol, accepted in ((Protocol(), False), (resolve(f"{path}:IndexOnly")[1], True)):
        follower = Replica("n2", ("n1", "n3"), protocol, Durable(1, None, 0, ((1, b"a"),)))
        follower.step(AppendRequest(2, "n1", 1, 2, ((2, b"b"),), 0))
        (_, reply), = follower.ready().messages
        assert reply.success is accepted and follower.log_generations() == ((1, 2) if accepted else (1,))


@pytest.mark.parametrize("base,hook,signature", [
    ("zab", "accepts_append", "log, prev_index, prev_generation"), ("zab", "restart_keeps", "log, hwm, leader_hwm"),
    ("zab", "readable", "server, leading, log, hwm"), ("kafka", "accepts_append", "log, prev_index, prev_generation"),
    ("kafka", "restart_keeps", "log, hwm, leader_hwm"), ("kafka", "readable", "server, leading, log, hwm")])
def test_zab_and_kafka_refuse_the_three_by_name(tmp_path, base, hook, signature):
    path = tmp_path / "v.py"
    path.write_text(f"from hwm.model.variant import Variant\n\n\nclass V(Variant):\n    base = {base!r}\n\n"
                    f"    def {hook}(self, {signature}):\n        return 0\n")
    result = hwm("check", "--protocol", f"{path}:V", "--servers", "3", "--max-generation", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"{path}:7: V.{hook}: the {base} system (base {base}) asks no {hook}: " in result.output, result.output


@pytest.mark.parametrize("body", [
    "    def restart_keeps(self, log, hwm, leader_hwm):\n        return len(log) + 1\n",
    "    def readable(self, server, leading, log, hwm):\n        return -1\n"])
def test_an_index_outside_the_log_stops_the_search_in_one_line(tmp_path, body):
    path = tmp_path / "v.py"
    path.write_text("from hwm.model.variant import Variant\n\n\nclass V(Variant):\n" + body)
    result = hwm("check", "--protocol", f"{path}:V", "--servers", "2", "--max-generation", "1", "--max-log", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "but the log it was given has" in result.output, result.output


def test_the_implementation_under_leader_reads_agrees_with_the_model_step_by_step():
    """The conformance machine (the implementation against the model, step by step) under LeaderReads: the
    replica asks the hook with its own role, and serves the leader's reads as the model does."""
    from hypothesis.stateful import run_state_machine_as_test

    from hwm.bridge.conformance import conformance_settings, machine_for

    machine = machine_for(f"{RULES}:LeaderReads", Config(servers=3, max_generation=3, max_log=2, max_crashes=1))
    run_state_machine_as_test(machine, settings=conformance_settings(max_examples=8, derandomize=True))
    assert machine.witnessed["read"] and machine.witnessed["leader change"]


def _first_discrepancy(spec: str, walked: str) -> tuple[str, int, tuple] | None:
    """The first random walk of `walked`'s model (3 servers, one entry each way) that `spec`'s validator
    refuses, with the event it stops at; None if none of 100 does."""
    from hwm.checker.model_events import random_actions, run_events
    from hwm.checker.validate import Validator

    model = build_model(resolve(walked)[1], Config(servers=3, max_generation=2, max_log=2, max_crashes=0))
    for seed in range(100):
        header, events = run_events(model, list(random_actions(model, 25, seed)))
        assert Validator(resolve(walked)[1], header).validate(events).valid, seed  # its own model's run
        verdict = Validator(resolve(spec)[1], header).validate(events)
        if not verdict.valid:
            return verdict.discrepancy.describe(), seed, events[verdict.discrepancy.number - 1].read
    return None


def test_hwm_validate_serves_reads_by_the_variants_read_rule():
    """A recorded run is stepped with the variant's `readable`, not the HWM: a follower's read of its whole
    log is a step of FollowerReadsUnchecked and not of raft; a follower's read at its HWM is one of raft and
    not of LeaderReads."""
    unchecked = f"{RULES}:FollowerReadsUnchecked"
    assert _first_discrepancy(unchecked, unchecked) is None
    text, _, read = _first_discrepancy("raft", unchecked)
    assert read and "lets a client read" in text
    text, _, read = _first_discrepancy(f"{RULES}:LeaderReads", "raft")
    assert read and "lets a client read" in text and "read rule" in text
