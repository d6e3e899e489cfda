"""The kill matrix's hunts: for every broken preset, the conformance machine (model and
implementation both under that preset) hunts for an `always` property violated on the
implementation's history. One home for the hunts' bounds and budgets, shared by the tests that
assert each preset is killed (tests/quality/test_kill_matrix.py) and the benchmark that measures
the same hunts over several seeds (bench/conformance.py).
"""

from __future__ import annotations

from dataclasses import replace

from hwm.bridge.conformance.machine import RPC
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS, RAFT

# The bounds of every hunt: the explorer's default (3 servers, generation <= 4, log <= 1, one crash)
# leaves a random walk little room before it runs out of generations; two more generations and a
# second entry let it wander and still come back to the bug.
KILL_CONFIG = Config(servers=3, max_generation=6, max_log=2, max_crashes=1)
STEPS = 50  # steps per example, at most

CI_BUDGET = 500  # examples per hunt in the default test run
# Presets whose derandomized hunt needs more than CI_BUDGET (tests/quality/test_kill_matrix.py's MEASURED),
# each about twice what it took.
CI_BUDGETS = {"raft-truncate-to-own-hwm": 1000, "zab-ack-before-persist": 3000, "kafka-truncate-to-hwm": 1200}
DEEP_BUDGET = 5000  # examples per hunt under `pytest -m deep`
# Presets whose bug a random walk lines up too rarely for DEEP_BUDGET (see BOOKKEEPER_KILL_CONFIG).
DEEP_BUDGETS = {"bookkeeper-recovery-without-fencing": 20000}

# The presets the default run hunts (found in a few seconds); `-m deep` hunts all of them.
IN_CI = ("seed", "kip101", "raft-seed-quorum", "raft-any-election", "raft-generation-mismatch",
         "raft-truncate-to-own-hwm", "zab-ack-before-persist", "kafka-truncate-to-hwm", "kafka-kip101",
         "bookkeeper-unblocked-adds")


# BookKeeper's issue 2614 needs an add on one bookie, fencing answers from it and a second bookie only,
# "no such entry" from the second and the third, then the writer's add on the third: about 1 random
# walk in 500 lines it up (the model's own walks, at any of these bounds: a second entry or a crash
# only adds ways to stray). One entry, no crash and short walks keep each example cheap.
BOOKKEEPER_KILL_CONFIG = Config(servers=3, max_generation=4, max_log=1, max_crashes=0)
BOOKKEEPER_STEPS = 12
# Issue 1591 needs an ensemble change, so a crash: entry 1 on S1, a fencing read of S1, S2 down, the
# change to S3 and the add there. A random walk finds it within a few examples.
BOOKKEEPER_CHANGE_KILL_CONFIG = replace(BOOKKEEPER_KILL_CONFIG, max_crashes=1)


def ci_budget(preset: str) -> int:
    """Examples per hunt of `preset` in the default test run."""
    return CI_BUDGETS.get(preset, CI_BUDGET)


def deep_budget(preset: str) -> int:
    """Examples per hunt of `preset` under `pytest -m deep`."""
    return DEEP_BUDGETS.get(preset, DEEP_BUDGET)


def kill_steps(preset: str) -> int:
    """Steps per example. ZOOKEEPER-3911 needs a follower to synchronise late while the leader has
    entries it lacks, win the next epoch and crash before it logs them: the derandomized walks of
    50 steps on KILL_CONFIG missed it in 500 examples; those of 30 steps on the conformance bounds
    find it."""
    if preset == "zab-ack-before-persist":
        return 30
    if PRESETS[preset].protocol.system == "bookkeeper":
        return BOOKKEEPER_STEPS
    return STEPS


def kill_config(preset: str) -> Config:
    """raft-seed-quorum needs an even number of servers: [N/2] is a majority for odd N.

    The restart mutants of raft are hunted on two servers: a restart that truncates destroys a copy
    itself and needs no third server (docs/model.md's mutant table), and with two every copy of a
    committed entry counts, so the truncation violates ReadNeverTruncated (no read entry left on
    fewer than a quorum) or CommittedOnQuorum at once. On three, a random walk usually has the
    entry on all three before the crash, and dropping one copy of three loses nothing.
    """
    if preset == "raft-seed-quorum":
        return Config(servers=4, max_generation=6, max_log=2, max_crashes=1)
    if preset == "kafka-unclean-election":
        # The ISR shrinks to one replica, which crashes; the unclean leader must restart or have
        # missed the entries: with one crash a random walk rarely lines this up.
        return replace(KILL_CONFIG, max_crashes=2)
    if PRESETS[preset].protocol.system == "zab":
        return RPC  # the conformance bounds: generation <= 5, log <= 3, two crashes
    if PRESETS[preset].protocol.system == "bookkeeper":
        spares = PRESETS[preset].protocol.ensemble_size != "all"
        return BOOKKEEPER_CHANGE_KILL_CONFIG if spares else BOOKKEEPER_KILL_CONFIG
    if set(PRESETS[preset].protocol.differences(RAFT)) <= {"restart", "hwm_durable"}:
        return replace(KILL_CONFIG, servers=2)
    return KILL_CONFIG
