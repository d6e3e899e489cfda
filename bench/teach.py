"""Teaching benchmark: how fast a trace is explained, drawn and served.

    python bench/teach.py [--repeats 20]

Measures, for the longest catalogue trace (Raft's Figure 8, 11 steps): building its
explained frames, writing its HTML page with the fix side by side, and the explorer's
/api/state round trip over real HTTP on 127.0.0.1 with the whole path (what every click
costs), plus one /api/search at the default bounds (uncached); then the frames and the page of
a Kafka trace (beside its fix) and of a liveness lasso. Prints medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hwm.checker.replay import replay_on_model  # noqa: E402
from hwm.teach.explain import frames_of_outcome  # noqa: E402
from hwm.teach.explorer import serve_in_thread  # noqa: E402
from hwm.teach.page import write_trace_page  # noqa: E402
from hwm.properties.trace import load  # noqa: E402

TRACE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "counterexamples",
                     "raft-any-generation-commit.json")


def median_ms(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    trace = load(TRACE)
    print(f"trace {os.path.basename(TRACE)}: {len(trace.steps)} steps, {args.repeats} repeats, medians")
    frames = median_ms(lambda: frames_of_outcome(trace, replay_on_model(trace)), args.repeats)
    print(f"  replay + explained frames      {frames:8.1f} ms")
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "page.html")
        page = median_ms(lambda: write_trace_page(trace, out, compare="raft"), args.repeats)
        print(f"  HTML page, fix side by side    {page:8.1f} ms  ({os.path.getsize(out):,} bytes)")
    server, url = serve_in_thread()
    body = json.dumps({"protocol": trace.protocol, "steps": [s.to_json() for s in trace.steps],
                       "compare": "raft"}).encode()

    def post(route: str, data: bytes) -> None:
        request = urllib.request.Request(url + route, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()

    click = median_ms(lambda: post("api/state", body), args.repeats)
    print(f"  explorer /api/state (11 steps) {click:8.1f} ms")
    search = median_ms(lambda: post("api/search", json.dumps({"protocol": "seed"}).encode()), 1)
    print(f"  explorer /api/search (seed)    {search:8.1f} ms  (first call; later ones are cached)")
    # Another system's words and pictures: Kafka's KIP-101 trace beside KIP-279, and a lasso.
    for name, compare in (("kafka-kip101.json", "kafka-kip279"), ("liveness/seed-followers-catch-up.json", None)):
        other = load(os.path.join(os.path.dirname(TRACE), name))
        frames = median_ms(lambda: frames_of_outcome(other, replay_on_model(other)), args.repeats)
        with tempfile.TemporaryDirectory() as scratch:
            out = os.path.join(scratch, "page.html")
            page = median_ms(lambda: write_trace_page(other, out, compare=compare), args.repeats)
            size = os.path.getsize(out)
        print(f"  {name} ({len(other.steps)} steps): frames {frames:.1f} ms, page {page:.1f} ms ({size:,} bytes)")
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
