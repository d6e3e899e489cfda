"""BookKeeper's ledger parameters (model/bookkeeper.py, properties/ledger.py): states and seconds of one
exhaustive check per preset and ledger, with the local engine and the reference backend in this process
(the compiled backend has no form of them).

    python bench/bookkeeper.py [--quick]

The rows: the BookKeeper presets at the tour's bounds (3 bookies, log <= 1, one crash), the default
ledger first for comparison, then (unless `--quick`) the ledgers of four bookies (E, WQ, AQ) at the
same bounds, with the writer that does not block its add completions where a spare bookie exists.
Striping and spare bookies make symmetry the identity: the `off` column shows what it saves elsewhere.
docs/systems.md quotes the tour's rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from hwm.checker.run import CheckRequest, run  # noqa: E402
from hwm.checker.verdict import DEFAULT_CONFIG, tour_config  # noqa: E402
from hwm.model.registry import build_model  # noqa: E402
from hwm.model.state import Config  # noqa: E402
from hwm.properties.protocol import BOOKKEEPER, PRESETS, Protocol, presets_of  # noqa: E402


def rows(quick: bool) -> list[tuple[str, Protocol, Config]]:
    out = [(name, PRESETS[name].protocol, tour_config(name, DEFAULT_CONFIG)) for name in presets_of("bookkeeper")]
    if not quick:
        four = Config(servers=4)
        for e, w, a in ((3, 3, 2), (3, 2, 2), (3, 2, 1), (4, 3, 2), (4, 2, 2)):
            ledger = replace(BOOKKEEPER, ensemble_size=e, write_quorum=w, ack_quorum=a)
            out.append((f"E={e} WQ={w} AQ={a}", ledger, four))
            if e < four.servers:
                out.append((f"E={e} WQ={w} AQ={a} unblocked", replace(ledger, bookkeeper_block_add_completions=False),
                            four))
    return out


def measure(name: str, protocol: Protocol, config: Config, symmetry: bool) -> tuple[int, float, list[str]]:
    started = time.perf_counter()
    report = run(CheckRequest(name, symmetry=symmetry, successors="reference"), model=build_model(protocol, config))
    return report.states, time.perf_counter() - started, sorted(report.violated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the presets at the tour's bounds only")
    args = parser.parse_args()
    print(f"{'preset or ledger':38} {'bookies':>7} {'states':>8} {'s':>6} {'states (off)':>12} {'s':>6}  violated")
    for name, protocol, config in rows(args.quick):
        on, on_s, violated = measure(name, protocol, config, True)
        off, off_s, _ = measure(name, protocol, config, False)
        print(f"{name:38} {config.servers:>7} {on:>8,} {on_s:>6.1f} {off:>12,} {off_s:>6.1f}  {', '.join(violated) or '-'}",
              flush=True)


if __name__ == "__main__":
    main()
