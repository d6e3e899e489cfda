"""The local engine, the encoding and symmetry reduction, the simulation engine."""

import random
from itertools import permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwm.model.raft import RaftModel
from hwm.model.registry import build_model
from hwm.checker.report import reconstruct
from hwm.checker.run import CheckRequest, run
from hwm.model.encoding import canonical, decode, encode, fingerprint
from hwm.checker.simulation import simulate
from hwm.model.state import Config, State, initial_state
from hwm.properties.protocol import PRESETS
from hwm.properties.quorum import majority, quorum_index
from tests.pinned import PINNED, check_against_pins, config_of


def random_walk(model, rng, steps):
    """A reachable state: `steps` random enabled actions from the initial state."""
    state = initial_state(model.config)
    for _ in range(steps):
        choices = list(model.successors(state))
        if not choices:
            break
        state = rng.choice(choices)[1]
    return state


def permuted(state: State, order) -> State:
    """The same cluster with servers renamed: new position j is old server order[j]."""
    n = len(state.servers)
    servers = []
    for old in order:
        s = state.servers[old]
        match = tuple(s.match[k] for k in order) if s.match else ()
        servers.append(s._replace(match=match))
    channels = tuple(state.channels[a * n + b] for a in order for b in order) if state.channels else ()
    return State(tuple(servers), state.reads, state.crashes, channels)


MODELS = [
    RaftModel(PRESETS["seed"].protocol, Config(max_log=2)),
    RaftModel(PRESETS["raft"].protocol, Config(servers=4, max_log=2)),
    RaftModel(PRESETS["raft-generation-mismatch"].protocol, Config(network="async", max_log=2, channel_capacity=2)),
]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(which=st.integers(0, len(MODELS) - 1), seed=st.integers(0, 2**32), steps=st.integers(0, 25))
def test_encoding_round_trips_and_symmetry_is_canonical(which, seed, steps):
    model = MODELS[which]
    state = random_walk(model, random.Random(seed), steps)
    assert decode(encode(state)) == state
    assert decode(canonical(state)) in {permuted(state, order) for order in permutations(range(model.n))}
    order = list(range(model.n))
    random.Random(seed).shuffle(order)
    other = permuted(state, order)
    assert canonical(other) == canonical(state)
    assert fingerprint(other) == fingerprint(state)
    # Symmetric successors: the renamed state's successors are the renamed successors.
    assert sorted(fingerprint(s) for _, s in model.successors(other)) == sorted(
        fingerprint(s) for _, s in model.successors(state))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(which=st.integers(0, len(MODELS) - 1), seed=st.integers(0, 2**32), steps=st.integers(0, 25))
def test_successors_are_exactly_the_actions_the_guards_enable(which, seed, steps):
    model = MODELS[which]
    state = random_walk(model, random.Random(seed), steps)
    enabled = {action for action, _ in model.successors(state)}
    names = ("send", "deliver", "drop") if model.async_network else ("replicate",)
    candidates = [("elect", c, v) for c in range(model.n) for v in model.voter_sets[c]]
    candidates += [(a, k) for k in range(model.n) for a in ("write", "read", "crash", "restart")]
    candidates += [(a, x, y) for x, y in model.pairs for a in names]
    assert enabled == {a for a in candidates if model.why_not(state, a) is None}
    for action, succ in model.successors(state):
        assert model.apply(state, action) == succ


def test_fingerprints_are_stable_across_processes():
    # BLAKE2b of the canonical bytes, not Python's salted hash: a fixed value forever.
    assert fingerprint(initial_state(Config())) == 0xE81CF4BA90F4CA16
    assert encode(initial_state(Config())) == bytes([3, 0, 0] + [0, 0, 1, 0, 0] * 3 + [0])


def test_quorum_majority_matches_a_naive_reference():
    rng = random.Random(7)
    for _ in range(50_000):
        n = rng.randint(1, 9)
        indexes = [rng.randint(0, 6) for _ in range(n)]
        naive = max(v for v in range(0, 7) if sum(m >= v for m in indexes) >= majority(n))
        assert quorum_index("majority", indexes) == naive
        if n % 2:
            assert quorum_index("seed-index", indexes) == naive


def test_seed_index_is_one_short_for_even_clusters():
    assert quorum_index("seed-index", [0, 1]) == 1  # held by 1 of 2 servers
    assert quorum_index("majority", [0, 1]) == 0


# ------------------------------------------------------------ pinned numbers
def pinned_cases(deep: bool):
    for key, expected in PINNED.items():
        if expected.get("deep", False) == deep:
            yield pytest.param(key, expected, id="-".join(map(str, key)))


# The non-deep pins are checked in tests/checker/test_engine.py, once per backend, beside the other engines.


@pytest.mark.deep
@pytest.mark.parametrize("key, expected", list(pinned_cases(deep=True)))
def test_pinned_counts_deep(key, expected):
    preset, config, symmetry = config_of(key)
    # The largest pins name the compiled backend: the reference one would take an hour on them
    # (tests/checker/test_engine.py shows the two agree on every faster pin).
    successors = expected.get("successors", "reference")
    check_against_pins(run(CheckRequest(preset, config, symmetry=symmetry, successors=successors)), expected)


def test_symmetry_never_increases_the_count_and_keeps_verdicts():
    pairs = {}
    for key, expected in PINNED.items():
        pairs.setdefault(key[:-1], {})[key[-1]] = expected
    compared = 0
    for key, both in pairs.items():
        if True in both and False in both:
            compared += 1
            assert both[True]["states"] <= both[False]["states"], key
            assert both[True]["lengths"] == both[False]["lengths"], key
            assert both[True]["depth"] == both[False]["depth"], key
    assert compared >= 3


def test_breadth_first_traces_are_shortest():
    # Any violation of ReadNeverTruncated needs at least: an election, a write, a replicate,
    # a read, then something that removes the entry. BFS must not find fewer steps than a
    # search bounded one step lower can.
    model = RaftModel(PRESETS["raft-truncate-to-own-hwm"].protocol, Config())
    full = run(CheckRequest("x"), model=model)
    length = full.results["ReadNeverTruncated"].length
    shallower = run(CheckRequest("x", max_depth=length - 1), model=model)
    assert not shallower.complete
    assert not shallower.results["ReadNeverTruncated"].found
    assert run(CheckRequest("x", max_depth=length), model=model).results["ReadNeverTruncated"].found


def test_reconstruct_rejects_a_chain_with_a_foreign_fingerprint():
    model = RaftModel(PRESETS["raft"].protocol, Config())
    with pytest.raises(RuntimeError, match="no successor"):
        reconstruct(model, [fingerprint(initial_state(model.config)), 12345], True)


# -------------------------------------------------------------- simulation
# One space per system and network in the default run; the other symmetry settings and broken
# variants of the same systems under `deep` (each costs seconds of random walks). Each space with the
# walks that cover it from seed 1 (measured; walks of ZAB's reference steps cost 1.2 ms each).
DEEP = pytest.mark.deep
TINY = [(("raft", 2, 2, 1, 1, "rpc", True), 4000), (("raft-truncate-to-own-hwm", 2, 1, 1, 1, "async", True), 4000),
        pytest.param(("zab", 2, 2, 1, 1, "rpc", True), 6000, marks=DEEP), (("zab", 2, 2, 1, 1, "rpc", False), 4000),
        pytest.param(("zab-ack-before-persist", 2, 2, 1, 1, "rpc", True), 6000, marks=DEEP),
        (("bookkeeper", 2, 1, 1, 0, "rpc", True), 1500),
        pytest.param(("bookkeeper", 2, 1, 1, 0, "rpc", False), 2500, marks=DEEP),
        pytest.param(("bookkeeper-recovery-without-fencing", 2, 1, 1, 0, "rpc", True), 1500, marks=DEEP),
        (("bookkeeper-recovery-without-fencing", 2, 1, 1, 0, "rpc", False), 2500),
        pytest.param(("bookkeeper-striped", 3, 1, 1, 0, "rpc", True), 10000, marks=DEEP),
        (("kafka", 2, 2, 1, 0, "rpc", True), 1500)]


@pytest.mark.parametrize("key,walks", TINY)
def test_simulation_covers_a_tiny_state_space_exactly(key, walks):
    preset, config, symmetry = config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    report = simulate(model, preset, walks=walks, max_depth=20, seed=1, symmetry=symmetry)
    assert report.states == PINNED[key]["states"]
    assert sorted(report.bounds_hit) == PINNED[key]["bounds_hit"]
    always = {p.name for p in model.properties if p.kind == "always"}
    assert sorted(report.violated) == sorted(n for n in PINNED[key]["lengths"] if n in always)
    for name in report.violated:
        assert report.results[name].length >= PINNED[key]["lengths"][name]


# Safe raft on three servers under -m deep (4 s of walks; the tiny spaces above walk it on two).
@pytest.mark.parametrize("key", [("raft-any-generation-commit", 3, 4, 1, 1, "rpc", True),
                                 pytest.param(("raft", 3, 4, 1, 1, "rpc", True), marks=pytest.mark.deep),
                                 ("kafka-truncate-to-hwm", 2, 2, 1, 1, "rpc", True)])
def test_simulation_stays_inside_the_breadth_first_state_space(key):
    preset, config, symmetry = config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    report = simulate(model, preset, walks=1500, seed=3, symmetry=symmetry)
    assert 0 < report.states <= PINNED[key]["states"]
    for name in report.violated:  # whatever it finds is real and no shorter than the shortest
        assert report.results[name].length >= PINNED[key]["lengths"][name]
    if preset == "raft":
        assert report.violated == []
    else:
        assert "ReadNeverTruncated" in report.violated  # Figure 8 is found by random walks too
