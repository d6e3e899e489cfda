"""Deterministic simulation of the real runtime: `impl.runtime.Node`, unmodified, on a simulated
network and simulated disks, driven by a schedule, checked against the model's properties and the
clients' history.

What runs is the production code: the node's asyncio tasks (driver, peer links, client
connections), its ticks and timeouts, its persist-then-send order, the client protocol's frames, and
`DiskStorage`/`WriteAheadLog` with their recovery. What is simulated is what lies outside a process:
time and the network (`bridge.dst.net.SimLoop`) and the disk (`bridge.dst.disk.SimDisk`, which loses
unsynced data in a power failure, tears writes and fails with ENOSPC/EIO on a chosen call). One seed
fixes every choice, so a schedule replays exactly (`run_schedule(schedule)`).

A `Schedule` is a seed (network latencies, disk latencies, election timers, which unsynced data a
power failure keeps) and a list of `Step`s, each after a pause of virtual time: a client `put` or
`get` (over the client protocol, a fresh connection per request, following leader hints, retrying
with the same request id), a process `crash` (the page cache survives), a `power` failure of one
machine, an `outage` (every machine loses power, and comes back `arg` x 50 ms later), a `restart`,
`isolate` (one machine cut off from the others) and `heal`, and a disk `fault` (the `arg`-th
write-like call of a machine fails with ENOSPC or EIO: the node must stop, fail-stop). After the last
step everything is healed and restarted, and a final write must commit.

Checked, and reported as `Outcome.violations` (the first of each kind, with the virtual time):

- acknowledged writes: the entry a put was acknowledged with carries that put's value and request
  id; every leader elected in a later generation than the one that acknowledged it holds it at its
  index (checked the moment the leader is elected); it is in the committed log at the end;
- reads: two reads of one index agree; every later leader holds a read entry; the final committed
  log has it (ReadNeverTruncated in the clients' sense);
- the model's catalogue (`properties.catalogue`, plus `AckedWriteNeverLost` on the acknowledged
  entries) on a view of the cluster (a live node: its replica; a crashed one: what its disk
  recovers to), each time a leader is elected, after every step and at the end;
- no two leaders of one generation, ever; a crashed node restarts from whatever the crash left (a
  refused recovery is a violation); the cluster commits a write once everything is healed.

`Outcome.witnesses` counts what the run exercised (data lost in a crash, torn writes, injected
ENOSPC and EIO, leader changes, truncations, torn tails recovered ...) so a test can assert that the
schedules really did the things the checks are meant to survive.

Planted bugs (`PLANTS`) are the runtime with one promise broken; tests assert the simulation finds a
schedule that catches each.

The parts: `schedule.py` (`Step`, `Schedule`, `Outcome`, the `schedules` strategy and `shrink`),
`simulation.py` (the cluster of nodes, its client and its checks), `plants.py` (`PLANTS`), `run.py`
(`run_schedule`, `find_failing`), `net.py` and `disk.py` (the simulated world), and the other systems'
simulations (`kafka.py`, `bookkeeper.py`).
"""

from hwm.bridge.dst.plants import PLANTS
from hwm.bridge.dst.run import find_failing, run_schedule
from hwm.bridge.dst.schedule import ACTIONS, Outcome, Schedule, Step, schedules, shrink
from hwm.bridge.dst.simulation import DISKS

__all__ = ["ACTIONS", "DISKS", "Outcome", "PLANTS", "Schedule", "Step", "find_failing", "run_schedule", "schedules",
           "shrink"]
