"""What a user waits for: `hwm check` (the tour) and `hwm check --protocol raft --max-log 2`, wall and CPU,
on the reference backend and on the default (`--successors auto`), the latter on its first run on a
fresh machine (empty kernel and Numba caches: it builds the kernels where that pays), `--successors
fast` on the same fresh caches (the build included, whatever the run), and auto's second run (built).

    python bench/first_run.py [--runs 1] [--command tour|raft-l2 ...]

Each run is a fresh `hwm` process in an empty working directory; CPU is the process's and its
children's (the tour's workers, the kernels' build). The first run points `HWM_CACHE_DIR` and
`NUMBA_CACHE_DIR` at new temporary directories, so nothing built earlier on this machine helps;
`fast, first run` builds into them if auto did not, and the second run reuses them. Figures go to docs/scaling.md ("The default backend and its first run").
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {"tour": ["check"], "raft-l2": ["check", "--protocol", "raft", "--max-log", "2"]}
HWM = [sys.executable, "-c", "from hwm.cli import main; main()"]


def timed(arguments: list[str], env: dict, where: str) -> tuple[float, float, int]:
    """(wall s, CPU s, exit status) of one `hwm` process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(HWM + arguments + ["--progress", "never"], env=env, cwd=where,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 3):
        sys.exit(f"hwm {' '.join(arguments)} exited {done.returncode}:\n{done.stderr}")
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs of each (medians are reported)")
    parser.add_argument("--command", action="append", choices=sorted(COMMANDS), help="default: both")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"{'command':10} {'backend':22} {'wall s':>8} {'CPU s':>8}")
    for name in args.command or list(COMMANDS):
        rows: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            caches = tempfile.mkdtemp(prefix="hwm-first-run-")
            work = tempfile.mkdtemp(prefix="hwm-work-")
            env = {**os.environ, "HWM_CACHE_DIR": os.path.join(caches, "hwm"),
                   "NUMBA_CACHE_DIR": os.path.join(caches, "numba")}
            env.pop("HWM_KERNELS", None)
            try:
                # auto on empty caches chooses (builds for the tour, not for a small check); fast builds
                # whatever the run; the second run finds the kernels built.
                for label, extra in (("reference", ["--successors", "reference"]), ("auto, first run", []),
                                     ("fast, first run", ["--successors", "fast"]), ("auto, second run", [])):
                    wall, cpu, _ = timed(COMMANDS[name] + extra, env, work)
                    rows.setdefault(label, []).append((wall, cpu))
            finally:
                shutil.rmtree(caches, ignore_errors=True)
                shutil.rmtree(work, ignore_errors=True)
        for label, figures in rows.items():
            print(f"{name:10} {label:22} {statistics.median(w for w, _ in figures):8.1f} "
                  f"{statistics.median(c for _, c in figures):8.1f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
