"""Write-ahead log benchmark: recovery time for a large log, and append throughput with fsync.

    python bench/wal_recovery.py [--records 100000] [--payload 32] [--repeats 5] [--dir PATH]

Recovery is measured two ways: opening the log (scan every segment, check every CRC, build the
index -> offset map) and ``DiskStorage.load()`` (the same plus reading every payload back, which is what
a restarting replica does). fsync figures depend entirely on the disk under ``--dir`` (tmpfs makes
fsync free), so the directory and its filesystem are printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hwm.impl.storage import DiskStorage  # noqa: E402
from hwm.impl.wal import DEFAULT_SEGMENT_BYTES, WriteAheadLog  # noqa: E402


def filesystem_of(path: str) -> str:
    path = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) >= 3 and (path == fields[1] or path.startswith(fields[1].rstrip("/") + "/")):
                    if len(fields[1]) > len(best):
                        best, kind = fields[1], fields[2]
    except OSError:
        pass
    return kind


def payload(index: int, size: int) -> bytes:
    return (b"%012d" % index * (size // 12 + 1))[:size]


def write_log(directory: str, records: int, size: int, batch: int) -> float:
    started = time.perf_counter()
    with WriteAheadLog(directory) as wal:
        for start in range(1, records + 1, batch):
            stop = min(start + batch, records + 1)
            wal.append([(index, 1 + index // 10_000, payload(index, size)) for index in range(start, stop)])
            wal.sync()
    return time.perf_counter() - started


def append_rate(directory: str, records: int, size: int, batch: int) -> tuple[float, float]:
    """(records/s, fsyncs/s) appending ``records`` in batches of ``batch``, syncing each batch."""
    shutil.rmtree(directory, ignore_errors=True)
    with WriteAheadLog(directory) as wal:
        started = time.perf_counter()
        for start in range(1, records + 1, batch):
            stop = min(start + batch, records + 1)
            wal.append([(index, 1, payload(index, size)) for index in range(start, stop)])
            wal.sync()
        elapsed = time.perf_counter() - started
    batches = -(-records // batch)
    return records / elapsed, batches / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--payload", type=int, default=32, help="payload bytes per record")
    parser.add_argument("--batch", type=int, default=1_000, help="records per sync when writing the log")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", help="where to write (default: a fresh temporary directory)")
    args = parser.parse_args(argv)

    base = tempfile.mkdtemp(prefix="hwm-bench-", dir=args.dir)
    try:
        log_dir = os.path.join(base, "replica", "wal")
        print(f"directory        {base} ({filesystem_of(base)})")
        print(f"records          {args.records:,} x {args.payload} B payload, segments of {DEFAULT_SEGMENT_BYTES:,} B")
        written = write_log(log_dir, args.records, args.payload, args.batch)
        segments = sorted(name for name in os.listdir(log_dir) if name.endswith(".log"))
        total = sum(os.path.getsize(os.path.join(log_dir, name)) for name in segments)
        print(f"write            {written:.3f} s ({args.records / written:,.0f} records/s, sync every {args.batch})")
        print(f"log size         {total:,} B in {len(segments)} segments")

        open_times, load_times = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            wal = WriteAheadLog(log_dir)
            open_times.append(time.perf_counter() - started)
            assert wal.last_index == args.records
            wal.close()
            storage = DiskStorage(os.path.join(base, "replica"))
            started = time.perf_counter()
            durable = storage.load()
            load_times.append(time.perf_counter() - started)
            assert len(durable.log) == args.records
            storage.close()
        for label, times in (("recovery (open+scan)", open_times), ("recovery (load all)", load_times)):
            median = statistics.median(times)
            print(
                f"{label:<20} median {median:.3f} s over {args.repeats} runs "
                f"({args.records / median:,.0f} records/s; min {min(times):.3f}, max {max(times):.3f})"
            )

        scratch = os.path.join(base, "append")
        for batch, records in ((1, 2_000), (100, 20_000)):
            rate, syncs = append_rate(scratch, records, args.payload, batch)
            print(f"append, fsync per batch of {batch:<3}  {rate:>10,.0f} records/s ({syncs:,.0f} syncs/s, {records:,} records)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
