"""What `hwm prove` costs: the default proof of each preset, and each system's induction by server count.

    python bench/prove.py [--runs 3] [--presets raft,zab,...] [--broken] [--servers 3,4] [--json FILE]

Two tables, medians over the runs, each run in a fresh process (`hwm prove`, so imports and z3's
start count as a user pays them): the default `hwm prove --protocol P` of each safe preset (with
`--broken`, the broken ones too: their exit status is 1, a counterexample found), wall and CPU seconds;
then induction alone (`--part induction`) per system at each server count. The machine's load average
(1 min) before and after each table is printed beside it, since on a shared machine wall clock is not
CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

# The server counts of each system's induction table (raft's invariant stands at five).
INDUCTION = {"raft": (3, 4, 5), "zab": (3, 4), "kafka": (3, 4), "bookkeeper": (3, 4)}


def _load() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def _timed(args: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds of one `hwm prove` in a fresh process, and its exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    command = [sys.executable, "-c", "from hwm.cli import main; main()", "prove", *args]  # the `hwm` script's entry
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"hwm prove {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return wall, cpu, done.returncode


def _median(args: list[str], runs: int) -> dict:
    samples = [_timed(args) for _ in range(runs)]
    return {"wall": statistics.median(s[0] for s in samples), "cpu": statistics.median(s[1] for s in samples),
            "exit": samples[0][2]}


def main() -> None:
    from hwm.properties.protocol import PRESETS
    from hwm.proofs.plan import ENCODED_SYSTEMS, unencoded

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--presets", default=None, help="comma-separated presets (default: every encoded one)")
    parser.add_argument("--broken", action="store_true", help="the broken presets too")
    parser.add_argument("--servers", default=None, help="server counts for the induction table (default: per system)")
    parser.add_argument("--json", default=None, help="write the measurements here")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    names = args.presets.split(",") if args.presets else [
        n for n, p in PRESETS.items() if p.protocol.system in ENCODED_SYSTEMS and unencoded(p.protocol) is None
        and (args.broken or not p.broken)]
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        parser.error(f"unknown preset(s): {', '.join(unknown)}")
    out = {"runs": args.runs, "presets": {}, "induction": {}}

    load = _load()
    print(f"default `hwm prove --protocol P` (median of {args.runs}; load {load:.2f} before)")
    print(f"{'preset':42} {'wall s':>7} {'cpu s':>7}  exit")
    for name in names:
        m = _median(["--protocol", name], args.runs)
        out["presets"][name] = m
        print(f"{name:42} {m['wall']:>7.1f} {m['cpu']:>7.1f}  {m['exit']}", flush=True)
    print(f"load {_load():.2f} after\n")

    load = _load()
    print(f"induction alone (`--part induction`, L = 2; median of {args.runs}; load {load:.2f} before)")
    print(f"{'preset':28} {'servers':>7} {'wall s':>7} {'cpu s':>7}  exit")
    # One safe preset per system; BookKeeper's with spare bookies, whose ensemble changes the proof follows.
    safe = {"raft": "raft", "zab": "zab", "kafka": "kafka", "bookkeeper": "bookkeeper-ensemble-change"}
    for system, counts in INDUCTION.items():
        for servers in ([int(n) for n in args.servers.split(",")] if args.servers else counts):
            m = _median(["--protocol", safe[system], "--part", "induction", "--servers", str(servers)], args.runs)
            out["induction"][f"{safe[system]}/{servers}"] = m
            print(f"{safe[system]:28} {servers:>7} {m['wall']:>7.1f} {m['cpu']:>7.1f}  {m['exit']}", flush=True)
    print(f"load {_load():.2f} after")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
