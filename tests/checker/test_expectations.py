"""The catalogue's expectations know the bounds they need: a tour below them says so and never
claims that broken presets fail (checker/expectations.py)."""

import itertools

import pytest
from click.testing import CliRunner

from bench.needs import minimal
from hwm.checker.expectations import NEEDS, judge, needs_text, shows
from hwm.checker.run import CheckRequest, run
from hwm.checker.verdict import DEFAULT_CONFIG, tour_config
from hwm.cli import EXIT_FOUND, EXIT_NOT_SHOWN, main
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.acked import ALL_BY_NAME
from hwm.properties.protocol import PRESETS
from tests.pinned import PINNED


def test_every_broken_preset_has_its_needs_and_the_tour_bounds_show_what_the_catalogue_expects():
    for name, preset in PRESETS.items():
        if not preset.broken:
            assert not any(n == name for n, _ in NEEDS)
            continue
        servers = preset.caught_at.get("servers", DEFAULT_CONFIG.servers)
        assert (name, servers) in NEEDS and NEEDS[(name, servers)], name
        tour = tour_config(name, DEFAULT_CONFIG)
        # At the tour's bounds (three servers) exactly the catalogue's `breaks` show.
        assert {p for p in NEEDS.get((name, 3), {}) if shows(name, p, tour)} == set(preset.breaks), name


def test_the_needs_agree_with_every_pinned_rpc_run():
    # A pinned run's violations are those whose needs its bounds meet: none below (so the needs are
    # not too high), all at or above (so they are not too low); runs beyond the grid may add more.
    checked = 0
    for (name, servers, generation, log, crashes, network, _), pinned in PINNED.items():
        if name not in PRESETS or network != "rpc" or (name, servers) not in NEEDS:
            continue
        config = Config(servers, generation, log, crashes, network)
        violated = {p for p in pinned["lengths"] if ALL_BY_NAME[p].kind == "always"}
        expected = {p for p in NEEDS[(name, servers)] if shows(name, p, config)}
        assert expected <= violated, (name, config.describe())
        top = tour_config(name, Config(servers=servers))
        if all(x <= y for x, y in zip((generation, log, crashes), (top.max_generation, top.max_log, top.max_crashes))):
            assert violated == expected, (name, config.describe())
        checked += 1
    assert checked >= 10


def test_a_needs_text_names_the_bounds_in_the_command_lines_words():
    assert needs_text("raft-any-generation-commit", "ReadNeverTruncated", Config()) == "max_generation>=4, max_log>=1"
    assert needs_text("raft-seed-quorum", "CommittedOnQuorum", Config()) == "servers=4, max_log>=1"
    assert "max_crashes>=1 or max_generation>=3" in needs_text("kafka-truncate-to-hwm", "ReadNeverTruncated", Config())


def test_the_tour_below_the_catalogues_bounds_never_claims_that_broken_presets_fail(tmp_path):
    # The bounds a CI job might lower to save time: at one generation and no crash most bugs cannot show.
    result = CliRunner().invoke(main, ["check", "--max-generation", 1, "--max-crashes", 0, "--jobs", 1,
                                       "--save", tmp_path], catch_exceptions=False)
    out = result.output
    assert result.exit_code == EXIT_NOT_SHOWN, out
    assert "every preset behaves as the catalogue expects" not in out and "NOT AS EXPECTED" not in out
    assert "kip101: not shown at these bounds: CommittedOnQuorum, ReadNeverTruncated (needs max_log>=1, max_crashes>=1)" in out
    assert "raft-any-generation-commit: not shown" in out and "(needs max_generation>=4, max_log>=1)" in out
    # BookKeeper's unfenced recovery shows at one generation: it is seen, not listed.
    assert "bookkeeper-recovery-without-fencing: not shown" not in out
    # The header names the one preset checked at other bounds, and no document that does not exist.
    assert "  raft-noop at servers=3 max_generation=1 max_log=2" in result.stderr
    assert "raft presets at" not in result.stderr and "systems-raft" not in result.stderr


def _report(name, config):
    return name, run(CheckRequest(name), model=build_model(PRESETS[name].protocol, config))


def test_a_broken_preset_that_holds_at_bounds_its_bug_needs_is_a_mismatch(monkeypatch):
    # Plant a catalogue that claims kip101 shows its bug without a crash: at max_crashes 0 it holds,
    # which must be a finding (exit 1 in the tour), not "not shown".
    planted = dict(NEEDS)
    planted[("kip101", 3)] = {**NEEDS[("kip101", 3)], "ReadNeverTruncated": ((1, 1, 0),)}
    monkeypatch.setattr("hwm.checker.expectations.NEEDS", planted)
    judgement = judge([_report("kip101", Config(max_generation=1, max_crashes=0))])
    assert judgement.problems == ["kip101: expected to violate ReadNeverTruncated but did not"]
    assert EXIT_FOUND == 1


@pytest.mark.deep
@pytest.mark.parametrize("key", sorted(NEEDS))
def test_the_needs_are_the_minimal_bounds_of_the_grid_below_the_tour(key):
    # bench/needs.py's derivation, repeated: every table entry is a minimal point of the grid.
    name, servers = key
    top = tour_config(name, Config(servers=servers))
    found: dict[str, list] = {}
    # A preset whose tour partitions the network has a fourth bound, max_partitions (as in bench/needs.py).
    partitions = range(top.max_partitions + 1) if top.max_partitions else (None,)
    for g, l, c, k in itertools.product(range(1, top.max_generation + 1), range(top.max_log + 1),
                                        range(top.max_crashes + 1), partitions):
        _, report = _report(name, Config(servers, g, l, c, "rpc", max_partitions=k or 0))
        for p in report.violated:
            found.setdefault(p, []).append((g, l, c) if k is None else (g, l, c, k))
    assert {p: tuple(minimal(v)) for p, v in found.items()} == NEEDS[key]
