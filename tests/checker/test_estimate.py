"""How long a check will take (checker/estimate.py): the prediction from the bounds against the pinned
counts, the warning before a long run, and the remaining time the progress line reads off the levels."""

from hwm.checker.engine import CheckOptions, Search
from hwm.checker.estimate import (LONG_RUN_SECONDS, long_run_warning, predicted_seconds, predicted_states,
                                  remaining_states)
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS
from tests.pinned import PINNED, config_of


def test_the_prediction_from_the_bounds_is_within_a_factor_of_two_of_every_raft_pin():
    checked = 0
    for key, pinned in PINNED.items():
        preset, config, symmetry = config_of(key)
        if preset != "raft" or config.network != "rpc" or not symmetry:
            continue
        ratio = predicted_states("raft", config) / pinned["states"]
        assert 1 / 2.1 < ratio < 2.1, (key, pinned["states"], ratio)
        checked += 1
    assert checked >= 6


def test_each_systems_presets_at_the_tour_bounds_are_within_a_factor_of_seven():
    for key, pinned in PINNED.items():
        preset, config, symmetry = config_of(key)
        if key[1:] in ((3, 4, 1, 1, "rpc", True), (3, 3, 1, 1, "rpc", True)) and preset != "raft-noop":
            ratio = predicted_states(PRESETS[preset].protocol.system, config) / pinned["states"]
            assert 1 / 7 < ratio < 7, (key, ratio)  # seed: 39,973 states where raft has 6,936


def test_a_run_the_bounds_predict_long_is_warned_of_and_the_default_is_not():
    huge = Config(servers=5, max_generation=10, max_log=5)
    warning = long_run_warning([("raft", huge, "fast")], symmetry=True)
    assert warning.startswith("warning: these bounds predict roughly 10^13 states, about ") and "years" in warning
    for system in ("raft", "zab", "bookkeeper", "kafka"):
        assert long_run_warning([(system, Config(), "reference")], symmetry=True) is None
    five = Config(servers=5, max_log=2)  # the 5-server pin: 16,668,484 states, about 7 min on the fast backend
    assert predicted_seconds(predicted_states("raft", five), "fast") > LONG_RUN_SECONDS
    assert long_run_warning([("raft", five, "fast")], symmetry=True) is not None


def test_the_remaining_states_come_once_the_levels_shrink_and_mirror_the_growth():
    raft_log_2 = [1, 3, 12, 34, 91, 253, 735, 2019, 4762, 9330, 14734, 17853, 15745, 9410, 3486, 733, 78, 4]
    assert remaining_states(raft_log_2[:12]) is None  # still growing: no claim
    assert remaining_states(raft_log_2[:13]) == sum(raft_log_2[:10])  # 17,240 predicted
    assert sum(raft_log_2[13:]) == 13_711  # found
    assert remaining_states(raft_log_2[:13], current=20_000) == 0


def test_the_engine_reports_its_levels():
    """The levels the progress line's ETA reads (tests/cli/test_render.py renders it)."""
    infos = []
    search = Search(build_model(PRESETS["raft"].protocol, Config()), CheckOptions(progress=infos.append, successors="fast"), [], "raft")
    report = search.run()
    assert sum(infos[-1]["levels"]) == report.states == 6936
