"""Local engine throughput: distinct states per second and memory per visited state.

    python bench/checker.py [--runs 5] [--quick]
    python bench/checker.py --backends [--runs 3] [--preset P ...]

`--backends`: `hwm check --protocol P --json` with `--successors reference` and with
`--successors fast`, for every preset of ZAB, BookKeeper and Kafka at the default bounds
(one process per run, one core): distinct states per second of the search alone, the
ratio, and the fast backend's set-up (compilation, or loading Numba's cache) apart.

Each run is a fresh process (so memory is measured from a clean heap): the resident
set size grown during the search, divided by the states visited. Medians over the
runs; each configuration is run with symmetry on and off side by side, with the
ratio of the two, and with the default configuration as the reference row.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

CONFIGS = [
    ("raft", dict()),
    ("seed", dict()),
    ("raft-any-generation-commit", dict()),
    ("raft", dict(max_generation=4, max_log=2)),
    ("raft", dict(network="async", max_generation=1, max_log=2, max_crashes=0)),
    # The other systems' presets at the default bounds (docs/systems.md).
    ("zab", dict()),
    ("zab-ack-before-persist", dict()),
    ("bookkeeper", dict()),
    ("bookkeeper-recovery-without-fencing", dict()),
]


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def one_run(preset: str, overrides: dict, symmetry: bool, queue) -> None:
    from hwm.checker.run import CheckRequest, run
    from hwm.model.registry import build_model
    from hwm.model.state import Config
    from hwm.properties.protocol import PRESETS

    model = build_model(PRESETS[preset].protocol, Config(**overrides))
    before = rss_kib()
    report = run(CheckRequest(preset, symmetry=symmetry), model=model)
    grown = rss_kib() - before
    queue.put((report.states, report.seconds, grown * 1024 / report.states))


def measure(preset, overrides, symmetry, runs):
    ctx = mp.get_context("spawn")
    results = []
    for _ in range(runs):
        queue = ctx.Queue()
        proc = ctx.Process(target=one_run, args=(preset, overrides, symmetry, queue))
        proc.start()
        results.append(queue.get())
        proc.join()
    states = results[0][0]
    rate = statistics.median(r[0] / r[1] for r in results)
    memory = statistics.median(r[2] for r in results)
    return states, rate, memory


def kafka_presets(runs: int) -> None:
    """Each Kafka preset at the default bounds and at the tour's (max_generation 3; 1 for kafka-unflushed),
    symmetry on."""
    from hwm.checker.verdict import DEFAULT_CONFIG, tour_config
    from hwm.properties.protocol import presets_of

    print(f"Kafka presets, local breadth-first engine, symmetry on, median of {runs} run(s), one core")
    print(f"{'preset':26} {'bounds':22} {'states':>10} {'seconds':>8}")
    for preset in presets_of("kafka"):
        tour = tour_config(preset, DEFAULT_CONFIG)
        lowered = {k: getattr(tour, k) for k in ("max_generation", "max_log", "max_crashes")
                   if getattr(tour, k) != getattr(DEFAULT_CONFIG, k)}
        for label, overrides in (("default", {}), ("tour", lowered)):
            states, rate, _ = measure(preset, dict(overrides), True, runs)
            print(f"{preset:26} {label + ' ' + ' '.join(f'{k}={v}' for k, v in overrides.items()):22} "
                  f"{states:>10,} {states / rate:>8.1f}", flush=True)


BACKEND_SYSTEMS = ("zab", "bookkeeper", "kafka")


def cli_check(preset: str, successors: str) -> dict:
    """One `hwm check --protocol preset --successors ... --json` in a fresh process."""
    import json
    import subprocess

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    command = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')", "check", "--protocol", preset,
               "--successors", successors, "--json"]
    done = subprocess.run(command, cwd=root, env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a property is violated, which a broken preset is for
        raise SystemExit(f"{' '.join(command[3:])} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def backends(presets: list[str], runs: int) -> None:
    """States/s of the reference and the fast successor backends on the CLI's default bounds."""
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"hwm check --protocol P --successors reference|fast, default bounds, median of {runs} run(s), "
          f"one core; load average {load}")
    header = f"{'preset':38} {'states':>8} {'reference/s':>12} {'fast/s':>10} {'ratio':>7} {'fast set-up s':>14}"
    print(header)
    print("-" * len(header))
    for preset in presets:
        rates, setups, states = {}, [], set()
        for successors in ("reference", "fast"):
            results = [cli_check(preset, successors) for _ in range(runs)]
            states |= {r["distinct_states"] for r in results}
            rates[successors] = statistics.median(r["distinct_states"] / r["seconds"] for r in results)
            if successors == "fast":
                setups = [r["setup_seconds"] for r in results]
        if len(states) != 1:
            raise SystemExit(f"{preset}: the backends disagree on the distinct-state count: {sorted(states)}")
        print(f"{preset:38} {states.pop():>8,} {rates['reference']:>12,.0f} {rates['fast']:>10,.0f} "
              f"{rates['fast'] / rates['reference']:>6.1f}x {statistics.median(setups):>14.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="only the default configuration, 3 runs")
    parser.add_argument("--preset", action="append", default=None,
                        help="only this preset's configurations (repeatable); the first row stays the reference")
    parser.add_argument("--kafka", action="store_true",
                        help="states and seconds of every Kafka preset at the default and the tour's bounds")
    parser.add_argument("--backends", action="store_true",
                        help="reference vs fast successors on every ZAB, BookKeeper and Kafka preset (hwm check)")
    args = parser.parse_args()
    if args.backends:
        from hwm.properties.protocol import presets_of

        presets = args.preset or [p for system in BACKEND_SYSTEMS for p in presets_of(system)]
        backends(presets, args.runs if args.runs != 5 else 3)
        return
    if args.kafka:
        kafka_presets(args.runs if args.runs != 5 else 1)
        return
    configs = CONFIGS[:1] if args.quick else CONFIGS
    if args.preset:
        configs = CONFIGS[:1] + [c for c in CONFIGS[1:] if c[0] in args.preset]
    runs = 3 if args.quick else args.runs
    print(f"local breadth-first engine, median of {runs} runs, one core")
    header = f"{'configuration':52} {'symmetry':8} {'states':>10} {'states/s':>10} {'B/state':>8} {'vs reference':>12}"
    print(header)
    print("-" * len(header))
    reference = None
    for preset, overrides in configs:
        label = preset + (" " + " ".join(f"{k}={v}" for k, v in overrides.items()) if overrides else " (default bounds)")
        rows = {}
        for symmetry in (True, False):
            states, rate, memory = measure(preset, overrides, symmetry, runs)
            rows[symmetry] = (states, rate)
            if reference is None:
                reference = rate
            print(f"{label:52} {'on' if symmetry else 'off':8} {states:>10,} {rate:>10,.0f} {memory:>8,.0f} "
                  f"{rate / reference:>11.2f}x", flush=True)
        on, off = rows[True], rows[False]
        print(f"{'':52} symmetry reduces states {off[0] / on[0]:.1f}x; time-to-finish ratio "
              f"{(off[0] / off[1]) / (on[0] / on[1]):.1f}x")


if __name__ == "__main__":
    main()
