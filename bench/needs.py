"""Derive checker/verdict.py's NEEDS table: for every broken preset and every always property the
catalogue expects it to violate, the smallest bounds (max_generation, max_log, max_crashes, and
max_partitions for a preset whose tour partitions the network, at the
preset's catch servers on the rpc network) at which the breadth-first search shows the violation.

    python bench/needs.py          # prints the table; paste it into checker/verdict.py

Bounds only add behaviour (a run within smaller bounds is a run within larger ones), so the
minimal elements of the grid below the default bounds are all the table needs."""

from __future__ import annotations

import itertools
import sys
import time

from hwm.checker.run import CheckRequest, run
from hwm.checker.verdict import DEFAULT_CONFIG, tour_config
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS


def minimal(shown: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    return sorted(b for b in shown if not any(o != b and all(x <= y for x, y in zip(o, b)) for o in shown))


def main(names: list[str]) -> None:
    """Every broken preset's rows, or those of the presets named on the command line."""
    for name, preset in PRESETS.items():
        if not preset.broken or (names and name not in names):
            continue
        servers = preset.caught_at.get("servers", DEFAULT_CONFIG.servers)
        top = tour_config(name, DEFAULT_CONFIG)
        found: dict[str, list] = {p: [] for p in preset.breaks or ()}
        started = time.perf_counter()
        # A preset whose tour partitions the network gets a fourth bound, max_partitions.
        partitions = range(0, top.max_partitions + 1) if top.max_partitions else (None,)
        for g, l, c, p in itertools.product(range(1, top.max_generation + 1), range(0, top.max_log + 1),
                                            range(0, top.max_crashes + 1), partitions):
            config = Config(servers, g, l, c, "rpc", max_partitions=p or 0)
            try:
                report = run(CheckRequest(name), model=build_model(preset.protocol, config))
            except ValueError:
                continue
            for prop in report.violated:
                found.setdefault(prop, []).append((g, l, c) if p is None else (g, l, c, p))
        # In NEEDS's own form, to paste into checker/expectations.py.
        print(f"    ({name!r}, {servers}): {{  # {time.perf_counter() - started:.0f} s")
        for p, shown in found.items():
            print(f"        {p!r}: {tuple(minimal(shown))!r},")
        print("    },")


if __name__ == "__main__":
    main(sys.argv[1:])
