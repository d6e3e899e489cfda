"""The conformance machine's speed, and how fast it kills each broken preset.

    python bench/conformance.py [--seeds 5] [--budget 3000] [--examples 200] [--quick]

1. Steps per second of the raft conformance run (no failure: every example runs to its end) on the
   rpc and the async network, and of Kafka's and BookKeeper's on the rpc network: model step + implementation step (codec, storage, drivers) + snapshot
   comparison + every `always` property.
2. The kill matrix: for every broken preset, the conformance machine under that preset (model and
   implementation both) hunts for a property violation on the implementation's history. Each hunt
   stops at the first failure (no shrinking) or after `--budget` examples. One derandomized hunt (what
   the kill-matrix tests run, with the bounds and budgets of `bridge.conformance.kill_matrix`) and `--seeds`
   seeded hunts (medians over those that found it). "runs" counts the test cases Hypothesis
   executed, including those it discarded as invalid (a step where no enabled rule was drawn).
   Beside it, the explorer's shortest trace to any `always` property, explored here (breadth-first,
   at EXPLORER_BOUNDS: the explorer's default bounds, within the hunt's).

A derandomized hunt replays the same examples here as inside a whole pytest run: both keep
Hypothesis's pool of the loaded modules' constants empty (`hunting.same_draws_in_every_process`),
which made the count depend on what the process had loaded before. The seeded medians are the
steadier figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from hwm.checker.run import CheckRequest, run  # noqa: E402
from hwm.model.state import Config  # noqa: E402

# Where the explorer looks for each preset's shortest violation, by the hunt's number of servers:
# the explorer's default bounds, and for the 4-server raft-seed-quorum (a bigger space)
# generation <= 2 and no crash.
EXPLORER_BOUNDS = {2: Config(servers=2, max_generation=4, max_log=1, max_crashes=1),
                   3: Config(servers=3, max_generation=4, max_log=1, max_crashes=1),
                   4: Config(servers=4, max_generation=2, max_log=1, max_crashes=0)}


def explorer_shortest(preset: str, config: Config) -> tuple[int, str] | None:
    """(length, property) of the shortest trace to any violated `always` property, or None."""
    from hwm.model.registry import build_model
    from hwm.properties.catalogue import ALWAYS
    from hwm.properties.protocol import PRESETS

    report = run(CheckRequest(preset, properties=ALWAYS), model=build_model(PRESETS[preset].protocol, config))
    found = [(r.length, name) for name, r in report.results.items() if r.kind == "always" and r.found]
    return min(found, default=None)


def table(header, rows) -> str:
    """Plain columns, each as wide as its widest cell."""
    rows = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def main() -> None:
    from hwm.properties.protocol import PRESETS, model_only
    from hwm.bridge.conformance import ASYNC, RPC, PropertyViolation, conformance_settings, hunt, machine_for
    from hypothesis.stateful import run_state_machine_as_test
    from hwm.bridge.conformance.hunting import same_draws_in_every_process
    from hwm.bridge.conformance.kill_matrix import (CI_BUDGET, DEEP_BUDGET, IN_CI, KILL_CONFIG, STEPS, ci_budget,
                                                    deep_budget, kill_config, kill_steps)
    same_draws_in_every_process()  # the derandomized hunts draw as the tests' do

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeded hunts per preset (default 5)")
    parser.add_argument("--budget", type=int, default=3000, help="max examples per hunt (default 3000)")
    parser.add_argument("--examples", type=int, default=200, help="examples for the steps/s runs (default 200)")
    parser.add_argument("--quick", action="store_true", help="2 seeds, budget 1000, 60 examples")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.budget, args.examples = 2, 1000, 60
    out = tempfile.mkdtemp(prefix="hwm-bench-conformance-")

    print("conformance speed (the safe presets, no failure)")
    rows = []
    for preset, config in (("raft", RPC), ("raft", ASYNC), ("kafka", RPC), ("bookkeeper", RPC), ("bookkeeper-striped", RPC),
                           ("bookkeeper-ensemble-change", RPC)):
        machine = machine_for(preset, config, out_dir=out)
        started = time.perf_counter()
        run_state_machine_as_test(machine, settings=conformance_settings(max_examples=args.examples, derandomize=True))
        seconds = time.perf_counter() - started
        rows.append([preset, config.network, config.describe(), machine.runs, machine.steps_run, f"{seconds:.1f}",
                     f"{machine.steps_run / seconds:,.0f}", f"{machine.runs / seconds:,.1f}"])
    print(table(["preset", "network", "bounds", "runs", "steps", "seconds", "steps/s", "runs/s"], rows))

    print(f"\nkill matrix (budget {args.budget} examples per hunt: derandomized, then {args.seeds} seeds)")
    rows = []
    measured: dict[str, dict] = {}
    for name, preset in PRESETS.items():
        if not preset.broken or model_only(preset.protocol):  # the machine drives the implementation
            continue
        config = kill_config(name)
        bounds = EXPLORER_BOUNDS[config.servers]
        shortest = explorer_shortest(name, bounds)
        # Exactly the hunts of the kill-matrix tests (derandomized: the budget seeds them).
        tested = [(ci_budget(name), hunt(machine_for(name, config, out_dir=out), ci_budget(name),
                                         stateful_step_count=kill_steps(name))) if name in IN_CI else None,
                  (deep_budget(name), hunt(machine_for(name, config, out_dir=out), deep_budget(name),
                                           stateful_step_count=kill_steps(name)))]
        found_runs, found_seconds = [], []
        for seed in range(args.seeds):
            result = hunt(machine_for(name, config, out_dir=out, label=f"{name}-seed{seed}"), args.budget, seed=seed,
                          stateful_step_count=kill_steps(name))
            if isinstance(result.failure, PropertyViolation):
                found_runs.append(result.examples)
                found_seconds.append(result.seconds)
        cells = []
        for budget_and_hunt in tested:
            if budget_and_hunt is None:
                cells.append("-")
                continue
            budget, fixed = budget_and_hunt
            cells.append(f"{fixed.examples} runs / {fixed.seconds:.1f}s ({fixed.failure.property})"
                         if isinstance(fixed.failure, PropertyViolation) else f"NOT FOUND ({fixed.total_seconds:.0f}s)")
            measured.setdefault(name, {})[budget] = (fixed.examples, round(fixed.seconds or 0, 1))
        explorer = (f"{shortest[0]} ({shortest[1]}; {bounds.servers} servers g<={bounds.max_generation} "
                    f"log<={bounds.max_log} crashes<={bounds.max_crashes})" if shortest else "none")
        rows.append([name, f"{config.servers} servers", *cells,
                     f"{len(found_runs)}/{args.seeds}",
                     f"{statistics.median(found_runs):.0f}" if found_runs else "-",
                     f"{statistics.median(found_seconds):.1f}" if found_seconds else "-", explorer])
        print(f"  {name}: done", file=sys.stderr, flush=True)
    print(table(["preset", "cluster", f"CI test ({CI_BUDGET} ex. or the preset's)", f"deep test ({DEEP_BUDGET} ex.)",
                 f"seeds found ({args.budget} ex.)", "median runs", "median s", "explorer's shortest"], rows))
    print(f"\nmeasured (for the kill-matrix tests' MEASURED): {measured}")
    print(f"\nhunt bounds: {KILL_CONFIG.describe()} (4 servers for raft-seed-quorum, 2 for the restart mutants, 2 crashes for kafka-unclean-election), at most {STEPS} steps "
          f"per example; failing runs saved in {out}")


if __name__ == "__main__":
    main()
