"""Kafka's model, flag by flag, on small hand-built states taken from the KIPs' examples."""

import random
from dataclasses import replace

import pytest

from hwm.model.actions import BoundHit
from hwm.model.registry import build_model
from hwm.model.kafka import (NO_LEADER, KafkaModel, KafkaServer, KafkaState, diverged_at, end_offset_for,
                         end_offset_kip101, epoch_cache, truncation_offset)
from hwm.model.state import FOLLOWER, LEADER, Config
from hwm.properties.catalogue import BY_NAME, CATALOGUE
from hwm.properties.protocol import (FLAG_VALUES, KAFKA, PRESETS, RAFT, Protocol, ProtocolError, flags_of,
                                 presets_of)
from hwm.counterexamples.build import HERE
from hwm.checker.replay import replay_on_model
from hwm.checker.run import CheckRequest, run as search
from hwm.properties.trace import load
from tests.explored import explore

RULES = ("own-hwm", "leader-epoch", "leader-epoch-kip279", "fenced")


def replica(epoch, log=(), hwm=0, role=FOLLOWER, alive=True, match=None, isr=True, leader=NO_LEADER,
            truncating=False, n=3):
    if role == LEADER and match is None:
        match = (0,) * n
    return KafkaServer(epoch, role, tuple(log), hwm, alive, tuple(match) if role == LEADER else (), isr, leader,
                       truncating)


def cluster(*servers, reads=(), crashes=0):
    """A leader built without its own copy of the ISR gets the controller's (a current leader's)."""
    isr = tuple(s.in_isr for s in servers)
    servers = tuple(s._replace(isr=isr) if s.role == LEADER and not s.isr else s for s in servers)
    return KafkaState(servers, frozenset(reads), crashes)


def model(protocol=KAFKA, **config):
    bounds = dict(servers=3, max_generation=9, max_log=9, max_crashes=9)
    bounds.update(config)
    return build_model(protocol, Config(**bounds))


def rule(name, **flags):
    return replace(KAFKA, follower_truncation=name, **flags)


def run(m, state, *actions):
    for action in actions:
        reason = m.why_not(state, action)
        assert reason is None, f"{action} not enabled: {reason}"
        state = m.apply(state, action)
    return state


# ------------------------------------------------------------------ flags and presets
def test_build_model_picks_the_kafka_model():
    assert isinstance(model(), KafkaModel)
    assert not isinstance(model(RAFT), KafkaModel)


def test_kafka_flags_belong_to_kafka_and_raft_flags_to_raft():
    assert flags_of("kafka") == ("follower_truncation", "unclean_election", "late_leader_and_isr", "min_insync_replicas",
                                 "log_flush", "controller_fencing")
    assert "follower_truncation" not in flags_of("raft") and "quorum" in flags_of("raft")
    with pytest.raises(ProtocolError, match="'unclean_election' does not apply to system 'raft'"):
        Protocol(unclean_election=True)
    with pytest.raises(ProtocolError, match="'restart' does not apply to system 'kafka'"):
        Protocol(system="kafka", restart="truncate-to-own-hwm")


def test_one_preset_per_historical_step_plus_the_safe_one():
    kafka = {name: PRESETS[name].protocol for name in presets_of("kafka")}
    assert {p.follower_truncation for p in kafka.values()} == set(RULES) | {"last-fetched-epoch"}
    assert set(FLAG_VALUES["follower_truncation"]) == set(RULES) | {"last-fetched-epoch"}
    # KIP-320's first attempt shows its defect only with LeaderAndIsr requests that arrive late.
    assert PRESETS["kafka-kip320-first-try"].protocol == replace(
        KAFKA, follower_truncation="last-fetched-epoch", late_leader_and_isr=True)
    assert [name for name in kafka if not PRESETS[name].broken] == ["kafka"]
    assert PRESETS["kafka-unclean-election"].protocol == replace(KAFKA, unclean_election=True)
    for name in kafka:
        assert "KIP" in PRESETS[name].reference or "KAFKA-" in PRESETS[name].reference


# ------------------------------------------------------------------ the leader-epoch cache
def test_epoch_cache_is_epoch_to_start_offset():
    # KIP-101's LogTest: cache.assign(0, 0); assign(1, 5); assign(2, 10) over 15 messages.
    log = (0,) * 5 + (1,) * 5 + (2,) * 5
    assert epoch_cache(log) == ((0, 0), (1, 5), (2, 10))
    assert epoch_cache(()) == ()


def test_offsets_for_leader_epoch_kip101():
    # A leader of epoch 2 whose epoch 1 ran from offset 1 (the KIP-101 walk-through):
    # its own latest epoch -> its LEO; an older epoch -> the start of the next one.
    log = (1, 1, 1, 1, 2, 2, 2)
    assert end_offset_kip101(log, 2) == 7
    assert end_offset_kip101(log, 1) == 4
    assert end_offset_kip101(log, 0) == 0
    assert end_offset_kip101(log, 3) is None  # UNDEFINED: no epoch after 3


def test_offsets_for_leader_epoch_kip279_names_the_epoch():
    log = (1, 3, 3)
    assert end_offset_for(log, 2) == (1, 1)  # the largest epoch <= 2 is 1, which ends at 1
    assert end_offset_for(log, 3) == (3, 3)
    assert end_offset_for(log, 0) == (None, 0)  # KAFKA-7415: the start of the first epoch
    assert end_offset_kip101(log, 2) == 1  # KIP-101: the start of epoch 3, which is also 1 here


def test_kip279_divergence_truncation_point():
    # KIP-279: the follower's last epoch 2 is unknown to the leader, which went from
    # epoch 1 straight to epoch 3. KIP-101 truncates at the start of epoch 3 and keeps the
    # follower's 1@e2, which the leader's 1@e1 contradicts; KIP-279 truncates to 0.
    follower, leader = (2,), (1, 3)
    assert truncation_offset("leader-epoch", follower, 0, leader) == 1
    assert truncation_offset("leader-epoch-kip279", follower, 0, leader) == 0
    assert truncation_offset("fenced", follower, 0, leader) == 0
    assert truncation_offset("own-hwm", follower, 0, leader) == 0


def test_kip279_truncation_asks_again_when_the_follower_lacks_the_named_epoch():
    # Two fast leader changes each way: the follower holds 1@e1, 2@e3, the leader 1@e2, 2@e4.
    # Asked for epoch 3, the leader names epoch 2 (ending at 1); the follower has no epoch 2, so
    # it truncates to the end of its epoch 1 (offset 1) and asks again for epoch 1, which the
    # leader does not have at all: truncate to 0 (AbstractFetcherThread, truncationCompleted =
    # false, then KAFKA-7415's answer). Stopping after the first answer kept 1@e1 under 2@e4.
    follower, leader = (1, 3), (2, 4)
    assert end_offset_for(leader, 3) == (2, 1) and end_offset_for(follower, 2) == (1, 1)
    for name in ("leader-epoch-kip279", "fenced"):
        assert truncation_offset(name, follower, 0, leader) == 0


def test_safe_kafka_keeps_logs_matching_after_fast_leader_changes_on_two_servers():
    # The space where the single-answer truncation diverged (LogMatching in 9 steps).
    report = explore("kafka", Config(servers=2, max_generation=4, max_log=3, max_crashes=0))
    assert not report.violated, report.violated


def test_truncation_to_own_hwm_drops_what_the_hwm_has_not_reached():
    # KIP-101 scenario 1: the follower holds m2 but its HW still says 1.
    assert truncation_offset("own-hwm", (1, 1), 1, (1, 1)) == 1
    for name in RULES[1:]:
        assert truncation_offset(name, (1, 1), 1, (1, 1)) == 2  # the leader's epoch 1 ends at 2


# ------------------------------------------------------------------ high watermark and ISR
def test_hwm_is_the_minimum_leo_over_the_isr():
    leader = replica(1, [1, 1], role=LEADER, match=(0, 2, 1), leader=1)
    state = cluster(leader, replica(1, [1, 1], leader=1), replica(1, [1], leader=1))
    after = model().apply(state, ("shrink_isr", 0, 2))  # S3 lags: the ISR shrinks, the HW rises
    assert after.servers[2].in_isr is False and after.servers[0].hwm == 2
    m = model()
    state = cluster(leader._replace(hwm=0), replica(1, [1, 1], leader=1), replica(1, [1], leader=1))
    assert m.apply(state, ("replicate", 0, 1)).servers[0].hwm == 1  # min(2, 2, 1)


def test_a_deposed_leader_counts_its_own_copy_of_the_isr_not_the_controllers():
    # S1 leads epoch 1 and counts {S1,S2,S3}, the ISR its LeaderAndIsr sent; S2, elected for epoch 2,
    # shrank the controller's ISR to {S1,S3}. S3, which missed epoch 2, fetches S1's entry: over the
    # controller's ISR the HW would cover it, over S1's own copy S2 (at offset 0) holds it back.
    deposed = replica(1, [1], role=LEADER, leader=1)._replace(isr=(True, True, True))
    state = cluster(deposed, replica(2, role=LEADER, leader=2, isr=False), replica(1, leader=1))
    after = model().apply(state, ("replicate", 0, 2))
    assert after.servers[2].log == (1,) and after.servers[0].match == (0, 0, 1)
    assert after.servers[0].hwm == 0 and not after.acked


def test_a_leader_keeps_the_isr_it_writes_and_the_one_it_is_sent():
    m = model()
    state = m.apply(m.initial_state(), ("elect", 0, (0, 1)))  # S3 missed the request, still in the ISR
    assert state.servers[0].isr == (True, True, True)
    state = m.apply(m.apply(state, ("crash", 2)), ("shrink_isr", 0, 2))
    assert state.servers[0].isr == (True, True, False) == tuple(s.in_isr for s in state.servers)
    state = m.apply(m.apply(state, ("restart", 2)), ("replicate", 0, 2))  # S3 reaches the HW: expanded
    assert state.servers[0].isr == (True, True, True) == tuple(s.in_isr for s in state.servers)
    assert m.apply(state, ("crash", 0)).servers[0].isr == ()


def test_hwm_does_not_advance_with_fewer_than_a_majority_in_the_isr():
    leader = replica(1, [1], role=LEADER, leader=1)
    state = cluster(leader, replica(1, leader=1, isr=False), replica(1, leader=1, isr=False))
    assert model().apply(state, ("write", 0)).servers[0].hwm == 0


def test_a_follower_that_reaches_the_hwm_rejoins_the_isr():
    leader = replica(1, [1], hwm=1, role=LEADER, match=(0, 1, 0), leader=1)
    state = cluster(leader, replica(1, [1], leader=1), replica(1, leader=1, isr=False))
    after = model().apply(state, ("replicate", 0, 2))
    assert after.servers[2].in_isr and after.servers[2].log == (1,)


def test_an_in_sync_follower_cannot_be_shrunk():
    leader = replica(1, [1], role=LEADER, match=(0, 1, 1), leader=1)
    state = cluster(leader, replica(1, [1], leader=1), replica(1, [1], leader=1))
    assert "in sync" in model().why_not(state, ("shrink_isr", 0, 1))
    down = state._replace(servers=(leader, state.servers[1]._replace(alive=False), state.servers[2]))
    assert model().why_not(down, ("shrink_isr", 0, 1)) is None  # a dead replica stops fetching


# ------------------------------------------------------------------ election
def test_clean_election_only_from_the_live_isr():
    state = cluster(replica(1, [1], alive=False), replica(1, [1], leader=1), replica(1, isr=False, leader=1))
    reason = model().why_not(state, ("elect", 2, (2,)))
    assert "S3 is not in the ISR {S1,S2}" in reason
    after = run(model(), state, ("elect", 1, (1, 2)))
    assert after.servers[1].role == LEADER and after.servers[1].generation == 2
    assert [s.in_isr for s in after.servers] == [False, True, False]  # the dead S1 leaves the ISR


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_election_only_when_no_isr_replica_is_alive(unclean):
    state = cluster(replica(1, [1], hwm=1, alive=False), replica(1, isr=False, leader=1),
                    replica(1, isr=False, leader=1))
    m = model(replace(KAFKA, unclean_election=unclean))
    reason = m.why_not(state, ("elect", 1, (1, 2)))
    if not unclean:
        assert "unclean leader election is disabled" in reason
        return
    after = run(m, state, ("elect", 1, (1, 2)))
    assert [s.in_isr for s in after.servers] == [False, True, False]  # the new leader alone
    assert after.servers[1].log == ()  # 1@e1, committed on S1, is not on the new leader


def test_max_generation_is_a_bound():
    state = cluster(replica(2), replica(2), replica(2))
    assert isinstance(model(max_generation=2).why_not(state, ("elect", 0, (0,))), BoundHit)


# ------------------------------------------------------------------ truncation on becoming a follower
def test_own_hwm_truncates_at_the_leaderandisr_request():
    # KIP-101 scenario 1: S2 fetched m2 but learns the HW only on its next fetch.
    state = cluster(replica(1, [1, 1], hwm=2, role=LEADER, match=(0, 2, 2), leader=1),
                    replica(1, [1, 1], hwm=1, leader=1), replica(1, [1, 1], hwm=1, leader=1))
    after = run(model(rule("own-hwm")), state, ("elect", 1, (1, 2)))
    assert after.servers[2].log == (1,)  # S3 truncated m2, which S1 had committed
    after = run(model(rule("leader-epoch")), state, ("elect", 1, (1, 2)))
    assert after.servers[2].log == (1, 1) and after.servers[2].truncating


def test_leader_epoch_truncation_happens_at_the_first_fetch():
    # KIP-279's divergence: S2 wrote 1@e2 as leader of epoch 2; S1 leads epoch 3 with [e1, e3].
    state = cluster(replica(3, [1, 3], role=LEADER, leader=1), replica(3, [2], leader=1, truncating=True),
                    replica(3, leader=1))
    kip101 = run(model(rule("leader-epoch")), state, ("replicate", 0, 1)).servers[1]
    assert kip101.log == (2, 3) and not kip101.truncating  # diverged below the epoch-3 entry
    for name in ("leader-epoch-kip279", "fenced"):
        assert run(model(rule(name)), state, ("replicate", 0, 1)).servers[1].log == (1, 3)


def test_a_fetch_past_the_leaders_log_end_truncates_to_it():
    state = cluster(replica(2, [1], role=LEADER, leader=1), replica(2, [1, 1], leader=1), replica(2, leader=1))
    assert run(model(), state, ("replicate", 0, 1)).servers[1].log == (1,)


@pytest.mark.parametrize("name, truncates", [("leader-epoch-kip279", False), ("fenced", True)])
def test_kafka_7164_truncate_after_every_epoch_change(name, truncates):
    # S2 follows S1 in epoch 1 and missed epochs 2 and 3; S1 leads again in epoch 4.
    state = cluster(replica(3, [3], role=LEADER, leader=1), replica(1, [1, 1], leader=1), replica(3, leader=1))
    m = model(rule(name))
    after = m.apply(m.apply(state, ("crash", 0)), ("restart", 0))
    after = run(m, after, ("elect", 0, (0, 1)))
    assert after.servers[1].truncating is truncates
    if truncates:
        assert run(m, after, ("replicate", 0, 1)).servers[1].log == (3,)


def test_kip320_fences_a_fetch_from_another_epoch():
    state = cluster(replica(3, [3], role=LEADER, leader=1), replica(1, [1], leader=1), replica(3, leader=1))
    reason = model(rule("fenced")).why_not(state, ("replicate", 0, 1))
    assert "FENCED_LEADER_EPOCH" in reason and "epoch 1" in reason
    # Before KIP-320 the stale replica fetches, appends nothing (same LEO), and keeps 1@e1.
    after = run(model(rule("leader-epoch-kip279")), state, ("replicate", 0, 1))
    assert after.servers[1].log == (1,)


# KIP-320's first attempt (Kip320FirstTry in J. Gustafson's TLA+ specification of Kafka's replication).
def test_first_attempt_truncates_only_when_a_fetch_finds_the_last_entry_differs():
    assert diverged_at((), (1, 3)) is None  # nothing to check: fetch from offset 0
    assert diverged_at((1, 3), (1, 3, 3)) is None  # the leader's entry at offset 1 is also of epoch 3
    assert diverged_at((1, 2), (1, 3)) == 1  # LOG_TRUNCATION: keep up to the last entry both hold
    assert diverged_at((2,), (1, 3)) == 0
    assert diverged_at((1, 1, 1), (1, 1)) == 2  # longer than the leader: its last entry is not there


def test_first_attempt_does_not_truncate_on_becoming_a_follower_but_on_its_fetch():
    # KIP-279's divergence again: S2 holds 1@e2, S1 leads epoch 3 with [e1, e3].
    state = cluster(replica(2, [1], leader=2), replica(2, [2], role=LEADER, leader=2), replica(2, leader=2))
    m = model(rule("last-fetched-epoch"))
    after = run(m, state, ("crash", 1), ("restart", 1), ("elect", 0, (0, 1)))
    assert after.servers[1].log == (2,) and not after.servers[1].truncating  # no OffsetsForLeaderEpoch
    after = run(m, after, ("write", 0), ("replicate", 0, 1))
    assert after.servers[1].log == (1, 3)  # the fetch's last epoch 2 is not S1's: truncate to 0, fetch


def test_first_attempt_does_not_fence_a_fetch_of_an_older_epoch_but_checks_its_last_entry():
    # KAFKA-7164's state: S2 missed epochs 2 and 3 and still fetches from S1, now leader of epoch 3.
    state = cluster(replica(3, [2], role=LEADER, leader=1), replica(1, [1], leader=1), replica(3, leader=1))
    m = model(rule("last-fetched-epoch"))
    assert m.why_not(state, ("replicate", 0, 1)) is None  # no current leader epoch in the fetch
    after = run(m, state, ("replicate", 0, 1)).servers[1]
    assert (after.generation, after.log) == (1, (2,))  # but its diverged entry is replaced


def test_first_attempt_closes_kafka_7164s_divergence():
    # The catalogue's KAFKA-7164 trace: S2's epoch-1 fetch (step 11) gets LOG_TRUNCATION and takes
    # S1's 1@e2, so the last step, a read of 1@e1 from S2, has nothing new to read.
    trace = load(HERE / "kafka-kip279.json")
    outcome = replay_on_model(trace, FIRST_TRY)
    assert (outcome.kind, outcome.step) == ("blocked", 12) and "already read" in outcome.reason, outcome.summary()
    assert outcome.rows[11][1].servers[1].log == (2,)


FIRST_TRY = {"preset": "kafka", "flags": {"follower_truncation": "last-fetched-epoch"}}


def _first_try(config):
    from hwm.properties.protocol import resolve
    return search(CheckRequest("first-try", symmetry=True), model=build_model(resolve(FIRST_TRY)[1], config))


@pytest.mark.deep  # two spaces of about 40,000 states each: a statement of the docs, not a promise of the tool
def test_first_attempt_holds_as_the_safe_preset_does_on_three_servers():
    # docs/systems-kafka.md: at 3 servers and max_log 2 both broke CommittedOnQuorum in 9 steps while
    # a deposed leader counted the controller's ISR; with each leader counting its own copy both hold,
    # so without late LeaderAndIsr requests the first attempt shows no defect. When the model changes,
    # this and the docs change together.
    config = Config(servers=3, max_generation=3, max_log=2, max_crashes=0)
    first_try, report = _first_try(config), explore("kafka", config)
    assert not first_try.violated and not report.violated
    assert (first_try.states, report.states) == (39518, 39955)


@pytest.mark.deep
@pytest.mark.parametrize("config", [Config(servers=3, max_generation=4, max_log=1, max_crashes=1),
                                    Config(servers=2, max_generation=4, max_log=3, max_crashes=1),
                                    Config(servers=2, max_generation=5, max_log=3, max_crashes=0)])
def test_first_attempt_holds_where_the_model_is_exact(config):
    assert not _first_try(config).violated


def test_restart_learns_the_current_leader_and_truncates_by_rule():
    state = cluster(replica(2, [1, 2], hwm=1, role=LEADER, match=(0, 0, 0), leader=1),
                    replica(1, [1, 1], hwm=1, alive=False, leader=1), replica(2, leader=1))
    after = run(model(rule("own-hwm")), state, ("restart", 1)).servers[1]
    assert (after.generation, after.leader, after.log) == (2, 1, (1,))
    after = run(model(), state, ("restart", 1)).servers[1]
    assert after.log == (1, 1) and after.truncating


# ------------------------------------------------------------------ the model interface
def test_actions_agree_with_why_not_on_random_reachable_states():
    rng = random.Random(7)
    for name in presets_of("kafka"):
        m = model(PRESETS[name].protocol, max_generation=4, max_log=2, max_crashes=1)
        for _ in range(40):
            state = m.initial_state()
            for _ in range(12):
                enabled = set(m.actions(state))
                candidates = {("elect", c, v) for c in range(3) for v in m.voter_sets[c]}
                candidates |= {(a, k) for a in ("write", "read", "crash", "restart", "flush") for k in range(3)}
                candidates |= {(a, x, y) for a in ("replicate", "shrink_isr", "leader_and_isr") for x, y in m.pairs}
                assert enabled == {a for a in candidates if m.why_not(state, a) is None}, state
                if not enabled:
                    break
                state = m.apply(state, rng.choice(sorted(enabled)))


def test_fingerprint_is_symmetric_and_stable():
    m = model()
    a = cluster(replica(2, [1, 2], role=LEADER, match=(0, 1, 2), leader=1), replica(2, [1], leader=1),
                replica(2, [1, 2], leader=1, isr=False))
    b = cluster(replica(2, [1, 2], role=LEADER, match=(0, 2, 1), leader=1), replica(2, [1, 2], leader=1, isr=False),
                replica(2, [1], leader=1))
    assert m.fingerprint(a) == m.fingerprint(b) and m.fingerprint(a, False) != m.fingerprint(b, False)
    c = b._replace(servers=(b.servers[0], b.servers[1]._replace(leader=3), b.servers[2]))
    assert m.fingerprint(c) != m.fingerprint(b)  # whom a replica follows is part of the state
    assert m.fingerprint(m.initial_state()) == 0xb68232e14c5bd662  # BLAKE2b-64 of fixed bytes: same everywhere


def test_kafka_states_are_cluster_views():
    state = cluster(replica(1, [1], hwm=1, role=LEADER, leader=1), replica(1, leader=1), replica(1, leader=1),
                    reads={(1, 1)})
    assert BY_NAME["CommittedOnQuorum"].check(state)  # 1@e1 on one of three replicas
    assert BY_NAME["HwmWithinLog"].check(state) is None


def test_kafka_runs_on_the_rpc_network_only():
    with pytest.raises(ValueError, match="rpc network only"):
        model(network="async")


# ------------------------------------------------------------------ the command line
def _hwm(*args):
    from click.testing import CliRunner

    from hwm.cli import main
    return CliRunner().invoke(main, list(args))


def test_protocols_cite_the_source_of_every_kafka_preset():
    out = _hwm("protocols").output
    for name in presets_of("kafka"):
        block = out.split(f"\n{name}  [")[1].split("\n\n")[0]
        assert "system=kafka" in block and ("KIP-" in block or "KAFKA-" in block), block


def test_check_a_kafka_preset_with_its_flags_on_the_command_line(tmp_path):
    result = _hwm("check", "--protocol", "kafka,follower_truncation=leader-epoch", "--servers", "2",
                  "--max-log", "2", "--max-generation", "3", "--max-crashes", "0", "--save", str(tmp_path))
    assert "LogMatching" in result.output and "violated in 7 steps" in result.output, result.output


@pytest.mark.parametrize("args, words", [
    (("check", "--protocol", "raft,follower_truncation=own-hwm"), "belongs to kafka"),
    (("check", "--protocol", "kafka,restart=keep,quorum=seed-index"), "belongs to raft"),
    (("prove", "--protocol", "kafka,quorum=seed-index"), "belongs to raft"),  # hwm prove encodes Kafka now
    (("cluster", "--protocol", "kafka,follower_truncation=last-fetched-epoch", "--data", "/nonexistent/kafka"),
     "model-only"),
])
def test_flags_of_another_system_are_usage_errors(args, words):
    result = _hwm(*args)
    assert result.exit_code == 2 and words in result.output, result.output


def test_state_bytes_decode_to_the_same_state():
    # Engines that ship states between processes (Spark) decode them from their bytes.
    m = model(PRESETS["kafka-kip101"].protocol, max_generation=4, max_log=2, max_crashes=1)
    rng = random.Random(3)
    state = m.initial_state()
    for _ in range(300):
        enabled = list(m.actions(state))
        state = m.apply(state, rng.choice(enabled)) if enabled else m.initial_state()
        assert m.decode(m.encode(state, symmetry=False)) == state
        canonical_bytes = m.encode(state)
        assert m.encode(m.decode(canonical_bytes)) == canonical_bytes


def test_the_tour_lowers_only_kafkas_generation_and_only_at_the_default_bounds():
    from hwm.checker.verdict import DEFAULT_CONFIG, tour_config
    assert tour_config("kafka", DEFAULT_CONFIG) == replace(DEFAULT_CONFIG, max_generation=3)
    assert tour_config("raft", DEFAULT_CONFIG) == DEFAULT_CONFIG
    mine = replace(DEFAULT_CONFIG, max_generation=4, max_log=2)
    assert tour_config("kafka", mine) == mine  # bounds the user chose are kept


def test_the_raft_replica_refuses_a_kafka_protocol():
    from hwm.impl.core import Replica
    from hwm.impl.storage import MemoryStorage
    with pytest.raises(ValueError, match="KafkaReplica runs kafka"):
        Replica("S1", ["S2", "S3"], KAFKA, MemoryStorage())


# ------------------------------------------------------------------ acks=all
def test_the_hwm_covering_the_leaders_own_entry_acknowledges_it():
    # S1 leads epoch 2 holding 1@e1 (an older leader's) and 2@e2 (its own).
    leader = replica(2, [1, 2], role=LEADER, match=(0, 0, 1), leader=1)
    state = cluster(leader, replica(2, [1], leader=1), replica(2, [1], leader=1))
    after = model().apply(state, ("replicate", 0, 1))
    assert after.servers[0].hwm == 1 and after.acked == frozenset()  # 1@e1's producer gave up long ago
    after = model().apply(after, ("replicate", 0, 2))
    assert after.servers[0].hwm == 2 and after.acked == {(2, 2)}


def test_acknowledged_write_kept_and_its_witness():
    from hwm.properties.acked import ACKED_LEADERS as kept, ALL_BY_NAME
    from hwm.model.raft import RaftModel
    witness = ALL_BY_NAME["WriteAcknowledged"]
    before = cluster(replica(1, [1], hwm=1, alive=False), replica(1, [1], leader=1), replica(1, isr=False, leader=1))
    before = before._replace(acked=frozenset({(1, 1)}))
    after = run(model(replace(KAFKA, unclean_election=True)),
                before._replace(servers=(before.servers[0], before.servers[1]._replace(alive=False),
                                         before.servers[2])), ("elect", 2, (2,)))
    assert "S3 became leader of generation 2 without entry 1@g1" in kept.check(before, after)
    assert witness.check(before) == "a client's write 1@g1 was acknowledged"
    assert kept.check(cluster(replica(0)), cluster(replica(1, role=LEADER))) is None  # raft states: no acks
    assert RaftModel.properties == CATALOGUE and kept in model().properties


# ------------------------------------------------------------------ late LeaderAndIsr requests
def test_a_late_leader_and_isr_request_makes_a_replica_follow_that_epoch():
    # S3 still leads epoch 2; S2 missed it and knows epoch 1 (the catalogue's KIP-320 first-try state).
    state = cluster(replica(3, [3], hwm=1, role=LEADER, match=(1, 1, 0), leader=1),
                    replica(1, [3], leader=1), replica(2, role=LEADER, leader=3))
    late = ("leader_and_isr", 2, 1)
    assert "late_leader_and_isr=false" in model(rule("last-fetched-epoch")).why_not(state, late)
    assert late not in set(model(rule("last-fetched-epoch")).actions(state))
    first_try = model(PRESETS["kafka-kip320-first-try"].protocol)
    after = run(first_try, state, late).servers[1]
    # KIP-320's first attempt truncates nothing on becoming a follower; its next fetch does.
    assert (after.generation, after.leader, after.log, after.truncating) == (2, 3, (3,), False)
    assert run(first_try, state, late, ("replicate", 2, 1)).servers[1].log == ()
    # Under the fenced rule the replica must find its truncation point before it fetches again.
    assert run(model(rule("fenced", late_leader_and_isr=True)), state, late).servers[1].truncating
    # A request no newer than the replica's epoch is ignored; nobody sends one to itself.
    assert "is not newer" in first_try.why_not(state, ("leader_and_isr", 2, 0))
    assert "is not a leader" in first_try.why_not(state, ("leader_and_isr", 1, 0))
    assert "made it leader" in first_try.why_not(state, ("leader_and_isr", 2, 2))
    assert late in set(first_try.actions(state)) and ("leader_and_isr", 0, 2) in set(first_try.actions(state))


def test_the_safe_preset_holds_with_late_leader_and_isr_requests():
    # KIP-320's fix, the current leader epoch in every fetch, does not depend on when requests arrive:
    # at the first attempt's smallest bounds `kafka` with late requests holds.
    config = Config(servers=3, max_generation=3, max_log=1, max_crashes=0)
    report = search(CheckRequest("kafka+late", symmetry=True),
                    model=build_model(rule("fenced", late_leader_and_isr=True), config))
    assert not report.violated, report.violated
