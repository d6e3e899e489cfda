"""Running schedules: one (`run_schedule`, on the system its protocol names), or a search for one
that fails (`find_failing`)."""

from __future__ import annotations

import logging
import random

from hwm.bridge.dst.schedule import Outcome, Schedule, schedules, shrink
from hwm.bridge.dst.simulation import DISKS, _Simulation, shut_down
from hwm.properties.protocol import RAFT, Protocol


def run_schedule(schedule: Schedule, plant: str | None = None, first_violation: bool = False,
                 protocol: Protocol = RAFT, disk: str = "prefix", clients: int = 1) -> Outcome:
    """Run one schedule on a fresh simulated cluster; deterministic in `schedule` (and `plant`).
    With `first_violation`, stop at the first violation (a search needs no more). `protocol`: the
    raft preset (default), ZAB's (`properties.protocol.ZAB`) or Kafka's (brokers and their
    controller: `bridge.dst.kafka`). `disk`: "prefix" (`SimDisk`: a power failure keeps a prefix of
    each file's unsynced writes) or "reordering" (`ReorderingDisk`: any subset of its unsynced pages,
    torn at sectors). `clients`: how many client sessions put concurrently (a put step's `arg`
    picks one); every run checks that no session's request is in the committed log twice."""
    if protocol.system not in ("raft", "zab", "kafka"):
        raise ValueError(f"protocol: the simulation runs raft, zab and kafka nodes, not {protocol.system}")
    if disk not in DISKS:
        raise ValueError(f"disk: {disk!r} is not one of {', '.join(DISKS)}")
    if type(clients) is not int or not 1 <= clients <= 8:
        raise ValueError(f"clients: expected an int in 1..8, got {clients!r}")
    if protocol.system == "kafka":
        from hwm.bridge.dst.kafka import KafkaSimulation

        simulation = KafkaSimulation(schedule, plant, first_violation, protocol, disk, clients)
    else:
        simulation = _Simulation(schedule, plant, first_violation, protocol, disk, clients)
    loop = simulation.loop
    saved_random = random.getstate()
    random.seed(schedule.seed)  # the runtime's reconnect jitter uses the global generator
    node_log = logging.getLogger("hwm.node")
    controller_log = logging.getLogger("hwm.controller")
    disabled, node_log.disabled = node_log.disabled, True
    controller_disabled, controller_log.disabled = controller_log.disabled, True
    try:
        loop.run_until_complete(simulation.main())
    except RuntimeError:
        if not (first_violation and simulation.outcome.violations):
            raise  # not the stop at the first violation
    finally:
        shut_down(loop)
        random.setstate(saved_random)
        node_log.disabled = disabled
        controller_log.disabled = controller_disabled
    for disk in simulation.disks.values():
        simulation.outcome.witnesses.update(disk.stats)
    return simulation.outcome


def find_failing(plant: str | None, examples: int = 1000, max_steps: int = 10) -> Schedule | None:
    """The first of `examples` derandomized schedules on which the runtime (with `plant`) violates
    a check, shrunk; None if none does."""
    from hypothesis import HealthCheck, Phase, given, settings

    class Found(Exception):
        def __init__(self, schedule: Schedule):
            self.schedule = schedule

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(schedules(max_steps))
    def search(schedule: Schedule) -> None:
        if run_schedule(schedule, plant, first_violation=True).violations:
            raise Found(schedule)

    try:
        search()
    except Found as found:
        return shrink(found.schedule, lambda s: bool(run_schedule(s, plant, first_violation=True).violations))
    return None
