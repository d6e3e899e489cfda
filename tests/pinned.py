"""Pinned distinct-state counts and shortest-counterexample lengths.

Keys are (preset, servers, max_generation, max_log, max_crashes, network, symmetry).
Every engine (local breadth-first, Spark, simulation where it can cover the space)
must reproduce these numbers exactly. They change only when the model's semantics
change, and such a change must say why in its commit. Entries marked "deep" take
more than a few seconds and run under `pytest -m deep`.
"""

from model.state import Config

PINNED = {
    # Two servers: small enough for the simulation engine to cover every state.
    ('raft', 2, 2, 1, 1, 'rpc', True): {'states': 96, 'transitions': 189, 'depth': 9, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'CrashAndRejoin': 2}},
    ('raft-truncate-to-own-hwm', 2, 1, 1, 1, 'async', True): {'states': 125, 'transitions': 422, 'depth': 16, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 8, 'CommittedOnQuorum': 7, 'EntryRead': 6, 'UncommittedTruncated': 4, 'CrashAndRejoin': 2}},
    ('seed', 3, 4, 1, 1, 'rpc', True): {'states': 39973, 'transitions': 191973, 'depth': 19, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 7, 'ReadNeverLost': 5, 'ReadsAgree': 8, 'HwmWithinLog': 6, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}, "deep": True},
    ('raft', 3, 4, 1, 1, 'rpc', True): {'states': 6936, 'transitions': 32515, 'depth': 13, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('kip101', 3, 4, 1, 1, 'rpc', True): {'states': 7976, 'transitions': 36462, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 6, 'ReadNeverLost': 7, 'ReadsAgree': 10, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 4, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-seed-quorum', 3, 4, 1, 1, 'rpc', True): {'states': 6936, 'transitions': 32515, 'depth': 13, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-any-generation-commit', 3, 4, 1, 1, 'rpc', True): {'states': 5966, 'transitions': 27583, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 11, 'ReadNeverLost': 10, 'ReadsAgree': 12, 'CommittedOnQuorum': 10, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-any-election', 3, 4, 1, 1, 'rpc', True): {'states': 18976, 'transitions': 90251, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 7, 'ReadNeverLost': 5, 'ReadsAgree': 8, 'CommittedOnQuorum': 6, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-generation-mismatch', 3, 4, 1, 1, 'rpc', True): {'states': 10389, 'transitions': 46076, 'depth': 16, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 8, 'ReadNeverLost': 7, 'ReadsAgree': 8, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-truncate-to-leader-hwm', 3, 4, 1, 1, 'rpc', True): {'states': 7521, 'transitions': 34858, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 7, 'ReadNeverLost': 8, 'ReadsAgree': 11, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-truncate-to-own-hwm', 3, 4, 1, 1, 'rpc', True): {'states': 8943, 'transitions': 40643, 'depth': 16, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 6, 'ReadNeverLost': 7, 'ReadsAgree': 10, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 4, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-durable-hwm', 3, 4, 1, 1, 'rpc', True): {'states': 6883, 'transitions': 31228, 'depth': 12, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-noop', 3, 4, 1, 1, 'rpc', True): {'states': 185, 'transitions': 545, 'depth': 8, 'bounds_hit': ['max_crashes', 'max_log'], 'lengths': {'EntryRead': 3, 'UncommittedTruncated': 3, 'LeaderChangeWithUncommitted': 2, 'CrashAndRejoin': 2}},
    ('raft', 3, 4, 1, 1, 'rpc', False): {'states': 40146, 'transitions': 187572, 'depth': 13, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-any-generation-commit', 3, 4, 1, 1, 'rpc', False): {'states': 34428, 'transitions': 158724, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 11, 'ReadNeverLost': 10, 'ReadsAgree': 12, 'CommittedOnQuorum': 10, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('kip101', 3, 4, 1, 1, 'rpc', False): {'states': 45968, 'transitions': 208902, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 6, 'ReadNeverLost': 7, 'ReadsAgree': 10, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 4, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-truncate-to-leader-hwm', 3, 4, 1, 1, 'rpc', False): {'states': 43599, 'transitions': 201411, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 7, 'ReadNeverLost': 8, 'ReadsAgree': 11, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}, "deep": True},
    ('raft', 3, 3, 2, 1, 'rpc', True): {'states': 24016, 'transitions': 106167, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft', 3, 3, 2, 1, 'rpc', False): {'states': 141336, 'transitions': 624540, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}, "deep": True},
    ('raft', 3, 4, 2, 1, 'rpc', True): {'states': 79283, 'transitions': 375708, 'depth': 17, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}, "deep": True},
    ('raft-any-generation-commit', 3, 4, 2, 1, 'rpc', True): {'states': 66673, 'transitions': 311794, 'depth': 19, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 11, 'ReadNeverLost': 10, 'ReadsAgree': 12, 'HwmWithinLog': 11, 'CommittedOnQuorum': 10, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}, "deep": True},
    ('raft', 4, 2, 1, 0, 'rpc', True): {'states': 334, 'transitions': 1795, 'depth': 11, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 5, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3}},
    ('raft-seed-quorum', 4, 2, 1, 0, 'rpc', True): {'states': 291, 'transitions': 1606, 'depth': 10, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'CommittedOnQuorum': 3, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3}},
    ('raft', 4, 2, 1, 0, 'rpc', False): {'states': 5973, 'transitions': 31060, 'depth': 11, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 5, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3}},
    ('raft-seed-quorum', 4, 2, 1, 0, 'rpc', False): {'states': 5201, 'transitions': 27928, 'depth': 10, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'CommittedOnQuorum': 3, 'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3}},
    ('raft', 3, 1, 2, 0, 'async', True): {'states': 10763, 'transitions': 67838, 'depth': 20, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 6}},
    ('raft', 3, 1, 1, 0, 'async', False): {'states': 4363, 'transitions': 25314, 'depth': 15, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 6}},
    ('raft-generation-mismatch', 3, 1, 2, 0, 'async', True): {'states': 10763, 'transitions': 67838, 'depth': 20, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 6}},
    ('raft', 3, 2, 1, 0, 'async', True): {'states': 75398, 'transitions': 677028, 'depth': 27, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 6, 'UncommittedTruncated': 6, 'LeaderChangeWithUncommitted': 3}, "deep": True},
    ('raft', 3, 1, 1, 1, 'async', True): {'states': 2008, 'transitions': 13352, 'depth': 17, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 6, 'CrashAndRejoin': 2}},
    ('raft-truncate-to-own-hwm', 3, 1, 1, 1, 'async', True): {'states': 3054, 'transitions': 19741, 'depth': 22, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 8, 'CommittedOnQuorum': 7, 'EntryRead': 6, 'UncommittedTruncated': 4, 'CrashAndRejoin': 2}},
    ('raft-truncate-to-own-hwm', 3, 1, 1, 1, 'async', False): {'states': 18015, 'transitions': 116592, 'depth': 22, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 8, 'CommittedOnQuorum': 7, 'EntryRead': 6, 'UncommittedTruncated': 4, 'CrashAndRejoin': 2}, "deep": True},
    # Shared with the Spark engine's tests (tests/spark): raft and its Figure 8 mutant at
    # generation <= 3, a violating preset, and the async network at generation <= 2.
    ('raft', 3, 3, 1, 1, 'rpc', True): {'states': 2648, 'transitions': 11323, 'depth': 12, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft', 3, 3, 1, 1, 'rpc', False): {'states': 15166, 'transitions': 64590, 'depth': 12, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-any-generation-commit', 3, 3, 1, 1, 'rpc', True): {'states': 2237, 'transitions': 9620, 'depth': 12, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-any-generation-commit', 3, 3, 1, 1, 'rpc', False): {'states': 12764, 'transitions': 54645, 'depth': 12, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-any-generation-commit', 3, 3, 2, 1, 'rpc', True): {'states': 19539, 'transitions': 86886, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft-any-generation-commit', 3, 3, 2, 1, 'rpc', False): {'states': 114986, 'transitions': 510951, 'depth': 15, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 4, 'UncommittedTruncated': 5, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}, "deep": True},
    ('kip101', 3, 3, 1, 1, 'rpc', True): {'states': 2910, 'transitions': 12332, 'depth': 14, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 6, 'ReadNeverLost': 7, 'ReadsAgree': 10, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 4, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}},
    ('raft', 3, 2, 1, 1, 'async', True): {'states': 164194, 'transitions': 1659841, 'depth': 28, 'bounds_hit': ['channel_capacity', 'max_crashes', 'max_generation', 'max_log'], 'lengths': {'EntryRead': 6, 'UncommittedTruncated': 6, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2}, "deep": True},
    # The Spark engine's smallest violating case (its standalone-cluster test).
    ('kip101', 2, 2, 1, 1, 'rpc', True): {'states': 99, 'transitions': 201, 'depth': 8, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 6, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 4, 'CrashAndRejoin': 2}},
    ('kip101', 2, 2, 1, 1, 'rpc', False): {'states': 188, 'transitions': 384, 'depth': 8, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'], 'lengths': {'ReadNeverTruncated': 6, 'CommittedOnQuorum': 5, 'EntryRead': 4, 'UncommittedTruncated': 4, 'CrashAndRejoin': 2}},
}


def config_of(key):
    """(preset, Config, symmetry) for a PINNED key."""
    preset, servers, max_generation, max_log, max_crashes, network, symmetry = key
    return preset, Config(servers, max_generation, max_log, max_crashes, network), symmetry

# Liveness (tests/test_liveness.py, docs/liveness.md): concrete states (no symmetry), rpc network.
# (preset, servers, max_generation, max_log, max_crashes) -> pinned: concrete states, and per
# eventually property None (holds) or the shortest lasso's (stem, cycle).
PINNED_LIVENESS = {
    ("seed", 3, 2, 1, 1): {"states": 8155, "WrittenEventuallyCommitted": None, "FollowersCatchUp": (9, 2)},
    ("raft", 3, 2, 1, 1): {"states": 3922, "WrittenEventuallyCommitted": None, "FollowersCatchUp": None},
    # Two servers: the seed's [N/2] quorum counts the leader alone, so its entries are committed
    # as written and WrittenEventuallyCommitted holds vacuously; the report must say so.
    ("seed", 2, 3, 2, 1): {"states": 7047, "WrittenEventuallyCommitted": None, "FollowersCatchUp": (8, 1),
                           "unreached": ["LeaderHoldsUncommittedEntry"]},
    ("raft", 2, 3, 2, 1): {"states": 1759, "WrittenEventuallyCommitted": None, "FollowersCatchUp": None},
}
DEEP_LIVENESS = {
    ("raft", 3, 3, 1, 1): {"states": 15166, "WrittenEventuallyCommitted": None, "FollowersCatchUp": None},
    ("raft", 3, 2, 2, 1): {"states": 27409, "WrittenEventuallyCommitted": None, "FollowersCatchUp": None},
    ("seed", 3, 3, 1, 1): {"states": 54728, "WrittenEventuallyCommitted": None, "FollowersCatchUp": (9, 2)},
}
