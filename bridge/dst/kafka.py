"""Kafka under the deterministic simulation: three brokers (`impl.runtime.Node` running
`impl.kafka.KafkaReplica`) and their controller (`impl.controller.ControllerNode`), unmodified, each
on a machine of its own with its own simulated disk.

Everything `bridge.dst` does to the brokers it does here (crashes, power failures, outages,
partitions, ENOSPC and EIO, crashes in the middle of a persist), with the same checks. What is added
is the controller's machine, `controller`, which a step names with `server` 3
(`kafka_schedules()` draws it):

- `crash` / `power`: the controller's process dies (with `power`, its page cache too); with an odd
  `arg`, not at once but *inside* a system call of its next save of the partition-state file (the
  temporary file's open, write, fsync, the rename or the directory's fsync): that is where "decided,
  sent, not yet saved" would show. It restarts `arg` x 50 ms later, from what its disk kept;
- `fault`: the `arg`-th write-like call of its disk fails with ENOSPC or EIO: it must stop
  (fail-stop) rather than send a decision it could not save; it is restarted at the next `restart`
  step naming it, or at the end;
- `isolate`: the controller is cut off from every broker (its sessions end: it sees every broker
  fail, and elects nobody); `outage` takes the controller's power too;
- `restart`: a stopped controller starts.

Checked on top of `bridge.dst`'s checks: the controller restarts from whatever its disk kept (a
refused partition-state file is a violation); its leader epochs never repeat with another leader
(one leader per generation, checked on every broker that becomes leader). Witnesses: controller
crashes, restarts, crashes inside a save, fail-stops, and the disk's own counts.

`PLANTS` adds the controller that sends its decision before saving it (`controller-sends-first`).
"""

from __future__ import annotations

import asyncio
import contextvars
import errno

from hwm.bridge.dst import SERVERS, TICK_SECONDS, Schedule, Step, _Died, _Simulation, schedules
from hwm.bridge.dst.net import MACHINE
from hwm.impl.controller import ControllerConfig, ControllerNode
from hwm.impl.kafka import CONTROLLER
from hwm.impl.runtime import NodeError

__all__ = ["CONTROLLER_STEP", "CONTROLLER_PLANTS", "kafka_schedules"]

CONTROLLER_STEP = 3  # a step's `server` that names the controller
CONTROLLER_ADDRESS = ("10.0.0.9", 7000)
CONTROLLER_DATA = "/data/controller"
STARTUP_TICKS = 10  # the controller waits this long for every broker before its first election


class _SendsBeforeSavingController(ControllerNode):
    """Planted bug: the controller sends what it decided, then saves the partition state."""

    def _publish(self) -> None:
        for broker, message in self.controller.ready():
            link = self._links.get(broker)
            if link is not None:
                link.send(message)
        try:
            self._save()
        except OSError as error:
            self.failure = error
            asyncio.get_running_loop().create_task(self.stop())


CONTROLLER_PLANTS: dict[str | None, type[ControllerNode]] = {
    None: ControllerNode,
    "controller-sends-first": _SendsBeforeSavingController,
}


class KafkaSimulation(_Simulation):
    def __init__(self, schedule: Schedule, plant: str | None, first_violation: bool, protocol, disk: str,
                 clients: int = 1):
        controller_plant = plant if plant in CONTROLLER_PLANTS else None
        super().__init__(schedule, None if controller_plant else plant, first_violation, protocol, disk, clients)
        self.controller_class = CONTROLLER_PLANTS[controller_plant]
        self.disks[CONTROLLER] = self.make_disk(len(SERVERS))
        self.controller: ControllerNode | None = None
        self.controller_starts = 0
        self.controller_armed: bool | None = None  # power loss, for a crash inside its next save
        self.controller_died_in_a_call = 0  # the disk's count of crashes inside a call, last seen

    def node_options(self) -> dict:
        return {"controller": CONTROLLER_ADDRESS}

    # ------------------------------------------------------------------ the controller's machine
    def start_controller(self) -> None:
        if self.controller is not None:
            return
        self.controller_starts += 1
        config = ControllerConfig(CONTROLLER_ADDRESS, dict(self.addresses), CONTROLLER_DATA, self.protocol,
                                  tick_seconds=TICK_SECONDS, startup_ticks=STARTUP_TICKS)
        node = self.controller_class(config, fs=self.disks[CONTROLLER])
        self.controller = node
        context = contextvars.copy_context()
        context.run(MACHINE.set, CONTROLLER)
        self.loop.create_task(self._boot_controller(node), context=context)
        self.event("start controller")

    async def _boot_controller(self, node: ControllerNode) -> None:
        try:
            await node.start()
        except NodeError as error:
            if "partition" in str(error) or "cannot read" in str(error):
                self.violation(f"the controller cannot restart from what its disk kept: {error}")
            self.event(f"controller failed to start: {error}")
            self.stop_controller(power_loss=False, crash=False)
            return
        except _Died:
            self.stop_controller(power_loss=False)
            return
        if self.controller_starts > 1:
            self.outcome.witnesses["controller restarts"] += 1

    def stop_controller(self, power_loss: bool, crash: bool = True) -> None:
        if self.controller is None:
            return
        self.controller = None
        if crash:
            self.outcome.witnesses["controller crashes"] += 1
        self.loop.crash(CONTROLLER)  # it has no disk jobs: its saves are synchronous
        self.disks[CONTROLLER].crash(power_loss)
        self.disks[CONTROLLER].inject(None)
        self.controller_armed = None
        self.event(f"down controller power_loss={power_loss}")

    def _watch(self) -> None:
        super()._watch()
        node = self.controller
        if node is None:
            return
        died = self.disks[CONTROLLER].stats["crashes inside a system call"]
        if died != self.controller_died_in_a_call:
            # It died inside a call of its save: nothing of it runs after that.
            self.controller_died_in_a_call = died
            self.outcome.witnesses["controller crashes inside a save"] += 1
            self.stop_controller(power_loss=bool(self.controller_armed))
        elif node.failure is not None:
            self.outcome.witnesses["controller fail-stop after a disk error"] += 1
            self.stop_controller(power_loss=False, crash=False)

    # ------------------------------------------------------------------ the schedule
    async def main(self) -> None:
        self.start_controller()
        await super().main()

    async def take_step(self, number: int, step: Step, clients: list[asyncio.Task]) -> None:
        action = step.action
        if action == "outage":
            self.stop_controller(power_loss=True)
            await super().take_step(number, step, clients)
            self.start_controller()
        elif step.server != CONTROLLER_STEP or action in ("put", "get", "heal"):
            await super().take_step(number, step, clients)
        elif action in ("crash", "power"):
            if self.controller is None:
                return
            if step.arg % 2:  # inside a system call of its next save
                self.controller_armed = action == "power"
                self.disks[CONTROLLER].inject(self.rng.randint(1, 5), _Died())
                return
            self.stop_controller(power_loss=action == "power")
            await asyncio.sleep(0.05 * (1 + step.arg))
            self.start_controller()
        elif action == "restart":
            self.start_controller()
        elif action == "isolate":
            for broker in SERVERS:
                self.loop.network.partition(CONTROLLER, broker)
            self.outcome.witnesses["controller partitions"] += 1
        elif action == "fault":
            if self.controller is not None:
                error = errno.ENOSPC if step.arg % 2 == 0 else errno.EIO
                self.disks[CONTROLLER].inject(1 + step.arg // 2, error)

    async def settle(self, clients: list[asyncio.Task]) -> None:
        if self.controller_armed is not None:  # no save came: crash it now
            self.stop_controller(self.controller_armed)
        self.disks[CONTROLLER].inject(None)
        self.start_controller()
        await super().settle(clients)


def kafka_schedules(max_steps: int = 10, max_pause_ms: int = 200):
    """Hypothesis strategy: `bridge.dst.schedules()` whose steps may also name the controller
    (`server` 3), and whose crash step is a broker's or the controller's."""
    return schedules(max_steps, max_pause_ms, machines=CONTROLLER_STEP + 1)
