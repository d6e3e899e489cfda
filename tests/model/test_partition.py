"""Partitions, check-quorum and reads from a leader's lease (model/partition.py, properties/leases.py):
guards against enumeration, the encoding and symmetry, the step-down rule, the pins on every engine
that covers them, and the refusals of those that do not."""

import random
from itertools import permutations

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hwm.checker.backend import BackendUnavailable
from hwm.checker.expectations import NEEDS, judge, shows
from hwm.checker.fast import unsupported
from hwm.checker.run import CheckRequest, run
from hwm.checker.simulation import simulate
from hwm.checker.verdict import DEFAULT_CONFIG, tour_config, witness_needs
from hwm.cli import main
from hwm.model.partition import PartitionedRaftModel, PartitionState
from hwm.model.raft import RaftModel
from hwm.model.registry import build_model
from hwm.model.state import FOLLOWER, LEADER, Config
from hwm.properties.acked import ALL_BY_NAME
from hwm.properties.leases import lease_read_never_stale
from hwm.properties.protocol import PRESETS, Protocol, model_only
from tests.explored import explore
from tests.pinned import PINNED_PARTITIONS, check_against_pins, partition_config_of

LEASES = PRESETS["raft-lease-reads"].protocol
STALE = PRESETS["raft-lease-reads-without-check-quorum"].protocol
RAFT = PRESETS["raft"].protocol
PARTITIONED = Config(max_generation=3, max_log=2, max_partitions=2)
MODELS = [
    PartitionedRaftModel(RAFT, PARTITIONED),
    PartitionedRaftModel(STALE, PARTITIONED),
    PartitionedRaftModel(LEASES, Config(servers=4, max_generation=3, max_log=2, max_partitions=2)),
    PartitionedRaftModel(Protocol(check_quorum=True), PARTITIONED),
]
FAST_PINS = [key for key, pin in PINNED_PARTITIONS.items() if not pin.get("deep")]


def random_walk(model, rng, steps):
    state = model.initial_state()
    for _ in range(steps):
        choices = list(model.successors(state))
        if not choices:
            break
        state = rng.choice(choices)[1]
    return state


def renamed(state: PartitionState, order) -> PartitionState:
    """The same cluster with servers renamed: new position j is old server order[j]."""
    servers = tuple(state.servers[old]._replace(match=tuple(state.servers[old].match[k] for k in order)
                                                if state.servers[old].match else ()) for old in order)
    return state._replace(servers=servers, cut=tuple(state.cut[old] for old in order))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(which=st.integers(0, len(MODELS) - 1), seed=st.integers(0, 2**32), steps=st.integers(0, 30))
def test_successors_are_exactly_the_actions_the_guards_enable(which, seed, steps):
    model = MODELS[which]
    state = random_walk(model, random.Random(seed), steps)
    enabled = [action for action, _ in model.successors(state)]
    assert set(enabled) == {a for a in model.action_table() if model.why_not(state, a) is None}
    for action, successor in model.successors(state):
        assert model.apply(state, action) == successor


@settings(max_examples=40, deadline=None, derandomize=True)
@given(which=st.integers(0, len(MODELS) - 1), seed=st.integers(0, 2**32), steps=st.integers(0, 30))
def test_encoding_round_trips_and_symmetry_keeps_the_cut(which, seed, steps):
    model = MODELS[which]
    state = random_walk(model, random.Random(seed), steps)
    assert model.decode(model.encode(state, symmetry=False)) == state
    orders = list(permutations(range(model.n)))
    assert model.decode(model.encode(state)) in {renamed(state, order) for order in orders}
    order = random.Random(seed).choice(orders)
    other = renamed(state, order)
    assert model.fingerprint(other) == model.fingerprint(state)
    assert sorted(model.fingerprint(s) for _, s in model.successors(other)) == sorted(
        model.fingerprint(s) for _, s in model.successors(state))


def test_the_cut_is_part_of_the_symmetry_class():
    model = MODELS[0]
    start = model.initial_state()
    cut = model.apply(start, ("partition", 0))
    assert model.fingerprint(cut) != model.fingerprint(start)
    assert model.fingerprint(cut) == model.fingerprint(model.apply(start, ("partition", 2)))
    healed = model.apply(cut, ("heal",))
    assert healed.cut == start.cut and healed.partitions == 1
    assert model.fingerprint(healed) != model.fingerprint(start)  # one partition spent


def _leader_with_lease(model):
    """S1 leads generation 1 with entry 1 committed on S1 and S2: it may serve reads from its lease."""
    s = model.initial_state()
    for action in (("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1)):
        assert model.why_not(s, action) is None, action
        s = model.apply(s, action)
    return s


def test_check_quorum_steps_a_leader_down_in_the_step_that_cuts_it_off():
    model = PartitionedRaftModel(LEASES, PARTITIONED)
    s = model.apply(_leader_with_lease(model), ("partition", 0))
    assert s.servers[0].role == FOLLOWER and s.servers[0].generation == 1
    # Cutting off a follower leaves the leader a majority: it keeps leading.
    kept = model.apply(_leader_with_lease(model), ("partition", 2))
    assert kept.servers[0].role == LEADER
    assert "the other side" in model.why_not(kept, ("elect", 1, (1, 2)))
    assert "hears from leader S1" in model.why_not(kept, ("elect", 1, (0, 1)))


def test_without_check_quorum_the_cut_off_leader_keeps_its_lease_and_reads_go_stale():
    model = PartitionedRaftModel(STALE, PARTITIONED)
    s = model.apply(_leader_with_lease(model), ("partition", 0))
    assert s.servers[0].role == LEADER
    assert "other side of the partition" in model.why_not(s, ("replicate", 0, 1)) or \
        "two sides" in model.why_not(s, ("replicate", 0, 1))
    for action in (("elect", 1, (1, 2)), ("write", 1), ("replicate", 1, 2), ("read", 1)):
        assert model.why_not(s, action) is None, action
        s = model.apply(s, action)
    assert "a stale read" in lease_read_never_stale(s)


def test_a_lease_needs_an_entry_of_the_leaders_own_generation():
    model = PartitionedRaftModel(STALE, PARTITIONED)
    s = model.apply(model.initial_state(), ("elect", 0, (0, 1)))
    s = s._replace(reads=frozenset({(1, 1)}))  # nothing committed in generation 1 yet: no lease
    assert lease_read_never_stale(s) is None


def test_timing_rules_hold_elections_while_the_leader_is_heard():
    # With lease_reads nobody times out while it hears from a live leader; without the flags the
    # model's elections are as free as raft's (an asynchronous network may delay any heartbeat).
    s = _leader_with_lease(MODELS[1])
    assert "election timer does not fire" in MODELS[1].why_not(s, ("elect", 1, (1, 2)))
    assert MODELS[0].why_not(_leader_with_lease(MODELS[0]), ("elect", 1, (1, 2))) is None


class _CheckQuorumWithoutStepDown(PartitionedRaftModel):
    """A planted bug: the in-lease vote refusal of check_quorum without its step-down."""

    def _step_down(self, servers, cut):
        return servers


class _LeaseWithoutTimeouts(PartitionedRaftModel):
    """A planted bug: leases without the timing they rest on (a server that hears its leader campaigns)."""

    def hears_leader(self, s, k):
        return None


CATALOGUE_TRACE = [("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1), ("partition", 0), ("elect", 1, (1, 2)),
                   ("write", 1), ("replicate", 1, 2), ("read", 1)]  # counterexamples/raft-lease-reads-...


def _final_state(model, actions):
    state = model.initial_state()
    for action in actions:
        assert model.why_not(state, action) is None, action
        state = model.apply(state, action)
    return state


def test_the_catalogue_trace_is_stale_without_the_step_down_and_fine_with_it():
    config = Config(max_generation=2, max_log=2, max_crashes=0, max_partitions=1)
    assert "a stale read" in lease_read_never_stale(_final_state(_CheckQuorumWithoutStepDown(LEASES, config),
                                                                 CATALOGUE_TRACE))
    assert lease_read_never_stale(_final_state(PartitionedRaftModel(LEASES, config), CATALOGUE_TRACE)) is None


@pytest.mark.deep
@pytest.mark.parametrize("planted", [_CheckQuorumWithoutStepDown, _LeaseWithoutTimeouts])
def test_the_search_catches_each_half_of_check_quorum_missing(planted):
    config = Config(max_generation=2, max_log=2, max_crashes=0, max_partitions=1)
    assert "LeaseReadNeverStale" in run(CheckRequest("planted"), model=planted(LEASES, config)).violated
    assert not run(CheckRequest("raft-lease-reads"), model=PartitionedRaftModel(LEASES, config)).violated


@pytest.mark.parametrize("key", FAST_PINS, ids=lambda k: "-".join(map(str, k)))
def test_the_reference_backend_reproduces_the_pins(key):
    preset, config, symmetry = partition_config_of(key)
    report = explore(preset, config, symmetry)
    check_against_pins(report, PINNED_PARTITIONS[key])
    model = build_model(PRESETS[preset].protocol, config)
    # Every counterexample is a real trace: replaying its actions reproduces the finding.
    for result in report.results.values():
        if result.found and ALL_BY_NAME[result.name].kind == "always":
            state = model.initial_state()
            for action in result.actions:
                assert model.why_not(state, action) is None
                before, state = state, model.apply(state, action)
            prop = ALL_BY_NAME[result.name]
            assert prop.check(before, state) if prop.on == "step" else prop.check(state)


@pytest.mark.deep
@pytest.mark.parametrize("key", [k for k in PINNED_PARTITIONS if k not in FAST_PINS], ids=lambda k: "-".join(map(str, k)))
def test_the_deep_pins(key):
    preset, config, symmetry = partition_config_of(key)
    check_against_pins(run(CheckRequest(preset, config, symmetry=symmetry)), PINNED_PARTITIONS[key])


def test_two_workers_reproduce_one():
    key = ('raft', 2, 2, 1, 1, 1, True)
    preset, config, symmetry = partition_config_of(key)
    two = run(CheckRequest(preset, config, symmetry=symmetry, workers=2, chunk=13))
    check_against_pins(two, PINNED_PARTITIONS[key])


def test_the_simulation_stays_inside_the_partitioned_space():
    key = ('raft-lease-reads-without-check-quorum', 3, 2, 2, 0, 1, True)
    preset, config, symmetry = partition_config_of(key)
    report = simulate(build_model(PRESETS[preset].protocol, config), preset, walks=40, seed=1, symmetry=symmetry)
    assert 0 < report.states <= PINNED_PARTITIONS[key]["states"]
    for name, result in report.results.items():
        if result.found:
            assert result.length >= PINNED_PARTITIONS[key]["lengths"][name]


def test_no_partition_no_flag_is_the_raft_model_unchanged():
    assert type(build_model(RAFT, Config())) is RaftModel
    assert type(build_model(RAFT, Config(max_partitions=1))) is PartitionedRaftModel
    assert type(build_model(LEASES, Config())) is PartitionedRaftModel
    assert Config(max_partitions=0).to_mapping() == Config().to_mapping() and "max_partitions" not in Config().to_mapping()


def test_what_cannot_run_partitions_says_why():
    with pytest.raises(ValueError, match="bookkeeper model has none yet"):
        build_model(PRESETS["bookkeeper"].protocol, Config(max_partitions=1))
    with pytest.raises(ValueError, match="rpc network only"):
        build_model(LEASES, Config(network="async"))
    # The raft model's partitions, check_quorum and lease_reads are compiled (the fast backend's pins:
    # tests/checker/test_fast_partitions.py).
    assert unsupported(build_model(RAFT, Config(max_partitions=1))) is None
    assert unsupported(build_model(Protocol(check_quorum=True), Config())) is None
    assert unsupported(build_model(LEASES, Config(max_partitions=2))) is None
    assert "model-only" in model_only(LEASES) and "model-only" in model_only(STALE)
    result = CliRunner().invoke(main, ["check", "--protocol", "bookkeeper", "--max-partitions", "1"])
    assert result.exit_code == 2 and "bookkeeper model has none yet" in result.output


def test_the_tour_checks_the_lease_presets_where_their_bug_shows():
    top = tour_config("raft-lease-reads-without-check-quorum", DEFAULT_CONFIG)
    assert (top.max_generation, top.max_log, top.max_crashes, top.max_partitions) == (2, 2, 0, 1)
    assert shows("raft-lease-reads-without-check-quorum", "LeaseReadNeverStale", top)
    assert not shows("raft-lease-reads-without-check-quorum", "LeaseReadNeverStale",
                     Config(max_generation=2, max_log=2, max_crashes=1))  # no partition: no stale read
    results = [(name, explore(name, tour_config(name, DEFAULT_CONFIG), True))
               for name in ("raft-lease-reads", "raft-lease-reads-without-check-quorum")]
    verdict = judge(results)
    assert verdict.problems == [] and verdict.not_shown == [] and verdict.seen == 1
    assert NEEDS[("raft-lease-reads-without-check-quorum", 3)] == {"LeaseReadNeverStale": ((2, 2, 0, 1),)}


def test_witnesses_the_flags_rule_out_are_named():
    assert witness_needs("LeaseHolderPartitioned", LEASES, Config()) == "max_partitions >= 1"
    assert "check_quorum=false" in witness_needs("LeaderChangeWithUncommitted", LEASES, Config(max_partitions=1))
    assert "max_partitions >= 1" in witness_needs("UncommittedTruncated", STALE, Config(max_crashes=0))
    assert "max_partitions >= 1" in witness_needs("LeaderChangeWithUncommitted", STALE, Config())
    assert witness_needs("LeaderChangeWithUncommitted", STALE, Config(max_partitions=1)) is None
    assert witness_needs("LeaderChangeWithUncommitted", RAFT, Config(max_crashes=0)) is None


@pytest.mark.parametrize("name", ["raft-lease-reads", "raft-lease-reads-without-check-quorum"])
@pytest.mark.parametrize("config", [Config(max_generation=2, max_log=1), Config(max_generation=2, max_log=1, max_crashes=0),
                                    Config(max_generation=2, max_log=2, max_crashes=0, max_partitions=1)],
                         ids=["crash", "nothing", "partition"])
def test_every_witness_is_reached_or_ruled_out_by_name(name, config):
    from hwm.checker.verdict import missed_witnesses
    report = explore(name, config, True)
    assert missed_witnesses(report, PRESETS[name].protocol, config) == []


def test_the_command_line_partitions_and_saves_the_stale_read(tmp_path):
    result = CliRunner().invoke(main, ["check", "--protocol", "raft-lease-reads-without-check-quorum",
                                       "--max-generation", "2", "--max-log", "2", "--max-crashes", "0",
                                       "--max-partitions", "1", "--save", str(tmp_path), "--progress", "never"])
    assert result.exit_code == 1, result.output
    assert "LeaseReadNeverStale          violated in 8 steps" in result.output
    assert "partition(S1)" in result.output and "max_partitions=1" in result.output
    saved = tmp_path / "raft-lease-reads-without-check-quorum.LeaseReadNeverStale.json"
    replay = CliRunner().invoke(main, ["replay", "--brief", str(saved)])
    assert replay.exit_code == 0 and "cut off" in replay.output
    fixed = CliRunner().invoke(main, ["replay", str(saved), "--protocol", "raft-lease-reads"])
    assert fixed.exit_code == 0 and "holds" in fixed.output, fixed.output
    assert "the network cuts S1 off from every other server" in fixed.output
    assert "S1 steps down (check_quorum): it reaches 1 of 3 servers" in fixed.output


def test_liveness_and_itf_refuse_partitions_with_a_reason(tmp_path):
    from hwm.checker.itf_trace import itf_of_trace
    from hwm.checker.liveness import refusal
    from hwm.properties.trace import TraceError, load
    assert "heal is not a fair action" in refusal(build_model(RAFT, Config(servers=2, max_partitions=1)))
    assert refusal(build_model(RAFT, Config(servers=2))) is None
    trace = load(__import__("pathlib").Path(__file__).parents[2] / "counterexamples"
                 / "raft-lease-reads-without-check-quorum.json")
    with pytest.raises(TraceError, match="not a partition's cut"):
        itf_of_trace(trace)
