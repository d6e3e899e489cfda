"""ZAB and BookKeeper: each rule and each flag on small hand-built states taken from the sources.

ZAB: Junqueira, Reed, Serafini, "Zab: High-performance broadcast for primary-backup systems"
(phases 1-3) and ZOOKEEPER-3911 (a follower's ACK of NEWLEADER before the synchronised proposals
are logged). BookKeeper: the replication protocol page, the Fencing page, apache/bookkeeper
issue 2614 and pull request 2616 (recovery reads that fence).
"""

from dataclasses import replace

import pytest

from hwm.model.registry import build_model
from hwm.model.bookkeeper import BookKeeperModel, BookKeeperState
from hwm.model.state import FOLLOWER, LEADER, Config, Server
from hwm.model.zab import _ESTABLISHED, ZabModel, ZabState
from hwm.properties.acked import acked_write_never_lost
from hwm.properties.protocol import (BOOKKEEPER, FLAG_VALUES, PRESETS, RAFT, ZAB, Protocol, ProtocolError, flags_of,
                                 presets_of, resolve)

BIG = dict(max_generation=9, max_log=9, max_crashes=9)


def run(model, state, *actions):
    for action in actions:
        reason = model.why_not(state, action)
        assert reason is None, f"{action} not enabled: {reason}"
        state = model.apply(state, action)
    return state


# ------------------------------------------------------------------ flags
def test_each_system_has_its_own_flags_and_rejects_the_others():
    assert "zab_ack_before_persist" in flags_of("zab") and "zab_ack_before_persist" not in flags_of("raft")
    assert flags_of("bookkeeper") == ("bookkeeper_recovery_reads_fence", "ensemble_size", "write_quorum",
                                      "ack_quorum", "bookkeeper_block_add_completions")
    assert set(flags_of("raft")) | {"system", "zab_ack_before_persist", *flags_of("bookkeeper"),
                                    "follower_truncation", "unclean_election", "late_leader_and_isr",
                                    "min_insync_replicas", "log_flush", "controller_fencing"} == set(FLAG_VALUES)
    with pytest.raises(ProtocolError, match="'zab_ack_before_persist' does not apply to system 'raft'"):
        Protocol(zab_ack_before_persist=True)
    with pytest.raises(ProtocolError, match="'bookkeeper_recovery_reads_fence' does not apply to system 'zab'"):
        replace(ZAB, bookkeeper_recovery_reads_fence=False)
    with pytest.raises(ProtocolError, match="'election' does not apply to system 'bookkeeper'"):
        replace(BOOKKEEPER, election="any")
    with pytest.raises(ProtocolError, match="does not apply"):
        resolve({"preset": "raft", "flags": {"zab_ack_before_persist": "true"}})
    assert resolve({"preset": "zab", "flags": {"zab_ack_before_persist": "true"}})[1] == \
        PRESETS["zab-ack-before-persist"].protocol


def test_presets_of_each_system():
    assert presets_of("zab") == ("zab", "zab-ack-before-persist", "zab-step-down")
    assert presets_of("bookkeeper") == ("bookkeeper", "bookkeeper-recovery-without-fencing", "bookkeeper-striped",
                                        "bookkeeper-ensemble-change", "bookkeeper-unblocked-adds")
    assert "zab" not in presets_of("raft")
    for name in presets_of("zab") + presets_of("bookkeeper"):
        preset = PRESETS[name]
        assert preset.summary and preset.reference
        assert preset.broken == bool(preset.breaks)


def test_build_model_picks_the_systems_model():
    assert type(build_model(ZAB, Config())) is ZabModel
    assert type(build_model(BOOKKEEPER, Config())) is BookKeeperModel
    assert type(build_model(RAFT, Config())).__name__ == "RaftModel"
    with pytest.raises(ValueError, match="rpc network only"):
        build_model(ZAB, Config(network="async"))


# -------------------------------------------------------------------- ZAB
def zab(protocol=ZAB, servers=3):
    return build_model(protocol, Config(servers=servers, **BIG))


def zab_state(*servers, durable=None, epochs=None, synced=None):
    n = len(servers)
    return ZabState(tuple(servers), frozenset(), 0, (), tuple(synced or (0,) * n),
                    tuple(durable if durable is not None else (len(s.log) for s in servers)),
                    tuple(epochs or (0,) * n), frozenset())


def f(generation, log=(), hwm=0, alive=True):
    return Server(generation, FOLLOWER, tuple(log), hwm, alive, ())


def test_a_prospective_leader_neither_writes_nor_broadcasts_until_a_quorum_acknowledges_newleader():
    m = zab()
    s = run(m, m.initial_state(), ("elect", 0, (0, 1)))
    assert "prospective leader" in m.why_not(s, ("write", 0))
    assert "prospective leader" in m.why_not(s, ("replicate", 0, 1))
    s = run(m, s, ("sync", 0, 1))
    assert m.established(s, 0) and m.why_not(s, ("write", 0)) is None
    assert "S3 has not synchronised with S1" in m.why_not(run(m, s, ("write", 0)), ("replicate", 0, 2))


def test_newleader_quorum_commits_the_whole_history_even_of_older_epochs():
    # S1 leads epoch 3 holding 1@g1 (Raft's Figure 8 prefix): ZAB commits it with the NEWLEADER
    # quorum; Raft's current-generation rule would not count it.
    s = zab_state(Server(3, LEADER, (1,), 0, True, (0, 0, 0)), f(2, [2]), f(3), epochs=(3, 2, 0))
    m = zab()
    after = run(m, s, ("sync", 0, 2))
    assert after.servers[2].log == (1,) and after.servers[0].hwm == 1
    assert after.acked == {(1, 1)} and after.epochs[2] == 3


def test_sync_truncates_what_the_leader_does_not_have():
    s = zab_state(Server(3, LEADER, (1,), 0, True, (0, 0, 0)), f(2, [2, 2]), f(3), epochs=(3, 2, 0))
    after = run(zab(), s, ("sync", 0, 1))
    assert after.servers[1].log == (1,) and after.servers[1].generation == 3


def test_election_orders_by_current_epoch_before_the_last_zxid():
    # S1 accepted epoch 3's history [1@g1]; S2 holds 1@g2 but accepted only epoch 2.
    s = zab_state(f(3, [1]), f(3, [2]), f(3), epochs=(3, 2, 3))
    m = zab()
    assert m.why_not(s, ("elect", 0, (0, 1))) is None
    assert "S1 refuses the vote: its history is more up to date (currentEpoch 3" in m.why_not(s, ("elect", 1, (0, 1)))
    # Raft's rule looks at the last entry only and would elect S2.
    raft = build_model(RAFT, Config(**BIG))
    assert raft.why_not(s, ("elect", 1, (0, 1))) is None


def test_a_stale_leader_steps_down_when_it_meets_a_later_epoch():
    s = zab_state(Server(1, LEADER, (1,), 0, True, (0, 0, 0)), f(2), f(2))
    after = run(zab(), s, ("sync", 0, 1))
    assert after.servers[0].role == FOLLOWER and after.servers[0].generation == 2 and after.servers[1].log == ()


@pytest.mark.parametrize("ack_before_persist, durable, log_after_crash", [(False, 1, (1,)), (True, 0, ())])
def test_zookeeper_3911_ack_before_persist_loses_synchronised_entries_on_a_crash(ack_before_persist, durable,
                                                                                 log_after_crash):
    # Learner.syncWithLeader: the proposals of a DIFF sync wait in packetsNotCommitted; before the
    # fix the follower ACKed NEWLEADER and logged them later.
    m = zab(replace(ZAB, zab_ack_before_persist=ack_before_persist))
    s = zab_state(Server(2, LEADER, (1,), 0, True, (0, 0, 0)), f(2), f(2), epochs=(2, 0, 0))
    s = run(m, s, ("sync", 0, 1))
    assert s.servers[0].hwm == 1  # committed by the NEWLEADER quorum either way
    assert s.durable[1] == durable
    crashed = run(m, s, ("crash", 1))
    assert crashed.servers[1].log == log_after_crash
    assert crashed.epochs[1] == 2  # the epoch was written before the ACK under both rules
    assert bool(acked_write_never_lost(crashed)) == ack_before_persist


def test_persist_flushes_and_acknowledges_to_an_established_leader():
    m = zab(replace(ZAB, zab_ack_before_persist=True))
    leader = Server(2, LEADER, (1,), 1, True, (0, 1, 0))
    s = zab_state(leader, f(2, [1], 1), f(2), synced=(_ESTABLISHED | 0b10, 0, 0), epochs=(2, 2, 0))
    s = run(m, s, ("write", 0), ("sync", 0, 2))
    # A late follower's NEWLEADER ACK does not count for proposals it has not logged.
    assert s.servers[0].match[2] == 0 and s.servers[0].hwm == 1
    s = run(m, s, ("persist", 2))
    assert s.durable[2] == 2 and s.servers[0].match[2] == 2 and s.servers[0].hwm == 2
    assert "nothing in memory" in m.why_not(s, ("persist", 2))


def test_persist_is_never_enabled_under_the_safe_rule():
    m = zab()
    s = run(m, m.initial_state(), ("elect", 0, (0, 1)), ("sync", 0, 1), ("write", 0), ("sync", 0, 2))
    assert s.durable == tuple(len(sv.log) for sv in s.servers)
    assert not any(a[0] == "persist" for a in m.actions(s))


# ------------------------------------------------------------- BookKeeper
def bk(fence=True, bookies=3):
    return build_model(replace(BOOKKEEPER, bookkeeper_recovery_reads_fence=fence), Config(servers=bookies, **BIG))


def test_the_lac_is_the_last_entry_an_ack_quorum_stored_and_it_is_piggybacked():
    m = bk()
    s = run(m, m.initial_state(), ("add",), ("send_add", 0))
    assert s.servers[3].hwm == 0 and not s.acked  # 1 of AQ=2
    s = run(m, s, ("send_add", 1))
    assert s.servers[3].hwm == 1 and s.acked == {(1, 1)}
    assert s.servers[1].hwm == 0  # the bookie learns the LAC with the next add (or an explicit LAC)
    s = run(m, s, ("send_add", 0))
    assert s.servers[0].hwm == 1 and m.why_not(s, ("read", 0)) is None


def test_a_fenced_bookie_refuses_adds_and_the_writer_stops():
    m = bk()
    s = run(m, m.initial_state(), ("add",), ("fence", 0), ("send_add", 0))
    assert s.servers[0].log == () and s.servers[3].role == FOLLOWER
    assert "fenced out" in m.why_not(s, ("add",))


def test_recovery_reads_wait_for_e_minus_aq_plus_one_fencing_answers():
    m = bk()
    s = run(m, m.initial_state(), ("fence", 0))
    assert "fencing has not completed: 1 of 3 bookies" in m.why_not(s, ("recovery_read", 1))
    assert m.why_not(run(m, s, ("fence", 1)), ("recovery_read", 2)) is None


@pytest.mark.parametrize("fence", [True, False])
def test_recovery_reads_fence_only_under_the_fix(fence):
    m = bk(fence)
    s = run(m, m.initial_state(), ("fence", 0), ("fence", 1), ("recovery_read", 2))
    assert bool(s.fenced >> 2 & 1) == fence


def test_recovery_recovers_what_one_bookie_has_and_closes_where_wq_minus_aq_plus_one_lack_it():
    m = bk()
    s = run(m, m.initial_state(), ("add",), ("add",), ("send_add", 0), ("fence", 1), ("fence", 2),
            ("recovery_read", 0))  # entry 1 is on S1: recovered
    assert s.servers[4].log == (1,)
    s = run(m, s, ("recovery_read", 1))
    assert s.servers[4].role == FOLLOWER  # one "no such entry" for entry 2 is not enough
    s = run(m, s, ("recovery_read", 2))
    closed = s.servers[4]
    assert closed.role == LEADER and closed.generation == 2 and closed.log == (1,) and closed.hwm == 1
    # Written back to every bookie; entry 2, which S1 stored, is not part of the ledger.
    assert [b.log for b in s.servers[:3]] == [(1,), (1,), (1,)]
    assert "the ledger is closed" in m.why_not(s, ("fence", 0))


@pytest.mark.parametrize("fence, acked", [(True, False), (False, True)])
def test_issue_2614_an_unfenced_bookie_completes_an_ack_quorum_after_recovery_closed_the_ledger(fence, acked):
    # The fencing LAC read to S3 is lost; S3 answers the recovery read "no such entry" and, unless
    # that read fenced it, then accepts the writer's add: with S1's earlier ACK that is AQ=2.
    m = bk(fence)
    s = run(m, m.initial_state(), ("add",), ("send_add", 0), ("fence", 0), ("fence", 1),
            ("recovery_read", 1), ("recovery_read", 2))
    assert s.servers[4].role == LEADER and s.servers[4].log == ()
    s = run(m, s, ("send_add", 2))
    assert bool(s.acked) == acked
    assert bool(acked_write_never_lost(s)) == acked


def test_bookkeeper_symmetry_permutes_bookies_only():
    m = bk()
    a = run(m, m.initial_state(), ("add",), ("send_add", 0))
    b = run(m, m.initial_state(), ("add",), ("send_add", 2))
    assert m.fingerprint(a) == m.fingerprint(b) and m.fingerprint(a, False) != m.fingerprint(b, False)
    assert isinstance(a, BookKeeperState)


# ------------------------------------------- enumeration and symmetry, on random reachable states
def random_walk(model, rng, steps):
    state = model.initial_state()
    for _ in range(steps):
        moves = list(model.successors(state))
        if not moves:
            break
        state = rng.choice(moves)[1]
    return state


def permute_bits(mask, order):
    """`order[j]` is the old position of new position j."""
    return sum(1 << j for j, old in enumerate(order) if mask >> old & 1)


def permuted_zab(s, order):
    servers = []
    for old in order:
        server = s.servers[old]
        servers.append(server._replace(match=tuple(server.match[k] for k in order) if server.match else ()))
    synced = tuple((s.synced[old] & _ESTABLISHED) | permute_bits(s.synced[old] & (_ESTABLISHED - 1), order)
                   for old in order)
    return s._replace(servers=tuple(servers), synced=synced, durable=tuple(s.durable[k] for k in order),
                      epochs=tuple(s.epochs[k] for k in order))


def permuted_bookies(s, order):
    n = len(order)
    full = list(order) + [n, n + 1]
    writer = s.servers[n]
    writer = writer._replace(match=tuple(writer.match[k] for k in full) if writer.match else ())
    return s._replace(servers=tuple(s.servers[k] for k in order) + (writer, s.servers[n + 1]),
                      fenced=permute_bits(s.fenced, order), responded=permute_bits(s.responded, order),
                      negatives=permute_bits(s.negatives, order))


SYSTEM_MODELS = [
    (zab(replace(ZAB, zab_ack_before_persist=True)), "zab"),
    (zab(ZAB, servers=4), "zab"),
    (build_model(PRESETS["bookkeeper-recovery-without-fencing"].protocol, Config(max_log=2, max_crashes=1)), "bk"),
    (build_model(BOOKKEEPER, Config(servers=4, max_log=2, max_crashes=1)), "bk"),
]


def candidate_actions(model, kind):
    n = model.n
    if kind == "zab":
        out = [("elect", c, v) for c in range(n) for v in model.voter_sets[c]]
        out += [(a, k) for k in range(n) for a in ("write", "read", "crash", "restart", "persist")]
        return out + [(a, x, y) for x, y in model.pairs for a in ("replicate", "sync")]
    return [("add",)] + [(a, b) for b in range(n) for a in
                         ("send_add", "fence", "recovery_read", "read", "crash", "restart")]


@pytest.mark.parametrize("which", range(len(SYSTEM_MODELS)))
def test_successors_are_exactly_what_the_guards_enable_and_symmetry_is_canonical(which):
    import random

    model, kind = SYSTEM_MODELS[which]
    rng = random.Random(which)
    for _ in range(60):
        state = random_walk(model, rng, rng.randrange(0, 20))
        enabled = {action for action, _ in model.successors(state)}
        assert enabled == {a for a in candidate_actions(model, kind) if model.why_not(state, a) is None}
        # The bytes an engine moves (Spark) decode to the state, or to a member of its class.
        assert model.decode(model.encode(state, False)) == state
        canonical_state = model.decode(model.encode(state))
        assert model.fingerprint(canonical_state) == model.fingerprint(state)
        assert model.encode(canonical_state, False) == model.encode(state)
        order = list(range(model.n))
        rng.shuffle(order)
        other = (permuted_zab if kind == "zab" else permuted_bookies)(state, order)
        assert model.fingerprint(other) == model.fingerprint(state)
        assert sorted(model.fingerprint(s) for _, s in model.successors(other)) == sorted(
            model.fingerprint(s) for _, s in model.successors(state))
        # Without symmetry, distinct states keep distinct fingerprints.
        if other != state:
            assert model.fingerprint(other, False) != model.fingerprint(state, False)


# ------------------------------------------------------------- the command line
def test_model_only_systems_say_so_wherever_the_implementation_would_run():
    from click.testing import CliRunner

    from hwm.checker.run import runnable_presets
    from hwm.cli import main

    assert {"zab", "bookkeeper"} <= set(runnable_presets(Config()))
    assert not {"zab", "bookkeeper"} & set(runnable_presets(Config(network="async")))
    # BookKeeper's bookies run on the TCP runtime (hwm node/cluster), not over --stdio, and take no peers.
    result = CliRunner().invoke(main, ["node", "--stdio", "--protocol", "bookkeeper"])
    assert result.exit_code == 2 and "BookKeeper's bookies run on the TCP runtime only" in result.output, result.output
    result = CliRunner().invoke(main, ["node", "--protocol", "bookkeeper", "--id", "S1", "--listen", "127.0.0.1:1",
                                       "--data", "d", "--peers", "S2=127.0.0.1:2"])
    assert result.exit_code == 2 and "--peers is not for a bookie" in result.output, result.output
    # hwm prove encodes every BookKeeper ledger (tests/proofs/test_bookkeeper_bmc.py).
