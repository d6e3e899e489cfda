"""The liveness check on the compiled engine's graph (checker/liveness_fast.py) agrees with the
reference graph's (checker/liveness.py's StateGraph): the same states and transitions, verdicts,
lassos (stem, cycle and every step), cut counts and witnesses, on every preset both run."""

import dataclasses

import pytest

from hwm.checker.fast import unsupported
from hwm.checker.liveness import (COMPILED_MAX_STATES, DEFAULT_MAX_STATES, LivenessRefused, check_liveness,
                                  lasso_verdict, liveness_backend)
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.liveness import LIVENESS
from hwm.properties.protocol import PRESETS


def both_run(servers: int) -> list[str]:
    """The presets both graphs run at `servers`: those the compiled backend has a form of (a BookKeeper
    ledger wider than the cluster has no model at all)."""
    names = []
    for name, preset in PRESETS.items():
        try:
            model = build_model(preset.protocol, Config(servers, 2, 1, 1))
        except ValueError:
            continue
        if unsupported(model) is None:
            names.append(name)
    return names


def both(model, name, **options):
    reference = check_liveness(model, name, successors="reference", **options)
    compiled = check_liveness(model, name, successors="fast", **options)
    return reference, compiled


def assert_agree(model, reference, compiled):
    assert (compiled.successors, reference.successors) == ("fast", "reference")
    body, same = compiled.to_json(), reference.to_json()
    del body["successors"], same["successors"]
    assert body == same
    for name in compiled.violated:  # the lasso replays: enabled steps, a closed, fair, open cycle
        r = compiled.results[name]
        states = [model.initial_state()]
        for action in r.actions:
            assert model.why_not(states[-1], action) is None
            states.append(model.apply(states[-1], action))
        prop = next(p for p in compiled.properties if p.name == name)
        verdict = lasso_verdict(model, states, r.actions, r.loop, prop, compiled.fairness, compiled.strong_fairness)
        assert verdict[0] == r.finding


@pytest.mark.parametrize("preset", both_run(2))
def test_every_preset_agrees_on_two_servers(preset):
    model = build_model(PRESETS[preset].protocol, Config(2, 2, 2, 1))
    assert_agree(model, *both(model, preset))


# Kafka's on three servers (30,145 states) is in the deep run's every preset; here its presets agree on two.
@pytest.mark.parametrize("preset", ["seed", "raft", "zab"])
def test_presets_agree_on_three_servers(preset):
    model = build_model(PRESETS[preset].protocol, Config(3, 2, 1, 1))
    reference, compiled = both(model, preset)
    assert_agree(model, reference, compiled)
    if preset == "seed":  # the pinned lasso (tests/pinned.py): an agreement that shows a violation
        r = compiled.results["FollowersCatchUp"]
        assert (r.stem, r.cycle) == (9, 2)


@pytest.mark.deep
@pytest.mark.parametrize("preset", both_run(3))
def test_every_preset_agrees_on_three_servers_deep(preset):
    model = build_model(PRESETS[preset].protocol, Config(3, 2, 1, 1))
    # kafka-unflushed's graph (102,349 states) is over the reference graph's default limit
    assert_agree(model, *both(model, preset, max_states=4 * DEFAULT_MAX_STATES))


def test_weakened_fairness_agrees():
    # Without fair replication raft violates both properties: the lassos starve replicate.
    model = build_model(PRESETS["raft"].protocol, Config(3, 2, 1, 1))
    reference, compiled = both(model, "raft", fair=("restart",))
    assert set(compiled.violated) == {"WrittenEventuallyCommitted", "FollowersCatchUp"}
    assert_agree(model, reference, compiled)


@pytest.mark.parametrize("preset", ["raft", "seed"])
@pytest.mark.parametrize("strong", [None, ()], ids=["deliver-strongly-fair", "deliver-not-fair"])
def test_the_async_network_agrees(preset, strong):
    # deliver strongly fair (the SCCs refined on both graphs), or not (send/drop cycles violate raft).
    model = build_model(PRESETS[preset].protocol, Config(2, 2, 1, 1, "async", 1))
    assert liveness_backend(model, "auto") == "fast"
    reference, compiled = both(model, preset, strong=strong)
    assert bool(compiled.violated) == (strong == ())
    assert_agree(model, reference, compiled)


def test_a_property_of_its_own_is_asked_of_every_state():
    # Not one of the documented properties: the compiled graph cannot assume it reads the servers alone.
    own = tuple(dataclasses.replace(p, name=p.name + "Again") for p in LIVENESS)
    model = build_model(PRESETS["seed"].protocol, Config(3, 2, 1, 1))
    reference, compiled = both(model, "seed", properties=own)
    assert compiled.violated == ["FollowersCatchUpAgain"]
    assert_agree(model, reference, compiled)


def test_the_graph_and_its_limit_are_chosen_by_the_backend():
    model = build_model(PRESETS["raft"].protocol, Config(3, 2, 1, 1))
    assert liveness_backend(model, "auto") == "fast" and liveness_backend(model, "reference") == "reference"
    assert (COMPILED_MAX_STATES, DEFAULT_MAX_STATES) == (3_000_000, 50_000)
    with pytest.raises(LivenessRefused, match="more than 100 states \\(the liveness state limit\\)"):
        check_liveness(model, "raft", max_states=100, successors="fast")
    with pytest.raises(ValueError, match="unknown successor backend 'spark'"):
        check_liveness(model, "raft", successors="spark")


@pytest.mark.parametrize("successors", ["auto", "reference"])
def test_hwm_check_liveness_runs_on_the_graph_of_the_safety_checks_backend(successors):
    import json

    from click.testing import CliRunner

    from hwm.cli import main

    args = ["check", "--protocol", "seed", "--servers", "2", "--max-generation", "3", "--max-log", "2",
            "--max-crashes", "1", "--liveness", "--successors", successors]
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    body = json.loads(result.stdout)["liveness"]
    assert body["successors"] == ("fast" if successors == "auto" else "reference")
    assert body["properties"]["FollowersCatchUp"]["stem"] == 8  # pinned: lasso 8+1
    text = CliRunner().invoke(main, args, catch_exceptions=False).output
    assert ("transitions (compiled graph); weakly fair" in text) == (successors == "auto")
