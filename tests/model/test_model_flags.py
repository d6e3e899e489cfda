"""Each protocol flag changes the model exactly as docs/model.md says, on small hand-built states."""

from dataclasses import replace

import pytest

from hwm.model.actions import Model
from hwm.model.raft import RaftModel
from hwm.model.state import FOLLOWER, LEADER, Config, Server, State, initial_state
from hwm.properties.catalogue import BY_NAME
from hwm.properties.protocol import PRESETS, RAFT, SEED


def server(generation, log=(), hwm=0, role=FOLLOWER, alive=True, match=None, n=3):
    if role == LEADER and match is None:
        match = (0,) * n
    return Server(generation, role, tuple(log), hwm, alive, tuple(match) if role == LEADER else ())


def cluster(*servers, reads=(), crashes=0):
    return State(tuple(servers), frozenset(reads), crashes, ())


def model(protocol=RAFT, **config):
    defaults = dict(servers=3, max_generation=9, max_log=9, max_crashes=9)
    defaults.update(config)
    return RaftModel(protocol, Config(**defaults))


def run(m, state, *actions):
    for action in actions:
        reason = m.why_not(state, action)
        assert reason is None, f"{action} not enabled: {reason}"
        state = m.apply(state, action)
    return state


# ------------------------------------------------------------------ quorum
def test_quorum_seed_index_counts_a_minority_on_four_servers():
    # Leader S1 holds 1 entry; only S2 of the 3 followers has it: 2 of 4 servers.
    leader = server(1, [1], role=LEADER, match=(0, 1, 0, 0), n=4)
    state = cluster(leader, server(1, [1]), server(1), server(1))
    seed = model(replace(RAFT, quorum="seed-index"), servers=4)
    majority = model(RAFT, servers=4)
    # Sorted ascending [0, 0, 1, 1]: the seed takes position 4/2 = 2, which is 1.
    assert seed.apply(state, ("write", 0)).servers[0].hwm == 1
    assert majority.apply(state, ("write", 0)).servers[0].hwm == 0


def test_quorum_rules_agree_on_three_servers():
    leader = server(1, [1], role=LEADER, match=(0, 1, 0))
    state = cluster(leader, server(1, [1]), server(1))
    for rule in ("seed-index", "majority"):
        after = model(replace(RAFT, quorum=rule)).apply(state, ("write", 0))
        assert after.servers[0].hwm == 1


# ------------------------------------------------------------------ commit
def figure_8_prefix():
    """S1 leads generation 3 holding entry 1@g1; S3 is empty; S2 holds 1@g2."""
    return cluster(server(3, [1], role=LEADER), server(2, [2]), server(3))


@pytest.mark.parametrize("commit, hwm", [("any-generation", 1), ("current-generation", 0)])
def test_commit_rule_on_an_older_generation_entry(commit, hwm):
    m = model(replace(RAFT, commit=commit))
    after = run(m, figure_8_prefix(), ("replicate", 0, 2))
    assert after.servers[2].log == (1,)  # stored on S1 and S3: a majority
    assert after.servers[0].hwm == hwm  # Raft 5.4.2 refuses to count replicas of older generations


def test_current_generation_commit_covers_older_entries_once_a_new_one_commits():
    m = model(RAFT)
    after = run(m, figure_8_prefix(), ("write", 0), ("replicate", 0, 2))
    assert after.servers[0].log == (1, 3)
    assert after.servers[0].hwm == 2


# ---------------------------------------------------------------- election
def test_longest_log_election_refuses_a_stale_candidate():
    state = cluster(server(1, [1], hwm=1), server(1, [1]), server(1))
    voters = (1, 2)
    longest = model(RAFT)
    reason = longest.why_not(state, ("elect", 2, voters))
    assert reason and "S2 refuses the vote" in reason
    anyone = model(replace(RAFT, election="any"))
    after = anyone.apply(state, ("elect", 2, voters))
    assert after.servers[2].role == LEADER and after.servers[2].generation == 2
    assert after.servers[1].generation == 2 and after.servers[1].role == FOLLOWER


def test_up_to_date_compares_last_generation_before_length():
    state = cluster(server(3, [1, 1]), server(3, [2]), server(3))
    m = model(RAFT)
    assert m.why_not(state, ("elect", 1, (0, 1))) is None  # [2] beats [1, 1]
    assert "S2 refuses" in m.why_not(state, ("elect", 0, (0, 1)))


def test_election_needs_a_quorum_of_live_voters():
    m = model(RAFT)
    state = initial_state(m.config)
    assert "not a quorum" in m.why_not(state, ("elect", 0, (0,)))
    down = cluster(server(0), server(0, alive=False), server(0))
    assert "down" in m.why_not(down, ("elect", 0, (0, 1)))


# ------------------------------------------------------------ append check
def test_seed_log_truncation_example():
    """The seed's "Log Truncation": the leader replicates entry1-3, fails after adding
    entry4 to its own log; a follower becomes leader and accepts entry5. When the old
    leader rejoins it truncates entry4 and takes entry5."""
    for check in ("generation-mismatch", "previous-entry"):
        m = model(replace(RAFT, append_check=check), max_log=5)
        state = cluster(server(1, [1, 1, 1, 1], hwm=3, role=LEADER, match=(0, 3, 3)),
                        server(1, [1, 1, 1], hwm=3), server(1, [1, 1, 1], hwm=3))
        state = run(m, state, ("crash", 0), ("elect", 1, (1, 2)), ("write", 1), ("restart", 0), ("replicate", 1, 0))
        old_leader = state.servers[0]
        assert old_leader.log == (1, 1, 1, 2), check  # entry4 (g1) truncated, entry5 (g2) at index 4
        assert old_leader.generation == 2 and old_leader.role == FOLLOWER


def test_seed_follower_replies_its_last_index_and_overcounts():
    # Both followers hold a stale extra entry beyond the leader's log; the prefix matches.
    leader = server(2, [1], hwm=0, role=LEADER)
    state = cluster(leader, server(1, [1, 1]), server(1, [1, 1]))
    seed_follower = model(replace(RAFT, append_check="generation-mismatch", commit="any-generation"))
    after = run(seed_follower, state, ("replicate", 0, 1), ("replicate", 0, 2))
    assert after.servers[0].match[1:] == (2, 2)  # wal.getLastLogIndex(): more than the leader sent
    assert after.servers[0].hwm == 2 and len(after.servers[0].log) == 1
    assert BY_NAME["HwmWithinLog"].check(after)
    raft = model(replace(RAFT, commit="any-generation"))
    after = run(raft, state, ("replicate", 0, 1), ("replicate", 0, 2))
    assert after.servers[0].match[1:] == (1, 1)  # prev + len(entries)
    assert after.servers[0].hwm == 1


def test_previous_entry_backs_off_to_the_matching_prefix():
    leader = server(3, [1, 3], role=LEADER, match=(0, 2, 0))  # stale match: S2 lost entry 2@g3
    state = cluster(leader, server(3, [1, 2]), server(3))
    after = model(RAFT).apply(state, ("replicate", 0, 1))
    assert after.servers[1].log == (1, 3)
    assert after.servers[0].match[1] == 2


def test_stale_leader_steps_down_on_a_higher_generation():
    state = cluster(server(1, [1], role=LEADER), server(2), server(2, role=LEADER))
    after = model(RAFT).apply(state, ("replicate", 0, 1))
    assert after.servers[0].role == FOLLOWER and after.servers[0].generation == 2
    assert after.servers[1].log == ()


# ----------------------------------------------------------------- restart
def committed_cluster():
    """S1 leads generation 2 with entry 1 committed; S2 holds it with hwm 0 (not yet told)."""
    return cluster(server(2, [2], hwm=1, role=LEADER, match=(0, 1, 0)), server(2, [2], hwm=0), server(2),
                   reads={(1, 2)})


@pytest.mark.parametrize("rule, log", [("keep", (2,)), ("truncate-to-own-hwm", ()), ("truncate-to-leader-hwm", (2,))])
def test_restart_rules(rule, log):
    m = model(replace(RAFT, restart=rule))
    after = run(m, committed_cluster(), ("crash", 1), ("restart", 1))
    assert after.servers[1].log == log


def test_truncate_to_leader_hwm_follows_a_leader_whose_hwm_lags():
    # S3 leads generation 3 but has not yet learned that entry 1 committed; S1 and S3 hold
    # it, so S1's truncation leaves the read entry on one server of three.
    state = cluster(server(2, [2], hwm=1), server(3), server(3, [2], role=LEADER), reads={(1, 2)})
    m = model(replace(RAFT, restart="truncate-to-leader-hwm"))
    before = run(m, state, ("crash", 0))
    after = m.apply(before, ("restart", 0))
    assert after.servers[0].log == ()
    assert BY_NAME["ReadNeverTruncated"].check(before, after)


@pytest.mark.parametrize("durable, hwm", [(False, 0), (True, 1)])
def test_hwm_durable(durable, hwm):
    m = model(replace(RAFT, hwm_durable=durable))
    state = cluster(server(2, [2], hwm=1), server(2, [2], hwm=1, role=LEADER), server(2))
    after = run(m, state, ("crash", 0), ("restart", 0))
    assert after.servers[0].hwm == hwm


def test_kip101_truncates_to_its_checkpointed_hwm():
    m = model(PRESETS["kip101"].protocol)
    state = committed_cluster()
    before = run(m, state, ("crash", 1))
    after = m.apply(before, ("restart", 1))
    assert after.servers[1].log == ()  # its checkpoint said 0: the follower had not learned hwm 1
    assert BY_NAME["ReadNeverTruncated"].check(before, after)


# --------------------------------------------------------------------- noop
@pytest.mark.parametrize("noop, log", [(False, (1,)), (True, (1, 2))])
def test_noop_on_election(noop, log):
    m = model(replace(RAFT, noop_on_election=noop))
    state = cluster(server(1, [1]), server(1, [1]), server(1))
    after = m.apply(state, ("elect", 0, (0, 1)))
    assert after.servers[0].log == log


def test_noop_commits_older_entries_under_current_generation_rule():
    m = model(replace(RAFT, noop_on_election=True))
    state = cluster(server(1, [1]), server(1, [1]), server(1))
    after = run(m, state, ("elect", 0, (0, 1)), ("replicate", 0, 1))
    assert after.servers[0].hwm == 2


# ----------------------------------------------------------------- others
def test_crash_loses_role_and_match_but_keeps_log_and_generation():
    m = model(RAFT)
    state = cluster(server(2, [2], hwm=1, role=LEADER, match=(0, 1, 0)), server(2, [2]), server(2))
    after = m.apply(state, ("crash", 0))
    s1 = after.servers[0]
    assert (s1.alive, s1.role, s1.match, s1.log, s1.generation, s1.hwm) == (False, FOLLOWER, (), (2,), 2, 0)
    assert after.crashes == 1


def test_read_returns_entries_up_to_the_hwm_only():
    m = model(RAFT)
    state = cluster(server(1, [1, 1], hwm=1, role=LEADER), server(1), server(1))
    after = m.apply(state, ("read", 0))
    assert after.reads == {(1, 1)}
    assert "already read" in m.why_not(after, ("read", 0))
    assert "nothing at or below" in m.why_not(state, ("read", 1))


def test_seed_preset_is_the_seed_text():
    assert SEED.quorum == "seed-index" and SEED.commit == "any-generation"
    assert SEED.append_check == "generation-mismatch" and SEED.restart == "truncate-to-leader-hwm"
