"""BookKeeper on the implementation: adds per second over TCP, and the conformance machine's speed.

    python bench/bookkeeper_impl.py [--adds 300] [--examples 100]

1. Three bookies (impl/bookie_server.py) in this process on loopback, each journalling to a data
   directory under a temporary directory (an fsync per add per bookie), and one `LedgerClient`
   writer adding `--adds` entries of 100 bytes one after another: each add returns once an ack quorum
   (2 of 3) stored it. Then recovery: fencing reads, recovery reads, the close written back.
2. The conformance machine on `bookkeeper` at the conformance bounds: steps per second (model step,
   implementation step through the codec, snapshot and ledger-view comparison, every `always` property).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def tcp(adds: int) -> None:
    import socket

    from hwm.impl.bookie_server import BookieServer, LedgerClient
    from hwm.properties.protocol import BOOKKEEPER

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    ports = []
    for _ in range(3):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    directory = tempfile.mkdtemp(prefix="hwm-bench-bookkeeper-")
    addresses = {f"S{k + 1}": ("127.0.0.1", port) for k, port in enumerate(ports)}
    servers = [BookieServer(name, address, os.path.join(directory, name), os.path.join(directory, "ledger.json"))
               for name, address in addresses.items()]
    for server in servers:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    with LedgerClient(addresses, BOOKKEEPER, ledger_file=os.path.join(directory, "ledger.json")) as client:
        started = time.perf_counter()
        for k in range(adds):
            client.add(b"x" * 100)
        seconds = time.perf_counter() - started
        print(f"tcp: {adds} adds acknowledged in {seconds:.2f} s: {adds / seconds:,.0f} adds/s, "
              f"{1000 * seconds / adds:.2f} ms per add (3 bookies, ack quorum 2, one add in flight)")
    with LedgerClient(addresses, BOOKKEEPER, ledger_file=os.path.join(directory, "ledger.json")) as client:
        started = time.perf_counter()
        closed = client.recover()
        print(f"tcp: recovery closed the ledger at entry {len(closed)} in {time.perf_counter() - started:.3f} s")
    for server in servers:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    shutil.rmtree(directory)


def conformance(examples: int) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    from hwm.bridge.conformance import RPC, conformance_settings, machine_for

    machine = machine_for("bookkeeper", RPC, out_dir=tempfile.mkdtemp(prefix="hwm-bench-conformance-"))
    started = time.perf_counter()
    run_state_machine_as_test(machine, settings=conformance_settings(max_examples=examples, derandomize=True))
    seconds = time.perf_counter() - started
    print(f"conformance: bookkeeper at {RPC.describe()}: {machine.runs} runs, {machine.steps_run} steps in "
          f"{seconds:.1f} s: {machine.steps_run / seconds:,.0f} steps/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adds", type=int, default=300, help="entries the writer adds over TCP (default 300)")
    parser.add_argument("--examples", type=int, default=100, help="conformance examples (default 100)")
    args = parser.parse_args()
    tcp(args.adds)
    conformance(args.examples)


if __name__ == "__main__":
    main()
