"""Partitions in Kafka's and ZAB's models (model/kafka_partition.py, model/zab_partition.py): guards
against enumeration, the encoding and symmetry with the cut, the controller's fencing and ZAB's
step-down, the catalogue trace, the tour's judgement, and the refusals of the engines that do not
cover them. The pins (tests/pinned.py PINNED_PARTITIONS) run in tests/model/test_partition.py."""

import random
from dataclasses import replace
from itertools import permutations

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hwm.checker.backend import BackendUnavailable
from hwm.checker.expectations import NEEDS, judge, shows
from hwm.checker.fast import unsupported
from hwm.checker.run import CheckRequest, run as search
from hwm.checker.simulation import simulate
from hwm.checker.verdict import DEFAULT_CONFIG, missed_witnesses, tour_config, witness_needs
from hwm.cli import main
from hwm.model.kafka import KafkaModel
from hwm.model.kafka_partition import PartitionedKafkaModel
from hwm.model.registry import build_model
from hwm.model.state import FOLLOWER, LEADER, Config
from hwm.model.zab import ZabModel
from hwm.model.zab_partition import PartitionedZabModel
from hwm.properties.acked import acknowledged_write_kept
from hwm.properties.protocol import PRESETS, model_only
from hwm.properties.step_down import leader_steps_down
from tests.explored import explore
from tests.pinned import PINNED_PARTITIONS, check_against_pins, partition_config_of

KAFKA = PRESETS["kafka"].protocol
UNFENCED = PRESETS["kafka-without-controller-fencing"].protocol
ZAB = PRESETS["zab"].protocol
STEP_DOWN = PRESETS["zab-step-down"].protocol
TOUR = Config(max_generation=2, max_log=1, max_crashes=0, max_partitions=1)
WIDE = Config(max_generation=3, max_log=2, max_crashes=1, max_partitions=2)
MODELS = [
    PartitionedKafkaModel(KAFKA, WIDE),
    PartitionedKafkaModel(UNFENCED, WIDE),
    PartitionedKafkaModel(replace(KAFKA, log_flush="never", late_leader_and_isr=True), WIDE),
    PartitionedZabModel(ZAB, WIDE),
    PartitionedZabModel(STEP_DOWN, WIDE),
    PartitionedZabModel(replace(STEP_DOWN, zab_ack_before_persist=True), Config(servers=4, max_generation=3,
                                                                                max_log=2, max_crashes=2,
                                                                                max_partitions=2)),
]


def random_walk(model, rng, steps):
    state = model.initial_state()
    for _ in range(steps):
        choices = list(model.successors(state))
        if not choices:
            break
        state = rng.choice(choices)[1]
    return state


def run(model, actions, state=None):
    state = model.initial_state() if state is None else state
    for action in actions:
        assert model.why_not(state, action) is None, (action, model.why_not(state, action))
        state = model.apply(state, action)
    return state


def renamed(state, order):
    """The same cluster with servers renamed: new position j is old server order[j]."""
    def server(old):
        s = state.servers[old]
        changes = {"match": tuple(s.match[k] for k in order) if s.match else ()}
        if hasattr(s, "isr"):  # Kafka: a leader's ISR copy and the leader a follower fetches from
            changes["isr"] = tuple(s.isr[k] for k in order) if s.isr else ()
            changes["leader"] = order.index(s.leader - 1) + 1 if s.leader else 0
        return s._replace(**changes)
    out = state._replace(servers=tuple(server(old) for old in order), cut=tuple(state.cut[old] for old in order))
    if hasattr(state, "synced"):  # ZAB: per-server tuples, and the synced bit sets name servers
        def mask(m):
            return (m & 0x80) | sum(1 << j for j, old in enumerate(order) if m >> old & 1)
        out = out._replace(synced=tuple(mask(state.synced[old]) for old in order),
                           durable=tuple(state.durable[old] for old in order),
                           epochs=tuple(state.epochs[old] for old in order))
    return out


@settings(max_examples=30, deadline=None, derandomize=True)
@given(which=st.integers(0, len(MODELS) - 1), seed=st.integers(0, 2**32), steps=st.integers(0, 30))
def test_successors_are_exactly_the_actions_the_guards_enable(which, seed, steps):
    model = MODELS[which]
    state = random_walk(model, random.Random(seed), steps)
    enabled = [action for action, _ in model.successors(state)]
    assert len(enabled) == len(set(enabled))
    assert set(enabled) == {a for a in model.action_table() if model.why_not(state, a) is None}


@settings(max_examples=30, deadline=None, derandomize=True)
@given(which=st.integers(0, len(MODELS) - 1), seed=st.integers(0, 2**32), steps=st.integers(0, 30))
def test_encoding_round_trips_and_symmetry_keeps_the_cut(which, seed, steps):
    model = MODELS[which]
    state = random_walk(model, random.Random(seed), steps)
    assert model.decode(model.encode(state, symmetry=False)) == state
    orders = list(permutations(range(model.n)))
    assert model.decode(model.encode(state)) in {renamed(state, order) for order in orders}
    other = renamed(state, random.Random(seed).choice(orders))
    assert model.fingerprint(other) == model.fingerprint(state)
    assert sorted(model.fingerprint(s) for _, s in model.successors(other)) == sorted(
        model.fingerprint(s) for _, s in model.successors(state))


class _KafkaCutOutOfTheKey(PartitionedKafkaModel):
    """A planted bug: the cut left out of the symmetry key (only the partitions spent are encoded)."""

    def _keys(self, s):
        return [key[:-1] + b"\0" for key in super()._keys(s)]


class _ZabCutOutOfTheKey(PartitionedZabModel):
    def _keys(self, s):
        return [key[:-1] + b"\0" for key in super()._keys(s)]


@pytest.mark.parametrize("model, prefix", [
    # Without fencing the partition changes nothing but the cut: only the key tells the three cuts apart.
    (PartitionedKafkaModel(UNFENCED, TOUR), [("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1)]),
    (PartitionedZabModel(STEP_DOWN, TOUR), [("elect", 0, (0, 1)), ("sync", 0, 1)]),
], ids=["kafka", "zab"])
def test_the_cut_is_part_of_the_symmetry_class(model, prefix):
    start = run(model, prefix)
    # Cutting off the leader and cutting off the lagging server are different states; cutting off S2
    # and S3 differ too (S2 holds what S3 lacks). A key without the cut would merge them.
    cuts = [run(model, [("partition", k)], start) for k in range(3)]
    assert len({model.fingerprint(s) for s in cuts}) == 3
    healed = run(model, [("heal",)], cuts[2])
    assert model.fingerprint(healed) != model.fingerprint(start)  # one partition spent
    planted = (_KafkaCutOutOfTheKey if isinstance(model, PartitionedKafkaModel) else _ZabCutOutOfTheKey)(
        model.protocol, model.config)
    assert len({planted.fingerprint(run(planted, [("partition", k)], run(planted, prefix))) for k in range(3)}) < 3


# ------------------------------------------------------------------ Kafka
JEPSEN = [("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1), ("partition", 0), ("shrink_isr", 0, 2),
          ("elect", 2, (2,))]  # counterexamples/kafka-without-controller-fencing.json


def test_without_fencing_the_cut_off_leader_shrinks_its_own_isr_and_acknowledges():
    model = PartitionedKafkaModel(UNFENCED, TOUR)
    cut = run(model, JEPSEN[:4])
    assert all(s.in_isr for s in cut.servers) and cut.servers[0].role == LEADER  # nothing expires
    shrunk = run(model, JEPSEN[4:5], cut)
    assert shrunk.servers[0].isr == (True, True, False) and shrunk.servers[2].in_isr  # the controller's ISR is whole
    assert shrunk.acked == {(1, 1)} and shrunk.servers[0].hwm == 1
    elected = run(model, JEPSEN[5:], shrunk)
    assert "without entry 1@g1" in acknowledged_write_kept(shrunk, elected)


def test_with_fencing_the_partition_expires_the_session_and_the_shrink_cannot_reach_the_controller():
    model = PartitionedKafkaModel(KAFKA, TOUR)
    cut = run(model, JEPSEN[:4])
    assert not cut.servers[0].in_isr and cut.servers[1].in_isr and cut.servers[2].in_isr
    assert "cut off from the controller" in model.why_not(cut, ("shrink_isr", 0, 2))
    assert "S1 is cut off from the controller" in model.why_not(cut, ("elect", 1, (0, 1)))
    assert "two sides of the partition" in model.why_not(cut, ("replicate", 0, 1))
    # The controller moves leadership away; on healing the fenced leader learns of it and follows.
    moved = run(model, [("elect", 1, (1, 2)), ("heal",)], cut)
    assert moved.servers[0].role == FOLLOWER and moved.servers[0].leader == 2 and moved.servers[0].generation == 2
    # Cutting off a follower: it leaves the ISR and the leader counts the smaller ISR at once.
    follower_cut = run(model, [("elect", 0, (0, 1, 2)), ("write", 0), ("replicate", 0, 1), ("partition", 2)])
    assert not follower_cut.servers[2].in_isr and follower_cut.servers[0].isr == (True, True, False)
    assert follower_cut.servers[0].hwm == 1 and follower_cut.acked == {(1, 1)}


def test_on_healing_a_fenced_broker_learns_the_epoch_it_missed():
    actions = [("elect", 0, (0, 1, 2)), ("partition", 2), ("elect", 1, (0, 1)), ("heal",)]
    fenced = run(PartitionedKafkaModel(KAFKA, TOUR), actions)
    assert (fenced.servers[2].generation, fenced.servers[2].leader) == (2, 2)  # follows S2 in epoch 2
    unfenced = run(PartitionedKafkaModel(UNFENCED, TOUR), actions)
    assert (unfenced.servers[2].generation, unfenced.servers[2].leader) == (1, 1)  # still S1's, of epoch 1


def test_the_last_isr_replica_stays_and_leads_again_after_the_heal():
    model = PartitionedKafkaModel(KAFKA, Config(servers=2, max_generation=2, max_log=1, max_crashes=0,
                                                max_partitions=1))
    s = run(model, [("elect", 0, (0,)), ("write", 0), ("shrink_isr", 0, 1), ("partition", 0)])
    assert s.servers[0].in_isr and not s.servers[1].in_isr
    healed = run(model, [("heal",)], s)
    assert healed.servers[0].role == LEADER  # nobody else could be elected: it is still the controller's leader


def test_a_cut_off_broker_restarts_after_the_heal():
    model = PartitionedKafkaModel(KAFKA, Config(max_generation=2, max_log=1, max_crashes=1, max_partitions=1))
    s = run(model, [("partition", 2), ("crash", 2)])
    assert "restarts once the partition heals" in model.why_not(s, ("restart", 2))
    assert model.why_not(run(model, [("heal",)], s), ("restart", 2)) is None


class _FencingWithoutConditionalIsr(PartitionedKafkaModel):
    """A planted bug: the session expires, but the cut-off leader's shrink takes effect on its own."""

    def _shrinks_alone(self, s, l):
        return bool(s.cut[l])

    def guard_shrink_isr(self, s, l, f):
        if s.cut[l] and s.servers[l].role == LEADER and s.servers[l].alive and l != f:
            return None if s.servers[l].isr[f] and s.servers[l].match[f] < len(s.servers[l].log) else "in sync"
        return super().guard_shrink_isr(s, l, f)

    def actions(self, s, bounds_hit=None):
        yield from super().actions(s, bounds_hit)
        if any(s.cut):
            k = s.cut.index(True)
            leader = s.servers[k]
            if leader.alive and leader.role == LEADER:
                yield from (("shrink_isr", k, f) for f in range(self.n)
                            if f != k and leader.isr[f] and leader.match[f] < len(leader.log))


def test_fencing_alone_does_not_save_a_leader_that_shrinks_on_its_own():
    # The session expiry takes S1 out of the controller's ISR, but S1's own shrink still acknowledges:
    # the conditional ISR update is the half that keeps acks=all safe.
    planted = _FencingWithoutConditionalIsr(KAFKA, TOUR)
    shrunk = run(planted, JEPSEN[:5])
    assert shrunk.acked == {(1, 1)}
    assert "without entry 1@g1" in acknowledged_write_kept(shrunk, run(planted, [("elect", 2, (1, 2))], shrunk))


class _ConditionalIsrWithoutFencing(PartitionedKafkaModel):
    """The other half alone: the cut-off leader's shrink cannot reach the controller, but no session expires."""

    def _expire_session(self, s, k):
        return s

    def _reregister(self, s, k):
        return s


@pytest.mark.deep
def test_the_search_catches_the_planted_half_and_the_conditional_write_alone_holds():
    planted = search(CheckRequest("planted"), model=_FencingWithoutConditionalIsr(KAFKA, TOUR))
    assert "AcknowledgedWriteKept" in planted.violated
    assert not search(CheckRequest("kafka"), model=PartitionedKafkaModel(KAFKA, TOUR)).violated
    # docs/systems.md: the conditional ISR update carries the safety, the fencing the availability.
    half = _ConditionalIsrWithoutFencing(KAFKA, replace(TOUR, max_generation=3))
    assert not search(CheckRequest("half"), model=half).violated


# -------------------------------------------------------------------- ZAB
def test_check_quorum_steps_the_zab_leader_down_in_the_step_that_takes_its_quorum():
    model = PartitionedZabModel(STEP_DOWN, TOUR)
    established = run(model, [("elect", 0, (0, 1)), ("sync", 0, 1)])
    cut = run(model, [("partition", 0)], established)
    assert cut.servers[0].role == FOLLOWER and cut.servers[0].generation == 1 and cut.synced[0] == 0
    assert "lost its quorum" in leader_steps_down(established, cut)
    kept = run(model, [("partition", 2)], established)  # a follower cut off: the leader keeps a quorum
    assert kept.servers[0].role == LEADER
    # Without the rule the cut-off leader keeps leading and commits nothing: it reaches no follower.
    alone = run(PartitionedZabModel(ZAB, TOUR), [("elect", 0, (0, 1)), ("sync", 0, 1), ("partition", 0), ("write", 0)])
    assert alone.servers[0].role == LEADER and alone.servers[0].hwm == 0
    assert "two sides of the partition" in PartitionedZabModel(ZAB, TOUR).why_not(alone, ("replicate", 0, 1))


def test_two_crashes_take_the_zab_leaders_quorum_too():
    model = PartitionedZabModel(STEP_DOWN, Config(max_generation=1, max_log=1, max_crashes=2))
    s = run(model, [("elect", 0, (0, 1)), ("sync", 0, 1), ("crash", 1)])
    assert s.servers[0].role == LEADER
    assert run(model, [("crash", 2)], s).servers[0].role == FOLLOWER
    assert type(build_model(STEP_DOWN, Config())) is PartitionedZabModel
    assert type(build_model(ZAB, Config())) is ZabModel and type(build_model(KAFKA, Config())) is KafkaModel


def test_no_catalogue_property_fails_without_the_zab_step_down():
    # docs/systems.md: a leader cut off from its quorum commits nothing either way.
    report = explore("zab-step-down", TOUR)
    assert not report.violated and report.results["LeaderStepsDown"].found
    assert not search(CheckRequest("zab"), model=build_model(ZAB, TOUR)).violated


@pytest.mark.deep
def test_a_leader_read_property_fails_in_zab_with_and_without_the_step_down():
    # docs/systems.md: raft's LeaseReadNeverStale, applied to ZAB, fails alike under both values of the
    # flag and without a partition: ZooKeeper's election is not held back by a live leader, and
    # ZooKeeper promises no such read (sync() first).
    from hwm.properties.leases import LEASES
    config = Config(max_generation=2, max_log=2, max_crashes=0, max_partitions=1)
    for protocol in (ZAB, STEP_DOWN):
        model = build_model(protocol, config)
        model.properties = model.properties + LEASES[:1]
        result = search(CheckRequest("zab"), model=model).results["LeaseReadNeverStale"]
        assert result.found and result.length == 9
        assert not any(action[0] == "partition" for action in result.actions)


# ------------------------------------------------------- engines and verdicts
def test_two_workers_and_the_simulation_reproduce_the_partitioned_spaces():
    key = ("kafka", 2, 2, 1, 1, 1, True)
    preset, config, symmetry = partition_config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    check_against_pins(search(CheckRequest(preset, symmetry=symmetry, workers=2, chunk=13), model=model),
                       PINNED_PARTITIONS[key])
    key = ("kafka-without-controller-fencing", 3, 2, 1, 0, 1, True)
    preset, config, symmetry = partition_config_of(key)
    report = simulate(build_model(PRESETS[preset].protocol, config), preset, walks=30, seed=1, symmetry=symmetry)
    assert 0 < report.states <= PINNED_PARTITIONS[key]["states"]
    for name, result in report.results.items():
        if result.found:
            assert result.length >= PINNED_PARTITIONS[key]["lengths"][name]


@pytest.mark.deep
@pytest.mark.parametrize("key", [("zab-step-down", 2, 2, 1, 1, 1, True), ("kafka-without-controller-fencing", 2, 2, 1, 1, 1, True),
                                 ("zab", 3, 2, 1, 0, 1, True)], ids=lambda k: k[0])
def test_two_workers_reproduce_every_partitioned_preset(key):
    preset, config, symmetry = partition_config_of(key)
    model = build_model(PRESETS[preset].protocol, config)
    check_against_pins(search(CheckRequest(preset, symmetry=symmetry, workers=2, chunk=13), model=model),
                       PINNED_PARTITIONS[key])


def test_the_tour_checks_the_partition_presets_where_they_show():
    for name in ("kafka-without-controller-fencing", "zab-step-down"):
        assert tour_config(name, DEFAULT_CONFIG) == Config(max_generation=2, max_log=1, max_crashes=0, max_partitions=1)
    assert shows("kafka-without-controller-fencing", "AcknowledgedWriteKept", TOUR)
    assert not shows("kafka-without-controller-fencing", "AcknowledgedWriteKept", replace(TOUR, max_partitions=0))
    assert set(NEEDS[("kafka-without-controller-fencing", 3)]) == PRESETS["kafka-without-controller-fencing"].breaks
    # The tour's judgement of kafka-without-controller-fencing runs in tests/cli/test_cli.py's tour (and its
    # pin under deep): its search takes seconds on the reference backend. zab-step-down's is cheap.
    report = explore("zab-step-down", tour_config("zab-step-down", DEFAULT_CONFIG), True)
    check_against_pins(report, PINNED_PARTITIONS[("zab-step-down", 3, 2, 1, 0, 1, True)])
    verdict = judge([("zab-step-down", report)])
    assert verdict.problems == [] and verdict.not_shown == []


def test_the_step_down_witness_is_reached_or_ruled_out_by_name():
    assert witness_needs("LeaderStepsDown", STEP_DOWN, Config(max_crashes=1)) == "max_partitions >= 1 or max_crashes >= 2"
    assert witness_needs("LeaderStepsDown", STEP_DOWN, Config(max_crashes=2)) is None
    assert witness_needs("LeaderStepsDown", STEP_DOWN, Config(servers=1, max_partitions=1)) == "servers >= 2"
    # ZAB's step-down refuses no vote: a leader change with an older leader's entries needs no cut.
    assert witness_needs("LeaderChangeWithUncommitted", STEP_DOWN, Config(max_crashes=0)) is None
    small = Config(max_generation=1, max_log=1, max_crashes=1)  # one crash leaves the leader its quorum
    report = explore("zab-step-down", small)
    assert missed_witnesses(report, STEP_DOWN, small) == []
    assert "LeaderStepsDown" in report.unreached


def test_what_does_not_cover_the_partitioned_models_says_why(tmp_path):
    from hwm.checker.itf_trace import itf_of_trace
    from hwm.checker.liveness import refusal
    from hwm.proofs.plan import unencoded
    from hwm.properties.trace import TraceError, load
    # Kafka's and ZAB's partitions, and ZAB's check_quorum, are compiled (tests/checker/test_fast_partitions.py).
    assert unsupported(build_model(KAFKA, TOUR)) is None and unsupported(build_model(UNFENCED, TOUR)) is None
    assert unsupported(build_model(ZAB, TOUR)) is None
    assert unsupported(build_model(STEP_DOWN, Config())) is None
    assert unsupported(build_model(UNFENCED, Config())) is None  # without a cut the flag changes nothing
    # hwm prove encodes both partitioned models (tests/proofs/test_kafka_partitions.py, test_zab_partitions.py).
    assert unencoded(UNFENCED) is None and unencoded(STEP_DOWN) is None
    for protocol in (UNFENCED, STEP_DOWN):
        with pytest.raises(ValueError, match="rpc network only"):
            build_model(protocol, Config(network="async"))
    assert "heal is not a fair action" in refusal(build_model(KAFKA, replace(TOUR, servers=2)))
    trace = load(__import__("pathlib").Path(__file__).parents[2] / "counterexamples"
                 / "kafka-without-controller-fencing.json")
    with pytest.raises(TraceError, match="not a partition's cut"):
        itf_of_trace(trace)
    assert "model-only" in model_only(UNFENCED) and "model-only" in model_only(STEP_DOWN)
    # hwm prove finds the cut-off leader's bug too: a reachable CTI (exit 1, a violation found).
    result = CliRunner().invoke(main, ["prove", "--protocol", "kafka-without-controller-fencing", "--part", "induction"])
    assert result.exit_code == 1 and "partition(S1)" in result.output, result.output


@pytest.mark.deep
def test_the_command_line_finds_and_saves_the_cut_off_leaders_acknowledgement(tmp_path):
    args = ["--max-generation", "2", "--max-log", "1", "--max-crashes", "0", "--max-partitions", "1",
            "--progress", "never"]
    result = CliRunner().invoke(main, ["check", "--protocol", "kafka-without-controller-fencing", *args,
                                       "--save", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "AcknowledgedWriteKept        violated in 6 steps" in result.output
    saved = tmp_path / "kafka-without-controller-fencing.AcknowledgedWriteKept.json"
    fixed = CliRunner().invoke(main, ["replay", str(saved), "--protocol", "kafka"])
    assert fixed.exit_code == 0 and "blocked at step 5" in fixed.output, fixed.output
    assert "session expires and the controller fences it" in fixed.output
    safe = CliRunner().invoke(main, ["check", "--protocol", "zab-step-down", *args])
    assert safe.exit_code == 0, safe.output
    assert "LeaderStepsDown" in safe.output
