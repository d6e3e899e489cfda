"""One large exhaustive check with the compiled backend and symmetry: docs/scaling.md, "Reach".

    python bench/reach.py --servers 5 --max-generation 4 --max-log 2 --max-crashes 1
    python bench/reach.py --network async            # the async network at the default bounds

Prints progress (states, states/s, depth, resident memory) every few seconds on stderr,
then the figures: distinct states, transitions, depth, bounds hit, seconds, peak RSS and
each property's verdict. The defaults are the CLI's (3 servers, generation <= 4, log <= 1,
1 crash, rpc, channel capacity 1).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from hwm.model.registry import build_model  # noqa: E402
from hwm.checker.run import CheckRequest, run  # noqa: E402
from hwm.model.state import Config  # noqa: E402
from hwm.properties.protocol import PRESETS  # noqa: E402
from bench.bounds import add_search_arguments, bounds_of  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_search_arguments(parser, servers=3, max_log=1)
    parser.add_argument("--channel-capacity", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between progress lines")
    args = parser.parse_args()

    config = Config(**bounds_of(args), channel_capacity=args.channel_capacity)
    model = build_model(PRESETS[args.preset].protocol, config)
    last = [0.0]

    def progress(info: dict) -> None:
        now = time.monotonic()
        if now - last[0] >= args.every:
            last[0] = now
            print(f"[{time.strftime('%H:%M:%S')}] depth {info['depth']} states {info['states']:,} "
                  f"frontier {info['frontier']:,} {info['states_per_second']:,.0f} states/s "
                  f"rss {rss_mib():,.0f} MiB", file=sys.stderr, flush=True)

    request = CheckRequest(args.preset, symmetry=not args.no_symmetry, successors="fast", workers=args.workers)
    print(f"{args.preset} {config.describe()} symmetry={request.symmetry} workers={args.workers}", flush=True)
    report = run(request, progress, model=model)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"states       {report.states:,}")
    print(f"transitions  {report.transitions:,}")
    print(f"depth        {report.depth}")
    print(f"bounds_hit   {sorted(report.bounds_hit)}")
    print(f"seconds      {report.seconds:.2f}")
    print(f"states/s     {report.states / report.seconds:,.0f}" if report.seconds else "states/s     -")
    print(f"peak RSS     {peak_mib:,.0f} MiB")
    print(f"complete     {report.complete}")
    for result in report.results.values():
        verdict = ("violated" if result.found else "holds") if result.kind == "always" else \
                  ("reached" if result.found else "NOT reached")
        length = f" (length {result.length})" if result.found and getattr(result, "length", None) is not None else ""
        print(f"  {result.kind:9} {result.name}: {verdict}{length}")
    print(f"ok           {report.ok}")


if __name__ == "__main__":
    main()
