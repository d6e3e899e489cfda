"""The conformance machine kills every broken preset ("the tool finds this bug", as in Hypothesis's
own tests/quality).

For each broken preset the model and the implementation both run that preset, so their snapshots
keep agreeing (the implementation honours the flag as the model does); what must fail is an
`always` property on the implementation's history. A test that never fails on a known-broken
variant is itself broken, so each test asserts that the run fails within its budget:

- examples: Hypothesis's max_examples (500 in the default run, or the preset's own, `kill_matrix.ci_budget`;
  5000 under -m deep, or the preset's own deep budget, `kill_matrix.deep_budget`), derandomized,
  so a run replays the same examples (see MEASURED for how many it needed);
- seconds: what the hunt took when the budget was set (MEASURED), for orientation only.

The default run kills the presets found in a few seconds; `pytest -m deep` kills all of them with
a larger budget. `python bench/conformance.py` measures the same hunts over several seeds. Kafka's
presets are hunted on Kafka's replicas (impl/kafka.py), with the shrink of the ISR among the rules;
BookKeeper's on its bookies, writer and recovery client (impl/bookkeeper.py), with the ledger's actions
as the rules (tests/conformance/test_bookkeeper_conformance.py also runs issue 2614's steps through
the machine in the default run: a random walk lines them up about once in thousands of examples;
issue 1591's ensemble change, a few examples in, is hunted by default).
"""

from __future__ import annotations

import pytest

from hwm.checker.replay import judge, replay_on_model
from hwm.bridge.replay import replay_on_impl
from hwm.properties.protocol import PRESETS, model_only
from hwm.properties.trace import load
from hwm.bridge.conformance.kill_matrix import (CI_BUDGET, DEEP_BUDGET, IN_CI, ci_budget, deep_budget, kill_config,
                                               kill_steps)
from hwm.bridge.conformance import PropertyViolation, hunt, machine_for

# preset -> {budget: (test cases run until the derandomized hunt failed, its seconds)}, as
# `python bench/conformance.py` measured them when the budgets were set (2 shared cores). Derandomized
# means the same examples on every run, whatever the process loaded before (tests/conftest.py keeps
# Hypothesis's pool of the loaded modules' constants empty under the default profile; with it, the
# same hunt needed other counts in a whole-suite run than alone). The budgets leave a wide margin.
MEASURED = {
    "seed": {CI_BUDGET: (37, 0.4), DEEP_BUDGET: (32, 0.6)},
    "kip101": {CI_BUDGET: (104, 1.0), DEEP_BUDGET: (174, 2.9)},  # 2 servers (kill_config)
    "raft-seed-quorum": {CI_BUDGET: (5, 0.1), DEEP_BUDGET: (5, 0.1)},
    "raft-any-generation-commit": {DEEP_BUDGET: (838, 10.1)},
    "raft-any-election": {CI_BUDGET: (25, 0.2), DEEP_BUDGET: (89, 1.4)},
    "raft-generation-mismatch": {CI_BUDGET: (197, 2.0), DEEP_BUDGET: (29, 0.6)},
    "raft-truncate-to-leader-hwm": {DEEP_BUDGET: (1166, 31.5)},  # 2 servers (kill_config)
    "raft-truncate-to-own-hwm": {1000: (490, 2.9), DEEP_BUDGET: (257, 5.1)},  # 2 servers (kill_config)
    "zab-ack-before-persist": {3000: (1514, 7.8), DEEP_BUDGET: (245, 15.3)},  # kill_config, kill_steps
    # Kafka's replicas (impl/kafka.py) against Kafka's model.
    "kafka-truncate-to-hwm": {1200: (550, 3.4), DEEP_BUDGET: (139, 0.8)},
    "kafka-kip101": {CI_BUDGET: (165, 1.5), DEEP_BUDGET: (393, 2.9)},
    "kafka-kip279": {DEEP_BUDGET: (875, 5.8)},
    "kafka-unclean-election": {DEEP_BUDGET: (1722, 12.5)},  # 2 crashes (kill_config)
    # BookKeeper's bookies, writer and recovery client (impl/bookkeeper.py); about 14 ms an example.
    "bookkeeper-recovery-without-fencing": {20000: (4695, 67.0)},  # deep_budget, kill_config, kill_steps
    "bookkeeper-unblocked-adds": {CI_BUDGET: (5, 0.0), DEEP_BUDGET: (5, 0.4)},  # one crash (kill_config)
}
# The default-run counts (CI_BUDGET's and CI_BUDGETS') were measured with the pool kept empty, load 1.1;
# the deep ones earlier, with it (the deep profile is not derandomized, and draws from it).


def assert_killed(preset: str, budget: int, out_dir) -> None:
    machine = machine_for(preset, kill_config(preset), out_dir=out_dir)
    found = hunt(machine, budget, stateful_step_count=kill_steps(preset))
    assert found.failure is not None, (
        f"the conformance machine did not find a violation under {preset} in {budget} examples "
        f"({found.total_seconds:.0f}s): a broken test")
    assert isinstance(found.failure, PropertyViolation), \
        f"{preset}: the implementation diverged from the model instead:\n{found.failure}"
    # The failing run is a trace that the model and the implementation both replay as a violation.
    trace = load(found.failure.trace_path)
    for replay in (replay_on_model, replay_on_impl):
        outcome = replay(trace)
        assert judge(trace, outcome, overridden=False)[0] == 0, f"{replay.__name__}: {outcome.summary()}"


def test_every_broken_preset_is_hunted():
    # The machine drives the implementation: presets of model-only systems are the explorer's.
    broken = {name for name, p in PRESETS.items() if p.broken and not model_only(p.protocol)}
    assert set(MEASURED) == broken and set(IN_CI) <= broken
    assert all(ci_budget(name) in MEASURED[name] for name in IN_CI)
    assert all(MEASURED[name][ci_budget(name)][0] * 1.5 <= ci_budget(name) for name in IN_CI)  # the margin


@pytest.mark.parametrize("preset", IN_CI)
def test_the_conformance_machine_kills(preset, tmp_path):
    assert_killed(preset, ci_budget(preset), tmp_path)


@pytest.mark.deep
@pytest.mark.parametrize("preset", sorted(p for p, preset in PRESETS.items()
                                          if preset.broken and not model_only(preset.protocol)))
def test_the_conformance_machine_kills_deep(preset, tmp_path):
    assert_killed(preset, deep_budget(preset), tmp_path)
