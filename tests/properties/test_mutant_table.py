"""The mutant table of docs/model.md: the smallest bounds at which the explorer catches each
single-flag mutant of raft, pinned from both sides (caught there, not caught one step below)."""

from dataclasses import replace

import pytest

from hwm.model.state import Config
from hwm.properties.protocol import KAFKA, MUTANTS, PRESETS, presets_of
from tests.explored import explore_compiled

# mutant -> (smallest bounds, {property: shortest length} at those bounds)
TABLE = {
    "raft-seed-quorum": (Config(servers=2, max_generation=1, max_log=1, max_crashes=0), {"CommittedOnQuorum": 2}),
    "raft-any-generation-commit": (Config(servers=3, max_generation=4, max_log=1, max_crashes=0),
                                   {"CommittedOnQuorum": 10, "HwmNeverTruncated": 10, "ReadNeverLost": 10, "ReadNeverTruncated": 11,
                                    "ReadsAgree": 12}),
    "raft-any-election": (Config(servers=3, max_generation=2, max_log=1, max_crashes=0),
                          {"CommittedOnQuorum": 6, "HwmNeverTruncated": 6, "ReadNeverLost": 5, "ReadNeverTruncated": 7,
                           "ReadsAgree": 8}),
    "raft-generation-mismatch": (Config(servers=3, max_generation=2, max_log=1, max_crashes=0),
                                 {"CommittedOnQuorum": 5, "ReadsAgree": 8}),
    "raft-truncate-to-leader-hwm": (Config(servers=2, max_generation=2, max_log=1, max_crashes=1), {"ReadNeverTruncated": 7}),
    "raft-truncate-to-own-hwm": (Config(servers=2, max_generation=1, max_log=1, max_crashes=1),
                                 {"CommittedOnQuorum": 5, "ReadNeverTruncated": 6}),
    # A stale lease read needs a partition, a second generation and a second entry (model/partition.py).
    "raft-lease-reads-without-check-quorum": (Config(servers=3, max_generation=2, max_log=2, max_crashes=0,
                                                     max_partitions=1), {"LeaseReadNeverStale": 8}),
}
SAFE = {"raft-durable-hwm", "raft-noop"}
LIMITS = {"max_generation": 1, "max_log": 1, "max_crashes": 0, "max_partitions": 0}


def violated(preset, config):
    report = explore_compiled(preset, config)
    return {name: report.results[name].length for name in report.violated}


def lowered(config, bounds=tuple(LIMITS), servers=None):
    """`config` with each of `bounds` lowered by one where it can go lower, and with `servers`
    servers if given: the configurations one step below a table's smallest bounds."""
    smaller = [replace(config, **{bound: getattr(config, bound) - 1})
               for bound in bounds if getattr(config, bound) > LIMITS[bound]]
    return smaller + ([replace(config, servers=servers)] if servers else [])


def assert_smallest(mutant, table):
    """Caught at its table's bounds with its table's lengths; not caught one step below them (a
    third server is one of the bounds: with two, every quorum is everyone)."""
    config, lengths = table[mutant]
    assert violated(mutant, config) == lengths
    for bounds in lowered(config, servers=2 if config.servers == 3 else None):
        assert violated(mutant, bounds) == {}, bounds.describe()


def test_the_table_covers_every_mutant():
    assert set(TABLE) | SAFE == set(MUTANTS)
    assert all(PRESETS[m].broken for m in TABLE) and not any(PRESETS[m].broken for m in SAFE)


@pytest.mark.parametrize("mutant", sorted(TABLE))
def test_caught_at_its_smallest_bounds_and_not_one_step_below(mutant):
    assert_smallest(mutant, TABLE)


def test_seed_quorum_is_caught_only_with_an_even_number_of_servers():
    assert violated("raft-seed-quorum", Config(servers=4, max_generation=1, max_log=1, max_crashes=0)) == {"CommittedOnQuorum": 3}
    assert violated("raft-seed-quorum", Config(servers=3, max_generation=2, max_log=1, max_crashes=1)) == {}


@pytest.mark.parametrize("mutant", sorted(SAFE))
def test_safe_mutants_hold_with_every_witness_reached(mutant):
    report = explore_compiled(mutant, Config(max_log=2, max_generation=3))
    assert report.ok, (report.violated, report.unreached)


@pytest.mark.deep
@pytest.mark.parametrize("mutant", sorted(SAFE))
def test_safe_mutants_hold_at_larger_bounds(mutant):
    report = explore_compiled(mutant, Config(max_log=2, max_generation=4, max_crashes=2))
    assert report.ok, (report.violated, report.unreached)


# The system flags (docs/systems.md): each bug preset differs from its system's safe preset in one
# flag. Caught at these bounds, with these lengths; its system's own promise (AckedWriteNeverLost)
# not broken when any one bound is lowered by one. BookKeeper's `servers` are its bookies and
# max_generation does not apply to it.
SYSTEM_TABLE = {
    "zab-ack-before-persist": (Config(servers=3, max_generation=2, max_log=1, max_crashes=1),
                               {"AckedWriteNeverLost": 7, "CommittedOnQuorum": 8, "HwmNeverTruncated": 6,
                                "ReadNeverTruncated": 8}),
    "bookkeeper-recovery-without-fencing": (Config(servers=2, max_generation=1, max_log=1, max_crashes=0),
                                            {"AckedWriteNeverLost": 5, "CommittedOnQuorum": 5}),
    # An ensemble change needs a spare bookie (a third) and a crashed one.
    # (max_generation at its default, which does not apply: the catalogue's trace explores the same space)
    "bookkeeper-unblocked-adds": (Config(servers=3, max_log=1, max_crashes=1),
                                  {"AckedWriteNeverLost": 6, "CommittedOnQuorum": 6, "HwmNeverTruncated": 9,
                                   "ReadNeverLost": 10, "ReadNeverTruncated": 10}),
}
# Each bug preset and the safe preset it differs from in one flag.
SYSTEM_SAFE = {"zab-ack-before-persist": "zab", "bookkeeper-recovery-without-fencing": "bookkeeper",
               "bookkeeper-unblocked-adds": "bookkeeper-ensemble-change"}


def test_the_system_table_covers_every_system_flag():
    for bug, safe in SYSTEM_SAFE.items():
        assert set(PRESETS[bug].protocol.differences(PRESETS[safe].protocol)) <= {
            "zab_ack_before_persist", "bookkeeper_recovery_reads_fence", "bookkeeper_block_add_completions"}
        assert len(PRESETS[bug].protocol.differences(PRESETS[safe].protocol)) == 1
    assert set(SYSTEM_TABLE) == set(SYSTEM_SAFE)


@pytest.mark.parametrize("mutant", sorted(SYSTEM_TABLE))
def test_system_mutant_caught_at_its_smallest_bounds(mutant):
    config, lengths = SYSTEM_TABLE[mutant]
    assert violated(mutant, config) == lengths


@pytest.mark.parametrize("mutant", sorted(SYSTEM_TABLE))
def test_system_mutant_keeps_its_promise_one_step_below_on_any_bound(mutant):
    config, _ = SYSTEM_TABLE[mutant]
    bounds = ["max_log", "max_crashes"] + (["max_generation"] if mutant.startswith("zab") else [])
    for lower in lowered(config, bounds, servers=config.servers - 1):
        assert "AckedWriteNeverLost" not in violated(mutant, lower), lower.describe()


@pytest.mark.parametrize("safe", sorted(set(SYSTEM_SAFE.values())))
def test_safe_system_presets_hold_with_every_witness_reached(safe):
    report = explore_compiled(safe, Config())
    assert report.ok, (report.violated, report.unreached)
    assert report.results["WriteAcknowledged"].found  # the acknowledged-write promise is not vacuous


@pytest.mark.deep
@pytest.mark.parametrize("safe, config", [
    ("zab", Config(max_generation=3, max_log=2)),
    ("zab", Config(max_generation=4, max_log=1, max_crashes=2)),
    ("bookkeeper", Config(max_log=2)),
    ("bookkeeper", Config(servers=4, max_log=2)),
    ("bookkeeper-striped", Config(max_log=2)),
    ("bookkeeper-ensemble-change", Config(max_log=2)),
])
def test_safe_system_presets_hold_at_larger_bounds(safe, config):
    report = explore_compiled(safe, config)
    assert not report.violated, report.violated


# Kafka's flags: each broken Kafka preset differs from the safe `kafka` in one flag (KIP-320's first
# attempt in two: its rule and the late LeaderAndIsr requests its defect needs); the smallest
# bounds at which the explorer catches it (lowering any one bound, or going to 2 servers, hides it).
KAFKA_TABLE = {
    # log_flush=never: one power failure of a replica that holds an acknowledged, unflushed entry.
    "kafka-unflushed": (Config(servers=2, max_generation=1, max_log=1, max_crashes=1),
                        {"AckedWriteNeverLost": 4, "CommittedOnQuorum": 4, "HwmNeverTruncated": 4,
                         "ReadNeverTruncated": 5}),
    # min.insync.replicas=1: on two replicas already, the leader alone acknowledges (no bound lowers).
    "kafka-min-insync-1": (Config(servers=2, max_generation=1, max_log=1, max_crashes=0),
                           {"AckedWriteNeverLost": 3, "CommittedOnQuorum": 3}),
    "kafka-truncate-to-hwm": (Config(servers=2, max_generation=3, max_log=1, max_crashes=0),
                              {"AckedWriteNeverLost": 5, "CommittedOnQuorum": 5, "ReadNeverTruncated": 6}),
    "kafka-kip101": (Config(servers=2, max_generation=3, max_log=2, max_crashes=0),
                     {"CommittedOnQuorum": 7, "LogMatching": 7, "ReadsAgree": 10}),
    "kafka-kip279": (Config(servers=3, max_generation=3, max_log=1, max_crashes=0),
                     {"AckedWriteNeverLost": 9, "CommittedOnQuorum": 9, "ReadsAgree": 12}),
    "kafka-kip320-first-try": (Config(servers=3, max_generation=3, max_log=1, max_crashes=0),
                               {"AckedWriteNeverLost": 8, "CommittedOnQuorum": 8, "HwmNeverTruncated": 9,
                                "ReadNeverTruncated": 9, "ReadsAgree": 12}),
    "kafka-unclean-election": (Config(servers=3, max_generation=3, max_log=1, max_crashes=1),
                               {"AckedWriteNeverLost": 9, "AcknowledgedWriteKept": 8, "CommittedOnQuorum": 10,
                                "HwmNeverTruncated": 9, "ReadNeverLost": 9, "ReadNeverTruncated": 10,
                                "ReadsAgree": 12}),
    # controller_fencing=false: a partition, and a second epoch elected around the cut-off leader, which
    # shrank its ISR on its own and acknowledged; with two replicas its own ISR is never smaller than the
    # controller's majority (no bound lowers: one epoch, no partition or two replicas show nothing).
    "kafka-without-controller-fencing": (Config(servers=3, max_generation=2, max_log=1, max_crashes=0, max_partitions=1),
                                         {"AcknowledgedWriteKept": 6, "AckedWriteNeverLost": 7, "CommittedOnQuorum": 7,
                                          "ReadNeverLost": 7, "HwmNeverTruncated": 8, "ReadNeverTruncated": 8,
                                          "ReadsAgree": 11}),
}


def test_the_kafka_table_covers_every_kafka_flag():
    mutants = [name for name in presets_of("kafka") if len(PRESETS[name].protocol.differences(KAFKA)) == 1]
    assert set(KAFKA_TABLE) == set(mutants) | {"kafka-kip320-first-try"} == {
        n for n in presets_of("kafka") if PRESETS[n].broken}
    changed = {flag for name in KAFKA_TABLE for flag in PRESETS[name].protocol.differences(KAFKA)}
    assert changed == {"follower_truncation", "unclean_election", "late_leader_and_isr", "min_insync_replicas",
                       "log_flush", "controller_fencing"}


# A partition runs on the reference backend: its row's search (seconds) under -m deep; the default run
# pins the same lengths at the same bounds in tests/model/test_partition_kafka_zab.py.
@pytest.mark.parametrize("mutant", [pytest.param(m, marks=pytest.mark.deep) if KAFKA_TABLE[m][0].max_partitions else m
                                    for m in sorted(KAFKA_TABLE)])
def test_kafka_caught_at_its_smallest_bounds_and_not_one_step_below(mutant):
    assert_smallest(mutant, KAFKA_TABLE)


def test_safe_kafka_holds_with_every_witness_reached():
    report = explore_compiled("kafka", Config(servers=2, max_generation=3, max_log=2))
    assert report.ok, (report.violated, report.unreached)
