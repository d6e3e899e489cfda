"""The mutant table of docs/model.md: the smallest bounds at which the explorer catches each
single-flag mutant of raft, pinned from both sides (caught there, not caught one step below)."""

from dataclasses import replace

import pytest

from model.state import Config
from properties.protocol import MUTANTS, PRESETS
from tests.explored import explore

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
}
SAFE = {"raft-durable-hwm", "raft-noop"}
LIMITS = {"max_generation": 1, "max_log": 1, "max_crashes": 0}


def violated(preset, config):
    report = explore(preset, config)
    return {name: report.results[name].length for name in report.violated}


def test_the_table_covers_every_mutant():
    assert set(TABLE) | SAFE == set(MUTANTS)
    assert all(PRESETS[m].broken for m in TABLE) and not any(PRESETS[m].broken for m in SAFE)


@pytest.mark.parametrize("mutant", sorted(TABLE))
def test_caught_at_its_smallest_bounds(mutant):
    config, lengths = TABLE[mutant]
    assert violated(mutant, config) == lengths


@pytest.mark.parametrize("mutant", sorted(TABLE))
def test_not_caught_one_step_below_on_any_bound(mutant):
    config, _ = TABLE[mutant]
    smaller = [replace(config, **{bound: getattr(config, bound) - 1})
               for bound, lowest in LIMITS.items() if getattr(config, bound) > lowest]
    if config.servers == 3:  # every mutant here needs a third server: with two, every quorum is everyone
        smaller.append(replace(config, servers=2))
    for bounds in smaller:
        assert violated(mutant, bounds) == {}, bounds.describe()


def test_seed_quorum_is_caught_only_with_an_even_number_of_servers():
    assert violated("raft-seed-quorum", Config(servers=4, max_generation=1, max_log=1, max_crashes=0)) == {"CommittedOnQuorum": 3}
    assert violated("raft-seed-quorum", Config(servers=3, max_generation=2, max_log=1, max_crashes=1)) == {}


@pytest.mark.parametrize("mutant", sorted(SAFE))
def test_safe_mutants_hold_with_every_witness_reached(mutant):
    report = explore(mutant, Config(max_log=2, max_generation=3))
    assert report.ok, (report.violated, report.unreached)


@pytest.mark.deep
@pytest.mark.parametrize("mutant", sorted(SAFE))
def test_safe_mutants_hold_at_larger_bounds(mutant):
    report = explore(mutant, Config(max_log=2, max_generation=4, max_crashes=2))
    assert report.ok, (report.violated, report.unreached)
